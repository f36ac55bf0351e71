//! Scenarios of `ControllerCanLaunch`: its identity across accounts and audiences (an IRSA token
//! audience other than `sts.amazonaws.com`, a Pod Identity association with a target role, a
//! controller role of another account), and its permissions judged from simulated and local
//! policies. Pure.

use super::reasons::status;
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::ConditionType;

fn controller(facts: &Facts) -> (String, String, String) {
    let s = status(facts);
    let c = s
        .condition(ConditionType::ControllerCanLaunch)
        .expect("present");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

/// The healthy IRSA trust with audience `aud` instead of `sts.amazonaws.com`.
fn trust_with_audience(aud: &str) -> String {
    let decoded =
        percent_encoding::percent_decode_str(&irsa_trust_policy(KARPENTER_SERVICE_ACCOUNT))
            .decode_utf8_lossy()
            .into_owned();
    decoded.replace("\"sts.amazonaws.com\"", &format!("\"{aud}\""))
}

fn with_trust(facts: Facts, trust: String) -> Facts {
    facts.with(|f| {
        if let Some(Observed::Found(r)) = &mut f.aws.controller_role {
            r.assume_role_policy_document = Some(trust);
        }
    })
}

fn with_audience_annotation(facts: Facts, aud: Option<&str>) -> Facts {
    facts.with(|f| {
        if let Observed::Found(k) = &mut f.cluster.karpenter {
            k.irsa_audience = aud.map(str::to_owned);
        }
    })
}

#[test]
fn the_service_accounts_audience_annotation_is_the_audience_the_trust_must_admit() {
    let custom = with_trust(
        Facts::healthy(),
        trust_with_audience("karpenter.example.com"),
    );
    // Without the annotation the token says sts.amazonaws.com: the trust does not admit it.
    let (st, reason, message) = controller(&custom);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "ControllerTrustMismatch"),
        "{message}"
    );
    assert!(message.contains("aud sts.amazonaws.com"), "{message}");
    // With it, the token carries the audience the trust names.
    let annotated = with_audience_annotation(custom, Some("karpenter.example.com"));
    let (st, reason, message) = controller(&annotated);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "ControllerPermissionsVerified"),
        "{message}"
    );
    // And an annotation the default trust does not name is a mismatch naming that audience.
    let wrong = with_audience_annotation(Facts::healthy(), Some("other"));
    let (st, _, message) = controller(&wrong);
    assert_eq!(st, "False", "{message}");
    assert!(message.contains("aud other"), "{message}");
}

const VIA: &str = "arn:aws:iam::111122223333:role/PodIdentityHop";

/// The controller's role from a Pod Identity association with a target role.
fn chained(target_trust: String) -> Facts {
    let facts = Facts::healthy().with(|f| {
        if let Observed::Found(k) = &mut f.cluster.karpenter {
            k.controller_role_arn = None;
        }
        f.aws.pod_identity_roles.insert(
            KARPENTER_SERVICE_ACCOUNT.into(),
            Observed::Found(Some(role_arn(CONTROLLER_ROLE))),
        );
        f.aws
            .pod_identity_via
            .insert(KARPENTER_SERVICE_ACCOUNT.into(), VIA.into());
    });
    with_trust(facts, target_trust)
}

#[test]
fn a_pod_identity_target_role_must_trust_the_associations_role_not_the_service() {
    let trusting_via = format!(
        r#"{{"Statement":[{{"Effect":"Allow","Principal":{{"AWS":"{VIA}"}},"Action":["sts:AssumeRole","sts:TagSession"]}}]}}"#
    );
    let (st, reason, message) = controller(&chained(trusting_via));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "ControllerPermissionsVerified"),
        "{message}"
    );
    assert!(message.contains("target role"), "{message}");
    // The target trusting pods.eks.amazonaws.com (as a direct association's role would) does not
    // let the association's role assume it.
    let (st, reason, message) = controller(&chained(pod_identity_trust_policy()));
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "ControllerTrustMismatch"),
        "{message}"
    );
    assert!(message.contains(VIA), "{message}");
}

