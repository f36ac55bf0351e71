//! Scenarios of `VolumeEncryptionReady` beyond one sentence per reason: which key policies and
//! grants let EC2 in, what the controller's own IAM permissions must allow, and what stays
//! Unknown. Pure.

use super::reasons::status;
use crate::facts::{EbsEncryptionFacts, Facts, KmsGrantFacts, KmsKeyFacts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::ConditionType;

fn volumes(f: &Facts) -> (String, String, String) {
    let s = status(f);
    let c = s.condition(ConditionType::VolumeEncryptionReady).unwrap();
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn with_policy(policy: &str) -> Facts {
    Facts::healthy().with_volume_key(
        KMS_KEY,
        Observed::Found(kms_key(KMS_KEY, "Enabled", policy)),
    )
}

const EBS_VIA_SERVICE: &str = r#"{"Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"Action":["kms:Encrypt","kms:Decrypt","kms:ReEncrypt*","kms:GenerateDataKey*","kms:CreateGrant","kms:DescribeKey"],"Resource":"*","Condition":{"StringEquals":{"kms:ViaService":"ec2.us-west-2.amazonaws.com","kms:CallerAccount":"111122223333"}}}]}"#;

#[test]
fn a_key_policy_delegating_to_the_account_or_allowing_ec2_through_via_service_is_usable() {
    for policy in [
        default_key_policy(),
        EBS_VIA_SERVICE.to_owned(),
        // A bare account id is the account's root.
        default_key_policy().replace("arn:aws:iam::111122223333:root", "111122223333"),
        // The controller's role itself, named.
        default_key_policy().replace("arn:aws:iam::111122223333:root", &role_arn(CONTROLLER_ROLE)),
    ] {
        let (s, r, m) = volumes(&with_policy(&policy));
        assert_eq!(
            (s.as_str(), r.as_str()),
            ("True", "VolumeEncryptionKeysUsable"),
            "{policy}: {m}"
        );
    }
}

#[test]
fn via_service_for_another_region_or_a_deny_is_false() {
    let other_region = EBS_VIA_SERVICE.replace("ec2.us-west-2", "ec2.eu-west-1");
    let (s, r, m) = volumes(&with_policy(&other_region));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("False", "KmsKeyPolicyDeniesEc2"),
        "{m}"
    );
    assert!(m.contains("kms:CreateGrant"), "{m}");
    let deny = default_key_policy().replace(
        r#"}]}"#,
        r#"},{"Sid":"NoGrants","Effect":"Deny","Principal":"*","Action":"kms:CreateGrant","Resource":"*"}]}"#,
    );
    let (s, r, m) = volumes(&with_policy(&deny));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("False", "KmsKeyPolicyDeniesEc2"),
        "{m}"
    );
    assert!(m.contains("NoGrants"), "{m}");
}

/// A key whose policy admits only someone else, with the given grants to the controller's role.
fn someone_elses_key_with_grants(grants: Observed<Vec<KmsGrantFacts>>) -> Facts {
    let named = default_key_policy().replace(
        "arn:aws:iam::111122223333:root",
        "arn:aws:iam::111122223333:role/Someone",
    );
    let key = KmsKeyFacts {
        controller_grants: grants,
        ..kms_key(KMS_KEY, "Enabled", &named)
    };
    Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(key))
}

fn grant(operations: &[&str], constrained: bool) -> KmsGrantFacts {
    KmsGrantFacts {
        grantee_principal: role_arn(CONTROLLER_ROLE),
        operations: operations.iter().map(|o| (*o).to_owned()).collect(),
        constrained,
    }
}

const EC2_OPERATIONS: [&str; 6] = [
    "CreateGrant",
    "Decrypt",
    "GenerateDataKeyWithoutPlaintext",
    "ReEncryptFrom",
    "ReEncryptTo",
    "DescribeKey",
];

#[test]
fn grants_to_the_controller_count_beyond_the_key_policy_and_unread_grants_never_make_it_false() {
    // No grant: the policy alone decides, and it admits neither the account nor the controller.
    let (s, r, m) = volumes(&someone_elses_key_with_grants(Observed::Found(vec![])));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("False", "KmsKeyPolicyDeniesEc2"),
        "{m}"
    );
    // A grant of every operation EC2 uses makes the key usable.
    let granted = Observed::Found(vec![grant(&EC2_OPERATIONS, false)]);
    let (s, r, m) = volumes(&someone_elses_key_with_grants(granted));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("True", "VolumeEncryptionKeysUsable"),
        "{m}"
    );
    // A grant missing CreateGrant leaves exactly that action denied.
    let partial = Observed::Found(vec![grant(&EC2_OPERATIONS[1..], false)]);
    let (s, r, m) = volumes(&someone_elses_key_with_grants(partial));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("False", "KmsKeyPolicyDeniesEc2"),
        "{m}"
    );
    assert!(
        m.contains("kms:CreateGrant") && !m.contains("kms:Decrypt"),
        "{m}"
    );
    // A grant under an encryption context constraint is not judged.
    let constrained = Observed::Found(vec![grant(&EC2_OPERATIONS, true)]);
    let (s, r, m) = volumes(&someone_elses_key_with_grants(constrained));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("Unknown", "PolicyUndecided"),
        "{m}"
    );
    assert!(m.contains("encryption context"), "{m}");
    // Grants that could not be read: never False.
    let (s, r, m) = volumes(&someone_elses_key_with_grants(unknown(
        UnknownCause::AccessDenied,
    )));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("Unknown", "PolicyUndecided"),
        "{m}"
    );
    assert!(m.contains("grants"), "{m}");
    // An explicit deny in the key policy wins over any grant.
    let deny = default_key_policy().replace(
        r#"}]}"#,
        r#"},{"Sid":"NoGrants","Effect":"Deny","Principal":"*","Action":"kms:CreateGrant","Resource":"*"}]}"#,
    );
    let key = KmsKeyFacts {
        controller_grants: Observed::Found(vec![grant(&EC2_OPERATIONS, false)]),
        ..kms_key(KMS_KEY, "Enabled", &deny)
    };
    let (s, r, m) = volumes(&Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(key)));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("False", "KmsKeyPolicyDeniesEc2"),
        "{m}"
    );
}

