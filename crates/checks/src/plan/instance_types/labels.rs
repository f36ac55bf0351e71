//! The labels Karpenter gives an instance type, derived from EC2's description of it as
//! `computeRequirements` derives them, and how a NodePool requirement narrows a candidate type by
//! them. Pure: no IO.

use crate::facts::InstanceTypeFacts;
use crate::plan::capacity::CAPACITY_TYPE;
use karpenter_health_api::karpenter::Requirement;

pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const ARCH: &str = "kubernetes.io/arch";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const MEMORY: &str = "karpenter.k8s.aws/instance-memory";

/// The requirement keys this check derives a value for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Key {
    InstanceType,
    Arch,
    Family,
    Category,
    Generation,
    Size,
    Cpu,
    Memory,
    Zone,
    CapacityType,
}

impl Key {
    /// The modelled key of a requirement (the deprecated `beta.` and `failure-domain.` aliases
    /// Karpenter normalises too: `sigs.k8s.io/karpenter` `NormalizedLabels`).
    pub(super) fn of(key: &str) -> Option<Self> {
        Some(match key {
            INSTANCE_TYPE | "beta.kubernetes.io/instance-type" => Key::InstanceType,
            ARCH | "beta.kubernetes.io/arch" => Key::Arch,
            FAMILY => Key::Family,
            CATEGORY => Key::Category,
            GENERATION => Key::Generation,
            SIZE => Key::Size,
            CPU => Key::Cpu,
            MEMORY => Key::Memory,
            ZONE | "failure-domain.beta.kubernetes.io/zone" => Key::Zone,
            CAPACITY_TYPE => Key::CapacityType,
            _ => return None,
        })
    }
}

/// Whether `value` satisfies `operator values`. What cannot be decided (an unknown operator, a
/// bound that is not a number) lets the value through.
pub(crate) fn admits(operator: &str, values: &[String], value: &str) -> bool {
    let bound = || values.first().and_then(|b| b.parse::<i64>().ok());
    let number = value.parse::<i64>().ok();
    let compare = |keep: fn(i64, i64) -> bool| match (number, bound()) {
        (Some(v), Some(b)) => keep(v, b),
        _ => true,
    };
    match operator {
        "In" => values.iter().any(|v| v == value),
        "NotIn" => !values.iter().any(|v| v == value),
        "Exists" => true,
        "DoesNotExist" => false,
        "Gt" => compare(|v, b| v > b),
        "Lt" => compare(|v, b| v < b),
        "Gte" => compare(|v, b| v >= b),
        "Lte" => compare(|v, b| v <= b),
        _ => true,
    }
}

/// Karpenter's architecture label for an EC2 architecture name (`x86_64` is `amd64`).
fn arch_label(ec2: &str) -> Option<&'static str> {
    match ec2 {
        "x86_64" => Some("amd64"),
        "arm64" => Some("arm64"),
        _ => None,
    }
}

/// Category and generation as Karpenter's `instanceTypeScheme`
/// (`(^[a-z]+)(\-[0-9]+tb)?([0-9]+).*\.`) reads them from the type's name: `c7gn.large` is
/// category `c`, generation `7`; `u-6tb1.metal` is `u`, `1`.
pub(crate) fn category_and_generation(name: &str) -> Option<(&str, &str)> {
    let letters = name.bytes().take_while(u8::is_ascii_lowercase).count();
    if letters == 0 {
        return None;
    }
    let mut rest = &name[letters..];
    // The optional `-<digits>tb` of the high-memory types.
    if let Some(after) = rest.strip_prefix('-') {
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0
            && let Some(tail) = after[digits..].strip_prefix("tb")
        {
            rest = tail;
        }
    }
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 || !rest[digits..].contains('.') {
        return None;
    }
    Some((&name[..letters], &rest[..digits]))
}

/// What a type's label for one key is, as far as this check can tell.
enum Label {
    /// Its values (several only for the architecture of a type EC2 lists with more than one).
    Values(Vec<String>),
    /// Karpenter defines no value: it starts the category, generation, family and size labels as
    /// `DoesNotExist` and fills them from the type's name (`computeRequirements`), so a name its
    /// pattern does not fit (`mac-m4.metal` has no category) leaves the label absent.
    Absent,
    /// Not derivable here: every requirement on it lets the type through.
    Unknown,
}

/// Whether an absent label satisfies `operator`: only `NotIn` and `DoesNotExist` do (and an
/// operator this check does not know, undecided).
fn admits_absent(operator: &str) -> bool {
    !matches!(operator, "In" | "Exists" | "Gt" | "Lt" | "Gte" | "Lte")
}

fn label_of(t: &InstanceTypeFacts, key: Key) -> Label {
    match key {
        Key::Category | Key::Generation | Key::Family | Key::Size => {
            values_of(t, key).map_or(Label::Absent, Label::Values)
        }
        _ => values_of(t, key).map_or(Label::Unknown, Label::Values),
    }
}

