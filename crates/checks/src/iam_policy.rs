//! A local IAM policy evaluator with a third answer: it decides whether policy documents allow
//! one request, and says `Undecided` (with why) wherever AWS would need facts it does not have.
//! Pure: no IO, never panics, whatever the documents.
//!
//! Used where IAM's own simulator (`iam:SimulatePrincipalPolicy`) cannot be asked: the controller
//! role's identity policies and permissions boundary, trust policies (a federated or service
//! principal assuming a role) and SQS queue policies. It follows IAM's evaluation logic for one
//! account (docs: "Policy evaluation logic"): an explicit `Deny` wins, else an `Allow` allows,
//! else the request is implicitly denied. Matching is IAM's: actions case-insensitively with `*`
//! and `?`, resources and `StringLike` case-sensitively with `*` and `?`, ARN operators component
//! by component, condition keys case-insensitively; `NotAction`, `NotResource` and `NotPrincipal`
//! invert their lists. The condition operators, with IAM's rules for absent keys, `IfExists`,
//! `Null` and the set operators, are in the `conditions` module.
//!
//! What it cannot know, it does not guess: a condition on a key the [`RequestContext`] does not
//! know, an operator it does not implement (numeric, date, IP address, binary), or a policy
//! variable (`${aws:username}`) makes its statement "maybe", and a maybe that could change the
//! outcome makes the answer [`Decision::Undecided`]. Crates that evaluate IAM policies in Rust
//! treat such a statement as not matching (a silent implicit deny, a false alarm here) or only
//! model the grammar, so this small evaluator is the project's own.

mod conditions;
pub mod sharing;

use conditions::condition_matches;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// A parsed policy document.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Policy {
    pub statements: Vec<Statement>,
}

/// One statement of a policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Statement {
    pub sid: Option<String>,
    pub allow: bool,
    /// `Action`, or with `not_action` the actions `NotAction` excludes.
    pub actions: Vec<String>,
    pub not_action: bool,
    /// `None`: no `Resource`/`NotResource` element (trust policies have none).
    pub resources: Option<Vec<String>>,
    pub not_resource: bool,
    /// `None`: no `Principal`/`NotPrincipal` (identity policies).
    pub principals: Option<Principals>,
    pub not_principal: bool,
    /// `operator -> key -> values`, as written.
    pub conditions: Vec<ConditionEntry>,
}

/// The principals a statement names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Principals {
    /// `"Principal": "*"` (or `{"AWS": "*"}`).
    pub everyone: bool,
    pub aws: Vec<String>,
    pub services: Vec<String>,
    pub federated: Vec<String>,
}

/// One `operator: {key: values}` pair of a `Condition` block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConditionEntry {
    pub operator: String,
    pub key: String,
    pub values: Vec<String>,
}

/// Why a document could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicyError(pub String);

impl fmt::Display for PolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolicyError {}

/// Parses a policy document: plain JSON, or percent-encoded JSON as IAM returns documents.
pub fn parse(document: &str) -> Result<Policy, PolicyError> {
    let trimmed = document.trim();
    let decoded;
    let text = if trimmed.starts_with('{') {
        trimmed
    } else {
        decoded = percent_encoding::percent_decode_str(trimmed)
            .decode_utf8()
            .map_err(|e| PolicyError(format!("percent-decoding gave invalid UTF-8: {e}")))?;
        &decoded
    };
    let value: Value =
        serde_json::from_str(text).map_err(|e| PolicyError(format!("invalid JSON: {e}")))?;
    from_value(&value)
}

fn from_value(value: &Value) -> Result<Policy, PolicyError> {
    let statements: Vec<&Value> = match value.get("Statement") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(single @ Value::Object(_)) => vec![single],
        Some(_) => {
            return Err(PolicyError(
                "Statement is neither an object nor a list".into(),
            ));
        }
        None => return Err(PolicyError("the document has no Statement".into())),
    };
    let statements = statements
        .into_iter()
        .map(statement)
        .collect::<Result<_, _>>()?;
    Ok(Policy { statements })
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Bool(b) => vec![b.to_string()],
        Value::Number(n) => vec![n.to_string()],
        Value::Array(list) => list.iter().flat_map(strings).collect(),
        _ => Vec::new(),
    }
}

