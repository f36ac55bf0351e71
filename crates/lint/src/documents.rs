//! Splits a multi-document YAML stream into documents and reads each as the kind it claims, with
//! the line where it starts and the line of every field. Pure: no IO; input of any shape yields
//! documents (some of them [`Object::Invalid`]), never a panic.
//!
//! Each document is parsed on its own, so one broken document never hides the others: the stream
//! is cut at the `---` and `...` marker lines (YAML forbids those lines inside any content, so a
//! cut there is exact), keeping every line so positions stay those of the file.

use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{ConfigMap, Pod, PodSpec};
use karpenter_health_api::karpenter::{EC2NodeClass, NodeClaim, NodePool};
use karpenter_health_checks::facts::AwsAuthData;
use saphyr::{LoadableYamlNode, MarkedYaml, YamlData};
use serde::de::DeserializeOwned;
use std::collections::{BTreeMap, HashMap};

/// Position index nesting limit: deeper fields fall back to their ancestor's line. serde_norway
/// has already refused anything nested past its own limit before the index is built.
const MAX_INDEX_DEPTH: usize = 64;

/// One YAML document of a stream.
#[derive(Clone, Debug)]
pub struct Document {
    /// 0-based among the documents that hold anything but blanks and comments.
    pub index: usize,
    /// 1-based line of the document's first content line.
    pub first_line: usize,
    pub object: Object,
    /// 1-based line of each field, by path from the root (see [`Positions::line`]).
    pub positions: Positions,
    /// The document's lines, for the few checks that look at the source form (block scalars).
    pub lines: Vec<String>,
    /// File line of the document's first line in `lines`.
    pub offset: usize,
}

/// What a document turned out to be.
#[derive(Clone, Debug)]
pub enum Object {
    NodeClass(Box<EC2NodeClass>),
    NodePool(Box<NodePool>),
    NodeClaim(Box<NodeClaim>),
    /// `kube-system/aws-auth`'s `data`.
    AwsAuth(AwsAuthData),
    /// `kube-system/cilium-config`'s `data`: Cilium's settings.
    CiliumConfig(BTreeMap<String, String>),
    /// A Pod, or a workload with a Pod template.
    Workload(Box<Workload>),
    /// A kind lint does not read.
    Other,
    /// Not YAML, or not the kind it claims: where and why.
    Invalid {
        line: usize,
        message: String,
    },
}

/// A Pod template and where it sits in its document.
#[derive(Clone, Debug)]
pub struct Workload {
    pub kind: String,
    /// `namespace/name`, or `name` when the document names no namespace.
    pub name: String,
    pub pod: PodSpec,
    /// `spec.replicas` of the kinds that have it, as written.
    pub replicas: Option<i32>,
    /// Path of the Pod spec from the document root.
    pub pod_path: Vec<String>,
}

/// Field lines of one document: path (keys, and sequence indices as decimal text) to 1-based
/// file line of the key, or of the item.
#[derive(Clone, Debug, Default)]
pub struct Positions(HashMap<Vec<String>, usize>);

impl Positions {
    /// The line of `path`, else of its nearest ancestor that has one.
    pub fn line<S: AsRef<str>>(&self, path: &[S]) -> Option<usize> {
        (1..=path.len()).rev().find_map(|len| {
            let key: Vec<String> = path[..len].iter().map(|s| s.as_ref().to_owned()).collect();
            self.0.get(&key).copied()
        })
    }
}

/// Splits `text` and reads every document.
pub fn read_stream(text: &str) -> Vec<Document> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut documents = Vec::new();
    for (offset, lines) in split(text) {
        let Some(first) = lines.iter().position(|l| is_content(l)) else {
            continue;
        };
        let index = documents.len();
        documents.push(read_document(index, offset, offset + first, lines));
    }
    documents
}

