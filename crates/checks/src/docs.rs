//! Generates docs/checks.md from the condition, reason and warning tables, so the reference
//! cannot drift from the code. Pure: builds a string, no IO (a test compares it with the
//! committed file).

use crate::facts::UnknownCause;
use crate::lab_coverage::Lab;
use crate::verdict::unknown_reason;
use crate::warnings::Warning;
use karpenter_health_api::conditions::ReasonScope;
use karpenter_health_api::{ConditionType, Reason};
use std::fmt::Write;

/// The command that regenerates docs/checks.md.
pub const REGENERATE: &str =
    "cargo run -q -p karpenter-health-checks --example gen-docs > docs/checks.md";

/// The fragment of a `docs_anchor` (`docs/checks.md#fragment`).
fn fragment(anchor: &str) -> &str {
    anchor.rsplit_once('#').map_or(anchor, |(_, f)| f)
}

/// Reasons earlier releases set and this one no longer does, by condition, with what replaced
/// them: an alert raised by a leader still running one during an upgrade links here.
const RETIRED: &[(ConditionType, &str, &str)] = &[(
    ConditionType::DriftCanBeReplaced,
    "DriftBlockedByBudget",
    "Was `False` when every NodePool of the class had a budget always in force of 0 nodes for drift. Such a budget is how Karpenter's docs switch drift off, and the NodeClaims still expire, so it is now the warning `DriftHeldByBudget`, judged per NodePool, and the condition stays `True`.",
)];

