//! The observer over the in-memory fake: what facts come out, what calls go out (the call
//! budget at 10,000 instances), and how failures, caching and recovery behave. No IO.

use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_aws::fake::{FakeAws, FakeState, throttled};
use karpenter_health_aws::ports::{CallError, ErrorKind, RoleData};
use karpenter_health_aws::{
    AwsObserver, AwsRequest, ObserverOptions, Outcome, Rate, RateLimits, StaleFact,
};
use karpenter_health_checks::facts::{
    AccessEntryFacts, EksClusterFacts, InstanceFacts, InstanceProfileFacts, Observed, RoleRef,
    SecurityGroupFacts, UnknownCause,
};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

const ACCOUNT: &str = "123456789012";
const CLUSTER: &str = "demo";

fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn role_arn(path: &str, name: &str) -> String {
    format!("arn:aws:iam::{ACCOUNT}:role{path}{name}")
}

fn instance(n: usize, cluster: &str) -> InstanceFacts {
    InstanceFacts {
        id: format!("i-{n:017x}"),
        vpc_id: Some(
            if n.is_multiple_of(2) {
                "vpc-a"
            } else {
                "vpc-b"
            }
            .into(),
        ),
        state: "running".into(),
        launch_time: None,
        tags: tags(&[
            (&format!("kubernetes.io/cluster/{cluster}"), "owned"),
            ("eks:eks-cluster-name", cluster),
            ("karpenter.sh/nodepool", "default"),
        ]),
    }
}

fn world() -> FakeState {
    let node_role = RoleData {
        name: "KarpenterNodeRole-demo".into(),
        arn: role_arn("/nodes/", "KarpenterNodeRole-demo"),
        path: "/nodes/".into(),
        assume_role_policy_document: Some("%7B%22Version%22%3A%222012-10-17%22%7D".into()),
    };
    let mut s = FakeState::default();
    s.instance_profiles.insert(
        "demo_profile".into(),
        InstanceProfileFacts {
            name: "demo_profile".into(),
            arn: format!("arn:aws:iam::{ACCOUNT}:instance-profile/demo_profile"),
            path: "/".into(),
            roles: vec![RoleRef {
                name: node_role.name.clone(),
                arn: node_role.arn.clone(),
                path: node_role.path.clone(),
            }],
        },
    );
    s.instance_profiles.insert(
        "empty_profile".into(),
        InstanceProfileFacts {
            name: "empty_profile".into(),
            ..Default::default()
        },
    );
    s.attached_policies.insert(
        node_role.name.clone(),
        vec![
            "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy".into(),
            "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy".into(),
        ],
    );
    s.roles.insert(node_role.name.clone(), node_role);
    s.clusters.insert(
        CLUSTER.into(),
        EksClusterFacts {
            name: CLUSTER.into(),
            vpc_id: Some("vpc-a".into()),
            authentication_mode: Some("API_AND_CONFIG_MAP".into()),
        },
    );
    s.access_entries.insert(
        CLUSTER.into(),
        vec![
            AccessEntryFacts {
                principal_arn: role_arn("/", "someone-else"),
                type_: "STANDARD".into(),
                username: None,
            },
            // Written without the role's path, as EKS users usually do.
            AccessEntryFacts {
                principal_arn: role_arn("/", "KarpenterNodeRole-demo"),
                type_: "EC2_LINUX".into(),
                username: Some("system:node:{{EC2PrivateDNSName}}".into()),
            },
        ],
    );
    s.security_groups = vec![
        SecurityGroupFacts {
            id: "sg-1".into(),
            name: "nodes".into(),
            vpc_id: Some("vpc-a".into()),
            tags: tags(&[
                ("karpenter.sh/discovery", CLUSTER),
                ("kubernetes.io/cluster/demo", "owned"),
            ]),
        },
        SecurityGroupFacts {
            id: "sg-2".into(),
            name: "extra".into(),
            vpc_id: Some("vpc-a".into()),
            tags: tags(&[("team", "x")]),
        },
        SecurityGroupFacts {
            id: "sg-3".into(),
            name: "other".into(),
            vpc_id: Some("vpc-a".into()),
            tags: tags(&[("karpenter.sh/discovery", "other")]),
        },
    ];
    s.instances = (0..4).map(|n| instance(n, CLUSTER)).collect();
    s.instances.push(instance(99, "other-cluster"));
    s
}

