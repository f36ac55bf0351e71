//! Where Karpenter's releases differ in how they schedule, as data per release: the labels it
//! knows without a NodePool defining them (core `pkg/apis/v1/labels.go` `WellKnownLabels` and
//! what the AWS provider's `pkg/apis/v1/labels.go` adds), the labels its NodeClaim templates
//! carry (core `scheduling/nodeclaimtemplate.go`), and whether it counts a DaemonSet per
//! instance type (core v1.14.0, #2975). With the release unknown, a question is answered for every
//! release at once: a label "may" be known when some release knows it, is "certainly" known when
//! every release does. Pure: no IO.

use crate::facts::ResourceClaims;
use semver::Version;

/// A release, `(major, minor, patch)`.
type Release = (u64, u64, u64);

/// The first release (`0.0.0`: every v1 release).
const ALWAYS: Release = (0, 0, 0);

/// Core's well-known labels, the same in every v1 release.
const CORE_WELL_KNOWN: [&str; 8] = [
    "karpenter.sh/nodepool",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "karpenter.sh/capacity-type",
    "node.kubernetes.io/windows-build",
];

/// The AWS provider's additions, each with the first release that has it (read in the newest
/// patch of each minor the Go module proxy serves: v1.0.8, v1.2.1, v1.3.6, v1.6.3, v1.8.6,
/// v1.9.3, v1.10.2, v1.11.0, v1.12.1, v1.13.1, v1.14.1, v1.15.2; a key first seen in one of them
/// is taken to arrive with that minor).
const AWS_WELL_KNOWN: &[(&str, Release)] = &[
    ("karpenter.k8s.aws/instance-hypervisor", ALWAYS),
    (
        "karpenter.k8s.aws/instance-encryption-in-transit-supported",
        ALWAYS,
    ),
    ("karpenter.k8s.aws/instance-category", ALWAYS),
    ("karpenter.k8s.aws/instance-family", ALWAYS),
    ("karpenter.k8s.aws/instance-generation", ALWAYS),
    ("karpenter.k8s.aws/instance-size", ALWAYS),
    ("karpenter.k8s.aws/instance-local-nvme", ALWAYS),
    ("karpenter.k8s.aws/instance-cpu", ALWAYS),
    ("karpenter.k8s.aws/instance-cpu-manufacturer", ALWAYS),
    ("karpenter.k8s.aws/instance-memory", ALWAYS),
    ("karpenter.k8s.aws/instance-ebs-bandwidth", ALWAYS),
    ("karpenter.k8s.aws/instance-network-bandwidth", ALWAYS),
    ("karpenter.k8s.aws/instance-gpu-name", ALWAYS),
    ("karpenter.k8s.aws/instance-gpu-manufacturer", ALWAYS),
    ("karpenter.k8s.aws/instance-gpu-count", ALWAYS),
    ("karpenter.k8s.aws/instance-gpu-memory", ALWAYS),
    ("karpenter.k8s.aws/instance-accelerator-name", ALWAYS),
    (
        "karpenter.k8s.aws/instance-accelerator-manufacturer",
        ALWAYS,
    ),
    ("karpenter.k8s.aws/instance-accelerator-count", ALWAYS),
    ("topology.k8s.aws/zone-id", ALWAYS),
    (
        "karpenter.k8s.aws/instance-cpu-sustained-clock-speed-mhz",
        (1, 1, 0),
    ),
    ("karpenter.k8s.aws/capacity-reservation-id", (1, 3, 0)),
    ("karpenter.k8s.aws/capacity-reservation-type", (1, 6, 0)),
    ("karpenter.k8s.aws/instance-capability-flex", (1, 7, 0)),
    ("karpenter.k8s.aws/instance-tenancy", (1, 9, 0)),
    (
        "karpenter.k8s.aws/capacity-reservation-interruptible",
        (1, 10, 0),
    ),
    ("karpenter.k8s.aws/placement-group-id", (1, 11, 0)),
    ("karpenter.k8s.aws/placement-group-partition", (1, 11, 0)),
];

/// The NodePool annotation Karpenter v1.0 reads kubelet settings from, ahead of the class's
/// `spec.kubelet` (aws/karpenter-provider-aws v1.0.8 `pkg/utils/utils.go`
/// `GetKubletConfigurationWithNodePool`); v1.1 and later refuse to start while a NodePool has it.
pub const KUBELET_CONVERSION_ANNOTATION: &str =
    "compatibility.karpenter.sh/v1beta1-kubelet-conversion";
/// The first release that reads kubelet settings only from the class.
const KUBELET_FROM_CLASS_ONLY: Release = (1, 1, 0);

