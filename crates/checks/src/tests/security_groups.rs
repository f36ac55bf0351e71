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

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        selectors_resolving_to_one_cluster_tagged_group_are_security_groups_valid:
            Facts::healthy() => SecurityGroupsReady is True because SecurityGroupsValid;
        selectors_matching_nothing_are_security_groups_not_found:
            Facts::healthy().with(|f| f.aws.security_groups = Observed::Found(vec![security_group("sg-0unrelated", &[("team", "x")])]))
            => SecurityGroupsReady is False because SecurityGroupsNotFound;
        a_selected_group_tagged_only_for_another_cluster_is_security_group_tagged_for_other_cluster:
            Facts::healthy().with(|f| f.aws.security_groups = Observed::Found(vec![
                security_group(SECURITY_GROUP, &[("karpenter.sh/discovery", CLUSTER), ("kubernetes.io/cluster/demo", "owned")]),
                security_group("sg-0prod", &[("karpenter.sh/discovery", CLUSTER), ("kubernetes.io/cluster/prod", "owned")]),
            ]))
            => SecurityGroupsReady is False because SecurityGroupTaggedForOtherCluster;
        a_selected_group_in_another_vpc_is_security_group_in_other_vpc:
            Facts::healthy().with(|f| if let Observed::Found(groups) = &mut f.aws.security_groups { groups[0].vpc_id = Some("vpc-0elsewhere".into()) })
            => SecurityGroupsReady is False because SecurityGroupInOtherVpc;
    }
}
