//! IAM's condition operators for the policy evaluator: whether one `operator: {key: values}`
//! entry of a `Condition` block holds for a request. Pure: no IO, never panics.
//!
//! The rules, from the IAM User Guide ("IAM JSON policy elements: Condition operators",
//! "Single-valued vs. multivalued context keys", "Set operators for multivalued context keys"):
//! - `StringEquals` is exact and case-sensitive, `StringEqualsIgnoreCase` ignores case; neither
//!   expands wildcards. `StringLike` matches case-sensitively with `*` and `?`. The escapes
//!   `${*}`, `${?}`, `${$}` stand for the literal characters in every string operator.
//! - `ArnEquals` and `ArnLike` behave identically: each of the six colon-delimited components of
//!   the ARN (`arn:partition:service:region:account-id:resource`, the resource being everything
//!   after the fifth colon) matches case-sensitively with `*` and `?`, so no wildcard spans a
//!   colon between components. A request value that is not an ARN does not match.
//! - `Bool` compares `true`/`false` regardless of case; a non-boolean request value does not
//!   match.
//! - The values listed for one key are OR-ed; a negated operator (`StringNotEquals`,
//!   `StringNotEqualsIgnoreCase`, `StringNotLike`, `ArnNotEquals`, `ArnNotLike`) matches a request
//!   value that matches none of them.
//! - A key absent from the request: a plain operator does not match, a negated one does, and
//!   `...IfExists` does. `Null: true` matches an absent key, `Null: false` a present one; IAM
//!   allows no `IfExists` on `Null`.
//! - `ForAllValues:` holds when every request value satisfies the operator, and when the request
//!   has no value (absent key, or an empty data set such as an empty string); `ForAnyValue:`
//!   holds when at least one request value does, never for no value, not even with `IfExists`
//!   (what IAM answers, see re:Post "ForAnyValue:StringEqualsIfExists behaving unexpectedly").
//!   With a negated operator that makes `ForAllValues:StringNotEquals` "no request value equals
//!   any listed value" and `ForAnyValue:StringNotEquals` "some request value differs from every
//!   listed value".
//!
//! What the guide leaves open stays a maybe: operators not implemented here (numeric, date, IP
//! address, binary), policy variables, condition values an operator cannot use (a non-ARN for an
//! ARN operator, a non-boolean for `Bool` or `Null`, no value at all), `Null` with a set operator,
//! and a key with several request values under an operator without a set operator (the guide
//! only says multivalued keys require one).

use super::{ConditionEntry, Lookup, RequestContext, Tri, has_variable, like};

/// How one request value is compared with one condition value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Compare {
    Equals,
    EqualsIgnoreCase,
    Like,
    Arn,
    Bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetOperator {
    ForAllValues,
    ForAnyValue,
}

/// A condition operator this evaluator implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Operator {
    Null,
    Compare {
        compare: Compare,
        negated: bool,
        if_exists: bool,
        set: Option<SetOperator>,
    },
}

/// Reads an operator name as written in the policy, or says why it is not evaluated here.
fn operator(name: &str) -> Result<Operator, &'static str> {
    let (set, rest) = if let Some(rest) = name.strip_prefix("ForAllValues:") {
        (Some(SetOperator::ForAllValues), rest)
    } else if let Some(rest) = name.strip_prefix("ForAnyValue:") {
        (Some(SetOperator::ForAnyValue), rest)
    } else {
        (None, name)
    };
    let (if_exists, base) = match rest.strip_suffix("IfExists") {
        Some(base) => (true, base),
        None => (false, rest),
    };
    let (compare, negated) = match base {
        "Null" if if_exists => return Err("IAM allows no IfExists on Null"),
        "Null" if set.is_some() => return Err("IAM documents no set operator on Null"),
        "Null" => return Ok(Operator::Null),
        "StringEquals" => (Compare::Equals, false),
        "StringNotEquals" => (Compare::Equals, true),
        "StringEqualsIgnoreCase" => (Compare::EqualsIgnoreCase, false),
        "StringNotEqualsIgnoreCase" => (Compare::EqualsIgnoreCase, true),
        "StringLike" => (Compare::Like, false),
        "StringNotLike" => (Compare::Like, true),
        "ArnEquals" | "ArnLike" => (Compare::Arn, false),
        "ArnNotEquals" | "ArnNotLike" => (Compare::Arn, true),
        "Bool" => (Compare::Bool, false),
        _ => return Err("the operator is not evaluated here"),
    };
    Ok(Operator::Compare {
        compare,
        negated,
        if_exists,
        set,
    })
}

