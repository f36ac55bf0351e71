//! Parses an IAM role's trust policy and answers whether a service may assume the role.
//! Pure: no IO, never panics.
//!
//! IAM returns `AssumeRolePolicyDocument` percent-encoded (RFC 3986); emulators and the AWS CLI
//! hand out plain JSON. Both are accepted. IAM's grammar lets `Statement`, `Action` and
//! `Principal.Service` be a single value or a list, so each is read as either.

use serde_json::Value;
use std::fmt;

/// One statement, reduced to what the trust check reads.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustStatement {
    pub allow: bool,
    pub actions: Vec<String>,
    /// `NotAction` was used: the statement applies to every action *except* `actions`.
    pub not_action: bool,
    /// `"Principal": "*"` or `{"AWS": "*"}`: anyone, services included.
    pub any_principal: bool,
    pub services: Vec<String>,
}

/// A parsed trust policy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustPolicy {
    pub statements: Vec<TrustStatement>,
}

/// Why a trust-policy document could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrustPolicyError(pub String);

impl fmt::Display for TrustPolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TrustPolicyError {}

/// Decodes (if percent-encoded) and parses a trust policy document.
pub fn parse(document: &str) -> Result<TrustPolicy, TrustPolicyError> {
    let trimmed = document.trim();
    let value: Value = if trimmed.starts_with('{') {
        serde_json::from_str(trimmed).map_err(|e| TrustPolicyError(format!("invalid JSON: {e}")))?
    } else {
        let decoded = percent_encoding::percent_decode_str(trimmed)
            .decode_utf8()
            .map_err(|e| TrustPolicyError(format!("percent-decoding gave invalid UTF-8: {e}")))?;
        match serde_json::from_str(&decoded) {
            Ok(v) => v,
            // Form encoding writes spaces as `+`; only retried after a plain decode failed, since
            // `+` is also a legitimate character.
            Err(first) => {
                let plus = trimmed.replace('+', " ");
                let decoded = percent_encoding::percent_decode_str(&plus).decode_utf8_lossy();
                serde_json::from_str(&decoded).map_err(|_| {
                    TrustPolicyError(format!("invalid JSON after percent-decoding: {first}"))
                })?
            }
        }
    };
    from_value(&value)
}

fn from_value(value: &Value) -> Result<TrustPolicy, TrustPolicyError> {
    let statements = match value.get("Statement") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(single @ Value::Object(_)) => vec![single],
        Some(_) => {
            return Err(TrustPolicyError(
                "Statement is neither an object nor a list".into(),
            ));
        }
        None => return Err(TrustPolicyError("the document has no Statement".into())),
    };
    let statements = statements
        .into_iter()
        .map(statement)
        .collect::<Result<_, _>>()?;
    Ok(TrustPolicy { statements })
}

fn statement(value: &Value) -> Result<TrustStatement, TrustPolicyError> {
    let allow = match value.get("Effect").and_then(Value::as_str) {
        Some("Allow") => true,
        Some("Deny") => false,
        other => {
            return Err(TrustPolicyError(format!(
                "a statement's Effect is {other:?}, not \"Allow\" or \"Deny\""
            )));
        }
    };
    let (actions, not_action) = match (value.get("Action"), value.get("NotAction")) {
        (Some(a), _) => (strings(a), false),
        (None, Some(a)) => (strings(a), true),
        (None, None) => (Vec::new(), false),
    };
    let (any_principal, services) = match value.get("Principal") {
        Some(Value::String(s)) => (s == "*", Vec::new()),
        Some(Value::Object(map)) => (
            map.get("AWS")
                .map(strings)
                .unwrap_or_default()
                .iter()
                .any(|s| s == "*"),
            map.get("Service").map(strings).unwrap_or_default(),
        ),
        _ => (false, Vec::new()),
    };
    Ok(TrustStatement {
        allow,
        actions,
        not_action,
        any_principal,
        services,
    })
}

