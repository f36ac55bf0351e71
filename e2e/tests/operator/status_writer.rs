//! The status writer on a real kube-apiserver: of a burst of decisions for one class the latest
//! is what the server holds, with far fewer writes than decisions; every class of a burst is
//! written; a transition every class makes at once is one Event, not one per class; a writer
//! closed when leading ends writes nothing more. Does IO (API server, its audit log).

use anyhow::{Result, ensure};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{ConditionType, KarpenterHealth, KarpenterHealthStatus};
use karpenter_health_e2e::{Bed, apply_yaml, audit, install_health_crd, minimal_node_class_yaml};
use karpenter_health_operator::health_object;
use karpenter_health_operator::metrics::Metrics;
use karpenter_health_operator::reconcile::announce::EVENT_WINDOW;
use karpenter_health_operator::reconcile::write::WrittenStatuses;
use karpenter_health_operator::reconcile::write::{Decision, StatusWriter};
use kube::runtime::events::Reporter;
use kube::{Api, Resource};
use std::sync::Arc;
use std::time::Duration;

/// A status that says which decision of a burst it is, in its Ready message.
fn decision_number(n: usize) -> KarpenterHealthStatus {
    let mut status = KarpenterHealthStatus::pending(Time(jiff::Timestamp::UNIX_EPOCH), Some(1));
    status.conditions[0].message = format!("decision {n}");
    status
}

async fn classes_with_healths(client: &kube::Client, names: &[&str]) -> Result<Vec<Decision>> {
    let classes: Api<EC2NodeClass> = Api::all(client.clone());
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    let mut decisions = Vec::new();
    for name in names {
        apply_yaml(client, &minimal_node_class_yaml(name)).await?;
        let class = classes.get(name).await?;
        let health = health_object::ensure(&healths, &class, Default::default()).await?;
        decisions.push(Decision {
            status: decision_number(0),
            shown_before: None,
            health: health.object_ref(&()),
            node_class: class.object_ref(&()),
            triggered_at: None,
        });
    }
    Ok(decisions)
}

fn writer(client: &kube::Client, metrics: &Arc<Metrics>) -> Arc<StatusWriter> {
    let reporter = Reporter {
        controller: "karpenter-health-e2e".into(),
        instance: None,
    };
    StatusWriter::new(
        Api::all(client.clone()),
        WrittenStatuses::default(),
        metrics.clone(),
        client.clone(),
        reporter,
        Duration::from_secs(300),
    )
}

fn message_on_server(health: &KarpenterHealth) -> Option<String> {
    Some(health.status.as_ref()?.conditions.first()?.message.clone())
}

#[tokio::test]
async fn the_latest_decision_of_a_burst_is_written_and_far_fewer_writes_than_decisions()
-> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let names = ["sw-burst-a", "sw-burst-b", "sw-burst-c"];
    let decisions = classes_with_healths(&client, &names).await?;
    let metrics = Arc::new(Metrics::default());
    let writer = writer(&client, &metrics);
    const BURST: usize = 200;
    for n in 1..=BURST {
        for (name, decision) in names.iter().zip(&decisions) {
            writer.submit(
                name,
                Decision {
                    status: decision_number(n),
                    ..decision.clone()
                },
            );
        }
    }
    ensure!(
        writer.flush(Duration::from_secs(30)).await,
        "the writer did not finish within 30 s"
    );
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    for name in names {
        let on_server = message_on_server(&healths.get(name).await?);
        ensure!(
            on_server.as_deref() == Some(&*format!("decision {BURST}")),
            "{name} holds {on_server:?}, not the last decision"
        );
    }
    let writes = metrics.status_patches();
    // One write per class may be in flight when the burst begins, and one more holds the latest.
    ensure!(
        (names.len() as u64..=2 * names.len() as u64).contains(&writes),
        "{writes} writes for {} decisions on {} classes",
        BURST * names.len(),
        names.len()
    );
    Ok(())
}

