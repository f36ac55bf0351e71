//! How many addresses of its subnet one node takes: what a launch needs for certain, and what the
//! VPC CNI's warm pool takes right after it starts, from the CNI's settings on the
//! `kube-system/aws-node` DaemonSet. Pure: no IO.
//!
//! A launch needs one free address, the primary address of the node's primary ENI: without it EC2
//! refuses the launch (`InsufficientFreeAddressesInSubnet`). Whether Pods take more from the same
//! subnet depends on the CNI mode (aws/amazon-vpc-cni-k8s `README.md`, `docs/eni-and-ip-target.md`,
//! `docs/prefix-and-ip-target.md`; `pkg/ipamd/ipamd.go`):
//!
//! - No `aws-node` DaemonSet: another CNI (Cilium, Calico overlays) gives Pods addresses outside
//!   the node's subnet; the node needs its own address. (Cilium's ENI mode does take addresses
//!   from VPC subnets; its pool is not known here.)
//! - `ENABLE_IPv6=true`: Pods get IPv6 addresses from the node's /80 prefix; one IPv4 address.
//! - `AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG=true`: Pods get addresses from the `ENIConfig` subnets;
//!   the node's own subnet gives the primary ENI's address only.
//! - Otherwise Pods take addresses from the node's subnet: a node that can run any Pod needs its
//!   own address and one for a Pod, for certain; ipamd then fills its warm pool at once:
//!   - with `WARM_IP_TARGET` or `MINIMUM_IP_TARGET` set (and no prefix delegation),
//!     `max(WARM_IP_TARGET, MINIMUM_IP_TARGET)` secondary addresses;
//!   - with `ENABLE_PREFIX_DELEGATION=true`, /28 prefixes of 16: `ceil(max(...) / 16)` prefixes
//!     when either target is set, else `WARM_PREFIX_TARGET` (the DaemonSet sets 1), at least one;
//!   - otherwise `WARM_ENI_TARGET` (default 1) whole ENIs, whose size depends on the instance
//!     type (2 to 50 addresses each), so the warm pool is taken as [`FLOOR`].
//!
//! A subnet short of the warm pool still launches nodes (Pods beyond its free addresses wait for
//! one), so that shortfall is a warning; only the certain need decides `False`.

use crate::facts::{Observed, VpcCniSettings};

/// The warm pool assumed when it cannot be computed: a subnet with fewer free addresses cannot
/// hold the warm ENIs of one node of a common instance type in the default mode (two ENIs of at
/// least 8 addresses each, e.g. m5.large has 10 per ENI).
pub const FLOOR: u32 = 16;
/// Addresses in one /28 prefix.
const PREFIX: u32 = 16;

/// What one node takes of its subnet, and how that was worked out, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddressNeed {
    /// Free addresses without which a node launched there cannot work, for certain: its own, and
    /// one for a Pod where Pods take addresses from the node's subnet.
    pub certain: u32,
    /// What the node takes once the VPC CNI has filled its warm pool (at least `certain`).
    pub warm: u32,
    /// One sentence: the settings it came from.
    pub basis: String,
}

impl NodeAddressNeed {
    fn own_address_only(basis: String) -> Self {
        Self {
            certain: 1,
            warm: 1,
            basis,
        }
    }
}

fn number(env: &std::collections::BTreeMap<String, String>, key: &str) -> Option<u32> {
    env.get(key)?.trim().parse().ok()
}

/// A boolean setting of the CNI, read as ipamd reads its env (`strconv.ParseBool`; false when
/// unset or no boolean, its default for the settings read here).
pub(crate) fn truthy(env: &std::collections::BTreeMap<String, String>, key: &str) -> bool {
    env.get(key)
        .and_then(|v| crate::go::parse_bool(v))
        .unwrap_or(false)
}

/// The addresses one starting node takes under `cni`. Unparsable numbers count as unset (ipamd
/// falls back to its defaults for them too).
pub fn addresses_per_node(cni: &Observed<VpcCniSettings>) -> NodeAddressNeed {
    let env = match cni {
        Observed::Found(settings) => &settings.env,
        Observed::Absent => {
            return NodeAddressNeed::own_address_only(
                "the cluster has no kube-system/aws-node DaemonSet, so Pods get their addresses \
                 from another CNI and a node takes its own address"
                    .into(),
            );
        }
        Observed::Unknown(_) => {
            return NodeAddressNeed {
                certain: 1,
                warm: FLOOR,
                basis: format!(
                    "kube-system/aws-node could not be read, so a launch needs one address and \
                     a warm pool of {FLOOR} is assumed"
                ),
            };
        }
    };
    if truthy(env, "ENABLE_IPv6") {
        return NodeAddressNeed::own_address_only(
            "the VPC CNI gives Pods IPv6 addresses (ENABLE_IPv6), so a node takes its own IPv4 \
             address"
                .into(),
        );
    }
    if truthy(env, "AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG") {
        return NodeAddressNeed::own_address_only(
            "the VPC CNI uses custom networking (AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG), so Pods \
             get addresses from the ENIConfig subnets and a node takes its own address here"
                .into(),
        );
    }
    let (computed, basis) = warm_pool(env);
    let (warm, basis) = if computed < FLOOR {
        let basis = if computed == 0 {
            basis
        } else {
            format!("{basis}, below the floor of {FLOOR}, which is used instead")
        };
        (FLOOR, basis)
    } else {
        (computed, basis)
    };
    NodeAddressNeed {
        // Its own address and one for a Pod: Pods take theirs from this subnet.
        certain: 2,
        warm,
        basis,
    }
}

