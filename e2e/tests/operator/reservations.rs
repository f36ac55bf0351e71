//! Capacity reservations (issue 25), end to end on the real API server, moto and the gap proxy's
//! DescribeCapacityReservations (moto lacks it). The class starts all True without a selector;
//! an open reservation of the account that Karpenter's launches no longer fall into (its
//! ReservedCapacity gate is on) is a warning, gone once the account holds none. Selecting
//! reservations, one of them in a zone the class has no
//! subnet in, while the NodePool may fall back to on-demand is a warning (a status log proves no
//! False); a NodePool that allows only reserved capacity while Karpenter found no reservation
//! turns `CapacityReservationsUsable` False with `CapacityReservationsNotFound`, a reservation in
//! the class's zone turns it True again, and the controller's `ReservedCapacity` gate off is
//! `ReservedCapacityDisabled` until it is on again. Does IO (API server, moto, gap proxy).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: moto has
//! no capacity reservations for Karpenter to launch into.

use anyhow::Result;
use karpenter_health_api::{ConditionType, Reason, Severity};
use karpenter_health_e2e::fault_proxy::capacity_reservations::CapacityReservation;
use karpenter_health_e2e::fixture::{Fixture, REFRESH};
use karpenter_health_e2e::health_status::{finding_message, message, subnet_zone};
use karpenter_health_e2e::status_log::StatusLog;
use serde_json::{Value, json};

fn capacity_type(values: &[&str]) -> Value {
    json!([
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": values},
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_only_node_pools_without_a_usable_reservation_are_capacity_reservations_not_found()
-> Result<()> {
    let fx = Fixture::seed("reserve", "us-west-2", "1.8.6").await?;
    let outcome: Result<()> = async {
        let operator = fx.start_operator(None, true).await?;
        let status = fx.wait_healthy("without a reservation selector").await?;
        let zone = subnet_zone(&status)?;
        let elsewhere = if zone.ends_with('c') {
            "us-west-2a"
        } else {
            "us-west-2c"
        };

        // An open reservation of a type the NodePool launches on demand, in the class's zone.
        let log = StatusLog::start(&fx.admin, &fx.name);
        let open = |id: &str, criteria: &str| CapacityReservation {
            id: id.into(),
            instance_type: "m5.large".into(),
            availability_zone: zone.clone(),
            instance_match_criteria: criteria.into(),
            state: "active".into(),
            total: 4,
            available: 4,
        };
        fx.proxy.set_capacity_reservations(vec![
            open("cr-0e0000000000000e1", "open"),
            open("cr-0e0000000000000e2", "targeted"),
        ]);
        let status = fx
            .wait_status("the warning about the idle open reservation", |s| {
                s.findings
                    .iter()
                    .any(|f| f.reason == "OpenCapacityReservationsSkipped")
            })
            .await?;
        let warning = finding_message(&status, "OpenCapacityReservationsSkipped");
        assert!(
            warning.contains("cr-0e0000000000000e1") && !warning.contains("cr-0e0000000000000e2"),
            "only the open one, as EC2's filter answers: {warning}"
        );
        fx.proxy.set_capacity_reservations(Vec::new());
        fx.wait_status("no warning once the account holds none", |s| {
            !s.findings
                .iter()
                .any(|f| f.reason == "OpenCapacityReservationsSkipped")
        })
        .await?;
        for held in log.stop().await {
            let c = held.condition(ConditionType::CapacityReservationsUsable);
            assert!(
                c.is_none_or(|c| c.status == "True"),
                "an idle open reservation is only a warning: {c:?}"
            );
        }

        // Reservations, one in a zone without a subnet of the class; on-demand allowed too.
        let log = StatusLog::start(&fx.admin, &fx.name);
        fx.patch_node_pool_requirements(capacity_type(&["reserved", "on-demand"]))
            .await?;
        fx.patch_node_class_spec(
            json!({"capacityReservationSelectorTerms": [{"tags": {"team": "ml"}}]}),
        )
        .await?;
        fx.karpenter_found_reservations(&[
            ("cr-0a0000000000000a1", &zone, "active"),
            ("cr-0c0000000000000c1", elsewhere, "active"),
        ])
        .await?;
        let status = fx
            .wait_status("the warning about the reservation without a subnet", |s| {
                s.findings.iter().any(|f| {
                    f.severity == Severity::Warning
                        && f.reason == "CapacityReservationInZoneWithoutSubnet"
                })
            })
            .await?;
        let text = message(&status, ConditionType::CapacityReservationsUsable);
        assert!(
            text.starts_with("2 capacity reservation(s) selected"),
            "{text}"
        );
        tokio::time::sleep(REFRESH * 2).await;
        for held in log.stop().await {
            let c = held.condition(ConditionType::CapacityReservationsUsable);
            assert!(
                c.is_none_or(|c| c.status != "False"),
                "False while on-demand is allowed: {c:?}"
            );
        }

        // Reserved capacity only, and Karpenter found nothing for the selector.
        fx.patch_node_pool_requirements(capacity_type(&["reserved"]))
            .await?;
        fx.karpenter_found_reservations(&[]).await?;
        let status = fx
            .wait_only_failed(
                ConditionType::CapacityReservationsUsable,
                Reason::CapacityReservationsNotFound,
            )
            .await?;
        let text = message(&status, ConditionType::CapacityReservationsUsable);
        assert!(text.contains(&fx.name), "names the NodePool: {text}");

        fx.karpenter_found_reservations(&[("cr-0a0000000000000a1", &zone, "active")])
            .await?;
        fx.wait_healthy("with a reservation in the class's zone")
            .await?;

        // The controller runs with its ReservedCapacity gate off.
        fx.set_karpenter_env(
            "1.8.6",
            &[("FEATURE_GATES", "ReservedCapacity=false,NodeRepair=false")],
        )
        .await?;
        fx.wait_only_failed(
            ConditionType::CapacityReservationsUsable,
            Reason::ReservedCapacityDisabled,
        )
        .await?;
        fx.set_karpenter_env("1.8.6", &[("FEATURE_GATES", "ReservedCapacity=true")])
            .await?;
        fx.wait_healthy("with the gate on again").await?;
        operator.stop().await
    }
    .await;
    fx.finish(outcome).await
}
