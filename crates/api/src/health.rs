//! The KarpenterHealth custom resource: one per EC2NodeClass, cluster-scoped, status written by
//! the operator only. Pure data, no IO.

use crate::conditions::{ConditionStatus, ConditionType, Reason, Severity};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of KarpenterHealth.
pub const GROUP: &str = "karpenter-health.io";
/// At most this many findings are kept in status; the rest are counted in `findingsOmitted`.
pub const MAX_FINDINGS: usize = 50;
/// The field manager used for every write, so server-side apply sees one owner.
pub const FIELD_MANAGER: &str = "karpenter-health";

/// Desired state of a KarpenterHealth. The operator creates the object; the spec only records
/// which EC2NodeClass it reports on (the object also carries an owner reference to it).
#[derive(CustomResource, Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[kube(
    group = "karpenter-health.io",
    version = "v1alpha1",
    kind = "KarpenterHealth",
    plural = "karpenterhealths",
    singular = "karpenterhealth",
    shortname = "kh",
    category = "karpenter",
    status = "KarpenterHealthStatus"
)]
#[serde(rename_all = "camelCase")]
pub struct KarpenterHealthSpec {
    /// Name of the EC2NodeClass this object reports on (always equal to this object's name).
    pub node_class_name: String,
}

/// The KarpenterHealth CRD as the operator installs it and `karpenter-health crd` prints it: the
/// derive's schema with the printer columns of the vocabulary table (`#[kube(printcolumn)]` takes
/// literals only, so they are added here rather than copied by hand): the summary, one hidden
/// (`-o wide`) column per sub-condition in the table's order, the summary's message, when the
/// checks last ran, the age.
pub fn custom_resource_definition() -> CustomResourceDefinition {
    let mut crd = <KarpenterHealth as kube::CustomResourceExt>::crd();
    let status_of =
        |ty: ConditionType, field: &str| format!(".status.conditions[?(@.type==\"{ty}\")].{field}");
    let column =
        |name: &str, json_path: String, priority: Option<i32>| CustomResourceColumnDefinition {
            name: name.to_owned(),
            type_: "string".to_owned(),
            json_path,
            priority,
            ..CustomResourceColumnDefinition::default()
        };
    let mut columns = vec![
        column("Ready", status_of(ConditionType::Ready, "status"), None),
        column("Reason", status_of(ConditionType::Ready, "reason"), None),
        CustomResourceColumnDefinition {
            description: Some(
                "Sub-conditions that are False, then those Unknown (marked ?)".to_owned(),
            ),
            ..column("Not Ready", ".status.notReady".to_owned(), None)
        },
    ];
    columns.extend(
        ConditionType::sub_conditions()
            .iter()
            .map(|&ty| column(ty.column(), status_of(ty, "status"), Some(1))),
    );
    columns.push(column(
        "Message",
        status_of(ConditionType::Ready, "message"),
        Some(1),
    ));
    // How long ago the checks last ran: a stopped or removed operator leaves its last verdict
    // behind, and this column is what tells it from a current one.
    columns.push(CustomResourceColumnDefinition {
        type_: "date".to_owned(),
        description: Some("When the checks last ran".to_owned()),
        ..column("Last Evaluated", ".status.lastEvaluated".to_owned(), None)
    });
    columns.push(CustomResourceColumnDefinition {
        type_: "date".to_owned(),
        ..column("Age", ".metadata.creationTimestamp".to_owned(), None)
    });
    for version in &mut crd.spec.versions {
        version.additional_printer_columns = Some(columns.clone());
    }
    crd
}

/// Observed health of one EC2NodeClass.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KarpenterHealthStatus {
    /// This KarpenterHealth's own `metadata.generation` when the operator wrote the status: what
    /// kstatus (Flux, cli-utils) and Argo CD compare with `metadata.generation` to tell a current
    /// status from a stale one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// The EC2NodeClass `metadata.generation` this status was computed from (the conditions'
    /// `observedGeneration` carry it too): behind the EC2NodeClass's generation, the status
    /// predates its spec change.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_class_generation: Option<i64>,
    /// When the checks last ran, whether or not anything changed. Conditions carry their own
    /// `lastTransitionTime`, which moves only when their status changes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_evaluated: Option<Time>,
    /// One condition per type, all of positive polarity; `Ready` summarises the others.
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    #[schemars(length(max = 32))]
    pub conditions: Vec<Condition>,
    /// What the checks found, most severe first, at most 50 entries.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    pub findings: Vec<Finding>,
    /// How many findings did not fit into `findings`.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub findings_omitted: u32,
    /// Findings someone accepted until a date, with a reason: listed here instead of in
    /// `findings`, and not counted against their condition or `Ready` until the date passes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 50))]
    pub accepted: Vec<AcceptedFinding>,
    /// What the operator detected about the cluster and Karpenter while evaluating.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detected: Option<DetectedEnvironment>,
    /// The sub-conditions keeping `Ready` from `True`, by their short column names: the `False`
    /// ones, then the `Unknown` ones marked `?` (`Labels,SGs?`), cut to fit a `kubectl get`
    /// column with `+N` counting the rest. Absent when `Ready` is `True`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 64))]
    pub not_ready: Option<String>,
}

