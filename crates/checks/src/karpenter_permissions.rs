//! The permission questions `ControllerCanLaunch` asks about the Karpenter controller's role:
//! each an IAM action on a resource ARN with the request context Karpenter's own calls carry.
//! Pure data: the AWS adapter asks IAM's simulator these exact questions, and the rule asks the
//! local evaluator the same ones when the simulator cannot be asked.
//!
//! The actions and the tags come from Karpenter's own IAM policy and calls
//! (aws/karpenter-provider-aws `website/.../getting-started-with-karpenter/cloudformation.yaml`:
//! `AllowPassingInstanceRole`, `AllowScopedEC2InstanceActionsWithTags`,
//! `AllowScopedInstanceProfileCreationActions`, `AllowScopedInstanceProfileTagActions`,
//! `AllowScopedInstanceProfileActions`; `pkg/utils/utils.go GetTags` and
//! `pkg/providers/instanceprofile/instanceprofile.go` for what Karpenter sends).

use crate::facts::ClusterFacts;
use crate::iam_policy::RequestContext;
use std::collections::BTreeMap;

/// Which simulation a question belongs to: the questions of one group share one request context,
/// so IAM answers them in one `SimulatePrincipalPolicy` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// Passing the node role and launching: every EC2NodeClass.
    Launch,
    /// The instance profile Karpenter makes for `spec.role`.
    InstanceProfile,
}

/// One permission question.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Question {
    pub group: Group,
    pub action: &'static str,
    pub resource: String,
}

/// What the questions are built from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Inputs {
    pub partition: String,
    pub account: String,
    pub region: String,
    /// Karpenter's cluster name, which its tags carry.
    pub cluster: String,
    /// The node role's ARN, as IAM has it (path included).
    pub node_role_arn: String,
    pub node_class: String,
    pub node_class_uid: String,
    /// A NodePool of the class (its name is a launch tag).
    pub node_pool: String,
    /// `spec.tags` of the EC2NodeClass, which Karpenter adds to every launch.
    pub spec_tags: BTreeMap<String, String>,
    /// `spec.role` is used: Karpenter creates and manages the instance profile.
    pub manages_instance_profile: bool,
    /// `status.instanceProfile`, when Karpenter already named the profile.
    pub instance_profile: Option<String>,
}

/// The part of [`Inputs`] the cluster gives: the operator puts it in its AWS request, and the
/// rule derives it from the same cluster facts, so both ask the same questions.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct ClassInputs {
    pub cluster: String,
    pub node_class: String,
    pub node_class_uid: String,
    pub node_pool: String,
    pub spec_tags: BTreeMap<String, String>,
    pub manages_instance_profile: bool,
    pub instance_profile: Option<String>,
}

impl ClassInputs {
    /// The cluster-side inputs; `None` while Karpenter's cluster name (its tags) is unknown.
    pub fn of(cluster: &ClusterFacts) -> Option<Self> {
        let karpenter = cluster.karpenter.found()?;
        let cluster_name = karpenter.cluster_name.clone().filter(|n| !n.is_empty())?;
        let class = &cluster.node_class;
        let node_class = class.metadata.name.clone().unwrap_or_default();
        let mut pools: Vec<String> = cluster
            .node_pools
            .found()
            .map(|pools| {
                pools
                    .iter()
                    .filter_map(|p| p.metadata.name.clone())
                    .collect()
            })
            .unwrap_or_default();
        pools.sort();
        Some(Self {
            cluster: cluster_name,
            node_pool: pools
                .into_iter()
                .next()
                .unwrap_or_else(|| node_class.clone()),
            node_class,
            node_class_uid: class.metadata.uid.clone().unwrap_or_default(),
            spec_tags: class.spec.tags.clone(),
            manages_instance_profile: class.spec.role.as_deref().is_some_and(|r| !r.is_empty()),
            instance_profile: class
                .status
                .as_ref()
                .and_then(|s| s.instance_profile.clone()),
        })
    }

    /// The full inputs, with what AWS told: the account, the region and the node role's ARN.
    pub fn complete(
        &self,
        partition: &str,
        account: &str,
        region: &str,
        node_role_arn: &str,
    ) -> Inputs {
        Inputs {
            partition: partition.to_owned(),
            account: account.to_owned(),
            region: region.to_owned(),
            cluster: self.cluster.clone(),
            node_role_arn: node_role_arn.to_owned(),
            node_class: self.node_class.clone(),
            node_class_uid: self.node_class_uid.clone(),
            node_pool: self.node_pool.clone(),
            spec_tags: self.spec_tags.clone(),
            manages_instance_profile: self.manages_instance_profile,
            instance_profile: self.instance_profile.clone(),
        }
    }
}

pub const PASS_ROLE: &str = "iam:PassRole";
pub const LAUNCH_ACTIONS: [&str; 3] = [
    "ec2:RunInstances",
    "ec2:CreateFleet",
    "ec2:CreateLaunchTemplate",
];
pub const PROFILE_ACTIONS: [&str; 3] = [
    "iam:CreateInstanceProfile",
    "iam:TagInstanceProfile",
    "iam:AddRoleToInstanceProfile",
];

impl Inputs {
    fn ec2_arn(&self, resource: &str) -> String {
        format!(
            "arn:{}:ec2:{}:{}:{resource}",
            self.partition, self.region, self.account
        )
    }

