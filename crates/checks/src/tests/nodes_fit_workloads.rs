//! The scenarios of `rules/nodes_fit_workloads.rs`: its sentences, one per reason; nodes that
//! register and never initialize, against what Karpenter's `Initialized` condition says
//! (kubernetes-sigs/karpenter `pkg/controllers/nodeclaim/lifecycle/initialization.go`); and the
//! Pod density warning against Karpenter's count (aws/karpenter-provider-aws
//! `pkg/providers/instancetype/types.go` `pods()`) and the VPC CNI's addresses. The fixture's
//! types carry the ENIs and addresses EC2 documents for them (m5.large 3 × 10, m5.xlarge and
//! r7i.2xlarge 4 × 15, c6g.large 3 × 10). Pure.

use super::reasons::condition_of;
use by_reason::STARTUP_TAINT;
use crate::facts::{Facts, Observed, Setting, UnknownCause};
use crate::testing::node_claim_uninitialized;
use karpenter_health_api::ConditionType;

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::testing::node_claim_uninitialized;
    use crate::tests::reasons::prelude::*;

    /// What Karpenter says of a startup taint still on the Node.
    pub(crate) const STARTUP_TAINT: &str =
        "StartupTaint \"example.com/agent-not-ready:NoSchedule\" still exists";

    sentences! {
        karpenters_own_pod_count_fits_the_addresses_is_nodes_fit_their_pods:
            Facts::healthy() => NodesFitWorkloads is True because NodesFitTheirPods;
        a_node_pool_whose_only_node_keeps_its_startup_taint_is_nodes_not_initializing:
            Facts::healthy()
                .with(|f| f.cluster.node_claims = Observed::Found(Vec::new()))
                .with_node_claim(node_claim_uninitialized("default-stuck", "i-0stuck", 25, "StartupTaintsExist", STARTUP_TAINT))
            => NodesFitWorkloads is False because NodesNotInitializing;
        daemonsets_larger_than_every_allowed_type_are_daemonsets_fill_nodes:
            Facts::healthy()
                .with_pool_requirement("node.kubernetes.io/instance-type", "In", &["m5.large"])
                .with(|f| {
                    if let Observed::Found(all) = &mut f.cluster.daemonsets {
                        std::sync::Arc::make_mut(all).push(crate::testing::daemonset("monitoring", "agent", 2000, 0));
                    }
                })
            => NodesFitWorkloads is False because DaemonSetsFillNodes;
        an_unread_daemonset_list_is_not_observed:
            Facts::healthy().with(|f| f.cluster.vpc_cni = Observed::unknown(UnknownCause::NotObserved, "not listed yet"))
            => NodesFitWorkloads is Unknown because NotObserved;
    }
}

fn fit(facts: &Facts) -> (String, String, String, Vec<String>) {
    condition_of(facts, ConditionType::NodesFitWorkloads)
}

/// The message of the warning `reason` on `facts`' status, if there is one.
fn warning_text(facts: &Facts, reason: &str) -> Option<String> {
    super::reasons::status(facts)
        .findings
        .into_iter()
        .find(|f| f.reason == reason)
        .map(|f| f.message)
}

#[test]
fn max_pods_above_every_allowed_types_addresses_is_a_warning_never_a_false() {
    let facts = Facts::healthy().with_max_pods(110);
    let (status, reason, message, warnings) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "NodesFitTheirPods"));
    assert_eq!(warnings, ["MaxPodsAboveAddresses"]);
    assert!(message.contains("see the warning"), "{message}");
    let text = warning_text(&facts, "MaxPodsAboveAddresses").expect("the warning");
    assert!(
        text.contains("spec.kubelet.maxPods 110")
            && text.contains("m5.large runs up to 110 Pods but can address 29 (27 + 2"),
        "{text}"
    );
}

