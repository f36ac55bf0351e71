//! The observer over the in-memory fake: what calls go out (the call budget at 10,000
//! instances shared by 20 node classes), and how failures, caching, recovery and the client-side
//! rate limit behave. No IO.

use crate::common::{
    CLUSTER, cause, id_term, instance, observer, options, request, tag_term, world,
};
use karpenter_health_aws::fake::{FakeAws, throttled};
use karpenter_health_aws::ports::{CallError, ErrorKind};
use karpenter_health_aws::{AwsRequest, ObserverOptions, Outcome, Rate, RateLimits, StaleFact};
use karpenter_health_checks::facts::UnknownCause;
use std::time::Duration;

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

#[tokio::test(start_paused = true)]
async fn permission_answers_outlive_the_other_reads_so_classes_do_not_spend_the_iam_budget() {
    use crate::common::wiring_request;
    let fake = FakeAws::new(world());
    let obs = observer(&fake, options());
    obs.observe(&wiring_request()).await;
    let simulated = fake.calls("SimulatePrincipalPolicy");
    assert!(simulated > 0, "the first observation asks the simulator");

    // Past the ordinary TTL the role is read again, the permissions are not.
    tokio::time::advance(options().ttl + Duration::from_secs(1)).await;
    fake.reset_calls();
    obs.observe(&wiring_request()).await;
    assert!(fake.calls("GetRole") > 0);
    assert_eq!(fake.calls("SimulatePrincipalPolicy"), 0);

    // Past the permissions TTL they are asked again.
    tokio::time::advance(options().permissions_ttl).await;
    fake.reset_calls();
    obs.observe(&wiring_request()).await;
    assert_eq!(fake.calls("SimulatePrincipalPolicy"), simulated);
}
