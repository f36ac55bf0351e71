//! Generates docs/checks.md from the vocabulary table (conditions, reasons, warnings, what each
//! check cannot see), so the reference cannot drift from the code. Pure: builds a string, no IO
//! (a test compares it with the committed file).

use crate::facts::UnknownCause;
use crate::verdict::unknown_reason;
use crate::warnings::Warning;
use karpenter_health_api::conditions::ReasonScope;
use karpenter_health_api::vocabulary::{Lab, ORACLE_RELEASES, Oracle};
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
    accepted_findings(&mut out);
    iam_scoping(&mut out);
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
        "<!-- Generated from the vocabulary table, crates/api/src/vocabulary/table/; do not \
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
    reason_list(w, |r| {
        r.meta().scope == ReasonScope::AnySubCondition
            && r.meta().status == karpenter_health_api::ConditionStatus::Unknown
    });
}

/// How an accepted finding shows: the one shared reason that is `True`.
fn accepted_findings(w: &mut String) {
    let _ = writeln!(
        w,
        "## Accepted findings
"
    );
    let _ = writeln!(
        w,
        "A finding a check proved (the reason of a `False`, or a warning) can be accepted until a \
         date, with a reason: by the annotation `accept.karpenter-health.io/<Reason>: \
         \"<until>: <why>\"` on the EC2NodeClass, or by a fleet rule of the operator \
         (`--acceptances`, the chart's `acceptances.rules`). Until then it is listed in \
         `status.accepted` and does not count: the condition is `True` with the reason below, \
         `Ready` is `True` with [`PassedWithAcceptedFindings`](#passedwithacceptedfindings), and \
         no alert fires. An `Unknown` cannot be accepted. The warnings `AcceptanceInvalid`, \
         `AcceptanceExpired` and `AcceptanceUnused` (under `Ready`) report acceptances that \
         accept nothing.\n"
    );
    reason_list(w, |r| {
        r.meta().scope == ReasonScope::AnySubCondition
            && r.meta().status == karpenter_health_api::ConditionStatus::True
    });
}

/// What each statement of the operator's IAM policy (`karpenter_health_aws::policy`, printed by
/// `karpenter-health iam-policy`) grants, and which verdict a grant narrower than the setup
/// needs turns `AwsAccessDenied`. Rows name the statements by `Sid`; a test in the AWS crate
/// keeps them in step with the policy.
const IAM_SCOPING: &[(&str, &str, &str)] = &[
    (
        "RegionalReadsWithoutResource",
        "EC2 `Describe*` and EBS defaults, EventBridge `ListEventBuses`/`ListRuleNamesByTarget` on `*`, only in the cluster's region (`aws:RequestedRegion`; none with `--region '*'`)",
        "these calls take no resource, so nothing narrower exists; another region turns `SubnetsReady`, `SecurityGroupsReady`, `NodeNetworkReady`, `ClusterIdentityUnique`, `InstanceTypesAvailable`, `AmisResolvable`, `CapacityReservationsUsable`, `VolumeEncryptionReady` and `InterruptionHandlingReady` Unknown",
    ),
    (
        "GlobalReadsWithoutResource",
        "IAM `ListOpenIDConnectProviders`, STS `GetCallerIdentity` on `*` (IAM and STS are signed for the global region, so no region condition)",
        "without the provider list `ControllerCanLaunch` cannot tell an IRSA role's provider exists",
    ),
    (
        "ReadRoles",
        "IAM `GetRole`, `ListRolePolicies`, `GetRolePolicy`, `ListAttachedRolePolicies` on the account's roles",
        "node roles, the controller's and the VPC CNI's may have any name and path; a grant on one path turns `NodeRoleReady`, `ControllerCanLaunch`, `SpotReady` (the Spot service-linked role) or `NodeNetworkReady` Unknown for a role outside it",
    ),
    (
        "ReadInstanceProfiles",
        "IAM `GetInstanceProfile` on the account's instance profiles",
        "a profile outside a narrower grant turns `InstanceProfileReady` Unknown",
    ),
    (
        "ReadManagedPolicies",
        "IAM `GetPolicy`, `GetPolicyVersion` on the account's and AWS's managed policies",
        "`NodeRoleReady` and the controller's own-policy reading (when the simulator cannot be asked) become Unknown",
    ),
    (
        "SimulateTheKarpenterControllerRoleOnly",
        "IAM `SimulatePrincipalPolicy` on the Karpenter controller role only (`--controller-role`, default `KarpenterController*`)",
        "a controller role the pattern misses is not simulated: `ControllerCanLaunch` then judges from the role's own policies, which cannot show service control policies (some decisions are `PolicyUndecided`), and `VolumeEncryptionReady` is Unknown for a customer-managed key whose policy leaves the controller's use to IAM policies",
    ),
    (
        "ReadThisCluster",
        "EKS `DescribeCluster`, `ListAccessEntries`, `ListPodIdentityAssociations` on this cluster (with Pod Identity: the cluster the session tag `eks-cluster-name` names)",
        "any other cluster is refused; this one's refusal turns most conditions Unknown",
    ),
    (
        "ReadThisClustersAccessEntries",
        "EKS `DescribeAccessEntry` on this cluster's access entries",
        "`NodeRoleMapped` Unknown for a cluster that maps nodes by access entry",
    ),
    (
        "ReadThisClustersPodIdentityAssociations",
        "EKS `DescribePodIdentityAssociation` on this cluster's associations",
        "`ControllerCanLaunch` and `NodeNetworkReady` Unknown where Pod Identity gives the role",
    ),
    (
        "ReadTheInterruptionQueue",
        "SQS `GetQueueUrl`, `GetQueueAttributes` on the interruption queue (`--interruption-queue`, default: named after the cluster)",
        "a queue named otherwise than the policy says turns `InterruptionHandlingReady` Unknown: print the policy with `--interruption-queue`",
    ),
    (
        "ReadInterruptionRules",
        "EventBridge `DescribeRule` on the account's rules in the region",
        "`InterruptionHandlingReady` Unknown for rules outside a narrower grant",
    ),
    (
        "ReadVolumeKeys",
        "KMS `DescribeKey`, `GetKeyPolicy`, `ListGrants` on the account's keys in the region",
        "a key of another account (cross-account EBS or queue encryption) turns `VolumeEncryptionReady` or `InterruptionHandlingReady` Unknown; add its ARN to the statement to judge it",
    ),
    (
        "ReadEc2Quotas",
        "Service Quotas `GetServiceQuota` on EC2's quotas in the region",
        "`LimitsLeaveRoom` leaves the vCPU quotas out of its judgement (it blames only what it read)",
    ),
    (
        "ResolveAmiAliases",
        "SSM `GetParameter` on AWS's public parameters (`parameter/aws/service/*`), as Karpenter's own policy grants it; never the account's own parameters",
        "none: an alias resolves only through public parameters",
    ),
];