#[test]
fn conditions_outside_what_is_known_are_undecided_never_false() {
    let vpc = default_key_policy().replace(
        r#""Resource":"*"}"#,
        r#""Resource":"*","Condition":{"StringEquals":{"aws:SourceVpc":"vpc-1"}}}"#,
    );
    let (s, r, m) = volumes(&with_policy(&vpc));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("Unknown", "PolicyUndecided"),
        "{m}"
    );
    // A policy naming only some role, while the controller's role is not known.
    let named = default_key_policy().replace(
        "arn:aws:iam::111122223333:root",
        "arn:aws:iam::111122223333:role/Someone",
    );
    let blind = with_policy(&named).with(|f| {
        f.aws.controller_role = None;
        if let Observed::Found(k) = &mut f.cluster.karpenter {
            k.controller_role_arn = None;
        }
    });
    let (s, r, m) = volumes(&blind);
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("Unknown", "PolicyUndecided"),
        "{m}"
    );
}

#[test]
fn a_key_of_another_account_with_an_unreadable_policy_is_unknown_with_the_cause() {
    let foreign = KmsKeyFacts {
        arn: format!("arn:aws:kms:{REGION}:444455556666:key/{KMS_KEY}"),
        policy: unknown(UnknownCause::AccessDenied),
        ..kms_key(KMS_KEY, "Enabled", "")
    };
    let key = foreign.arn.clone();
    let (s, r, m) = volumes(&Facts::healthy().with_volume_key(&key, Observed::Found(foreign)));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("Unknown", "AwsAccessDenied"),
        "{m}"
    );
    assert!(m.contains("444455556666"), "{m}");
}

#[test]
fn the_aws_managed_key_is_never_false_and_needs_no_lookup() {
    let f = Facts::healthy().with(|f| {
        f.cluster.node_class.spec.block_device_mappings =
            vec![karpenter_health_api::karpenter::BlockDeviceMapping {
                device_name: None,
                ebs: Some(karpenter_health_api::karpenter::BlockDevice {
                    encrypted: Some(true),
                    kms_key_id: Some("alias/aws/ebs".into()),
                }),
            }];
        f.aws.ebs_encryption = None;
    });
    let (s, r, m) = volumes(&f);
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("True", "VolumeEncryptionKeysUsable"),
        "{m}"
    );
    let aws_managed = KmsKeyFacts {
        manager: "AWS".into(),
        policy: unknown(UnknownCause::AccessDenied),
        ..kms_key(KMS_KEY, "Enabled", "")
    };
    let (s, _, m) =
        volumes(&Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(aws_managed)));
    assert_eq!(s, "True", "{m}");
}

#[test]
fn a_disabled_customer_default_key_fails_classes_without_their_own_key() {
    let key_arn = format!("arn:aws:kms:{REGION}:{ACCOUNT}:key/{KMS_KEY}");
    let f = Facts::healthy().with(|f| {
        f.aws.ebs_encryption = Some(Observed::Found(EbsEncryptionFacts {
            by_default: true,
            default_kms_key_id: Observed::Found(key_arn.clone()),
        }));
        f.aws.kms_keys.insert(
            key_arn.clone(),
            Observed::Found(kms_key(KMS_KEY, "Disabled", &default_key_policy())),
        );
    });
    let (s, r, m) = volumes(&f);
    assert_eq!((s.as_str(), r.as_str()), ("False", "KmsKeyDisabled"), "{m}");
    assert!(m.contains("default EBS key"), "{m}");
    // Denied GetEbsDefaultKmsKeyId: Unknown, never False.
    let denied = Facts::healthy().with(|f| {
        f.aws.ebs_encryption = Some(Observed::Found(EbsEncryptionFacts {
            by_default: true,
            default_kms_key_id: unknown(UnknownCause::AccessDenied),
        }));
    });
    let (s, r, _) = volumes(&denied);
    assert_eq!((s.as_str(), r.as_str()), ("Unknown", "AwsAccessDenied"));
}

