//! What holds a NodeClaim stuck terminating: of the Pods on its Node, those Karpenter's drain
//! waits for and what keeps each from leaving: a PodDisruptionBudget the eviction API would
//! refuse it under, a `karpenter.sh/do-not-disrupt` annotation Karpenter v1 does not evict
//! through, or its own grace period. Pure: no IO.
//!
//! Karpenter's rules (kubernetes-sigs/karpenter `pkg/utils/pod/scheduling.go`): the drain waits
//! for every Pod that is not terminal, not a mirror Pod, not tolerating the taint it drains
//! under, and not terminating for more than a minute past its deletion time (`IsDrainable`,
//! `IsStuckTerminating`); it evicts those that are active, and, from v1 on, not annotated
//! `karpenter.sh/do-not-disrupt` (`IsEvictable`; v0.37 evicted them). The eviction API's rules
//! (kubernetes `pkg/registry/core/pod/storage/eviction.go`): Pending Pods are never held by a
//! budget; a Pod selected by more than one budget is refused; a budget whose current generation
//! the disruption controller has not processed refuses; an unready Pod goes when the budget is
//! healthy (`IfHealthyBudget`, the default) or always (`AlwaysAllow`); otherwise a budget with no
//! disruption allowed refuses.
//!
//! Only what those rules prove is named: a Pod whose fate depends on a fact not read (the
//! Karpenter version, the budgets) is left unsaid, never guessed.

use crate::facts::{BudgetFacts, NodeDrain, Observed, PodOnNode};
use jiff::{SignedDuration, Timestamp};
use semver::Version;
use std::collections::BTreeMap;

/// How long past its deletion time Karpenter still waits for a terminating Pod
/// (`IsStuckTerminating`).
const STUCK_TERMINATING_AFTER: SignedDuration = SignedDuration::from_mins(1);

/// What holds one terminating NodeClaim, as far as its Node's Pods say.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Holding {
    /// What keeps a Pod Karpenter waits for from leaving, one sentence each.
    pub blockers: Vec<String>,
    /// Pods Karpenter waits for that nothing read holds back (their eviction should succeed).
    pub waiting: Vec<String>,
    /// Why some Pods could not be judged, when some could not.
    pub undecided: Option<String>,
}

/// The first Karpenter release that reads a duration in `karpenter.sh/do-not-disrupt` (the Pod
/// is protected for that long after it started; `pkg/utils/pod/scheduling.go`
/// `IsDoNotDisruptActive`); before, only `"true"` counts.
const DURATION_DO_NOT_DISRUPT: Version = Version::new(1, 12, 0);

/// A duration as Go's `time.ParseDuration` reads it (`30m`, `1h30m`, `1.5h`, `90s`), if it is
/// one and positive: Karpenter treats anything else as no annotation (`parseDoNotDisrupt`).
fn go_duration(text: &str) -> Option<SignedDuration> {
    crate::go::parse_duration(text).filter(SignedDuration::is_positive)
}

/// What holds the drain of `drain`'s Node at `now`, for the installed Karpenter's `version`
/// (`None`: unknown).
pub fn what_holds(drain: &NodeDrain, version: Option<&Version>, now: Timestamp) -> Holding {
    let mut holding = Holding::default();
    let mut undecided: Vec<String> = Vec::new();
    for pod in &drain.pods {
        match pod_hold(pod, drain, version, now) {
            PodHold::Free => {}
            PodHold::Blocker(why) => holding.blockers.push(why),
            PodHold::Waiting(name) => holding.waiting.push(name),
            PodHold::Undecided(why) => undecided.push(why),
        }
    }
    holding.undecided = (!undecided.is_empty()).then(|| undecided.join("; "));
    holding
}

/// How one Pod bears on a drain.
enum PodHold {
    /// It does not hold the drain.
    Free,
    /// It holds the drain: why.
    Blocker(String),
    /// Karpenter may evict it and waits for it to go: its name.
    Waiting(String),
    /// Whether it holds the drain depends on what is not known: why.
    Undecided(String),
}

