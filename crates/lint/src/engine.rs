//! The operator's engine on one EC2NodeClass of the files, offline: every live fact unknown but
//! what the files decide together ([`Manifests`]); only what the engine proves is kept. Pure:
//! no IO, no clock.

use crate::documents::{Document, line_of};
use crate::manifests::Manifests;
use crate::model::{Anchor, Found, Options, Rule};
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_api::{ConditionStatus, Severity as EngineSeverity};
use karpenter_health_checks::facts::{
    AwsFacts, ClusterFacts, KarpenterFacts, Observed, UnknownCause,
};
use karpenter_health_checks::{Facts, Settings};

/// Why every live fact is unknown, as the engine's messages would show it.
const OFFLINE: &str = "karpenter-health lint is offline: no cluster and no AWS are read";

fn offline<T>() -> Observed<T> {
    Observed::unknown(UnknownCause::NotObserved, OFFLINE)
}

/// The operator's engine on one EC2NodeClass, every live fact unknown; only what it proves
/// (findings of `False` outcomes, and warnings) is kept.
pub(crate) fn node_class(
    doc: &Document,
    nc: &EC2NodeClass,
    options: &Options,
    manifests: &Manifests<'_>,
) -> Vec<Found> {
    let mut node_class = nc.clone();
    // A status in a file is a snapshot of some past instant; judging it needs the cluster's now.
    node_class.status = None;
    let karpenter = match &options.karpenter_version {
        Some(v) => Observed::Found(KarpenterFacts {
            version: Some(v.to_string()),
            controller_role_arn: options.controller_role.clone(),
            ..KarpenterFacts::default()
        }),
        None => offline(),
    };
    let facts = Facts {
        cluster: ClusterFacts {
            node_class,
            node_pools: offline(),
            node_claims: offline(),
            claimed_instance_ids: offline(),
            pending_pods: offline(),
            aws_auth: offline(),
            karpenter,
            crd_label_rules: offline(),
            aws_node_role_arn: offline(),
            configured_cluster_name: None,
            node_class_generation_seen_at: None,
            apiserver_version: offline(),
            karpenter_crds: offline(),
            karpenter_webhooks: offline(),
            service_endpoints: Default::default(),
            vpc_cni: offline(),
            daemonsets: offline(),
            cilium_node_taint: offline(),
            load_balancer_controller: offline(),
            disruption_blocked: offline(),
            drains: Default::default(),
        },
        aws: AwsFacts {
            region: options.region.clone(),
            account: offline(),
            instance_profile: Some(offline()),
            node_role: Some(offline()),
            eks_cluster: offline(),
            node_role_access_entries: offline(),
            security_groups: offline(),
            cluster_instances: offline(),
            cluster_vpc: offline(),
            subnets: offline(),
            ..AwsFacts::default()
        },
    };
    let mut out = proven_findings(doc, &facts, |_| true);
    // What the other files say of the cluster around the class decides only the rules made for
    // it (`Manifests::DECIDED`): the engine's other rules were never judged on partial objects.
    let mut around = facts.clone();
    let name = nc.metadata.name.as_deref().unwrap_or_default();
    if manifests.fill(name, &mut around.cluster) {
        out.extend(proven_findings(doc, &around, |rule| {
            Manifests::DECIDED.contains(&rule)
        }));
    }
    out
}

/// The engine's findings on `facts` that it proves (those of `False` outcomes, and warnings)
/// and `keep` keeps, with their lines in `doc`.
fn proven_findings(doc: &Document, facts: &Facts, keep: impl Fn(Rule) -> bool) -> Vec<Found> {
    // No rule that can conclude offline reads the clock; a fixed instant keeps lint pure.
    let now = jiff::Timestamp::UNIX_EPOCH;
    let mut out = Vec::new();
    for outcome in karpenter_health_checks::evaluate_all(facts, &Settings::default(), now) {
        for f in outcome.findings {
            let proven = match f.severity {
                EngineSeverity::Error => outcome.status == ConditionStatus::False,
                EngineSeverity::Warning => true,
                EngineSeverity::Info => false,
            };
            let Some(rule) = Rule::parse(&f.reason).filter(|r| proven && keep(*r)) else {
                continue;
            };
            let line = match rule.anchor() {
                Some(Anchor::Field(path)) => line_of(doc, path),
                _ => doc.first_line,
            };
            out.push((rule, f.message, line));
        }
    }
    out
}
