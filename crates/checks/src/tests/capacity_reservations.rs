//! Scenarios of `CapacityReservationsUsable` beyond one sentence per reason: a reservation in a
//! zone the class does not use, a selector matching nothing, the gate off and an expiring block
//! are warnings while a NodePool may launch on-demand or spot; the gate follows FEATURE_GATES,
//! else the release's default; what was not seen is Unknown, never False. Pure.

use super::reasons::condition_of;
use crate::facts::{Facts, Observed, Setting, UnknownCause};
use karpenter_health_api::ConditionType;

/// (status, reason, message, warnings) of `CapacityReservationsUsable`.
pub(super) fn reservations(f: &Facts) -> (String, String, String, Vec<String>) {
    condition_of(f, ConditionType::CapacityReservationsUsable)
}

const ON_DEMAND_TOO: &[&str] = &["reserved", "on-demand"];

#[test]
fn while_on_demand_is_allowed_an_unusable_selection_is_only_a_warning() {
    for (what, f, warning) in [
        (
            "a reservation in a zone the class does not use, beside one it does",
            Facts::healthy().with_capacity_reservations(
                &[
                    ("cr-0a", "us-west-2a", "active"),
                    ("cr-0c", "us-west-2c", "active"),
                ],
                &["reserved"],
            ),
            "CapacityReservationInZoneWithoutSubnet",
        ),
        (
            "only a reservation in a zone the class does not use, on-demand allowed",
            Facts::healthy()
                .with_capacity_reservations(&[("cr-0c", "us-west-2c", "active")], ON_DEMAND_TOO),
            "CapacityReservationInZoneWithoutSubnet",
        ),
        (
            "a selector matching nothing, on-demand allowed",
            Facts::healthy().with_capacity_reservations(&[], ON_DEMAND_TOO),
            "CapacityReservationSelectorMatchesNothing",
        ),
        (
            "the gate off, on-demand allowed",
            Facts::healthy()
                .with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], ON_DEMAND_TOO)
                .with_feature_gates(Setting::Value(
                    "NodeRepair=true,ReservedCapacity=false".into(),
                )),
            "CapacityReservationsIgnored",
        ),
        (
            "an expiring capacity block, on-demand allowed",
            Facts::healthy()
                .with_capacity_reservations(&[("cr-0a", "us-west-2a", "expiring")], ON_DEMAND_TOO),
            "CapacityReservationExpiring",
        ),
    ] {
        let (status, _, message, warnings) = reservations(&f);
        assert_eq!(status, "True", "{what}: {message}");
        assert_eq!(warnings, vec![warning.to_owned()], "{what}");
        let contradiction = match warning {
            "CapacityReservationExpiring" => "active",
            _ => "each in a zone",
        };
        assert!(
            !message.contains(contradiction),
            "{what}: the True message never contradicts the warning: {message}"
        );
    }
}

#[test]
fn the_gate_follows_feature_gates_else_the_release_default() {
    let reserved_only = || {
        Facts::healthy()
            .with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], &["reserved"])
    };
    let with_version = |v: &str| {
        reserved_only().with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.version = Some(v.into());
            }
        })
    };
    // 1.6 turned the gate on by default; 1.5 had it off.
    assert_eq!(reservations(&with_version("1.6.0")).0, "True");
    assert_eq!(
        reservations(&with_version("1.5.2")).1,
        "ReservedCapacityDisabled"
    );
    // Written explicitly, the setting wins over the default.
    let on =
        with_version("1.5.2").with_feature_gates(Setting::Value("ReservedCapacity=true".into()));
    assert_eq!(reservations(&on).0, "True");
    // Not known while nothing else can launch; while on-demand can, nothing could be False.
    let fallback = Facts::healthy()
        .with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], ON_DEMAND_TOO)
        .with_feature_gates(Setting::Unresolved("from ConfigMap g key g".into()));
    assert_eq!(reservations(&fallback).0, "True");
    // From a ConfigMap the operator does not read, or not a boolean: not known.
    for gates in [
        Setting::Unresolved("from ConfigMap karpenter-gates key gates".into()),
        Setting::Value("ReservedCapacity=maybe".into()),
    ] {
        let (status, _, message, _) = reservations(&reserved_only().with_feature_gates(gates));
        assert_eq!(status, "Unknown", "{message}");
    }
}