/// Whether `pod` holds the drain: not when finished, a mirror Pod or tolerating the drain
/// taint; else while terminating, protected by karpenter.sh/do-not-disrupt, or refused
/// eviction by a PodDisruptionBudget.
fn pod_hold(
    pod: &PodOnNode,
    drain: &NodeDrain,
    version: Option<&Version>,
    now: Timestamp,
) -> PodHold {
    let karpenter_v1 = version.map(|v| v.major >= 1);
    let name = format!("{}/{}", pod.namespace, pod.name);
    if matches!(pod.phase.as_str(), "Succeeded" | "Failed") || pod.mirror {
        return PodHold::Free;
    }
    let tolerates = match karpenter_v1 {
        Some(true) => Some(pod.tolerates_disrupted),
        Some(false) => Some(pod.tolerates_disrupting),
        None if pod.tolerates_disrupted == pod.tolerates_disrupting => {
            Some(pod.tolerates_disrupted)
        }
        None => None,
    };
    match tolerates {
        Some(true) => return PodHold::Free,
        Some(false) => {}
        None => {
            return PodHold::Undecided(format!(
                "Pod {name} tolerates one of Karpenter's drain taints, and which one this \
                 Karpenter uses depends on its version, which is unknown"
            ));
        }
    }
    if let Some(until) = pod.deleting_until {
        if now.duration_since(until) > STUCK_TERMINATING_AFTER {
            return PodHold::Free;
        }
        return PodHold::Blocker(format!(
            "Pod {name} is terminating, its grace period ending {}",
            crate::wording::at(until)
        ));
    }
    if let Some(hold) = do_not_disrupt_hold(pod, &name, version, now) {
        return hold;
    }
    match refusal(pod, &drain.budgets) {
        Refusal::Refused(why) => PodHold::Blocker(why),
        Refusal::Allowed => PodHold::Waiting(name),
        Refusal::Unread(why) => PodHold::Undecided(why),
    }
}

/// Whether `pod`'s karpenter.sh/do-not-disrupt annotation decides its hold on the drain (a
/// duration from Karpenter 1.12, `true` from v1); `None` when it does not.
fn do_not_disrupt_hold(
    pod: &PodOnNode,
    name: &str,
    version: Option<&Version>,
    now: Timestamp,
) -> Option<PodHold> {
    let karpenter_v1 = version.map(|v| v.major >= 1);
    // A duration protects the Pod for that long after it started, from Karpenter 1.12; an
    // invalid value, or a duration before 1.12, is no annotation.
    let protection = match pod.do_not_disrupt.as_deref() {
        None => None,
        Some("true") => Some(None),
        Some(other) => go_duration(other).map(|d| Some((other, d))),
    };
    if let Some(Some((written, d))) = protection {
        let until = pod.started.map(|s| s + d);
        match version.map(|v| *v >= DURATION_DO_NOT_DISRUPT) {
            Some(true) if until.is_none_or(|u| now < u) => {
                return Some(PodHold::Blocker(match until {
                    Some(until) => format!(
                        "Pod {name} is annotated karpenter.sh/do-not-disrupt: {written}, which \
                         Karpenter does not evict through until {}",
                        crate::wording::at(until)
                    ),
                    None => format!(
                        "Pod {name} is annotated karpenter.sh/do-not-disrupt: {written} and \
                         has no start time, which Karpenter does not evict through"
                    ),
                }));
            }
            Some(_) => {}
            None => {
                return Some(PodHold::Undecided(format!(
                    "Pod {name} is annotated karpenter.sh/do-not-disrupt: {written}, a \
                     duration Karpenter honours from 1.12 on, and this Karpenter's version is \
                     unknown"
                )));
            }
        }
    }
    if protection == Some(None) {
        match karpenter_v1 {
            Some(true) => {
                return Some(PodHold::Blocker(format!(
                    "Pod {name} is annotated karpenter.sh/do-not-disrupt, which Karpenter \
                     does not evict through"
                )));
            }
            Some(false) => {}
            None => {
                return Some(PodHold::Undecided(format!(
                    "Pod {name} is annotated karpenter.sh/do-not-disrupt, which holds the \
                     drain from Karpenter v1 on, and this Karpenter's version is unknown"
                )));
            }
        }
    }
    None
}

enum Refusal {
    Refused(String),
    Allowed,
    Unread(String),
}