fn options() -> ObserverOptions {
    ObserverOptions {
        rate_limits: RateLimits::UNLIMITED,
        ..Default::default()
    }
}

fn observer(fake: &FakeAws, options: ObserverOptions) -> AwsObserver {
    let f = Arc::new(fake.clone());
    AwsObserver::with_ports(
        f.clone(),
        f.clone(),
        f.clone(),
        f,
        Some("us-west-2".into()),
        options,
    )
}

fn tag_term(k: &str, v: &str) -> SelectorTerm {
    SelectorTerm {
        tags: tags(&[(k, v)]),
        ..Default::default()
    }
}

fn id_term(id: &str) -> SelectorTerm {
    SelectorTerm {
        id: Some(id.into()),
        ..Default::default()
    }
}

fn request() -> AwsRequest {
    AwsRequest {
        cluster_name: Some(CLUSTER.into()),
        instance_profile: Some("demo_profile".into()),
        role: None,
        security_group_selector_terms: vec![
            tag_term("karpenter.sh/discovery", CLUSTER),
            tag_term("team", "*"),
        ],
    }
}

fn cause<T: std::fmt::Debug>(o: &Observed<T>) -> UnknownCause {
    match o {
        Observed::Unknown(u) => u.cause,
        other => panic!("expected unknown, got {other:?}"),
    }
}

#[tokio::test]
async fn every_fact_is_filled_from_the_answers() {
    let fake = FakeAws::new(world());
    let facts = observer(&fake, options()).observe(&request()).await;

    assert_eq!(facts.region.as_deref(), Some("us-west-2"));
    assert_eq!(facts.account.found().unwrap().account_id, ACCOUNT);
    let profile = facts.instance_profile.unwrap();
    assert_eq!(
        profile.found().unwrap().roles[0].name,
        "KarpenterNodeRole-demo"
    );
    let role = facts.node_role.unwrap();
    let role = role.found().unwrap();
    assert_eq!(role.path, "/nodes/");
    assert!(
        role.assume_role_policy_document
            .as_deref()
            .unwrap()
            .starts_with("%7B")
    );
    assert_eq!(role.attached_policy_arns.found().unwrap().len(), 2);
    let cluster = facts.eks_cluster.found().unwrap();
    assert_eq!(cluster.vpc_id.as_deref(), Some("vpc-a"));
    assert_eq!(
        cluster.authentication_mode.as_deref(),
        Some("API_AND_CONFIG_MAP")
    );
    // The path-stripped entry matches the role with a path; the other principal does not.
    let entries = facts.node_role_access_entries.found().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].type_, "EC2_LINUX");
    let sgs: Vec<_> = facts
        .security_groups
        .found()
        .unwrap()
        .iter()
        .map(|g| g.id.as_str())
        .collect();
    assert_eq!(sgs, ["sg-1", "sg-2"]);
    let instances = facts.cluster_instances.found().unwrap();
    assert_eq!(
        instances.len(),
        4,
        "the other cluster's instance is not swept"
    );
}

#[tokio::test]
async fn names_iam_would_reject_are_absent_without_a_call() {
    let fake = FakeAws::new(world());
    let obs = observer(&fake, options());
    for bad in [
        format!("arn:aws:iam::{ACCOUNT}:instance-profile/demo_profile"),
        "has space".to_owned(),
        "x".repeat(129),
    ] {
        let req = AwsRequest {
            instance_profile: Some(bad),
            role: None,
            ..request()
        };
        let facts = obs.observe(&req).await;
        assert_eq!(facts.instance_profile, Some(Observed::Absent));
        assert_eq!(facts.node_role, None, "no role name is known");
    }
    assert_eq!(fake.calls("GetInstanceProfile"), 0);
    let req = AwsRequest {
        role: Some("arn:aws:iam::1:role/x".into()),
        ..request()
    };
    assert_eq!(obs.observe(&req).await.node_role, Some(Observed::Absent));
    assert_eq!(fake.calls("GetRole"), 0);
}