#[test]
fn a_max_pods_some_allowed_type_can_address_is_no_warning() {
    // m5.xlarge and r7i.2xlarge address 4 × 14 + 2 = 58 Pods: Karpenter may pick them.
    let facts = Facts::healthy().with_max_pods(50);
    assert_eq!(fit(&facts).3, Vec::<String>::new());
    // Only m5.large allowed: every node is promised 50 and can address 29.
    let small = facts.with_pool_requirement(
        "node.kubernetes.io/instance-type",
        "In",
        &["m5.large"],
    );
    assert_eq!(fit(&small).3, ["MaxPodsAboveAddresses"]);
}

#[test]
fn prefix_delegation_addresses_what_max_pods_promises() {
    let facts = Facts::healthy()
        .with_max_pods(110)
        .with_vpc_cni_env("ENABLE_PREFIX_DELEGATION", "true");
    assert_eq!(fit(&facts).3, Vec::<String>::new());
}

#[test]
fn custom_networking_without_reserved_enis_over_promises_and_reserved_enis_fixes_it() {
    let custom = Facts::healthy().with_vpc_cni_env("AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG", "true");
    let text = warning_text(&custom, "MaxPodsAboveAddresses").expect("the warning");
    assert!(
        text.contains("RESERVED_ENIS is not set")
            && text.contains("m5.large runs up to 29 Pods but can address 20"),
        "{text}"
    );
    let reserved = custom.with(|f| {
        if let Some(k) = f.cluster.karpenter.found_mut() {
            k.reserved_enis = Setting::Value("1".into());
        }
    });
    assert_eq!(fit(&reserved).3, Vec::<String>::new());
}

#[test]
fn what_is_not_the_vpc_cnis_ipv4_is_not_judged() {
    let ipv6 = Facts::healthy()
        .with_max_pods(110)
        .with_vpc_cni_env("ENABLE_IPv6", "true");
    let (status, _, message, warnings) = fit(&ipv6);
    assert_eq!(status, "True");
    assert!(warnings.is_empty() && message.contains("IPv6"), "{message}");
    let other_cni = Facts::healthy()
        .with_max_pods(110)
        .with(|f| f.cluster.vpc_cni = Observed::Absent);
    let (status, _, message, warnings) = fit(&other_cni);
    assert_eq!(status, "True");
    assert!(warnings.is_empty() && message.contains("another CNI"), "{message}");
}

#[test]
fn karpenters_count_unknown_without_its_settings_unless_max_pods_is_set() {
    let unread = Facts::healthy().with(|f| {
        f.cluster.karpenter = Observed::unknown(UnknownCause::NotObserved, "not listed yet");
    });
    assert_eq!(fit(&unread).0, "Unknown");
    let explicit = unread.with_max_pods(110);
    let (status, _, _, warnings) = fit(&explicit);
    assert_eq!(status, "True");
    assert_eq!(warnings, ["MaxPodsAboveAddresses"]);
}

#[test]
fn an_unread_catalog_is_unknown_with_its_cause() {
    let facts = Facts::healthy().with(|f| {
        f.aws.instance_types = Some(Observed::unknown(UnknownCause::Throttled, "429"));
    });
    let (status, reason, ..) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "AwsThrottled"));
}

#[test]
fn unread_subnets_are_unknown_with_their_cause() {
    let facts = Facts::healthy()
        .with_max_pods(110)
        .with(|f| f.aws.subnets = Observed::unknown(UnknownCause::AccessDenied, "403"));
    let (status, reason, _, warnings) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "AwsAccessDenied"));
    assert!(warnings.is_empty(), "{warnings:?}");
}

/// The healthy facts with `claims` as the class's only NodeClaims.
fn with_claims(claims: Vec<crate::facts::NodeClaimFacts>) -> Facts {
    Facts::healthy().with(|f| f.cluster.node_claims = Observed::Found(claims))
}

