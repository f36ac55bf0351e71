//! The IAM policy the operator's role needs, scoped as far as each action allows: every action
//! the adapter calls, on the narrowest resources its call can touch (AWS's Service Authorization
//! Reference, "Actions, resources, and condition keys" per service). Pure: builds a JSON document.
//!
//! Two variants:
//! - [`Credentials::Irsa`]: one role per cluster, the cluster's name written into the resources;
//! - [`Credentials::PodIdentity`]: one role for many clusters, each session seeing only its own
//!   cluster, queue and access entries through the `eks-cluster-name` session tag EKS Pod Identity
//!   attaches (EKS User Guide, "Define permissions for EKS Pod Identities to assume roles based on
//!   tags"; the role's trust policy must allow `sts:TagSession`).
//!
//! `deploy/iam-policy.json` and `deploy/iam-policy-pod-identity.json` are this module's output
//! with placeholders ([`PolicyScope::placeholders`]); `karpenter-health iam-policy` prints it for
//! one cluster.

use serde_json::{Value, json};

/// How the operator's Pods get their AWS credentials.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Credentials {
    /// IAM roles for service accounts: one role per cluster.
    Irsa,
    /// EKS Pod Identity: one role may serve many clusters, scoped by session tags.
    PodIdentity,
}

/// Where the policy applies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyScope {
    /// `aws`, `aws-cn`, `aws-us-gov`, ...
    pub partition: String,
    pub account: String,
    /// The cluster's region, or `*` for a Pod Identity role shared across regions.
    pub region: String,
    /// The cluster's name; with Pod Identity, ignored (the session tag names it).
    pub cluster_name: String,
    /// The Karpenter controller role, the only principal the operator asks IAM's simulator about:
    /// a role name, `path/name`, a pattern of either with `*`, or a role ARN.
    pub controller_role: String,
    /// Karpenter's interruption queue (`settings.interruptionQueue`); `None`: named after the
    /// cluster, as Karpenter's getting-started template and the community EKS module name it.
    pub interruption_queue: Option<String>,
    pub credentials: Credentials,
}

/// The Pod Identity session tag that carries the cluster's name.
pub const CLUSTER_NAME_TAG: &str = "${aws:PrincipalTag/eks-cluster-name}";

/// What [`PolicyScope::controller_role`] defaults to: the role name Karpenter's getting-started
/// template (`KarpenterControllerRole-<cluster>`) and the community EKS module's Karpenter
/// submodule (`KarpenterController-<suffix>`) give the controller.
pub const DEFAULT_CONTROLLER_ROLE: &str = "KarpenterController*";

/// The partition a region is in (AWS General Reference, "AWS partitions").
pub fn partition_of(region: &str) -> &'static str {
    if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else if region.starts_with("us-isob-") {
        "aws-iso-b"
    } else if region.starts_with("us-iso-") {
        "aws-iso"
    } else if region.starts_with("eu-isoe-") {
        "aws-iso-e"
    } else if region.starts_with("us-isof-") {
        "aws-iso-f"
    } else {
        "aws"
    }
}

/// Actions that take no resource (IAM: "Resource types" empty) or whose describe calls EC2
/// authorizes on `*` only. Regional ones are held to the cluster's region.
const REGIONAL_WITHOUT_RESOURCE: &[&str] = &[
    "ec2:DescribeSecurityGroups",
    "ec2:DescribeInstances",
    "ec2:DescribeSubnets",
    "ec2:DescribeRouteTables",
    "ec2:DescribeNatGateways",
    "ec2:DescribeVpcEndpoints",
    "ec2:DescribeVpcAttribute",
    "ec2:GetEbsEncryptionByDefault",
    "ec2:GetEbsDefaultKmsKeyId",
    "ec2:DescribeInstanceTypes",
    "ec2:DescribeInstanceTypeOfferings",
    "ec2:DescribeCapacityReservations",
    "ec2:DescribeImages",
    "events:ListEventBuses",
    "events:ListRuleNamesByTarget",
];

/// Global services' actions without a resource: IAM and STS requests are signed for the
/// partition's global region, so `aws:RequestedRegion` cannot hold them to the cluster's.
/// (`sts:GetCallerIdentity` needs no permission at all; it is listed so the policy names every
/// call the operator makes.)
const GLOBAL_WITHOUT_RESOURCE: &[&str] =
    &["iam:ListOpenIDConnectProviders", "sts:GetCallerIdentity"];

