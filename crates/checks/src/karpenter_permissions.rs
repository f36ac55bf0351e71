//! The permission questions `ControllerCanLaunch` asks about the Karpenter controller's role:
//! each an IAM action on a resource ARN with the request context Karpenter's own calls carry.
//! Pure data: the AWS adapter asks IAM's simulator these exact questions, and the rule asks the
//! local evaluator the same ones when the simulator cannot be asked.
//!
//! The actions, resources and tags come from Karpenter's own IAM policy and calls
//! (aws/karpenter-provider-aws `website/.../getting-started-with-karpenter/cloudformation.yaml`:
//! `AllowPassingInstanceRole`, `AllowScopedEC2InstanceAccessActions` (image, snapshot, security
//! group, subnet), `AllowScopedEC2LaunchTemplateAccessActions`,
//! `AllowScopedEC2InstanceActionsWithTags` (fleet, instance, volume, network interface, launch
//! template, spot request), `AllowScopedResourceCreationTagging`,
//! `AllowScopedInstanceProfileCreationActions`, `AllowScopedInstanceProfileTagActions`,
//! `AllowScopedInstanceProfileActions`, `AllowSSMReadActions`; `pkg/utils/utils.go GetTags` and
//! `pkg/providers/instanceprofile/instanceprofile.go` for what Karpenter sends).
//!
//! The request context carries what Karpenter's launch carries and the operator knows: the
//! region, the tags, the metadata options of the EC2NodeClass (`ec2:MetadataHttpTokens` and its
//! siblings, with the CRD's defaults), `ec2:CreateAction` for tagging on create. What it does not
//! know (the instance type, the image's owner) is left out; IAM's simulator then reports the
//! key as missing, and a decision that needed it is not a proof.

use crate::facts::{ClusterFacts, SimulatedDecision};
use crate::iam_policy::RequestContext;
use std::collections::BTreeMap;

/// What one answer of IAM's simulator proves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    Allowed,
    /// Denied, with who denied it.
    Denied(String),
    /// Not a proof: the decision needed context the request did not carry.
    Undecided(String),
}

/// Reads one simulated decision. A denial made without context the policies needed is not a
/// proof, whoever denied: an SCP requiring IMDSv2 denies a request that does not say which
/// tokens it uses, while Karpenter's real request does say.
pub fn verdict(d: &SimulatedDecision) -> Verdict {
    if d.decision.eq_ignore_ascii_case("allowed") {
        return Verdict::Allowed;
    }
    if !d.missing_context.is_empty() {
        let mut keys = d.missing_context.clone();
        keys.truncate(5);
        return Verdict::Undecided(format!(
            "IAM's simulator needed the context keys {}, which Karpenter's calls carry but the \
             operator cannot know",
            keys.join(", ")
        ));
    }
    if d.denied_by_organizations {
        return Verdict::Denied("a service control policy of the organization denies it".into());
    }
    if d.denied_by_boundary {
        return Verdict::Denied("the role's permissions boundary does not allow it".into());
    }
    if d.decision.eq_ignore_ascii_case("explicitDeny") {
        let by = if d.matched.is_empty() {
            "a policy".to_owned()
        } else {
            let mut matched = d.matched.clone();
            matched.truncate(3);
            matched.join(", ")
        };
        return Verdict::Denied(format!("an explicit Deny in {by}"));
    }
    Verdict::Denied("no policy of the role allows it".into())
}

/// Which simulation a question belongs to: the questions of one group share one request context,
/// so IAM answers them in one `SimulatePrincipalPolicy` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Group {
    /// Passing the node role and launching: every EC2NodeClass.
    Launch,
    /// The instance profile Karpenter makes for `spec.role`.
    InstanceProfile,
    /// The public SSM parameter an AMI `alias` resolves through.
    AmiParameters,
    /// Describing the images Karpenter resolves: every EC2NodeClass.
    Images,
    /// Having EC2 create the spot service-linked role, which EC2 does with the caller's
    /// permission at the first spot launch of an account without it (its refusal is
    /// `AuthFailure.ServiceLinkedRoleCreationNotPermitted`): a class with a spot NodePool. Read
    /// by `SpotReady`, never by `ControllerCanLaunch`, since the role's absence is what makes it
    /// matter.
    SpotServiceLinkedRole,
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
    /// The metadata options Karpenter launches with.
    pub metadata: MetadataKeys,
    /// The SSM parameter Karpenter reads first to resolve the class's AMI `alias` for the
    /// cluster's Kubernetes minor; `None` without an alias or while the minor is unknown.
    pub ami_parameter: Option<String>,
    /// A NodePool of the class allows spot capacity.
    pub allows_spot: bool,
}

/// The EC2NodeClass's metadata options as the `ec2:Metadata*` condition keys of a launch, with
/// the EC2NodeClass CRD's defaults (`httpEndpoint: enabled`, `httpPutResponseHopLimit: 1`,
/// `httpTokens: required`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct MetadataKeys {
    pub http_tokens: String,
    pub http_endpoint: String,
    pub hop_limit: String,
}

