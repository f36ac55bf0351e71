//! The fault proxy simulator's own reading of IAM policies and decision of one request, written
//! from AWS's documentation (IAM User Guide, "Policy evaluation logic" and "IAM JSON policy
//! elements"), independent of the product's evaluator so a bug there cannot pass its own
//! end-to-end tests. Deliberately simple: what it does not emulate it refuses to read, rather
//! than guess. Pure, no IO.

use super::condition::{self, Condition, Context, glob};
use serde_json::Value;
use std::collections::BTreeMap;

/// One policy document, named as IAM's simulator names it in `MatchedStatements`.
#[derive(Clone, Debug)]
pub(super) struct Policy {
    /// `SourcePolicyId`: the inline policy's name, the managed policy's ARN, ...
    pub(super) id: String,
    /// `SourcePolicyType` (`role`, `user-managed`, `aws-managed`); `None` leaves it out.
    pub(super) kind: Option<&'static str>,
    statements: Vec<Statement>,
}

#[derive(Clone, Debug)]
struct Statement {
    deny: bool,
    actions: Names,
    resources: Names,
    /// All must hold.
    conditions: Vec<Condition>,
}

/// `Action`/`NotAction` or `Resource`/`NotResource`.
#[derive(Clone, Debug)]
struct Names {
    /// The `Not` form: the statement applies to everything the patterns do not match.
    not: bool,
    patterns: Vec<String>,
}

impl Names {
    /// Actions compare without case, resources with (the IAM User Guide, "Action" and
    /// "Resource" elements); both take `*` and `?` over the whole string.
    fn cover(&self, name: &str, ignore_case: bool) -> bool {
        let hit = self.patterns.iter().any(|p| {
            if ignore_case {
                glob(&p.to_lowercase(), &name.to_lowercase())
            } else {
                glob(p, name)
            }
        });
        hit != self.not
    }
}

/// Reads the JSON `document` of the policy `id`. Fails on what this simulator does not emulate
/// (an unknown condition operator, policy variables) or IAM would not accept.
pub(super) fn parse(
    id: &str,
    kind: Option<&'static str>,
    document: &str,
) -> Result<Policy, String> {
    let json: Value =
        serde_json::from_str(document).map_err(|e| format!("policy {id} is not JSON: {e}"))?;
    let statements = match json.get("Statement") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(one @ Value::Object(_)) => vec![one],
        _ => return Err(format!("policy {id} has no Statement")),
    };
    let statements = statements
        .into_iter()
        .map(statement)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("policy {id}: {e}"))?;
    Ok(Policy {
        id: id.to_owned(),
        kind,
        statements,
    })
}

fn statement(s: &Value) -> Result<Statement, String> {
    let deny = match s.get("Effect").and_then(Value::as_str) {
        Some("Allow") => false,
        Some("Deny") => true,
        other => return Err(format!("Effect {other:?} is neither Allow nor Deny")),
    };
    let actions = names(s, "Action", "NotAction")?;
    let resources = names(s, "Resource", "NotResource")?;
    if resources.patterns.iter().any(|r| r.contains("${")) {
        return Err(
            "policy variables in Resource are not emulated by the fault proxy's \
                    simulator"
                .into(),
        );
    }
    let conditions = match s.get("Condition") {
        None => Vec::new(),
        Some(Value::Object(block)) => condition::parse_block(block)?,
        Some(other) => return Err(format!("Condition {other} is not an object")),
    };
    Ok(Statement {
        deny,
        actions,
        resources,
        conditions,
    })
}

fn names(s: &Value, element: &str, not_element: &str) -> Result<Names, String> {
    let (not, value) = match (s.get(element), s.get(not_element)) {
        (Some(v), None) => (false, v),
        (None, Some(v)) => (true, v),
        (Some(_), Some(_)) => return Err(format!("both {element} and {not_element}")),
        (None, None) => return Err(format!("neither {element} nor {not_element}")),
    };
    Ok(Names {
        not,
        patterns: condition::strings(value, element)?,
    })
}

/// The policies that apply to the principal.
#[derive(Clone, Debug, Default)]
pub(super) struct Policies {
    /// Inline and attached managed policies.
    pub(super) identity: Vec<Policy>,
    pub(super) boundary: Option<Policy>,
    /// Service control policies; none: the account is not in an organization.
    pub(super) service_control: Vec<Policy>,
}

/// One request: an action on a resource in a context.
#[derive(Clone, Copy, Debug)]
pub(super) struct Request<'a> {
    pub(super) action: &'a str,
    pub(super) resource: &'a str,
    pub(super) context: &'a Context,
}

