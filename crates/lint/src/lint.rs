//! The functional core of lint: documents in, findings out. Pure: no IO, no clock.
//!
//! Each EC2NodeClass goes through the operator's own engine (`engine.rs`) with every
//! cluster-wide and AWS fact unknown (lint is offline), so whatever the engine proves `False` is
//! provable from the file alone; what the files decide together (`manifests.rs`: the class's
//! NodePools, the load balancer controller, Cilium) feeds only the two warnings made for it. What the engine cannot reach from one EC2NodeClass (NodePools whatever class they use,
//! Pod templates, aws-auth without the live node role) goes through the same pure helpers the
//! rules use.

use crate::documents::{self, Document, Object, Workload, line_of};
use crate::manifests::Manifests;
use crate::model::{Finding, Found, Options, Rule};
use karpenter_health_api::Reason;
use karpenter_health_api::karpenter::EC2NodeClass;
use karpenter_health_checks::arn::{self, IamArn};
use karpenter_health_checks::aws_auth::{AwsAuth, MAP_ROLES, MAP_USERS, RoleMapping};
use karpenter_health_checks::labels::{KeyContext, LabelRules};
use karpenter_health_checks::node_mapping;
use karpenter_health_checks::warnings::Warning;
use std::collections::BTreeSet;

/// The Fargate pod execution role's mapping: it names `system:node:{{SessionName}}` by design,
/// so it is a node mapping that is not a node role's.
const FARGATE_USERNAME: &str = "system:node:{{SessionName}}";

/// One input: its path as given and its text.
#[derive(Clone, Copy, Debug)]
pub struct Source<'a> {
    pub path: &'a str,
    pub text: &'a str,
}