/// Cuts the stream at marker lines. Each chunk keeps its marker line, blanked, so the marker's
/// own content (`--- {a: 1}`) stays at its column; returns (file line of the chunk's first line,
/// lines).
fn split(text: &str) -> Vec<(usize, Vec<String>)> {
    let mut chunks = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut start = 1;
    for (i, line) in text.lines().enumerate() {
        let marker = ["---", "..."].into_iter().find(|m| {
            line.strip_prefix(m)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with([' ', '\t']))
        });
        match marker {
            Some(m) => {
                chunks.push((start, std::mem::take(&mut current)));
                start = i + 1;
                // `...` ends a document and carries nothing; `---` may open one on its line.
                let rest = if m == "---" { &line[3..] } else { "" };
                current.push(format!("   {rest}"));
            }
            None => current.push(line.to_owned()),
        }
    }
    chunks.push((start, current));
    chunks
}

/// A line that is neither blank nor a comment (nor a directive, which belongs to the next
/// document's header).
fn is_content(line: &str) -> bool {
    let t = line.trim();
    !(t.is_empty() || t.starts_with('#') || line.starts_with('%'))
}

fn read_document(index: usize, offset: usize, first_line: usize, lines: Vec<String>) -> Document {
    // Directives are kept out: the cut already separated documents, and `%YAML` without its
    // `---` would be an error of the cut, not of the user's file.
    let text: String = lines
        .iter()
        .map(|l| if l.starts_with('%') { "" } else { l.as_str() })
        .collect::<Vec<_>>()
        .join("\n");
    let last_line = offset + lines.len().saturating_sub(1);
    let mut doc = Document {
        index,
        first_line,
        object: Object::Other,
        positions: Positions::default(),
        lines,
        offset,
    };
    // serde_norway first: it bounds nesting and alias expansion, which the position index
    // relies on, and its errors carry the line.
    let value: serde_yaml::Value = match serde_yaml::from_str(&text) {
        Ok(v) => v,
        Err(e) => {
            doc.object = invalid(&e, offset, first_line, "is not valid YAML");
            doc.object = clamp(doc.object, last_line);
            return doc;
        }
    };
    doc.positions = index_positions(&text, offset);
    doc.object = clamp(classify(&value, &text, offset, first_line), last_line);
    doc
}

/// An error at the end of the input is marked one line past it; the finding names the last line.
fn clamp(object: Object, last_line: usize) -> Object {
    match object {
        Object::Invalid { line, message } => Object::Invalid {
            line: line.min(last_line),
            message,
        },
        other => other,
    }
}

impl Document {
    /// The document's last line in the file.
    pub fn last_line(&self) -> usize {
        self.offset + self.lines.len().saturating_sub(1)
    }
}

/// What a parsed document is, by its `apiVersion` and `kind`: one of the Karpenter kinds, aws-auth,
/// a workload (whose Pod template lint reads), or anything else.
fn classify(value: &serde_yaml::Value, text: &str, offset: usize, first_line: usize) -> Object {
    let serde_yaml::Value::Mapping(map) = value else {
        return Object::Invalid {
            line: first_line,
            message: "the document is not a mapping, so it is no Kubernetes object".into(),
        };
    };
    let field = |k: &str| map.get(k).and_then(serde_yaml::Value::as_str).unwrap_or("");
    let (api_version, kind) = (field("apiVersion"), field("kind"));
    let typed = |what: &str| format!("does not read as a {what}");
    match (api_version, kind) {
        ("karpenter.k8s.aws/v1", "EC2NodeClass") => parse::<EC2NodeClass>(
            text,
            offset,
            first_line,
            &typed("karpenter.k8s.aws/v1 EC2NodeClass"),
        )
        .map_or_else(|e| e, |o| Object::NodeClass(Box::new(o))),
        ("karpenter.sh/v1", "NodePool") => {
            parse::<NodePool>(text, offset, first_line, &typed("karpenter.sh/v1 NodePool"))
                .map_or_else(|e| e, |o| Object::NodePool(Box::new(o)))
        }
        ("karpenter.sh/v1", "NodeClaim") => parse::<NodeClaim>(
            text,
            offset,
            first_line,
            &typed("karpenter.sh/v1 NodeClaim"),
        )
        .map_or_else(|e| e, |o| Object::NodeClaim(Box::new(o))),
        ("v1", "ConfigMap") => config_map(text, offset, first_line, &typed("v1 ConfigMap")),
        _ => workload_of_kind(api_version, kind, text, offset, first_line),
    }
}