#[tokio::test]
async fn missing_things_are_proven_absent_and_a_profile_without_role_names_no_role() {
    let fake = FakeAws::new(world());
    let obs = observer(&fake, options());
    let req = AwsRequest {
        cluster_name: Some("nope".into()),
        instance_profile: Some("missing".into()),
        role: None,
        security_group_selector_terms: vec![id_term("sg-404")],
    };
    let facts = obs.observe(&req).await;
    assert_eq!(facts.instance_profile, Some(Observed::Absent));
    assert_eq!(facts.node_role, None);
    assert_eq!(facts.eks_cluster, Observed::Absent);
    assert_eq!(
        facts.security_groups,
        Observed::Found(vec![]),
        "an empty match is a proof"
    );
    assert_eq!(facts.cluster_instances, Observed::Found(vec![]));
    assert_eq!(
        cause(&facts.node_role_access_entries),
        UnknownCause::NotObserved
    );

    let req = AwsRequest {
        instance_profile: Some("empty_profile".into()),
        ..request()
    };
    assert_eq!(obs.observe(&req).await.node_role, None);

    let req = AwsRequest {
        role: Some("NoSuchRole".into()),
        ..request()
    };
    let facts = obs.observe(&req).await;
    assert_eq!(facts.node_role, Some(Observed::Absent));
    assert_eq!(
        cause(&facts.node_role_access_entries),
        UnknownCause::NotObserved
    );
}

