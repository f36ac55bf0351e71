//! `LabelsAllowed`: no NodePool label or requirement, and no pending Pod's node selector or
//! affinity key, is in a label domain the installed Karpenter rejects. Pure: no IO.
//!
//! Pod keys matter because Karpenter copies them, whatever the operator (`NotIn` and
//! `DoesNotExist` included), into NodeClaim requirements (aws/karpenter-provider-aws #7069, #8022).
//! A rejected key the Pod always carries (its node selector, or every required affinity term)
//! fails every class whose NodePools could take the Pod, since whichever Karpenter picks, the
//! NodeClaim is rejected; one only some terms or preferences carry fails only a class that alone
//! could take the Pod, and is a warning elsewhere. With the version unknown, a key rejected by
//! every version still fails; a key only some versions reject makes the condition Unknown.

use crate::clip;
use crate::facts::Observed;
use crate::labels::{KeyContext, LabelRules};
use crate::plan::Context;
use crate::verdict::{Check, MAX_SUBJECTS, Outcome, Rule, Why};
use crate::warnings::Warning;
use crate::wording::list_bounded;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use std::collections::BTreeMap;

/// One key used by one object.
struct KeyUse {
    subject: SubjectRef,
    key: String,
    context: KeyContext,
    /// A rejected key here breaks this class for certain (a NodePool of it, or a Pod only its
    /// NodePools could take); otherwise Karpenter may choose another class, and it is a warning.
    decisive: bool,
}

fn key_uses(ctx: &Context) -> Vec<KeyUse> {
    let cluster = &ctx.facts.cluster;
    let mut uses = Vec::new();
    for pool in cluster.node_pools.found().into_iter().flatten() {
        let subject = SubjectRef::new(
            "NodePool",
            pool.metadata.name.as_deref().unwrap_or_default(),
        );
        let template = &pool.spec.template;
        for key in template.metadata.labels.keys() {
            uses.push(KeyUse {
                subject: subject.clone(),
                key: key.clone(),
                context: KeyContext::NodePoolLabel,
                decisive: true,
            });
        }
        for req in &template.spec.requirements {
            uses.push(KeyUse {
                subject: subject.clone(),
                key: req.key.clone(),
                context: KeyContext::Requirement,
                decisive: true,
            });
        }
    }
    for pod in cluster.pending_pods.found().into_iter().flatten() {
        let subject = SubjectRef::namespaced("Pod", pod.namespace.as_str(), pod.name.as_str());
        // Keys every NodeClaim for the Pod carries, whichever NodePool and class Karpenter picks:
        // the node selector's, and those in every required term (terms are ORed; Karpenter tries
        // them in turn). A rejected one fails every class that could take the Pod.
        let in_every_term = |key: &String| {
            !pod.required_affinity.is_empty()
                && pod
                    .required_affinity
                    .iter()
                    .all(|term| term.iter().any(|r| &r.key == key))
        };
        let affinity = pod
            .required_affinity
            .iter()
            .chain(&pod.preferred_affinity)
            .flatten();
        let keys = pod.node_selector.keys().chain(affinity.map(|r| &r.key));
        for key in keys {
            let certain = pod.node_selector.contains_key(key) || in_every_term(key);
            uses.push(KeyUse {
                subject: subject.clone(),
                key: key.clone(),
                context: KeyContext::Requirement,
                decisive: certain || pod.only_this_class,
            });
        }
    }
    uses
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::LabelsAllowed, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::LabelsAllowed, "labels");
    // A key proven rejected in what was observed fails; what was not observed keeps it from True.
    let cluster = &ctx.facts.cluster;
    if let Some(u) = cluster.node_pools.unobserved() {
        c.unknown(Why::unobserved("The NodePools of this EC2NodeClass", u));
    }
    if let Some(u) = cluster.pending_pods.unobserved() {
        c.unknown(Why::unobserved("The pending Pods", u));
    }
    let rules = rule_set(ctx);
    let judged = judge_key_uses(ctx, &rules.candidates);
    let rules_name = &rules.name;
    fail_rejected(ctx, &mut c, judged.rejected, rules_name);
    warn_rejected_elsewhere_too(ctx, &mut c, judged.rejected_elsewhere_too, rules_name);
    if !c.has_failed()
        && !judged.undecided.is_empty()
        && let Some(why) = &rules.open_because
    {
        let keys: Vec<String> = judged
            .undecided
            .keys()
            .map(|k| clip(k, 128).into_owned())
            .collect();
        c.unknown(Why::new(
            why.reason,
            format!(
                "Karpenter up to v1.8 rejects {}, v1.9 and later accept it; {}",
                list_bounded(&keys, 5),
                why.message
            ),
        ));
    }
    let ok_rules = &rules.ok_name;
    let ok_message = if c.has_warnings() {
        format!(
            "No NodePool uses a label key {ok_rules} rejects, and no pending Pod is certain to; \
             a Pod that may still carry one into a NodeClaim is a warning."
        )
    } else {
        format!("No NodePool or pending Pod uses a label key {ok_rules} rejects.")
    };
    c.finish(Reason::NoRestrictedLabels, ok_message)
}