#[test]
fn a_node_that_never_initializes_is_named_with_what_karpenter_says_it_waits_for() {
    let facts = with_claims(vec![node_claim_uninitialized(
        "default-stuck",
        "i-0stuck",
        25,
        "StartupTaintsExist",
        STARTUP_TAINT,
    )]);
    let (status, reason, message, _) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("False", "NodesNotInitializing"));
    assert!(
        message.contains("NodePool default: none of its nodes initialized")
            && message.contains("default-stuck (registered")
            && message.contains(&format!("Karpenter: StartupTaintsExist: {STARTUP_TAINT}"))
            && message.contains("more than 10m ago"),
        "{message}"
    );
    let finding = super::reasons::status(&facts)
        .findings
        .into_iter()
        .find(|f| f.reason == "NodesNotInitializing")
        .expect("the finding");
    let subjects: Vec<String> = finding
        .subjects
        .iter()
        .map(|s| format!("{}/{}", s.kind, s.name))
        .collect();
    assert!(
        subjects.contains(&"NodePool/default".to_owned())
            && subjects.contains(&"NodeClaim/default-stuck".to_owned()),
        "{subjects:?}"
    );
    // Nothing else turns False for it.
    assert_eq!(
        super::failures(&super::reasons::status(&facts)),
        [super::pair(
            ConditionType::NodesFitWorkloads,
            karpenter_health_api::Reason::NodesNotInitializing
        )]
    );
}

#[test]
fn a_node_within_the_threshold_is_still_initializing() {
    let facts = with_claims(vec![node_claim_uninitialized(
        "default-young",
        "i-0young",
        9,
        "NodeNotReady",
        "Node status is NotReady",
    )]);
    let (status, _, message, warnings) = fit(&facts);
    assert_eq!(status, "True");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(message.contains("initialized within 10m"), "{message}");
}

#[test]
fn a_stuck_node_beside_initialized_ones_is_a_warning_naming_it() {
    let facts = Facts::healthy().with_node_claim(node_claim_uninitialized(
        "default-gpu",
        "i-0gpu",
        40,
        "ResourceNotRegistered",
        "Resource \"nvidia.com/gpu\" was requested but not registered",
    ));
    let (status, _, message, warnings) = fit(&facts);
    assert_eq!(status, "True");
    assert_eq!(warnings, ["NodeNotInitializing"]);
    assert!(message.contains("see the warning"), "{message}");
    let text = super::reasons::status(&facts)
        .findings
        .into_iter()
        .find(|f| f.reason == "NodeNotInitializing")
        .map(|f| f.message)
        .unwrap_or_default();
    assert!(
        text.contains("while 1 of its nodes did")
            && text.contains("ResourceNotRegistered: Resource \"nvidia.com/gpu\""),
        "{text}"
    );
}

#[test]
fn what_is_not_judged_of_initialization() {
    // Being deleted: on its way out.
    let mut deleting =
        node_claim_uninitialized("default-old", "i-0old", 60, "NodeNotReady", "Node status is NotReady");
    deleting.deleting = true;
    // Of another NodePool than the class's (one deleted since): not this NodePool's evidence.
    let mut elsewhere =
        node_claim_uninitialized("other-x", "i-0x", 60, "NodeNotReady", "Node status is NotReady");
    elsewhere.node_pool = Some("other".into());
    // No Initialized condition at all: nothing Karpenter said.
    let mut silent =
        node_claim_uninitialized("default-silent", "i-0s", 60, "NodeNotReady", "Node status is NotReady");
    silent.initialized = None;
    for claim in [deleting, elsewhere, silent] {
        let name = claim.name.clone();
        let (status, _, _, warnings) = fit(&with_claims(vec![claim]));
        assert_eq!(status, "True", "{name}");
        assert!(warnings.is_empty(), "{name}: {warnings:?}");
    }
}