/// A ConfigMap: aws-auth when it is kube-system's `aws-auth`, anything else otherwise.
fn config_map(text: &str, offset: usize, first_line: usize, unreadable: &str) -> Object {
    let cm = match parse::<ConfigMap>(text, offset, first_line, unreadable) {
        Ok(cm) => cm,
        Err(e) => return e,
    };
    // Rendered charts often leave the namespace to `kubectl apply -n`.
    let ns = cm.metadata.namespace.as_deref().unwrap_or("kube-system");
    let cilium = karpenter_health_checks::pod_template::CILIUM_CONFIG;
    if (ns, cm.metadata.name.as_deref().unwrap_or_default()) == cilium {
        return Object::CiliumConfig(cm.data.unwrap_or_default());
    }
    if cm.metadata.name.as_deref() != Some("aws-auth") || ns != "kube-system" {
        return Object::Other;
    }
    let data = cm.data.unwrap_or_default();
    Object::AwsAuth(AwsAuthData::new(
        data.get("mapRoles").cloned(),
        data.get("mapUsers").cloned(),
    ))
}

/// A workload kind with the path to its Pod template's spec, anything else otherwise.
fn workload_of_kind(
    api_version: &str,
    kind: &str,
    text: &str,
    offset: usize,
    first_line: usize,
) -> Object {
    match (api_version, kind) {
        ("v1", "Pod") => workload::<Pod>(text, offset, first_line, "Pod", &["spec"], |p| {
            (p.metadata, p.spec, None)
        }),
        ("apps/v1", "Deployment") => {
            workload::<Deployment>(text, offset, first_line, kind, TEMPLATE, |d| {
                let replicas = d.spec.as_ref().and_then(|s| s.replicas);
                (d.metadata, d.spec.and_then(|s| s.template.spec), replicas)
            })
        }
        ("apps/v1", "StatefulSet") => {
            workload::<StatefulSet>(text, offset, first_line, kind, TEMPLATE, |d| {
                let replicas = d.spec.as_ref().and_then(|s| s.replicas);
                (d.metadata, d.spec.and_then(|s| s.template.spec), replicas)
            })
        }
        ("apps/v1", "DaemonSet") => {
            workload::<DaemonSet>(text, offset, first_line, kind, TEMPLATE, |d| {
                (d.metadata, d.spec.and_then(|s| s.template.spec), None)
            })
        }
        ("apps/v1", "ReplicaSet") => {
            workload::<ReplicaSet>(text, offset, first_line, kind, TEMPLATE, |d| {
                let replicas = d.spec.as_ref().and_then(|s| s.replicas);
                (
                    d.metadata,
                    d.spec.and_then(|s| s.template.and_then(|t| t.spec)),
                    replicas,
                )
            })
        }
        ("batch/v1", "Job") => workload::<Job>(text, offset, first_line, kind, TEMPLATE, |d| {
            (d.metadata, d.spec.and_then(|s| s.template.spec), None)
        }),
        ("batch/v1", "CronJob") => workload::<CronJob>(
            text,
            offset,
            first_line,
            kind,
            &["spec", "jobTemplate", "spec", "template", "spec"],
            |d| {
                let pod = d
                    .spec
                    .and_then(|s| s.job_template.spec)
                    .and_then(|s| s.template.spec);
                (d.metadata, pod, None)
            },
        ),
        _ => Object::Other,
    }
}

const TEMPLATE: &[&str] = &["spec", "template", "spec"];

type Meta = k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

