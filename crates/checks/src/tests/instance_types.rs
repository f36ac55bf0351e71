//! Scenarios of `InstanceTypesAvailable` beyond one sentence per reason: narrow NodePools that
//! can still launch stay True, reservations of a type a reserved-only NodePool excludes leave it
//! nothing, and what was not seen stays Unknown. Pure.

use super::capacity_reservations::reservations;
use super::reasons::condition_of;
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::ConditionType;

/// The fixture's NodePool with its requirement on `key` replaced by `operator values`, or
/// dropped when `values` is `None`.
fn replaced(key: &str, operator: &str, values: Option<&[&str]>) -> Facts {
    Facts::healthy().with(|f| {
        if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
            let requirements = &mut pool.spec.template.spec.requirements;
            requirements.retain(|r| r.key != key);
            if let Some(values) = values {
                requirements.push(requirement(key, operator, values));
            }
        }
    })
}

fn types(f: &Facts) -> (String, String, String) {
    let (status, reason, message, _) = condition_of(f, ConditionType::InstanceTypesAvailable);
    (status, reason, message)
}

#[test]
fn narrow_but_satisfiable_node_pools_are_true() {
    let narrow: Vec<(&str, Facts)> =
        vec![
            (
                "one arm64 family on arm64 AMIs",
                replaced("kubernetes.io/arch", "In", Some(&["arm64"]))
                    .with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["c6g"])
                    .with_ami_architectures(&["arm64"]),
            ),
            (
                "more than 4 vCPUs, at least 64 GiB, generation 7",
                Facts::healthy()
                    .with_pool_requirement("karpenter.k8s.aws/instance-cpu", "Gt", &["4"])
                    .with_pool_requirement("karpenter.k8s.aws/instance-memory", "Gte", &["65536"])
                    .with_pool_requirement("karpenter.k8s.aws/instance-generation", "In", &["7"]),
            ),
            (
                "spot only, in one of the subnets' zones",
                replaced("karpenter.sh/capacity-type", "In", Some(&["spot"]))
                    .with_pool_requirement("topology.kubernetes.io/zone", "In", &["us-west-2b"]),
            ),
            (
                "reserved only: whether a reservation exists is not read, so never ruled out",
                replaced("karpenter.sh/capacity-type", "In", Some(&["reserved"])),
            ),
            (
                "a key this check does not model, on a GPU it cannot see",
                Facts::healthy().with_pool_requirement(
                    "karpenter.k8s.aws/instance-gpu-count",
                    "Gt",
                    &["0"],
                ),
            ),
            (
                "AMIs of one architecture, a NodePool silent on it",
                replaced("kubernetes.io/arch", "", None).with_ami_architectures(&["arm64"]),
            ),
            (
                "an operator this check does not know",
                Facts::healthy().with_pool_requirement(
                    "karpenter.k8s.aws/instance-size",
                    "Matches",
                    &["nothing"],
                ),
            ),
        ];
    for (what, f) in narrow {
        let (status, reason, message) = types(&f);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("True", "InstanceTypesOffered"),
            "{what}: {message}"
        );
    }
    let (_, _, message) = types(&Facts::healthy().with_pool_requirement(
        "karpenter.k8s.aws/instance-gpu-count",
        "Gt",
        &["0"],
    ));
    assert!(
        message.contains("karpenter.k8s.aws/instance-gpu-count were not checked"),
        "{message}"
    );
}

#[test]
fn the_message_names_the_requirement_that_empties_the_set_and_whether_it_does_so_alone() {
    let (status, _, message) = types(
        &Facts::healthy()
            .with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m5"])
            .with_pool_requirement("karpenter.k8s.aws/instance-cpu", "Gt", &["4"]),
    );
    assert_eq!(status, "False");
    assert!(
        message.contains(
            "`karpenter.k8s.aws/instance-cpu Gt [4]` admits none of the 2 instance types"
        ),
        "{message}"
    );
    let (_, _, message) = types(&Facts::healthy().with_pool_requirement(
        "karpenter.k8s.aws/instance-family",
        "In",
        &["m9"],
    ));
    assert!(
        message.contains("no instance type EC2 offers in us-west-2a, us-west-2b satisfies"),
        "{message}"
    );
}

