//! The observer over the in-memory fake: what facts come out of AWS's answers, what is proven
//! absent and what is unknown, and that listings are read across pages. No IO.

use crate::common::{
    ACCOUNT, CLUSTER, cause, id_term, observer, options, request, role_arn, world,
};
use karpenter_health_aws::fake::{FakeAws, FakeState};
use karpenter_health_aws::ports::{CallError, ErrorKind, PodIdentityRoles};
use karpenter_health_aws::{AwsRequest, ServiceAccountRef};
use karpenter_health_checks::facts::{AccessEntryFacts, Observed, UnknownCause};

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
async fn an_arn_is_looked_up_by_its_name_and_nothing_is_absent_without_an_answer() {
    let fake = FakeAws::new(world());
    let obs = observer(&fake, options());
    // The engine reports the ARN itself; the facts about the profile it names are IAM's.
    let req = AwsRequest {
        instance_profile: Some(format!(
            "arn:aws:iam::{ACCOUNT}:instance-profile/demo_profile"
        )),
        role: None,
        ..request()
    };
    let facts = obs.observe(&req).await;
    match &facts.instance_profile {
        Some(Observed::Found(profile)) => assert_eq!(profile.name, "demo_profile"),
        other => panic!("an ARN naming an existing profile must be found, got {other:?}"),
    }
    assert!(
        matches!(facts.node_role, Some(Observed::Found(_))),
        "the role comes from the profile the ARN names"
    );
    assert_eq!(fake.calls("GetInstanceProfile"), 1);
    // Names IAM cannot hold are asked too: absent only from IAM's answer.
    for bad in ["has space".to_owned(), "x".repeat(129)] {
        let req = AwsRequest {
            instance_profile: Some(bad),
            role: None,
            ..request()
        };
        let facts = obs.observe(&req).await;
        assert_eq!(facts.instance_profile, Some(Observed::Absent));
        assert_eq!(facts.node_role, None, "no role name is known");
    }
    assert_eq!(fake.calls("GetInstanceProfile"), 3);
    let req = AwsRequest {
        role: Some("arn:aws:iam::1:role/x".into()),
        ..request()
    };
    assert_eq!(obs.observe(&req).await.node_role, Some(Observed::Absent));
    // One GetRole for the profile's role above, one for the name x.
    assert_eq!(fake.calls("GetRole"), 2, "looked up by the name x");
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
        pod_identity_service_accounts: Vec::new(),
        ..Default::default()
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

#[tokio::test]
async fn pod_identity_roles_are_read_only_for_the_service_accounts_asked_about() {
    let sa = |namespace: &str, name: &str| ServiceAccountRef {
        namespace: namespace.into(),
        name: name.into(),
    };
    let cni_role = role_arn("/", "AmazonEKSPodIdentityAmazonVPCCNIRole");
    let mut state = world();
    state.pod_identity.insert(
        CLUSTER.into(),
        vec![(
            sa("kube-system", "aws-node"),
            "a-1".into(),
            PodIdentityRoles::role(cni_role.clone()),
        )],
    );
    let fake = FakeAws::new(state);
    let obs = observer(&fake, options());

    // Not asked: no call.
    obs.observe(&request()).await;
    assert_eq!(fake.calls("ListPodIdentityAssociations"), 0);

    let asked = AwsRequest {
        pod_identity_service_accounts: vec![
            sa("kube-system", "aws-node"),
            sa("kube-system", "karpenter"),
        ],
        ..request()
    };
    let facts = obs.observe(&asked).await;
    assert_eq!(
        facts.pod_identity_role("kube-system/aws-node"),
        Observed::Found(Some(cni_role))
    );
    assert_eq!(
        facts.pod_identity_role("kube-system/karpenter"),
        Observed::Found(None),
        "no association is an answer, not an absence"
    );
    assert_eq!(fake.calls("ListPodIdentityAssociations"), 2);
    assert_eq!(fake.calls("DescribePodIdentityAssociation"), 1);

    // An endpoint without the API (moto) is unknown, never "no association".
    let mut moto_like = world();
    moto_like.access_entries_supported = false;
    let fake = FakeAws::new(moto_like);
    let facts = observer(&fake, options()).observe(&asked).await;
    assert_eq!(
        cause(&facts.pod_identity_role("kube-system/aws-node")),
        UnknownCause::Unsupported
    );
}

#[tokio::test]
async fn the_controllers_role_queue_and_spot_role_are_read_and_the_simulator_answers_each_question()
{
    use crate::common::{QUEUE, wiring_request};
    let fake = FakeAws::new(world());
    fake.with(|s| {
        s.simulated
            .insert("iam:PassRole".into(), "implicitDeny".into());
    });
    let obs = observer(&fake, options());
    let facts = obs.observe(&wiring_request()).await;
    let role = facts
        .controller_role
        .expect("asked")
        .found()
        .cloned()
        .expect("found");
    assert_eq!(
        role.permissions_boundary_arn.as_deref(),
        Some(crate::common::BOUNDARY)
    );
    let permissions = facts.controller_permissions.expect("asked");
    let decisions = permissions.simulated.found().cloned().expect("simulated");
    // Three groups (launch, instance profile, images): every question has its answer.
    assert_eq!(fake.calls("SimulatePrincipalPolicy"), 3);
    assert!(
        decisions
            .iter()
            .any(|d| d.action == "ec2:DescribeImages" && d.resource == "*")
    );
    let pass = decisions
        .iter()
        .find(|d| d.action == "iam:PassRole" && d.resource.ends_with("KarpenterNodeRole-demo"))
        .expect("PassRole on the node role");
    assert_eq!(pass.decision, "implicitDeny");
    assert!(
        decisions
            .iter()
            .any(|d| d.action == "iam:CreateInstanceProfile" && d.decision == "allowed")
    );
    assert_eq!(
        permissions.policies, None,
        "no local read while the simulator answers"
    );
    assert_eq!(facts.oidc_providers.found().map(Vec::len), Some(1));
    let queue = facts
        .interruption_queue
        .expect("asked")
        .found()
        .cloned()
        .expect("found");
    assert_eq!(queue.name, QUEUE);
    assert_eq!(queue.rules.found().map(Vec::len), Some(1));
    assert!(matches!(
        facts.spot_service_linked_role,
        Some(Observed::Found(_))
    ));

    // A missing queue and spot role are proven absent.
    fake.with(|s| {
        s.queues.clear();
        s.roles.remove("AWSServiceRoleForEC2Spot");
    });
    let fresh = observer(&fake, options());
    let facts = fresh.observe(&wiring_request()).await;
    assert_eq!(facts.interruption_queue, Some(Observed::Absent));
    assert_eq!(facts.spot_service_linked_role, Some(Observed::Absent));
}

#[tokio::test]
async fn a_denied_simulator_falls_back_to_the_roles_own_policies_and_a_denied_fallback_is_unknown()
{
    use crate::common::wiring_request;
    use karpenter_health_aws::ports::{CallError, ErrorKind};
    let denied = || CallError::new(ErrorKind::AccessDenied, "no").with_code("AccessDenied");
    let fake = FakeAws::new(world());
    fake.fail("SimulatePrincipalPolicy", denied());
    let facts = observer(&fake, options()).observe(&wiring_request()).await;
    let permissions = facts.controller_permissions.expect("asked");
    assert!(
        matches!(permissions.simulated, Observed::Unknown(ref u) if u.cause == UnknownCause::AccessDenied)
    );
    let policies = permissions
        .policies
        .expect("read")
        .found()
        .cloned()
        .expect("found");
    let names: Vec<&str> = policies.identity.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["inline policy pass", crate::common::LAUNCH_POLICY]);
    assert!(policies.boundary.is_some());

    fake.fail("GetRolePolicy", denied());
    let facts = observer(&fake, options()).observe(&wiring_request()).await;
    let policies = facts
        .controller_permissions
        .expect("asked")
        .policies
        .expect("asked");
    assert!(matches!(policies, Observed::Unknown(u) if u.cause == UnknownCause::AccessDenied));
}