fn principals(value: &Value) -> Principals {
    match value {
        Value::String(s) => Principals {
            everyone: s == "*",
            ..Principals::default()
        },
        Value::Object(map) => {
            let get = |k: &str| map.get(k).map(strings).unwrap_or_default();
            let aws = get("AWS");
            Principals {
                everyone: aws.iter().any(|a| a == "*"),
                aws,
                services: get("Service"),
                federated: get("Federated"),
            }
        }
        _ => Principals::default(),
    }
}

fn statement(value: &Value) -> Result<Statement, PolicyError> {
    let allow = match value.get("Effect").and_then(Value::as_str) {
        Some("Allow") => true,
        Some("Deny") => false,
        other => {
            return Err(PolicyError(format!(
                "a statement's Effect is {other:?}, not \"Allow\" or \"Deny\""
            )));
        }
    };
    let (actions, not_action) = match (value.get("Action"), value.get("NotAction")) {
        (Some(a), _) => (strings(a), false),
        (None, Some(a)) => (strings(a), true),
        (None, None) => (Vec::new(), false),
    };
    let (resources, not_resource) = match (value.get("Resource"), value.get("NotResource")) {
        (Some(r), _) => (Some(strings(r)), false),
        (None, Some(r)) => (Some(strings(r)), true),
        (None, None) => (None, false),
    };
    let (principals, not_principal) = match (value.get("Principal"), value.get("NotPrincipal")) {
        (Some(p), _) => (Some(principals(p)), false),
        (None, Some(p)) => (Some(principals(p)), true),
        (None, None) => (None, false),
    };
    let mut conditions = Vec::new();
    match value.get("Condition") {
        None | Some(Value::Null) => {}
        Some(Value::Object(block)) => {
            for (operator, keys) in block {
                let Value::Object(keys) = keys else {
                    return Err(PolicyError(format!(
                        "condition operator {operator} does not hold a key map"
                    )));
                };
                for (key, values) in keys {
                    conditions.push(ConditionEntry {
                        operator: operator.clone(),
                        key: key.clone(),
                        values: strings(values),
                    });
                }
            }
        }
        Some(_) => return Err(PolicyError("Condition is not an object".into())),
    }
    Ok(Statement {
        sid: value.get("Sid").and_then(Value::as_str).map(str::to_owned),
        allow,
        actions,
        not_action,
        resources,
        not_resource,
        principals,
        not_principal,
        conditions,
    })
}

/// The principal making a request, for resource and trust policies.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Principal {
    /// An AWS service, e.g. `events.amazonaws.com`.
    Service(String),
    /// A federated identity provider's ARN (IRSA's OIDC provider).
    Federated(String),
    /// An IAM principal's ARN.
    Aws(String),
}

/// What is known about a request's condition keys.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestContext {
    /// Known keys (lower-cased) with the key as given and its values.
    values: BTreeMap<String, (String, Vec<String>)>,
    /// Lower-cased key prefixes under which every key not in `values` is known to be absent
    /// (e.g. `aws:requesttag/` when the full tag set of the request is known).
    absent_prefixes: Vec<String>,
    /// Lower-cased keys known to be absent.
    absent: Vec<String>,
}

impl RequestContext {
    pub fn new() -> Self {
        Self::default()
    }

    /// `key` has `values` in this request.
    pub fn with(mut self, key: &str, values: &[&str]) -> Self {
        self.values.insert(
            key.to_ascii_lowercase(),
            (
                key.to_owned(),
                values.iter().map(|v| (*v).to_owned()).collect(),
            ),
        );
        self
    }

