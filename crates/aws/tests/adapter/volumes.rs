//! The observer's volume-encryption reads against the fake: what is read when, what is absent
//! only on KMS's NotFoundException, that a denied read is unknown with its cause, and that keys
//! and the account's defaults are read once for many classes. No IO (the fake).

use crate::common::{CONTROLLER_ROLE, observer, options, request, role_arn, wiring_request, world};
use karpenter_health_aws::AwsRequest;
use karpenter_health_aws::fake::FakeAws;
use karpenter_health_aws::ports::{CallError, ErrorKind, KmsGrantData, KmsKeyData};
use karpenter_health_checks::facts::{Observed, UnknownCause};
use karpenter_health_checks::plan::volume_keys::{DefaultKeyUse, VolumeKeys};
use std::collections::BTreeSet;

const KEY_ARN: &str = "arn:aws:kms:us-west-2:123456789012:key/k-1";

fn fake() -> FakeAws {
    let mut s = world();
    s.kms_keys.insert(
        "k-1".into(),
        (
            KmsKeyData {
                key_id: "k-1".into(),
                arn: KEY_ARN.into(),
                state: "Disabled".into(),
                manager: "CUSTOMER".into(),
            },
            "{\"Statement\":[]}".into(),
        ),
    );
    s.kms_aliases.insert("alias/nodes".into(), "k-1".into());
    FakeAws::new(s)
}

fn asking(named: &[&str], default: DefaultKeyUse) -> AwsRequest {
    AwsRequest {
        volume_keys: Some(VolumeKeys {
            named: named.iter().map(|k| k.to_string()).collect::<BTreeSet<_>>(),
            default,
        }),
        ..request()
    }
}

#[tokio::test]
async fn a_named_key_is_described_with_its_policy_and_a_missing_one_is_absent() {
    let fake = fake();
    let obs = observer(&fake, options());
    let facts = obs
        .observe(&asking(
            &["alias/nodes", "alias/gone"],
            DefaultKeyUse::Never,
        ))
        .await;
    let key = facts.kms_keys["alias/nodes"].found().expect("found");
    assert_eq!(
        (key.arn.as_str(), key.state.as_str()),
        (KEY_ARN, "Disabled")
    );
    assert_eq!(key.policy, Observed::Found("{\"Statement\":[]}".into()));
    assert_eq!(facts.kms_keys["alias/gone"], Observed::Absent);
    // Every volume names its key: the account's defaults are not read.
    assert_eq!(facts.ebs_encryption, None);
    assert_eq!(fake.calls("GetEbsEncryptionByDefault"), 0);
}

#[tokio::test]
async fn denied_reads_are_unknown_with_the_cause_never_absent() {
    let fake = fake();
    let denied =
        || CallError::new(ErrorKind::AccessDenied, "no").with_code("AccessDeniedException");
    fake.fail("GetKeyPolicy", denied());
    fake.fail("GetEbsDefaultKmsKeyId", denied());
    let obs = observer(&fake, options());
    let facts = obs.observe(&asking(&["k-1"], DefaultKeyUse::Always)).await;
    let key = facts.kms_keys["k-1"].found().expect("DescribeKey answered");
    assert_eq!(
        key.policy.unobserved().map(|u| u.cause),
        Some(UnknownCause::AccessDenied)
    );
    let ebs = facts
        .ebs_encryption
        .expect("asked")
        .found()
        .cloned()
        .expect("found");
    assert_eq!(
        ebs.default_kms_key_id.unobserved().map(|u| u.cause),
        Some(UnknownCause::AccessDenied)
    );
    fake.fail("DescribeKey", denied());
    let obs = observer(&fake, options());
    let facts = obs.observe(&asking(&["k-1"], DefaultKeyUse::Never)).await;
    assert_eq!(
        facts.kms_keys["k-1"].unobserved().map(|u| u.cause),
        Some(UnknownCause::AccessDenied)
    );
}

