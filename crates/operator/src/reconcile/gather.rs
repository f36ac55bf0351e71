//! The gather step of a reconcile: the cluster facts from the caches and the AWS facts for the
//! plan's request, read again when the class shows new evidence of its own health. Does IO
//! (through the AWS port).

use crate::context::Context;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_aws::AwsRequest;
use karpenter_health_checks::Facts;
use karpenter_health_checks::facts::ClusterFacts;
use kube::ResourceExt;

/// A fingerprint of what an EC2NodeClass shows of its own health: its generation, each of
/// Karpenter's conditions on it (type, status, reason), and which of its NodeClaims failed to
/// launch. Messages and times are left out: they change without anything breaking.
pub fn evidence_of(node_class: &EC2NodeClass, cluster: &ClusterFacts) -> u64 {
    use karpenter_health_api::ConditionStatus;
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    node_class.metadata.generation.hash(&mut hasher);
    if let Some(status) = &node_class.status {
        for c in &status.conditions {
            (&c.type_, &c.status, &c.reason).hash(&mut hasher);
        }
    }
    for claim in cluster.node_claims.found().into_iter().flatten() {
        if claim
            .launched
            .is_some_and(|c| c.status == ConditionStatus::False)
        {
            claim.name.hash(&mut hasher);
        }
    }
    hasher.finish()
}

impl Context {
    /// 1. gather (IO): the cluster facts from the caches, the AWS facts from the adapter.
    ///
    /// Also tells whether an AWS answer was served past its period while its refresh ran: the
    /// facts may then mix answers of different ages, and a new False must be confirmed with
    /// [`Context::reread_aws`] before it is published.
    pub async fn gather(&self, node_class: &EC2NodeClass) -> (Facts, bool) {
        let mut cluster = self.kube_facts.snapshot(node_class, &self.overrides);
        cluster.node_class_generation_seen_at = self.generation_seen_at(node_class);
        let request = AwsRequest::for_class(node_class, &cluster);
        let name = node_class.name_any();
        if self.evidence_changed(&name, evidence_of(node_class, &cluster)) {
            // The class was edited, Karpenter's view of it changed (a condition turned False, a
            // reason changed), or a launch failed: what AWS answered before may be what broke.
            self.aws.source.revalidate(&name);
        }
        // Read as this class: a changed answer for any key it reads re-evaluates it.
        let (aws, served_due) =
            karpenter_health_aws::read_reporting(&name, false, self.aws.source.observe(&request))
                .await;
        (Facts { cluster, aws }, served_due)
    }

    /// The AWS facts of `facts` read again, waiting for the refresh of every answer past its
    /// period instead of serving it: a False about to be published stands on answers of one
    /// moment, not on a fresh answer next to a stale one (a route added and endpoints deleted in
    /// between would read as neither, a false alarm).
    pub async fn reread_aws(&self, node_class: &EC2NodeClass, facts: Facts) -> Facts {
        let request = AwsRequest::for_class(node_class, &facts.cluster);
        let (aws, _) = karpenter_health_aws::read_reporting(
            &node_class.name_any(),
            true,
            self.aws.source.observe(&request),
        )
        .await;
        Facts { aws, ..facts }
    }

    /// Records `evidence` for `name`; whether it differs from what was recorded before (a first
    /// sight is no change: the answers were just read).
    pub fn evidence_changed(&self, name: &str, evidence: u64) -> bool {
        let Ok(mut seen) = self.evidence.lock() else {
            return false;
        };
        seen.insert(name.to_owned(), evidence)
            .is_some_and(|before| before != evidence)
    }

    fn generation_seen_at(&self, node_class: &EC2NodeClass) -> Option<jiff::Timestamp> {
        let generation = node_class.metadata.generation?;
        let mut seen = self.generation_seen.lock().ok()?;
        let entry = seen
            .entry(node_class.name_any())
            .or_insert((generation, jiff::Timestamp::now()));
        if entry.0 != generation {
            *entry = (generation, jiff::Timestamp::now());
        }
        Some(entry.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use karpenter_health_api::karpenter::{EC2NodeClassStatus, KarpenterCondition};
    use karpenter_health_checks::facts::Observed;

    fn class(generation: i64, conditions: &[(&str, &str, &str, &str)]) -> EC2NodeClass {
        let mut class = EC2NodeClass::new("default", Default::default());
        class.metadata.generation = Some(generation);
        class.status = Some(EC2NodeClassStatus {
            conditions: conditions
                .iter()
                .map(|(type_, status, reason, message)| KarpenterCondition {
                    type_: (*type_).into(),
                    status: (*status).into(),
                    reason: Some((*reason).into()),
                    message: Some((*message).into()),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        });
        class
    }

    fn evidence(class: &EC2NodeClass) -> u64 {
        evidence_of(class, &ClusterFacts::default())
    }

    #[test]
    fn a_failed_launch_is_evidence_a_launch_under_way_is_not() {
        use karpenter_health_api::ConditionStatus;
        use karpenter_health_checks::facts::{ClaimCondition, NodeClaimFacts};
        let class = class(1, &[]);
        let claim = |name: &str, status| NodeClaimFacts {
            name: name.into(),
            created: None,
            deleting: false,
            instance_id: None,
            launched: Some(ClaimCondition {
                status,
                last_transition: None,
            }),
            registered: None,
            ..Default::default()
        };
        let with = |claims: Vec<NodeClaimFacts>| {
            evidence_of(
                &class,
                &ClusterFacts {
                    node_claims: Observed::Found(claims),
                    ..Default::default()
                },
            )
        };
        let quiet = with(vec![claim("a", ConditionStatus::True)]);
        assert_eq!(
            quiet,
            with(vec![
                claim("a", ConditionStatus::True),
                claim("b", ConditionStatus::Unknown)
            ])
        );
        assert_ne!(
            quiet,
            with(vec![
                claim("a", ConditionStatus::True),
                claim("b", ConditionStatus::False)
            ])
        );
    }

    #[test]
    fn an_edit_or_a_change_in_karpenters_verdict_is_evidence_a_new_message_is_not() {
        let base = evidence(&class(1, &[("Ready", "True", "Ready", "")]));
        assert_eq!(
            base,
            evidence(&class(1, &[("Ready", "True", "Ready", "reworded")]))
        );
        assert_ne!(base, evidence(&class(2, &[("Ready", "True", "Ready", "")])));
        assert_ne!(
            base,
            evidence(&class(1, &[("Ready", "False", "Ready", "")]))
        );
        assert_ne!(
            base,
            evidence(&class(
                1,
                &[("Ready", "True", "InstanceProfileNotFound", "")]
            ))
        );
    }
}
