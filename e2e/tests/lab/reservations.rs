//! Verdict against behaviour, capacity reservations: NodePools that allow only reserved capacity,
//! with the real Karpenter (the release `KH_KARPENTER_RELEASE` names) reading the gap proxy's
//! DescribeCapacityReservations (moto has none) and writing its own `status.capacityReservations`.
//! Each broken setup shows Karpenter refusing to schedule the waiting Pod and launching nothing;
//! its twin, a reservation Karpenter can use, shows Karpenter making a NodeClaim of reserved
//! capacity for the same Pod (the control that the refusal is the setup's: moto keeps no
//! reservation capacity, so the launch itself proves nothing more). Does IO (the bed, moto,
//! Karpenter).
//!
//! Karpenter offers reserved capacity only for the reservations its class resolved, in zones the
//! class has subnets in, and only with its ReservedCapacity feature gate on
//! (aws/karpenter-provider-aws `pkg/providers/instancetype/offering/`, `pkg/providers/
//! capacityreservation/`); a Pod that only reserved capacity may take is then unschedulable for
//! it (kubernetes-sigs/karpenter `pkg/controllers/provisioning/provisioner.go`,
//! "could not schedule pod").

use anyhow::{Context as _, Result, ensure};
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::fault_proxy::capacity_reservations::CapacityReservation;
use karpenter_health_e2e::lab::{LAUNCH, Lab, PROVISIONER_PASS};
use serde_json::{Value, json};

/// The test's NodePool allows `capacity_types` of m5.large.
fn capacity_types(values: &[&str]) -> Value {
    json!({"spec": {"template": {"spec": {"requirements": [
        {"key": "karpenter.sh/capacity-type", "operator": "In", "values": values},
        {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["m5.large"]},
    ]}}}})
}

/// A targeted m5.large reservation with room, in `zone`.
fn reservation(id: &str, zone: &str) -> CapacityReservation {
    CapacityReservation {
        id: id.into(),
        instance_type: "m5.large".into(),
        availability_zone: zone.into(),
        instance_match_criteria: "targeted".into(),
        state: "active".into(),
        total: 2,
        available: 2,
    }
}

/// The zone of the class's subnet as Karpenter resolved it, and another zone of the region.
async fn zones(lab: &Lab) -> Result<(String, String)> {
    lab.karpenter_condition("SubnetsReady", "True").await?;
    let class = lab.node_class().await?;
    let zone = class
        .data
        .pointer("/status/subnets/0/zone")
        .and_then(Value::as_str)
        .context("Karpenter resolved no subnet")?
        .to_owned();
    let elsewhere = ["a", "b", "c"]
        .iter()
        .map(|suffix| format!("{}{suffix}", lab.fx.region))
        .find(|z| *z != zone)
        .context("no other zone")?;
    Ok((zone, elsewhere))
}

/// The reservation ids Karpenter wrote into the class's `status.capacityReservations`.
async fn resolved_reservations(lab: &Lab) -> Result<Vec<String>> {
    let class = lab.node_class().await?;
    Ok(class
        .data
        .pointer("/status/capacityReservations")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| r["id"].as_str().map(str::to_owned))
        .collect())
}

/// Karpenter refuses to schedule Pod `pod` (its own log line) and has launched nothing.
async fn schedules_nothing(lab: &Lab, pod: &str) -> Result<()> {
    let refused = lab
        .wait_logged("could not schedule pod", &[pod], PROVISIONER_PASS)
        .await?;
    eprintln!("lab: Karpenter on the Pod: {refused}");
    ensure!(
        lab.node_claims().await?.is_empty() && lab.launched_instances().await?.is_empty(),
        "Karpenter launched for a reserved-only NodePool without a reservation it can use"
    );
    Ok(())
}