const ROLE_READS: &[&str] = &[
    "iam:GetRole",
    "iam:ListAttachedRolePolicies",
    "iam:ListRolePolicies",
    "iam:GetRolePolicy",
];

const CLUSTER_READS: &[&str] = &[
    "eks:DescribeCluster",
    "eks:ListAccessEntries",
    "eks:ListPodIdentityAssociations",
];

impl PolicyScope {
    /// The scope the shipped templates are rendered with: `envsubst`-style placeholders.
    pub fn placeholders(credentials: Credentials) -> Self {
        Self {
            partition: "${AWS_PARTITION}".into(),
            account: "${AWS_ACCOUNT_ID}".into(),
            region: "${AWS_REGION}".into(),
            cluster_name: "${CLUSTER_NAME}".into(),
            controller_role: DEFAULT_CONTROLLER_ROLE.into(),
            interruption_queue: None,
            credentials,
        }
    }

    fn cluster(&self) -> &str {
        match self.credentials {
            Credentials::Irsa => &self.cluster_name,
            Credentials::PodIdentity => CLUSTER_NAME_TAG,
        }
    }

    fn arn(&self, service: &str, account: &str, resource: &str) -> String {
        let region = if service == "iam" { "" } else { &self.region };
        format!(
            "arn:{}:{service}:{region}:{account}:{resource}",
            self.partition
        )
    }

    fn controller_role_arn(&self) -> String {
        if self.controller_role.starts_with("arn:") {
            return self.controller_role.clone();
        }
        let role = self.controller_role.trim_start_matches('/');
        self.arn("iam", &self.account, &format!("role/{role}"))
    }

    fn queue(&self) -> &str {
        self.interruption_queue.as_deref().unwrap_or(self.cluster())
    }

    /// The region condition for regional actions without a resource; none when the role serves
    /// every region.
    fn in_region(&self) -> Option<Value> {
        (self.region != "*").then(|| json!({"StringEquals": {"aws:RequestedRegion": self.region}}))
    }
}

fn statement(
    sid: &str,
    actions: &[&str],
    resources: Vec<String>,
    condition: Option<Value>,
) -> Value {
    let mut s = json!({
        "Sid": sid,
        "Effect": "Allow",
        "Action": actions,
        "Resource": if resources.len() == 1 { json!(resources[0]) } else { json!(resources) },
    });
    if let Some(condition) = condition {
        s["Condition"] = condition;
    }
    s
}

