//! The operator's IAM policy, in every variant `karpenter-health iam-policy` prints and as the
//! shipped templates (deploy/iam-policy*.json) hold it, grants exactly the calls the adapter
//! makes: a full observation against the fake, with every optional read asked for, makes each
//! granted action at least once and no other. Reads the template files (IO in a test only).

use crate::common::{CLUSTER, observer, options, role_arn, wiring_request, world};
use karpenter_health_aws::fake::FakeAws;
use karpenter_health_aws::ports::{CallError, ErrorKind, KmsKeyData, PodIdentityRoles};
use karpenter_health_aws::{AwsRequest, ServiceAccountRef};
use karpenter_health_checks::plan::volume_keys::{DefaultKeyUse, VolumeKeys};
use std::collections::BTreeSet;

use karpenter_health_aws::policy::{
    Credentials, PolicyScope, TEMPLATES, granted_actions, operator_policy, render,
};

/// Every variant of the policy: both credentials, a named queue, an exact controller role, every
/// region.
fn variants() -> Vec<(String, serde_json::Value)> {
    let mut all = Vec::new();
    for credentials in [Credentials::Irsa, Credentials::PodIdentity] {
        let base = PolicyScope {
            partition: "aws".into(),
            account: "123456789012".into(),
            region: "us-west-2".into(),
            cluster_name: CLUSTER.into(),
            controller_role: "KarpenterController*".into(),
            interruption_queue: None,
            credentials,
        };
        for scope in [
            base.clone(),
            PolicyScope {
                interruption_queue: Some("interruptions".into()),
                controller_role: role_arn("/", "KarpenterControllerRole"),
                region: "*".into(),
                ..base.clone()
            },
            PolicyScope::placeholders(credentials),
        ] {
            all.push((format!("{scope:?}"), operator_policy(&scope)));
        }
    }
    for (path, _) in TEMPLATES {
        let text = std::fs::read_to_string(format!("../../{path}"))
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let shipped: serde_json::Value =
            serde_json::from_str(&text).unwrap_or_else(|e| panic!("{path}: {e}"));
        all.push(((*path).to_owned(), shipped));
    }
    all
}

#[test]
fn the_shipped_templates_are_current() {
    for (path, credentials) in TEMPLATES {
        let text = std::fs::read_to_string(format!("../../{path}")).unwrap_or_default();
        assert!(
            text == render(&operator_policy(&PolicyScope::placeholders(*credentials))),
            "{path} is stale: run `make generate`"
        );
    }
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
    for (variant, policy) in variants() {
        let granted = granted_actions(&policy);
        let missing: Vec<&String> = made.difference(&granted).collect();
        let unused: Vec<&String> = granted.difference(&made).collect();
        assert!(
            missing.is_empty(),
            "{variant}: calls the policy does not grant: {missing:?}"
        );
        assert!(
            unused.is_empty(),
            "{variant}: granted but never called: {unused:?}"
        );
    }
}

#[test]
fn docs_say_what_each_statement_costs() {
    let policy = operator_policy(&PolicyScope::placeholders(Credentials::Irsa));
    let sids: BTreeSet<&str> = policy["Statement"]
        .as_array()
        .expect("statements")
        .iter()
        .filter_map(|s| s["Sid"].as_str())
        .collect();
    let documented: BTreeSet<&str> =
        karpenter_health_checks::docs::iam_scoping_statements().collect();
    assert_eq!(sids, documented, "crates/checks/src/docs.rs IAM_SCOPING");
}
