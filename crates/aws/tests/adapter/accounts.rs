//! The observer's reads for setups real accounts have (issue 22), over the in-memory fake: rules
//! on custom event buses and what feeds them, a queue's SSE-KMS key, a controller role of another
//! account (never read by name here), a Pod Identity association with a target role, and IAM's
//! answer for the controller on a customer-managed key. No IO.

use crate::common::{
    ACCOUNT, CONTROLLER_ROLE, QUEUE, observer, options, role_arn, wiring_request, world,
};
use karpenter_health_aws::fake::{FakeAws, event_bus_arn};
use karpenter_health_aws::ports::{KmsKeyData, PodIdentityRoles, QueueAttributes};
use karpenter_health_aws::{AwsRequest, ControllerRequest, ServiceAccountRef};
use karpenter_health_checks::facts::{EventRuleFacts, Observed, UnknownCause};
use karpenter_health_checks::plan::volume_keys::{DefaultKeyUse, VolumeKeys};
use std::collections::BTreeSet;

fn rule(name: &str, bus: &str) -> EventRuleFacts {
    EventRuleFacts {
        name: name.into(),
        arn: format!("arn:aws:events:us-west-2:{ACCOUNT}:rule/{bus}/{name}"),
        state: "ENABLED".into(),
        event_pattern: Some(r#"{"source":["aws.ec2"]}"#.into()),
        event_bus: bus.into(),
    }
}

#[tokio::test]
async fn rules_of_every_bus_and_the_default_bus_rules_feeding_a_custom_one_are_read() {
    let mut state = world();
    let queue_arn = format!("arn:aws:sqs:us-west-2:{ACCOUNT}:{QUEUE}");
    state.rules.clear();
    state
        .rules
        .push((rule("on-custom", "karpenter"), vec![queue_arn.clone()]));
    state
        .rules
        .push((rule("forward", "default"), vec![event_bus_arn("karpenter")]));
    state
        .rules
        .push((rule("elsewhere", "other"), vec!["arn:aws:sqs:x".into()]));
    let fake = FakeAws::new(state);
    let facts = observer(&fake, options()).observe(&wiring_request()).await;
    let queue = facts.interruption_queue.unwrap();
    let queue = queue.found().unwrap();
    let names: Vec<&str> = queue
        .rules
        .found()
        .unwrap()
        .iter()
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(names, ["on-custom"], "only rules targeting the queue");
    assert_eq!(queue.rules.found().unwrap()[0].event_bus, "karpenter");
    let feeding = queue.bus_forwarders.get("karpenter").unwrap();
    assert_eq!(feeding.found().unwrap()[0].name, "forward");
    assert_eq!(fake.calls("ListEventBuses"), 1);
    // Only the buses with a rule targeting the queue are asked about what feeds them.
    assert!(!queue.bus_forwarders.contains_key("other"));
}

#[tokio::test]
async fn a_queues_sse_kms_key_is_read_with_its_policy_and_the_aws_managed_one_by_name_only() {
    let mut state = world();
    let (url, attributes) = state.queues.get(QUEUE).cloned().unwrap();
    state.queues.insert(
        QUEUE.into(),
        (
            url.clone(),
            QueueAttributes {
                kms_master_key_id: Some("alias/queue-key".into()),
                ..attributes.clone()
            },
        ),
    );
    state.kms_keys.insert(
        "qk".into(),
        (
            KmsKeyData {
                key_id: "qk".into(),
                arn: format!("arn:aws:kms:us-west-2:{ACCOUNT}:key/qk"),
                state: "Enabled".into(),
                manager: "CUSTOMER".into(),
            },
            "{\"Statement\":[]}".into(),
        ),
    );
    state
        .kms_aliases
        .insert("alias/queue-key".into(), "qk".into());
    let fake = FakeAws::new(state.clone());
    let facts = observer(&fake, options()).observe(&wiring_request()).await;
    let queue = facts.interruption_queue.unwrap();
    let key = queue.found().unwrap().kms_key.clone().unwrap();
    assert_eq!(key.found().unwrap().key_id, "qk");
    assert!(key.found().unwrap().policy.found().is_some());

    state.queues.insert(
        QUEUE.into(),
        (
            url,
            QueueAttributes {
                kms_master_key_id: Some("alias/aws/sqs".into()),
                ..attributes
            },
        ),
    );
    let fake = FakeAws::new(state);
    let facts = observer(&fake, options()).observe(&wiring_request()).await;
    let queue = facts.interruption_queue.unwrap();
    assert!(queue.found().unwrap().kms_key.is_none());
    assert_eq!(fake.calls("DescribeKey"), 0, "judged by its name");
}

#[tokio::test]
async fn a_controller_role_of_another_account_is_never_read_by_name_here() {
    let fake = FakeAws::new(world());
    let mut request = wiring_request();
    if let Some(c) = request.controller.as_mut() {
        c.irsa_role_arn = Some(format!("arn:aws:iam::999988887777:role/{CONTROLLER_ROLE}"));
    }
    let facts = observer(&fake, options()).observe(&request).await;
    let role = facts.controller_role.unwrap();
    assert!(
        matches!(&role, Observed::Unknown(u) if u.cause == UnknownCause::OtherAccount),
        "{role:?}"
    );
    assert!(facts.controller_permissions.is_none());
    // The only GetRole is the spot service-linked role's (and the node role's).
    assert_eq!(fake.calls("SimulatePrincipalPolicy"), 0);
}

#[tokio::test]
async fn a_pod_identity_target_role_is_the_controllers_and_the_association_role_is_named() {
    let mut state = world();
    let sa = ServiceAccountRef {
        namespace: "kube-system".into(),
        name: "karpenter".into(),
    };
    let via = role_arn("/", "PodIdentityHop");
    state.pod_identity.insert(
        crate::common::CLUSTER.into(),
        vec![(
            sa.clone(),
            "a-1".into(),
            PodIdentityRoles {
                role_arn: via.clone(),
                target_role_arn: Some(role_arn("/", CONTROLLER_ROLE)),
            },
        )],
    );
    let fake = FakeAws::new(state);
    let base = wiring_request();
    let request = AwsRequest {
        controller: base.controller.clone().map(|c| ControllerRequest {
            irsa_role_arn: None,
            ..c
        }),
        pod_identity_service_accounts: vec![sa],
        ..base
    };
    let facts = observer(&fake, options()).observe(&request).await;
    assert_eq!(
        facts.pod_identity_role("kube-system/karpenter"),
        Observed::Found(Some(role_arn("/", CONTROLLER_ROLE)))
    );
    assert_eq!(
        facts.pod_identity_via.get("kube-system/karpenter"),
        Some(&via)
    );
    assert_eq!(
        facts.controller_role.unwrap().found().unwrap().name,
        CONTROLLER_ROLE
    );
}

#[tokio::test]
async fn iam_is_asked_for_the_controller_on_each_customer_managed_key() {
    let mut state = world();
    let key_arn = format!("arn:aws:kms:us-west-2:{ACCOUNT}:key/vk");
    state.kms_keys.insert(
        "vk".into(),
        (
            KmsKeyData {
                key_id: "vk".into(),
                arn: key_arn.clone(),
                state: "Enabled".into(),
                manager: "CUSTOMER".into(),
            },
            "{\"Statement\":[]}".into(),
        ),
    );
    state
        .simulated
        .insert("kms:Decrypt".into(), "implicitDeny".into());
    let fake = FakeAws::new(state);
    let request = AwsRequest {
        volume_keys: Some(VolumeKeys {
            named: BTreeSet::from(["vk".to_owned()]),
            default: DefaultKeyUse::Never,
        }),
        ..wiring_request()
    };
    let facts = observer(&fake, options()).observe(&request).await;
    let key = facts.kms_keys.get("vk").unwrap().found().unwrap();
    let decisions = key.controller_iam.found().unwrap();
    let decrypt = decisions
        .iter()
        .find(|d| d.action == "kms:Decrypt")
        .unwrap();
    assert_eq!(
        (decrypt.resource.as_str(), decrypt.decision.as_str()),
        (key_arn.as_str(), "implicitDeny")
    );
}