#[test]
fn a_target_role_of_another_account_is_unknown_never_not_found() {
    let facts = chained(pod_identity_trust_policy()).with(|f| {
        f.aws.pod_identity_roles.insert(
            KARPENTER_SERVICE_ACCOUNT.into(),
            Observed::Found(Some("arn:aws:iam::999988887777:role/Karpenter".into())),
        );
        f.aws.controller_role = Some(Observed::unknown(
            UnknownCause::OtherAccount,
            "role arn:aws:iam::999988887777:role/Karpenter is in account 999988887777",
        ));
    });
    let (st, reason, _) = controller(&facts);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", "AwsOtherAccount")
    );
}

/// Issue 22 point 4: a denial IAM's simulator made without context the policies needed is not a
/// proof, whoever denied (here an SCP that limits instance types, which the operator cannot
/// know). This replaces nothing: before, the SCP's denial came first and was `False`.
#[test]
fn a_simulated_denial_with_missing_context_is_undecided_not_false() {
    let facts = Facts::healthy().with_simulated("ec2:RunInstances", |d| {
        d.decision = "explicitDeny".into();
        d.denied_by_organizations = true;
        d.missing_context = vec!["ec2:InstanceType".into()];
    });
    let (st, reason, message) = controller(&facts);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("Unknown", "PolicyUndecided"),
        "{message}"
    );
    assert!(message.contains("ec2:InstanceType"), "{message}");
}

/// The role's own policies evaluated locally: an IMDSv2 guardrail is decided from the class's
/// own metadata options, which Karpenter's launch sends.
fn with_local_policy(facts: Facts, document: &str) -> Facts {
    use crate::facts::{PermissionFacts, PolicyDocument, RolePolicies};
    facts.with(|f| {
        f.aws.controller_permissions = Some(PermissionFacts {
            simulated: Observed::unknown(UnknownCause::AccessDenied, "iam:SimulatePrincipalPolicy"),
            policies: Some(Observed::Found(RolePolicies {
                identity: vec![PolicyDocument {
                    name: "inline policy karpenter".into(),
                    document: document.into(),
                }],
                boundary: None,
            })),
        })
    })
}

const REQUIRE_IMDSV2: &str = r#"{"Statement":[
  {"Effect":"Allow","Action":["iam:PassRole","ec2:*","iam:*InstanceProfile","ssm:GetParameter"],"Resource":"*"},
  {"Effect":"Deny","Action":"ec2:RunInstances","Resource":"arn:aws:ec2:*:*:instance/*",
   "Condition":{"StringNotEquals":{"ec2:MetadataHttpTokens":"required"}}}]}"#;

#[test]
fn an_imdsv2_guardrail_is_decided_from_the_class_metadata_options() {
    let required = with_local_policy(Facts::healthy(), REQUIRE_IMDSV2);
    let (st, reason, message) = controller(&required);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "ControllerPermissionsVerified"),
        "{message}"
    );
    // The True message says what it verified, the resources a launch touches included.
    for kind in [
        "subnet",
        "security-group",
        "image",
        "volume",
        "network-interface",
    ] {
        assert!(message.contains(kind), "{kind}: {message}");
    }
    let optional = required.with(|f| {
        if let Some(o) = f.cluster.node_class.spec.metadata_options.as_mut() {
            o.http_tokens = Some("optional".into());
        }
    });
    let (st, reason, message) = controller(&optional);
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "ControllerCannotLaunchInstances"),
        "Karpenter's launch with httpTokens optional is denied: {message}"
    );
}