#[test]
fn a_type_offered_only_in_zones_the_class_has_no_subnet_in_does_not_count() {
    let f = Facts::healthy()
        .with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m5"])
        .with(|f| {
            // m5 only in us-west-2c, where the class has no subnet.
            if let Some(Observed::Found(catalog)) = &mut f.aws.instance_types {
                let mut zones = (*catalog.zones).clone();
                for t in ["m5.large", "m5.xlarge"] {
                    zones.insert(t.into(), ["us-west-2c".to_owned()].into());
                }
                catalog.zones = zones.into();
            }
        });
    let (status, reason, _) = types(&f);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NoInstanceTypeMatchesRequirements")
    );
}

#[test]
fn ec2_mac_types_karpenter_never_lists_serve_no_node_pool() {
    // Karpenter lists only x86_64 and arm64 types (aws/karpenter-provider-aws
    // pkg/providers/instancetype/instancetype.go): a NodePool only Mac types meet launches nothing.
    let with_macs = |f: &mut Facts| {
        f.aws.instance_types = Some(Observed::Found(instance_catalog(
            &[
                ("m5.large", 2, 8192, "x86_64"),
                ("mac1.metal", 12, 32768, "x86_64_mac"),
                ("mac2.metal", 8, 16384, "arm64_mac"),
            ],
            &["us-west-2a", "us-west-2b"],
        )));
    };
    let macs_only = Facts::healthy().with(with_macs).with_pool_requirement(
        "karpenter.k8s.aws/instance-family",
        "In",
        &["mac1", "mac2"],
    );
    let (status, reason, _) = types(&macs_only);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NoInstanceTypeMatchesRequirements")
    );
    // A NodePool that also allows m5 is served by it.
    let also_m5 = Facts::healthy().with(with_macs).with_pool_requirement(
        "karpenter.k8s.aws/instance-family",
        "In",
        &["mac1", "m5"],
    );
    assert_eq!(types(&also_m5).0, "True");
}

#[test]
fn what_was_not_seen_is_unknown_never_false() {
    let broken = || {
        Facts::healthy().with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m9"])
    };
    let cases: Vec<(&str, Facts, &str)> = vec![
        (
            "catalog throttled",
            broken().with(|f| f.aws.instance_types = Some(unknown(UnknownCause::Throttled))),
            "AwsThrottled",
        ),
        (
            "catalog not asked yet",
            broken().with(|f| f.aws.instance_types = None),
            "NotObserved",
        ),
        (
            "subnets denied",
            broken().with(|f| f.aws.subnets = unknown(UnknownCause::AccessDenied)),
            "AwsAccessDenied",
        ),
        (
            "no subnet selected",
            broken().with(|f| f.aws.subnets = Observed::Found(Vec::new())),
            "NotObserved",
        ),
        (
            "NodePools not listed",
            broken().with(|f| f.cluster.node_pools = unknown(UnknownCause::NotObserved)),
            "NotObserved",
        ),
        (
            "an emulator that offers nothing in the class's zones",
            broken().with(|f| {
                if let Some(Observed::Found(catalog)) = &mut f.aws.instance_types {
                    catalog.zones = Default::default();
                }
            }),
            "NotObserved",
        ),
    ];
    for (what, f, reason) in cases {
        let (status, got, message) = types(&f);
        assert_eq!(
            (status.as_str(), got.as_str()),
            ("Unknown", reason),
            "{what}: {message}"
        );
    }
}

#[test]
fn no_node_pool_is_nothing_to_check() {
    let f = Facts::healthy().with(|f| f.cluster.node_pools = Observed::Absent);
    let (status, reason, message) = types(&f);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "InstanceTypesOffered")
    );
    assert_eq!(message, "No NodePool uses this EC2NodeClass.");
}

