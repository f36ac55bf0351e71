//! The scenarios of `rules/nodes_fit_workloads/metadata_reach.rs` (kept apart from
//! `nodes_fit_workloads.rs` for its length): the AWS Load Balancer Controller, which reads its
//! VPC id from instance metadata unless its Deployment names the VPC
//! (kubernetes-sigs/aws-load-balancer-controller `pkg/aws/cloud.go` `getVpcID`), against the
//! class's `metadataOptions` as EC2 applies them (the hop limit bounds only IMDSv2's token
//! answer; a Pod's network namespace is one hop beyond the node). Pure.

use super::reasons::{condition_of, status};
use crate::facts::{Facts, LoadBalancerControllerFacts, Observed, PodScheduling, Toleration, UnknownCause};
use karpenter_health_api::ConditionType;
use karpenter_health_api::karpenter::{MetadataOptions, Taint};

const WARNING: &str = "MetadataOutOfReach";

/// The controller as its chart installs it by AWS's EKS guide: two replicas, no VPC flag, no
/// host network, no node selector.
fn chart_install() -> LoadBalancerControllerFacts {
    LoadBalancerControllerFacts {
        pod: PodScheduling {
            namespace: "kube-system".into(),
            name: "aws-load-balancer-controller".into(),
            ..PodScheduling::default()
        },
        replicas: 2,
        ..LoadBalancerControllerFacts::default()
    }
}

fn with_controller(controller: LoadBalancerControllerFacts) -> Facts {
    Facts::healthy().with(|f| f.cluster.load_balancer_controller = Observed::Found(controller))
}

fn with_metadata(facts: Facts, endpoint: &str, tokens: &str, hop_limit: i64) -> Facts {
    facts.with(|f| {
        f.cluster.node_class.spec.metadata_options = Some(MetadataOptions {
            http_endpoint: Some(endpoint.into()),
            http_protocol_ipv6: None,
            http_tokens: Some(tokens.into()),
            http_put_response_hop_limit: Some(hop_limit),
        });
    })
}

fn warnings(facts: &Facts) -> Vec<String> {
    condition_of(facts, ConditionType::NodesFitWorkloads).3
}

fn warning_text(facts: &Facts) -> Option<String> {
    status(facts).findings.into_iter().find(|f| f.reason == WARNING).map(|f| f.message)
}

#[test]
fn the_charts_default_install_beside_karpenters_default_hop_limit_is_a_warning_never_a_false() {
    // The healthy class has Karpenter's defaults: IMDSv2 required, hop limit 1.
    let facts = with_controller(chart_install());
    let (status, reason, message, warned) = condition_of(&facts, ConditionType::NodesFitWorkloads);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "NodesFitTheirPods"), "{message}");
    assert_eq!(warned, [WARNING]);
    let warning = warning_text(&facts).unwrap_or_default();
    for said in [
        "NodePool default",
        "Deployment kube-system/aws-load-balancer-controller",
        "httpPutResponseHopLimit: 1",
        "--aws-vpc-id",
        "httpPutResponseHopLimit: 2",
    ] {
        assert!(warning.contains(said), "{said}: {warning}");
    }
    // The True message says nothing of instance metadata being reachable.
    assert!(!message.contains("instance metadata"), "{message}");
    // Nothing else of the healthy facts turns: the warning's subjects name the Deployment.
    let finding = status_finding(&facts);
    assert!(finding.iter().any(|s| s.kind == "Deployment" && s.name == "aws-load-balancer-controller"));
}

fn status_finding(facts: &Facts) -> Vec<karpenter_health_api::SubjectRef> {
    status(facts)
        .findings
        .into_iter()
        .find(|f| f.reason == WARNING)
        .map(|f| f.subjects)
        .unwrap_or_default()
}