#[test]
fn unread_node_claims_are_unknown_with_their_cause_and_the_threshold_is_a_setting() {
    let unread = Facts::healthy().with(|f| {
        f.cluster.node_claims = Observed::unknown(UnknownCause::NotObserved, "not listed yet");
    });
    assert_eq!(fit(&unread).0, "Unknown");
    let stuck = with_claims(vec![node_claim_uninitialized(
        "default-stuck",
        "i-0stuck",
        25,
        "StartupTaintsExist",
        STARTUP_TAINT,
    )]);
    assert_eq!(fit(&stuck).0, "False");
    let patient = crate::facts::Settings {
        initialization_timeout: jiff::SignedDuration::from_mins(30),
        ..crate::facts::Settings::default()
    };
    let status = crate::evaluate(&stuck, &patient, None, crate::testing::now());
    let condition = status
        .condition(ConditionType::NodesFitWorkloads)
        .expect("the condition");
    assert_eq!(condition.status, "True", "{}", condition.message);
}

/// The healthy facts with `daemonset` added to the cluster's DaemonSets (aws-node and
/// kube-proxy ask 125m together).
fn with_daemonset(facts: Facts, daemonset: crate::facts::DaemonSetFacts) -> Facts {
    facts.with(|f| {
        if let Observed::Found(all) = &mut f.cluster.daemonsets {
            std::sync::Arc::make_mut(all).push(daemonset);
        }
    })
}

fn m5_large_only() -> Facts {
    Facts::healthy().with_pool_requirement("node.kubernetes.io/instance-type", "In", &["m5.large"])
}

fn message_of(facts: &Facts) -> String {
    fit(facts).2
}

#[test]
fn daemonsets_beyond_the_roomiest_types_cpu_launch_nothing_and_are_named() {
    // m5.large gives Pods 2000m − 70m kube-reserved = 1930m; 125m + 1806m is one too many.
    let facts = with_daemonset(m5_large_only(), crate::testing::daemonset("monitoring", "agent", 1806, 0));
    let (status, reason, message, _) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("False", "DaemonSetsFillNodes"));
    assert!(
        message.contains("on m5.large, the one instance type it allows")
            && message.contains("request 1931m CPU, more than the 1930m it can give Pods")
            && message.contains("monitoring/agent (1806m, 0 MiB)")
            && message.contains("launches nothing"),
        "{message}"
    );
    let fits = with_daemonset(m5_large_only(), crate::testing::daemonset("monitoring", "agent", 1805, 0));
    assert_eq!(fit(&fits).0, "True", "{}", message_of(&fits));
    // With every type allowed, r7i.2xlarge gives 7910m: the same DaemonSet fits.
    let roomy = with_daemonset(Facts::healthy(), crate::testing::daemonset("monitoring", "agent", 1806, 0));
    assert_eq!(fit(&roomy).0, "True", "{}", message_of(&roomy));
}

#[test]
fn memory_is_judged_against_an_upper_bound() {
    const MIB: u64 = 1024 * 1024;
    // m5.large: 8192 MiB less 255 MiB kube-reserved and 100 MiB eviction, at most 7837 MiB.
    let over = with_daemonset(m5_large_only(), crate::testing::daemonset("logs", "shipper", 0, 7838 * MIB));
    let (status, _, message, _) = fit(&over);
    assert_eq!(status, "False");
    assert!(
        message.contains("on m5.large") && message.contains("7838 MiB of memory, more than the at most 7837 MiB"),
        "{message}"
    );
    let under = with_daemonset(m5_large_only(), crate::testing::daemonset("logs", "shipper", 0, 7837 * MIB));
    assert_eq!(fit(&under).0, "True");
}