/// Whether the condition holds for the request; `Maybe` (with why) where IAM's answer depends on
/// something not known here or not documented.
pub(super) fn condition_matches(c: &ConditionEntry, context: &RequestContext) -> Tri {
    let unknown = |why: &str| Tri::Maybe(format!("condition {} on {}: {why}", c.operator, c.key));
    let op = match operator(&c.operator) {
        Ok(op) => op,
        Err(why) => return unknown(why),
    };
    if c.values.iter().any(|v| has_variable(v)) {
        return unknown("its value uses a policy variable");
    }
    if let Some(why) = unusable_values(op, &c.values) {
        return unknown(&why);
    }
    let values: &[String] = match context.lookup(&c.key) {
        Lookup::Unknown => return unknown("the key's value is not known outside AWS"),
        Lookup::Absent => &[],
        Lookup::Values(values) => values,
    };
    // No value at all, or only empty strings: IAM's "null" / "empty data set".
    let null = values.iter().all(String::is_empty);
    let Operator::Compare {
        compare,
        negated,
        if_exists,
        set,
    } = op
    else {
        return Tri::from_bool(c.values.iter().any(|w| boolean(w) == Some(null)));
    };
    let satisfies = |v: &String| matches_any(compare, v, &c.values) != negated;
    match (set, values) {
        (Some(SetOperator::ForAllValues), _) => {
            Tri::from_bool(null || values.iter().all(satisfies))
        }
        // An absent key fails `ForAnyValue` even with `IfExists` (the guide: "for no matching
        // context key or a null dataset, the condition returns false"; IAM answers so, see
        // re:Post "ForAnyValue:StringEqualsIfExists behaving unexpectedly").
        (Some(SetOperator::ForAnyValue), _) => {
            Tri::from_bool(!null && values.iter().any(satisfies))
        }
        (None, []) => Tri::from_bool(if_exists || negated),
        (None, [value]) => Tri::from_bool(satisfies(value)),
        (None, _) => unknown(
            "the key has several values in this request, and IAM documents no meaning for an \
             operator without ForAllValues or ForAnyValue on a multivalued key",
        ),
    }
}

/// Why the condition's own values cannot be used with the operator, if they cannot.
fn unusable_values(op: Operator, values: &[String]) -> Option<String> {
    if values.is_empty() {
        return Some("the condition lists no value".into());
    }
    let (usable, what): (fn(&str) -> bool, &str) = match op {
        Operator::Null
        | Operator::Compare {
            compare: Compare::Bool,
            ..
        } => (|v| boolean(v).is_some(), "true or false"),
        Operator::Compare {
            compare: Compare::Arn,
            ..
        } => (|v| arn_components(v).is_some(), "an ARN"),
        Operator::Compare { .. } => return None,
    };
    values
        .iter()
        .find(|v| !usable(v))
        .map(|v| format!("its value {v:?} is not {what}"))
}

/// Whether one request value matches at least one of the condition's values.
fn matches_any(compare: Compare, value: &str, wanted: &[String]) -> bool {
    wanted.iter().any(|w| match compare {
        Compare::Equals => literal(w) == value,
        Compare::EqualsIgnoreCase => {
            let w = literal(w);
            w.chars()
                .flat_map(char::to_lowercase)
                .eq(value.chars().flat_map(char::to_lowercase))
        }
        Compare::Like => like(w, value),
        Compare::Arn => arn_like(w, value),
        Compare::Bool => boolean(w).is_some_and(|w| boolean(value) == Some(w)),
    })
}

/// A condition value with IAM's escapes `${*}`, `${?}`, `${$}` turned into the characters.
fn literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(c) = rest.chars().next() {
        let (text, len) = match ["${*}", "${?}", "${$}"]
            .into_iter()
            .find(|escape| rest.starts_with(escape))
        {
            Some(escape) => (&escape[2..3], escape.len()),
            None => (&rest[..c.len_utf8()], c.len_utf8()),
        };
        out.push_str(text);
        rest = &rest[len..];
    }
    out
}

/// `true` or `false`, in any case.
fn boolean(value: &str) -> Option<bool> {
    if value.eq_ignore_ascii_case("true") {
        Some(true)
    } else if value.eq_ignore_ascii_case("false") {
        Some(false)
    } else {
        None
    }
}

/// The six components of an ARN; the last one (the resource) keeps any further colons.
fn arn_components(value: &str) -> Option<[&str; 6]> {
    let mut parts = value.splitn(6, ':');
    let mut out = [""; 6];
    for slot in &mut out {
        *slot = parts.next()?;
    }
    Some(out)
}

/// IAM's ARN matching: component by component, each with `*` and `?`, case-sensitively.
pub(super) fn arn_like(pattern: &str, value: &str) -> bool {
    match (arn_components(pattern), arn_components(value)) {
        (Some(p), Some(v)) => p.iter().zip(v).all(|(p, v)| like(p, v)),
        _ => false,
    }
}