#[tokio::test]
async fn an_unknown_profile_makes_the_node_role_unknown_not_missing() {
    let fake = FakeAws::new(world());
    fake.fail(
        "GetInstanceProfile",
        CallError::new(ErrorKind::AccessDenied, "no").with_code("AccessDenied"),
    );
    let facts = observer(&fake, options()).observe(&request()).await;
    assert_eq!(
        cause(facts.instance_profile.as_ref().unwrap()),
        UnknownCause::AccessDenied
    );
    assert_eq!(
        cause(facts.node_role.as_ref().unwrap()),
        UnknownCause::AccessDenied
    );
    assert_eq!(
        cause(&facts.node_role_access_entries),
        UnknownCause::AccessDenied
    );
    match facts.instance_profile.unwrap() {
        Observed::Unknown(u) => assert_eq!(
            u.detail,
            "IAM GetInstanceProfile demo_profile: AccessDenied: no"
        ),
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn an_emulator_without_access_entries_is_unsupported_and_config_map_needs_no_call() {
    let fake = FakeAws::new(FakeState {
        access_entries_supported: false,
        ..world()
    });
    let facts = observer(&fake, options()).observe(&request()).await;
    assert_eq!(
        cause(&facts.node_role_access_entries),
        UnknownCause::Unsupported
    );

    let fake = FakeAws::new(world());
    fake.with(|s| {
        s.clusters.get_mut(CLUSTER).unwrap().authentication_mode = Some("CONFIG_MAP".into())
    });
    let facts = observer(&fake, options()).observe(&request()).await;
    assert_eq!(facts.node_role_access_entries, Observed::Found(vec![]));
    assert_eq!(fake.calls("ListAccessEntries"), 0);
}

#[tokio::test]
async fn access_entries_and_attached_policies_are_read_across_pages() {
    let mut state = world();
    state.eks_page_size = 2;
    state.iam_page_size = 1;
    let entries = state.access_entries.get_mut(CLUSTER).unwrap();
    for n in 0..5 {
        entries.insert(
            0,
            AccessEntryFacts {
                principal_arn: role_arn("/", &format!("r{n}")),
                ..Default::default()
            },
        );
    }
    let fake = FakeAws::new(state);
    let facts = observer(&fake, options()).observe(&request()).await;
    assert_eq!(facts.node_role_access_entries.found().unwrap().len(), 1);
    assert_eq!(fake.calls("ListAccessEntries"), 4);
    assert_eq!(fake.calls("DescribeAccessEntry"), 1);
    assert_eq!(
        facts
            .node_role
            .unwrap()
            .found()
            .unwrap()
            .attached_policy_arns
            .found()
            .unwrap()
            .len(),
        2
    );
    assert_eq!(fake.calls("ListAttachedRolePolicies"), 2);
}

/// 20 EC2NodeClasses over 3 distinct selector sets and one cluster. The sets hold 3 distinct
/// terms (the third shares one with the first), and DescribeSecurityGroups is cached per term.
fn twenty_node_classes() -> Vec<AwsRequest> {
    let sets = [
        vec![tag_term("karpenter.sh/discovery", CLUSTER)],
        vec![id_term("sg-2")],
        vec![
            tag_term("karpenter.sh/discovery", CLUSTER),
            tag_term("team", "*"),
        ],
    ];
    (0..20)
        .map(|n| AwsRequest {
            security_group_selector_terms: sets[n % 3].clone(),
            role: Some("KarpenterNodeRole-demo".into()),
            instance_profile: None,
            ..request()
        })
        .collect()
}

#[tokio::test(start_paused = true)]
async fn ten_thousand_instances_cost_ten_pages_per_sweep_shared_by_all_node_classes() {
    let mut state = world();
    state.instances = (0..10_000).map(|n| instance(n, CLUSTER)).collect();
    state.latency = Duration::from_millis(200);
    let fake = FakeAws::new(state);
    let obs = observer(&fake, options());
    let requests = twenty_node_classes();

    // One refresh: all 20 reconcile at once.
    let all = futures::future::join_all(requests.iter().map(|r| obs.observe(r))).await;
    for facts in &all {
        assert_eq!(facts.cluster_instances.found().unwrap().len(), 10_000);
    }
    assert_eq!(
        fake.calls("DescribeInstances"),
        10,
        "10,000 instances / 1,000 a page"
    );
    assert!(fake.instance_page_sizes().iter().all(|&n| n == 1000));
    assert_eq!(
        fake.calls("DescribeSecurityGroups"),
        3,
        "one per distinct term"
    );
    assert_eq!(fake.calls("GetCallerIdentity"), 1);
    assert_eq!(fake.calls("DescribeCluster"), 1);
    assert_eq!(fake.calls("GetRole"), 1);
    assert_eq!(fake.calls("ListAccessEntries"), 1);
    let stats = obs.call_stats();
    assert_eq!(stats.calls_with("DescribeInstances", Outcome::Ok), 10);

    // Within the TTL a refresh is free.
    fake.reset_calls();
    tokio::time::advance(Duration::from_secs(30)).await;
    futures::future::join_all(requests.iter().map(|r| obs.observe(r))).await;
    assert!(fake.call_log().is_empty(), "{:?}", fake.call_log());

    // After it, one sweep again.
    tokio::time::advance(Duration::from_secs(31)).await;
    futures::future::join_all(requests.iter().map(|r| obs.observe(r))).await;
    assert_eq!(fake.calls("DescribeInstances"), 10);
    assert_eq!(fake.calls("DescribeSecurityGroups"), 3);
    assert_eq!(
        fake.calls("GetCallerIdentity"),
        0,
        "the account is cached for an hour"
    );
}

#[tokio::test(start_paused = true)]
async fn the_optional_second_sweep_by_eks_cluster_name_doubles_pages_and_dedups() {
    let mut state = world();
    state.instances = (0..2_000).map(|n| instance(n, CLUSTER)).collect();
    let fake = FakeAws::new(state);
    let obs = observer(
        &fake,
        ObserverOptions {
            sweep_eks_cluster_name_tag: true,
            ..options()
        },
    );
    let facts = obs.observe(&request()).await;
    assert_eq!(facts.cluster_instances.found().unwrap().len(), 2_000);
    assert_eq!(fake.calls("DescribeInstances"), 4);
}

#[tokio::test(start_paused = true)]
async fn a_failure_is_unknown_keeps_the_last_good_and_recovers_on_the_next_refresh() {
    let fake = FakeAws::new(world());
    let obs = observer(&fake, options());
    let good = obs.observe_detailed(&request()).await;
    assert!(good.stale.is_empty());

    tokio::time::advance(Duration::from_secs(61)).await;
    fake.fail("DescribeInstances", throttled());
    fake.fail(
        "GetRole",
        CallError::new(ErrorKind::Unavailable, "timed out"),
    );
    let bad = obs.observe_detailed(&request()).await;
    assert_eq!(cause(&bad.facts.cluster_instances), UnknownCause::Throttled);
    assert_eq!(
        cause(bad.facts.node_role.as_ref().unwrap()),
        UnknownCause::Unavailable
    );
    assert_eq!(
        cause(&bad.facts.node_role_access_entries),
        UnknownCause::Unavailable
    );
    assert_eq!(bad.last_good.cluster_instances.found().unwrap().len(), 4);
    assert_eq!(
        bad.last_good
            .node_role
            .as_ref()
            .unwrap()
            .found()
            .unwrap()
            .name,
        "KarpenterNodeRole-demo"
    );
    assert!(bad.stale.contains(&StaleFact {
        fact: "cluster_instances",
        age: Duration::from_secs(61)
    }));
    assert!(bad.stale.contains(&StaleFact {
        fact: "node_role",
        age: Duration::from_secs(61)
    }));
    // The rest was refreshed fine.
    assert!(bad.facts.security_groups.found().is_some());
    assert_eq!(
        obs.call_stats()
            .calls_with("DescribeInstances", Outcome::Throttled),
        1
    );

    // Within error_ttl the failure is reported again without calling AWS.
    fake.reset_calls();
    tokio::time::advance(Duration::from_secs(5)).await;
    let again = obs.observe(&request()).await;
    assert_eq!(cause(&again.cluster_instances), UnknownCause::Throttled);
    assert_eq!(fake.calls("DescribeInstances"), 0);

    // AWS recovers: the next refresh after error_ttl sees it, no restart.
    tokio::time::advance(Duration::from_secs(11)).await;
    let healed = obs.observe_detailed(&request()).await;
    assert_eq!(healed.facts.cluster_instances.found().unwrap().len(), 4);
    assert!(healed.facts.node_role.unwrap().found().is_some());
    assert!(healed.stale.is_empty());
}

#[tokio::test]
async fn the_client_side_rate_limit_reports_throttled_instead_of_waiting_forever() {
    let fake = FakeAws::new(world());
    let opts = ObserverOptions {
        rate_limits: RateLimits {
            iam: Rate {
                per_second: 0.01,
                burst: 1,
            },
            ..RateLimits::UNLIMITED
        },
        max_rate_limit_wait: Duration::from_millis(10),
        ..options()
    };
    let obs = observer(&fake, opts);
    let facts = obs.observe(&request()).await;
    // GetInstanceProfile took the one token; GetRole / ListAttachedRolePolicies could not wait.
    assert!(facts.instance_profile.unwrap().found().is_some());
    assert_eq!(
        cause(facts.node_role.as_ref().unwrap()),
        UnknownCause::Throttled
    );
    let stats = obs.call_stats();
    assert_eq!(stats.calls_with("GetRole", Outcome::RateLimited), 1);
    assert_eq!(fake.calls("GetRole"), 0, "not sent");
}

#[tokio::test]
async fn call_stats_count_by_operation_and_outcome() {
    let fake = FakeAws::new(world());
    let obs = observer(&fake, options());
    obs.observe(&AwsRequest {
        instance_profile: Some("missing".into()),
        ..request()
    })
    .await;
    let stats = obs.call_stats();
    assert_eq!(stats.calls_with("GetInstanceProfile", Outcome::Absent), 1);
    assert_eq!(stats.calls_with("GetCallerIdentity", Outcome::Ok), 1);
    assert!(
        stats
            .calls
            .iter()
            .all(|c| ["iam", "ec2", "eks", "sts"].contains(&c.service))
    );
}