/// The longest `notReady` summary: with `kubectl get`'s other default columns (name, Ready, a
/// reason, last evaluated, age) it keeps a line within 130 columns for EC2NodeClass names up to
/// 24 characters.
pub const MAX_NOT_READY_CHARS: usize = 40;

/// Joins short condition names with commas, keeping as many as fit in `MAX_NOT_READY_CHARS` with
/// a trailing `+N` for the rest.
pub fn summarize_not_ready(names: &[String]) -> String {
    let mut summary = String::new();
    for (shown, name) in names.iter().enumerate() {
        let rest = names.len() - shown - 1;
        let separator = usize::from(!summary.is_empty());
        let tail = if rest == 0 {
            0
        } else {
            format!(",+{rest}").len()
        };
        if summary.len() + separator + name.len() + tail > MAX_NOT_READY_CHARS {
            let more = format!("+{}", names.len() - shown);
            if !summary.is_empty() {
                summary.push(',');
            }
            summary.push_str(&more);
            return summary;
        }
        if separator == 1 {
            summary.push(',');
        }
        summary.push_str(name);
    }
    summary
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One diagnosis, with the objects it is about.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    /// Stable identifier of the check that produced this finding (kebab-case).
    pub check: String,
    pub severity: Severity,
    /// The condition this finding informs.
    pub condition_type: ConditionType,
    /// A PascalCase code: for `Error` findings, the condition's reason.
    pub reason: String,
    /// What is wrong, naming the objects and ARNs involved.
    pub message: String,
    /// One sentence on how to fix it.
    pub remediation: String,
    /// The Kubernetes objects or AWS resources the finding is about.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 10))]
    pub subjects: Vec<SubjectRef>,
    /// When this finding (its condition, reason and subjects) was first seen without a break:
    /// kept from evaluation to evaluation while it holds, so "since when?" needs no history.
    /// Absent from `karpenter-health check`, a single run with no history.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_seen: Option<Time>,
}

impl Finding {
    /// What makes two evaluations' findings the same finding: its message may change (a count,
    /// an age), its condition, check, reason and subjects do not.
    pub fn same_finding(&self, other: &Self) -> bool {
        self.condition_type == other.condition_type
            && self.check == other.check
            && self.reason == other.reason
            && self.subjects == other.subjects
    }
}

/// A finding that stops counting until a date: what was found, and who accepted it, why and until
/// when.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AcceptedFinding {
    /// The condition the finding is about.
    pub condition_type: ConditionType,
    /// The reason (of a `False`) or warning code accepted.
    pub reason: String,
    /// What the check found.
    pub message: String,
    /// When the acceptance ends and the finding counts again; absent for a one-shot
    /// `check --accept`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Time>,
    /// Why it was accepted, as its author wrote it.
    pub why: String,
    /// Who accepted it: the annotation (`annotation accept.karpenter-health.io/<Reason>`), the
    /// fleet rule (`fleet rule <n> (<pattern>)`) or `check --accept`.
    pub source: String,
}

/// A reference to a Kubernetes object (`kind`, `name`, optional `namespace`) or an AWS resource
/// (`kind` such as `IAMRole`, `name` holding its ARN or id).
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct SubjectRef {
    pub kind: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

impl SubjectRef {
    pub fn new(kind: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            kind: kind.into(),
            name: name.into(),
            namespace: None,
        }
    }

    pub fn namespaced(
        kind: impl Into<String>,
        namespace: impl Into<String>,
        name: impl Into<String>,
    ) -> Self {
        Self {
            kind: kind.into(),
            name: name.into(),
            namespace: Some(namespace.into()),
        }
    }
}

/// Facts about the environment that the checks depend on, as the operator saw them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DetectedEnvironment {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub karpenter_version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// EKS authentication mode: CONFIG_MAP, API_AND_CONFIG_MAP or API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authentication_mode: Option<String>,
}