#[test]
fn a_node_pool_is_judged_once_per_catalog_whatever_the_number_of_classes_and_evaluations() {
    let f = Facts::healthy();
    let Some(Observed::Found(catalog)) = f.aws.instance_types.clone() else {
        panic!("the fixture has a catalog");
    };
    assert!(catalog.judged.is_empty());
    // Another class with the same NodePool and zones, evaluated twice: clones share the memo.
    let other = f
        .clone()
        .with(|f| f.cluster.node_class.metadata.name = Some("other".into()));
    for facts in [&f, &other, &f] {
        types(facts);
    }
    assert_eq!(catalog.judged.len(), 1, "one question, judged once");
    types(
        &f.clone()
            .with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m5"]),
    );
    assert_eq!(
        catalog.judged.len(),
        2,
        "another question, judged once more"
    );
}

/// One NodePool that allows nothing, beside one of the same class that serves its Pods, is a
/// warning: Karpenter launches from the other (kubernetes-sigs/karpenter
/// `pkg/controllers/provisioning/scheduling/scheduler.go` skips a NodePool whose requirements
/// filtered out every instance type). False once a pending Pod may go to none but the empty one
/// (`crate::pod_fit`), or when no NodePool of the class allows anything.
#[test]
fn an_empty_node_pool_beside_one_that_serves_is_a_warning_until_a_pod_needs_it() {
    let beside = |selector: Option<(&str, &str)>| {
        let f = Facts::healthy()
            .with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m99"])
            .with_node_pool_beside(node_pool("general"))
            .with(|f| {
                if let Observed::Found(pods) = &mut f.cluster.pending_pods {
                    for pod in pods.iter_mut() {
                        std::sync::Arc::make_mut(pod).only_this_class = true;
                    }
                }
            });
        match selector {
            Some((k, v)) => f.with_pods_selecting_template_label(k, v),
            None => f,
        }
    };
    let status = super::reasons::status(&beside(None));
    let (state, reason, message) = types(&beside(None));
    assert_eq!(
        (state.as_str(), reason.as_str()),
        ("True", "InstanceTypesOffered")
    );
    assert!(
        message.starts_with("1 of 2 NodePools allow") && message.contains("see the warning"),
        "{message}"
    );
    let empty_warning = |status: &karpenter_health_api::KarpenterHealthStatus| {
        status
            .findings
            .iter()
            .find(|w| w.reason == "NodePoolAllowsNoInstanceType")
            .expect("the warning")
            .message
            .clone()
    };
    let warning = empty_warning(&status);
    assert!(
        warning.contains("NodePool default can launch nothing") && warning.contains("m99"),
        "{warning}"
    );

    // Pending Pods not read: still a warning, and it does not claim that none waits.
    let unread = beside(None).with(|f| {
        f.cluster.pending_pods = Observed::unknown(UnknownCause::Throttled, "429");
    });
    let warning = empty_warning(&super::reasons::status(&unread));
    assert!(
        warning.contains("not known (pending Pods not read)"),
        "{warning}"
    );

    // The pending Pod selects the empty NodePool's template label: no other NodePool may take it.
    let (state, reason, message) = types(&beside(Some(("team", "shop"))));
    assert_eq!(
        (state.as_str(), reason.as_str()),
        ("False", "NoInstanceTypeMatchesRequirements"),
        "{message}"
    );
    assert!(
        message.contains("shop/web-0 may go to no other NodePool"),
        "{message}"
    );

    // Alone in its class, the empty NodePool is False whatever waits.
    let alone = Facts::healthy()
        .with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m99"])
        .with(|f| f.cluster.pending_pods = Observed::Found(Vec::new()));
    assert_eq!(types(&alone).0, "False");
}

