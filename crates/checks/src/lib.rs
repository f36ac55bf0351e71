//! The functional core: pure checks from observed facts to a KarpenterHealth status. No IO, no
//! async, no clock: time is an argument, so the same facts always give the same answer, whoever
//! gathered them.
//!
//! The pipeline is [`evaluate`]: the [`rules`] each turn the [`facts`] into one condition's
//! outcome, and [`render`] folds the outcomes, the previous status and `now` into the status.
#![forbid(unsafe_code)]
// A function over 80 lines (clippy.toml) is cut along what its parts decide; tests are exempt.
#![warn(clippy::too_many_lines)]

pub mod acceptance;
pub mod allocatable;
pub mod arn;
pub mod aws_auth;
pub mod docs;
pub mod facts;
pub mod generated;
pub mod go;
pub mod iam_policy;
pub mod karpenter_permissions;
pub mod karpenter_release;
pub mod karpenter_versions;
pub mod labels;
pub mod node_mapping;
pub mod plan;
pub mod pod_density;
pub mod pod_drain;
pub mod pod_fit;
pub mod pod_template;
pub mod quantity;
pub mod render;
pub mod requirements;
pub mod rules;
pub mod trust_policy;
pub mod verdict;
pub mod version;
pub mod vpc_cni;
pub mod warnings;
mod wording;

#[cfg(any(test, feature = "testing"))]
#[allow(clippy::too_many_lines)] // Fixture builders: one field per line of the facts they fill.
pub mod testing;

#[cfg(test)]
#[allow(clippy::too_many_lines)]
mod tests;

use karpenter_health_api::KarpenterHealthStatus;
use std::borrow::Cow;

pub use docs::docs_markdown;
pub use facts::{Facts, Settings};
pub use rules::evaluate_all;
pub use verdict::Outcome;

/// Evaluates every check for one EC2NodeClass and renders the full status: every condition type
/// once, in `ConditionType::ALL` order; `lastTransitionTime` kept from `previous` unless the
/// status changed; findings sorted and bounded. Deterministic: equal inputs, equal output.
pub fn evaluate(
    facts: &Facts,
    settings: &Settings,
    previous: Option<&KarpenterHealthStatus>,
    now: jiff::Timestamp,
) -> KarpenterHealthStatus {
    let (outcomes, accepted) = evaluate_outcomes(facts, settings, now);
    render::render(facts, &outcomes, accepted, previous, now)
}

/// Every check's outcome for one EC2NodeClass after its acceptances (`acceptance.rs`), and the
/// findings they accepted: what [`evaluate`] renders.
pub fn evaluate_outcomes(
    facts: &Facts,
    settings: &Settings,
    now: jiff::Timestamp,
) -> (Vec<Outcome>, Vec<karpenter_health_api::AcceptedFinding>) {
    let outcomes = rules::evaluate_all(facts, settings, now);
    let meta = &facts.cluster.node_class.metadata;
    acceptance::apply(
        outcomes,
        meta.name.as_deref().unwrap_or_default(),
        meta.annotations.as_ref(),
        &settings.acceptances,
        now,
    )
}

/// Shortens user-controlled text for messages, on a character boundary.
pub(crate) fn clip(s: &str, max_chars: usize) -> Cow<'_, str> {
    match s.char_indices().nth(max_chars) {
        None => Cow::Borrowed(s),
        Some((at, _)) => Cow::Owned(format!("{}…", &s[..at])),
    }
}

/// Shortens text to at most `max_bytes` bytes (API limits count bytes), on a character boundary.
pub fn clip_bytes(s: &str, max_bytes: usize) -> Cow<'_, str> {
    if s.len() <= max_bytes {
        return Cow::Borrowed(s);
    }
    let mut end = max_bytes.saturating_sub('…'.len_utf8());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}…", &s[..end]))
}

/// Glob match with `*` (any run) and `?` (one character), as EC2 filters and IAM actions use.
/// Iterative, so hostile patterns cost O(pattern × text), never a deep recursion.
pub(crate) fn glob_match(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut backtrack: Option<(usize, usize)> = None;
    while ti < t.len() {
        match p.get(pi) {
            Some('*') => {
                backtrack = Some((pi, ti));
                pi += 1;
            }
            Some(&c) if c == '?' || c == t[ti] => {
                pi += 1;
                ti += 1;
            }
            _ => match backtrack {
                Some((star, matched)) => {
                    pi = star + 1;
                    ti = matched + 1;
                    backtrack = Some((star, matched + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod helper_tests {
    use super::*;

    #[test]
    fn glob_matches_like_ec2_filters() {
        assert!(glob_match("*", ""));
        assert!(glob_match("*", "anything"));
        assert!(glob_match("demo-*", "demo-nodes"));
        assert!(glob_match("d?mo", "demo"));
        assert!(glob_match("*-nodes-*", "a-nodes-b"));
        assert!(!glob_match("demo", "demo2"));
        assert!(!glob_match("demo-*", "prod-nodes"));
        assert!(!glob_match("a*b*c", &"ab".repeat(2000)));
    }

    #[test]
    fn clip_cuts_on_a_character_boundary() {
        assert_eq!(clip("ñññ", 2), "ññ…");
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip_bytes("ñññ", 5), "ñ…");
        assert_eq!(clip_bytes("abc", 3), "abc");
        assert!(clip_bytes(&"ü".repeat(40_000), 32_768).len() <= 32_768);
    }
}
