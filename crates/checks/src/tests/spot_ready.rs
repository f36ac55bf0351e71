//! The scenarios of `rules/spot_ready.rs`: its sentences, one per reason. Pure.

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        on_demand_node_pools_are_spot_not_used:
            Facts::healthy() => SpotReady is True because SpotNotUsed;
        a_spot_node_pool_with_the_service_linked_role_is_spot_service_linked_role_exists:
            Facts::healthy().with_spot(Some(Observed::Found("arn:aws:iam::111122223333:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot".into())))
            => SpotReady is True because SpotServiceLinkedRoleExists;
        a_spot_node_pool_without_the_role_that_karpenter_may_create_is_spot_service_linked_role_creatable:
            Facts::healthy().with_spot(Some(Observed::Absent))
            => SpotReady is True because SpotServiceLinkedRoleCreatable;
        a_spot_node_pool_without_the_role_that_karpenter_may_not_create_is_spot_service_linked_role_missing:
            Facts::healthy()
                .with_spot(Some(Observed::Absent))
                .with_simulated("iam:CreateServiceLinkedRole", |d| d.decision = "implicitDeny".into())
            => SpotReady is False because SpotServiceLinkedRoleMissing;
    }
}

/// What `SpotReady` makes of the controller's permission to have EC2 create the missing role.
mod creating_the_role {
    use crate::facts::{Facts, Observed, PermissionFacts, Settings, UnknownCause};
    use crate::testing::now;
    use karpenter_health_api::ConditionType;

    /// SpotReady's status, reason and message.
    fn spot_ready(facts: &Facts) -> (String, String, String) {
        let status = crate::evaluate(facts, &Settings::default(), None, now());
        let c = status.condition(ConditionType::SpotReady).expect("SpotReady");
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    #[test]
    fn a_denial_names_who_denied_and_an_allowance_says_ec2_creates_it_at_the_first_launch() {
        let denied = Facts::healthy()
            .with_spot(Some(Observed::Absent))
            .with_simulated("iam:CreateServiceLinkedRole", |d| {
                d.decision = "explicitDeny".into();
                d.matched = vec!["NoServiceRoles".into()];
            });
        let (status, _, message) = spot_ready(&denied);
        assert_eq!(status, "False");
        assert!(message.contains("NoServiceRoles"), "{message}");
        // The fixture's NodePool allows on-demand too.
        assert!(message.contains("launching on-demand instead"), "{message}");
        let spot_only = denied.with_pool_requirement("karpenter.sh/capacity-type", "In", &["spot"]);
        let (_, _, message) = spot_ready(&spot_only);
        assert!(message.contains("(spot only) wait") && !message.contains("on-demand instead"), "{message}");
        let (status, reason, message) = spot_ready(&Facts::healthy().with_spot(Some(Observed::Absent)));
        assert_eq!((status.as_str(), reason.as_str()), ("True", "SpotServiceLinkedRoleCreatable"));
        assert!(message.contains("first spot launch") && message.contains("simulator"), "{message}");
    }

    #[test]
    fn the_roles_own_policies_prove_a_denial_but_not_an_allowance() {
        let local = |decision: &str| {
            let document = format!(
                r#"{{"Version":"2012-10-17","Statement":[{{"Effect":"{decision}","Action":"iam:CreateServiceLinkedRole","Resource":"*"}},{{"Effect":"Allow","Action":"*","Resource":"*"}}]}}"#
            );
            Facts::healthy().with_spot(Some(Observed::Absent)).with(|f| {
                f.aws.controller_permissions = Some(PermissionFacts {
                    simulated: Observed::unknown(UnknownCause::AccessDenied, "SimulatePrincipalPolicy"),
                    policies: Some(Observed::Found(crate::facts::RolePolicies {
                        identity: vec![crate::facts::PolicyDocument {
                            name: "inline policy karpenter".into(),
                            document,
                        }],
                        boundary: None,
                    })),
                });
            })
        };
        // An SCP the operator cannot see may deny what the role's policies allow.
        let (status, reason, _) = spot_ready(&local("Allow"));
        assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "PolicyUndecided"));
        let (status, _, message) = spot_ready(&local("Deny"));
        assert_eq!(status, "False");
        assert!(message.contains("role's own policies"), "{message}");
    }

    #[test]
    fn a_permission_that_cannot_be_read_is_unknown_never_false() {
        let unread = Facts::healthy().with_spot(Some(Observed::Absent)).with(|f| {
            f.aws.controller_permissions = Some(PermissionFacts {
                simulated: Observed::unknown(UnknownCause::AccessDenied, "SimulatePrincipalPolicy"),
                policies: Some(Observed::unknown(UnknownCause::AccessDenied, "ListRolePolicies")),
            });
        });
        assert_eq!(spot_ready(&unread).0, "Unknown");
        // A decision that needed context the request did not carry is no proof either.
        let undecided = Facts::healthy()
            .with_spot(Some(Observed::Absent))
            .with_simulated("iam:CreateServiceLinkedRole", |d| {
                d.decision = "implicitDeny".into();
                d.missing_context = vec!["aws:PrincipalTag/team".into()];
            });
        let (status, reason, _) = spot_ready(&undecided);
        assert_eq!((status.as_str(), reason.as_str()), ("Unknown", "PolicyUndecided"));
    }
}
