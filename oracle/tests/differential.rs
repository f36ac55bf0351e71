//! The differential suite: generated clusters, each judged by karpenter-health's engine and by
//! Karpenter's own code at every built release. A finding that says Karpenter launches nothing (for
//! a NodePool or a Pod) where Karpenter's code launches, and a NodePool Karpenter puts a Pod on that
//! the engine's model rules out, fail; Pods Karpenter leaves waiting while every scheduling
//! condition is True (misses) are counted and printed. A failure is shrunk by proptest and written
//! to `oracle/regressions/` to be named and committed; every committed scenario runs every time.
//!
//! `KH_ORACLE_CASES` (default 2000) sets the scenarios per run, `KH_ORACLE_RELEASES` the releases
//! (default: every module in `oracle/karpenter/releases`), `KH_ORACLE_SEED` the generator's seed.

use karpenter_health_oracle::compare::{Claim, Comparison, compare, refused_for_the_pod};
use karpenter_health_oracle::engine::{self, ReleaseCrds};
use karpenter_health_oracle::generate;
use karpenter_health_oracle::oracle::{self, Answer, Oracle};
use karpenter_health_oracle::scenario::Scenario;
use proptest::test_runner::{Config, RngAlgorithm, TestCaseError, TestRng, TestRunner};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

struct Judge {
    oracle: Oracle,
    crds: ReleaseCrds,
    stats: Stats,
}

#[derive(Default)]
struct Stats {
    scenarios: usize,
    claims: usize,
    misses: usize,
    pods: usize,
    pods_waiting: usize,
    oracle_time: Duration,
    engine_time: Duration,
    miss_examples: Vec<String>,
    why_waiting: BTreeMap<String, usize>,
}

fn judges() -> Vec<Judge> {
    oracle::releases()
        .expect("the releases oracle/build.sh knows")
        .into_iter()
        .map(|release| {
            let mut oracle = Oracle::build_and_start(&release)
                .unwrap_or_else(|e| panic!("the oracle of Karpenter {release}: {e:#}"));
            let crds = oracle.crds().expect("the release's CRDs");
            Judge {
                oracle,
                crds,
                stats: Stats::default(),
            }
        })
        .collect()
}

/// Judges `scenario` at one release; `Err` names what went wrong or what disagreed.
fn judge(j: &mut Judge, scenario: &Scenario) -> Result<Comparison, String> {
    let started = Instant::now();
    let answer = j.oracle.ask(scenario).map_err(|e| format!("{e:#}"))?;
    j.stats.oracle_time += started.elapsed();
    if !answer.error.is_empty() {
        return Err(format!("the oracle could not judge it: {}", answer.error));
    }
    let started = Instant::now();
    let (facts, status) =
        engine::judge(scenario, &j.oracle.release, &j.crds).map_err(|e| format!("{e:#}"))?;
    j.stats.engine_time += started.elapsed();
    let mut comparison = compare(scenario, &facts, &status, &answer);
    let disagreements = std::mem::take(&mut comparison.disagreements);
    for d in disagreements {
        if !refused_only_on_its_last_term(j, scenario, &answer, &d.claim)? {
            comparison.disagreements.push(d);
        }
    }
    j.stats.scenarios += 1;
    j.stats.claims += comparison.claims;
    j.stats.misses += comparison.misses.len();
    for (pod, outcome) in &answer.pods {
        j.stats.pods += 1;
        if !outcome.launched {
            j.stats.pods_waiting += 1;
            *j.stats
                .why_waiting
                .entry(kind_of(outcome.why_not()))
                .or_default() += 1;
            let _ = pod;
        }
    }
    for m in comparison.misses.iter().take(1) {
        if j.stats.miss_examples.len() < 5 {
            j.stats
                .miss_examples
                .push(format!("{}: {}", m.pod, m.karpenter));
        }
    }
    Ok(comparison)
}