/// CapacityReservationsNotFound, then CapacityReservationsOnlyInZonesWithoutSubnets: a
/// reserved-only NodePool whose class selects no reservation (a tag none carries), then one in a
/// zone the class has no subnet in. Karpenter resolves none, then the one, and schedules the Pod
/// on neither; allowed on-demand capacity, it launches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reserved_only_node_pool_without_a_usable_reservation_launches_nothing() -> Result<()> {
    let lab = Lab::start_with_class(
        "lab-reserved",
        "us-east-1",
        |_| json!({"capacityReservationSelectorTerms": [{"tags": {"team": "no-such-team"}}]}),
    )
    .await?;
    let outcome: Result<()> = async {
        lab.patch_node_pool(capacity_types(&["reserved"])).await?;
        let (_, elsewhere) = zones(&lab).await?;
        let operator = lab.fx.start_operator(None, false).await?;
        lab.workload("web", "500m").await?;
        lab.fx
            .wait_failed(&[(
                ConditionType::CapacityReservationsUsable,
                Reason::CapacityReservationsNotFound,
            )])
            .await?;
        // What Karpenter does: it resolves no reservation (ready all the same) and cannot
        // schedule the Pod.
        lab.karpenter_condition("CapacityReservationsReady", "True")
            .await?;
        ensure!(
            resolved_reservations(&lab).await?.is_empty(),
            "Karpenter resolved a reservation for a tag none carries"
        );
        schedules_nothing(&lab, "web").await?;

        // A reservation the class selects, in a zone it has no subnet in.
        let id = "cr-0a1b2c3d4e5f60718";
        lab.fx
            .proxy
            .set_capacity_reservations(vec![reservation(id, &elsewhere)]);
        lab.fx
            .patch_node_class_spec(json!({"capacityReservationSelectorTerms": [{"id": id}]}))
            .await?;
        let status = lab
            .fx
            .wait_failed(&[(
                ConditionType::CapacityReservationsUsable,
                Reason::CapacityReservationsOnlyInZonesWithoutSubnets,
            )])
            .await?;
        let message = karpenter_health_e2e::health_status::message(
            &status,
            ConditionType::CapacityReservationsUsable,
        );
        ensure!(message.contains(id), "names {id}: {message}");
        karpenter_health_e2e::wait_for("Karpenter to resolve the reservation", LAUNCH, || async {
            Ok(resolved_reservations(&lab)
                .await?
                .contains(&id.to_owned())
                .then_some(()))
        })
        .await?;
        lab.delete_pod("web").await?;
        lab.workload("web-again", "500m").await?;
        schedules_nothing(&lab, "web-again").await?;

        // The twin, and the control that Karpenter on this bed does schedule reserved capacity:
        // a reservation in the class's own zone. Karpenter makes a reserved NodeClaim for it.
        let (zone, _) = zones(&lab).await?;
        let usable = "cr-0b1c2d3e4f5a60719";
        lab.fx
            .proxy
            .set_capacity_reservations(vec![reservation(usable, &zone)]);
        lab.fx
            .patch_node_class_spec(json!({"capacityReservationSelectorTerms": [{"id": usable}]}))
            .await?;
        reserved_claim(&lab).await?;
        lab.fx
            .wait_healthy("with a reservation in the class's zone")
            .await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}

/// Waits until Karpenter made a NodeClaim of reserved capacity for the test's NodePool.
async fn reserved_claim(lab: &Lab) -> Result<()> {
    karpenter_health_e2e::wait_for("a NodeClaim of reserved capacity", LAUNCH, || async {
        Ok(lab
            .node_claims()
            .await?
            .iter()
            .any(|c| {
                c.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get("karpenter.sh/capacity-type"))
                    .is_some_and(|t| t == "reserved")
            })
            .then_some(()))
    })
    .await
}

/// ReservedCapacityDisabled: Karpenter started with its ReservedCapacity feature gate off
/// (`FEATURE_GATES=ReservedCapacity=false`, the chart's `settings.featureGates.reservedCapacity`)
/// offers no reserved capacity even for a reservation in the class's own zone, so a reserved-only
/// NodePool launches nothing; allowed on-demand capacity, it launches (the reservation unused).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reserved_capacity_gated_off_launches_nothing_for_a_reserved_only_node_pool() -> Result<()>
{
    let id = "cr-0f1e2d3c4b5a69788";
    let mut lab = Lab::start_seeded_with(
        "lab-reserved-off",
        "us-east-1",
        |settings| settings.feature_gates = Some("ReservedCapacity=false".into()),
        |_| json!({"capacityReservationSelectorTerms": [{"id": id}]}),
    )
    .await?;
    let outcome: Result<()> = async {
        let (zone, _) = zones(&lab).await?;
        lab.fx
            .proxy
            .set_capacity_reservations(vec![reservation(id, &zone)]);
        lab.patch_node_pool(capacity_types(&["reserved"])).await?;
        let operator = lab.fx.start_operator(None, false).await?;
        lab.workload("web", "500m").await?;
        lab.fx
            .wait_only_failed(
                ConditionType::CapacityReservationsUsable,
                Reason::ReservedCapacityDisabled,
            )
            .await?;
        schedules_nothing(&lab, "web").await?;
        // The twin, and the control that the reservation is usable: the gate on (the chart's
        // value changed, Karpenter restarted with it). Karpenter makes a reserved NodeClaim.
        lab.reconfigure_karpenter(|settings| {
            settings.feature_gates = Some("ReservedCapacity=true".into());
        })
        .await?;
        reserved_claim(&lab).await?;
        lab.fx
            .wait_healthy("with the ReservedCapacity gate on")
            .await?;
        operator.stop().await
    }
    .await;
    lab.finish(outcome).await
}
