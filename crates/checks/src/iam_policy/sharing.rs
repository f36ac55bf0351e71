//! Whether a role's policies can tell two request values apart: the test that lets EC2NodeClasses
//! share one IAM simulation when their questions differ only in values no statement of the
//! policies could treat differently (their names, their uids). Pure.
//!
//! Conservative by construction: a value pair counts as indistinguishable only when every string
//! literal anywhere in the documents (actions, resources, condition values, even `Sid`s) answers
//! the same for both under every way IAM compares strings (exact, case-insensitive, `*`/`?`
//! globs either way, ARN component globs), neither value could be read as a number, a date, a
//! boolean or an address (IAM's other operators), and no document uses a policy variable (its
//! value would come from the request). A document that does not parse tells everything apart.

use super::conditions::arn_like;
use super::like;
use serde_json::Value;

/// The string literals of a set of policy documents, read once for many comparisons.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Literals {
    literals: Vec<String>,
    /// A document uses a policy variable: its value comes from the request.
    variable: bool,
}

impl Literals {
    /// The literals of `documents`; `None` when one does not parse (then nothing is shared).
    pub fn of(documents: &[&str]) -> Option<Self> {
        let mut literals = Vec::new();
        for document in documents {
            collect(&parse(document)?, &mut literals);
        }
        literals.sort();
        literals.dedup();
        let variable = literals.iter().any(|l| l.contains("${"));
        Some(Self { literals, variable })
    }

    /// Whether some statement could decide differently for `a` than for `b`.
    pub fn tell_apart(&self, a: &str, b: &str) -> bool {
        if a == b {
            return false;
        }
        self.variable
            || typed(a)
            || typed(b)
            || self
                .literals
                .iter()
                .any(|literal| answers(literal, a) != answers(literal, b))
    }

    /// Whether no pair of `pairs` is told apart.
    pub fn cannot_tell_apart<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> bool {
        pairs.into_iter().all(|(a, b)| !self.tell_apart(a, b))
    }
}

/// Whether some statement of `documents` could decide differently for `a` than for `b`.
pub fn tells_apart(documents: &[&str], a: &str, b: &str) -> bool {
    Literals::of(documents).is_none_or(|l| l.tell_apart(a, b))
}

/// Whether no pair of `pairs` is told apart by `documents`.
pub fn indistinguishable<'a>(
    documents: &[&str],
    pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> bool {
    Literals::of(documents).is_some_and(|l| l.cannot_tell_apart(pairs))
}

/// Every comparison IAM could make between a policy literal and a request value.
fn answers(literal: &str, value: &str) -> [bool; 5] {
    let (lower_literal, lower_value) = (literal.to_lowercase(), value.to_lowercase());
    [
        literal == value,
        lower_literal == lower_value,
        like(literal, value),
        like(&lower_literal, &lower_value),
        arn_like(literal, value),
    ]
}

/// A value IAM's numeric, date, boolean or address operators could read.
fn typed(value: &str) -> bool {
    let trimmed = value.trim();
    trimmed.parse::<f64>().is_ok()
        || trimmed.eq_ignore_ascii_case("true")
        || trimmed.eq_ignore_ascii_case("false")
        || trimmed.parse::<jiff::Timestamp>().is_ok()
        || trimmed.parse::<jiff::civil::Date>().is_ok()
        || trimmed.parse::<std::net::IpAddr>().is_ok()
        || trimmed.chars().next().is_some_and(|c| c.is_ascii_digit()) && trimmed.contains('/')
}

fn parse(document: &str) -> Option<Value> {
    let trimmed = document.trim();
    if trimmed.starts_with('{') {
        serde_json::from_str(trimmed).ok()
    } else {
        let decoded = percent_encoding::percent_decode_str(trimmed)
            .decode_utf8()
            .ok()?;
        serde_json::from_str(&decoded).ok()
    }
}

