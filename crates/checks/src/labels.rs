//! Which label keys the installed Karpenter rejects, per version. Pure: no IO.
//!
//! Sources: kubernetes-sigs/karpenter `pkg/apis/v1/labels.go` and the generated CEL rules of
//! `karpenter.sh_nodepools.yaml`, before and after kubernetes-sigs/karpenter PR #2586 (first in
//! v1.9.0), plus the AWS provider's `karpenter.k8s.aws` allow-list.

use crate::version;
use semver::Version;

/// Where a key is used: the CEL rules for `template.metadata.labels` and for requirement keys
/// differ in a couple of entries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum KeyContext {
    /// A NodePool's `spec.template.metadata.labels`.
    NodePoolLabel,
    /// A requirement key: NodePool requirements, and Pod nodeSelector/affinity keys, which
    /// Karpenter copies into NodeClaim requirements.
    Requirement,
}

/// The two rule sets Karpenter has shipped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LabelRules {
    /// Core ≤ v1.8.x: `kubernetes.io` and `k8s.io` restricted too.
    UpTo1_8,
    /// Core ≥ v1.9.0: only `karpenter.sh`, `karpenter.k8s.aws` and `kubernetes.io/hostname`.
    From1_9,
}

impl LabelRules {
    pub fn for_version(v: &Version) -> Self {
        if version::at_least(v, version::RELAXED_LABEL_DOMAINS) {
            Self::From1_9
        } else {
            Self::UpTo1_8
        }
    }

    /// The rule set a NodePool CRD enforces, from its validation rules (the CEL
    /// `x-kubernetes-validations` that reject label domains), or `None` when the CRD carries no
    /// such rules: API servers before 1.25 drop them, and then only the version can tell.
    /// `helm upgrade` does not upgrade Karpenter's CRDs, so a 1.9 controller can run with 1.8
    /// CRDs that still reject `kubernetes.io`: the installed CRD is what decides.
    pub fn from_crd(crd: &serde_json::Value) -> Option<Self> {
        let mut messages = Vec::new();
        collect_validation_messages(crd, &mut messages);
        let restricts_domains = messages.iter().any(|m| m.starts_with("label domain "));
        if !restricts_domains {
            return None;
        }
        let kubernetes_io = messages
            .iter()
            .any(|m| m.contains(r#"label domain "kubernetes.io" is restricted"#));
        Some(if kubernetes_io {
            Self::UpTo1_8
        } else {
            Self::From1_9
        })
    }

    pub fn describe(self) -> &'static str {
        match self {
            Self::UpTo1_8 => "Karpenter up to v1.8",
            Self::From1_9 => "Karpenter v1.9 and later",
        }
    }

    /// Why every one of `candidates` rejects `key` in `context` (the first one's words); `None`
    /// if any accepts it or there is no candidate. With the rule set open (version unknown),
    /// only a key every rule set rejects is proven rejected.
    pub fn rejected_by_all(
        candidates: &[LabelRules],
        key: &str,
        context: KeyContext,
    ) -> Option<&'static str> {
        let (first, rest) = candidates.split_first()?;
        let why = first.restriction(key, context)?;
        rest.iter()
            .all(|rules| rules.restriction(key, context).is_some())
            .then_some(why)
    }

    /// Why Karpenter rejects `key` in `context`, in Karpenter's own words; `None` if it is allowed.
    pub fn restriction(self, key: &str, context: KeyContext) -> Option<&'static str> {
        let domain = match key.split_once('/') {
            Some((domain, _)) => domain,
            // Unprefixed keys (`role`, `team`) belong to no domain and are never restricted.
            None => return None,
        };
        // Both rule sets: `karpenter.sh/nodepool` is set by Karpenter and may not be a template
        // label; the CEL rule `label "karpenter.sh/nodepool" is restricted`.
        if context == KeyContext::NodePoolLabel && key == "karpenter.sh/nodepool" {
            return Some("label \"karpenter.sh/nodepool\" is restricted");
        }
        match self {
            Self::From1_9 => restriction_from_1_9(key, domain),
            Self::UpTo1_8 => restriction_up_to_1_8(key, domain, context),
        }
    }
}