/// The bed's admin user: the identity these tests write with.
const ADMIN_USER: &str = "admin";

/// A status whose `NodeRoleMapped` and `Ready` are `status` (a real transition between two).
fn mapped(status: &str) -> KarpenterHealthStatus {
    let mut out = KarpenterHealthStatus::pending(Time(jiff::Timestamp::UNIX_EPOCH), Some(1));
    for condition in &mut out.conditions {
        if condition.type_ == ConditionType::NodeRoleMapped.as_str()
            || condition.type_ == ConditionType::Ready.as_str()
        {
            condition.status = status.into();
            condition.reason = format!("Mapped{status}");
            condition.message = format!("the node role's mapping is {status}");
        }
    }
    out
}

#[tokio::test]
async fn a_transition_every_class_makes_at_once_is_one_event_not_one_per_class() -> Result<()> {
    let bed = Bed::from_env()?;
    let audit_log = std::path::PathBuf::from(bed.var("KH_AUDIT_LOG")?);
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let names = ["sw-events-a", "sw-events-b", "sw-events-c", "sw-events-d"];
    let decisions = classes_with_healths(&client, &names).await?;
    let metrics = Arc::new(Metrics::default());
    let writer = writer(&client, &metrics);
    let submit_all = |status: KarpenterHealthStatus| {
        for (name, decision) in names.iter().zip(&decisions) {
            writer.submit(
                name,
                Decision {
                    status: status.clone(),
                    ..decision.clone()
                },
            );
        }
    };
    submit_all(mapped("True"));
    ensure!(writer.flush(Duration::from_secs(30)).await);
    let from = audit::offset(&audit_log);
    // Both conditions turn False on every class: 8 transitions, 2 causes.
    submit_all(mapped("False"));
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    for name in names {
        karpenter_health_e2e::wait_for(
            &format!("{name}'s NodeRoleMapped False on the server"),
            Duration::from_secs(30),
            || {
                let healths = healths.clone();
                async move {
                    let health = healths.get(name).await?;
                    let turned = health.status.is_some_and(|s| {
                        s.condition(ConditionType::NodeRoleMapped)
                            .is_some_and(|c| c.status == "False")
                    });
                    Ok(turned.then_some(()))
                }
            },
        )
        .await?;
    }
    // The announcement waits out its window on its own; no flush hurries it.
    tokio::time::sleep(EVENT_WINDOW + Duration::from_secs(2)).await;
    let event_writes: Vec<_> = audit::requests_since(&audit_log, from, ADMIN_USER)?
        .into_iter()
        .filter(|r| r.resource == "events" && r.verb == "create")
        .collect();
    ensure!(
        event_writes.len() == 2,
        "{} Event creations for 2 transitions on {} classes (one per transition and class would \
         be {}): {event_writes:?}",
        event_writes.len(),
        names.len(),
        2 * names.len()
    );
    ensure!(writer.flush(Duration::from_secs(5)).await);
    Ok(())
}

#[tokio::test]
async fn a_closed_writer_writes_nothing_more() -> Result<()> {
    let bed = Bed::from_env()?;
    let client = bed.admin_client().await?;
    install_health_crd(&client).await?;
    let decisions = classes_with_healths(&client, &["sw-closed"]).await?;
    let metrics = Arc::new(Metrics::default());
    let writer = writer(&client, &metrics);
    writer.submit("sw-closed", decisions[0].clone());
    ensure!(writer.flush(Duration::from_secs(30)).await);
    writer.close();
    ensure!(
        writer.flush(Duration::ZERO).await,
        "a closed writer holds nothing"
    );
    writer.submit(
        "sw-closed",
        Decision {
            status: decision_number(7),
            ..decisions[0].clone()
        },
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let healths: Api<KarpenterHealth> = Api::all(client.clone());
    let on_server = message_on_server(&healths.get("sw-closed").await?);
    ensure!(
        on_server.as_deref() == Some("decision 0"),
        "a closed writer wrote {on_server:?}"
    );
    Ok(())
}