/// Lints every document of every source; the result is sorted by path, line, document, rule.
pub fn lint(sources: &[Source<'_>], options: &Options) -> Vec<Finding> {
    let read: Vec<(&str, Vec<Document>)> = sources
        .iter()
        .map(|s| (s.path, documents::read_stream(s.text)))
        .collect();
    let node_classes: Vec<&EC2NodeClass> = read
        .iter()
        .flat_map(|(_, docs)| docs)
        .filter_map(|d| match &d.object {
            Object::NodeClass(nc) => Some(&**nc),
            _ => None,
        })
        .collect();
    let roles = Roles::new(options, &node_classes);
    let manifests = Manifests::of(read.iter().flat_map(|(_, docs)| docs));
    let mut findings = Vec::new();
    for (path, docs) in &read {
        for doc in docs {
            for (rule, message, line) in lint_document(doc, options, &roles, &manifests) {
                findings.push(Finding {
                    path: (*path).to_owned(),
                    // Parsers mark an error at the end of a value one line past it.
                    line: line.clamp(doc.first_line, doc.last_line().max(doc.first_line)),
                    document: doc.index,
                    rule,
                    message,
                });
            }
        }
    }
    findings.sort();
    findings.dedup();
    findings
}

fn lint_document(
    doc: &Document,
    options: &Options,
    roles: &Roles,
    manifests: &Manifests<'_>,
) -> Vec<Found> {
    match &doc.object {
        Object::Invalid { line, message } => {
            vec![(Rule::InvalidDocument, message.clone(), *line)]
        }
        Object::NodeClass(nc) => crate::engine::node_class(doc, nc, options, manifests),
        Object::NodePool(pool) => {
            let name = pool.metadata.name.as_deref().unwrap_or_default();
            let template = &pool.spec.template;
            let labels = template.metadata.labels.keys().map(|key| {
                let path = ["spec", "template", "metadata", "labels", key.as_str()];
                (key.as_str(), KeyContext::NodePoolLabel, line_of(doc, &path))
            });
            let requirements = template.spec.requirements.iter().enumerate().map(|(i, r)| {
                let i = i.to_string();
                let path = ["spec", "template", "spec", "requirements", &i, "key"];
                (r.key.as_str(), KeyContext::Requirement, line_of(doc, &path))
            });
            restricted_keys(labels.chain(requirements), options, |key, why, rules| {
                format!(
                    "NodePool {} uses {key} ({why}), which {rules} rejects, so it cannot create \
                     NodeClaims.",
                    clip(name)
                )
            })
        }
        Object::Workload(w) => workload(doc, w, options),
        Object::AwsAuth(data) => aws_auth_findings(doc, data.parsed(), roles),
        Object::NodeClaim(_) | Object::CiliumConfig(_) | Object::Other => Vec::new(),
    }
}

fn clip(s: &str) -> String {
    match s.char_indices().nth(128) {
        None => s.to_owned(),
        Some((at, _)) => format!("{}…", &s[..at]),
    }
}

/// The rule sets that may apply: the version's, or with no version both, of which a key is only
/// proven rejected when every one rejects it (as the LabelsAllowed rule decides).
fn label_rules(options: &Options) -> (Vec<LabelRules>, String) {
    match &options.karpenter_version {
        Some(v) => (vec![LabelRules::for_version(v)], format!("Karpenter {v}")),
        None => (
            vec![LabelRules::UpTo1_8, LabelRules::From1_9],
            "every Karpenter version".to_owned(),
        ),
    }
}

fn restricted_keys<'k>(
    uses: impl Iterator<Item = (&'k str, KeyContext, usize)>,
    options: &Options,
    message: impl Fn(&str, &str, &str) -> String,
) -> Vec<Found> {
    let (candidates, rules_name) = label_rules(options);
    uses.filter_map(|(key, context, line)| {
        let why = LabelRules::rejected_by_all(&candidates, key, context)?;
        Some((
            Rule::Reason(Reason::RestrictedLabelDomain),
            message(&clip(key), why, &rules_name),
            line,
        ))
    })
    .collect()
}

/// A Pod template's node selector and node affinity keys, which Karpenter copies into NodeClaim
/// requirements whatever the operator.
fn workload(doc: &Document, w: &Workload, options: &Options) -> Vec<Found> {
    let mut uses: Vec<(String, Vec<String>)> = Vec::new();
    let at = |rest: &[&str]| -> Vec<String> {
        w.pod_path
            .iter()
            .cloned()
            .chain(rest.iter().map(|s| (*s).to_owned()))
            .collect()
    };
    for key in w.pod.node_selector.iter().flat_map(|s| s.keys()) {
        uses.push((key.clone(), at(&["nodeSelector", key])));
    }
    let node_affinity = w
        .pod
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref());
    if let Some(na) = node_affinity {
        let required = na
            .required_during_scheduling_ignored_during_execution
            .iter()
            .flat_map(|r| r.node_selector_terms.iter().enumerate());
        for (t, term) in required {
            for (e, expr) in term.match_expressions.iter().flatten().enumerate() {
                let (t, e) = (t.to_string(), e.to_string());
                let path = at(&[
                    "affinity",
                    "nodeAffinity",
                    "requiredDuringSchedulingIgnoredDuringExecution",
                    "nodeSelectorTerms",
                    &t,
                    "matchExpressions",
                    &e,
                    "key",
                ]);
                uses.push((expr.key.clone(), path));
            }
        }
        let preferred = na
            .preferred_during_scheduling_ignored_during_execution
            .iter()
            .flatten()
            .enumerate();
        for (t, term) in preferred {
            for (e, expr) in term
                .preference
                .match_expressions
                .iter()
                .flatten()
                .enumerate()
            {
                let (t, e) = (t.to_string(), e.to_string());
                let path = at(&[
                    "affinity",
                    "nodeAffinity",
                    "preferredDuringSchedulingIgnoredDuringExecution",
                    &t,
                    "preference",
                    "matchExpressions",
                    &e,
                    "key",
                ]);
                uses.push((expr.key.clone(), path));
            }
        }
    }
    let with_lines = uses.iter().map(|(key, path)| {
        let line = doc.positions.line(path).unwrap_or(doc.first_line);
        (key.as_str(), KeyContext::Requirement, line)
    });
    restricted_keys(with_lines, options, |key, why, rules| {
        format!(
            "{} {} selects on {key} ({why}) in its Pod template, which {rules} rejects in \
             NodeClaim requirements, so Karpenter cannot provision nodes for its Pods.",
            w.kind,
            clip(&w.name)
        )
    })
}