impl Default for MetadataKeys {
    fn default() -> Self {
        Self {
            http_tokens: "required".into(),
            http_endpoint: "enabled".into(),
            hop_limit: "1".into(),
        }
    }
}

impl MetadataKeys {
    fn of(options: Option<&karpenter_health_api::karpenter::MetadataOptions>) -> Self {
        let default = Self::default();
        let Some(o) = options else {
            return default;
        };
        Self {
            http_tokens: o.http_tokens.clone().unwrap_or(default.http_tokens),
            http_endpoint: o.http_endpoint.clone().unwrap_or(default.http_endpoint),
            hop_limit: o
                .http_put_response_hop_limit
                .map_or(default.hop_limit, |n| n.to_string()),
        }
    }
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
    pub metadata: MetadataKeys,
    /// The class's AMI `alias`, as written.
    pub ami_alias: Option<String>,
    /// A NodePool of the class allows spot capacity.
    pub allows_spot: bool,
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
            metadata: MetadataKeys::of(class.spec.metadata_options.as_ref()),
            ami_alias: crate::plan::ami_alias::Alias::of(class).map(|a| a.written),
            allows_spot: cluster
                .node_pools
                .found()
                .is_some_and(|pools| pools.iter().any(crate::plan::capacity::allows_spot)),
        })
    }

    /// The full inputs, with what AWS told: the account, the region, the node role's ARN and
    /// the cluster's Kubernetes minor (which the alias's parameter names).
    pub fn complete(
        &self,
        partition: &str,
        account: &str,
        region: &str,
        node_role_arn: &str,
        kubernetes_minor: Option<&str>,
    ) -> Inputs {
        let ami_parameter = self
            .ami_alias
            .as_deref()
            .and_then(crate::plan::ami_alias::Alias::parse)
            .zip(kubernetes_minor)
            .and_then(|(alias, minor)| alias.parameters(minor).into_iter().next());
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
            metadata: self.metadata.clone(),
            ami_parameter,
            allows_spot: self.allows_spot,
        }
    }
}

