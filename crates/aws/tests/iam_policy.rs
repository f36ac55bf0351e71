//! The shipped IAM policy (deploy/iam-policy.json) grants exactly the calls the adapter makes:
//! a full observation against the fake, with every optional read asked for, makes each granted
//! action at least once and no other. Reads the policy file (IO in a test only).

// This test uses only part of the shared fixture.
#[allow(dead_code)]
mod common;

use common::{CLUSTER, observer, options, role_arn, wiring_request, world};
use karpenter_health_aws::fake::FakeAws;
use karpenter_health_aws::ports::{CallError, ErrorKind, KmsKeyData, PodIdentityRoles};
use karpenter_health_aws::{AwsRequest, ServiceAccountRef};
use karpenter_health_checks::plan::volume_keys::{DefaultKeyUse, VolumeKeys};
use std::collections::BTreeSet;

const POLICY: &str = include_str!("../../../deploy/iam-policy.json");

fn granted() -> BTreeSet<String> {
    let policy: serde_json::Value = serde_json::from_str(POLICY).expect("policy JSON");
    policy["Statement"]
        .as_array()
        .expect("statements")
        .iter()
        .flat_map(|s| s["Action"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

#[tokio::test]
async fn the_shipped_policy_grants_exactly_the_calls_the_adapter_makes() {
    let aws_node = ServiceAccountRef {
        namespace: "kube-system".into(),
        name: "aws-node".into(),
    };
    let mut state = world();
    state.pod_identity.insert(
        CLUSTER.into(),
        vec![(
            aws_node.clone(),
            "a-1".into(),
            PodIdentityRoles::role(role_arn("/", "CniRole")),
        )],
    );
    // A customer-managed key the volumes name, so its policy is read too.
    state.kms_keys.insert(
        "k-1".into(),
        (
            KmsKeyData {
                key_id: "k-1".into(),
                arn: "arn:aws:kms:us-west-2:123456789012:key/k-1".into(),
                state: "Enabled".into(),
                manager: "CUSTOMER".into(),
            },
            "{}".into(),
        ),
    );
    let fake = FakeAws::new(state);
    // The simulator refuses once, so the role's own policies are read as well.
    fake.fail_next(
        "SimulatePrincipalPolicy",
        CallError::new(ErrorKind::AccessDenied, "denied").with_code("AccessDenied"),
    );
    let obs = observer(&fake, options());
    obs.observe(&AwsRequest {
        pod_identity_service_accounts: vec![aws_node],
        volume_keys: Some(VolumeKeys {
            named: BTreeSet::from(["k-1".to_owned()]),
            default: DefaultKeyUse::Always,
        }),
        ami_alias: Some("al2023@latest".into()),
        image_ids: vec!["ami-0a".into()],
        ..wiring_request()
    })
    .await;
    let made: BTreeSet<String> = obs
        .call_stats()
        .calls
        .iter()
        .map(|c| format!("{}:{}", c.service, c.operation))
        .collect();
    let granted = granted();
    let missing: Vec<&String> = made.difference(&granted).collect();
    let unused: Vec<&String> = granted.difference(&made).collect();
    assert!(
        missing.is_empty(),
        "calls the policy does not grant: {missing:?}"
    );
    assert!(unused.is_empty(), "granted but never called: {unused:?}");
}
