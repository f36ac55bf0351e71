//! `InstanceTypesAvailable`: every NodePool of this EC2NodeClass allows some instance type that
//! EC2 offers in a zone of the class's subnets, with an architecture of the class's AMIs. When
//! none is left, Karpenter launches nothing for the NodePool and says so only in a
//! `NoCompatibleInstanceTypes` Event per Pod (aws/karpenter-provider-aws #6884, #7713, #8535).
//! Pure: no IO.
//!
//! The verdict is built to never be stricter than Karpenter: each instance type's labels are
//! derived as Karpenter derives them (`pkg/providers/instancetype/types.go`
//! `computeRequirements`, including the labels it leaves absent for a name its pattern does not
//! fit), and wherever this check cannot derive a label (a key it does not model, a size EC2 left
//! out, an operator it does not know) the requirement lets the type through. The set it computes therefore holds every type Karpenter could pick, and more; only
//! when even that set is empty is the NodePool `False`.

use super::{Check, Context, Outcome, Why};
use crate::facts::{InstanceTypeCatalog, InstanceTypeFacts, Observed};
use karpenter_health_api::karpenter::{NodePool, Requirement};
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::BTreeSet;
use std::sync::Arc;

pub const ZONE: &str = "topology.kubernetes.io/zone";
pub const ARCH: &str = "kubernetes.io/arch";
pub const INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
pub const FAMILY: &str = "karpenter.k8s.aws/instance-family";
pub const CATEGORY: &str = "karpenter.k8s.aws/instance-category";
pub const GENERATION: &str = "karpenter.k8s.aws/instance-generation";
pub const SIZE: &str = "karpenter.k8s.aws/instance-size";
pub const CPU: &str = "karpenter.k8s.aws/instance-cpu";
pub const MEMORY: &str = "karpenter.k8s.aws/instance-memory";
use super::spot_ready::CAPACITY_TYPE;

