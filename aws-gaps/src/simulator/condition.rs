//! The `Condition` element of IAM policies as the IAM User Guide documents it ("IAM JSON policy
//! elements: Condition operators", "Set operators for multivalued context keys"), the `*`/`?`
//! wildcard match, and the request context conditions read. Written for the fault proxy's
//! simulator, independent of the product's own evaluator. Pure, no IO.

use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The request context: the request's `ContextEntries`, keys compared case-insensitively (the
/// IAM User Guide: condition key names are not case-sensitive).
#[derive(Clone, Debug, Default)]
pub(super) struct Context {
    /// Lowercased key: its values. A key given with no values is given (and empty).
    values: BTreeMap<String, Vec<String>>,
}

impl Context {
    /// The context with `key` given as `values` (replacing what it had).
    #[cfg(test)]
    pub(super) fn with(mut self, key: &str, values: &[&str]) -> Self {
        self.insert(key, values.iter().map(|v| (*v).to_owned()).collect());
        self
    }

    pub(super) fn insert(&mut self, key: &str, values: Vec<String>) {
        self.values.insert(key.to_lowercase(), values);
    }

    /// The values of `key`, `None` if the request did not give it.
    pub(super) fn get(&self, key: &str) -> Option<&[String]> {
        self.values.get(&key.to_lowercase()).map(Vec::as_slice)
    }
}

/// How a value of the request is compared with a value of the policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    /// `StringEquals`: exact, case-sensitive.
    StringEquals,
    /// `StringEqualsIgnoreCase`.
    StringEqualsIgnoreCase,
    /// `StringLike`: case-sensitive, `*` and `?` in the policy value.
    StringLike,
    /// `ArnEquals` and `ArnLike`, which the User Guide documents alike: each of the six
    /// colon-delimited components compared separately, case-sensitive, `*` and `?` allowed in
    /// each.
    Arn,
    /// `Bool`: `true`/`false`, compared without case.
    Bool,
    /// `Null`: whether the key is absent.
    Null,
}

impl Operator {
    fn matches(self, policy: &str, request: &str) -> bool {
        match self {
            Operator::StringEquals => policy == request,
            Operator::StringEqualsIgnoreCase => policy.to_lowercase() == request.to_lowercase(),
            Operator::StringLike => glob(policy, request),
            Operator::Arn => arn_like(policy, request),
            Operator::Bool => policy.eq_ignore_ascii_case(request),
            // Decided from presence alone, in `Condition::holds`.
            Operator::Null => false,
        }
    }
}

/// The `ForAnyValue:`/`ForAllValues:` qualifier of an operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Set {
    AnyValue,
    AllValues,
}

/// One key under one operator: `"StringEquals": {"aws:RequestedRegion": ["a", "b"]}`.
#[derive(Clone, Debug)]
pub(super) struct Condition {
    operator: Operator,
    /// The `Not` form (`StringNotEquals`, `ArnNotLike`, ...): the request value must match none
    /// of the policy values.
    negated: bool,
    set: Option<Set>,
    /// `...IfExists`: an absent key makes the condition true.
    if_exists: bool,
    key: String,
    values: Vec<String>,
}

impl Condition {
    /// The condition key as the policy spells it.
    pub(super) fn key(&self) -> &str {
        &self.key
    }

    /// Whether the condition holds for the request's `context`. An absent key is absent (as
    /// IAM's simulator treats keys the request does not give).
    pub(super) fn holds(&self, context: &Context) -> bool {
        let given = context.get(&self.key);
        if self.operator == Operator::Null {
            // "true": the key must be absent; "false": it must be present.
            let absent = given.is_none_or(<[String]>::is_empty);
            return self
                .values
                .iter()
                .any(|v| v.eq_ignore_ascii_case("true") == absent);
        }
        let Some(given) = given else {
            return self.if_exists
                || match self.set {
                    // "Returns true ... if there are no keys in the request."
                    Some(Set::AllValues) => true,
                    // "For a missing context key ... evaluates to false."
                    Some(Set::AnyValue) => false,
                    // Absent values match nothing: true only for the Not operators.
                    None => self.negated,
                };
        };
        // Several values of the policy for one key: any may match (for the Not operators: none
        // may match).
        let hit = |v: &String| self.values.iter().any(|p| self.operator.matches(p, v));
        match self.set {
            None => given.iter().any(hit) != self.negated,
            Some(Set::AnyValue) => given.iter().any(|v| hit(v) != self.negated),
            Some(Set::AllValues) => given.iter().all(|v| hit(v) != self.negated),
        }
    }
}