/// The label rule sets that may be in force, why that is open if it is, and how the messages
/// name them.
struct RuleSet {
    candidates: Vec<LabelRules>,
    open_because: Option<Why>,
    /// For a finding: what rejects the key.
    name: String,
    /// For the True message.
    ok_name: String,
}

/// Which label rules decide: the installed CRD's own when it carries them, else the controller
/// version's, else every version's.
fn rule_set(ctx: &Context) -> RuleSet {
    // The installed CRD's own rules decide when it carries them; else the controller version.
    let from_crd = match &ctx.facts.cluster.crd_label_rules {
        Observed::Found(Some(rules)) => Some(*rules),
        _ => None,
    };
    // Why the rule set is open, if it is: the CRD could not be read (its rules, not the
    // controller's version, decide), or neither it nor the version is known.
    let open_because: Option<Why> = match (&ctx.facts.cluster.crd_label_rules, &ctx.version) {
        (Observed::Found(Some(_)), _) => None,
        (Observed::Unknown(u), _) => Some(Why::unobserved("The NodePool CRD's label rules", u)),
        (_, Err(why)) => Some(why.clone()),
        (_, Ok(_)) => None,
    };
    let candidates: Vec<LabelRules> = match (from_crd, &open_because, &ctx.version) {
        (Some(rules), _, _) => vec![rules],
        (None, None, Ok(v)) => vec![LabelRules::for_version(v)],
        _ => vec![LabelRules::UpTo1_8, LabelRules::From1_9],
    };
    let (name, ok_name) = match (from_crd, &open_because, &ctx.version) {
        (Some(_), _, _) => (
            "the installed NodePool CRD".to_owned(),
            "the installed NodePool CRD".to_owned(),
        ),
        (None, None, Ok(v)) => (format!("Karpenter {v}"), format!("Karpenter {v}")),
        _ => (
            "every Karpenter version".to_owned(),
            "any Karpenter version".to_owned(),
        ),
    };
    RuleSet {
        candidates,
        open_because,
        name,
        ok_name,
    }
}

/// subject -> key -> Karpenter's words.
type RejectedKeys = BTreeMap<SubjectRef, BTreeMap<String, &'static str>>;

/// The key uses judged against the candidate rule sets.
struct JudgedKeys {
    /// Keys every candidate rejects where that is decisive for this class.
    rejected: RejectedKeys,
    /// Decisive keys only some candidates reject, with who uses them.
    undecided: BTreeMap<String, Vec<SubjectRef>>,
    /// Rejected keys of Pods that other classes' NodePools could take as well.
    rejected_elsewhere_too: RejectedKeys,
}