pub const PASS_ROLE: &str = "iam:PassRole";
pub const LAUNCH_ACTIONS: [&str; 3] = [
    "ec2:RunInstances",
    "ec2:CreateFleet",
    "ec2:CreateLaunchTemplate",
];
const CREATE_TAGS: &str = "ec2:CreateTags";
/// What a launch creates (tagged on create) and what it uses, by EC2 resource type.
const CREATED: [&str; 4] = ["instance", "volume", "network-interface", "launch-template"];
const USED: [&str; 3] = ["subnet", "security-group", "image"];
pub const PROFILE_ACTIONS: [&str; 3] = [
    "iam:CreateInstanceProfile",
    "iam:TagInstanceProfile",
    "iam:AddRoleToInstanceProfile",
];
/// What resolving an `alias` takes (Karpenter's `AllowSSMReadActions` grants it on
/// `arn:<partition>:ssm:<region>::parameter/aws/service/*`; `pkg/providers/ssm/provider.go`).
pub const READ_PARAMETER: &str = "ssm:GetParameter";
/// What resolving any image takes (Karpenter's `AllowRegionalReadActions` grants it on `*` in
/// the cluster's region; `pkg/providers/amifamily/ami.go` lists images with DescribeImages,
/// an alias's image id included). EC2 has no resource-level permission for it.
pub const DESCRIBE_IMAGES: &str = "ec2:DescribeImages";
/// What EC2 asks of the caller to create a missing service-linked role on its behalf.
pub const CREATE_SERVICE_LINKED_ROLE: &str = "iam:CreateServiceLinkedRole";
/// The role EC2 needs to request spot capacity.
pub const SPOT_SERVICE_LINKED_ROLE: &str = "AWSServiceRoleForEC2Spot";
/// The service the spot service-linked role is linked to.
const SPOT_SERVICE: &str = "spot.amazonaws.com";

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

    /// The questions, in a stable order: passing the node role; `RunInstances` and `CreateFleet`
    /// on what a launch creates and uses; `CreateFleet` on the fleet; `CreateLaunchTemplate` on
    /// the template; tagging on create of everything created.
    pub fn questions(&self) -> Vec<Question> {
        let mut out = vec![Question {
            group: Group::Launch,
            action: PASS_ROLE,
            resource: self.node_role_arn.clone(),
        }];
        let launch = |action: &'static str, kind: &str| Question {
            group: Group::Launch,
            action,
            resource: if kind == "image" {
                // Images belong to no account in their ARN (`arn:aws:ec2:region::image/ami-*`),
                // as Karpenter's policy writes them.
                format!("arn:{}:ec2:{}::image/*", self.partition, self.region)
            } else {
                self.ec2_arn(&format!("{kind}/*"))
            },
        };
        for action in ["ec2:RunInstances", "ec2:CreateFleet"] {
            for kind in CREATED.iter().chain(&USED) {
                out.push(launch(action, kind));
            }
        }
        out.push(launch("ec2:CreateFleet", "fleet"));
        out.push(launch("ec2:CreateLaunchTemplate", "launch-template"));
        for kind in CREATED.iter().chain(&["fleet"]) {
            out.push(launch(CREATE_TAGS, kind));
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
        if let Some(name) = &self.ami_parameter {
            out.push(Question {
                group: Group::AmiParameters,
                action: READ_PARAMETER,
                resource: self.parameter_arn(name),
            });
        }
        out.push(Question {
            group: Group::Images,
            action: DESCRIBE_IMAGES,
            resource: "*".into(),
        });
        if self.allows_spot {
            out.push(Question {
                group: Group::SpotServiceLinkedRole,
                action: CREATE_SERVICE_LINKED_ROLE,
                resource: self.spot_service_linked_role_arn(),
            });
        }
        out
    }

    /// The spot service-linked role's ARN (IAM User Guide, "Using service-linked roles": the
    /// path `/aws-service-role/<service>/`).
    pub fn spot_service_linked_role_arn(&self) -> String {
        format!(
            "arn:{}:iam::{}:role/aws-service-role/{SPOT_SERVICE}/{}",
            self.partition, self.account, SPOT_SERVICE_LINKED_ROLE
        )
    }

    /// A public parameter belongs to no account in its ARN, as Karpenter's policy writes it.
    pub fn parameter_arn(&self, name: &str) -> String {
        format!(
            "arn:{}:ssm:{}::parameter/{}",
            self.partition,
            self.region,
            name.trim_start_matches('/')
        )
    }

    /// What the questions verify, for a True message; the image reads only when `image_reads`
    /// were allowed (a denial while Karpenter keeps its images is a warning, which the True
    /// message must not contradict).
    pub fn verified(&self, image_reads: bool) -> String {
        let mut what = format!(
            "iam:PassRole on the node role; ec2:RunInstances and ec2:CreateFleet on {} with \
             Karpenter's tags and the class's metadata options; ec2:CreateLaunchTemplate; \
             ec2:CreateTags on create",
            CREATED
                .iter()
                .chain(&USED)
                .copied()
                .collect::<Vec<_>>()
                .join(", ")
        );
        if self.manages_instance_profile {
            what.push_str("; creating, tagging and filling its instance profile");
        }
        if !image_reads {
            what.push_str(
                "; not all of the image reads (ssm:GetParameter, ec2:DescribeImages): see the \
                 warning",
            );
            return what;
        }
        if let Some(name) = &self.ami_parameter {
            what.push_str(&format!(
                "; ssm:GetParameter on {name}, which its alias resolves through"
            ));
        }
        what.push_str("; ec2:DescribeImages, which resolves its images");
        what
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
        // EC2 creates the service-linked role through IAM, a global service, on the caller's
        // behalf: what region (or `aws:CalledVia`) that request carries is not documented, so
        // none is given and a policy conditioned on it is reported as needing the key.
        if group == Group::SpotServiceLinkedRole {
            return RequestContext::new()
                .with_value("iam:AWSServiceName", SPOT_SERVICE)
                .all_given_under("aws:ResourceTag/")
                .all_given_under("aws:RequestTag/");
        }
        let mut ctx = RequestContext::new().with_value("aws:RequestedRegion", &self.region);
        let tags = match group {
            Group::Launch => {
                let tags = self.launch_tags();
                // What was created with these tags carries them: the launch template Karpenter
                // made and then launches from.
                for (k, v) in &tags {
                    ctx = ctx.with_value(&format!("aws:ResourceTag/{k}"), v);
                }
                ctx = ctx
                    .all_given_under("aws:ResourceTag/")
                    .with_value("iam:PassedToService", "ec2.amazonaws.com")
                    .with_value("ec2:Region", &self.region)
                    .with_value("ec2:CreateAction", "CreateFleet")
                    .with_value("ec2:MetadataHttpTokens", &self.metadata.http_tokens)
                    .with_value("ec2:MetadataHttpEndpoint", &self.metadata.http_endpoint)
                    .with_value(
                        "ec2:MetadataHttpPutResponseHopLimit",
                        &self.metadata.hop_limit,
                    );
                tags
            }
            Group::InstanceProfile => {
                let tags = self.profile_tags();
                for (k, v) in &tags {
                    ctx = ctx.with_value(&format!("aws:ResourceTag/{k}"), v);
                }
                ctx = ctx.all_given_under("aws:ResourceTag/");
                tags
            }
            // Karpenter's GetParameter and DescribeImages carry no tags, and AWS's public
            // parameters have none.
            Group::AmiParameters | Group::Images => {
                return ctx
                    .all_given_under("aws:ResourceTag/")
                    .all_given_under("aws:RequestTag/");
            }
            // The role EC2 creates is named by the service it is linked to (IAM's
            // `iam:AWSServiceName` condition key of CreateServiceLinkedRole), and carries no
            // tags: answered above.
            Group::SpotServiceLinkedRole => return ctx,
        };
        for (k, v) in &tags {
            ctx = ctx.with_value(&format!("aws:RequestTag/{k}"), v);
        }
        let keys: Vec<&str> = tags.keys().map(String::as_str).collect();
        ctx.with("aws:TagKeys", &keys)
            .all_given_under("aws:RequestTag/")
    }
}