/// A role given by name or by ARN.
#[derive(Clone, Debug)]
enum RoleRef {
    Arn(IamArn),
    Name(String),
}

impl RoleRef {
    fn new(given: &str) -> Self {
        match arn::parse_iam(given.trim()) {
            Ok(a) => RoleRef::Arn(a),
            Err(_) => RoleRef::Name(arn::name_of(given.trim()).to_owned()),
        }
    }

    fn matches(&self, mapped: &IamArn) -> bool {
        match self {
            RoleRef::Arn(a) => a.same_principal(mapped),
            RoleRef::Name(n) => {
                mapped.resource_type == "role" && mapped.name.eq_ignore_ascii_case(n)
            }
        }
    }

    fn shown(&self) -> String {
        match self {
            RoleRef::Arn(a) => a.without_path(),
            RoleRef::Name(n) => clip(n),
        }
    }
}

/// The roles aws-auth is judged against: the node roles named by the flags and the input's
/// EC2NodeClasses, and the controller's role.
#[derive(Debug)]
struct Roles {
    node: Vec<RoleRef>,
    controller: Option<RoleRef>,
}

impl Roles {
    fn new(options: &Options, node_classes: &[&EC2NodeClass]) -> Self {
        let mut seen = BTreeSet::new();
        let node = options
            .node_role
            .iter()
            .map(String::as_str)
            .chain(node_classes.iter().filter_map(|nc| nc.spec.role.as_deref()))
            .filter(|r| !r.trim().is_empty())
            .filter(|r| seen.insert(r.to_ascii_lowercase()))
            .map(RoleRef::new)
            .collect();
        Self {
            node,
            controller: options.controller_role.as_deref().map(RoleRef::new),
        }
    }
}

/// aws-auth judged as the NodeRoleMapped rule judges the node role's entry, for every entry that
/// admits nodes or names a known node role, plus the authenticator's skipped parts as warnings.
fn aws_auth_findings(doc: &Document, parsed: &AwsAuth, roles: &Roles) -> Vec<Found> {
    let lines = EntryLines::new(doc, parsed);
    let mut out = Vec::new();
    if let Some(e) = parsed.map_roles_unreadable() {
        out.push((
            Rule::Reason(Reason::AwsAuthMalformed),
            format!(
                "kube-system/aws-auth cannot be read ({e}), so the authenticator maps no role \
                 from it."
            ),
            lines.line(MAP_ROLES, None, e.line),
        ));
    }
    let entries = node_entry_findings(parsed, roles, &lines, &mut out);
    node_user_entry_findings(parsed, roles, &lines, &mut out);
    if let Some(found) = controller_instead_finding(parsed, roles, &lines, &entries.controller) {
        out.push(found);
    }
    out.extend(skipped_part_findings(parsed, &lines, &entries.reported));
    out
}

/// What the walk over `mapRoles` leaves for the findings after it.
struct NodeEntries<'p> {
    /// The controller role's entries that admit nodes.
    controller: Vec<&'p RoleMapping>,
    /// Entries whose problems an error finding already names.
    reported: BTreeSet<usize>,
}

