//! Scenarios of `DriftCanBeReplaced` beyond one sentence per reason: budgets that let drift
//! through at some time stay True, a budget that switches drift off is a warning judged per
//! NodePool (never False), what was not seen is Unknown, and NodeClaims stuck terminating are a
//! warning. Pure.

use super::reasons::condition_of;
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::ConditionType;

fn drift(f: &Facts) -> (String, String, String, Vec<String>) {
    condition_of(f, ConditionType::DriftCanBeReplaced)
}

/// The message of the one NodeClaimTerminatingLong warning.
fn warning(f: &Facts) -> String {
    warning_of(f, "NodeClaimTerminatingLong")
}

/// The message of the one warning `code`.
fn warning_of(f: &Facts, code: &str) -> String {
    let status = super::reasons::status(f);
    let found: Vec<&str> = status
        .findings
        .iter()
        .filter(|f| f.reason == code)
        .map(|f| f.message.as_str())
        .collect();
    assert_eq!(found.len(), 1, "{:?}", status.findings);
    found[0].to_owned()
}

#[test]
fn budgets_that_let_drift_through_at_some_time_are_never_false() {
    for (what, f) in [
        (
            "a freeze that opens tonight",
            Facts::healthy().with_drift(vec![budget("0", &[], Some("0 22 * * *"))], Some(120)),
        ),
        (
            "zero for consolidation only",
            Facts::healthy().with_drift(
                vec![budget("0", &["Underutilized", "Empty"], None)],
                Some(120),
            ),
        ),
        (
            "Karpenter's default of 10 %",
            Facts::healthy().with_drift(vec![budget("10%", &[], None)], Some(120)),
        ),
        (
            "drifted ten minutes ago: Karpenter may not have acted yet",
            Facts::healthy().with_drift(vec![budget("0", &[], None)], Some(10)),
        ),
    ] {
        let (status, _, message, warnings) = drift(&f);
        assert_eq!(status, "True", "{what}: {message}");
        assert!(warnings.is_empty(), "{what}: {warnings:?}");
    }
}

/// Karpenter v1's docs switch drift off with a budget of 0 for Drifted and no schedule
/// (kubernetes-sigs/karpenter #1576); its expiration controller still deletes each NodeClaim at
/// its expireAfter whatever the budgets say (`pkg/controllers/nodeclaim/expiration/controller.go`).
/// A decision: True, with a warning that says how long, which budget, and when it expires.
#[test]
fn drift_switched_off_by_a_budget_is_a_warning_never_false() {
    let f = Facts::healthy().with_drift(vec![budget("0%", &["Drifted"], None)], Some(45));
    let (status, reason, message, warnings) = drift(&f);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "DriftReplaceable")
    );
    assert_eq!(warnings, ["DriftHeldByBudget"]);
    // The True message says they are held, never that Karpenter replaces them.
    assert!(
        message.contains("held on purpose") && !message.contains("replaces them"),
        "{message}"
    );
    let warned = warning_of(&f, "DriftHeldByBudget");
    assert!(
        warned.contains("default-abcde (drifted for 45m, expires at ")
            && warned.contains("NodePool default's budget nodes: 0% for Drifted, no schedule"),
        "{warned}"
    );
    // Drift off and expiry off: said so.
    let never = f.clone().with(|f| {
        if let Some(claims) = f.cluster.node_claims.found_mut() {
            for claim in claims {
                if let Some(drift) = &mut claim.drift {
                    drift.expire_after = Some("Never".into());
                }
            }
        }
    });
    // Without expireAfter (CRDs that do not default it), Karpenter never expires it either.
    let unset = f.clone().with(|f| {
        if let Some(claims) = f.cluster.node_claims.found_mut() {
            for claim in claims {
                if let Some(drift) = &mut claim.drift {
                    drift.expire_after = None;
                }
            }
        }
    });
    assert!(
        warning_of(&unset, "DriftHeldByBudget").contains("never expires (no expireAfter)"),
        "{}",
        warning_of(&unset, "DriftHeldByBudget")
    );
    assert!(
        warning_of(&never, "DriftHeldByBudget").contains("never expires (expireAfter: Never)"),
        "{}",
        warning_of(&never, "DriftHeldByBudget")
    );
}

