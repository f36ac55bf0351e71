//! Change-to-status latency: aws-auth edits, alternately breaking and repairing the node role
//! mapping, each timed from the write returning until every EC2NodeClass's NodeRoleMapped changed
//! as the bench's own KarpenterHealth watch saw it (beside aws-auth's own watch event), with the
//! AWS calls the operator made meanwhile. Does IO (API server, the operator's /metrics).

use crate::aws_calls::{self, total_aws_calls};
use crate::observe::{OPERATOR_WRITTEN, apiserver_requests, scrape};
use crate::operator::Operator;
use crate::results::{Edit, Window};
use crate::seed;
use crate::state::{Bench, jitter, ms, signed_ms};
use crate::timeline::Phase;
use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::ConfigMap;
use karpenter_health_api::KarpenterHealth;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use std::time::{Duration, Instant};

/// How long an edit of the edits phase or of a storm may take to land on every class; one that
/// takes longer counts as timed out (and as this long in the issue 13 percentiles).
pub const EDIT_DEADLINE: Duration = Duration::from_secs(60);

/// How long the bench waits, after an edit timed out, for every class to show it anyway before
/// the next edit; otherwise the next edit could wait for a change the operator never makes.
const SETTLE_AFTER_TIMEOUT: Duration = Duration::from_secs(300);

impl Bench {
    /// Writes aws-auth with the node role mapping broken or repaired, retrying while the API
    /// server is away; returns (write start, write returned, resourceVersion).
    async fn write_aws_auth(&self, broken: bool) -> Result<(Instant, Instant, String)> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), "kube-system");
        let mut tries = 0;
        loop {
            let start = Instant::now();
            match api
                .patch(
                    "aws-auth",
                    &PatchParams::apply("karpenter-health-e2e").force(),
                    &Patch::Apply(seed::aws_auth(broken, &self.node_roles())),
                )
                .await
            {
                Ok(cm) => {
                    return Ok((
                        start,
                        Instant::now(),
                        cm.resource_version().unwrap_or_default(),
                    ));
                }
                Err(e) if tries < 60 => {
                    tries += 1;
                    if tries == 1 {
                        println!("bench: aws-auth write failed ({e}); retrying");
                    }
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => return Err(e).context("writing aws-auth"),
            }
        }
    }

    /// One aws-auth edit: flips the mapping and times until every EC2NodeClass's NodeRoleMapped
    /// changed, as seen by the bench's own KarpenterHealth watch.
    pub async fn edit(&mut self, address: &str, deadline: Duration, poll: bool) -> Result<Edit> {
        let broken = !self.broken;
        let want = if broken { "False" } else { "True" };
        let calls_before = scrape(address).await.ok().map(|s| total_aws_calls(&s));
        let (start, returned, rv) = self.write_aws_auth(broken).await?;
        self.broken = broken;
        let classes = self.classes.clone();
        let watched = self.health.wait(
            "NodeRoleMapped to change on every EC2NodeClass",
            deadline,
            |s| {
                let mut at = Vec::with_capacity(classes.len());
                for c in classes.iter() {
                    let (status, arrived) = s.get(c)?.node_role_mapped.as_ref()?;
                    if status != want || *arrived < start {
                        return None;
                    }
                    at.push(*arrived);
                }
                Some(at)
            },
        );
        // After an API server restart the bench's own watch may itself be backing off: polling
        // with GET (every 200 ms) bounds what is measured to the operator's recovery.
        let polled = async {
            if !poll {
                return futures::future::pending::<Result<Vec<Instant>>>().await;
            }
            let api: Api<KarpenterHealth> = Api::all(self.client.clone());
            loop {
                tokio::time::sleep(Duration::from_millis(200)).await;
                let Ok(list) = api.list(&ListParams::default()).await else {
                    continue;
                };
                let now = Instant::now();
                let done = classes.iter().all(|c| {
                    list.items.iter().any(|h| {
                        h.name_any() == *c
                            && h.status
                                .as_ref()
                                .and_then(|s| {
                                    s.condition(karpenter_health_api::ConditionType::NodeRoleMapped)
                                })
                                .is_some_and(|cond| cond.status == want)
                    })
                });
                if done {
                    return Ok(vec![now; classes.len()]);
                }
            }
        };
        let landed = tokio::select! {
            watched = watched => watched,
            polled = polled => polled,
        };
        let own_watch_ms = self
            .config_maps
            .arrival("aws-auth", &rv, Duration::from_secs(5))
            .await
            .ok()
            .map(|at| signed_ms(at, returned));
        let calls_after = scrape(address).await.ok().map(|s| total_aws_calls(&s));
        let aws_calls = match (calls_before, calls_after) {
            (Some(b), Some(a)) => Some(a - b),
            _ => None,
        };
        let (first_ms, last_ms, timed_out) = match landed {
            Ok(at) => {
                let first = at.iter().min().copied().unwrap_or(returned);
                let last = at.iter().max().copied().unwrap_or(returned);
                (
                    Some(signed_ms(first, returned)),
                    Some(signed_ms(last, returned)),
                    false,
                )
            }
            Err(e) => {
                println!("bench: edit to {want} did not land: {e:#}");
                let settled = self
                    .health
                    .wait(
                        "NodeRoleMapped to settle after a timed-out edit",
                        SETTLE_AFTER_TIMEOUT,
                        |s| {
                            classes
                                .iter()
                                .all(|c| {
                                    s.get(c)
                                        .and_then(|seen| seen.node_role_mapped.as_ref())
                                        .is_some_and(|(status, _)| status == want)
                                })
                                .then_some(())
                        },
                    )
                    .await;
                if let Err(e) = settled {
                    println!("bench: {e:#}");
                }
                (None, None, true)
            }
        };
        Ok(Edit {
            broken,
            write_rtt_ms: ms(returned - start),
            own_watch_ms,
            first_ms,
            last_ms,
            aws_calls,
            timed_out,
            returned_at: returned,
        })
    }

    /// `--edits` edits, jittered apart; returns them and what the operator did meanwhile.
    pub async fn edits(&mut self, op: &Operator) -> Result<(Vec<Edit>, Window)> {
        let window = aws_calls::start(&op.address, op.pid).await?;
        let changes_before = self.health.status_changes();
        let requests_before = apiserver_requests(&self.client, &OPERATOR_WRITTEN)
            .await
            .ok();
        let mut edits = Vec::new();
        for i in 0..self.args.edits {
            let edit = self.edit(&op.address, EDIT_DEADLINE, false).await?;
            if i % 10 == 9 {
                println!(
                    "bench: edit {}: first {:?} ms, last {:?} ms, own watch {:?} ms",
                    i + 1,
                    edit.first_ms,
                    edit.last_ms,
                    edit.own_watch_ms
                );
            }
            edits.push(edit);
            tokio::time::sleep(jitter(i, 300, 1000)).await;
        }
        let to = Instant::now();
        self.timeline
            .mark(Phase::Edits, "aws-auth edits", window.from, to);
        // The last edit's Events are announced one gathering window after its writes.
        tokio::time::sleep(karpenter_health_operator::reconcile::announce::EVENT_WINDOW).await;
        let requests_after = apiserver_requests(&self.client, &OPERATOR_WRITTEN)
            .await
            .ok();
        let mut window = window
            .end(to, &op.address, op.pid)
            .await?
            .with_changes_seen(changes_before, self.health.status_changes());
        window.api_requests = requests_before
            .zip(requests_after)
            .map(|(before, after)| after - before);
        Ok((edits, window))
    }
}