fn collect(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Array(items) => items.iter().for_each(|v| collect(v, out)),
        Value::Object(map) => map.values().for_each(|v| collect(v, out)),
        Value::Number(n) => out.push(n.to_string()),
        Value::Bool(_) | Value::Null => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Karpenter's controller policy, abridged: tag conditions on the cluster and wildcards on
    /// the node class and pool.
    const KARPENTER: &str = r#"{"Version":"2012-10-17","Statement":[
        {"Sid":"AllowScopedEC2InstanceAccessActions","Effect":"Allow",
         "Resource":["arn:aws:ec2:us-west-2::image/*","arn:aws:ec2:us-west-2:*:subnet/*"],
         "Action":["ec2:RunInstances","ec2:CreateFleet"]},
        {"Sid":"AllowScopedEC2InstanceActionsWithTags","Effect":"Allow",
         "Resource":["arn:aws:ec2:us-west-2:*:instance/*"],
         "Action":["ec2:RunInstances","ec2:CreateFleet","ec2:CreateLaunchTemplate"],
         "Condition":{"StringEquals":{"aws:RequestTag/kubernetes.io/cluster/demo":"owned"},
                      "StringLike":{"aws:RequestTag/karpenter.sh/nodepool":"*"}}},
        {"Sid":"AllowScopedInstanceProfileCreationActions","Effect":"Allow",
         "Resource":"arn:aws:iam::111122223333:instance-profile/*",
         "Action":"iam:CreateInstanceProfile",
         "Condition":{"StringLike":{"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass":"*"}}}]}"#;

    #[test]
    fn karpenters_own_policy_cannot_tell_node_classes_or_pools_apart() {
        assert!(!tells_apart(&[KARPENTER], "default", "gpu"));
        assert!(!tells_apart(&[KARPENTER], "general-purpose", "batch"));
        assert!(indistinguishable(
            &[KARPENTER],
            [
                ("default", "gpu"),
                (
                    "arn:aws:iam::111122223333:instance-profile/karpenter/us-west-2/demo/uid-1/demo_1",
                    "arn:aws:iam::111122223333:instance-profile/karpenter/us-west-2/demo/uid-2/demo_2"
                )
            ]
        ));
    }

    #[test]
    fn a_statement_that_names_or_patterns_one_value_tells_it_apart() {
        let named = r#"{"Statement":[{"Effect":"Deny","Action":"ec2:RunInstances","Resource":"*",
            "Condition":{"StringEquals":{"aws:RequestTag/karpenter.sh/nodepool":"gpu"}}}]}"#;
        assert!(tells_apart(&[KARPENTER, named], "default", "gpu"));
        let patterned = r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*",
            "Condition":{"StringLike":{"aws:RequestTag/karpenter.sh/nodepool":"team-*"}}}]}"#;
        assert!(tells_apart(&[patterned], "team-a", "default"));
        assert!(!tells_apart(&[patterned], "team-a", "team-b"));
        let case = r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*",
            "Condition":{"StringEqualsIgnoreCase":{"aws:RequestTag/team":"GPU"}}}]}"#;
        assert!(tells_apart(&[case], "gpu", "cpu"));
        let arn = r#"{"Statement":[{"Effect":"Allow","Action":"iam:PassRole",
            "Resource":"arn:aws:iam::111122223333:role/nodes-*"}]}"#;
        assert!(tells_apart(
            &[arn],
            "arn:aws:iam::111122223333:role/nodes-a",
            "arn:aws:iam::111122223333:role/other"
        ));
    }

    #[test]
    fn policy_variables_typed_values_and_unreadable_documents_tell_everything_apart() {
        let variable = r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*",
            "Condition":{"StringEquals":{"aws:RequestTag/team":"${aws:PrincipalTag/team}"}}}]}"#;
        assert!(tells_apart(&[variable], "a", "b"));
        for (a, b) in [
            ("1", "2"),
            ("true", "x"),
            ("10.0.0.0/16", "x"),
            ("2026-01-01", "x"),
        ] {
            assert!(tells_apart(&[KARPENTER], a, b), "{a} / {b}");
        }
        assert!(tells_apart(&["{not json"], "a", "b"));
        // Percent-encoded, as IAM returns documents, parses.
        let encoded = "%7B%22Statement%22%3A%5B%5D%7D";
        assert!(!tells_apart(&[encoded], "a", "b"));
    }
}