/// The label naming the EC2NodeClass a NodeClaim is launched from.
pub const NODE_CLASS_LABEL: &str = "karpenter.k8s.aws/ec2nodeclass";

/// The first release whose NodeClaim templates carry the class label.
const NODE_CLASS_LABEL_FROM: Release = (1, 1, 0);
/// The first release whose NodeClaim templates require `karpenter.sh/registered` and
/// `karpenter.sh/initialized` to be `true`.
const LIFECYCLE_LABELS_FROM: Release = (1, 14, 0);
/// The first release that counts a DaemonSet only on the instance types its selector admits
/// (core `scheduling/scheduler.go` `buildDaemonOverheadGroups`).
const DAEMONS_PER_INSTANCE_TYPE_FROM: Release = (1, 14, 0);
/// The first release that tries a DaemonSet's required terms in turn, on its required terms only,
/// tolerating `PreferNoSchedule` (`isDaemonPodCompatible`, kubernetes-sigs/karpenter #1727, in
/// core v1.1.1, which the AWS provider's v1.1.1 runs); before, `getDaemonOverhead` compares its
/// node selector, first required term and heaviest preferred term at once, and a
/// `PreferNoSchedule` taint it does not tolerate keeps it off.
const DAEMON_TERMS_RELAXED_FROM: Release = (1, 1, 1);
/// The first release that leaves DaemonSets whose containers claim dynamic resources out of the
/// overhead (core v1.7.0 `pkg/utils/pod/scheduling.go` `HasDRARequirements` with
/// `IGNORE_DRA_REQUESTS`, default true).
const DAEMONS_WITH_CLAIMS_IGNORED_FROM: Release = (1, 7, 0);
/// The first release whose `HasDRARequirements` also reads the Pod's own `resourceClaims`
/// (core v1.14.0; v1.13.0 reads only the containers').
const DAEMONS_WITH_POD_CLAIMS_IGNORED_FROM: Release = (1, 14, 0);

/// The installed Karpenter, as far as its scheduling differs by release.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct KarpenterRelease(Option<Release>);

/// How sure an answer must be: `May` for a Pod that waits (no alarm unless every release
/// refuses it), `Certainly` for what a verdict counts (only what every release counts).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sure {
    May,
    Certainly,
}

impl KarpenterRelease {
    /// The release `version` names; `None` when it is not known.
    pub fn of(version: Option<&Version>) -> Self {
        Self(version.map(|v| (v.major, v.minor, v.patch)))
    }

    /// Any release: every question is answered for all of them.
    pub fn unknown() -> Self {
        Self(None)
    }

    pub fn is_known(&self) -> bool {
        self.0.is_some()
    }

    /// Whether a feature that arrived in `first` is in this release: `Some` when known, `None`
    /// when the release is not.
    fn has(&self, first: Release) -> Option<bool> {
        self.0.map(|r| r >= first)
    }

    fn holds(&self, first: Release, sure: Sure) -> bool {
        match (self.has(first), sure) {
            (Some(has), _) => has,
            (None, Sure::May) => true,
            (None, Sure::Certainly) => first == ALWAYS,
        }
    }

    /// Whether Karpenter lets a Pod's requirement on `key` stand although no NodePool defines
    /// it (`scheduling.AllowUndefinedWellKnownLabels`). Any other label a NodePool does not
    /// define fails (`label "…" does not have known values`).
    pub fn well_known(&self, key: &str, sure: Sure) -> bool {
        let key = crate::requirements::normalized(key);
        CORE_WELL_KNOWN.contains(&key)
            || AWS_WELL_KNOWN
                .iter()
                .any(|(k, first)| *k == key && self.holds(*first, sure))
    }

    /// The labels a NodeClaim template of NodePool `pool` (of class `class`) carries besides the
    /// NodePool's own labels and requirements: one set for a known release, one per release that
    /// differs when it is not known (the nodepool label only up to v1.0; with the class label from
    /// v1.1; with `registered` and `initialized` from v1.14), each to be tried.
    pub fn template_labels(
        &self,
        pool: &str,
        class: Option<&str>,
    ) -> Vec<Vec<(&'static str, String)>> {
        let firsts: Vec<Release> = match self.0 {
            Some(r) => vec![r],
            None => vec![ALWAYS, NODE_CLASS_LABEL_FROM, LIFECYCLE_LABELS_FROM],
        };
        firsts
            .into_iter()
            .map(|release| {
                let mut labels = vec![("karpenter.sh/nodepool", pool.to_owned())];
                if let Some(class) = class
                    && release >= NODE_CLASS_LABEL_FROM
                {
                    labels.push((NODE_CLASS_LABEL, class.to_owned()));
                }
                if release >= LIFECYCLE_LABELS_FROM {
                    labels.push(("karpenter.sh/registered", "true".to_owned()));
                    labels.push(("karpenter.sh/initialized", "true".to_owned()));
                }
                labels
            })
            .collect()
    }