/// The operator's identity policy for `scope`.
pub fn operator_policy(scope: &PolicyScope) -> Value {
    let account = scope.account.as_str();
    let cluster = scope.cluster();
    let statements = vec![
        statement(
            "RegionalReadsWithoutResource",
            REGIONAL_WITHOUT_RESOURCE,
            vec!["*".into()],
            scope.in_region(),
        ),
        statement(
            "GlobalReadsWithoutResource",
            GLOBAL_WITHOUT_RESOURCE,
            vec!["*".into()],
            None,
        ),
        // Node roles, the controller role and the VPC CNI's role may have any name and path.
        statement(
            "ReadRoles",
            ROLE_READS,
            vec![scope.arn("iam", account, "role/*")],
            None,
        ),
        statement(
            "ReadInstanceProfiles",
            &["iam:GetInstanceProfile"],
            vec![scope.arn("iam", account, "instance-profile/*")],
            None,
        ),
        // The policies attached to those roles: the account's own and AWS-managed ones.
        statement(
            "ReadManagedPolicies",
            &["iam:GetPolicy", "iam:GetPolicyVersion"],
            vec![
                scope.arn("iam", account, "policy/*"),
                scope.arn("iam", "aws", "policy/*"),
            ],
            None,
        ),
        statement(
            "SimulateTheKarpenterControllerRoleOnly",
            &["iam:SimulatePrincipalPolicy"],
            vec![scope.controller_role_arn()],
            None,
        ),
        statement(
            "ReadThisCluster",
            CLUSTER_READS,
            vec![scope.arn("eks", account, &format!("cluster/{cluster}"))],
            None,
        ),
        statement(
            "ReadThisClustersAccessEntries",
            &["eks:DescribeAccessEntry"],
            vec![scope.arn("eks", account, &format!("access-entry/{cluster}/*"))],
            None,
        ),
        statement(
            "ReadThisClustersPodIdentityAssociations",
            &["eks:DescribePodIdentityAssociation"],
            vec![scope.arn(
                "eks",
                account,
                &format!("podidentityassociation/{cluster}/*"),
            )],
            None,
        ),
        statement(
            "ReadTheInterruptionQueue",
            &["sqs:GetQueueUrl", "sqs:GetQueueAttributes"],
            vec![scope.arn("sqs", account, scope.queue())],
            None,
        ),
        // Rules on the default bus are `rule/<name>`, on another bus `rule/<bus>/<name>`.
        statement(
            "ReadInterruptionRules",
            &["events:DescribeRule"],
            vec![scope.arn("events", account, "rule/*")],
            None,
        ),
        statement(
            "ReadVolumeKeys",
            &["kms:DescribeKey", "kms:GetKeyPolicy", "kms:ListGrants"],
            vec![scope.arn("kms", account, "key/*")],
            None,
        ),
        statement(
            "ReadEc2Quotas",
            &["servicequotas:GetServiceQuota"],
            vec![scope.arn("servicequotas", account, "ec2/*")],
            None,
        ),
        // Only the public parameters an AMI alias resolves through, as Karpenter's own policy
        // grants them (website/content/en/docs/reference/cloudformation.md,
        // `AllowSSMReadActions`); never the account's own (SecureString) parameters.
        statement(
            "ResolveAmiAliases",
            &["ssm:GetParameter"],
            vec![scope.arn("ssm", "", "parameter/aws/service/*")],
            None,
        ),
    ];
    json!({"Version": "2012-10-17", "Statement": statements})
}

/// Every action the policy grants, sorted.
pub fn granted_actions(policy: &Value) -> std::collections::BTreeSet<String> {
    policy["Statement"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["Action"].as_array().cloned().unwrap_or_default())
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect()
}

/// The policy as the shipped file holds it: pretty JSON with a final newline.
pub fn render(policy: &Value) -> String {
    let mut text = serde_json::to_string_pretty(policy).unwrap_or_default();
    text.push('\n');
    text
}