/// Under Karpenter's Strict minValues policy (its default, `MIN_VALUES_POLICY`), a NodePool whose
/// remaining types offer fewer distinct values of a key than its `minValues` is dropped
/// (kubernetes-sigs/karpenter `pkg/controllers/provisioning/scheduling/scheduler.go`: "skipping,
/// nodepool requirements filtered out all instance types"); BestEffort relaxes it.
#[test]
fn min_values_no_remaining_types_can_meet_launch_nothing_under_the_strict_policy() {
    let asking = |min: u32, policy: crate::facts::Setting| {
        Facts::healthy()
            .with_pool_requirement(
                "karpenter.k8s.aws/instance-family",
                "In",
                &["m5", "c6g", "r7i"],
            )
            .with(move |f| {
                if let Some(r) = f
                    .cluster
                    .node_pools
                    .found_mut()
                    .and_then(|p| p.first_mut())
                    .and_then(|pool| pool.spec.template.spec.requirements.last_mut())
                {
                    r.min_values = Some(min);
                }
                if let Observed::Found(k) = &mut f.cluster.karpenter {
                    k.min_values_policy = policy.clone();
                }
            })
    };
    use crate::facts::Setting;
    // amd64 only (the fixture's NodePool): m5 and r7i are left, c6g is arm64.
    let (status, reason, message) = types(&asking(3, Setting::Unset));
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NoInstanceTypeMatchesRequirements"),
        "{message}"
    );
    assert!(
        message.contains("at least 3 distinct values") && message.contains("only 2 (m5, r7i)"),
        "{message}"
    );
    assert_eq!(
        types(&asking(3, Setting::Value("Strict".into()))).0,
        "False"
    );
    assert_eq!(types(&asking(2, Setting::Unset)).0, "True");
    assert_eq!(
        types(&asking(3, Setting::Value("BestEffort".into()))).0,
        "True",
        "BestEffort relaxes minValues"
    );
    assert_eq!(
        types(&asking(3, Setting::Unresolved("from a Secret".into()))).0,
        "True",
        "a policy not read is no proof"
    );
}

/// The AMIs' architectures are Karpenter's answer for the class's current generation only: right
/// after the selector is edited, `status.amis` may still list the old images.
#[test]
fn the_architecture_check_waits_for_karpenters_answer_for_the_current_generation() {
    let arm_pool_on_amd_images = || {
        replaced("kubernetes.io/arch", "In", Some(&["arm64"])).with_ami_architectures(&["amd64"])
    };
    assert_eq!(
        types(&arm_pool_on_amd_images()).1,
        "NoInstanceTypeForAmiArchitecture"
    );
    let edited = arm_pool_on_amd_images().with(|f| {
        f.cluster.node_class.metadata.generation = Some(2);
    });
    let (status, _, message) = types(&edited);
    assert_eq!(
        status, "True",
        "AMIsReady speaks for generation 1: {message}"
    );
}

/// The reservations are of a type the reserved-only NodePool does not allow: Karpenter has no
/// reserved offering it may use, and `InstanceTypesAvailable` names the requirement that leaves
/// nothing and the reservations (`CapacityReservationsUsable` judges the selection itself, usable here).
#[test]
fn reservations_of_a_type_the_node_pool_excludes_leave_it_nothing() {
    let f = Facts::healthy()
        .with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], &["reserved"])
        .with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["r7i"]);
    let (status, reason, message, _) = condition_of(&f, ConditionType::InstanceTypesAvailable);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "NoInstanceTypeMatchesRequirements"),
        "{message}"
    );
    assert!(
        message.contains("instance-family In [r7i]")
            && message.contains("only reserved capacity")
            && message.contains("m5.large in us-west-2a"),
        "{message}"
    );
    assert_eq!(reservations(&f).0, "True", "the selection itself is usable");
    // The reserved type allowed: True.
    let fits = Facts::healthy()
        .with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], &["reserved"])
        .with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m5"]);
    assert_eq!(
        condition_of(&fits, ConditionType::InstanceTypesAvailable).0,
        "True"
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        node_pools_allowing_offered_types_are_instance_types_offered:
            Facts::healthy() => InstanceTypesAvailable is True because InstanceTypesOffered;
        a_family_no_zone_offers_is_no_instance_type_matches_requirements:
            Facts::healthy().with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m9"])
            => InstanceTypesAvailable is False because NoInstanceTypeMatchesRequirements;
        a_zone_without_a_subnet_of_the_class_is_required_zones_without_subnets:
            Facts::healthy().with_pool_requirement("topology.kubernetes.io/zone", "In", &["us-west-2c"])
            => InstanceTypesAvailable is False because RequiredZonesWithoutSubnets;
        amd64_types_for_arm64_amis_are_no_instance_type_for_ami_architecture:
            Facts::healthy().with_ami_architectures(&["arm64"])
            => InstanceTypesAvailable is False because NoInstanceTypeForAmiArchitecture;
    }
}
