//! One reconcile of one EC2NodeClass, as a pipeline of files: [`gather`] (IO) → [`decide`]
//! (evaluate, confirm, write or not; pure) → [`write`] (the status writer, IO, only on change) →
//! [`announce`] (transitions as Events), then [`schedule`] (when it runs again); and the error
//! policy. Does IO.

pub mod announce;
pub mod decide;
pub mod gather;
pub mod schedule;
pub mod write;

use crate::context::Context;
use crate::error::Error;
use crate::health_object;
use crate::triggers::StoreReady;
use decide::{Conclude, Held};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{KarpenterHealth, KarpenterHealthStatus};
use karpenter_health_checks::Facts;
use kube::core::DeserializeGuard;
use kube::runtime::controller::Action;
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Resource, ResourceExt};
use schedule::{HEALTHS_NOT_LISTED_RETRY, next_run};
pub use schedule::{Lane, retry_after};
use std::sync::Arc;
use std::time::Instant;
use tracing::Instrument;
use write::Decision;

/// The name of a guarded EC2NodeClass, malformed or not, for logs and spans.
fn name_of(guarded: &DeserializeGuard<EC2NodeClass>) -> String {
    match &guarded.0 {
        Ok(node_class) => node_class.name_any(),
        Err(invalid) => invalid
            .metadata
            .name
            .clone()
            .unwrap_or_else(|| "<unnamed>".into()),
    }
}

/// Reconciles one EC2NodeClass inside a span naming it, so every log line of the reconcile (the
/// AWS adapter's included) carries its EC2NodeClass.
pub async fn reconcile(
    guarded: Arc<DeserializeGuard<EC2NodeClass>>,
    ctx: Arc<Context>,
    lane: Lane,
) -> Result<Action, Error> {
    let span = tracing::info_span!("reconcile", node_class = %name_of(&guarded), ?lane);
    reconcile_in_span(guarded, ctx, lane).instrument(span).await
}

async fn reconcile_in_span(
    guarded: Arc<DeserializeGuard<EC2NodeClass>>,
    ctx: Arc<Context>,
    lane: Lane,
) -> Result<Action, Error> {
    let started = Instant::now();
    let node_class = match &guarded.0 {
        Ok(node_class) => node_class,
        Err(invalid) => {
            // A malformed object must not stop the watch: report it by name and move on.
            tracing::warn!(error = %invalid.error, "skipping malformed EC2NodeClass");
            return Ok(Action::await_change());
        }
    };
    let name = node_class.name_any();
    if node_class.metadata.deletion_timestamp.is_some() {
        ctx.metrics.forget(&name);
        ctx.writer.forget(&name);
        ctx.forget_class_lock(&name);
        return Ok(Action::await_change());
    }
    // The KarpenterHealth cache must be listed before it is read: read empty at a start or a
    // leader change, every class would be re-created and flash through Pending. Polled, not
    // awaited: of several reconciles awaiting the store's readiness at once, kube-runtime 5's
    // `wait_until_ready` woke only one, and the others hung for good (seen with three classes).
    if ctx.healths.is_empty_or_unsynced() {
        return Ok(Action::requeue(HEALTHS_NOT_LISTED_RETRY));
    }
    // One reconcile of a class at a time across both lanes: a decision made on older caches
    // must not be handed to the writer after a newer one.
    let _one_at_a_time = ctx.class_lock(&name).lock_owned().await;
    let status = visit(&ctx, node_class, &name).await?;
    ctx.metrics.record_status(
        &name,
        &ctx.config.copy_labels.metric_labels(node_class),
        &status,
    );
    record_fleet_rule_matches(&ctx, &name);
    ctx.metrics.observe_reconcile(&name, started.elapsed());
    ctx.reset_failures(&name);
    Ok(
        match next_run(lane, &status, ctx.config.refresh_interval, &name) {
            Some(after) => Action::requeue(after),
            None => Action::await_change(),
        },
    )
}