/// The addresses the VPC CNI's warm pool takes on a started node (0 when that depends on the
/// instance type), and why, from prefix delegation, WARM_IP_TARGET/MINIMUM_IP_TARGET or
/// WARM_ENI_TARGET.
fn warm_pool(env: &std::collections::BTreeMap<String, String>) -> (u32, String) {
    let warm_ip = number(env, "WARM_IP_TARGET").filter(|n| *n > 0);
    let min_ip = number(env, "MINIMUM_IP_TARGET").filter(|n| *n > 0);
    let ip_target = warm_ip.into_iter().chain(min_ip).max();
    if truthy(env, "ENABLE_PREFIX_DELEGATION") {
        let prefixes = match ip_target {
            Some(ips) => ips.div_ceil(PREFIX).max(1),
            None => number(env, "WARM_PREFIX_TARGET").unwrap_or(1).max(1),
        };
        let warm = prefixes.saturating_mul(PREFIX).saturating_add(1);
        (
            warm,
            format!(
                "the VPC CNI delegates prefixes and keeps {prefixes} /28 prefix(es) warm, so a \
                 started node takes {warm}"
            ),
        )
    } else if let Some(ips) = ip_target {
        (
            ips.saturating_add(1),
            format!(
                "the VPC CNI keeps {ips} addresses warm (WARM_IP_TARGET/MINIMUM_IP_TARGET), so a \
                 started node takes {}",
                ips.saturating_add(1)
            ),
        )
    } else {
        let enis = number(env, "WARM_ENI_TARGET").unwrap_or(1);
        (
            0,
            format!(
                "the VPC CNI keeps {enis} ENI(s) warm beyond the primary, whose size depends on \
                 the instance type, so a warm pool of {FLOOR} is assumed"
            ),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need_of(pairs: &[(&str, &str)]) -> NodeAddressNeed {
        let env = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        addresses_per_node(&Observed::Found(VpcCniSettings { env }))
    }

    fn need(pairs: &[(&str, &str)]) -> u32 {
        need_of(pairs).warm
    }

    #[test]
    fn the_default_warm_eni_mode_takes_the_floor() {
        assert_eq!(need(&[]), FLOOR);
        assert_eq!(need(&[("WARM_ENI_TARGET", "3")]), FLOOR);
    }

    #[test]
    fn ip_targets_add_the_node_own_address_and_never_go_below_the_floor() {
        assert_eq!(need(&[("WARM_IP_TARGET", "30")]), 31);
        assert_eq!(
            need(&[("WARM_IP_TARGET", "5"), ("MINIMUM_IP_TARGET", "40")]),
            41
        );
        assert_eq!(need(&[("WARM_IP_TARGET", "2")]), FLOOR);
        assert_eq!(need(&[("WARM_IP_TARGET", "junk")]), FLOOR);
    }

    #[test]
    fn prefix_delegation_counts_whole_prefixes() {
        assert_eq!(need(&[("ENABLE_PREFIX_DELEGATION", "true")]), 17);
        assert_eq!(
            need(&[
                ("ENABLE_PREFIX_DELEGATION", "true"),
                ("WARM_PREFIX_TARGET", "2")
            ]),
            33
        );
        assert_eq!(
            need(&[
                ("ENABLE_PREFIX_DELEGATION", "TRUE"),
                ("MINIMUM_IP_TARGET", "20")
            ]),
            33
        );
    }

    #[test]
    fn an_unread_daemonset_assumes_the_floor_for_the_warm_pool_only_and_says_so() {
        let n = addresses_per_node(&Observed::not_observed("watch not synced"));
        assert_eq!((n.certain, n.warm), (1, FLOOR));
        assert!(n.basis.contains("could not be read"), "{}", n.basis);
    }

    #[test]
    fn pods_from_the_node_subnet_need_two_addresses_for_certain() {
        assert_eq!(need_of(&[]).certain, 2);
        assert_eq!(need_of(&[("WARM_IP_TARGET", "400")]).certain, 2);
        assert_eq!(need_of(&[("WARM_IP_TARGET", "400")]).warm, 401);
    }

    #[test]
    fn custom_networking_ipv6_and_other_cnis_take_one_address() {
        for pairs in [
            &[
                ("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "true"),
                ("WARM_IP_TARGET", "400"),
            ][..],
            &[
                ("ENABLE_IPv6", "true"),
                ("ENABLE_PREFIX_DELEGATION", "true"),
            ][..],
        ] {
            let n = need_of(pairs);
            assert_eq!((n.certain, n.warm), (1, 1), "{pairs:?}: {}", n.basis);
        }
        let other = addresses_per_node(&Observed::Absent);
        assert_eq!((other.certain, other.warm), (1, 1));
        assert!(other.basis.contains("another CNI"), "{}", other.basis);
    }
}