/// Whether the eviction API refuses to evict `pod` for its PodDisruptionBudgets, and why.
fn refusal(pod: &PodOnNode, budgets: &Observed<BTreeMap<String, BudgetFacts>>) -> Refusal {
    let name = format!("{}/{}", pod.namespace, pod.name);
    // The eviction API deletes Pending Pods without asking any budget.
    if pod.phase == "Pending" {
        return Refusal::Allowed;
    }
    let budgets = match budgets {
        Observed::Found(budgets) => budgets,
        Observed::Absent => return Refusal::Allowed,
        Observed::Unknown(u) => {
            return Refusal::Unread(format!(
                "the PodDisruptionBudgets of Pod {name} could not be read ({u})"
            ));
        }
    };
    match pod.budgets.as_slice() {
        [] => Refusal::Allowed,
        [one] => {
            let Some(budget) = budgets.get(one) else {
                return Refusal::Unread(format!(
                    "PodDisruptionBudget {one} of Pod {name} was not in the list"
                ));
            };
            // In the eviction API's order: an unready Pod the budget lets go is deleted before
            // the budget's generation or count is looked at.
            let unready_goes = !pod.ready
                && (budget.unhealthy_pod_eviction_policy.as_deref() == Some("AlwaysAllow")
                    || (budget.desired_healthy > 0
                        && budget.current_healthy >= budget.desired_healthy));
            if unready_goes {
                return Refusal::Allowed;
            }
            if budget.unprocessed {
                return Refusal::Refused(format!(
                    "PodDisruptionBudget {one} has not been processed by the disruption \
                     controller since its last change, so no eviction of Pod {name} is allowed"
                ));
            }
            if budget.disruptions_allowed > 0 {
                Refusal::Allowed
            } else {
                Refusal::Refused(format!(
                    "PodDisruptionBudget {one} allows no eviction of Pod {name} ({} healthy, {} \
                     desired)",
                    budget.current_healthy, budget.desired_healthy
                ))
            }
        }
        several => Refusal::Refused(format!(
            "Pod {name} is selected by {} PodDisruptionBudgets ({}), and the eviction API \
             refuses to evict a Pod with more than one",
            several.len(),
            several.join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: Version = Version::new(1, 8, 6);
    const V0: Version = Version::new(0, 37, 0);

    fn now() -> Timestamp {
        "2026-11-25T12:00:00Z".parse().expect("a time")
    }

    fn pod(name: &str) -> PodOnNode {
        PodOnNode {
            namespace: "shop".into(),
            name: name.into(),
            phase: "Running".into(),
            ready: true,
            ..PodOnNode::default()
        }
    }

    fn budget(allowed: i64, healthy: i64, desired: i64) -> BudgetFacts {
        BudgetFacts {
            disruptions_allowed: allowed,
            current_healthy: healthy,
            desired_healthy: desired,
            ..BudgetFacts::default()
        }
    }

    fn drain(pods: Vec<PodOnNode>, budgets: &[(&str, BudgetFacts)]) -> NodeDrain {
        NodeDrain {
            node: Some("node-a".into()),
            pods,
            budgets: Observed::Found(
                budgets
                    .iter()
                    .map(|(n, b)| ((*n).to_owned(), b.clone()))
                    .collect(),
            ),
        }
    }

    fn with_budgets(mut pod: PodOnNode, budgets: &[&str]) -> PodOnNode {
        pod.budgets = budgets.iter().map(|b| (*b).to_owned()).collect();
        pod
    }

    #[test]
    fn a_budget_with_no_disruption_allowed_holds_a_ready_pod() {
        let d = drain(
            vec![with_budgets(pod("web-1"), &["shop/web"])],
            &[("shop/web", budget(0, 1, 1))],
        );
        let holding = what_holds(&d, Some(&V1), now());
        assert_eq!(holding.blockers.len(), 1, "{holding:?}");
        assert!(
            holding.blockers[0]
                .contains("PodDisruptionBudget shop/web allows no eviction of Pod shop/web-1"),
            "{holding:?}"
        );
        // The same budget allowing one: the eviction goes through, the Pod only waits.
        let d = drain(
            vec![with_budgets(pod("web-1"), &["shop/web"])],
            &[("shop/web", budget(1, 2, 1))],
        );
        let holding = what_holds(&d, Some(&V1), now());
        assert!(holding.blockers.is_empty(), "{holding:?}");
        assert_eq!(holding.waiting, ["shop/web-1"]);
    }

    #[test]
    fn an_unready_pod_leaves_under_a_healthy_budget_or_always_allow() {
        let unready = PodOnNode {
            ready: false,
            ..with_budgets(pod("web-2"), &["shop/web"])
        };
        // Healthy budget (2 of 2 desired): the eviction API lets the unready Pod go.
        let holding = what_holds(
            &drain(vec![unready.clone()], &[("shop/web", budget(0, 2, 2))]),
            Some(&V1),
            now(),
        );
        assert!(holding.blockers.is_empty(), "{holding:?}");
        // Unhealthy budget: refused, unless its policy is AlwaysAllow.
        let holding = what_holds(
            &drain(vec![unready.clone()], &[("shop/web", budget(0, 1, 2))]),
            Some(&V1),
            now(),
        );
        assert_eq!(holding.blockers.len(), 1, "{holding:?}");
        let always = BudgetFacts {
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            ..budget(0, 1, 2)
        };
        let holding = what_holds(
            &drain(vec![unready], &[("shop/web", always)]),
            Some(&V1),
            now(),
        );
        assert!(holding.blockers.is_empty(), "{holding:?}");
    }

    #[test]
    fn two_budgets_or_an_unprocessed_one_refuse_every_eviction() {
        let d = drain(
            vec![with_budgets(pod("web-1"), &["shop/a", "shop/b"])],
            &[("shop/a", budget(5, 5, 0)), ("shop/b", budget(5, 5, 0))],
        );
        let holding = what_holds(&d, Some(&V1), now());
        assert!(
            holding.blockers[0].contains("selected by 2 PodDisruptionBudgets (shop/a, shop/b)"),
            "{holding:?}"
        );
        let unprocessed = BudgetFacts {
            unprocessed: true,
            ..budget(5, 5, 0)
        };
        let d = drain(
            vec![with_budgets(pod("web-1"), &["shop/a"])],
            &[("shop/a", unprocessed)],
        );
        assert!(what_holds(&d, Some(&V1), now()).blockers[0].contains("not been processed"));
        // An unready Pod under AlwaysAllow goes even then: the API server looks no further.
        let always = BudgetFacts {
            unprocessed: true,
            unhealthy_pod_eviction_policy: Some("AlwaysAllow".into()),
            ..budget(0, 0, 1)
        };
        let unready = PodOnNode {
            ready: false,
            ..with_budgets(pod("web-2"), &["shop/a"])
        };
        let holding = what_holds(
            &drain(vec![unready], &[("shop/a", always)]),
            Some(&V1),
            now(),
        );
        assert!(holding.blockers.is_empty(), "{holding:?}");
    }

    #[test]
    fn pods_karpenter_does_not_wait_for_are_not_named() {
        let zero = [("shop/web", budget(0, 1, 1))];
        for (why, p) in [
            (
                "terminal",
                PodOnNode {
                    phase: "Succeeded".into(),
                    ..with_budgets(pod("a"), &["shop/web"])
                },
            ),
            (
                "mirror",
                PodOnNode {
                    mirror: true,
                    ..with_budgets(pod("b"), &["shop/web"])
                },
            ),
            (
                "tolerates the drain taint",
                PodOnNode {
                    tolerates_disrupted: true,
                    ..with_budgets(pod("c"), &["shop/web"])
                },
            ),
            (
                "terminating past its deletion time by more than a minute",
                PodOnNode {
                    deleting_until: Some(now() - SignedDuration::from_mins(5)),
                    ..pod("d")
                },
            ),
        ] {
            let holding = what_holds(&drain(vec![p], &zero), Some(&V1), now());
            assert_eq!(holding, Holding::default(), "{why}");
        }
        // A Pending Pod is deleted by the eviction API whatever its budget says.
        let pending = PodOnNode {
            phase: "Pending".into(),
            ..with_budgets(pod("e"), &["shop/web"])
        };
        assert_eq!(
            what_holds(&drain(vec![pending], &zero), Some(&V1), now()).waiting,
            ["shop/e"]
        );
    }

    #[test]
    fn do_not_disrupt_holds_the_drain_from_karpenter_v1_on_only() {
        let annotated = PodOnNode {
            do_not_disrupt: Some("true".into()),
            ..pod("batch-0")
        };
        let d = drain(vec![annotated], &[]);
        assert!(what_holds(&d, Some(&V1), now()).blockers[0].contains("do-not-disrupt"));
        // v0.37 evicts it: it only waits.
        let before_v1 = what_holds(&d, Some(&V0), now());
        assert!(before_v1.blockers.is_empty() && before_v1.waiting == ["shop/batch-0"]);
        // Version unknown: not judged, and said so.
        let unknown = what_holds(&d, None, now());
        assert!(unknown.blockers.is_empty() && unknown.waiting.is_empty());
        assert!(
            unknown
                .undecided
                .is_some_and(|u| u.contains("version is unknown"))
        );
    }

    #[test]
    fn a_pod_in_its_grace_period_is_named_with_its_end() {
        let until = now() + SignedDuration::from_mins(20);
        let p = PodOnNode {
            deleting_until: Some(until),
            ..pod("slow")
        };
        let holding = what_holds(&drain(vec![p], &[]), Some(&V1), now());
        assert!(
            holding.blockers[0].contains("is terminating"),
            "{holding:?}"
        );
    }

    #[test]
    fn unread_budgets_leave_budgeted_pods_undecided_but_still_name_the_annotated() {
        let mut d = drain(
            vec![
                with_budgets(pod("web-1"), &["shop/web"]),
                PodOnNode {
                    do_not_disrupt: Some("true".into()),
                    ..pod("batch-0")
                },
            ],
            &[],
        );
        d.budgets = Observed::unknown(crate::facts::UnknownCause::AccessDenied, "403");
        let holding = what_holds(&d, Some(&V1), now());
        assert_eq!(holding.blockers.len(), 1, "{holding:?}");
        assert!(holding.undecided.is_some_and(|u| u.contains("shop/web-1")));
    }

    #[test]
    fn go_durations_are_read_as_go_reads_them() {
        assert_eq!(go_duration("30m"), Some(SignedDuration::from_mins(30)));
        assert_eq!(go_duration("1h30m"), Some(SignedDuration::from_mins(90)));
        assert_eq!(go_duration("1.5h"), Some(SignedDuration::from_mins(90)));
        assert_eq!(go_duration("90s"), Some(SignedDuration::from_secs(90)));
        for invalid in [
            "0s",
            "-5m",
            "invalid-format",
            "1d",
            "5 minutes",
            "",
            "m",
            "true",
        ] {
            assert_eq!(go_duration(invalid), None, "{invalid}");
        }
    }

    /// From Karpenter 1.12 a duration protects the Pod for that long after it started
    /// (kubernetes-sigs/karpenter `pkg/utils/pod/scheduling.go` `IsDoNotDisruptActive`); an
    /// invalid value is no annotation, and before 1.12 only "true" counts.
    #[test]
    fn a_duration_do_not_disrupt_holds_the_drain_only_while_it_lasts() {
        let started = |mins_ago: i64, value: &str| PodOnNode {
            do_not_disrupt: Some(value.into()),
            started: Some(now() - SignedDuration::from_mins(mins_ago)),
            ..pod("batch-0")
        };
        let v1_12 = Version::new(1, 12, 0);
        let held = what_holds(&drain(vec![started(10, "30m")], &[]), Some(&v1_12), now());
        assert!(
            held.blockers[0].contains("do-not-disrupt: 30m")
                && held.blockers[0].contains("until 2026-11-25T12:20:00Z"),
            "{held:?}"
        );
        for (what, p, version) in [
            ("elapsed", started(40, "30m"), v1_12.clone()),
            ("invalid", started(10, "thirty minutes"), v1_12.clone()),
            ("before 1.12", started(10, "30m"), V1),
        ] {
            let holding = what_holds(&drain(vec![p], &[]), Some(&version), now());
            assert!(holding.blockers.is_empty(), "{what}: {holding:?}");
            assert_eq!(holding.waiting, ["shop/batch-0"], "{what}");
        }
        let unknown = what_holds(&drain(vec![started(10, "30m")], &[]), None, now());
        assert!(
            unknown
                .undecided
                .is_some_and(|u| u.contains("from 1.12 on"))
        );
    }
}