#[test]
fn only_the_daemonsets_karpenter_would_run_on_the_node_pool_are_counted() {
    let big = || crate::testing::daemonset("gpu", "driver", 4000, 0);
    // Kept off by a node selector the NodePool does not meet (a label it does not set).
    let mut selected = big();
    selected.pod.node_selector.insert("example.com/gpu".into(), "true".into());
    assert_eq!(fit(&with_daemonset(m5_large_only(), selected)).0, "True");
    // Kept off by a taint of the NodePool it does not tolerate; counted once it tolerates it.
    let tainted = m5_large_only().with(|f| {
        if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
            pool.spec.template.spec.taints.push(karpenter_health_api::karpenter::Taint {
                key: "dedicated".into(),
                value: Some("web".into()),
                effect: "NoSchedule".into(),
            });
        }
    });
    assert_eq!(fit(&with_daemonset(tainted.clone(), big())).0, "True");
    let mut tolerating = big();
    tolerating.pod.tolerations.push(crate::facts::Toleration {
        operator: "Exists".into(),
        ..Default::default()
    });
    assert_eq!(fit(&with_daemonset(tainted, tolerating)).0, "False");
    // A constraint the model does not judge exactly: never counted.
    let mut unjudged = big();
    unjudged.constraints_unjudged = true;
    assert_eq!(fit(&with_daemonset(m5_large_only(), unjudged)).0, "True");
    // A selector on a key the NodePool bounds with Gt is judged as Karpenter judges it: 2 > 1, so
    // it counts; 1 is not above 1, so it does not.
    let on_cpus = |n: &str| {
        let mut d = big();
        d.pod.node_selector.insert("karpenter.k8s.aws/instance-cpu".into(), n.into());
        d
    };
    let gt_pool = || m5_large_only().with_pool_requirement("karpenter.k8s.aws/instance-cpu", "Gt", &["1"]);
    assert_eq!(fit(&with_daemonset(gt_pool(), on_cpus("2"))).0, "False");
    assert_eq!(fit(&with_daemonset(gt_pool(), on_cpus("1"))).0, "True");
}

#[test]
fn the_class_reservations_change_the_room() {
    let agent = || crate::testing::daemonset("monitoring", "agent", 1700, 0);
    assert_eq!(fit(&with_daemonset(m5_large_only(), agent())).0, "True");
    let reserved = m5_large_only().with(|f| {
        f.cluster.node_class.spec.kubelet.get_or_insert_with(Default::default).system_reserved =
            Some(std::collections::BTreeMap::from([("cpu".into(), serde_json::json!("200m"))]));
    });
    assert_eq!(fit(&with_daemonset(reserved, agent())).0, "False");
}

#[test]
fn unread_daemonsets_are_unknown_with_their_cause() {
    let facts = Facts::healthy()
        .with(|f| f.cluster.daemonsets = Observed::unknown(UnknownCause::AccessDenied, "403"));
    let (status, reason, message, _) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "AwsAccessDenied"), "{message}");
    assert!(message.contains("DaemonSets"), "{message}");
}

/// The healthy facts on a Cilium cluster: its operator taints new nodes with `key`, and its
/// agent DaemonSet, tolerating every taint as Cilium's chart writes it, runs on every node.
fn with_cilium(key: &str) -> Facts {
    let mut agent = crate::testing::daemonset("kube-system", "cilium", 0, 0);
    agent.pod.tolerations.push(crate::facts::Toleration {
        operator: "Exists".into(),
        ..Default::default()
    });
    with_daemonset(Facts::healthy(), agent).with(|f| f.cluster.cilium_node_taint = Observed::Found(key.to_owned()))
}

fn with_startup_taint(facts: Facts, key: &str, effect: &str) -> Facts {
    facts.with(|f| {
        if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
            pool.spec.template.spec.startup_taints.push(karpenter_health_api::karpenter::Taint {
                key: key.into(),
                value: None,
                effect: effect.into(),
            });
        }
    })
}

const CILIUM_TAINT: &str = "node.cilium.io/agent-not-ready";