/// Karpenter's `AllowSSMReadActions` grants the alias's parameters; a grant on another family's
/// parameters only, or none, leaves the alias unresolvable.
#[test]
fn reading_the_alias_parameter_is_decided_from_the_parameter_the_alias_resolves_through() {
    // The controller's own policy, granting ssm:GetParameter on `ssm_resource`, given to `facts`.
    let policed = |facts: Facts, ssm_resource: &str| {
        with_local_policy(
            facts,
            &format!(
                r#"{{"Statement":[
  {{"Effect":"Allow","Action":["iam:PassRole","ec2:*","iam:*InstanceProfile"],"Resource":"*"}},
  {{"Effect":"Allow","Action":"ssm:GetParameter","Resource":"{ssm_resource}"}}]}}"#
            ),
        )
    };
    // (status, reason, message) of ControllerCanLaunch for `facts` under that policy.
    let judged = |facts: Facts, ssm_resource: &str| controller(&policed(facts, ssm_resource));
    let bottlerocket_only = "arn:aws:ssm:*::parameter/aws/service/bottlerocket/*";
    let (st, reason, message) = judged(
        Facts::healthy(),
        "arn:aws:ssm:us-west-2::parameter/aws/service/*",
    );
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("True", "ControllerPermissionsVerified"),
        "{message}"
    );
    assert!(message.contains("ssm:GetParameter"), "{message}");
    // Karpenter holds no image for the class: it resolves none, launches nothing.
    let (st, reason, message) = judged(
        Facts::healthy().with_no_images_resolved(),
        bottlerocket_only,
    );
    assert_eq!(
        (st.as_str(), reason.as_str()),
        ("False", "ControllerCannotReadAmiParameters"),
        "{message}"
    );
    assert!(message.contains("amazon-linux-2023"), "{message}");
    // Karpenter holds images resolved before: it keeps them and launches from them
    // (pkg/controllers/nodeclass/ami.go), so a warning that names them, and True.
    let (st, reason, message) = judged(Facts::healthy(), bottlerocket_only);
    assert_eq!(st, "True", "{reason}: {message}");
    let warned = status(&policed(Facts::healthy(), bottlerocket_only))
        .findings
        .into_iter()
        .find(|f| f.reason == "ControllerImageReadsDeniedWhileImagesKept")
        .map(|f| f.message)
        .unwrap_or_default();
    assert!(
        warned.contains("amazon-linux-2023") && warned.contains("keeps launching"),
        "{warned}"
    );
    // Without an alias nothing is read through SSM, so nothing is asked.
    let by_tags = Facts::healthy().with_ami_family(
        "AL2023",
        &["amazon-eks-node-al2023-x86_64-standard-1.29-v20250101"],
    );
    let (st, _, message) = judged(by_tags, bottlerocket_only);
    assert_eq!(st, "True", "{message}");
    assert!(!message.contains("ssm:GetParameter"), "{message}");
}