fn workload<T: DeserializeOwned>(
    text: &str,
    offset: usize,
    first_line: usize,
    kind: &str,
    pod_path: &[&str],
    pod_of: impl FnOnce(T) -> (Meta, Option<PodSpec>, Option<i32>),
) -> Object {
    let object = match parse::<T>(
        text,
        offset,
        first_line,
        &format!("does not read as a {kind}"),
    ) {
        Ok(o) => o,
        Err(e) => return e,
    };
    let (meta, pod, replicas) = pod_of(object);
    let Some(pod) = pod else {
        return Object::Other;
    };
    let name = meta.name.unwrap_or_default();
    Object::Workload(Box::new(Workload {
        kind: kind.to_owned(),
        name: match meta.namespace {
            Some(ns) => format!("{ns}/{name}"),
            None => name,
        },
        pod,
        replicas,
        pod_path: pod_path.iter().map(|s| (*s).to_owned()).collect(),
    }))
}

/// Reads the document as `T`; a wrong shape is an [`Object::Invalid`] at serde's position.
fn parse<T: DeserializeOwned>(
    text: &str,
    offset: usize,
    first_line: usize,
    what: &str,
) -> Result<T, Object> {
    serde_yaml::from_str(text).map_err(|e| invalid(&e, offset, first_line, what))
}

fn invalid(e: &serde_yaml::Error, offset: usize, first_line: usize, what: &str) -> Object {
    let line = e
        .location()
        .map(|l| offset + l.line().saturating_sub(1))
        .unwrap_or(first_line)
        .max(first_line);
    Object::Invalid {
        line,
        message: format!("the document {what}: {}", without_positions(&e.to_string())),
    }
}

/// serde_norway's message without its ` at line N column M` parts: those count from the
/// document's own start, while the finding carries the file's line.
fn without_positions(message: &str) -> String {
    const AT: &str = " at line ";
    let mut out = String::with_capacity(message.len());
    let mut rest = message;
    while let Some(at) = rest.find(AT) {
        out.push_str(&rest[..at]);
        let after = &rest[at + AT.len()..];
        let skip = after
            .char_indices()
            .find(|&(_, c)| !(c.is_ascii_digit() || c == ' ' || "column".contains(c)))
            .map_or(after.len(), |(i, _)| i);
        rest = &after[skip..];
    }
    out.push_str(rest);
    out
}

/// Builds the field-line index with saphyr's markers; a document saphyr cannot read (it and
/// serde_norway differ on a few corner cases) gets an empty index, so its findings fall back to
/// the document's first line.
fn index_positions(text: &str, offset: usize) -> Positions {
    let mut positions = Positions::default();
    if let Ok(docs) = MarkedYaml::load_from_str(text)
        && let Some(root) = docs.first()
    {
        let mut path = Vec::new();
        walk(root, &mut path, offset, &mut positions.0);
    }
    positions
}