fn strings(value: &Value) -> Vec<String> {
    match value {
        Value::String(s) => vec![s.clone()],
        Value::Array(list) => list
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

impl TrustStatement {
    fn covers(&self, service: &str, action: &str) -> bool {
        let principal = self.any_principal || self.services.iter().any(|s| s == service);
        let listed = self.actions.iter().any(|a| action_matches(a, action));
        principal && (listed != self.not_action)
    }
}

impl TrustPolicy {
    /// Whether one of `services` may call `sts:AssumeRole` on the role: an Allow statement covers
    /// it and no Deny statement does. Conditions are not evaluated (they narrow, never widen).
    pub fn allows_assume_role(&self, services: &[&str]) -> bool {
        services.iter().any(|service| {
            let allowed = self
                .statements
                .iter()
                .any(|s| s.allow && s.covers(service, "sts:AssumeRole"));
            let denied = self
                .statements
                .iter()
                .any(|s| !s.allow && s.covers(service, "sts:AssumeRole"));
            allowed && !denied
        })
    }
}

/// IAM action matching: case-insensitive, with `*` and `?` wildcards.
fn action_matches(pattern: &str, action: &str) -> bool {
    crate::glob_match(&pattern.to_ascii_lowercase(), &action.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    const EC2: &[&str] = &["ec2.amazonaws.com"];
    const PLAIN: &str = r#"{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}"#;

    #[test]
    fn plain_json_trusting_ec2_allows_ec2() {
        assert!(parse(PLAIN).unwrap().allows_assume_role(EC2));
    }

    #[test]
    fn percent_encoded_json_as_iam_returns_it_is_decoded() {
        let encoded: String =
            percent_encoding::utf8_percent_encode(PLAIN, percent_encoding::NON_ALPHANUMERIC)
                .to_string();
        assert!(encoded.starts_with("%7B"));
        assert!(parse(&encoded).unwrap().allows_assume_role(EC2));
        let plus = encoded.replace("%22Version%22", "%22Version%22+");
        assert!(parse(&plus).unwrap().allows_assume_role(EC2));
    }

    #[test]
    fn service_lists_single_statements_and_wildcard_actions_are_understood() {
        let doc = r#"{"Statement":{"Effect":"Allow","Principal":{"Service":["eks.amazonaws.com","ec2.amazonaws.com"]},"Action":["sts:TagSession","STS:Assume*"]}}"#;
        assert!(parse(doc).unwrap().allows_assume_role(EC2));
    }

    #[test]
    fn a_policy_trusting_only_other_principals_does_not_allow_ec2() {
        let doc = r#"{"Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::1:oidc-provider/x"},"Action":"sts:AssumeRoleWithWebIdentity"},{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:TagSession"}]}"#;
        assert!(!parse(doc).unwrap().allows_assume_role(EC2));
    }

    #[test]
    fn a_deny_statement_overrides_the_allow() {
        let doc = r#"{"Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"},{"Effect":"Deny","Principal":"*","Action":"sts:*"}]}"#;
        assert!(!parse(doc).unwrap().allows_assume_role(EC2));
    }

    #[test]
    fn not_action_and_star_principal_follow_iam_semantics() {
        let doc = r#"{"Statement":[{"Effect":"Allow","Principal":{"AWS":"*"},"NotAction":"sts:TagSession"}]}"#;
        assert!(parse(doc).unwrap().allows_assume_role(EC2));
        let doc =
            r#"{"Statement":[{"Effect":"Allow","Principal":"*","NotAction":"sts:AssumeRole"}]}"#;
        assert!(!parse(doc).unwrap().allows_assume_role(EC2));
    }

    #[test]
    fn garbage_documents_are_errors_not_panics() {
        for doc in [
            "",
            "%",
            "%FF%FE",
            "{",
            "[]",
            "{\"Statement\":3}",
            "{}",
            "{\"Statement\":[{}]}",
            "ü%7B",
        ] {
            assert!(parse(doc).is_err(), "{doc:?}");
        }
    }
}