    /// `key` has the one value `value`.
    pub fn with_value(self, key: &str, value: &str) -> Self {
        self.with(key, &[value])
    }

    /// Every key starting with `prefix` that was not given is absent from the request.
    pub fn all_given_under(mut self, prefix: &str) -> Self {
        self.absent_prefixes.push(prefix.to_ascii_lowercase());
        self
    }

    /// `key` is absent from the request.
    pub fn without(mut self, key: &str) -> Self {
        self.absent.push(key.to_ascii_lowercase());
        self
    }

    /// Every key with a value, as given, for IAM's simulator.
    pub fn entries(&self) -> impl Iterator<Item = (&str, &[String])> {
        self.values
            .values()
            .map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    fn lookup(&self, key: &str) -> Lookup<'_> {
        let key = key.to_ascii_lowercase();
        if let Some((_, values)) = self.values.get(&key) {
            return Lookup::Values(values);
        }
        if self.absent.contains(&key) || self.absent_prefixes.iter().any(|p| key.starts_with(p)) {
            Lookup::Absent
        } else {
            Lookup::Unknown
        }
    }
}

enum Lookup<'a> {
    Values(&'a [String]),
    Absent,
    Unknown,
}

/// One request to decide.
#[derive(Clone, Copy, Debug)]
pub struct Request<'a> {
    /// `None` for identity policies (their statements name no principal).
    pub principal: Option<&'a Principal>,
    pub action: &'a str,
    pub resource: &'a str,
    pub context: &'a RequestContext,
}

/// A policy with the name messages use for it (`inline policy X`, a managed policy's ARN).
#[derive(Clone, Copy, Debug)]
pub struct Named<'a> {
    pub name: &'a str,
    pub policy: &'a Policy,
}

/// Where a statement matched: policy name and statement id (or position).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StatementRef {
    pub policy: String,
    pub statement: String,
}

impl fmt::Display for StatementRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.policy, self.statement)
    }
}

/// The answer for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// An `Allow` statement matches and no `Deny` could.
    Allowed(Vec<StatementRef>),
    /// A `Deny` statement matches.
    ExplicitDeny(Vec<StatementRef>),
    /// Nothing allows it: proven, since no statement with an unknown outcome could.
    ImplicitDeny,
    /// A statement whose outcome is unknown could change the answer; the reasons name why.
    Undecided(Vec<String>),
}

impl Decision {
    pub fn is_allowed(&self) -> bool {
        matches!(self, Decision::Allowed(_))
    }
}

/// Three-valued match.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Tri {
    Yes,
    No,
    /// Unknown, with why.
    Maybe(String),
}

impl Tri {
    fn and(self, other: impl FnOnce() -> Tri) -> Tri {
        match self {
            Tri::No => Tri::No,
            Tri::Yes => other(),
            Tri::Maybe(why) => match other() {
                Tri::No => Tri::No,
                _ => Tri::Maybe(why),
            },
        }
    }

    fn from_bool(b: bool) -> Tri {
        if b { Tri::Yes } else { Tri::No }
    }
}