/// `EvalDecision`, ordered from the most to the least permissive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Decision {
    Allowed,
    ImplicitDeny,
    ExplicitDeny,
}

impl Decision {
    /// As the IAM API writes it.
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Decision::Allowed => "allowed",
            Decision::ImplicitDeny => "implicitDeny",
            Decision::ExplicitDeny => "explicitDeny",
        }
    }
}

/// A policy whose statements decided: `SourcePolicyId` and `SourcePolicyType`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Matched {
    pub(super) id: String,
    pub(super) kind: Option<&'static str>,
}

/// The simulator's answer for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Outcome {
    pub(super) decision: Decision,
    /// The policies whose statements decided: the denying ones for `explicitDeny`, the allowing
    /// identity policies for `allowed`, none for `implicitDeny`; one each, in policy order.
    pub(super) matched: Vec<Matched>,
    /// The condition keys of the statements that apply to the action and resource that the
    /// request did not give; each once and sorted, both without case, as first spelled.
    pub(super) missing: Vec<String>,
    /// `None`: the principal has no permissions boundary.
    pub(super) allowed_by_boundary: Option<bool>,
    /// `None`: no service control policies.
    pub(super) allowed_by_organizations: Option<bool>,
}

/// What one set of policies says about a request.
#[derive(Default)]
struct Verdict {
    allows: Vec<Matched>,
    denies: Vec<Matched>,
}

impl Verdict {
    /// An allow and no explicit deny.
    fn allows(&self) -> bool {
        self.denies.is_empty() && !self.allows.is_empty()
    }
}

/// The statements of `policies` that apply to the request and whose conditions hold, noting in
/// `missing` (lowercased key: key) the condition keys of applying statements the request lacks.
fn judge(
    policies: &[Policy],
    request: &Request<'_>,
    missing: &mut BTreeMap<String, String>,
) -> Verdict {
    let mut verdict = Verdict::default();
    for policy in policies {
        for s in &policy.statements {
            if !s.actions.cover(request.action, true) || !s.resources.cover(request.resource, false)
            {
                continue;
            }
            for c in &s.conditions {
                if request.context.get(c.key()).is_none() {
                    missing
                        .entry(c.key().to_lowercase())
                        .or_insert_with(|| c.key().to_owned());
                }
            }
            if !s.conditions.iter().all(|c| c.holds(request.context)) {
                continue;
            }
            let list = if s.deny {
                &mut verdict.denies
            } else {
                &mut verdict.allows
            };
            if !list.iter().any(|m| m.id == policy.id) {
                list.push(Matched {
                    id: policy.id.clone(),
                    kind: policy.kind,
                });
            }
        }
    }
    verdict
}

/// The decision of IAM's policy evaluation logic for one principal's request within its own
/// account: an explicit deny in any policy denies; otherwise an identity policy must allow,
/// and so must the permissions boundary if there is one, and the service control policies if
/// there are any; otherwise the request is implicitly denied.
///
/// Simplification: the service control policies are one level of the organization (as if all
/// were attached to the account): none may deny and at least one must allow. IAM asks this of
/// every level from the root down to the account.
pub(super) fn evaluate(policies: &Policies, request: &Request<'_>) -> Outcome {
    let mut missing = BTreeMap::new();
    let identity = judge(&policies.identity, request, &mut missing);
    let boundary = policies
        .boundary
        .as_ref()
        .map(|b| judge(std::slice::from_ref(b), request, &mut missing));
    let organizations = (!policies.service_control.is_empty())
        .then(|| judge(&policies.service_control, request, &mut missing));
    let allowed_by_boundary = boundary.as_ref().map(Verdict::allows);
    let allowed_by_organizations = organizations.as_ref().map(Verdict::allows);
    let denies: Vec<Matched> = [Some(&identity), boundary.as_ref(), organizations.as_ref()]
        .into_iter()
        .flatten()
        .flat_map(|v| v.denies.iter().cloned())
        .collect();
    let (decision, matched) = if !denies.is_empty() {
        (Decision::ExplicitDeny, denies)
    } else if !identity.allows.is_empty()
        && allowed_by_boundary != Some(false)
        && allowed_by_organizations != Some(false)
    {
        (Decision::Allowed, identity.allows)
    } else {
        (Decision::ImplicitDeny, Vec::new())
    };
    Outcome {
        decision,
        matched,
        missing: missing.into_values().collect(),
        allowed_by_boundary,
        allowed_by_organizations,
    }
}
