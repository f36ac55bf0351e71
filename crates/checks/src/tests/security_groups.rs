//! Scenarios of `SecurityGroupsReady` beyond one sentence per reason: no group tagged for the
//! cluster is a warning only. Pure.

use super::reasons::status;
use crate::facts::{Facts, Observed};
use crate::testing::*;

#[test]
fn no_cluster_tagged_group_is_a_warning_only() {
    let facts = Facts::healthy().with(|f| {
        f.aws.security_groups = Observed::Found(vec![security_group(
            SECURITY_GROUP,
            &[("karpenter.sh/discovery", CLUSTER)],
        )])
    });
    let status = status(&facts);
    assert!(status.conditions.iter().all(|c| c.status == "True"));
    assert_eq!(status.findings[0].reason, "NoSecurityGroupTaggedForCluster");
}