/// Issue 22 point 9: a key policy that only delegates to the account (its root) leaves the key to
/// IAM policies, so the controller role's own must allow EC2's uses of it (#3767).
fn delegated_with(change: impl Fn(&mut crate::facts::SimulatedDecision)) -> Facts {
    let mut key = kms_key(KMS_KEY, "Enabled", &default_key_policy());
    if let Observed::Found(decisions) = &mut key.controller_iam {
        for d in decisions.iter_mut().filter(|d| d.action == "kms:Decrypt") {
            change(d);
        }
    }
    Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(key))
}

#[test]
fn a_key_delegated_to_iam_needs_the_controller_roles_own_permission() {
    let (st, _, _) = volumes(&delegated_with(|_| {}));
    assert_eq!(st, "True", "IAM allows the controller every use");

    let (st, reason, message) = volumes(&delegated_with(|d| d.decision = "implicitDeny".into()));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "KmsKeyNotAllowedForController"),
        "{message}"
    );
    assert!(message.contains("kms:Decrypt"), "{message}");
    assert!(message.contains(CONTROLLER_ROLE), "{message}");

    // Denied without context the policies needed: not a proof.
    let (st, reason, _) = volumes(&delegated_with(|d| {
        d.decision = "explicitDeny".into();
        d.missing_context = vec!["kms:EncryptionContext:aws:ebs:id".into()];
    }));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", "PolicyUndecided")
    );

    // The simulator could not be asked: undecided, never the old "the root may" True.
    let mut key = kms_key(KMS_KEY, "Enabled", &default_key_policy());
    key.controller_iam = Observed::unknown(UnknownCause::AccessDenied, "SimulatePrincipalPolicy");
    let (st, reason, _) = volumes(&Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(key)));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", "PolicyUndecided")
    );
}

#[test]
fn a_key_policy_naming_the_controller_or_a_grant_needs_no_iam_permission() {
    let named = format!(
        r#"{{"Statement":[{{"Effect":"Allow","Principal":{{"AWS":"{}"}},"Action":"kms:*","Resource":"*"}}]}}"#,
        role_arn(CONTROLLER_ROLE)
    );
    let mut key = kms_key(KMS_KEY, "Enabled", &named);
    key.controller_iam = Observed::unknown(UnknownCause::AccessDenied, "SimulatePrincipalPolicy");
    let (st, _, message) =
        volumes(&Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(key)));
    assert_eq!(st, "True", "{message}");
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        volumes_encrypted_by_nothing_are_volume_encryption_not_used:
            Facts::healthy().with(|f| {
                f.cluster.node_class.spec.block_device_mappings = vec![karpenter_health_api::karpenter::BlockDeviceMapping {
                    device_name: Some("/dev/xvda".into()),
                    ebs: Some(karpenter_health_api::karpenter::BlockDevice { encrypted: Some(false), kms_key_id: None }),
                }];
            })
            => VolumeEncryptionReady is True because VolumeEncryptionNotUsed;
        the_aws_managed_default_key_is_volume_encryption_keys_usable:
            Facts::healthy() => VolumeEncryptionReady is True because VolumeEncryptionKeysUsable;
        a_named_key_absent_from_kms_is_kms_key_not_found:
            Facts::healthy().with_volume_key("alias/gone", Observed::Absent)
            => VolumeEncryptionReady is False because KmsKeyNotFound;
        a_disabled_key_is_kms_key_disabled:
            Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "Disabled", &default_key_policy())))
            => VolumeEncryptionReady is False because KmsKeyDisabled;
        a_key_scheduled_for_deletion_is_kms_key_pending_deletion:
            Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "PendingDeletion", &default_key_policy())))
            => VolumeEncryptionReady is False because KmsKeyPendingDeletion;
        a_key_without_material_is_kms_key_pending_import:
            Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "PendingImport", &default_key_policy())))
            => VolumeEncryptionReady is False because KmsKeyPendingImport;
        a_key_being_created_is_kms_key_state_transient:
            Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "Creating", &default_key_policy())))
            => VolumeEncryptionReady is Unknown because KmsKeyStateTransient;
        a_key_left_to_iam_policies_that_do_not_allow_the_controller_is_kms_key_not_allowed_for_controller:
            Facts::healthy().with_volume_key(KMS_KEY, Observed::Found({
                let mut key = kms_key(KMS_KEY, "Enabled", &default_key_policy());
                if let Observed::Found(decisions) = &mut key.controller_iam {
                    for d in decisions.iter_mut().filter(|d| d.action == "kms:CreateGrant") {
                        d.decision = "implicitDeny".into();
                    }
                }
                key
            }))
            => VolumeEncryptionReady is False because KmsKeyNotAllowedForController;
        a_key_policy_for_lambda_only_is_kms_key_policy_denies_ec2:
            Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "Enabled", LAMBDA_ONLY_KEY_POLICY)))
            => VolumeEncryptionReady is False because KmsKeyPolicyDeniesEc2;
    }
}
