//! Which KMS keys a class's EBS volumes use, and the question EC2's use of a key poses to its key
//! policy (asked the same way by the adapter and the check). Pure, no IO.

use crate::iam_policy::RequestContext;
use karpenter_health_api::karpenter::EC2NodeClass;
use std::collections::BTreeSet;

/// The AWS-managed EBS key: its policy always lets EC2 in the account use it, and EC2 creates it
/// on first use, so it is never a finding (nor looked up).
pub const AWS_MANAGED_EBS_ALIAS: &str = "alias/aws/ebs";

/// What EC2 calls on a customer-managed key to create and attach an encrypted volume (the EBS
/// user guide's key policy requirements; `kms:ReEncrypt*` checked as both of its actions).
pub const EC2_KMS_ACTIONS: [&str; 6] = [
    "kms:CreateGrant",
    "kms:Decrypt",
    "kms:GenerateDataKeyWithoutPlaintext",
    "kms:ReEncryptFrom",
    "kms:ReEncryptTo",
    "kms:DescribeKey",
];

/// The request context of EC2 using a key for a caller of `account` in `region`
/// (`kms:ViaService`): shared by the adapter's simulation of the controller's role and this
/// check's reading of key policies, so both ask the same question.
pub fn ec2_use_context(region: &str, account: &str) -> RequestContext {
    RequestContext::new()
        .with_value("kms:ViaService", &format!("ec2.{region}.amazonaws.com"))
        .with_value("kms:CallerAccount", account)
        .with_value("aws:PrincipalAccount", account)
        .with_value("kms:GrantIsForAWSResource", "true")
        .with_value("aws:RequestedRegion", region)
}

/// Whether the volumes use the account's default EBS key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DefaultKeyUse {
    /// Every volume names its own key.
    Never,
    /// Some volume is not asked to be encrypted: it uses the default key only when the account
    /// encrypts by default.
    IfEncryptedByDefault,
    /// Some volume is encrypted without a key named, or the class has no block devices at all
    /// (Karpenter's AMI families then give an encrypted root volume:
    /// `pkg/providers/amifamily/*.go DefaultBlockDeviceMappings`).
    Always,
}

/// The KMS keys a class's volumes name, and whether they use the account's default key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VolumeKeys {
    pub named: BTreeSet<String>,
    pub default: DefaultKeyUse,
}

/// The keys `class` encrypts its volumes with, as written.
pub fn volume_keys(class: &EC2NodeClass) -> VolumeKeys {
    let mappings = &class.spec.block_device_mappings;
    let mut named = BTreeSet::new();
    let mut default = if mappings.is_empty() {
        DefaultKeyUse::Always
    } else {
        DefaultKeyUse::Never
    };
    for ebs in mappings.iter().filter_map(|m| m.ebs.as_ref()) {
        match ebs.kms_key_id.as_deref().map(str::trim) {
            Some(key) if !key.is_empty() => {
                named.insert(key.to_owned());
            }
            _ if ebs.encrypted == Some(true) => default = DefaultKeyUse::Always,
            _ if default == DefaultKeyUse::Never => default = DefaultKeyUse::IfEncryptedByDefault,
            _ => {}
        }
    }
    VolumeKeys { named, default }
}

/// Whether a key reference names the AWS-managed EBS key (`alias/aws/ebs` or its alias ARN).
pub fn is_aws_managed_ebs_alias(key: &str) -> bool {
    key == AWS_MANAGED_EBS_ALIAS || key.ends_with(":alias/aws/ebs")
}