/// The values a type has for `key`; `None` when it has none this check can derive (see
/// [`label_of`] for what that means per key).
pub(super) fn values_of(t: &InstanceTypeFacts, key: Key) -> Option<Vec<String>> {
    let split = || {
        let mut parts = t.name.split('.');
        match (parts.next(), parts.next(), parts.next()) {
            (Some(family), Some(size), None) => Some((family, size)),
            _ => None,
        }
    };
    Some(match key {
        Key::InstanceType => vec![t.name.clone()],
        Key::Arch => {
            let archs: Vec<String> = t
                .architectures
                .iter()
                .filter_map(|a| arch_label(a))
                .map(str::to_owned)
                .collect();
            if archs.is_empty() {
                return None;
            }
            archs
        }
        Key::Family => vec![split()?.0.to_owned()],
        Key::Size => vec![split()?.1.to_owned()],
        Key::Category => vec![category_and_generation(&t.name)?.0.to_owned()],
        Key::Generation => vec![category_and_generation(&t.name)?.1.to_owned()],
        Key::Cpu => vec![t.vcpus?.to_string()],
        Key::Memory => vec![t.memory_mib?.to_string()],
        Key::Zone | Key::CapacityType => return None,
    })
}

/// The keys Karpenter's instance types carry (aws/karpenter-provider-aws
/// `pkg/providers/instancetype/types.go` `computeRequirements`) whose values this model does not
/// derive: a requirement on one cannot be judged against a type.
const CARRIED_NOT_DERIVED: [&str; 25] = [
    "topology.k8s.aws/zone-id",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/windows-build",
    "karpenter.k8s.aws/instance-cpu-manufacturer",
    "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
    "karpenter.k8s.aws/instance-ebs-bandwidth",
    "karpenter.k8s.aws/instance-network-bandwidth",
    "karpenter.k8s.aws/instance-capability-flex",
    "karpenter.k8s.aws/instance-local-nvme",
    "karpenter.k8s.aws/instance-gpu-name",
    "karpenter.k8s.aws/instance-gpu-manufacturer",
    "karpenter.k8s.aws/instance-gpu-count",
    "karpenter.k8s.aws/instance-gpu-memory",
    "karpenter.k8s.aws/instance-accelerator-name",
    "karpenter.k8s.aws/instance-accelerator-manufacturer",
    "karpenter.k8s.aws/instance-accelerator-count",
    "karpenter.k8s.aws/instance-hypervisor",
    "karpenter.k8s.aws/instance-encryption-in-transit-supported",
    "karpenter.k8s.aws/instance-tenancy",
    "karpenter.k8s.aws/capacity-reservation-id",
    "karpenter.k8s.aws/capacity-reservation-type",
    "karpenter.k8s.aws/capacity-reservation-interruptible",
    "karpenter.k8s.aws/placement-group-id",
    "karpenter.k8s.aws/placement-group-partition",
    // The capacity types this model keeps for a type are a superset (reserved where it does not
    // know the class's reservations, spot where EC2 did not say), not the type's own.
    "karpenter.sh/capacity-type",
];

/// Whether `wanted` intersects the requirements Karpenter gives instance type `t` offered in
/// `zones` (`Requirements.Intersects`, which compares only the keys both have):
/// `None` when `wanted` constrains a key the type carries with values this model does not derive.
/// The OS is `linux`, or `windows` for a Windows AMI family (then only on amd64: `getOS`).
pub(crate) fn type_intersects(
    t: &InstanceTypeFacts,
    zones: &[&str],
    windows: bool,
    wanted: &crate::requirements::Requirements,
) -> Option<bool> {
    use crate::requirements::{Requirement, Requirements};
    if wanted.keys().any(|k| CARRIED_NOT_DERIVED.contains(&k)) {
        return None;
    }
    let mut its = Requirements::default();
    let mut put = |key: &str, values: Option<Vec<String>>| match values {
        Some(v) => its.add(key, Requirement::any_of(v.iter().map(String::as_str))),
        None => its.add(key, Requirement::any_of([])),
    };
    // Karpenter starts these absent (`DoesNotExist`) and fills them from the name.
    for (key, k) in [
        (INSTANCE_TYPE, Key::InstanceType),
        (FAMILY, Key::Family),
        (CATEGORY, Key::Category),
        (GENERATION, Key::Generation),
        (SIZE, Key::Size),
    ] {
        put(key, values_of(t, k));
    }
    // EC2's figures; one it left out is not known here.
    for (key, k) in [(CPU, Key::Cpu), (MEMORY, Key::Memory)] {
        match values_of(t, k) {
            Some(v) => put(key, Some(v)),
            None if wanted.has(key) => return None,
            None => {}
        }
    }
    // `getArchitecture`: the first architecture Karpenter knows.
    let arch = values_of(t, Key::Arch).and_then(|a| a.into_iter().next());
    if arch.is_none() && wanted.has(ARCH) {
        return None;
    }
    let os = match (windows, arch.as_deref()) {
        (false, _) => vec!["linux".to_owned()],
        (true, Some("amd64")) => vec!["windows".to_owned()],
        (true, _) => Vec::new(),
    };
    put(ARCH, arch.map(|a| vec![a]));
    put("kubernetes.io/os", Some(os));
    put(ZONE, Some(zones.iter().map(|z| (*z).to_owned()).collect()));
    Some(its.intersects(wanted).is_ok())
}