/// Each drifted NodeClaim is judged against the NodePool that made it: a freeze in one NodePool
/// holds only that NodePool's NodeClaims.
#[test]
fn each_drifted_node_claim_is_judged_by_its_own_node_pool() {
    let f = Facts::healthy()
        .with_drift(vec![budget("0", &[], None)], Some(120))
        .with(|f| {
            if let Some(pools) = f.cluster.node_pools.found_mut() {
                pools.push(node_pool("spare"));
            }
            if let Some(claims) = f.cluster.node_claims.found_mut() {
                for claim in claims {
                    if let Some(drift) = &mut claim.drift {
                        drift.node_pool = Some("spare".into());
                    }
                }
            }
        });
    // Made by "spare", which lets drift through: not held, whatever "default" says.
    let (status, _, message, warnings) = drift(&f);
    assert_eq!(status, "True", "{message}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        message.contains("replaces them as its budgets allow"),
        "{message}"
    );
    // A NodeClaim whose NodePool is not known (no label, or a NodePool since deleted) is not
    // said to be held.
    let orphan = f.with(|f| {
        if let Some(claims) = f.cluster.node_claims.found_mut() {
            for claim in claims {
                if let Some(drift) = &mut claim.drift {
                    drift.node_pool = Some("gone".into());
                }
            }
        }
    });
    assert!(drift(&orphan).3.is_empty());
}

#[test]
fn node_pools_not_listed_are_unknown_when_a_node_claim_is_drifted() {
    let f = Facts::healthy()
        .with_drift(vec![budget("0", &[], None)], Some(45))
        .with(|f| f.cluster.node_pools = unknown(UnknownCause::NotObserved));
    let (status, reason, _, _) = drift(&f);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "NotObserved")
    );
}

#[test]
fn a_node_claim_terminating_for_hours_without_a_grace_period_is_a_warning() {
    let terminating = |mins: i64, grace: bool| {
        Facts::healthy().with(move |f| {
            if let Observed::Found(claims) = &mut f.cluster.node_claims {
                claims[0].deleting = true;
                claims[0].deleting_since = Some(mins_ago(mins));
                claims[0].has_termination_grace_period = grace;
            }
        })
    };
    let (status, _, message, warnings) = drift(&terminating(90, false));
    assert_eq!(status, "True", "{message}");
    assert_eq!(warnings, ["NodeClaimTerminatingLong"]);
    // Within the hour, or with a grace period that ends it: nothing to say.
    assert!(drift(&terminating(30, false)).3.is_empty());
    assert!(drift(&terminating(90, true)).3.is_empty());
}

#[test]
fn the_warning_names_what_holds_a_terminating_node_claim_from_its_nodes_pods() {
    use crate::facts::{BudgetFacts, NodeDrain, PodOnNode};
    let stuck = |drain: Option<Observed<NodeDrain>>| {
        Facts::healthy().with(move |f| {
            let Observed::Found(claims) = &mut f.cluster.node_claims else {
                return;
            };
            claims[0].deleting = true;
            claims[0].deleting_since = Some(mins_ago(90));
            let name = claims[0].name.clone();
            if let Some(drain) = drain.clone() {
                f.cluster.drains.insert(name, drain);
            }
        })
    };
    let web = PodOnNode {
        namespace: "shop".into(),
        name: "web-1".into(),
        phase: "Running".into(),
        ready: true,
        budgets: vec!["shop/web".into()],
        ..PodOnNode::default()
    };
    let budget = |allowed: i64| {
        Observed::Found(
            [(
                "shop/web".to_owned(),
                BudgetFacts {
                    disruptions_allowed: allowed,
                    current_healthy: 1,
                    desired_healthy: 1,
                    ..BudgetFacts::default()
                },
            )]
            .into(),
        )
    };
    let drain = |allowed: i64| NodeDrain {
        node: Some("ip-10-0-1-5.eu-north-1.compute.internal".into()),
        pods: vec![web.clone()],
        budgets: budget(allowed),
    };
    let (status, _, _, warnings) = drift(&stuck(Some(Observed::Found(drain(0)))));
    let message = warning(&stuck(Some(Observed::Found(drain(0)))));
    assert_eq!(
        (status.as_str(), warnings.as_slice()),
        ("True", ["NodeClaimTerminatingLong".to_owned()].as_slice())
    );
    assert!(
        message.contains("PodDisruptionBudget shop/web allows no eviction of Pod shop/web-1"),
        "{message}"
    );
    // A budget that allows the eviction holds nothing: the Pod is named as waiting only.
    let message = warning(&stuck(Some(Observed::Found(drain(1)))));
    assert!(
        message.contains(
            "shop/web-1 on Node ip-10-0-1-5.eu-north-1.compute.internal wait to be evicted"
        ) && !message.contains("allows no eviction"),
        "{message}"
    );
    // An empty Node, an unread one, and one not read yet: each said as it is.
    let empty = NodeDrain {
        pods: Vec::new(),
        ..drain(0)
    };
    let message = warning(&stuck(Some(Observed::Found(empty))));
    assert!(message.contains("no Pod on Node"), "{message}");
    let message = warning(&stuck(Some(Observed::unknown(
        UnknownCause::AccessDenied,
        "pods is forbidden",
    ))));
    assert!(message.contains("could not be read"), "{message}");
    let message = warning(&stuck(None));
    assert!(!message.contains("PodDisruptionBudget shop"), "{message}");
}

