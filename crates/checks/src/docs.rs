//! Generates docs/checks.md from the vocabulary table (conditions, reasons, warnings, what each
//! check cannot see), so the reference cannot drift from the code. Pure: builds a string, no IO
//! (a test compares it with the committed file).

use crate::facts::UnknownCause;
use crate::verdict::unknown_reason;
use crate::warnings::Warning;
use karpenter_health_api::conditions::ReasonScope;
use karpenter_health_api::vocabulary::Lab;
use karpenter_health_api::{ConditionType, Reason};
use std::fmt::Write;

/// The command that writes docs/checks.md and every other file generated from the vocabulary
/// table (`crate::generated`).
pub const REGENERATE: &str = "make generate";

/// The fragment of a `docs_anchor` (`docs/checks.md#fragment`).
fn fragment(anchor: &str) -> &str {
    anchor.rsplit_once('#').map_or(anchor, |(_, f)| f)
}

/// docs/checks.md, generated.
pub fn docs_markdown() -> String {
    let mut out = String::new();
    intro(&mut out);
    summary(&mut out);
    unknown_causes(&mut out);
    for &ty in ConditionType::ALL {
        condition_section(&mut out, ty);
    }
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
}

// `write!` into a String cannot fail: below, the results are ignored on purpose.

/// The title, what polarity means, and the table of conditions.
fn intro(w: &mut String) {
    let _ = writeln!(w, "# KarpenterHealth checks\n");
    let _ = writeln!(
        w,
        "<!-- Generated from the vocabulary table, crates/api/src/vocabulary.rs; do not \
         edit.\n     Regenerate: {REGENERATE} -->\n"
    );
    let _ = writeln!(
        w,
        "Every `KarpenterHealth` reports on one EC2NodeClass with the conditions below. All \
         conditions have **positive polarity**: `True` is healthy. `False` means a check ran and \
         proved a problem; `Unknown` means a check could not run (a fact could not be observed) \
         and is never reported as `False`. Warning findings appear in `status.findings` only and \
         never change a condition.\n"
    );

    let _ = writeln!(w, "## Conditions\n");
    let _ = writeln!(w, "| Condition | Polarity | `True` means | Feeds `Ready` |");
    let _ = writeln!(w, "|---|---|---|---|");
    for &ty in ConditionType::ALL {
        let feeds = if ty == ConditionType::Ready {
            "(summary)"
        } else {
            "yes"
        };
        let _ = writeln!(
            w,
            "| [`{ty}`](#{}) | positive | {} | {feeds} |",
            section(ty),
            text(ty.meaning())
        );
    }
}

/// How `Ready` folds the sub-conditions, and what kstatus reads.
fn summary(w: &mut String) {
    let _ = writeln!(w, "\n## The summary: `Ready`\n");
    let subs: Vec<String> = ConditionType::sub_conditions()
        .iter()
        .map(|t| format!("`{t}`"))
        .collect();
    let _ = writeln!(
        w,
        "`Ready` folds **every** sub-condition: {}. No sub-condition is informational.\n",
        subs.join(", ")
    );
    let _ = writeln!(
        w,
        "- `True` (`AllChecksPassed`) only if every sub-condition is `True`;"
    );
    let _ = writeln!(w, "- `False` if any sub-condition is `False`;");
    let _ = writeln!(w, "- otherwise `Unknown`.\n");
    let _ = writeln!(
        w,
        "When `Ready` is not `True`, its reason is the reason of the sub-conditions that decide \
         its status (the `False` ones, else the `Unknown` ones) when they share one, such as \
         `RestrictedLabelDomain` or `AwsUnavailable`, so `kubectl get karpenterhealth` names the \
         problem; `MultipleChecksFailed` or `MultipleChecksUnknown` when their reasons differ. \
         The message lists the `False` and `Unknown` sub-conditions with their reasons, and \
         `status.notReady` (the `NOT READY` column) their short names, `Unknown` ones marked \
         `?`.\n\n\
         **kstatus.** KarpenterHealth relies on kstatus' `Ready` fallback: `Ready` is always \
         present and is set to `False` or `Unknown` as well as `True`; there is no \
         `Reconciling`/`Stalled` pair. `status.observedGeneration` is the KarpenterHealth's own \
         `metadata.generation` when the operator wrote the status, as kstatus (Flux, cli-utils) \
         and Argo CD compare it, so `kubectl wait --for=condition=Ready kh/<name>` and GitOps \
         health checks read the object (`deploy/argocd/` ships Argo CD's health check). \
         `status.nodeClassGeneration` and every condition's `observedGeneration` carry the \
         EC2NodeClass `metadata.generation` the checks used, and `status.lastEvaluated` the time \
         of the last evaluation. A condition's `lastTransitionTime` moves only when its status \
         changes.\n"
    );
}

/// The shared reasons of `Unknown`, by the cause of the unobserved fact.
fn unknown_causes(w: &mut String) {
    let _ = writeln!(w, "## Why a condition is `Unknown`\n");
    let _ = writeln!(
        w,
        "Any sub-condition may be `Unknown` with one of these shared reasons:\n"
    );
    let _ = writeln!(w, "| Cause of the unobserved fact | Reason |");
    let _ = writeln!(w, "|---|---|");
    for (cause, text) in [
        (
            UnknownCause::AccessDenied,
            "access denied (AWS `AccessDenied`, Kubernetes 403)",
        ),
        (
            UnknownCause::Throttled,
            "throttled (`Throttling`, `RequestLimitExceeded`, 429)",
        ),
        (
            UnknownCause::Unavailable,
            "unreachable or failing (timeout, connection error, 5xx)",
        ),
        (
            UnknownCause::Unsupported,
            "the endpoint does not implement the call",
        ),
        (UnknownCause::NotObserved, "not observed yet"),
        (
            UnknownCause::OtherAccount,
            "in another AWS account, which this account's IAM cannot read",
        ),
    ] {
        let reason = unknown_reason(cause);
        let _ = writeln!(
            w,
            "| {text} | [`{reason}`](#{}) |",
            fragment(&reason.docs_anchor())
        );
    }
    let _ = writeln!(w);
    reason_list(w, |r| r.meta().scope == ReasonScope::AnySubCondition);
}