/// The pipeline for one class, under its lock: open (Pending at a first visit) → gather (IO) →
/// conclude (evaluate, confirm a new False, decide whether to write; pure) → hand the decisions
/// to the status writer, which writes and announces apart from this reconcile.
async fn visit(
    ctx: &Context,
    node_class: &EC2NodeClass,
    name: &str,
) -> Result<KarpenterHealthStatus, Error> {
    let healths: Api<KarpenterHealth> = Api::all(ctx.client.clone());
    let stored = ensure_owned_health(ctx, &healths, node_class).await?;
    let health = stored.object_ref(&());
    let class = node_class.object_ref(&());
    let decision = |status: &KarpenterHealthStatus, shown_before, triggered_at| Decision {
        status: status.clone(),
        shown_before,
        health: health.clone(),
        node_class: class.clone(),
        triggered_at,
    };
    let mut held = Held {
        on_server: stored.status.clone(),
        previous: ctx.previous_status(name, Some(&stored)),
    };
    // Through the writer like every decision, so answers that come at once replace it unwritten.
    if let Some(pending) = decide::opening(&mut held, || KarpenterHealthStatus {
        observed_generation: stored.metadata.generation,
        ..KarpenterHealthStatus::pending(Time(status_clock()), node_class.metadata.generation)
    }) {
        ctx.writer
            .submit(name, decision(&pending, held.on_server.clone(), None));
    }
    let (facts, served_due) = ctx.gather(node_class).await;
    let conclude = Conclude {
        held: &held,
        evaluate: |facts: &Facts, previous: Option<&KarpenterHealthStatus>| KarpenterHealthStatus {
            // kstatus compares this with the KarpenterHealth's own generation (GitOps health).
            observed_generation: stored.metadata.generation,
            ..karpenter_health_checks::evaluate(facts, &ctx.settings, previous, status_clock())
        },
        written_lately: |status: &KarpenterHealthStatus| ctx.writer.wrote(name, status),
        refresh: ctx.config.refresh_interval,
    };
    let verdict = conclude
        .on(facts, served_due, |facts| ctx.reread_aws(node_class, facts))
        .await;
    let triggered_at = take_trigger_time(ctx, name);
    if verdict.write {
        tracing::debug!(
            server_differs = verdict.server_differs,
            reread = verdict.reread,
            changed = ?decide::changed_conditions(held.on_server.as_ref(), &verdict.status),
            "deciding status"
        );
        ctx.writer.submit(
            name,
            decision(&verdict.status, held.previous.clone(), triggered_at),
        );
    }
    Ok(verdict.status)
}

/// The KarpenterHealth of `node_class` from the cache when it is owned by this very object (not
/// by a deleted namesake) and carries the class's copied labels as they are, else created,
/// adopted or relabelled now.
async fn ensure_owned_health(
    ctx: &Context,
    healths: &Api<KarpenterHealth>,
    node_class: &EC2NodeClass,
) -> Result<KarpenterHealth, Error> {
    let stored = ctx.healths.get(&ObjectRef::new(&node_class.name_any()));
    let copied = &ctx.config.copy_labels;
    let current = stored.as_ref().is_some_and(|h| {
        h.owner_references()
            .iter()
            .any(|o| Some(&o.uid) == node_class.metadata.uid.as_ref())
            && copied.in_sync(h.metadata.labels.as_ref(), node_class)
    });
    match (stored, current) {
        (Some(health), true) => Ok(health.as_ref().clone()),
        _ => health_object::ensure(healths, node_class, copied.of(node_class)).await,
    }
}

/// How many EC2NodeClasses each fleet acceptance rule matches, from the KarpenterHealths (one
/// per class) and the class just reconciled: a rule matching none is reported by no class.
fn record_fleet_rule_matches(ctx: &Context, name: &str) {
    let rules = &ctx.settings.acceptances.fleet;
    if rules.is_empty() {
        return;
    }
    let healths = ctx.healths.state();
    let names = healths
        .iter()
        .map(|h| h.metadata.name.as_deref().unwrap_or_default())
        .filter(|n| *n != name)
        .chain(std::iter::once(name));
    let counts = karpenter_health_checks::acceptance::fleet_rule_matches(rules, names);
    ctx.metrics.record_fleet_rule_matches(rules, &counts);
}

/// When the change that asked for `name` arrived, if one did; clears it.
fn take_trigger_time(ctx: &Context, name: &str) -> Option<Instant> {
    ctx.triggered_at
        .lock()
        .ok()
        .and_then(|mut m| m.remove(name))
}

/// Now, in whole seconds: the precision the API server keeps of a status's times (`metav1.Time`
/// is RFC 3339 without fractions). With nanoseconds, the object read back never equalled the
/// status just written, so every change was written twice (found by the benchmark: 2 status
/// writes per EC2NodeClass per aws-auth edit).
fn status_clock() -> jiff::Timestamp {
    jiff::Timestamp::from_second(jiff::Timestamp::now().as_second())
        .unwrap_or(jiff::Timestamp::now())
}

/// The error policy: transient errors back off per EC2NodeClass, permanent ones are retried
/// slowly; both are logged with the EC2NodeClass and counted.
pub fn error_policy(
    object: Arc<DeserializeGuard<EC2NodeClass>>,
    error: &Error,
    ctx: Arc<Context>,
) -> Action {
    let name = name_of(&object);
    let retry = error.retry();
    let failures = ctx.count_failure(&name);
    let after = retry_after(retry, failures, ctx.config.refresh_interval);
    tracing::warn!(
        node_class = %name,
        %error,
        kind = error.metric_label(),
        ?retry,
        failures,
        retry_in = ?after,
        "reconcile failed"
    );
    ctx.metrics.reconcile_error(error.metric_label());
    Action::requeue(after)
}

/// A status with every check Pending, evaluated at `seconds`, for the steps' tests.
#[cfg(test)]
pub(crate) fn status_at(seconds: i64) -> KarpenterHealthStatus {
    let at = Time(jiff::Timestamp::from_second(seconds).unwrap());
    KarpenterHealthStatus {
        last_evaluated: Some(at.clone()),
        ..KarpenterHealthStatus::pending(at, Some(1))
    }
}
