//! How many Pods Karpenter lets a node of an instance type run, and how many Pod addresses the
//! VPC CNI can give that node. Pure: no IO.
//!
//! Karpenter (aws/karpenter-provider-aws `pkg/providers/instancetype/types.go`, `pods()` and
//! `ENILimitedPods()`) gives every node the kubelet `maxPods` of the EC2NodeClass when it sets
//! one; else, for AMI families with ENI-limited Pod density (AL2, AL2023, Bottlerocket, Custom;
//! not Windows, `pkg/providers/amifamily`), `(ENIs − RESERVED_ENIS) × (IPv4 per ENI − 1) + 2`
//! (0 when no ENI is left), else 110; then at most `podsPerCore × vCPUs` where the family honours
//! `podsPerCore` (not Bottlerocket). The ENIs are the default network card's, from
//! DescribeInstanceTypes. It writes that count into the node's kubelet configuration
//! (`pkg/providers/amifamily/resolver.go`).
//!
//! The VPC CNI (aws/amazon-vpc-cni-k8s `pkg/awsutils/awsutils.go` `GetENIIPv4Limit`,
//! `pkg/ipamd/ipamd.go` `GetIPv4Limit`, `getMaxENI`) gives Pods the secondary addresses of a
//! node's ENIs: each ENI's addresses less its primary, on at most `MAX_ENI` ENIs; with
//! `ENABLE_PREFIX_DELEGATION` each such slot holds a /28 prefix of 16; with custom networking
//! (`AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG`) the primary ENI gives none. The two host-network Pods
//! every node runs (aws-node, kube-proxy) need no address: the "+2" of both formulas. Under
//! `ENABLE_IPv6` every Pod takes an address of the node's prefix: no per-node limit here.

use crate::facts::{InstanceTypeFacts, VpcCniSettings};
use crate::plan::ami_alias::{Alias, AliasFamily};
use karpenter_health_api::karpenter::EC2NodeClass;

/// Pods every node runs on the host network (aws-node, kube-proxy): Karpenter's and the CNI's
/// own `+ 2`.
pub const HOST_NETWORK_PODS: u32 = 2;
/// Karpenter's Pod count for families without ENI-limited density.
const DEFAULT_MAX_PODS: u32 = 110;
/// Addresses in one /28 prefix.
const PREFIX: u32 = 16;

/// How a family counts Pods (aws/karpenter-provider-aws `pkg/providers/amifamily`
/// `FeatureFlags`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DensityFlags {
    pub eni_limited: bool,
    pub pods_per_core: bool,
    pub windows: bool,
}

impl DensityFlags {
    /// The flags of the class's AMI family: its alias, else `spec.amiFamily`; the default
    /// family's (AL2, AL2023, Custom) when neither names another.
    pub fn of(class: &EC2NodeClass) -> Self {
        let family = Alias::of(class).map(|a| a.family);
        let named = class.spec.ami_family.as_deref().unwrap_or_default();
        let bottlerocket = matches!(family, Some(AliasFamily::Bottlerocket))
            || named.eq_ignore_ascii_case("Bottlerocket");
        let windows = matches!(family, Some(AliasFamily::Windows(_)))
            || named.to_ascii_lowercase().starts_with("windows");
        Self {
            eni_limited: !windows,
            pods_per_core: !bottlerocket,
            windows,
        }
    }
}

/// What Karpenter's count for a type needs besides the type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DensityInputs {
    pub flags: DensityFlags,
    pub max_pods: Option<u32>,
    pub pods_per_core: Option<u32>,
    /// `RESERVED_ENIS`; `None` when not known (then only an explicit `maxPods` decides).
    pub reserved_enis: Option<u32>,
}

impl DensityInputs {
    /// The class's own settings; `reserved_enis` from Karpenter's.
    pub fn of(class: &EC2NodeClass, reserved_enis: Option<u32>) -> Self {
        let kubelet = class.spec.kubelet.as_ref();
        let positive = |n: Option<i32>| n.and_then(|n| u32::try_from(n).ok());
        Self {
            flags: DensityFlags::of(class),
            max_pods: positive(kubelet.and_then(|k| k.max_pods)),
            pods_per_core: positive(kubelet.and_then(|k| k.pods_per_core)).filter(|n| *n > 0),
            reserved_enis,
        }
    }

    /// Karpenter's `pods` capacity for `t`; `None` when what it needs is not known (the type's
    /// network or vCPUs left out of EC2's answer, or `RESERVED_ENIS` not read).
    pub fn max_pods(&self, t: &InstanceTypeFacts) -> Option<u32> {
        let count = match (self.max_pods, self.flags.eni_limited) {
            (Some(explicit), _) => explicit,
            (None, true) => {
                let usable = t.network_interfaces?.saturating_sub(self.reserved_enis?);
                if usable == 0 {
                    0
                } else {
                    usable * t.ipv4_per_interface?.saturating_sub(1) + HOST_NETWORK_PODS
                }
            }
            (None, false) => DEFAULT_MAX_PODS,
        };
        match self.pods_per_core {
            Some(per_core) if self.flags.pods_per_core => {
                Some(count.min(per_core.saturating_mul(t.vcpus?)))
            }
            _ => Some(count),
        }
    }
}

