//! What is derived once per EC2NodeClass and shared by the rules: the installed Karpenter's
//! version, the cluster names, and the node role resolved from `spec.role` or the instance
//! profile. Pure, no IO.

use crate::facts::{Facts, Observed, Settings};
use crate::verdict::Why;
use crate::{arn, clip, version};
use jiff::{SignedDuration, Timestamp};
use karpenter_health_api::karpenter::{KarpenterCondition, find_condition};
use karpenter_health_api::{ConditionStatus, Reason, SubjectRef};
use semver::Version;

/// Where the node role's name comes from, and whether it is known.
#[derive(Clone, Debug)]
pub(crate) enum RoleName {
    Known(String),
    /// A fact needed to learn it could not be observed.
    Unobserved(Why),
    /// The observed facts say there is no role to check (e.g. the profile holds none).
    Unresolvable(String),
}

/// Facts derived once and shared by several rules.
pub(crate) struct Context<'a> {
    pub facts: &'a Facts,
    pub settings: &'a Settings,
    pub now: Timestamp,
    pub node_class_name: &'a str,
    /// The installed Karpenter's version.
    pub version: Result<Version, Why>,
    /// The cluster name Karpenter is configured with.
    pub karpenter_cluster_name: Result<&'a str, Why>,
    /// This cluster's name: the operator's flag, else Karpenter's setting.
    pub cluster_name: Result<&'a str, Why>,
    pub node_role: RoleName,
}

impl<'a> Context<'a> {
    pub fn new(facts: &'a Facts, settings: &'a Settings, now: Timestamp) -> Self {
        let karpenter_cluster_name = karpenter_cluster_name(facts);
        let cluster_name = match facts.cluster.configured_cluster_name.as_deref() {
            Some(name) if !name.is_empty() => Ok(name),
            _ => karpenter_cluster_name.clone(),
        };
        Self {
            facts,
            settings,
            now,
            node_class_name: facts
                .cluster
                .node_class
                .metadata
                .name
                .as_deref()
                .unwrap_or_default(),
            version: karpenter_version(facts),
            karpenter_cluster_name,
            cluster_name,
            node_role: node_role_name(facts),
        }
    }

    /// The installed Karpenter, as far as its scheduling differs by release (any release when its
    /// version is not known).
    pub fn release(&self) -> crate::karpenter_release::KarpenterRelease {
        crate::karpenter_release::KarpenterRelease::of(self.version.as_ref().ok())
    }

    /// The label rules the Karpenter controller validates Pods by: its version's, or every rule
    /// set when the version is not known (the installed CRD decides what NodeClaims the API
    /// server admits, the controller's own code which Pods it schedules at all).
    pub fn controller_label_rules(&self) -> Vec<crate::labels::LabelRules> {
        use crate::labels::LabelRules;
        match &self.version {
            Ok(v) => vec![LabelRules::for_version(v)],
            Err(_) => vec![LabelRules::UpTo1_8, LabelRules::From1_9],
        }
    }

    /// Whether the class boots Windows (`spec.amiFamily`, else its alias's family, as Karpenter's
    /// `AMIFamily()` reads them: aws/karpenter-provider-aws `pkg/apis/v1/ec2nodeclass.go`): its
    /// nodes' OS label is `windows`, not `linux`.
    pub fn windows_nodes(&self) -> bool {
        let class = &self.facts.cluster.node_class;
        match class.spec.ami_family.as_deref() {
            Some(family) => family.starts_with("Windows"),
            None => crate::plan::ami_alias::Alias::of(class).is_some_and(|alias| {
                matches!(
                    alias.family,
                    crate::plan::ami_alias::AliasFamily::Windows(_)
                )
            }),
        }
    }

    pub fn node_class_subject(&self) -> SubjectRef {
        SubjectRef::new("EC2NodeClass", self.node_class_name)
    }

    /// One of Karpenter's own conditions on the EC2NodeClass.
    pub fn karpenter_condition(&self, type_: &str) -> Option<&'a KarpenterCondition> {
        let status = self.facts.cluster.node_class.status.as_ref()?;
        find_condition(&status.conditions, type_)
    }

    pub fn karpenter_condition_status(&self, type_: &str) -> Option<ConditionStatus> {
        self.karpenter_condition(type_)
            .map(|c| ConditionStatus::parse(&c.status))
    }

    /// How long ago `t` was (negative durations, from clock skew, count as zero).
    pub fn age(&self, t: Timestamp) -> SignedDuration {
        self.now.duration_since(t).max(SignedDuration::ZERO)
    }
}

fn karpenter_version(facts: &Facts) -> Result<Version, Why> {
    match &facts.cluster.karpenter {
        Observed::Unknown(u) => Err(Why::unobserved("The Karpenter controller", u)),
        Observed::Absent => Err(Why::new(
            Reason::KarpenterVersionUnknown,
            "No Karpenter controller was found, so its version is unknown.",
        )),
        Observed::Found(k) => match k.version.as_deref() {
            None => Err(Why::new(
                Reason::KarpenterVersionUnknown,
                "The Karpenter controller's version could not be read from its image.",
            )),
            Some(raw) => version::parse(raw).map_err(|e| {
                Why::new(
                    Reason::KarpenterVersionUnknown,
                    format!("The Karpenter version {e}."),
                )
            }),
        },
    }
}

fn karpenter_cluster_name(facts: &Facts) -> Result<&str, Why> {
    match &facts.cluster.karpenter {
        Observed::Unknown(u) => Err(Why::unobserved("The Karpenter controller's settings", u)),
        Observed::Absent => Err(Why::new(
            Reason::ClusterNameUnknown,
            "No Karpenter controller was found, so its cluster name is unknown.",
        )),
        Observed::Found(k) => match k.cluster_name.as_deref() {
            Some(name) if !name.is_empty() => Ok(name),
            _ => Err(Why::new(
                Reason::ClusterNameUnknown,
                "Karpenter's settings carry no cluster name.",
            )),
        },
    }
}

fn node_role_name(facts: &Facts) -> RoleName {
    let spec = &facts.cluster.node_class.spec;
    if let Some(role) = spec.role.as_deref().filter(|r| !r.is_empty()) {
        return RoleName::Known(arn::name_of(role).to_owned());
    }
    if let Some(Observed::Found(role)) = &facts.aws.node_role {
        return RoleName::Known(role.name.clone());
    }
    let Some(profile) = spec.instance_profile.as_deref() else {
        return RoleName::Unresolvable(
            "The EC2NodeClass names neither spec.role nor spec.instanceProfile.".into(),
        );
    };
    // An ARN is looked up by the name in it, so its answer resolves the role like a name's.
    let profile = clip(profile, 128);
    match &facts.aws.instance_profile {
        None => RoleName::Unobserved(Why::new(
            Reason::NotObserved,
            format!("Instance profile {profile} has not been looked up yet."),
        )),
        Some(Observed::Unknown(u)) => {
            RoleName::Unobserved(Why::unobserved(&format!("Instance profile {profile}"), u))
        }
        Some(Observed::Absent) => RoleName::Unresolvable(format!(
            "Instance profile {profile} does not exist, so it names no node role."
        )),
        Some(Observed::Found(p)) => match p.roles.first() {
            Some(role) => RoleName::Known(role.name.clone()),
            None => RoleName::Unresolvable(format!("Instance profile {profile} holds no role.")),
        },
    }
}