/// The shipped templates: path from the repository root, and the variant each holds.
pub const TEMPLATES: &[(&str, Credentials)] = &[
    ("deploy/iam-policy.json", Credentials::Irsa),
    (
        "deploy/iam-policy-pod-identity.json",
        Credentials::PodIdentity,
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn scope(credentials: Credentials) -> PolicyScope {
        PolicyScope {
            partition: "aws".into(),
            account: "111122223333".into(),
            region: "eu-west-1".into(),
            cluster_name: "prod".into(),
            controller_role: DEFAULT_CONTROLLER_ROLE.into(),
            interruption_queue: None,
            credentials,
        }
    }

    fn resources_of(policy: &Value, action: &str) -> Vec<String> {
        policy["Statement"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["Action"].as_array().unwrap().iter().any(|a| a == action))
            .flat_map(|s| match &s["Resource"] {
                Value::String(r) => vec![r.clone()],
                Value::Array(rs) => rs.iter().map(|r| r.as_str().unwrap().to_owned()).collect(),
                _ => vec![],
            })
            .collect()
    }

    #[test]
    fn ssm_reads_only_the_public_parameters() {
        let policy = operator_policy(&scope(Credentials::Irsa));
        assert_eq!(
            resources_of(&policy, "ssm:GetParameter"),
            ["arn:aws:ssm:eu-west-1::parameter/aws/service/*"]
        );
    }

    #[test]
    fn the_simulator_is_asked_about_the_controller_role_only() {
        let policy = operator_policy(&scope(Credentials::Irsa));
        assert_eq!(
            resources_of(&policy, "iam:SimulatePrincipalPolicy"),
            ["arn:aws:iam::111122223333:role/KarpenterController*"]
        );
        let exact = PolicyScope {
            controller_role: "arn:aws:iam::111122223333:role/karpenter/prod-controller".into(),
            ..scope(Credentials::Irsa)
        };
        assert_eq!(
            resources_of(&operator_policy(&exact), "iam:SimulatePrincipalPolicy"),
            ["arn:aws:iam::111122223333:role/karpenter/prod-controller"]
        );
        let path = PolicyScope {
            controller_role: "/karpenter/*".into(),
            ..scope(Credentials::Irsa)
        };
        assert_eq!(
            resources_of(&operator_policy(&path), "iam:SimulatePrincipalPolicy"),
            ["arn:aws:iam::111122223333:role/karpenter/*"]
        );
    }

    #[test]
    fn irsa_names_the_cluster_and_pod_identity_the_session_tag() {
        let irsa = operator_policy(&scope(Credentials::Irsa));
        assert_eq!(
            resources_of(&irsa, "eks:DescribeCluster"),
            ["arn:aws:eks:eu-west-1:111122223333:cluster/prod"]
        );
        assert_eq!(
            resources_of(&irsa, "sqs:GetQueueAttributes"),
            ["arn:aws:sqs:eu-west-1:111122223333:prod"]
        );
        let shared = operator_policy(&scope(Credentials::PodIdentity));
        assert_eq!(
            resources_of(&shared, "eks:DescribeAccessEntry"),
            [
                "arn:aws:eks:eu-west-1:111122223333:access-entry/${aws:PrincipalTag/eks-cluster-name}/*"
            ]
        );
        assert_eq!(
            resources_of(&shared, "sqs:GetQueueUrl"),
            ["arn:aws:sqs:eu-west-1:111122223333:${aws:PrincipalTag/eks-cluster-name}"]
        );
        assert_eq!(granted_actions(&irsa), granted_actions(&shared));
    }

    #[test]
    fn a_named_queue_is_named_in_both_variants() {
        for credentials in [Credentials::Irsa, Credentials::PodIdentity] {
            let named = PolicyScope {
                interruption_queue: Some("karpenter-interruptions".into()),
                ..scope(credentials)
            };
            assert_eq!(
                resources_of(&operator_policy(&named), "sqs:GetQueueUrl"),
                ["arn:aws:sqs:eu-west-1:111122223333:karpenter-interruptions"]
            );
        }
    }

    #[test]
    fn regional_reads_are_held_to_the_region_unless_every_region_is_served() {
        let policy = operator_policy(&scope(Credentials::Irsa));
        let regional = &policy["Statement"][0];
        assert_eq!(regional["Resource"], "*");
        assert_eq!(
            regional["Condition"]["StringEquals"]["aws:RequestedRegion"],
            "eu-west-1"
        );
        // IAM and STS are signed for the global region: a region condition would deny them.
        assert!(policy["Statement"][1].get("Condition").is_none());
        let everywhere = PolicyScope {
            region: "*".into(),
            ..scope(Credentials::PodIdentity)
        };
        let policy = operator_policy(&everywhere);
        assert!(policy["Statement"][0].get("Condition").is_none());
        assert_eq!(
            resources_of(&policy, "eks:DescribeCluster"),
            ["arn:aws:eks:*:111122223333:cluster/${aws:PrincipalTag/eks-cluster-name}"]
        );
    }

    #[test]
    fn no_action_is_granted_on_every_resource_that_has_a_resource_type() {
        let policy = operator_policy(&scope(Credentials::Irsa));
        let without: Vec<&str> = REGIONAL_WITHOUT_RESOURCE
            .iter()
            .chain(GLOBAL_WITHOUT_RESOURCE)
            .copied()
            .collect();
        for action in granted_actions(&policy) {
            let resources = resources_of(&policy, &action);
            assert_eq!(
                resources.iter().any(|r| r == "*"),
                without.contains(&action.as_str()),
                "{action}: {resources:?}"
            );
        }
    }

    #[test]
    fn the_partition_follows_the_region() {
        assert_eq!(partition_of("us-east-1"), "aws");
        assert_eq!(partition_of("cn-north-1"), "aws-cn");
        assert_eq!(partition_of("us-gov-west-1"), "aws-us-gov");
        assert_eq!(partition_of("us-iso-east-1"), "aws-iso");
        assert_eq!(partition_of("us-isob-east-1"), "aws-iso-b");
    }
}