/// The requirement keys this check derives a value for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Key {
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
    fn of(key: &str) -> Option<Self> {
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
fn admits(operator: &str, values: &[String], value: &str) -> bool {
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
fn values_of(t: &InstanceTypeFacts, key: Key) -> Option<Vec<String>> {
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
    fn keep(&mut self, key: Key, r: &Requirement) -> bool {
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

/// Every type offered in one of `zones`, with the capacity types it may be launched as: on
/// demand, spot unless EC2 says the type has no spot, and reserved (whether a reservation
/// exists is not read here, so it is never ruled out).
fn offered<'a>(catalog: &'a InstanceTypeCatalog, zones: &BTreeSet<String>) -> Vec<Candidate<'a>> {
    catalog
        .types
        .iter()
        .zip(0u32..)
        .filter_map(|(t, index)| {
            let in_zones: Vec<&str> = catalog
                .zones
                .get(&t.name)?
                .iter()
                .filter(|z| zones.contains(*z))
                .map(String::as_str)
                .collect();
            if in_zones.is_empty() {
                return None;
            }
            let spot = t.usage_classes.is_empty() || t.usage_classes.iter().any(|u| u == "spot");
            let mut capacity = vec!["on-demand", "reserved"];
            if spot {
                capacity.push("spot");
            }
            Some(Candidate {
                index,
                facts: t,
                zones: in_zones,
                capacity,
            })
        })
        .collect()
}

/// A NodePool's requirements as Karpenter applies them to instance types: its template labels
/// (each an `In` of one value) and then `spec.template.spec.requirements`, in order.
fn requirements_of(pool: &NodePool) -> Vec<Requirement> {
    let template = &pool.spec.template;
    let labels = template.metadata.labels.iter().map(|(k, v)| Requirement {
        key: k.clone(),
        operator: "In".into(),
        values: vec![v.clone()],
    });
    labels
        .chain(template.spec.requirements.iter().cloned())
        .collect()
}

/// A requirement as messages write it: `karpenter.k8s.aws/instance-family In [m9, m10]`.
fn show(r: &Requirement) -> String {
    if r.values.is_empty() {
        format!("{} {}", r.key, r.operator)
    } else {
        format!(
            "{} {} [{}]",
            r.key,
            r.operator,
            super::list_bounded(&r.values, 5)
        )
    }
}

/// What one NodePool leaves.
#[derive(Debug)]
enum Verdict<'a> {
    /// These types are left; requirements on these keys were not checked.
    Allows {
        left: Vec<Candidate<'a>>,
        unchecked: BTreeSet<String>,
    },
    /// The zone requirement admits no zone of the class's subnets.
    ZonesWithoutSubnets { requirement: String },
    /// This requirement left no type; `before` were left by the ones before it, and `alone` is
    /// whether it admits none of the offered types even by itself.
    Emptied {
        requirement: String,
        before: usize,
        alone: bool,
    },
    /// Types are left, but none of an architecture the AMIs are built for.
    NoneForAmis {
        archs: Vec<String>,
        left: Vec<String>,
    },
}

fn judge<'a>(
    requirements: &[Requirement],
    offered: &[Candidate<'a>],
    zones: &BTreeSet<String>,
    ami_archs: Option<&BTreeSet<String>>,
) -> Verdict<'a> {
    let mut left: Vec<Candidate<'a>> = offered.to_vec();
    let mut unchecked = BTreeSet::new();
    for r in requirements {
        let Some(key) = Key::of(&r.key) else {
            if r.key.starts_with("karpenter.k8s.aws/") || r.key.starts_with("topology.k8s.aws/") {
                unchecked.insert(r.key.clone());
            }
            continue;
        };
        let before = left.len();
        left.retain_mut(|c| c.keep(key, r));
        if !left.is_empty() {
            continue;
        }
        if key == Key::Zone && !zones.iter().any(|z| admits(&r.operator, &r.values, z)) {
            return Verdict::ZonesWithoutSubnets {
                requirement: show(r),
            };
        }
        let alone = !offered.iter().any(|c| c.clone().keep(key, r));
        return Verdict::Emptied {
            requirement: show(r),
            before,
            alone,
        };
    }
    if let Some(archs) = ami_archs {
        let fits = |c: &Candidate<'_>| match values_of(c.facts, Key::Arch) {
            None => true,
            Some(values) => values.iter().any(|v| archs.contains(v)),
        };
        if !left.iter().any(fits) {
            let left_archs: BTreeSet<String> = left
                .iter()
                .filter_map(|c| values_of(c.facts, Key::Arch))
                .flatten()
                .collect();
            return Verdict::NoneForAmis {
                archs: archs.iter().cloned().collect(),
                left: left_archs.into_iter().collect(),
            };
        }
        left.retain(fits);
    }
    Verdict::Allows { left, unchecked }
}

/// What one NodePool's requirements leave of the catalog, owned, so it can be kept in the
/// catalog's memo and shared by every class that asks the same question.
#[derive(Debug)]
pub enum Judged {
    /// EC2 offers no type at all in the zones (an emulator's or a partial answer).
    NothingOffered,
    /// These types are left (by index into the catalog's `types`, with the capacity types each
    /// may still be launched as); requirements on these keys were not checked.
    Allows {
        left: Vec<(u32, Vec<&'static str>)>,
        unchecked: BTreeSet<String>,
    },
    ZonesWithoutSubnets {
        requirement: String,
    },
    Emptied {
        requirement: String,
        before: usize,
        alone: bool,
    },
    NoneForAmis {
        archs: Vec<String>,
        left: Vec<String>,
    },
}

/// The NodePool's verdict on `catalog` in `zones` for AMIs of `ami_archs`, from the catalog's
/// memo when the same question was judged before (by this class or another).
fn judged(
    catalog: &InstanceTypeCatalog,
    pool: &NodePool,
    zones: &BTreeSet<String>,
    ami_archs: Option<&BTreeSet<String>>,
) -> Arc<Judged> {
    use std::hash::{Hash, Hasher};
    let requirements = requirements_of(pool);
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    for r in &requirements {
        (&r.key, &r.operator, &r.values).hash(&mut hasher);
    }
    (zones, ami_archs).hash(&mut hasher);
    catalog.judged.get_or_derive(hasher.finish(), || {
        let offered = offered(catalog, zones);
        if offered.is_empty() {
            return Judged::NothingOffered;
        }
        match judge(&requirements, &offered, zones, ami_archs) {
            Verdict::Allows { left, unchecked } => Judged::Allows {
                left: left.into_iter().map(|c| (c.index, c.capacity)).collect(),
                unchecked,
            },
            Verdict::ZonesWithoutSubnets { requirement } => {
                Judged::ZonesWithoutSubnets { requirement }
            }
            Verdict::Emptied {
                requirement,
                before,
                alone,
            } => Judged::Emptied {
                requirement,
                before,
                alone,
            },
            Verdict::NoneForAmis { archs, left } => Judged::NoneForAmis { archs, left },
        }
    })
}

/// The instance types a NodePool allows, read from its verdict in the catalog's memo.
pub(crate) struct Allowed<'a> {
    types: &'a [InstanceTypeFacts],
    verdict: Arc<Judged>,
}