#[test]
fn ciliums_taint_missing_from_startup_taints_is_a_warning_never_a_false() {
    let facts = with_cilium(CILIUM_TAINT);
    let (status, reason, message, warnings) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("True", "NodesFitTheirPods"), "{message}");
    assert_eq!(warnings, ["AgentTaintNotStartupTaint"]);
    let warning = warning_text(&facts, "AgentTaintNotStartupTaint").unwrap_or_default();
    assert!(
        warning.contains("NodePool default")
            && warning.contains(CILIUM_TAINT)
            && warning.contains("launches more nodes")
            && warning.contains("startupTaints"),
        "{warning}"
    );
    // The True message says nothing that contradicts the warning.
    assert!(!message.contains("startup taint of every NodePool"), "{message}");
}

#[test]
fn a_startup_or_template_taint_of_ciliums_key_whatever_its_effect_is_no_warning() {
    // Cilium's operator adds no taint where one of its key is on the node (`hasAgentNotReadyTaint`
    // compares keys), and Karpenter hides a startup taint until the node initializes.
    for effect in ["NoExecute", "NoSchedule"] {
        let declared = with_startup_taint(with_cilium(CILIUM_TAINT), CILIUM_TAINT, effect);
        let (status, _, message, warnings) = fit(&declared);
        assert_eq!(status, "True");
        assert!(warnings.is_empty(), "{effect}: {warnings:?}");
        assert!(message.contains(&format!("Cilium's node taint {CILIUM_TAINT} is a startup taint")), "{message}");
    }
    // Another key does not declare it.
    let other = with_startup_taint(with_cilium(CILIUM_TAINT), "example.com/agent-not-ready", "NoExecute");
    assert_eq!(fit(&other).3, ["AgentTaintNotStartupTaint"]);
    // The key cilium-config names is the one judged.
    let custom = with_startup_taint(with_cilium("example.com/cni"), CILIUM_TAINT, "NoExecute");
    assert!(warning_text(&custom, "AgentTaintNotStartupTaint").is_some_and(|w| w.contains("example.com/cni")));
}

#[test]
fn no_warning_where_cilium_taints_no_node_of_the_node_pool() {
    // Cilium's settings say no (or there is no cilium-config): the healthy facts.
    assert!(fit(&Facts::healthy()).3.is_empty());
    // No agent DaemonSet: no agent Pod is scheduled, so the operator taints nothing.
    let no_agent = Facts::healthy().with(|f| f.cluster.cilium_node_taint = Observed::Found(CILIUM_TAINT.into()));
    assert!(fit(&no_agent).3.is_empty());
    // The agent is kept off the NodePool's nodes by a selector the NodePool does not meet.
    let kept_off = with_cilium(CILIUM_TAINT).with(|f| {
        if let Observed::Found(all) = &mut f.cluster.daemonsets
            && let Some(agent) = std::sync::Arc::make_mut(all).iter_mut().find(|d| d.pod.name == "cilium")
        {
            agent.pod.node_selector.insert("example.com/cilium".into(), "true".into());
        }
    });
    assert!(fit(&kept_off).3.is_empty());
}

#[test]
fn unread_cilium_settings_are_unknown_with_their_cause() {
    let facts = Facts::healthy()
        .with(|f| f.cluster.cilium_node_taint = Observed::unknown(UnknownCause::AccessDenied, "403"));
    let (status, reason, message, _) = fit(&facts);
    assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "AwsAccessDenied"), "{message}");
    assert!(message.contains("kube-system/cilium-config"), "{message}");
}

/// The healthy NodePool allowing exactly `types` (of either architecture), as `version` runs.
fn pool_of(types: &[&str], version: &str) -> Facts {
    Facts::healthy().with_karpenter_version(version).with(|f| {
        if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
            pool.spec.template.spec.requirements = vec![crate::testing::requirement(
                "node.kubernetes.io/instance-type",
                "In",
                types,
            )];
        }
    })
}

fn on_arch(name: &str, cpu: u64, arch: &str) -> crate::facts::DaemonSetFacts {
    let mut d = crate::testing::daemonset("monitoring", name, cpu, 0);
    d.pod.node_selector.insert("kubernetes.io/arch".into(), arch.into());
    d
}

