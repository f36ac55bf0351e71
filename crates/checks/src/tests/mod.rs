//! Crate-level tests: one file of scenarios per condition, named like its rule module in
//! `rules/` (`structure.rs` holds them to that), and the cross-cutting ones: one sentence per
//! reason, properties over arbitrary facts, the rendered status and what is observed when. Pure.

/// One sentence per reason: `name: facts => Condition is Status because Reason;` becomes a test
/// that evaluates the facts and expects that status and reason (`reasons::expect`). A condition's
/// sentences live in its own test file, in a module `by_reason`; `reasons::every_reason_is_proven_
/// by_a_sentence` reads every file of this folder and fails when a reason has none. The build
/// script lists every file's `SENTENCES` into [`SENTENCE_FACTS`].
macro_rules! sentences {
    ($($name:ident: $facts:expr => $ty:ident is $status:ident because $reason:ident;)+) => {
        /// The facts of every sentence here, which the property tests also start from.
        pub(crate) const SENTENCES: &[fn() -> $crate::facts::Facts] = &[$(|| $facts),+];
        $(
            #[test]
            fn $name() {
                $crate::tests::reasons::expect(
                    $facts,
                    karpenter_health_api::ConditionType::$ty,
                    karpenter_health_api::ConditionStatus::$status,
                    karpenter_health_api::Reason::$reason,
                );
            }
        )+
    };
}

/// The facts of every sentence of every test file (their `by_reason::SENTENCES`, listed by the
/// crate's build script): the property tests start from them as well as from healthy facts.
pub(crate) const SENTENCE_FACTS: &[&[fn() -> crate::facts::Facts]] =
    include!(concat!(env!("OUT_DIR"), "/registered_sentences.rs"));

// One module per `.rs` file of this directory (a new condition's test file is declared by being
// there), and the proptest strategies' folder.
automod::dir!("src/tests");
mod strategies;

use karpenter_health_api::{ConditionType, KarpenterHealthStatus, Reason};

/// The (condition, reason) of every False condition, Ready excluded.
pub(super) fn failures(status: &KarpenterHealthStatus) -> Vec<(String, String)> {
    status
        .conditions
        .iter()
        .filter(|c| c.status == "False" && c.type_ != "Ready")
        .map(|c| (c.type_.clone(), c.reason.clone()))
        .collect()
}

/// A (condition, reason) as `failures` lists it.
pub(super) fn pair(ty: ConditionType, reason: Reason) -> (String, String) {
    (ty.as_str().to_owned(), reason.as_str().to_owned())
}

/// The message of condition `ty`, empty when it is absent.
pub(super) fn message(status: &KarpenterHealthStatus, ty: ConditionType) -> &str {
    status
        .condition(ty)
        .map(|c| c.message.as_str())
        .unwrap_or_default()
}