impl Allowed<'_> {
    /// Each type with the capacity types it may be launched as.
    pub fn types(&self) -> Vec<(&InstanceTypeFacts, &[&'static str])> {
        match &*self.verdict {
            Judged::Allows { left, .. } => left
                .iter()
                .filter_map(|(i, capacity)| {
                    Some((self.types.get(*i as usize)?, capacity.as_slice()))
                })
                .collect(),
            _ => Vec::new(),
        }
    }

    /// The vCPUs of the smallest type; `None` when one of them does not say (it might be
    /// smaller) or there are none.
    pub fn smallest_vcpus(&self) -> Option<u32> {
        self.types()
            .iter()
            .map(|(t, _)| t.vcpus)
            .collect::<Option<Vec<u32>>>()
            .and_then(|v| v.into_iter().min())
    }
}

/// The instance types `pool` allows in the class's zones, for its AMIs, with the capacity types
/// each may still be launched as: a superset of what Karpenter could launch. `None` when that is
/// not known (no catalog, no subnet) or the NodePool allows none (`InstanceTypesAvailable` says
/// why).
pub(crate) fn allowed<'a>(ctx: &Context<'a>, pool: &NodePool) -> Option<Allowed<'a>> {
    let facts: &'a crate::facts::Facts = ctx.facts;
    let Some(Observed::Found(catalog)) = &facts.aws.instance_types else {
        return None;
    };
    let Observed::Found(subnets) = &facts.aws.subnets else {
        return None;
    };
    let zones: BTreeSet<String> = subnets
        .iter()
        .filter(|s| !s.zone.is_empty())
        .map(|s| s.zone.clone())
        .collect();
    let verdict = judged(catalog, pool, &zones, ami_architectures(ctx).as_ref());
    match &*verdict {
        Judged::Allows { left, .. } if !left.is_empty() => Some(Allowed {
            types: catalog.types.as_slice(),
            verdict,
        }),
        _ => None,
    }
}