/// The findings on each `mapRoles` entry that admits nodes or names a known node role (the
/// controller's own entries are set aside for [`controller_instead_finding`]).
fn node_entry_findings<'p>(
    parsed: &'p AwsAuth,
    roles: &Roles,
    lines: &EntryLines<'_>,
    out: &mut Vec<Found>,
) -> NodeEntries<'p> {
    let mut reported: BTreeSet<usize> = BTreeSet::new();
    let mut controller_entries = Vec::new();
    for entry in &parsed.map_roles {
        let Ok(mapped) = arn::parse_iam(&entry.rolearn) else {
            continue;
        };
        let is_node_mapping = node_mapping::is_node_mapping(entry);
        if roles
            .controller
            .as_ref()
            .is_some_and(|c| c.matches(&mapped))
        {
            if is_node_mapping {
                controller_entries.push(entry);
            }
            continue;
        }
        let known = roles.node.iter().any(|r| r.matches(&mapped));
        let fargate = entry.username.as_deref() == Some(FARGATE_USERNAME);
        if !(known || is_node_mapping && !fargate) {
            continue;
        }
        let line = lines.line(MAP_ROLES, Some(entry.entry), None);
        if mapped.has_path() {
            let (reason, message) = node_mapping::mapped_with_path(entry, &mapped);
            out.push((Rule::Reason(reason), message, line));
            continue;
        }
        // Only the last entry for an ARN counts; an earlier one is dead text.
        if parsed.role_in_force(&entry.rolearn).map(|e| e.entry) != Some(entry.entry) {
            continue;
        }
        if let Some(found) = in_force_entry_finding(parsed, MAP_ROLES, entry, line) {
            if found.0 == Rule::Reason(Reason::AwsAuthMalformed) {
                reported.insert(entry.entry);
            }
            out.push(found);
        }
    }
    NodeEntries {
        controller: controller_entries,
        reported,
    }
}

/// What the rule says of the entry in force for a node role (under `key`): its problem, else the
/// warning that it lacks system:bootstrappers, else nothing.
fn in_force_entry_finding(
    parsed: &AwsAuth,
    key: &'static str,
    entry: &RoleMapping,
    line: usize,
) -> Option<Found> {
    let shown = clip(&entry.rolearn);
    if let Some((reason, message)) = node_mapping::node_entry_problem(parsed, key, entry, &shown) {
        return Some((Rule::Reason(reason), message, line));
    }
    node_mapping::without_bootstrappers(key, entry, &shown).map(|message| {
        (
            Rule::Warning(Warning::NodeRoleMappingWithoutBootstrappers),
            message,
            line,
        )
    })
}

/// The findings on a known node role the authenticator finds only under `mapUsers` (it reads
/// users after roles, by the same ARN).
fn node_user_entry_findings(
    parsed: &AwsAuth,
    roles: &Roles,
    lines: &EntryLines<'_>,
    out: &mut Vec<Found>,
) {
    for user in &parsed.map_users {
        let Ok(mapped) = arn::parse_iam(&user.userarn) else {
            continue;
        };
        if mapped.has_path()
            || !roles.node.iter().any(|r| r.matches(&mapped))
            || parsed.role_in_force(&user.userarn).is_some()
            || parsed.users_in_force(&user.userarn).last().map(|u| u.entry) != Some(user.entry)
        {
            continue;
        }
        let entry = RoleMapping::from(user);
        let line = lines.line(MAP_USERS, Some(user.entry), None);
        out.extend(in_force_entry_finding(parsed, MAP_USERS, &entry, line));
    }
}