#[test]
fn daemonsets_split_by_architecture_count_once_per_node_from_1_14() {
    // Two agents of 1200m, one per architecture, on m5.large and c6g.large (1930m for Pods each,
    // less kube-proxy's and aws-node's 125m): Karpenter v1.14 counts one of them per type
    // (kubernetes-sigs/karpenter #2975), v1.13 both on every type.
    let split = |version: &str| {
        let facts = pool_of(&["m5.large", "c6g.large"], version);
        let facts = with_daemonset(facts, on_arch("agent-amd64", 1200, "amd64"));
        with_daemonset(facts, on_arch("agent-arm64", 1200, "arm64"))
    };
    assert_eq!(fit(&split("1.14.1")).0, "True", "{}", message_of(&split("1.14.1")));
    assert_eq!(fit(&split("1.13.1")).1, "DaemonSetsFillNodes");
    // Not knowing the release, only what every release counts is certain.
    assert_eq!(fit(&split("not-a-version")).1, "NodesFitTheirPods");
    // A Windows-only agent counts nowhere on Linux nodes from v1.14, on every node before.
    let windows = |version: &str| {
        let mut agent = crate::testing::daemonset("monitoring", "windows-agent", 1900, 0);
        agent.pod.node_selector.insert("kubernetes.io/os".into(), "windows".into());
        with_daemonset(pool_of(&["m5.large"], version), agent)
    };
    assert_eq!(fit(&windows("1.14.1")).0, "True");
    assert_eq!(fit(&windows("1.13.1")).0, "False");
}

#[test]
fn daemonsets_claiming_dynamic_resources_count_as_each_release_counts_them() {
    use crate::facts::ResourceClaims;
    // An agent of 1931m on m5.large (1930m for Pods): counted, it leaves no room.
    let claiming = |claims: ResourceClaims, version: &str| {
        let mut agent = crate::testing::daemonset("monitoring", "gpu-agent", 1931, 0);
        agent.resource_claims = claims;
        with_daemonset(pool_of(&["m5.large"], version), agent)
    };
    // A container's claim: left out from v1.7 (`HasDRARequirements`, IGNORE_DRA_REQUESTS).
    assert_eq!(fit(&claiming(ResourceClaims::Containers, "1.6.3")).1, "DaemonSetsFillNodes");
    assert_eq!(fit(&claiming(ResourceClaims::Containers, "1.8.6")).0, "True");
    // The Pod's own resourceClaims alone: read only from v1.14.
    assert_eq!(fit(&claiming(ResourceClaims::PodOnly, "1.13.1")).1, "DaemonSetsFillNodes");
    assert_eq!(fit(&claiming(ResourceClaims::PodOnly, "1.14.1")).0, "True");
    // Not knowing the release, a claiming DaemonSet is not counted.
    assert_eq!(fit(&claiming(ResourceClaims::PodOnly, "not-a-version")).0, "True");
}

#[test]
fn a_label_karpenter_does_not_know_keeps_a_daemonset_uncounted() {
    // node-role.kubernetes.io/edge is in no release's WellKnownLabels and no NodePool defines
    // it: Karpenter finds the DaemonSet incompatible (`label ... does not have known values`).
    let mut edge = crate::testing::daemonset("monitoring", "edge-agent", 1900, 0);
    edge.pod.node_selector.insert("node-role.kubernetes.io/edge".into(), "true".into());
    assert_eq!(fit(&with_daemonset(m5_large_only(), edge)).0, "True");
}