#[tokio::test]
async fn the_default_key_is_read_only_when_used_and_keys_are_read_once_for_many_classes() {
    let fake = fake();
    fake.with(|s| s.ebs_default_kms_key_id = KEY_ARN.into());
    let obs = observer(&fake, options());
    // Unencrypted volumes, default encryption off: the default key is not needed.
    let facts = obs
        .observe(&asking(&[], DefaultKeyUse::IfEncryptedByDefault))
        .await;
    let ebs = facts.ebs_encryption.unwrap().found().cloned().unwrap();
    assert!(!ebs.by_default);
    assert_eq!(fake.calls("GetEbsDefaultKmsKeyId"), 0);
    assert!(facts.kms_keys.is_empty());
    // Ten classes using the default key and the same named key.
    for _ in 0..10 {
        let facts = obs
            .observe(&asking(&[KEY_ARN], DefaultKeyUse::Always))
            .await;
        assert!(facts.kms_keys[KEY_ARN].found().is_some());
    }
    assert_eq!(fake.calls("GetEbsDefaultKmsKeyId"), 1);
    assert_eq!(fake.calls("GetEbsEncryptionByDefault"), 1);
    assert_eq!(fake.calls("DescribeKey"), 1);
    assert_eq!(fake.calls("GetKeyPolicy"), 1);
}

#[tokio::test]
async fn the_controllers_grants_are_read_once_per_key_and_only_its_own_are_kept() {
    let fake = fake();
    let controller = role_arn("/", CONTROLLER_ROLE);
    fake.with(|s| {
        s.kms_grants.insert(
            "k-1".into(),
            vec![
                KmsGrantData {
                    grantee_principal: controller.clone(),
                    operations: vec!["Decrypt".into(), "CreateGrant".into()],
                    constrained: false,
                },
                KmsGrantData {
                    grantee_principal: role_arn("/", "Someone"),
                    operations: vec!["Decrypt".into()],
                    constrained: true,
                },
            ],
        );
    });
    let obs = observer(&fake, options());
    let ask = AwsRequest {
        volume_keys: Some(VolumeKeys {
            named: BTreeSet::from(["alias/nodes".to_owned(), "k-1".to_owned()]),
            default: DefaultKeyUse::Never,
        }),
        ..wiring_request()
    };
    let facts = obs.observe(&ask).await;
    for reference in ["alias/nodes", "k-1"] {
        let key = facts.kms_keys[reference].found().expect("found");
        let grants = key.controller_grants.found().expect("grants read");
        assert_eq!(grants.len(), 1, "{grants:?}");
        assert_eq!(grants[0].grantee_principal, controller);
        assert_eq!(grants[0].operations, ["Decrypt", "CreateGrant"]);
    }
    // Two references to one key: one ListGrants, by the key's ARN and the controller's role.
    assert_eq!(fake.calls("ListGrants"), 1);
    obs.observe(&ask).await;
    assert_eq!(fake.calls("ListGrants"), 1, "cached");

    // Without a known controller role, no grant is read and none is claimed.
    let obs = observer(&fake, options());
    let facts = obs.observe(&asking(&["k-1"], DefaultKeyUse::Never)).await;
    let key = facts.kms_keys["k-1"].found().expect("found");
    assert_eq!(
        key.controller_grants.unobserved().map(|u| u.cause),
        Some(UnknownCause::NotObserved)
    );
    assert_eq!(fake.calls("ListGrants"), 1);

    // A denied ListGrants is unknown with its cause.
    fake.fail(
        "ListGrants",
        CallError::new(ErrorKind::AccessDenied, "no").with_code("AccessDeniedException"),
    );
    let obs = observer(&fake, options());
    let facts = obs.observe(&ask).await;
    let key = facts.kms_keys["k-1"].found().expect("found");
    assert_eq!(
        key.controller_grants.unobserved().map(|u| u.cause),
        Some(UnknownCause::AccessDenied)
    );
}
