//! How many subnet addresses one node takes when it starts, from the VPC CNI's settings on the
//! `kube-system/aws-node` DaemonSet. Pure: no IO.
//!
//! The VPC CNI's IP address manager (ipamd) fills its warm pool as soon as the node starts, from
//! the subnet of the node's primary ENI (aws/amazon-vpc-cni-k8s `README.md` "WARM_ENI_TARGET",
//! "WARM_IP_TARGET", "MINIMUM_IP_TARGET", "ENABLE_PREFIX_DELEGATION", "WARM_PREFIX_TARGET";
//! `docs/eni-and-ip-target.md`, `docs/prefix-and-ip-target.md`; `pkg/ipamd/ipamd.go`):
//!
//! - The node itself takes one address: the primary address of its primary ENI.
//! - With `WARM_IP_TARGET` or `MINIMUM_IP_TARGET` set (and no prefix delegation), ipamd keeps
//!   `max(WARM_IP_TARGET, MINIMUM_IP_TARGET)` secondary addresses on an idle node: those plus one.
//! - With `ENABLE_PREFIX_DELEGATION=true`, addresses come in /28 prefixes of 16 each: ipamd keeps
//!   `ceil(max(WARM_IP_TARGET, MINIMUM_IP_TARGET) / 16)` prefixes when either is set, else
//!   `WARM_PREFIX_TARGET` (the DaemonSet sets 1) and at least one prefix: 16 per prefix plus one.
//! - Otherwise `WARM_ENI_TARGET` (default 1) keeps whole ENIs warm: `(1 + WARM_ENI_TARGET)` ENIs
//!   with every address of each. How many that is depends on the instance type (2 to 50 per ENI),
//!   which is not known before the launch, so the lower bound is the floor below.
//!
//! The result is never below [`FLOOR`]: a subnet with fewer free addresses cannot hold one node of
//! a common instance type in the default mode (two ENIs of at least 8 addresses each, e.g. m5.large
//! has 10 per ENI). Every branch is a lower bound, so a zone below it is really out of room.

use crate::facts::{Observed, VpcCniSettings};

/// The least any node takes, whatever the settings say.
pub const FLOOR: u32 = 16;
/// Addresses in one /28 prefix.
const PREFIX: u32 = 16;

/// What one node takes and how that was worked out, for messages.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeAddressNeed {
    pub addresses: u32,
    /// One sentence: the settings it came from.
    pub basis: String,
}

fn number(env: &std::collections::BTreeMap<String, String>, key: &str) -> Option<u32> {
    env.get(key)?.trim().parse().ok()
}

fn truthy(env: &std::collections::BTreeMap<String, String>, key: &str) -> bool {
    env.get(key)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"))
}

/// The addresses one starting node takes under `cni`. Unparsable numbers count as unset (ipamd
/// falls back to its defaults for them too).
pub fn addresses_per_node(cni: &Observed<VpcCniSettings>) -> NodeAddressNeed {
    let env = match cni {
        Observed::Found(settings) => &settings.env,
        Observed::Absent => {
            return NodeAddressNeed {
                addresses: FLOOR,
                basis: format!(
                    "the cluster has no kube-system/aws-node DaemonSet, so the floor of {FLOOR} \
                     addresses per node is assumed"
                ),
            };
        }
        Observed::Unknown(_) => {
            return NodeAddressNeed {
                addresses: FLOOR,
                basis: format!(
                    "kube-system/aws-node could not be read, so the floor of {FLOOR} addresses \
                     per node is assumed"
                ),
            };
        }
    };
    let warm_ip = number(env, "WARM_IP_TARGET").filter(|n| *n > 0);
    let min_ip = number(env, "MINIMUM_IP_TARGET").filter(|n| *n > 0);
    let ip_target = warm_ip.into_iter().chain(min_ip).max();
    let (computed, basis) = if truthy(env, "ENABLE_PREFIX_DELEGATION") {
        let prefixes = match ip_target {
            Some(ips) => ips.div_ceil(PREFIX).max(1),
            None => number(env, "WARM_PREFIX_TARGET").unwrap_or(1).max(1),
        };
        (
            prefixes.saturating_mul(PREFIX).saturating_add(1),
            format!(
                "the VPC CNI delegates prefixes and keeps {prefixes} /28 prefix(es) warm, so a \
                 node takes {} addresses",
                prefixes.saturating_mul(PREFIX).saturating_add(1)
            ),
        )
    } else if let Some(ips) = ip_target {
        (
            ips.saturating_add(1),
            format!(
                "the VPC CNI keeps {ips} addresses warm (WARM_IP_TARGET/MINIMUM_IP_TARGET), so a \
                 node takes {}",
                ips.saturating_add(1)
            ),
        )
    } else {
        let enis = number(env, "WARM_ENI_TARGET").unwrap_or(1);
        (
            0,
            format!(
                "the VPC CNI keeps {enis} ENI(s) warm beyond the primary, whose size depends on \
                 the instance type, so the floor of {FLOOR} addresses per node is assumed"
            ),
        )
    };
    if computed < FLOOR {
        let basis = if computed == 0 {
            basis
        } else {
            format!("{basis}, below the floor of {FLOOR}, which is used instead")
        };
        return NodeAddressNeed {
            addresses: FLOOR,
            basis,
        };
    }
    NodeAddressNeed {
        addresses: computed,
        basis,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn need(pairs: &[(&str, &str)]) -> u32 {
        let env = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        addresses_per_node(&Observed::Found(VpcCniSettings { env })).addresses
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
    fn an_unread_daemonset_assumes_the_floor_and_says_so() {
        let n = addresses_per_node(&Observed::not_observed("watch not synced"));
        assert_eq!(n.addresses, FLOOR);
        assert!(n.basis.contains("could not be read"), "{}", n.basis);
    }
}