#[test]
fn requests_karpenter_may_not_count_make_a_warning_never_a_false() {
    let big = |has_pods: Option<bool>, newest: Option<(u64, u64)>, generation: i64| {
        let mut d = crate::testing::daemonset("monitoring", "agent", 1900, 0);
        (d.has_pods, d.newest_pod, d.generation) = (has_pods, newest, Some(generation));
        with_daemonset(m5_large_only(), d)
    };
    // Its Pods' requests were not read: Karpenter counts its newest Pod's.
    let unread = big(Some(true), None, 1);
    assert_eq!(fit(&unread).0, "True");
    assert_eq!(fit(&unread).3, ["DaemonSetsMayFillNodes"]);
    // The True message does not say its DaemonSets leave room.
    assert!(!fit(&unread).2.contains("leave room"), "{}", fit(&unread).2);
    // Read, and smaller than the template (a VPA lowered them): counted as read.
    assert_eq!(fit(&big(Some(true), Some((100, 0)), 3)).3, Vec::<String>::new());
    // No Pod, template never changed: Karpenter counts the template.
    assert_eq!(fit(&big(Some(false), None, 1)).1, "DaemonSetsFillNodes");
    // No Pod, template changed since: Karpenter may still hold its last Pod's requests.
    assert_eq!(fit(&big(Some(false), None, 2)).3, ["DaemonSetsMayFillNodes"]);
}

#[test]
fn a_daemonset_is_named_at_the_requests_it_is_counted_at() {
    // Its template asks 100m, its newest Pod (read) 1900m: the verdict counts and names 1900m.
    let mut d = crate::testing::daemonset("monitoring", "agent", 100, 0);
    d.newest_pod = Some((1900, 0));
    let (status, reason, message, _) = fit(&with_daemonset(m5_large_only(), d));
    assert_eq!((status.as_str(), reason.as_str()), ("False", "DaemonSetsFillNodes"));
    assert!(message.contains("monitoring/agent (1900m, 0 MiB)"), "{message}");
}

#[test]
fn static_node_pools_and_v1_0_kubelet_annotations_are_not_judged() {
    let agent = || crate::testing::daemonset("monitoring", "agent", 1900, 0);
    let static_pool = m5_large_only().with(|f| {
        if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
            pool.spec.replicas = Some(3);
        }
    });
    assert_eq!(fit(&with_daemonset(static_pool, agent())).0, "True");
    let annotated = |version: &str| {
        m5_large_only().with_karpenter_version(version).with(|f| {
            if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
                pool.metadata.annotations = Some(std::collections::BTreeMap::from([(
                    crate::karpenter_release::KUBELET_CONVERSION_ANNOTATION.to_owned(),
                    r#"{"kubeReserved":{"cpu":"10m"}}"#.to_owned(),
                )]));
            }
        })
    };
    // v1.0 reads the NodePool's kubelet settings first: the room is not the class's to say.
    assert_eq!(fit(&with_daemonset(annotated("1.0.8"), agent())).0, "True");
    assert_eq!(fit(&with_daemonset(annotated("1.8.6"), agent())).1, "DaemonSetsFillNodes");
}

#[test]
fn a_node_waiting_for_its_gpu_is_certain_only_after_three_thresholds() {
    // NVIDIA's GPU Operator builds the driver on the node before its device plugin registers the
    // GPU: 25 minutes in, it may still come (a warning); 40 minutes in, it is certain.
    let gpu = |minutes| {
        with_claims(vec![node_claim_uninitialized(
            "default-gpu",
            "i-0gpu",
            minutes,
            "ResourceNotRegistered",
            "Resource \"nvidia.com/gpu\" was requested but not registered",
        )])
    };
    let (status, _, message, warnings) = fit(&gpu(25));
    assert_eq!(status, "True", "{message}");
    assert_eq!(warnings, ["NodeNotInitializing"]);
    assert!(
        warning_text(&gpu(25), "NodeNotInitializing").is_some_and(|t| t.contains("judged at 30m")),
        "{:?}",
        warning_text(&gpu(25), "NodeNotInitializing")
    );
    assert_eq!(fit(&gpu(40)).1, "NodesNotInitializing");
}
