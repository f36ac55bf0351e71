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