/// One instance type that may still be picked, with the zones and capacity types still open
/// for it.
#[derive(Clone, Debug)]
pub(crate) struct Candidate<'a> {
    /// Its place in the catalog's `types`.
    pub index: u32,
    pub facts: &'a InstanceTypeFacts,
    pub zones: Vec<&'a str>,
    pub capacity: Vec<&'static str>,
}

impl Candidate<'_> {
    /// Applies one modelled requirement; `false` when nothing of the type is left.
    pub(super) fn keep(&mut self, key: Key, r: &Requirement) -> bool {
        match key {
            Key::Zone => {
                self.zones.retain(|z| admits(&r.operator, &r.values, z));
                !self.zones.is_empty()
            }
            Key::CapacityType => {
                self.capacity.retain(|c| admits(&r.operator, &r.values, c));
                !self.capacity.is_empty()
            }
            _ => match label_of(self.facts, key) {
                Label::Unknown => true,
                Label::Absent => admits_absent(&r.operator),
                Label::Values(values) => values.iter().any(|v| admits(&r.operator, &r.values, v)),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| (*v).into()).collect(),
            min_values: None,
        }
    }

    #[test]
    fn category_and_generation_are_read_as_karpenter_reads_them() {
        assert_eq!(category_and_generation("c7gn.large"), Some(("c", "7")));
        assert_eq!(category_and_generation("m5.xlarge"), Some(("m", "5")));
        assert_eq!(category_and_generation("u-6tb1.metal"), Some(("u", "1")));
        assert_eq!(
            category_and_generation("mac2-m2pro.metal"),
            Some(("mac", "2"))
        );
        assert_eq!(category_and_generation("x2iedn.32xlarge"), Some(("x", "2")));
        // No digits after the letters, or no dot: the regex does not match, no label.
        assert_eq!(category_and_generation("abc.large"), None);
        assert_eq!(category_and_generation("m5"), None);
    }

    #[test]
    fn operators_let_through_what_they_cannot_decide() {
        let v = |s: &[&str]| s.iter().map(|v| (*v).to_owned()).collect::<Vec<_>>();
        assert!(admits("In", &v(&["a", "b"]), "b"));
        assert!(!admits("In", &v(&["a"]), "b"));
        assert!(admits("NotIn", &v(&["a"]), "b"));
        assert!(!admits("DoesNotExist", &[], "b"));
        assert!(admits("Gt", &v(&["4"]), "8"));
        assert!(!admits("Gt", &v(&["8"]), "8"));
        assert!(admits("Gte", &v(&["8"]), "8"));
        assert!(!admits("Lt", &v(&["2"]), "8"));
        // Not a number, or an operator this check does not know: undecided, so let through.
        assert!(admits("Gt", &v(&["x"]), "8"));
        assert!(admits("Lt", &v(&["4"]), "large"));
        assert!(admits("Near", &v(&["a"]), "b"));
    }

    #[test]
    fn a_name_karpenter_reads_no_category_from_has_no_category_label() {
        let t = InstanceTypeFacts {
            name: "mac-m4.metal".into(),
            ..Default::default()
        };
        let mut c = Candidate {
            index: 0,
            facts: &t,
            zones: vec!["z"],
            capacity: vec!["on-demand"],
        };
        assert!(!c.keep(Key::Category, &req(CATEGORY, "In", &["m"])));
        assert!(!c.keep(Key::Category, &req(CATEGORY, "Exists", &[])));
        assert!(!c.keep(Key::Generation, &req(GENERATION, "Gt", &["1"])));
        assert!(c.keep(Key::Category, &req(CATEGORY, "NotIn", &["m"])));
        assert!(c.keep(Key::Category, &req(CATEGORY, "DoesNotExist", &[])));
        // Family and size come from the dot: mac-m4 and metal.
        assert!(c.keep(Key::Family, &req(FAMILY, "In", &["mac-m4"])));
    }

    #[test]
    fn a_requirement_on_a_key_not_modelled_never_removes_a_type() {
        let t = InstanceTypeFacts {
            name: "m5.large".into(),
            ..Default::default()
        };
        let mut c = Candidate {
            index: 0,
            facts: &t,
            zones: vec!["z"],
            capacity: vec!["on-demand"],
        };
        // No vCPU count in the answer: a bound on it cannot be checked.
        assert!(c.keep(Key::Cpu, &req(CPU, "Gt", &["64"])));
        assert!(!c.keep(Key::Family, &req(FAMILY, "In", &["c5"])));
        assert!(c.keep(Key::Arch, &req(ARCH, "In", &["arm64"])));
    }
}