    /// The profile Karpenter creates: path `/karpenter/<region>/<cluster>/<uid>/`.
    pub fn instance_profile_arn(&self) -> String {
        let name = self
            .instance_profile
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| format!("{}_karpenter", self.cluster));
        format!(
            "arn:{}:iam::{}:instance-profile/karpenter/{}/{}/{}/{name}",
            self.partition, self.account, self.region, self.cluster, self.node_class_uid
        )
    }

    /// The questions, in a stable order.
    pub fn questions(&self) -> Vec<Question> {
        let mut out = vec![Question {
            group: Group::Launch,
            action: PASS_ROLE,
            resource: self.node_role_arn.clone(),
        }];
        for (action, resource) in
            LAUNCH_ACTIONS
                .iter()
                .zip(["instance/*", "fleet/*", "launch-template/*"])
        {
            out.push(Question {
                group: Group::Launch,
                action,
                resource: self.ec2_arn(resource),
            });
        }
        if self.manages_instance_profile {
            for action in PROFILE_ACTIONS {
                out.push(Question {
                    group: Group::InstanceProfile,
                    action,
                    resource: self.instance_profile_arn(),
                });
            }
        }
        out
    }

    /// The tags of Karpenter's launches: its own and `spec.tags` (`GetTags`).
    fn launch_tags(&self) -> BTreeMap<String, String> {
        let mut tags = self.spec_tags.clone();
        tags.insert(
            format!("kubernetes.io/cluster/{}", self.cluster),
            "owned".into(),
        );
        tags.insert("eks:eks-cluster-name".into(), self.cluster.clone());
        tags.insert("karpenter.sh/nodepool".into(), self.node_pool.clone());
        tags.insert(
            "karpenter.k8s.aws/ec2nodeclass".into(),
            self.node_class.clone(),
        );
        tags
    }

    /// The tags Karpenter puts on the instance profile it creates.
    fn profile_tags(&self) -> BTreeMap<String, String> {
        let mut tags = self.spec_tags.clone();
        tags.insert(
            format!("kubernetes.io/cluster/{}", self.cluster),
            "owned".into(),
        );
        tags.insert("eks:eks-cluster-name".into(), self.cluster.clone());
        tags.insert(
            "karpenter.k8s.aws/ec2nodeclass".into(),
            self.node_class.clone(),
        );
        tags.insert("topology.kubernetes.io/region".into(), self.region.clone());
        tags
    }

    /// The request context of a group: what Karpenter's calls carry. Every request tag is
    /// given, so a condition on any other request tag is decided (the tag is absent).
    pub fn context(&self, group: Group) -> RequestContext {
        let mut ctx = RequestContext::new().with_value("aws:RequestedRegion", &self.region);
        let tags = match group {
            Group::Launch => {
                ctx = ctx.with_value("iam:PassedToService", "ec2.amazonaws.com");
                self.launch_tags()
            }
            Group::InstanceProfile => {
                let tags = self.profile_tags();
                for (k, v) in &tags {
                    ctx = ctx.with_value(&format!("aws:ResourceTag/{k}"), v);
                }
                ctx = ctx.all_given_under("aws:ResourceTag/");
                tags
            }
        };
        for (k, v) in &tags {
            ctx = ctx.with_value(&format!("aws:RequestTag/{k}"), v);
        }
        let keys: Vec<&str> = tags.keys().map(String::as_str).collect();
        ctx.with("aws:TagKeys", &keys)
            .all_given_under("aws:RequestTag/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(manages: bool) -> Inputs {
        Inputs {
            partition: "aws".into(),
            account: "111122223333".into(),
            region: "us-west-2".into(),
            cluster: "demo".into(),
            node_role_arn: "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo".into(),
            node_class: "default".into(),
            node_class_uid: "uid-1".into(),
            node_pool: "general".into(),
            spec_tags: BTreeMap::from([("team".into(), "a".into())]),
            manages_instance_profile: manages,
            instance_profile: None,
        }
    }

    #[test]
    fn the_launch_questions_are_always_asked_and_the_profile_ones_only_for_spec_role() {
        assert_eq!(inputs(false).questions().len(), 4);
        let all = inputs(true).questions();
        assert_eq!(all.len(), 7);
        assert_eq!(
            all[0].resource,
            "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo"
        );
        assert_eq!(
            all[1].resource,
            "arn:aws:ec2:us-west-2:111122223333:instance/*"
        );
        assert!(all[6].resource.starts_with(
            "arn:aws:iam::111122223333:instance-profile/karpenter/us-west-2/demo/uid-1/"
        ));
    }

    #[test]
    fn contexts_carry_karpenters_tags() {
        let launch: Vec<(String, Vec<String>)> = inputs(true)
            .context(Group::Launch)
            .entries()
            .map(|(k, v)| (k.to_owned(), v.to_vec()))
            .collect();
        let has = |k: &str, v: &str| {
            launch
                .iter()
                .any(|(key, vals)| key == k && vals == &[v.to_owned()])
        };
        assert!(has("aws:RequestTag/kubernetes.io/cluster/demo", "owned"));
        assert!(has("aws:RequestTag/karpenter.sh/nodepool", "general"));
        assert!(has("aws:RequestTag/team", "a"));
        assert!(has("iam:PassedToService", "ec2.amazonaws.com"));
    }
}