/// Decides `request` against `policies` (all of one kind: identity policies, or one resource
/// or trust policy).
pub fn evaluate(policies: &[Named<'_>], request: &Request<'_>) -> Decision {
    let mut allows = Vec::new();
    let mut denies = Vec::new();
    let mut maybe_allow = Vec::new();
    let mut maybe_deny = Vec::new();
    for named in policies {
        for (i, statement) in named.policy.statements.iter().enumerate() {
            let at = || StatementRef {
                policy: named.name.to_owned(),
                statement: statement
                    .sid
                    .clone()
                    .filter(|s| !s.is_empty())
                    .unwrap_or_else(|| format!("statement {}", i + 1)),
            };
            match statement_matches(statement, request) {
                Tri::No => {}
                Tri::Yes if statement.allow => allows.push(at()),
                Tri::Yes => denies.push(at()),
                Tri::Maybe(why) if statement.allow => maybe_allow.push(format!("{}: {why}", at())),
                Tri::Maybe(why) => maybe_deny.push(format!("{}: {why}", at())),
            }
        }
    }
    if !denies.is_empty() {
        Decision::ExplicitDeny(denies)
    } else if !allows.is_empty() {
        if maybe_deny.is_empty() {
            Decision::Allowed(allows)
        } else {
            Decision::Undecided(maybe_deny)
        }
    } else if !maybe_allow.is_empty() {
        Decision::Undecided(maybe_allow)
    } else {
        Decision::ImplicitDeny
    }
}

fn statement_matches(s: &Statement, r: &Request<'_>) -> Tri {
    let listed = s.actions.iter().any(|a| action_matches(a, r.action));
    if listed == s.not_action {
        return Tri::No;
    }
    resource_match(s, r.resource)
        .and(|| principal_match(s, r.principal))
        .and(|| conditions_match(&s.conditions, r.context))
}

/// IAM action matching: case-insensitive, `*` and `?` wildcards.
pub fn action_matches(pattern: &str, action: &str) -> bool {
    crate::glob_match(&pattern.to_ascii_lowercase(), &action.to_ascii_lowercase())
}

/// Whether a pattern uses a policy variable other than the escapes `${*}`, `${?}`, `${$}`.
fn has_variable(pattern: &str) -> bool {
    let stripped = pattern
        .replace("${*}", "")
        .replace("${?}", "")
        .replace("${$}", "");
    stripped.contains("${")
}

/// `${*}`, `${?}`, `${$}` stand for the literal characters.
fn unescape(pattern: &str) -> String {
    pattern
        .replace("${*}", "\u{1}")
        .replace("${?}", "\u{2}")
        .replace("${$}", "$")
}

/// Glob with IAM's escapes: an escaped `*` or `?` matches only itself.
fn like(pattern: &str, text: &str) -> bool {
    if !pattern.contains("${") {
        return crate::glob_match(pattern, text);
    }
    let p = unescape(pattern);
    // The escaped characters become placeholders that only match themselves.
    let t = text.replace('*', "\u{1}").replace('?', "\u{2}");
    crate::glob_match(&p, &t)
}

fn resource_match(s: &Statement, resource: &str) -> Tri {
    let Some(patterns) = &s.resources else {
        return Tri::Yes;
    };
    let mut maybe = None;
    let mut listed = false;
    for p in patterns {
        if has_variable(p) {
            maybe = Some(format!("resource {p} uses a policy variable"));
        } else if like(p, resource) {
            listed = true;
        }
    }
    match (listed, maybe) {
        (true, _) => Tri::from_bool(!s.not_resource),
        (false, Some(why)) => Tri::Maybe(why),
        (false, None) => Tri::from_bool(s.not_resource),
    }
}

fn principal_match(s: &Statement, principal: Option<&Principal>) -> Tri {
    let (Some(listed), Some(principal)) = (&s.principals, principal) else {
        // Identity policies name no principal; a principal-less request (identity evaluation)
        // ignores the element.
        return Tri::Yes;
    };
    let named = listed.everyone
        || match principal {
            Principal::Service(svc) => listed.services.iter().any(|s| s.eq_ignore_ascii_case(svc)),
            Principal::Federated(arn) => listed.federated.iter().any(|f| f == arn),
            Principal::Aws(arn) => listed.aws.iter().any(|a| a == arn),
        };
    Tri::from_bool(named != s.not_principal)
}

fn conditions_match(conditions: &[ConditionEntry], context: &RequestContext) -> Tri {
    let mut result = Tri::Yes;
    for c in conditions {
        let this = condition_matches(c, context);
        result = result.and(|| this);
        if result == Tri::No {
            return Tri::No;
        }
    }
    result
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod properties;

#[cfg(test)]
mod operator_tests;

#[cfg(test)]
mod arn_bool_null_tests;