#[test]
fn a_freeze_whose_schedule_never_leaves_a_gap_holds_drift_like_one_without_schedule() {
    let daily = karpenter_health_api::karpenter::Budget {
        nodes: "0".into(),
        schedule: Some("@daily".into()),
        duration: Some("24h".into()),
        ..Default::default()
    };
    let held = Facts::healthy().with_drift(vec![daily.clone()], Some(120));
    let (status, _, _, warnings) = drift(&held);
    assert_eq!(status, "True");
    assert_eq!(warnings, ["DriftHeldByBudget"]);
    let message = warning_of(&held, "DriftHeldByBudget");
    assert!(message.contains("schedule @daily for 24h"), "{message}");
    // An hour shorter: it opens for an hour every day.
    let opens = karpenter_health_api::karpenter::Budget {
        duration: Some("23h".into()),
        ..daily
    };
    assert!(
        drift(&Facts::healthy().with_drift(vec![opens], Some(120)))
            .3
            .is_empty()
    );
}

#[test]
fn karpenters_own_blocked_events_name_what_holds_drifted_node_claims() {
    let pdb = "Pdb prevents pod evictions (PodDisruptionBudget=[shop/web])";
    let f = Facts::healthy()
        .with_drift(vec![budget("10%", &[], None)], Some(120))
        .with_disruption_blocked(pdb, 3);
    let (status, _, message, warnings) = drift(&f);
    assert_eq!(status, "True", "a blocker may leave at any time: {message}");
    assert_eq!(warnings, vec!["DriftedNodeClaimBlocked"]);
    assert!(
        !message.contains("replaces them"),
        "never contradicts the warning: {message}"
    );
    let text = crate::tests::reasons::status(&f)
        .findings
        .into_iter()
        .find(|w| w.reason == "DriftedNodeClaimBlocked")
        .expect("the warning")
        .message;
    assert!(text.contains("shop/web"), "{text}");
    // An Event Karpenter stopped repeating an hour ago is not named; nor when no NodeClaim is
    // drifted long enough.
    for quiet in [
        Facts::healthy()
            .with_drift(vec![budget("10%", &[], None)], Some(120))
            .with_disruption_blocked(pdb, 60),
        Facts::healthy()
            .with_drift(vec![budget("10%", &[], None)], Some(10))
            .with_disruption_blocked(pdb, 3),
    ] {
        assert!(drift(&quiet).3.is_empty(), "{:?}", drift(&quiet));
    }
    // A NodeClaim its NodePool's budget holds on purpose is named once, for that budget.
    let held = Facts::healthy()
        .with_drift(vec![budget("0", &[], None)], Some(120))
        .with_disruption_blocked(pdb, 3);
    assert_eq!(drift(&held).3, ["DriftHeldByBudget"]);
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        nothing_drifted_is_drift_replaceable:
            Facts::healthy() => DriftCanBeReplaced is True because DriftReplaceable;
    }
}
