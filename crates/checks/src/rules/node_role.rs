//! `NodeRoleReady`: the node IAM role exists, has a name IAM accepts, trusts EC2 and carries the
//! managed policies a node needs (aws/karpenter-provider-aws getting-started `cloudformation.yaml`,
//! PR #7963 for ECR `PullOnly`). Pure: no IO.

use crate::facts::{Observed, RoleFacts};
use crate::plan::request::AWS_NODE_SERVICE_ACCOUNT;
use crate::plan::{Context, RoleName};
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use crate::{arn, clip, trust_policy};
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::BTreeSet;

/// IAM's limit on role names, in characters.
pub const MAX_ROLE_NAME: usize = 64;
/// `ec2.${AWS::URLSuffix}`: the China partitions use `amazonaws.com.cn`.
const EC2_SERVICES: &[&str] = &["ec2.amazonaws.com", "ec2.amazonaws.com.cn"];

const WORKER_NODE: &str = "AmazonEKSWorkerNodePolicy";
const CNI: &str = "AmazonEKS_CNI_Policy";
/// Either is enough: PR #7963 (v1.4.0) moved the docs from ReadOnly to PullOnly.
const ECR: [&str; 2] = [
    "AmazonEC2ContainerRegistryPullOnly",
    "AmazonEC2ContainerRegistryReadOnly",
];
const SSM: &str = "AmazonSSMManagedInstanceCore";

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::NodeRoleReady, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::NodeRoleReady, "node-role");
    let name = match &ctx.node_role {
        RoleName::Known(name) => name,
        RoleName::Unobserved(why) => {
            c.unknown(why.clone());
            return c.finish(Reason::NodeRoleValid, "");
        }
        RoleName::Unresolvable(message) => {
            c.unknown(Why::new(Reason::NodeRoleNotResolved, message.clone()));
            return c.finish(Reason::NodeRoleValid, "");
        }
    };
    let shown = clip(name, 128);
    let subjects = || {
        vec![
            ctx.node_class_subject(),
            SubjectRef::new("IAMRole", name.as_str()),
        ]
    };

    if let Some(given) = ctx
        .facts
        .cluster
        .node_class
        .spec
        .role
        .as_deref()
        .filter(|r| r.trim_start().starts_with("arn:"))
    {
        c.fail(
            Reason::NodeRoleIsArn,
            format!(
                "spec.role is the ARN {}; Karpenter needs the role's name. Set spec.role to {:?}.",
                clip(given, 256),
                clip(name, 128)
            ),
            subjects(),
        );
        return c.finish(Reason::NodeRoleValid, "");
    }
    if name.chars().count() > MAX_ROLE_NAME {
        c.fail(
            Reason::NodeRoleNameTooLong,
            format!(
                "Role name {shown} is {} characters long; IAM allows at most {MAX_ROLE_NAME}.",
                name.chars().count()
            ),
            subjects(),
        );
        return c.finish(Reason::NodeRoleValid, "");
    }
    match &ctx.facts.aws.node_role {
        None => c.unknown(Why::new(
            Reason::NotObserved,
            format!("Role {shown} has not been looked up yet."),
        )),
        Some(Observed::Unknown(u)) => c.unknown(Why::unobserved(&format!("Role {shown}"), u)),
        Some(Observed::Absent) => c.fail(
            Reason::NodeRoleNotFound,
            format!("IAM has no role named {shown}."),
            subjects(),
        ),
        Some(Observed::Found(role)) => {
            check_trust(&mut c, role, &shown, subjects());
            check_policies(ctx, &mut c, role, &shown, subjects());
        }
    }
    let ok_message = if c.has_warnings() {
        format!(
            "Role {shown} trusts ec2.amazonaws.com and has the policies nodes need to join; \
             see the warning for what else they may need."
        )
    } else {
        format!("Role {shown} trusts ec2.amazonaws.com and has the policies nodes need.")
    };
    c.finish(Reason::NodeRoleValid, ok_message)
}

fn check_trust(c: &mut Check, role: &RoleFacts, shown: &str, subjects: Vec<SubjectRef>) {
    match role
        .assume_role_policy_document
        .as_deref()
        .map(trust_policy::parse)
    {
        None => c.unknown(Why::new(
            Reason::NotObserved,
            format!("The trust policy of role {shown} was not returned."),
        )),
        Some(Err(e)) => c.fail(
            Reason::NodeRoleTrustPolicyInvalid,
            format!(
                "The trust policy of role {shown} cannot be read ({}), so it cannot be shown to \
                 let ec2.amazonaws.com assume the role.",
                clip(&e.0, 256)
            ),
            subjects,
        ),
        Some(Ok(policy)) if !policy.allows_assume_role(EC2_SERVICES) => c.fail(
            Reason::NodeRoleTrustPolicyInvalid,
            format!(
                "The trust policy of role {shown} does not let ec2.amazonaws.com call \
                 sts:AssumeRole, so instances get no credentials."
            ),
            subjects,
        ),
        Some(Ok(_)) => {}
    }
}

fn check_policies(
    ctx: &Context,
    c: &mut Check,
    role: &RoleFacts,
    shown: &str,
    subjects: Vec<SubjectRef>,
) {
    let attached: BTreeSet<&str> = match &role.attached_policy_arns {
        Observed::Unknown(u) => {
            c.unknown(Why::unobserved(
                &format!("The policies attached to role {shown}"),
                u,
            ));
            return;
        }
        Observed::Absent => BTreeSet::new(),
        Observed::Found(arns) => arns.iter().map(|a| arn::name_of(a)).collect(),
    };
    let has = |policy: &str| attached.contains(policy);
    let mut missing = Vec::new();
    if !has(WORKER_NODE) {
        missing.push(WORKER_NODE.to_owned());
    }
    if !ECR.iter().any(|p| has(p)) {
        missing.push(format!("{} (or {})", ECR[0], ECR[1]));
    }
    let mut cni_unknown = None;
    if !has(CNI) {
        // CNI permissions may come to aws-node through IRSA or an EKS Pod Identity association
        // instead (Karpenter's getting-started guide uses Pod Identity).
        match &ctx.facts.cluster.aws_node_role_arn {
            Observed::Found(None) => {
                match ctx.facts.aws.pod_identity_role(AWS_NODE_SERVICE_ACCOUNT) {
                    Observed::Found(None) => missing.push(CNI.to_owned()),
                    Observed::Found(Some(_)) | Observed::Absent => {}
                    Observed::Unknown(u) => {
                        cni_unknown = Some(("The aws-node Pod Identity association", u))
                    }
                }
            }
            Observed::Found(Some(_)) | Observed::Absent => {}
            Observed::Unknown(u) => cni_unknown = Some(("The aws-node ServiceAccount", u.clone())),
        }
    }
    if !missing.is_empty() {
        c.fail(
            Reason::NodeRoleMissingPolicies,
            format!(
                "Role {shown} lacks the managed policies {}.",
                missing.join(", ")
            ),
            subjects.clone(),
        );
    } else if let Some((what, u)) = cni_unknown {
        let why = Why::unobserved(what, &u);
        c.unknown(Why::new(
            why.reason,
            format!(
                "Role {shown} lacks {CNI}, which nodes need unless aws-node has its own IAM role. {}",
                why.message
            ),
        ));
    }
    if !has(SSM) {
        c.warn(
            Warning::NodeRoleMissingSsmPolicy,
            format!("Role {shown} lacks {SSM}, so nodes cannot be reached through SSM."),
            subjects,
        );
    }
}