/// Judges each key use against every candidate rule set.
fn judge_key_uses(ctx: &Context, candidates: &[LabelRules]) -> JudgedKeys {
    // subject -> key -> Karpenter's words, for keys every candidate rule set rejects.
    let mut rejected: RejectedKeys = BTreeMap::new();
    let mut undecided: BTreeMap<String, Vec<SubjectRef>> = BTreeMap::new();
    // Rejected keys of Pods that other classes' NodePools could take as well.
    let mut rejected_elsewhere_too: RejectedKeys = BTreeMap::new();
    for u in key_uses(ctx) {
        let verdicts: Vec<Option<&'static str>> = candidates
            .iter()
            .map(|rules| rules.restriction(&u.key, u.context))
            .collect();
        if let Some(why) = LabelRules::rejected_by_all(candidates, &u.key, u.context) {
            let into = if u.decisive {
                &mut rejected
            } else {
                &mut rejected_elsewhere_too
            };
            into.entry(u.subject).or_default().insert(u.key, why);
        } else if !u.decisive {
            // Which class Karpenter picks and which version decides are both open: nothing to say.
        } else if verdicts.iter().any(Option::is_some) {
            undecided.entry(u.key).or_default().push(u.subject);
        }
    }
    JudgedKeys {
        rejected,
        undecided,
        rejected_elsewhere_too,
    }
}

/// False for each NodePool with a rejected key, and for each group of Pods with the same
/// rejected keys.
fn fail_rejected(ctx: &Context, c: &mut Check, rejected: RejectedKeys, rules_name: &str) {
    // NodePools are few and each is reported alone; Pods come in replicas, so Pods with the
    // same rejected keys make one finding.
    let mut pod_groups: BTreeMap<Vec<(String, &'static str)>, Vec<SubjectRef>> = BTreeMap::new();
    for (subject, keys) in rejected {
        let keys: Vec<(String, &'static str)> = keys.into_iter().collect();
        if subject.kind == "NodePool" {
            c.fail(
                Reason::RestrictedLabelDomain,
                format!(
                    "NodePool {} uses {}, which {rules_name} rejects, so it cannot create \
                     NodeClaims.",
                    clip(&subject.name, 128),
                    describe(&keys)
                ),
                vec![ctx.node_class_subject(), subject],
            );
        } else {
            pod_groups.entry(keys).or_default().push(subject);
        }
    }
    for (keys, pods) in pod_groups {
        let names: Vec<String> = pods
            .iter()
            .map(|p| format!("{}/{}", p.namespace.as_deref().unwrap_or_default(), p.name))
            .map(|n| clip(&n, 128).into_owned())
            .collect();
        let mut subjects = vec![ctx.node_class_subject()];
        subjects.extend(pods.into_iter().take(MAX_SUBJECTS - 1));
        c.fail(
            Reason::RestrictedLabelDomain,
            format!(
                "Pending Pod(s) {} select on {}, which {rules_name} rejects in NodeClaim \
                 requirements, so Karpenter cannot provision for them.",
                list_bounded(&names, 3),
                describe(&keys)
            ),
            subjects,
        );
    }
}

/// A warning for each Pod other classes could take too that may carry a rejected key.
fn warn_rejected_elsewhere_too(
    ctx: &Context,
    c: &mut Check,
    rejected_elsewhere_too: RejectedKeys,
    rules_name: &str,
) {
    for (subject, keys) in rejected_elsewhere_too {
        let keys: Vec<(String, &'static str)> = keys.into_iter().collect();
        let name = format!(
            "{}/{}",
            subject.namespace.as_deref().unwrap_or_default(),
            subject.name
        );
        c.warn(
            Warning::RestrictedLabelOnSharedPod,
            format!(
                "Pending Pod {} may select on {} (in some required terms or its preferences), which \
                 {rules_name} rejects; NodePools of several EC2NodeClasses could take it, so if \
                 Karpenter uses that term, whichever class it picks cannot create the NodeClaim.",
                clip(&name, 128),
                describe(&keys)
            ),
            vec![ctx.node_class_subject(), subject],
        );
    }
}

fn describe(keys: &[(String, &'static str)]) -> String {
    let parts: Vec<String> = keys
        .iter()
        .map(|(key, why)| format!("{} ({why})", clip(key, 128)))
        .collect();
    list_bounded(&parts, 5)
}