fn iam_scoping(w: &mut String) {
    let _ = writeln!(
        w,
        "## The operator's IAM policy, and what each scoping costs
"
    );
    let _ = writeln!(
        w,
        "`karpenter-health iam-policy --cluster-name <name> --account-id <id> --region <region>` \
         prints the policy for one cluster; `--pod-identity` prints one role's policy for many \
         clusters, each EKS Pod Identity session seeing only the cluster its \
         `eks-cluster-name` session tag names. `deploy/iam-policy.json` and \
         `deploy/iam-policy-pod-identity.json` hold the same with `${{AWS_PARTITION}}`, \
         `${{AWS_ACCOUNT_ID}}`, `${{AWS_REGION}}` and `${{CLUSTER_NAME}}` placeholders \
         (for `envsubst`). A grant narrower than a setup needs never turns a condition \
         False: the read is refused and the condition is [`AwsAccessDenied`](#awsaccessdenied).\n"
    );
    let _ = writeln!(w, "| Statement | Grants | A narrower grant costs |");
    let _ = writeln!(w, "|---|---|---|");
    for (sid, grants, costs) in IAM_SCOPING {
        let _ = writeln!(w, "| `{sid}` | {grants} | {costs} |");
    }
    let _ = writeln!(w);
}

/// The statements [`IAM_SCOPING`] describes, by `Sid`.
pub fn iam_scoping_statements() -> impl Iterator<Item = &'static str> {
    IAM_SCOPING.iter().map(|(sid, _, _)| *sid)
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
                    "- Against the real Karpenter: proven in the lab, `e2e/tests/lab/{test}`"
                );
            }
            Some(Lab::ProvenWithin(test, releases)) => {
                let _ = writeln!(
                    w,
                    "- Against the real Karpenter: proven in the lab, `e2e/tests/lab/{test}` ({})",
                    text(releases)
                );
            }
            Some(Lab::NotProven(why)) => {
                let _ = writeln!(w, "- Against the real Karpenter: not proven; {}", text(why));
            }
            None => {}
        }
        match reason.oracle() {
            Some(Oracle::Checked) => {
                let _ = writeln!(
                    w,
                    "- Against Karpenter's scheduler: checked on generated clusters (`make \
                     oracle`), Karpenter {}",
                    ORACLE_RELEASES.join(" and ")
                );
            }
            Some(Oracle::NotChecked(why)) => {
                let _ = writeln!(
                    w,
                    "- Against Karpenter's scheduler: not checked; {}",
                    text(why)
                );
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