/// How the VPC CNI addresses Pods, from its DaemonSet's env.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodAddressing {
    /// `ENABLE_IPv6`: Pods take addresses of the node's IPv6 prefix.
    Ipv6,
    /// Secondary IPv4 addresses (or /28 prefixes) of the node's ENIs.
    Ipv4 {
        prefix_delegation: bool,
        custom_networking: bool,
        max_eni: Option<u32>,
    },
}

fn truthy(cni: &VpcCniSettings, key: &str) -> bool {
    crate::vpc_cni::truthy(&cni.env, key)
}

impl PodAddressing {
    pub fn of(cni: &VpcCniSettings) -> Self {
        if truthy(cni, "ENABLE_IPv6") {
            return Self::Ipv6;
        }
        Self::Ipv4 {
            prefix_delegation: truthy(cni, "ENABLE_PREFIX_DELEGATION"),
            custom_networking: truthy(cni, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG"),
            // ipamd ignores a MAX_ENI it cannot read, or below 1.
            max_eni: cni
                .env
                .get("MAX_ENI")
                .and_then(|v| v.trim().parse::<u32>().ok())
                .filter(|n| *n > 0),
        }
    }

    /// The Pod addresses a node of `t` can get, host-network Pods not counted; `None` without a
    /// limit (IPv6) or when EC2's answer left the type's network out.
    pub fn pod_addresses(&self, t: &InstanceTypeFacts) -> Option<u32> {
        let Self::Ipv4 {
            prefix_delegation,
            custom_networking,
            max_eni,
        } = *self
        else {
            return None;
        };
        let enis = t
            .network_interfaces?
            .min(max_eni.unwrap_or(u32::MAX))
            .saturating_sub(u32::from(custom_networking));
        let per_eni = t.ipv4_per_interface?.saturating_sub(1);
        Some(enis * per_eni * if prefix_delegation { PREFIX } else { 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn m5_large() -> InstanceTypeFacts {
        InstanceTypeFacts {
            name: "m5.large".into(),
            vcpus: Some(2),
            network_interfaces: Some(3),
            ipv4_per_interface: Some(10),
            ..Default::default()
        }
    }

    fn inputs(max_pods: Option<u32>, per_core: Option<u32>, reserved: u32) -> DensityInputs {
        DensityInputs {
            flags: DensityFlags {
                eni_limited: true,
                pods_per_core: true,
                windows: false,
            },
            max_pods,
            pods_per_core: per_core,
            reserved_enis: Some(reserved),
        }
    }

    fn cni(pairs: &[(&str, &str)]) -> VpcCniSettings {
        VpcCniSettings {
            env: pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect::<BTreeMap<_, _>>(),
        }
    }

    #[test]
    fn karpenters_count_is_eni_limited_unless_the_class_sets_max_pods() {
        // eni-max-pods.txt lists m5.large at 29: 3 × (10 − 1) + 2.
        assert_eq!(inputs(None, None, 0).max_pods(&m5_large()), Some(29));
        assert_eq!(inputs(None, None, 1).max_pods(&m5_large()), Some(20));
        assert_eq!(inputs(None, None, 3).max_pods(&m5_large()), Some(0));
        assert_eq!(inputs(Some(110), None, 0).max_pods(&m5_large()), Some(110));
        // podsPerCore caps either: 4 × 2 vCPUs.
        assert_eq!(inputs(Some(110), Some(4), 0).max_pods(&m5_large()), Some(8));
        let mut bottlerocket = inputs(Some(110), Some(4), 0);
        bottlerocket.flags.pods_per_core = false;
        assert_eq!(bottlerocket.max_pods(&m5_large()), Some(110));
        let mut windows = inputs(None, None, 0);
        windows.flags.eni_limited = false;
        assert_eq!(windows.max_pods(&m5_large()), Some(110));
        // RESERVED_ENIS not read: only an explicit maxPods decides.
        let mut unread = inputs(None, None, 0);
        unread.reserved_enis = None;
        assert_eq!(unread.max_pods(&m5_large()), None);
        unread.max_pods = Some(50);
        assert_eq!(unread.max_pods(&m5_large()), Some(50));
    }

    #[test]
    fn the_cnis_addresses_follow_its_mode() {
        let t = m5_large();
        assert_eq!(PodAddressing::of(&cni(&[])).pod_addresses(&t), Some(27));
        let custom = cni(&[("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "true")]);
        assert_eq!(PodAddressing::of(&custom).pod_addresses(&t), Some(18));
        let prefixes = cni(&[("ENABLE_PREFIX_DELEGATION", "true")]);
        assert_eq!(PodAddressing::of(&prefixes).pod_addresses(&t), Some(432));
        let capped = cni(&[("MAX_ENI", "1")]);
        assert_eq!(PodAddressing::of(&capped).pod_addresses(&t), Some(9));
        let ipv6 = cni(&[
            ("ENABLE_IPv6", "true"),
            ("ENABLE_PREFIX_DELEGATION", "true"),
        ]);
        assert_eq!(PodAddressing::of(&ipv6), PodAddressing::Ipv6);
        assert_eq!(PodAddressing::of(&ipv6).pod_addresses(&t), None);
        // Karpenter's own count never promises more than the default mode addresses.
        assert_eq!(
            inputs(None, None, 0).max_pods(&t),
            Some(27 + HOST_NETWORK_PODS)
        );
    }
}