#[test]
fn what_was_not_seen_is_unknown_never_false() {
    fn denied<T>() -> Observed<T> {
        Observed::unknown(UnknownCause::AccessDenied, "denied")
    }
    for (what, f) in [
        (
            "Karpenter has not resolved the selector for this generation",
            Facts::healthy()
                .with_capacity_reservations(&[], &["reserved"])
                .with(|f| {
                    if let Some(s) = f.cluster.node_class.status.as_mut() {
                        s.conditions
                            .retain(|c| c.type_ != "CapacityReservationsReady");
                    }
                }),
        ),
        (
            "Karpenter's answer is for an older generation",
            Facts::healthy()
                .with_capacity_reservations(&[], &["reserved"])
                .with(|f| f.cluster.node_class.metadata.generation = Some(2)),
        ),
        (
            "the subnets not read",
            Facts::healthy()
                .with_capacity_reservations(&[("cr-0c", "us-west-2c", "active")], &["reserved"])
                .with(|f| f.aws.subnets = denied()),
        ),
        (
            "the NodePools not listed",
            Facts::healthy()
                .with_capacity_reservations(&[], &["reserved"])
                .with(|f| f.cluster.node_pools = denied()),
        ),
    ] {
        let (status, reason, message, _) = reservations(&f);
        assert_eq!(status, "Unknown", "{what}: {reason} {message}");
    }
}

#[test]
fn open_reservations_karpenter_no_longer_falls_into_are_a_warning_with_the_gate_on_only() {
    // The healthy NodePool launches m5 and r7i types on demand, in us-west-2a and b.
    let open = [
        ("cr-0open", "m5.large", "us-west-2a"),
        ("cr-0elsewhere", "m5.large", "us-west-2c"),
        ("cr-0gpu", "p5.48xlarge", "us-west-2a"),
    ];
    let f = Facts::healthy().with_open_reservations(&open);
    let (status, reason, message, warnings) = reservations(&f);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "NoCapacityReservationsSelected"),
        "{message}"
    );
    assert_eq!(warnings, vec!["OpenCapacityReservationsSkipped"]);
    let text = &crate::tests::reasons::status(&f)
        .findings
        .into_iter()
        .find(|w| w.reason == "OpenCapacityReservationsSkipped")
        .expect("the warning")
        .message;
    assert!(text.contains("cr-0open"), "{text}");
    assert!(
        !text.contains("cr-0elsewhere") && !text.contains("cr-0gpu"),
        "a zone without a subnet, a type no NodePool allows: {text}"
    );
    // Gate off: launches fall into open reservations as before.
    let off = f.with_feature_gates(Setting::Value("ReservedCapacity=false".into()));
    assert!(reservations(&off).3.is_empty());
    // Selected by the class: Karpenter targets it.
    let selected = Facts::healthy()
        .with_capacity_reservations(&[("cr-0open", "us-west-2a", "active")], ON_DEMAND_TOO)
        .with_open_reservations(&open[..1]);
    assert!(reservations(&selected).3.is_empty());
    // Another platform or dedicated tenancy: the class's Linux instances on shared hardware
    // never fall into it anyway.
    for (what, change) in [
        ("Windows", ("platform", "Windows")),
        ("RHEL", ("platform", "Red Hat Enterprise Linux")),
        ("dedicated", ("tenancy", "dedicated")),
    ] {
        let other = Facts::healthy()
            .with_open_reservations(&open[..1])
            .with(move |f| {
                if let Some(Observed::Found(open)) = &mut f.aws.open_capacity_reservations {
                    match change.0 {
                        "platform" => open[0].platform = Some(change.1.into()),
                        _ => open[0].tenancy = Some(change.1.into()),
                    }
                }
            });
        assert!(reservations(&other).3.is_empty(), "{what}");
    }
    // A Windows class does fall into a Windows reservation.
    let windows = Facts::healthy()
        .with_open_reservations(&open[..1])
        .with(|f| {
            f.cluster.node_class.spec.ami_family = Some("Windows2022".into());
            if let Some(Observed::Found(open)) = &mut f.aws.open_capacity_reservations {
                open[0].platform = Some("Windows".into());
            }
        });
    assert_eq!(
        reservations(&windows).3,
        vec!["OpenCapacityReservationsSkipped"]
    );
}

