//! The labels copied from an EC2NodeClass onto its KarpenterHealth and into its metric series (so
//! Alertmanager can route a class's alerts to the team that owns it), and their Prometheus names.
//! Pure: parsing the setting and reading an object's labels.

use karpenter_health_api::karpenter::EC2NodeClass;
use std::collections::BTreeMap;

/// Label names the operator's series, the chart's alerts or the scrape already carry: a copied
/// label of that name would overwrite one of them (or be renamed `exported_*` by Prometheus).
const RESERVED_METRIC_NAMES: &[&str] = &[
    "node_class",
    "type",
    "status",
    "reason",
    "check",
    "severity",
    "alertname",
    "job",
    "instance",
    "pod",
    "namespace",
    "service",
    "container",
    "endpoint",
    "cluster",
    "name",
];

/// One label to copy: its Kubernetes key and the Prometheus label name it is exported as.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CopiedLabel {
    pub key: String,
    pub metric_name: String,
}

/// The labels to copy, in the order given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CopiedLabels(pub Vec<CopiedLabel>);

/// The Prometheus label name of a Kubernetes label key: every character outside `[a-zA-Z0-9_]`
/// becomes `_` (kube-state-metrics sanitizes `kube_*_labels` the same way), and a leading digit
/// gets a `_` before it.
fn metric_name_of(key: &str) -> String {
    let mut name: String = key
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        name.insert(0, '_');
    }
    name
}

/// Whether `key` is a Kubernetes label key: an optional DNS-subdomain prefix and `/`, then a
/// name of at most 63 characters, alphanumeric at both ends, `-`, `_`, `.` inside
/// (apimachinery `validation.IsQualifiedName`).
fn is_label_key(key: &str) -> bool {
    let (prefix, name) = match key.split_once('/') {
        Some((prefix, name)) => (Some(prefix), name),
        None => (None, key),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.split('.').all(|part| {
                !part.is_empty()
                    && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part.ends_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
            })
    });
    name_ok && prefix_ok
}

/// Parses `team,example.com/owner`: label keys, comma-separated. Refuses a key that is not a
/// label key, and one whose Prometheus name is reserved or taken by an earlier key, naming it.
pub fn parse_copied_labels(text: &str) -> Result<CopiedLabels, String> {
    let mut labels: Vec<CopiedLabel> = Vec::new();
    for key in text.split(',').map(str::trim).filter(|k| !k.is_empty()) {
        if !is_label_key(key) {
            return Err(format!("`{key}` is not a Kubernetes label key"));
        }
        let metric_name = metric_name_of(key);
        if RESERVED_METRIC_NAMES.contains(&metric_name.as_str()) {
            return Err(format!(
                "`{key}` would be exported as the label `{metric_name}`, which the metrics or \
                 alerts already carry; copy a label of another name"
            ));
        }
        if let Some(earlier) = labels.iter().find(|l| l.metric_name == metric_name) {
            return Err(format!(
                "`{key}` and `{}` would both be exported as the label `{metric_name}`",
                earlier.key
            ));
        }
        labels.push(CopiedLabel {
            key: key.to_owned(),
            metric_name,
        });
    }
    Ok(CopiedLabels(labels))
}

impl CopiedLabels {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The labels of `node_class` to copy onto its KarpenterHealth: those it carries, by key.
    pub fn of(&self, node_class: &EC2NodeClass) -> BTreeMap<String, String> {
        let carried = node_class.metadata.labels.as_ref();
        self.0
            .iter()
            .filter_map(|l| {
                let value = carried?.get(&l.key)?;
                Some((l.key.clone(), value.clone()))
            })
            .collect()
    }

    /// The same labels as metric labels (Prometheus names), in the order of the setting; a label
    /// the class does not carry is left out (Prometheus reads an empty label as absent).
    pub fn metric_labels(&self, node_class: &EC2NodeClass) -> Vec<(String, String)> {
        let carried = self.of(node_class);
        self.0
            .iter()
            .filter_map(|l| Some((l.metric_name.clone(), carried.get(&l.key)?.clone())))
            .collect()
    }

    /// Whether `labels` (a KarpenterHealth's) hold exactly what `node_class` carries of the
    /// copied keys: every copied value, and no copied key the class no longer carries.
    pub fn in_sync(
        &self,
        labels: Option<&BTreeMap<String, String>>,
        node_class: &EC2NodeClass,
    ) -> bool {
        let wanted = self.of(node_class);
        self.0
            .iter()
            .all(|l| labels.and_then(|held| held.get(&l.key)) == wanted.get(&l.key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_with(labels: &[(&str, &str)]) -> EC2NodeClass {
        let mut class: EC2NodeClass = serde_json::from_value(serde_json::json!({
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "default"},
            "spec": {}
        }))
        .unwrap();
        class.metadata.labels = Some(
            labels
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
        );
        class
    }

    #[test]
    fn keys_become_prometheus_names_and_bad_ones_are_refused_by_name() {
        let labels = parse_copied_labels("team, example.com/owner-id ,").unwrap();
        let names: Vec<&str> = labels.0.iter().map(|l| l.metric_name.as_str()).collect();
        assert_eq!(names, ["team", "example_com_owner_id"]);
        let error = parse_copied_labels("team,Not A/Key").unwrap_err();
        assert!(error.contains("`Not A/Key`"), "{error}");
        let error = parse_copied_labels("severity").unwrap_err();
        assert!(error.contains("already carry"), "{error}");
        let error = parse_copied_labels("a.b/team,a-b/team").unwrap_err();
        assert!(error.contains("`a_b_team`"), "{error}");
        assert_eq!(parse_copied_labels(""), Ok(CopiedLabels::default()));
        assert_eq!(metric_name_of("9lives"), "_9lives");
    }

    #[test]
    fn only_the_named_labels_the_class_carries_are_copied() {
        let labels = parse_copied_labels("team,owner").unwrap();
        let class = class_with(&[("team", "payments"), ("env", "prod")]);
        assert_eq!(
            labels.of(&class),
            BTreeMap::from([("team".to_owned(), "payments".to_owned())])
        );
        assert_eq!(
            labels.metric_labels(&class),
            vec![("team".to_owned(), "payments".to_owned())]
        );
    }

    #[test]
    fn a_changed_or_removed_label_is_out_of_sync() {
        let labels = parse_copied_labels("team").unwrap();
        let class = class_with(&[("team", "payments")]);
        let held = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let managed = ("app.kubernetes.io/managed-by", "karpenter-health");
        assert!(labels.in_sync(Some(&held(&[managed, ("team", "payments")])), &class));
        assert!(!labels.in_sync(Some(&held(&[managed, ("team", "search")])), &class));
        assert!(!labels.in_sync(Some(&held(&[managed])), &class));
        assert!(!labels.in_sync(None, &class));
        let unlabeled = class_with(&[]);
        assert!(!labels.in_sync(Some(&held(&[("team", "payments")])), &unlabeled));
        assert!(labels.in_sync(Some(&held(&[managed])), &unlabeled));
    }
}