fn walk(
    node: &MarkedYaml<'_>,
    path: &mut Vec<String>,
    offset: usize,
    out: &mut HashMap<Vec<String>, usize>,
) {
    if path.len() >= MAX_INDEX_DEPTH {
        return;
    }
    let file_line = |line: usize| offset + line.saturating_sub(1);
    match &node.data {
        YamlData::Mapping(map) => {
            for (k, v) in map {
                let Some(key) = scalar_text(k) else { continue };
                path.push(key);
                out.insert(path.clone(), file_line(k.span.start.line()));
                walk(v, path, offset, out);
                path.pop();
            }
        }
        YamlData::Sequence(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(i.to_string());
                out.insert(path.clone(), file_line(item.span.start.line()));
                walk(item, path, offset, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// A mapping key as text: strings as they are, other scalars (`1`, `true`) as written.
fn scalar_text(node: &MarkedYaml<'_>) -> Option<String> {
    match &node.data {
        YamlData::Value(v) => v
            .as_str()
            .map(str::to_owned)
            .or_else(|| Some(format!("{v:?}"))),
        YamlData::Representation(s, _, _) => Some(s.to_string()),
        _ => None,
    }
}

/// 1-based lines (within `text`) of the items of the YAML sequence `text` holds; empty when it
/// is no sequence. Used for the entries inside aws-auth's `mapRoles` string.
pub fn sequence_item_lines(text: &str) -> Vec<usize> {
    match MarkedYaml::load_from_str(text) {
        Ok(docs) => match docs.first().map(|d| &d.data) {
            Some(YamlData::Sequence(items)) => items.iter().map(|i| i.span.start.line()).collect(),
            _ => Vec::new(),
        },
        Err(_) => Vec::new(),
    }
}

/// The line of `path` in `doc`, else the document's first line.
pub(crate) fn line_of(doc: &Document, path: &[&str]) -> usize {
    doc.positions.line(path).unwrap_or(doc.first_line)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn documents_are_cut_at_markers_and_counted_without_empty_ones() {
        let docs = read_stream(
            "---\n# only a comment\n---\na: 1\n--- {b: 2}\n...\n%YAML 1.2\n---\nc: [\n",
        );
        let summary: Vec<(usize, usize)> = docs.iter().map(|d| (d.index, d.first_line)).collect();
        assert_eq!(summary, vec![(0, 4), (1, 5), (2, 9)]);
        assert!(matches!(docs[2].object, Object::Invalid { .. }));
        assert_eq!(docs[0].positions.line(&["a"]), Some(4));
        assert_eq!(docs[1].positions.line(&["b"]), Some(5));
    }

    fn fragment() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("---".to_owned()),
            Just("...".to_owned()),
            Just("apiVersion: karpenter.k8s.aws/v1\nkind: EC2NodeClass".to_owned()),
            Just("apiVersion: karpenter.sh/v1\nkind: NodePool".to_owned()),
            Just("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: aws-auth}".to_owned()),
            Just("apiVersion: apps/v1\nkind: Deployment".to_owned()),
            Just("spec:\n  role: arn:aws:iam::1:role/x\n  instanceProfile: a b".to_owned()),
            Just("spec: {template: {metadata: {labels: {karpenter.sh/x: y}}}}".to_owned()),
            Just(
                "data:\n  mapRoles: |\n    - rolearn: arn:aws:iam::1:role/p/n\n      groups: x"
                    .to_owned()
            ),
            Just("spec: 5".to_owned()),
            Just("a: &x [*x]".to_owned()),
            Just("  - [".to_owned()),
            "[ -~\t]{0,20}",
            any::<String>(),
        ]
    }

    proptest! {
        /// Whatever the text, reading never panics and every position is inside the input.
        #[test]
        fn any_stream_reads_without_panic_and_positions_stay_in_the_input(
            parts in proptest::collection::vec(fragment(), 0..12)
        ) {
            let text = parts.join("\n");
            let lines = text.lines().count().max(1);
            for doc in read_stream(&text) {
                prop_assert!(doc.first_line >= 1 && doc.first_line <= lines);
                if let Object::Invalid { line, .. } = doc.object {
                    prop_assert!(line >= 1 && line <= lines, "{line} > {lines}");
                }
            }
            let options = crate::Options {
                karpenter_version: Some(semver::Version::new(1, 6, 0)),
                region: Some("us-iso-east-1".into()),
                node_role: Some("n".into()),
                controller_role: Some("arn:aws:iam::1:role/c".into()),
            };
            let sources = [crate::Source { path: "-", text: &text }];
            for f in crate::lint::lint(&sources, &options) {
                prop_assert!(f.line >= 1 && f.line <= lines, "{f:?} outside {lines} lines");
            }
        }

        /// Mutations of a real multi-document file: cut, duplicated or corrupted bytes.
        #[test]
        fn mutated_fixtures_read_without_panic(
            cut in 0usize..4000, at in 0usize..4000, byte in any::<u8>()
        ) {
            let base = include_str!("../tests/fixtures/helm/rendered.yaml");
            let mut bytes = base.as_bytes().to_vec();
            bytes.truncate(cut.max(1).min(bytes.len()));
            if !bytes.is_empty() {
                let i = at % bytes.len();
                bytes[i] = byte;
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            let lines = text.lines().count().max(1);
            let sources = [crate::Source { path: "-", text: &text }];
            for f in crate::lint::lint(&sources, &crate::Options::default()) {
                prop_assert!(f.line >= 1 && f.line <= lines, "{f:?} outside {lines} lines");
            }
        }
    }
}