/// Core `WellKnownLabels` (core ≥ v1.9 `labels.go`), plus the AWS provider's
/// `topology.k8s.aws/zone-id`; the `karpenter.k8s.aws/*` ones are in
/// [`KARPENTER_K8S_AWS_ALLOWED`].
const WELL_KNOWN: &[&str] = &[
    "karpenter.sh/nodepool",
    "karpenter.sh/capacity-type",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "node.kubernetes.io/windows-build",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "topology.k8s.aws/zone-id",
];

/// The `karpenter.k8s.aws` allow-list (AWS `pkg/apis/crds/karpenter.sh_nodepools.yaml`, generated
/// by `hack/validation/labels.sh` and `requirements.sh`), without the domain prefix.
const KARPENTER_K8S_AWS_ALLOWED: &[&str] = &[
    "instance-tenancy",
    "capacity-reservation-type",
    "capacity-reservation-id",
    "capacity-reservation-interruptible",
    "ec2nodeclass",
    "instance-encryption-in-transit-supported",
    "nitro-sandbox",
    "instance-category",
    "instance-hypervisor",
    "instance-family",
    "instance-generation",
    "instance-local-nvme",
    "instance-size",
    "instance-cpu",
    "instance-cpu-manufacturer",
    "instance-cpu-sustained-clock-speed-mhz",
    "instance-memory",
    "instance-ebs-bandwidth",
    "instance-network-bandwidth",
    "instance-gpu-name",
    "instance-gpu-manufacturer",
    "instance-gpu-count",
    "instance-gpu-memory",
    "instance-accelerator-name",
    "instance-accelerator-manufacturer",
    "instance-accelerator-count",
    "instance-capability-flex",
    "placement-group-id",
    "placement-group-partition",
];

/// The keys the ≤ v1.8 CEL rule `label domain "kubernetes.io" is restricted` lets through by
/// name. `node.kubernetes.io/instance-type` is listed for requirements only, but its domain is
/// an exception anyway.
const KUBERNETES_IO_ALLOWED_UP_TO_1_8: &[&str] = &[
    "beta.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "node.kubernetes.io/windows-build",
];

/// Both rule sets restrict `karpenter.sh` beyond its well-known labels and `karpenter.k8s.aws`
/// beyond the allow-list; `exact_or_sub` is whether `domain` is `d` or a subdomain of it.
fn karpenter_domains(
    key: &str,
    domain: &str,
    in_domain: impl Fn(&str, &str) -> bool,
) -> Option<&'static str> {
    if in_domain(domain, "karpenter.k8s.aws") {
        let allowed = key
            .strip_prefix("karpenter.k8s.aws/")
            .is_some_and(|name| KARPENTER_K8S_AWS_ALLOWED.contains(&name));
        return (!allowed).then_some("label domain \"karpenter.k8s.aws\" is restricted");
    }
    if in_domain(domain, "karpenter.sh") {
        return (!WELL_KNOWN.contains(&key))
            .then_some("label domain \"karpenter.sh\" is restricted");
    }
    None
}

fn restriction_from_1_9(key: &str, domain: &str) -> Option<&'static str> {
    // Go `IsRestrictedLabel`: the domain equals a restricted one or ends with `.` + it.
    let in_domain =
        |d: &str, r: &str| d == r || d.strip_suffix(r).is_some_and(|p| p.ends_with('.'));
    if let Some(why) = karpenter_domains(key, domain, in_domain) {
        return Some(why);
    }
    // Core `RestrictedLabels`.
    (key == "kubernetes.io/hostname").then_some("label \"kubernetes.io/hostname\" is restricted")
}