/// The architectures the class's AMIs boot (`status.amis[].requirements` on
/// `kubernetes.io/arch`); `None` when Karpenter resolved no AMI or an AMI does not say.
fn ami_architectures(ctx: &Context) -> Option<BTreeSet<String>> {
    let amis = &ctx.facts.cluster.node_class.status.as_ref()?.amis;
    if amis.is_empty() {
        return None;
    }
    let mut archs = BTreeSet::new();
    for ami in amis {
        let arch = ami
            .requirements
            .iter()
            .find(|r| Key::of(&r.key) == Some(Key::Arch) && r.operator == "In")?;
        archs.extend(arch.values.iter().cloned());
    }
    Some(archs)
}

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::InstanceTypesAvailable, "instance-types");
    let pools = match &ctx.facts.cluster.node_pools {
        Observed::Found(pools) if !pools.is_empty() => pools,
        Observed::Found(_) | Observed::Absent => {
            return c.finish(
                Reason::InstanceTypesOffered,
                "No NodePool uses this EC2NodeClass.",
            );
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The NodePools of this EC2NodeClass", u));
            return c.finish(Reason::InstanceTypesOffered, "");
        }
    };
    let catalog = match &ctx.facts.aws.instance_types {
        Some(Observed::Found(catalog)) => Some(catalog),
        None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "The region's instance types have not been read yet.",
            ));
            None
        }
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved("The region's instance types", u));
            None
        }
        Some(Observed::Absent) => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "EC2 answered that the region has no instance types.",
            ));
            None
        }
    };
    let zones: Option<BTreeSet<String>> = match &ctx.facts.aws.subnets {
        Observed::Found(subnets) if subnets.iter().any(|s| !s.zone.is_empty()) => Some(
            subnets
                .iter()
                .filter(|s| !s.zone.is_empty())
                .map(|s| s.zone.clone())
                .collect(),
        ),
        Observed::Found(_) | Observed::Absent => {
            c.unknown(Why::new(
                Reason::NotObserved,
                "The EC2NodeClass selects no subnet (see SubnetsReady), so there is no zone to \
                 look for instance types in.",
            ));
            None
        }
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved("The subnets of this EC2NodeClass", u));
            None
        }
    };
    let (Some(catalog), Some(zones)) = (catalog, zones) else {
        return c.finish(Reason::InstanceTypesOffered, "");
    };
    let zones_text = super::list_bounded(&zones.iter().collect::<Vec<_>>(), 6);
    let ami_archs = ami_architectures(ctx);
    let mut pools: Vec<&NodePool> = pools.iter().collect();
    pools.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let mut allowed = Vec::new();
    let mut unchecked_keys = BTreeSet::new();
    for pool in pools {
        let name = pool.metadata.name.as_deref().unwrap_or_default();
        let subjects = || vec![ctx.node_class_subject(), SubjectRef::new("NodePool", name)];
        match &*judged(catalog, pool, &zones, ami_archs.as_ref()) {
            Judged::NothingOffered => {
                // No real region answers this for a zone it has: an emulator's or a partial
                // answer.
                c.unknown(Why::new(
                    Reason::NotObserved,
                    format!(
                        "EC2 listed no instance type offered in {zones_text}, which no region \
                         with these zones answers, so nothing is concluded."
                    ),
                ));
                return c.finish(Reason::InstanceTypesOffered, "");
            }
            Judged::Allows { left, unchecked } => {
                allowed.push(format!("{name}: {}", left.len()));
                unchecked_keys.extend(unchecked.iter().cloned());
            }
            Judged::ZonesWithoutSubnets { requirement } => c.fail(
                Reason::RequiredZonesWithoutSubnets,
                format!(
                    "NodePool {name} requires `{requirement}`, but the EC2NodeClass's subnets \
                     are only in {zones_text}, so no node of it can launch. Select a subnet in a \
                     required zone, or require a zone the subnets are in."
                ),
                subjects(),
            ),
            Judged::Emptied {
                requirement,
                before,
                alone,
            } => {
                let why = if *alone {
                    format!("no instance type EC2 offers in {zones_text} satisfies `{requirement}`")
                } else {
                    format!(
                        "`{requirement}` admits none of the {before} instance types offered in \
                         {zones_text} that its earlier requirements allow"
                    )
                };
                c.fail(
                    Reason::NoInstanceTypeMatchesRequirements,
                    format!(
                        "NodePool {name} can launch nothing: {why}. Widen or correct that \
                         requirement."
                    ),
                    subjects(),
                );
            }
            Judged::NoneForAmis { archs, left } => c.fail(
                Reason::NoInstanceTypeForAmiArchitecture,
                format!(
                    "NodePool {name} allows only {} instance types in {zones_text}, but the \
                     EC2NodeClass's AMIs are built for {}. Allow that architecture in the \
                     NodePool, or select AMIs for the one it asks for.",
                    left.join(", "),
                    archs.join(", ")
                ),
                subjects(),
            ),
        }
    }
    let mut ok = format!(
        "Every NodePool allows instance types offered in {zones_text} (types per NodePool: {}).",
        super::list_bounded(&allowed, 5)
    );
    if !unchecked_keys.is_empty() {
        let keys: Vec<String> = unchecked_keys.into_iter().collect();
        ok.push_str(&format!(
            " Requirements on {} were not checked.",
            super::list_bounded(&keys, 3)
        ));
    }
    c.finish(Reason::InstanceTypesOffered, ok)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(key: &str, op: &str, values: &[&str]) -> Requirement {
        Requirement {
            key: key.into(),
            operator: op.into(),
            values: values.iter().map(|v| (*v).into()).collect(),
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