/// Whether a Pod Karpenter refused on a NodePool for its own constraints has a required node
/// affinity term for which it waits there for what the NodePool offers. Karpenter tries the terms one at a time and
/// reports only the last one's error (kubernetes-sigs/karpenter
/// `provisioning/scheduling/preferences.go` `removeRequiredNodeAffinityTerm`): an earlier term
/// may have failed for what the NodePool offers, as the Pod narrowed to that term fails (an
/// oracle error on the narrowed Pod keeps the disagreement).
fn refused_only_on_its_last_term(
    j: &mut Judge,
    scenario: &Scenario,
    original: &Answer,
    claim: &Claim,
) -> Result<bool, String> {
    let Claim::WaitsOn { pod, node_pool } = claim else {
        return Ok(false);
    };
    // Karpenter validates every term before scheduling (`provisioner.go` `validateAffinity`): a
    // Pod it ignored is not the last term's doing. Where it relaxes more than the terms, a Pod
    // narrowed to one term is not the attempt Karpenter made at it.
    let ignored = original
        .node_pools
        .get(node_pool)
        .and_then(|np| np.pods.get(pod))
        .is_none_or(|p| !p.ignored.is_empty());
    if ignored || scenario.relaxes_beyond_required_terms(pod, node_pool) {
        return Ok(false);
    }
    let terms = scenario.required_terms(pod);
    for term in 0..terms.saturating_sub(1) {
        let answer = j
            .oracle
            .ask(&scenario.with_only_term(pod, term))
            .map_err(|e| format!("{e:#}"))?;
        // Waiting there for what the NodePool offers, not launched (a launch would contradict
        // the claim all the same).
        let waits_for_the_pool = answer
            .node_pools
            .get(node_pool)
            .and_then(|np| np.pods.get(pod))
            .is_some_and(|p| !p.launched && !refused_for_the_pod(p));
        if waits_for_the_pool {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The first words of Karpenter's reason, for counting waits by kind.
fn kind_of(why: &str) -> String {
    why.split([',', ':', ';'])
        .next()
        .unwrap_or(why)
        .chars()
        .take(60)
        .collect()
}

fn regressions_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("regressions")
}

fn report(judges: &[Judge], what: &str, wall: Duration) {
    println!(
        "differential suite ({what}), {:.1} s wall:",
        wall.as_secs_f64()
    );
    for j in judges {
        let s = &j.stats;
        let per_sec = |d: Duration| s.scenarios as f64 / d.as_secs_f64().max(1e-9);
        println!(
            "  Karpenter {}: {} scenarios, {} claims checked, 0 false alarms, {} misses; {} of {} \
             pending Pods wait in Karpenter; oracle {:.0} scenarios/s, engine {:.0} scenarios/s",
            j.oracle.release,
            s.scenarios,
            s.claims,
            s.misses,
            s.pods_waiting,
            s.pods,
            per_sec(s.oracle_time),
            per_sec(s.engine_time),
        );
        for (why, n) in &s.why_waiting {
            println!("      waits: {n} × {why}");
        }
        for m in &s.miss_examples {
            println!("      miss: {m}");
        }
    }
}

#[test]
fn generated_clusters_agree_with_karpenters_scheduler() {
    let cases: u32 = std::env::var("KH_ORACLE_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2000);
    let seed: u64 = std::env::var("KH_ORACLE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20261129);
    let judges = RefCell::new(judges());
    let started = Instant::now();
    let mut seed_bytes = [0u8; 32];
    seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let mut runner = TestRunner::new_with_rng(
        Config {
            cases,
            failure_persistence: None,
            max_shrink_iters: 2000,
            ..Config::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &seed_bytes),
    );
    let result = runner.run(&generate::spec(), |spec| {
        let scenario = spec.render("generated");
        let mut judges = judges.borrow_mut();
        // Each release's oracle in a thread of its own: the two cores judge two releases at once.
        let verdicts: Vec<(String, Result<Comparison, String>)> = std::thread::scope(|s| {
            let running: Vec<_> = judges
                .iter_mut()
                .map(|j| {
                    let scenario = &scenario;
                    s.spawn(move || (j.oracle.release.clone(), judge(j, scenario)))
                })
                .collect();
            running
                .into_iter()
                .map(|t| t.join().expect("a judging thread"))
                .collect()
        });
        for (release, verdict) in verdicts {
            let comparison = verdict.map_err(TestCaseError::fail)?;
            if comparison.failed() {
                return Err(TestCaseError::fail(format!(
                    "Karpenter {release}:\n{comparison}"
                )));
            }
        }
        Ok(())
    });
    report(&judges.borrow(), "generated", started.elapsed());
    if let Err(e) = result {
        let (why, spec) = match e {
            proptest::test_runner::TestError::Fail(why, spec) => (why, Some(spec)),
            other => (other.to_string().into(), None),
        };
        if let Some(spec) = spec {
            let scenario = spec.render("counterexample");
            let path = regressions_dir().join("new-counterexample.json");
            std::fs::write(
                &path,
                serde_json::to_string_pretty(&scenario).unwrap_or_default(),
            )
            .expect("writing the counterexample");
            panic!(
                "{why}\nshrunk counterexample written to {} (name it, fix the engine, commit it)\n{spec:#?}",
                path.display()
            );
        }
        panic!("{why}");
    }
}

#[test]
fn committed_regressions_agree_with_karpenters_scheduler() {
    let mut judges = judges();
    let started = Instant::now();
    let mut failures = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(regressions_dir())
        .expect("oracle/regressions")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    files.sort();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("a regression scenario");
        let scenario: Scenario = serde_json::from_str(&text)
            .unwrap_or_else(|e| panic!("{}: not a scenario: {e}", path.display()));
        for j in &mut judges {
            match judge(j, &scenario) {
                Ok(c) if !c.failed() => {}
                Ok(c) => failures.push(format!("{} at {}:\n{c}", path.display(), j.oracle.release)),
                Err(e) => failures.push(format!("{} at {}: {e}", path.display(), j.oracle.release)),
            }
        }
    }
    report(&judges, "committed regressions", started.elapsed());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn the_releases_docs_name_are_the_releases_built() {
    let built = oracle::releases().expect("the releases oracle/build.sh knows");
    if std::env::var("KH_ORACLE_RELEASES").is_ok() {
        return;
    }
    assert_eq!(
        built,
        karpenter_health_api::vocabulary::ORACLE_RELEASES,
        "docs/checks.md names the releases of karpenter_health_api::vocabulary::ORACLE_RELEASES"
    );
}