fn restriction_up_to_1_8(key: &str, domain: &str, context: KeyContext) -> Option<&'static str> {
    // The ≤ v1.8 CEL rules compare with a plain `endsWith` on the domain.
    if let Some(why) = karpenter_domains(key, domain, |d, r| d.ends_with(r)) {
        return Some(why);
    }
    if domain.ends_with("kubernetes.io") {
        let by_name = KUBERNETES_IO_ALLOWED_UP_TO_1_8.contains(&key)
            && !(context == KeyContext::NodePoolLabel && key == "node.kubernetes.io/instance-type");
        // `LabelDomainExceptions`: node.kubernetes.io and node-restriction.kubernetes.io.
        let exception = domain.ends_with("node.kubernetes.io")
            || domain.ends_with("node-restriction.kubernetes.io");
        return (!by_name && !exception).then_some("label domain \"kubernetes.io\" is restricted");
    }
    if domain.ends_with("k8s.io") {
        // `LabelDomainExceptions`: kops.k8s.io.
        return (!domain.ends_with("kops.k8s.io"))
            .then_some("label domain \"k8s.io\" is restricted");
    }
    None
}

/// Every `x-kubernetes-validations[].message` anywhere in `value`.
fn collect_validation_messages<'a>(value: &'a serde_json::Value, out: &mut Vec<&'a str>) {
    match value {
        serde_json::Value::Object(map) => {
            if let Some(rules) = map
                .get("x-kubernetes-validations")
                .and_then(serde_json::Value::as_array)
            {
                out.extend(
                    rules
                        .iter()
                        .filter_map(|r| r.get("message").and_then(serde_json::Value::as_str)),
                );
            }
            map.values()
                .for_each(|v| collect_validation_messages(v, out));
        }
        serde_json::Value::Array(items) => {
            items
                .iter()
                .for_each(|v| collect_validation_messages(v, out));
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use KeyContext::{NodePoolLabel as Label, Requirement as Req};
    use LabelRules::{From1_9 as New, UpTo1_8 as Old};

    #[test]
    fn node_role_labels_are_rejected_up_to_1_8_and_accepted_from_1_9() {
        for key in ["node-role.kubernetes.io/worker", "kubernetes.io/role"] {
            assert_eq!(
                Old.restriction(key, Req),
                Some("label domain \"kubernetes.io\" is restricted")
            );
            assert_eq!(New.restriction(key, Req), None);
        }
    }

    #[test]
    fn well_known_and_exception_domains_pass_up_to_1_8() {
        for key in [
            "kubernetes.io/arch",
            "topology.kubernetes.io/zone",
            "node.kubernetes.io/instance-type",
            "node.kubernetes.io/custom",
            "x.node-restriction.kubernetes.io/team",
            "kops.k8s.io/instancegroup",
            "failure-domain.beta.kubernetes.io/zone",
            "example.com/team",
            "team",
            "topology.k8s.aws/zone-id",
            "karpenter.k8s.aws/instance-family",
            "karpenter.sh/capacity-type",
        ] {
            assert_eq!(Old.restriction(key, Req), None, "{key}");
        }
    }

    #[test]
    fn k8s_io_is_restricted_up_to_1_8_only() {
        assert_eq!(
            Old.restriction("example.k8s.io/x", Req),
            Some("label domain \"k8s.io\" is restricted")
        );
        assert_eq!(New.restriction("example.k8s.io/x", Req), None);
    }

    #[test]
    fn karpenter_domains_are_restricted_in_every_version_beyond_their_allow_lists() {
        for rules in [Old, New] {
            assert!(rules.restriction("karpenter.sh/custom", Req).is_some());
            assert!(rules.restriction("sub.karpenter.sh/custom", Req).is_some());
            assert!(
                rules
                    .restriction("karpenter.k8s.aws/instance-foo", Req)
                    .is_some()
            );
            assert!(
                rules
                    .restriction("karpenter.k8s.aws/instance-gpu-count", Req)
                    .is_none()
            );
            assert!(rules.restriction("karpenter.sh/nodepool", Req).is_none());
            assert!(rules.restriction("karpenter.sh/nodepool", Label).is_some());
            assert!(rules.restriction("kubernetes.io/hostname", Req).is_some());
        }
    }

    #[test]
    fn the_rule_set_follows_the_version() {
        assert_eq!(LabelRules::for_version(&Version::new(1, 8, 6)), Old);
        assert_eq!(LabelRules::for_version(&Version::new(1, 9, 0)), New);
        assert_eq!(LabelRules::for_version(&Version::new(0, 37, 0)), Old);
    }
}