    /// Whether this release may read `pool`'s kubelet settings from its annotation rather than
    /// from the class (v1.0, or a release not known, with the annotation set): the class's
    /// `spec.kubelet` then does not certainly say what a node of it reserves.
    pub fn kubelet_from_pool(&self, pool: &karpenter_health_api::karpenter::NodePool) -> bool {
        let annotated = pool
            .metadata
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(KUBELET_CONVERSION_ANNOTATION));
        annotated && self.has(KUBELET_FROM_CLASS_ONLY) != Some(true)
    }

    /// Whether Karpenter counts a DaemonSet per instance type (`Some(true)`), per NodeClaim
    /// template (`Some(false)`), or that is not known.
    pub fn daemons_per_instance_type(&self) -> Option<bool> {
        self.has(DAEMONS_PER_INSTANCE_TYPE_FROM)
    }

    /// Whether Karpenter tries a DaemonSet's required terms in turn and tolerates
    /// `PreferNoSchedule` for it (`Some(true)`), compares its first term and heaviest preference
    /// at once (`Some(false)`), or that is not known.
    pub fn daemon_terms_relaxed(&self) -> Option<bool> {
        self.has(DAEMON_TERMS_RELAXED_FROM)
    }

    /// Whether Karpenter leaves a DaemonSet whose Pods claim dynamic resources as `claims` says
    /// out of the overhead (`None`: not known).
    pub fn daemon_ignored_for_claims(&self, claims: ResourceClaims) -> Option<bool> {
        match claims {
            ResourceClaims::None => Some(false),
            ResourceClaims::Containers => self.has(DAEMONS_WITH_CLAIMS_IGNORED_FROM),
            ResourceClaims::PodOnly => self.has(DAEMONS_WITH_POD_CLAIMS_IGNORED_FROM),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(minor: u64) -> KarpenterRelease {
        KarpenterRelease::of(Some(&Version::new(1, minor, 0)))
    }

    #[test]
    fn only_karpenters_own_labels_are_well_known_not_their_domains() {
        for r in [release(8), release(14), KarpenterRelease::unknown()] {
            for sure in [Sure::May, Sure::Certainly] {
                assert!(r.well_known("kubernetes.io/arch", sure));
                assert!(r.well_known("beta.kubernetes.io/arch", sure));
                assert!(r.well_known("karpenter.k8s.aws/instance-family", sure));
                assert!(!r.well_known("node-role.kubernetes.io/edge", sure));
                assert!(!r.well_known("node.kubernetes.io/lifecycle", sure));
                assert!(!r.well_known("feature.node.kubernetes.io/cpu-cpuid.AVX512F", sure));
            }
        }
    }

    #[test]
    fn an_unknown_release_may_know_what_some_release_knows_and_certainly_what_all_do() {
        let key = "karpenter.k8s.aws/instance-tenancy";
        assert!(!release(8).well_known(key, Sure::May));
        assert!(release(14).well_known(key, Sure::Certainly));
        assert!(KarpenterRelease::unknown().well_known(key, Sure::May));
        assert!(!KarpenterRelease::unknown().well_known(key, Sure::Certainly));
    }

    #[test]
    fn templates_carry_the_lifecycle_labels_from_1_14() {
        let keys = |r: &KarpenterRelease| -> Vec<Vec<&str>> {
            r.template_labels("p", Some("c"))
                .into_iter()
                .map(|set| set.into_iter().map(|(k, _)| k).collect())
                .collect()
        };
        assert_eq!(
            keys(&release(8)),
            [["karpenter.sh/nodepool", NODE_CLASS_LABEL]]
        );
        assert!(keys(&release(14))[0].contains(&"karpenter.sh/initialized"));
        // Not known: each release's set, to be tried (a DaemonSet's DoesNotExist on the class
        // label is met only where no class label is carried).
        assert_eq!(keys(&KarpenterRelease::unknown()).len(), 3);
        assert_eq!(release(13).daemons_per_instance_type(), Some(false));
        assert_eq!(release(14).daemons_per_instance_type(), Some(true));
        assert_eq!(
            KarpenterRelease::unknown().daemons_per_instance_type(),
            None
        );
    }
}
