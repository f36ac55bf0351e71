//! What lint reports: findings with their rule, position and severity, and the closed table of
//! where each rule points in a document. Pure data, no IO.

use karpenter_health_api::Reason;
use karpenter_health_checks::warnings::Warning;
use serde::Serialize;
use std::fmt;

/// The code of a finding: an operator reason (error), a warning of the engine's table, or a
/// document lint could not read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rule {
    Reason(Reason),
    Warning(Warning),
    /// Not YAML, or not the kind it claims. Lint's own: the operator never reads files.
    InvalidDocument,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Warning,
    Error,
}

/// Where in its document a rule's finding points.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Anchor {
    /// This field of the object (or its nearest present ancestor).
    Field(&'static [&'static str]),
    /// The label key or requirement key at fault.
    LabelKey,
    /// The aws-auth entry at fault, inside the `mapRoles`/`mapUsers` string.
    AwsAuthEntry,
    /// The position the YAML reader reports.
    ReaderPosition,
}

impl Rule {
    /// Where each rule lint emits points. It is also the list of rules lint can emit: a rule
    /// without an anchor is never reported (see [`Rule::emittable`]), so adding a check here is
    /// what makes it reachable.
    pub fn anchor(self) -> Option<Anchor> {
        use Reason as R;
        Some(match self {
            Rule::Reason(R::InstanceProfileIsArn | R::InstanceProfileNameInvalid) => {
                Anchor::Field(&["spec", "instanceProfile"])
            }
            Rule::Reason(R::NodeRoleIsArn | R::NodeRoleNameTooLong) => {
                Anchor::Field(&["spec", "role"])
            }
            Rule::Reason(R::HttpProtocolIPv6UnsupportedInRegion) => {
                Anchor::Field(&["spec", "metadataOptions", "httpProtocolIPv6"])
            }
            Rule::Reason(R::RestrictedLabelDomain) => Anchor::LabelKey,
            // Decided by the files together (`manifests.rs`): the class, its NodePools and the
            // controller's Deployment, or Cilium's settings and agent.
            Rule::Warning(Warning::MetadataOutOfReach) => {
                Anchor::Field(&["spec", "metadataOptions"])
            }
            Rule::Warning(Warning::AgentTaintNotStartupTaint) => Anchor::Field(&["spec"]),
            Rule::Reason(
                R::AwsAuthMalformed
                | R::NodeRoleMappedWithPath
                | R::NodeRoleMappingMissingGroups
                | R::NodeRoleMappingWrongUsername
                | R::ControllerRoleMappedInstead,
            )
            | Rule::Warning(
                Warning::AwsAuthUnparsable | Warning::NodeRoleMappingWithoutBootstrappers,
            ) => Anchor::AwsAuthEntry,
            Rule::InvalidDocument => Anchor::ReaderPosition,
            _ => return None,
        })
    }

    /// Every rule lint can emit, derived from [`Rule::anchor`].
    pub fn emittable() -> Vec<Rule> {
        Reason::ALL
            .iter()
            .map(|r| Rule::Reason(*r))
            .chain(Warning::ALL.iter().map(|w| Rule::Warning(*w)))
            .chain([Rule::InvalidDocument])
            .filter(|r| r.anchor().is_some())
            .collect()
    }

    pub fn id(self) -> &'static str {
        match self {
            Rule::Reason(r) => r.as_str(),
            Rule::Warning(w) => w.as_str(),
            Rule::InvalidDocument => "InvalidDocument",
        }
    }

    pub fn severity(self) -> Severity {
        match self {
            Rule::Reason(_) | Rule::InvalidDocument => Severity::Error,
            Rule::Warning(_) => Severity::Warning,
        }
    }

    pub fn meaning(self) -> &'static str {
        match self {
            Rule::Reason(r) => r.meta().meaning,
            Rule::Warning(w) => w.meaning(),
            Rule::InvalidDocument => {
                "A document is not valid YAML, or not the kind its apiVersion and kind claim; the API server would refuse it."
            }
        }
    }

    pub fn remediation(self) -> &'static str {
        match self {
            Rule::Reason(r) => r.meta().remediation,
            Rule::Warning(w) => w.remediation(),
            Rule::InvalidDocument => {
                "Fix the document at the position named in the message; the other documents were linted."
            }
        }
    }

    /// The rule's documentation, relative to the repository root.
    pub fn help_uri(self) -> String {
        match self {
            Rule::Reason(r) => r.docs_anchor(),
            Rule::Warning(w) => w.docs_anchor(),
            Rule::InvalidDocument => "README.md#lint".to_owned(),
        }
    }

    /// The rule of an engine finding's `reason` field.
    pub fn parse(reason: &str) -> Option<Rule> {
        Reason::parse(reason).map(Rule::Reason).or_else(|| {
            Warning::ALL
                .iter()
                .find(|w| w.as_str() == reason)
                .map(|w| Rule::Warning(*w))
        })
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// One problem at one place.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The path as given on the command line (`-` for stdin).
    pub path: String,
    /// 1-based.
    pub line: usize,
    /// 0-based index of the document in its file.
    pub document: usize,
    pub rule: Rule,
    pub message: String,
}

impl Finding {
    pub fn severity(&self) -> Severity {
        self.rule.severity()
    }
}
/// What lint is told beyond the files.
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub karpenter_version: Option<semver::Version>,
    pub region: Option<String>,
    /// A role name or ARN.
    pub node_role: Option<String>,
    /// A role name or ARN.
    pub controller_role: Option<String>,
}

/// One finding of a rule on a document: the rule, its message, its line.
pub(crate) type Found = (Rule, String, usize);