/// One condition: what `True` means, what it cannot see, its reasons (current and retired) and
/// its warnings.
fn condition_section(w: &mut String, ty: ConditionType) {
    let _ = writeln!(w, "## {ty}\n");
    let _ = writeln!(w, "<a id=\"{}\"></a>\n", section(ty));
    let _ = writeln!(
        w,
        "{} Polarity: positive (`True` is healthy).\n",
        text(ty.meaning())
    );
    if ty == ConditionType::Ready {
        let _ = writeln!(w, "See [The summary: `Ready`](#the-summary-ready).\n");
    }
    let _ = writeln!(
        w,
        "**Where its facts come from.** From the cluster: {}. From AWS: {}.\n",
        text(ty.cluster_facts()),
        text(ty.aws_facts())
    );
    if let Some(limits) = ty.cannot_see() {
        let _ = writeln!(w, "**What it cannot see.** {}\n", text(limits));
    }
    reason_list(w, |r| r.meta().scope == ReasonScope::Only(ty));
    for (reason, note) in ty.retired_reasons() {
        let _ = writeln!(w, "<a id=\"{}\"></a>\n", reason.to_ascii_lowercase());
        let _ = writeln!(w, "#### `{reason}` (retired)\n");
        let _ = writeln!(w, "- {}\n", text(note));
    }
    let warnings: Vec<Warning> = Warning::ALL
        .iter()
        .copied()
        .filter(|w| w.condition() == ty)
        .collect();
    if !warnings.is_empty() {
        let _ = writeln!(w, "Warning findings (never change the condition):\n");
        for warning in warnings {
            let _ = writeln!(w, "<a id=\"{}\"></a>\n", fragment(&warning.docs_anchor()));
            let _ = writeln!(w, "#### `{}` (warning)\n", warning.as_str());
            let _ = writeln!(w, "- Severity: Warning");
            let _ = writeln!(w, "- Meaning: {}", text(warning.meaning()));
            let _ = writeln!(w, "- Remediation: {}\n", text(warning.remediation()));
        }
    }
}

/// Table text is plain prose; `<cluster>` would otherwise be read as an HTML tag and vanish.
fn text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn section(ty: ConditionType) -> String {
    format!("condition-{}", ty.as_str().to_ascii_lowercase())
}

fn reason_list(w: &mut String, keep: impl Fn(Reason) -> bool) {
    for &reason in Reason::ALL.iter().filter(|r| keep(**r)) {
        let meta = reason.meta();
        let _ = writeln!(w, "<a id=\"{}\"></a>\n", fragment(&reason.docs_anchor()));
        let _ = writeln!(w, "#### `{reason}`\n");
        let _ = writeln!(w, "- Status: `{}`", meta.status);
        let _ = writeln!(w, "- Meaning: {}", text(meta.meaning));
        let _ = writeln!(w, "- Remediation: {}", text(meta.remediation));
        match reason.lab() {
            Some(Lab::Proven(test)) => {
                let _ = writeln!(
                    w,
                    "- Against the real Karpenter: proven in the lab, `e2e/tests/{test}`"
                );
            }
            Some(Lab::NotProven(why)) => {
                let _ = writeln!(w, "- Against the real Karpenter: not proven; {}", text(why));
            }
            None => {}
        }
        let _ = writeln!(w);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_retired_reason_is_no_current_reason_and_keeps_its_anchor() {
        let docs = docs_markdown();
        let retired = ConditionType::ALL
            .iter()
            .flat_map(|ty| ty.retired_reasons());
        for (retired, _) in retired {
            assert!(
                Reason::ALL.iter().all(|r| r.to_string() != *retired),
                "{retired}"
            );
            let anchor = format!("<a id=\"{}\"></a>", retired.to_ascii_lowercase());
            assert_eq!(docs.matches(&anchor).count(), 1, "{retired}");
        }
    }

    #[test]
    fn every_reason_and_warning_has_its_anchor_and_remediation_in_the_docs() {
        let docs = docs_markdown();
        for reason in Reason::ALL {
            let anchor = format!("<a id=\"{}\"></a>", fragment(&reason.docs_anchor()));
            assert_eq!(docs.matches(&anchor).count(), 1, "{reason}");
            assert!(docs.contains(&text(reason.meta().remediation)), "{reason}");
        }
        for warning in Warning::ALL {
            let anchor = format!("<a id=\"{}\"></a>", fragment(&warning.docs_anchor()));
            assert_eq!(docs.matches(&anchor).count(), 1, "{warning:?}");
        }
        for ty in ConditionType::ALL {
            assert!(docs.contains(&format!("## {ty}\n")), "{ty}");
        }
    }

    #[test]
    fn warning_codes_never_collide_with_reasons() {
        for warning in Warning::ALL {
            assert!(Reason::parse(warning.as_str()).is_none(), "{warning:?}");
            assert!(!warning.meaning().is_empty() && !warning.remediation().is_empty());
        }
    }
}