/// Every class's images are resolved with ec2:DescribeImages (Karpenter's
/// `AllowRegionalReadActions`): a controller granted EC2's launch actions only cannot.
#[test]
fn describing_images_is_asked_of_every_class() {
    let policy = |ec2: &str| {
        format!(
            r#"{{"Statement":[
  {{"Effect":"Allow","Action":["iam:PassRole","iam:*InstanceProfile","ssm:GetParameter"],"Resource":"*"}},
  {{"Effect":"Allow","Action":{ec2},"Resource":"*"}}]}}"#
        )
    };
    let launch_only = policy(
        r#"["ec2:RunInstances","ec2:CreateFleet","ec2:CreateLaunchTemplate","ec2:CreateTags"]"#,
    );
    let by_tags = Facts::healthy().with_ami_family(
        "AL2023",
        &["amazon-eks-node-al2023-x86_64-standard-1.29-v20250101"],
    );
    for facts in [Facts::healthy(), by_tags] {
        // Karpenter holds no image for the class: it resolves none, launches nothing.
        let (st, reason, message) = controller(&with_local_policy(
            facts.clone().with_no_images_resolved(),
            &launch_only,
        ));
        assert_eq!(
            (st.as_str(), reason.as_str()),
            ("False", "ControllerCannotDescribeImages"),
            "{message}"
        );
        // It holds images from before: it launches from them, a warning (ami.go).
        let held = with_local_policy(facts.clone(), &launch_only);
        let (st, _, message) = controller(&held);
        assert_eq!(st, "True", "{message}");
        assert!(
            status(&held)
                .findings
                .iter()
                .any(|f| f.reason == "ControllerImageReadsDeniedWhileImagesKept"
                    && f.message.contains("ec2:DescribeImages on *")),
            "{:?}",
            status(&held).findings
        );
        // The True message never says the denied read is allowed.
        assert!(
            message.contains("see the warning") && !message.contains("which resolves its images"),
            "{message}"
        );
        let (st, _, message) = controller(&with_local_policy(facts, &policy(r#""ec2:*""#)));
        assert_eq!(st, "True", "{message}");
        assert!(message.contains("ec2:DescribeImages"), "{message}");
    }
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_controller_role_trusting_its_service_account_and_allowed_everything_is_controller_permissions_verified:
            Facts::healthy() => ControllerCanLaunch is True because ControllerPermissionsVerified;
        a_service_account_without_irsa_or_pod_identity_is_controller_identity_not_found:
            Facts::healthy().with(|f| if let Observed::Found(k) = &mut f.cluster.karpenter { k.controller_role_arn = None })
            => ControllerCanLaunch is Unknown because ControllerIdentityNotFound;
        an_irsa_annotation_naming_a_missing_role_is_controller_role_not_found:
            Facts::healthy().with(|f| f.aws.controller_role = Some(Observed::Absent))
            => ControllerCanLaunch is False because ControllerRoleNotFound;
        a_cluster_without_its_iam_oidc_provider_is_oidc_provider_missing:
            Facts::healthy().with(|f| f.aws.oidc_providers = Observed::Found(Vec::new()))
            => ControllerCanLaunch is False because OidcProviderMissing;
        a_controller_role_of_another_account_is_aws_other_account_never_not_found:
            Facts::healthy().with(|f| {
                if let Observed::Found(k) = &mut f.cluster.karpenter {
                    k.controller_role_arn = Some("arn:aws:iam::999988887777:role/KarpenterController".into());
                }
                // IAM's GetRole looked the name up in the operator's own account.
                f.aws.controller_role = Some(Observed::Absent);
            })
            => ControllerCanLaunch is Unknown because AwsOtherAccount;
        // Found by the property tests starting from the sentence above: without the operator's
        // own account, GetRole's "no such role" may be about another account's role.
        a_missing_controller_role_while_the_own_account_is_unknown_is_unknown_never_not_found:
            Facts::healthy().with(|f| {
                if let Observed::Found(k) = &mut f.cluster.karpenter {
                    k.controller_role_arn = Some("arn:aws:iam::999988887777:role/KarpenterController".into());
                }
                f.aws.controller_role = Some(Observed::Absent);
                f.aws.account = Observed::unknown(UnknownCause::AccessDenied, "sts:GetCallerIdentity denied");
            })
            => ControllerCanLaunch is Unknown because AwsAccessDenied;
        an_irsa_trust_naming_another_service_account_is_controller_trust_mismatch:
            Facts::healthy().with(|f| if let Some(Observed::Found(r)) = &mut f.aws.controller_role {
                r.assume_role_policy_document = Some(irsa_trust_policy("karpenter/karpenter"));
            })
            => ControllerCanLaunch is False because ControllerTrustMismatch;
        a_pod_identity_role_trusting_only_ec2_is_pod_identity_trust_missing:
            Facts::healthy().with(|f| {
                if let Observed::Found(k) = &mut f.cluster.karpenter { k.controller_role_arn = None }
                f.aws.pod_identity_roles.insert(KARPENTER_SERVICE_ACCOUNT.into(), Observed::Found(Some(role_arn(CONTROLLER_ROLE))));
                if let Some(Observed::Found(r)) = &mut f.aws.controller_role {
                    r.assume_role_policy_document = Some(trust_policy_for("ec2.amazonaws.com"));
                }
            })
            => ControllerCanLaunch is False because PodIdentityTrustMissing;
        a_simulated_implicit_deny_of_pass_role_is_controller_cannot_pass_node_role:
            Facts::healthy().with_simulated("iam:PassRole", |d| d.decision = "implicitDeny".into())
            => ControllerCanLaunch is False because ControllerCannotPassNodeRole;
        an_scp_denying_create_instance_profile_is_controller_cannot_manage_instance_profiles:
            Facts::healthy().with_simulated("iam:CreateInstanceProfile", |d| { d.decision = "explicitDeny".into(); d.denied_by_organizations = true; })
            => ControllerCanLaunch is False because ControllerCannotManageInstanceProfiles;
        a_boundary_denying_run_instances_is_controller_cannot_launch_instances:
            Facts::healthy().with_simulated("ec2:RunInstances", |d| { d.decision = "implicitDeny".into(); d.denied_by_boundary = true; })
            => ControllerCanLaunch is False because ControllerCannotLaunchInstances;
        a_controller_denied_the_alias_parameter_is_controller_cannot_read_ami_parameters:
            Facts::healthy().with_simulated("ssm:GetParameter", |d| d.decision = "implicitDeny".into()).with_no_images_resolved()
            => ControllerCanLaunch is False because ControllerCannotReadAmiParameters;
        an_scp_denying_describe_images_is_controller_cannot_describe_images:
            Facts::healthy().with_simulated("ec2:DescribeImages", |d| { d.decision = "explicitDeny".into(); d.denied_by_organizations = true; }).with_no_images_resolved()
            => ControllerCanLaunch is False because ControllerCannotDescribeImages;
    }
}