/// The conditions of a `Condition` block: every operator, and every key under it, must hold.
pub(super) fn parse_block(block: &Map<String, Value>) -> Result<Vec<Condition>, String> {
    let mut conditions = Vec::new();
    for (name, keys) in block {
        let (set, operator, negated, if_exists) = operator(name)?;
        let Value::Object(keys) = keys else {
            return Err(format!("condition operator {name} holds no keys"));
        };
        for (key, values) in keys {
            let values = strings(values, &format!("the values of {name} {key}"))?;
            if values.iter().any(|v| v.contains("${")) {
                return Err(format!(
                    "policy variables (in {name} {key}) are not emulated by the fault proxy's \
                     simulator"
                ));
            }
            conditions.push(Condition {
                operator,
                negated,
                set,
                if_exists,
                key: key.clone(),
                values,
            });
        }
    }
    Ok(conditions)
}

/// The qualifier, operator, negation and `IfExists` of an operator's name.
fn operator(name: &str) -> Result<(Option<Set>, Operator, bool, bool), String> {
    let lower = name.to_ascii_lowercase();
    let (set, rest) = if let Some(rest) = lower.strip_prefix("foranyvalue:") {
        (Some(Set::AnyValue), rest)
    } else if let Some(rest) = lower.strip_prefix("forallvalues:") {
        (Some(Set::AllValues), rest)
    } else {
        (None, lower.as_str())
    };
    let (rest, if_exists) = match rest.strip_suffix("ifexists") {
        Some(base) => (base, true),
        None => (rest, false),
    };
    let (operator, negated) = match rest {
        "stringequals" => (Operator::StringEquals, false),
        "stringnotequals" => (Operator::StringEquals, true),
        "stringequalsignorecase" => (Operator::StringEqualsIgnoreCase, false),
        "stringnotequalsignorecase" => (Operator::StringEqualsIgnoreCase, true),
        "stringlike" => (Operator::StringLike, false),
        "stringnotlike" => (Operator::StringLike, true),
        "arnequals" | "arnlike" => (Operator::Arn, false),
        "arnnotequals" | "arnnotlike" => (Operator::Arn, true),
        "bool" => (Operator::Bool, false),
        "null" => (Operator::Null, false),
        _ => {
            return Err(format!(
                "condition operator {name} is not emulated by the fault proxy's simulator"
            ));
        }
    };
    Ok((set, operator, negated, if_exists))
}

/// A policy value that may be one value or a list: strings, and booleans and numbers as JSON
/// writes them.
pub(super) fn strings(value: &Value, what: &str) -> Result<Vec<String>, String> {
    let one = |v: &Value| match v {
        Value::String(s) => Ok(s.clone()),
        Value::Bool(b) => Ok(b.to_string()),
        Value::Number(n) => Ok(n.to_string()),
        _ => Err(format!("{what}: {v} is not a string")),
    };
    match value {
        Value::Array(list) => list.iter().map(one).collect(),
        v => Ok(vec![one(v)?]),
    }
}

/// Whether `text` matches `pattern`, in which `*` stands for any run of characters (none too)
/// and `?` for any one character; everything else matches itself.
pub(super) fn glob(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    // The last `*` seen and the text position it is currently taken to end at.
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if let Some((sp, st)) = star {
            // Let the `*` take one more character and try again after it.
            star = Some((sp, st + 1));
            pi = sp + 1;
            ti = st + 1;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// `ArnLike`/`ArnEquals`: both ARNs split into their six components (`arn`, partition, service,
/// region, account, resource — the resource keeps any further colons), each compared with
/// [`glob`], so a wildcard never reaches into the next component.
fn arn_like(pattern: &str, arn: &str) -> bool {
    let p: Vec<&str> = pattern.splitn(6, ':').collect();
    let a: Vec<&str> = arn.splitn(6, ':').collect();
    p.len() == 6 && a.len() == 6 && p.iter().zip(&a).all(|(p, a)| glob(p, a))
}