/// The controller role mapped as a node role, on its last such entry: as the rule, a mistake
/// when a node role goes unmapped (or none is known to be mapped).
fn controller_instead_finding(
    parsed: &AwsAuth,
    roles: &Roles,
    lines: &EntryLines<'_>,
    controller_entries: &[&RoleMapping],
) -> Option<Found> {
    let last = controller_entries.last()?;
    // Mapped by a mapRoles entry in force, or else by a mapUsers one, as the authenticator looks.
    let in_force = |r: &RoleRef| {
        parsed.map_roles.iter().any(|e| {
            arn::parse_iam(&e.rolearn).is_ok_and(|m| r.matches(&m) && !m.has_path())
                && parsed.role_in_force(&e.rolearn).map(|f| f.entry) == Some(e.entry)
        }) || parsed
            .map_users
            .iter()
            .any(|u| arn::parse_iam(&u.userarn).is_ok_and(|m| r.matches(&m) && !m.has_path()))
    };
    let unmapped: Vec<&RoleRef> = roles.node.iter().filter(|r| !in_force(r)).collect();
    if !roles.node.is_empty() && unmapped.is_empty() {
        return None;
    }
    let node_shown = match unmapped.first() {
        Some(r) => r.shown(),
        None => "the node role".to_owned(),
    };
    let (reason, message) =
        node_mapping::controller_mapped_instead(controller_entries, &node_shown);
    let line = lines.line(MAP_ROLES, Some(last.entry), None);
    Some((Rule::Reason(reason), message, line))
}

/// The authenticator's skipped parts as warnings, but for those an error finding already names
/// (all of an unreadable `mapRoles`, or an entry `reported`).
fn skipped_part_findings(
    parsed: &AwsAuth,
    lines: &EntryLines<'_>,
    reported: &BTreeSet<usize>,
) -> Vec<Found> {
    let mut out = Vec::new();
    for p in &parsed.problems {
        let whole_map_roles = p.key == MAP_ROLES && p.entry.is_none();
        let already = p.key == MAP_ROLES && p.entry.is_some_and(|e| reported.contains(&e));
        if whole_map_roles || already {
            continue;
        }
        out.push((
            Rule::Warning(Warning::AwsAuthUnparsable),
            format!("The authenticator skips part of kube-system/aws-auth: {p}."),
            lines.line(p.key, p.entry, p.line),
        ));
    }
    out
}

/// File lines inside aws-auth's `mapRoles`/`mapUsers`: exact for a literal block scalar (`|`),
/// whose lines are the string's lines one for one; the key's line otherwise.
struct EntryLines<'d> {
    doc: &'d Document,
    /// Line (within the value) of each entry, by key.
    map_roles: Vec<usize>,
    map_users: Vec<usize>,
}

impl<'d> EntryLines<'d> {
    fn new(doc: &'d Document, parsed: &AwsAuth) -> Self {
        // Only values the authenticator's parser read are indexed: that parser bounds size and
        // alias expansion, which the second parse then relies on.
        let readable = |key: &str| {
            !parsed
                .problems
                .iter()
                .any(|p| p.key == key && p.entry.is_none())
        };
        let items = |key: &str, value: Option<&str>| match value {
            Some(v) if readable(key) => documents::sequence_item_lines(v),
            _ => Vec::new(),
        };
        let (roles, users) = match &doc.object {
            Object::AwsAuth(data) => (data.map_roles.as_deref(), data.map_users.as_deref()),
            _ => (None, None),
        };
        Self {
            doc,
            map_roles: items(MAP_ROLES, roles),
            map_users: items(MAP_USERS, users),
        }
    }

    /// The line of `entry` (from 1) or of `line_in_value` (from 1) of `key`'s value.
    fn line(&self, key: &str, entry: Option<usize>, line_in_value: Option<usize>) -> usize {
        let key_line = line_of(self.doc, &["data", key]);
        let Some(raw) = self.doc.lines.get(key_line.saturating_sub(self.doc.offset)) else {
            return key_line;
        };
        let literal = raw
            .split_once(':')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('|'));
        if !literal {
            return key_line;
        }
        if let Some(l) = line_in_value {
            return key_line + l;
        }
        let items = if key == MAP_ROLES {
            &self.map_roles
        } else {
            &self.map_users
        };
        entry
            .and_then(|e| items.get(e.wrapping_sub(1)).copied())
            .map_or(key_line, |l| key_line + l)
    }
}