impl KarpenterHealthStatus {
    /// The status written before the first evaluation: every condition present, `Unknown` with
    /// reason `Pending`, so consumers see the operator is alive and which checks exist.
    pub fn pending(now: Time, generation: Option<i64>) -> Self {
        let conditions = ConditionType::ALL
            .iter()
            .map(|&ty| {
                let reason = Reason::Pending;
                Condition {
                    type_: ty.as_str().to_owned(),
                    status: ConditionStatus::Unknown.as_str().to_owned(),
                    reason: reason.as_str().to_owned(),
                    message: if ty == ConditionType::Ready {
                        "Checks have not been evaluated yet.".to_owned()
                    } else {
                        String::new()
                    },
                    last_transition_time: now.clone(),
                    observed_generation: generation,
                }
            })
            .collect();
        let every_check: Vec<String> = ConditionType::sub_conditions()
            .iter()
            .map(|ty| format!("{}?", ty.column()))
            .collect();
        Self {
            node_class_generation: generation,
            conditions,
            not_ready: Some(summarize_not_ready(&every_check)),
            ..Self::default()
        }
    }

    /// The condition of the given type, if present.
    pub fn condition(&self, ty: ConditionType) -> Option<&Condition> {
        self.conditions.iter().find(|c| c.type_ == ty.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_not_ready_summary_fits_its_column_and_counts_what_it_leaves_out() {
        let names = |n: &[&str]| n.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        assert_eq!(summarize_not_ready(&[]), "");
        assert_eq!(summarize_not_ready(&names(&["Labels"])), "Labels");
        assert_eq!(
            summarize_not_ready(&names(&["Mapped", "SGs", "Registered?"])),
            "Mapped,SGs,Registered?"
        );
        let every: Vec<String> = ConditionType::sub_conditions()
            .iter()
            .map(|t| format!("{}?", t.column()))
            .collect();
        let summary = summarize_not_ready(&every);
        assert!(summary.len() <= MAX_NOT_READY_CHARS, "{summary}");
        let shown = summary.split(',').filter(|s| !s.starts_with('+')).count();
        let more: usize = summary
            .rsplit_once(",+")
            .and_then(|(_, n)| n.parse().ok())
            .unwrap_or_default();
        assert!(more > 0, "{summary}");
        assert_eq!(shown + more, every.len(), "{summary}");
        assert!(summary.starts_with("Profile?,Role?"), "{summary}");
    }

    /// One column per sub-condition, as the vocabulary table names it and in its order, between
    /// the summary's columns.
    #[test]
    fn the_printer_columns_are_the_vocabulary_tables_columns() {
        let crd = custom_resource_definition();
        let columns = crd.spec.versions[0]
            .additional_printer_columns
            .clone()
            .unwrap_or_default();
        let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names[..3], ["Ready", "Reason", "Not Ready"], "{names:?}");
        assert_eq!(
            names[names.len() - 3..],
            ["Message", "Last Evaluated", "Age"],
            "{names:?}"
        );
        let evaluated = &columns[columns.len() - 2];
        assert_eq!(
            (
                evaluated.json_path.as_str(),
                evaluated.type_.as_str(),
                evaluated.priority
            ),
            (".status.lastEvaluated", "date", None),
            "shown by default, as an age"
        );
        let sub: Vec<(&str, &str, Option<i32>)> = columns[3..columns.len() - 3]
            .iter()
            .map(|c| (c.name.as_str(), c.json_path.as_str(), c.priority))
            .collect();
        assert_eq!(sub.len(), ConditionType::sub_conditions().len());
        for (ty, (name, path, priority)) in ConditionType::sub_conditions().iter().zip(sub) {
            assert_eq!(name, ty.column());
            assert_eq!(
                path,
                format!(".status.conditions[?(@.type==\"{ty}\")].status")
            );
            assert_eq!(priority, Some(1), "{ty} is shown with -o wide only");
        }
    }

    #[test]
    fn crd_is_cluster_scoped_with_status_shortname_and_category() {
        let crd = custom_resource_definition();
        assert_eq!(
            crd.metadata.name.as_deref(),
            Some("karpenterhealths.karpenter-health.io")
        );
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.short_names, Some(vec!["kh".to_owned()]));
        assert_eq!(
            crd.spec.names.categories,
            Some(vec!["karpenter".to_owned()])
        );
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some()
        );
    }

    #[test]
    fn conditions_are_a_map_list_keyed_by_type() {
        let crd = serde_json::to_value(custom_resource_definition()).unwrap();
        let conditions = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
            ["properties"]["conditions"];
        assert_eq!(conditions["x-kubernetes-list-type"], "map");
        assert_eq!(conditions["x-kubernetes-list-map-keys"][0], "type");
        assert_eq!(conditions["maxItems"], 32);
    }

    #[test]
    fn pending_status_has_every_condition_unknown() {
        let now = Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH);
        let status = KarpenterHealthStatus::pending(now, Some(3));
        assert_eq!(status.conditions.len(), ConditionType::ALL.len());
        for c in &status.conditions {
            assert_eq!(c.status, "Unknown");
            assert_eq!(c.observed_generation, Some(3));
        }
        assert_eq!(
            status
                .condition(ConditionType::NodeRoleMapped)
                .unwrap()
                .reason,
            "Pending"
        );
    }
}