/// What each check cannot see from where the operator stands: never a reason to say `False`,
/// and named here so a `True` is read for what it is.
const NOT_SEEN: &[(ConditionType, &str)] = &[
    (
        ConditionType::NodeRoleMapped,
        "Access entries created for a role that was re-created later (bound to the old role's id) look valid from the API.",
    ),
    (
        ConditionType::ControllerCanLaunch,
        "Request keys only Karpenter's real call carries (instance types, the image's owner): a decision that needed one is Unknown. Of Karpenter's regional reads only ec2:DescribeImages is asked: a denial of its other Describe calls (subnets, security groups, instance types) is not seen. Roles in other accounts (an IRSA role or a Pod Identity target role elsewhere) are not read (Unknown `AwsOtherAccount`). Without IAM's simulator, service control policies are not visible. Classes whose questions differ only in the names Karpenter tags with (EC2NodeClass, NodePool, the instance profile it makes) share IAM's answer when the controller's own policies cannot tell those names apart and IAM allowed every question the check reads: a service control policy that treats EC2NodeClasses or NodePools differently by name alone is missed for the second class (a denial the check reads is never shared). The alias's parameter is asked for one architecture and variant (x86_64 standard for AL2023): a policy granting only some of Karpenter's paths may deny others; it is not asked while the cluster's Kubernetes version is unknown.",
    ),
    (
        ConditionType::InterruptionHandlingReady,
        "Rules in other accounts that forward AWS's events to a custom bus here; EventBridge rule content filters beyond source and detail-type. Kinds of events the class's nodes cannot get yet (spot without spot NodePools, capacity reservations without reservations) are warnings.",
    ),
    (
        ConditionType::SubnetsReady,
        "Which instance types Karpenter will pick (the warm pool of the VPC CNI's default mode depends on them; 16 addresses are assumed); Cilium's ENI mode, which takes Pod addresses from VPC subnets. Only what a node needs for certain (one address, two where Pods take theirs from the node's subnet) makes it False.",
    ),
    (
        ConditionType::NodeNetworkReady,
        "Anything past a route's target: transit gateways, peering, appliances and inspection endpoints (Gateway Load Balancer, Network Firewall) are not followed; security groups and network ACLs on the path; NAT gateways and endpoints that the owner of a shared (RAM) VPC holds.",
    ),
    (
        ConditionType::VolumeEncryptionReady,
        "Key policies of keys in other accounts (GetKeyPolicy is denied across accounts); the controller role's IAM permissions on a key without IAM's simulator; encryption-context constraints of grants.",
    ),
    (
        ConditionType::InstanceTypesAvailable,
        "Requirements on keys it does not derive (GPU, accelerator, network, EBS bandwidth, hypervisor, zone id, OS), and unknown operators: they never remove a type, so a NodePool emptied only by them stays True; minValues is counted on the modelled keys only, under the Strict policy (a BestEffort or unread MIN_VALUES_POLICY never fails it). Reserved capacity is taken as offered only for the instance types and zones of the class's capacity reservations that are not expiring, once Karpenter's status lists them for the current generation with its ReservedCapacity gate on; otherwise (no usable reservation at all, which CapacityReservationsUsable judges, or not known) it is assumed available, and a reservation's available count is not read. Which types Karpenter would also drop (price, pods per node, kubelet reservations, insufficient capacity). An instance type AWS added since the catalog was read (at most 6 h ago, sooner on evidence about the class). Which NodePool a pending Pod may go to is judged from its node selector, required affinity and tolerations against each NodePool's taints, labels and requirements, never stricter than Karpenter (labels under Kubernetes, Karpenter and AWS-provider domains are taken as well-known, Gt and Lt admit everything); topology spread, Pod affinity, volumes and resources are not weighed, so a Pod another NodePool could not really take may leave an empty NodePool a warning.",
    ),
    (
        ConditionType::DriftCanBeReplaced,
        "Budgets whose schedule has lists, ranges, steps or month names (when they open is not computed: they are assumed to open), percentages above 0 that round to 0 on small NodePools, Pods annotated karpenter.sh/do-not-disrupt and PodDisruptionBudgets that block drift unless Karpenter's own DisruptionBlocked Events name them (Pods on nodes are not watched); what holds a terminating NodeClaim is read only once it has been terminating for KH_TERMINATING_LONG_AFTER, for at most 20 Nodes, and is up to a refresh interval old; a Pod whose fate depends on the Karpenter version is not judged while the version is unknown; eviction failures other than PodDisruptionBudgets (admission webhooks refusing the eviction, Pods a kubelet no longer reports) show only as Pods waiting. A drifted NodeClaim without the karpenter.sh/nodepool label, or whose NodePool is gone, is never said to be held by a budget.",
    ),
    (
        ConditionType::AmisResolvable,
        "Selector terms by ssmParameter (the parameter is not read); images whose name is not an official EKS build's (a build of one's own is never judged against amiFamily); when a deprecated image will be deregistered. EC2's answer about the images is up to an hour old (the account family), sooner on evidence (an edit of the class, a change of Karpenter's AMIsReady); images behind name and tag terms that EC2 drops are Karpenter's to replace, so they are only a warning. The controller's permissions to read the alias's parameter and to describe images are asked under ControllerCanLaunch. An alias Karpenter refuses at the cluster's version (al2 from 1.33, windows2025 before 1.35) is False only when the installed Karpenter refuses it (1.6, 1.9 and later) or its AMIsReady says UnsupportedAlias; with an older or unknown version it is judged by what its parameters resolve.",
    ),
    (
        ConditionType::CapacityReservationsUsable,
        "The selected reservations come from Karpenter's answer (status.capacityReservations), not EC2: a reservation that ended since Karpenter's last resolution (within a minute) is not seen. Whether a selected reservation's instance type is one a NodePool allows is InstanceTypesAvailable's to say; the selected reservations' available count is not read. Open reservations of other accounts shared with this one, open reservations bought within the hour (the account family's period), and open reservations another EC2NodeClass selects (their status is not read with this class's).",
    ),
    (
        ConditionType::LimitsLeaveRoom,
        "Memory left below the smallest type (Karpenter's memory capacity is below the nominal size by an overhead not read), and resources other than cpu, memory and nodes (limits.nodes stops a NodePool at its count from Karpenter 1.11; with an older or unknown version only once the count is past it); vCPUs the account runs outside this cluster (the count is a lower bound); quotas of non-standard families (G, P, X, U, Inf, Trn, DL, HPC, Mac) and of reserved capacity. Which NodePools a waiting Pod may go to is judged from its node selector, required affinity and tolerations against each NodePool's taints, labels and requirements, never stricter than Karpenter; topology spread, Pod affinity, volumes and what fits beside other Pods are not weighed. Karpenter's Nominated Events are not read: a Pod counts once it has been unschedulable for KH_WAITING_ON_LIMITS_AFTER with no NodeClaim of the class registering, so a blocked Pod is False that much later, and not while another NodeClaim of the class registers.",
    ),
];

/// docs/checks.md, generated.
pub fn docs_markdown() -> String {
    let mut out = String::new();
    // `write!` into a String cannot fail; the results are ignored on purpose.
    let w = &mut out;
    let _ = writeln!(w, "# KarpenterHealth checks\n");
    let _ = writeln!(
        w,
        "<!-- Generated from crates/api/src/conditions.rs and crates/checks/src/warnings.rs; do \
         not edit.\n     Regenerate: {REGENERATE} -->\n"
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

    for &ty in ConditionType::ALL {
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
        if let Some((_, limits)) = NOT_SEEN.iter().find(|(t, _)| *t == ty) {
            let _ = writeln!(w, "**What it cannot see.** {}\n", text(limits));
        }
        reason_list(w, |r| r.meta().scope == ReasonScope::Only(ty));
        for (_, reason, note) in RETIRED.iter().filter(|(t, _, _)| *t == ty) {
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
    out.truncate(out.trim_end().len());
    out.push('\n');
    out
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
        match crate::lab_coverage::lab(reason) {
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
    fn the_committed_docs_match_the_generated_docs() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/checks.md");
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == docs_markdown(),
            "docs/checks.md is stale or missing; regenerate it from the repository root with:\n  \
             {REGENERATE}"
        );
    }

    #[test]
    fn a_retired_reason_is_no_current_reason_and_keeps_its_anchor() {
        let docs = docs_markdown();
        for (_, retired, _) in RETIRED {
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