/// Karpenter offers reserved capacity only for the class's reservations in
/// `status.capacityReservations`, and none for an expiring one (aws/karpenter-provider-aws
/// `pkg/providers/instancetype/offering/reserved_capacity_resolver.go`): a reserved-only NodePool
/// on a class that selects none, or only expiring capacity blocks, launches nothing.
#[test]
fn reserved_capacity_that_cannot_be_had_launches_nothing_from_reserved_only_node_pools() {
    let no_selector = |capacity: &'static [&'static str]| {
        Facts::healthy()
            .with_capacity_reservations(&[], capacity)
            .with(|f| {
                f.cluster
                    .node_class
                    .spec
                    .capacity_reservation_selector_terms
                    .clear()
            })
    };
    for (what, f) in [
        ("no selector terms", no_selector(&["reserved"])),
        (
            "only expiring capacity blocks",
            Facts::healthy()
                .with_capacity_reservations(&[("cr-0a", "us-west-2a", "expiring")], &["reserved"]),
        ),
    ] {
        let (status, reason, message, _) = reservations(&f);
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "CapacityReservationsNotFound"),
            "{what}: {message}"
        );
    }
    // Beside a NodePool that launches on demand: a warning naming the reserved-only one.
    let beside = no_selector(&["reserved"]).with(|f| {
        if let Some(pools) = f.cluster.node_pools.found_mut() {
            pools.push(crate::testing::node_pool("general"));
        }
    });
    let (status, reason, message, warnings) = reservations(&beside);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "NoCapacityReservationsSelected")
    );
    assert!(message.contains("see the warning"), "{message}");
    assert_eq!(warnings, vec!["CapacityReservationSelectorMatchesNothing"]);
    // Without reserved-only NodePools, nothing to say.
    let (status, _, message, warnings) = reservations(&no_selector(ON_DEMAND_TOO));
    assert_eq!(status, "True");
    assert!(
        warnings.is_empty() && !message.contains("warning"),
        "{message}"
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        no_selector_terms_is_no_capacity_reservations_selected:
            Facts::healthy() => CapacityReservationsUsable is True because NoCapacityReservationsSelected;
        an_active_reservation_in_a_subnet_zone_is_capacity_reservations_selected:
            Facts::healthy().with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], &["reserved"])
            => CapacityReservationsUsable is True because CapacityReservationsSelected;
        the_gate_off_with_reserved_only_pools_is_reserved_capacity_disabled:
            Facts::healthy()
                .with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], &["reserved"])
                .with_feature_gates(Setting::Value("ReservedCapacity=false".into()))
            => CapacityReservationsUsable is False because ReservedCapacityDisabled;
        a_selector_matching_nothing_for_reserved_only_pools_is_capacity_reservations_not_found:
            Facts::healthy().with_capacity_reservations(&[], &["reserved"])
            => CapacityReservationsUsable is False because CapacityReservationsNotFound;
        reservations_only_where_the_class_has_no_subnet_is_capacity_reservations_only_in_zones_without_subnets:
            Facts::healthy().with_capacity_reservations(&[("cr-0c", "us-west-2c", "active")], &["reserved"])
            => CapacityReservationsUsable is False because CapacityReservationsOnlyInZonesWithoutSubnets;
    }
}
