//! Scenarios of `InstanceProfileReady`: an instance profile given as an ARN fails, naming the
//! name to use, though Karpenter reports it ready. Pure.

use super::reasons::status;
use super::{failures, message, pair};
use crate::facts::Facts;
use crate::testing::*;
use karpenter_health_api::{ConditionType, Reason};

#[test]
fn the_arn_instance_profile_fails_instance_profile_ready_with_the_name_to_use() {
    // Issues #8072/#8312: Karpenter shows InstanceProfileReady=True, validation stays Unknown.
    let facts = Facts::healthy()
        .with_instance_profile_spec(
            "arn:aws:iam::111122223333:instance-profile/KarpenterNodeInstanceProfile-demo",
            false,
        )
        .with(|f| f.aws.node_role = None)
        .with_karpenter_condition(karpenter_condition(
            "ValidationSucceeded",
            "Unknown",
            mins_ago(3),
        ))
        .with_karpenter_condition(karpenter_condition("Ready", "Unknown", mins_ago(3)));
    let status = status(&facts);
    assert_eq!(
        failures(&status),
        vec![pair(
            ConditionType::InstanceProfileReady,
            Reason::InstanceProfileIsArn
        )]
    );
    let m = message(&status, ConditionType::InstanceProfileReady);
    assert!(m.contains("\"KarpenterNodeInstanceProfile-demo\""), "{m}");
    assert!(
        m.contains("although Karpenter reports InstanceProfileReady=True"),
        "{m}"
    );
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_generated_profile_holding_spec_role_is_instance_profile_valid:
            Facts::healthy() => InstanceProfileReady is True because InstanceProfileValid;
        spec_role_before_karpenter_wrote_status_instance_profile_is_instance_profile_not_resolved:
            Facts::healthy().with(|f| { if let Some(s) = f.cluster.node_class.status.as_mut() { s.instance_profile = None } f.aws.instance_profile = None })
            => InstanceProfileReady is Unknown because InstanceProfileNotResolved;
        spec_instance_profile_given_as_an_arn_is_instance_profile_is_arn:
            Facts::healthy().with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/KarpenterNodeInstanceProfile", false)
            => InstanceProfileReady is False because InstanceProfileIsArn;
        spec_instance_profile_with_a_space_is_instance_profile_name_invalid:
            Facts::healthy().with_instance_profile_spec("my profile", false)
            => InstanceProfileReady is False because InstanceProfileNameInvalid;
        spec_instance_profile_absent_from_iam_is_instance_profile_not_found:
            Facts::healthy().with_instance_profile_spec("KarpenterNodeInstanceProfile", false)
            => InstanceProfileReady is False because InstanceProfileNotFound;
        a_profile_without_a_role_is_instance_profile_has_no_role:
            Facts::healthy().with(|f| if let Some(Observed::Found(p)) = &mut f.aws.instance_profile { p.roles.clear() })
            => InstanceProfileReady is False because InstanceProfileHasNoRole;
        a_profile_holding_another_role_than_spec_role_is_instance_profile_role_mismatch:
            Facts::healthy().with(|f| if let Some(Observed::Found(p)) = &mut f.aws.instance_profile { p.roles[0].name = "SomeoneElsesRole".into() })
            => InstanceProfileReady is False because InstanceProfileRoleMismatch;
    }
}