#[test]
fn metadata_the_controllers_pods_can_reach_is_no_warning() {
    // A hop limit of 2 lets the token's answer into the Pod; IMDSv1 answers are not hop-limited.
    for (tokens, hop_limit) in [("required", 2), ("required", 64), ("optional", 1)] {
        let facts = with_metadata(with_controller(chart_install()), "enabled", tokens, hop_limit);
        let (status, _, message, warned) = condition_of(&facts, ConditionType::NodesFitWorkloads);
        assert_eq!(status, "True");
        assert!(warned.is_empty(), "{tokens} {hop_limit}: {warned:?}");
        assert!(message.contains("which this EC2NodeClass lets Pods reach"), "{message}");
    }
    // On the host network the token's answer makes one hop.
    let host = with_controller(LoadBalancerControllerFacts { host_network: true, ..chart_install() });
    assert!(warnings(&host).is_empty());
    // With no metadataOptions at all, Karpenter's defaults apply: hop limit 1, IMDSv2 required.
    let defaults = with_controller(chart_install()).with(|f| f.cluster.node_class.spec.metadata_options = None);
    assert_eq!(warnings(&defaults), [WARNING]);
}

#[test]
fn a_disabled_endpoint_keeps_even_the_host_network_out() {
    let facts = with_metadata(
        with_controller(LoadBalancerControllerFacts { host_network: true, ..chart_install() }),
        "disabled",
        "required",
        2,
    );
    assert_eq!(warnings(&facts), [WARNING]);
    assert!(warning_text(&facts).is_some_and(|w| w.contains("httpEndpoint: disabled")));
}

#[test]
fn a_controller_that_names_its_vpc_or_may_find_it_elsewhere_is_not_judged() {
    let named = with_controller(LoadBalancerControllerFacts { vpc_id_configured: true, ..chart_install() });
    assert!(warnings(&named).is_empty());
    let unjudged = with_controller(LoadBalancerControllerFacts { vpc_source_unjudged: true, ..chart_install() });
    assert!(warnings(&unjudged).is_empty());
    let scaled_down = with_controller(LoadBalancerControllerFacts { replicas: 0, ..chart_install() });
    assert!(warnings(&scaled_down).is_empty());
    // No controller: the healthy facts.
    assert!(warnings(&Facts::healthy()).is_empty());
}

#[test]
fn only_node_pools_the_controllers_pods_can_be_scheduled_on_are_warned_of() {
    // A node selector the NodePool does not meet.
    let mut elsewhere = chart_install();
    elsewhere.pod.node_selector.insert("eks.amazonaws.com/nodegroup".into(), "system".into());
    assert!(warnings(&with_controller(elsewhere)).is_empty());
    // A NodePool taint it does not tolerate; tolerated, the warning is back.
    let tainted = |facts: Facts| {
        facts.with(|f| {
            if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
                pool.spec.template.spec.taints.push(Taint {
                    key: "dedicated".into(),
                    value: Some("batch".into()),
                    effect: "NoSchedule".into(),
                });
            }
        })
    };
    assert!(warnings(&tainted(with_controller(chart_install()))).is_empty());
    let mut tolerating = chart_install();
    tolerating.pod.tolerations.push(Toleration { key: "dedicated".into(), operator: "Exists".into(), ..Default::default() });
    assert_eq!(warnings(&tainted(with_controller(tolerating))), [WARNING]);
    // A label Karpenter neither knows nor finds in the NodePool keeps the controller off it
    // (node.kubernetes.io/lifecycle is in no release's well-known labels).
    let mut lifecycle = chart_install();
    lifecycle.pod.node_selector.insert("node.kubernetes.io/lifecycle".into(), "normal".into());
    assert!(warnings(&with_controller(lifecycle)).is_empty());
    // What runs on a node errs toward the warning: constraints the model cannot decide may run.
    let unjudged = with_controller(LoadBalancerControllerFacts { constraints_unjudged: true, ..chart_install() });
    assert_eq!(warnings(&unjudged), [WARNING]);
}

#[test]
fn an_unread_controller_deployment_is_unknown_with_its_cause() {
    let facts = Facts::healthy().with(|f| {
        f.cluster.load_balancer_controller = Observed::unknown(UnknownCause::AccessDenied, "deployments is forbidden")
    });
    let (status, reason, message, _) = condition_of(&facts, ConditionType::NodesFitWorkloads);
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "AwsAccessDenied"), "{message}");
    assert!(message.contains("kube-system/aws-load-balancer-controller"), "{message}");
}
