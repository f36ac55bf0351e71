//! The Markdown rendering of the bench's results: medians, percentiles and ratios against the
//! targets of issues 5 and 13, the storms, and links to the plots. Pure, no IO.

use crate::plots::{LATENCY_PLOT, RSS_PLOT};
use crate::results::{Edit, Results};
use crate::stats::{median, summary};
use crate::table::{edit_stats, f, row};
use crate::targets;
use std::fmt::Write as _;

/// Targets of issue 5.
pub const TARGET_P99_MS: f64 = 300.0;
pub const TARGET_RSS_MIB: f64 = 64.0;
pub const TARGET_COLD_START_S: f64 = 10.0;

fn opt(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "–".into(), |v| f(v, digits))
}

/// The Markdown block of one run.
pub fn markdown(r: &Results) -> String {
    let mut o = String::new();
    let e = edit_stats(&r.edits);
    let probes_return = summary(
        &r.watch_probes
            .iter()
            .map(|p| p.from_return_ms)
            .collect::<Vec<_>>(),
    );
    let probes_start = summary(
        &r.watch_probes
            .iter()
            .map(|p| p.from_start_ms)
            .collect::<Vec<_>>(),
    );
    let probes_rtt = summary(
        &r.watch_probes
            .iter()
            .map(|p| p.write_rtt_ms)
            .collect::<Vec<_>>(),
    );
    let cold_eval = summary(
        &r.cold_starts
            .iter()
            .map(|c| c.first_evaluation_s)
            .collect::<Vec<_>>(),
    );
    let cold_ready = summary(&r.cold_starts.iter().map(|c| c.ready_s).collect::<Vec<_>>());
    let cold_both = summary(
        &r.cold_starts
            .iter()
            .map(|c| c.ready_and_evaluated_s)
            .collect::<Vec<_>>(),
    );
    let cold_last_write = summary(
        &r.cold_starts
            .iter()
            .map(|c| c.last_write_s)
            .collect::<Vec<_>>(),
    );
    let cold_peak = summary(&r.cold_starts.iter().map(|c| c.peak_mib).collect::<Vec<_>>());
    let cold_steady = summary(
        &r.cold_starts
            .iter()
            .map(|c| c.steady_mib)
            .collect::<Vec<_>>(),
    );
    let relist_peak = summary(&r.relists.iter().map(|x| x.peak_mib).collect::<Vec<_>>());
    let relist_recovery = summary(
        &r.relists
            .iter()
            .filter_map(|x| x.recovery_s)
            .collect::<Vec<_>>(),
    );
    let steady = r.idle.rss_mib.p50;

    let _ = writeln!(o, "### Run of {}\n", r.date);
    let _ = writeln!(
        o,
        "Machine: {} ({} cores), {:.1} GiB RAM, Linux {}; bed API server {}. {}\n",
        r.machine.cpu,
        r.machine.cores,
        r.machine.memory_gib,
        r.machine.kernel,
        r.machine.apiserver,
        r.build_info
    );
    let variety = match r.scale.distinct_every {
        0 => "every class shares one node role and the default EBS key".to_owned(),
        n => format!("every {n}th class has a node role, instance profile and KMS key of its own"),
    };
    let _ = writeln!(
        o,
        "Scale: {} NodeClaims, {} NodePools, {} EC2NodeClasses; {variety}.\n",
        r.scale.node_claims, r.scale.node_pools, r.scale.node_classes
    );
    let _ = writeln!(o, "| Target | Result | Target | Ratio |\n|---|---|---|---|");
    let _ = writeln!(
        o,
        "| change-to-status p99, last of {} EC2NodeClasses ({} edits) | {} ms | < {TARGET_P99_MS} ms | {} |",
        r.scale.node_classes,
        e.last.n,
        f(e.last.p99, 0),
        f(e.last.p99 / TARGET_P99_MS, 2)
    );
    let _ = writeln!(
        o,
        "| change-to-status p99, first EC2NodeClass | {} ms | < {TARGET_P99_MS} ms | {} |",
        f(e.first.p99, 0),
        f(e.first.p99 / TARGET_P99_MS, 2)
    );
    let _ = writeln!(
        o,
        "| RSS steady (median over {:.0} s idle) | {} MiB | < {TARGET_RSS_MIB} MiB | {} |",
        r.idle.window.seconds,
        f(steady, 1),
        f(steady / TARGET_RSS_MIB, 2)
    );
    let _ = writeln!(
        o,
        "| RSS peak (cold starts and forced relists) | {} MiB | < {TARGET_RSS_MIB} MiB | {} |",
        f(r.peak_overall_mib, 1),
        f(r.peak_overall_mib / TARGET_RSS_MIB, 2)
    );
    let _ = writeln!(
        o,
        "| cold start to ready and every KarpenterHealth evaluated (median of {}) | {} s | < {TARGET_COLD_START_S} s | {} |",
        cold_both.n,
        f(cold_both.p50, 2),
        f(cold_both.p50 / TARGET_COLD_START_S, 2)
    );
    let _ = writeln!(
        o,
        "| AWS calls per hour, idle (refresh only) | {} | – | – |",
        f(r.idle.window.aws_calls_per_hour, 0)
    );
    let _ = writeln!(
        o,
        "| AWS calls per hour, during the aws-auth edits | {} | – | – |\n",
        f(r.edit_window.aws_calls_per_hour, 0)
    );
    let _ = writeln!(o, "{}", targets::markdown(23, &targets::issue_23(r)));
    let _ = writeln!(o, "{}", targets::markdown(13, &targets::issue_13(r)));
    if r.plots.iter().any(|p| p == RSS_PLOT) {
        let _ = writeln!(
            o,
            "![The operator's RSS over the run, phases shaded]({RSS_PLOT})\n"
        );
    }

    let _ = writeln!(
        o,
        "Latency (ms; from the write returning to the bench's own watch seeing the result; nearest-rank percentiles):\n"
    );
    let _ = writeln!(
        o,
        "| Series | n | p50 | p90 | p99 | max | mean |\n|---|---|---|---|---|---|---|"
    );
    row(&mut o, "change-to-status, first EC2NodeClass", &e.first, 1);
    row(&mut o, "change-to-status, last EC2NodeClass", &e.last, 1);
    row(
        &mut o,
        "aws-auth's own watch event (same edits)",
        &e.own_watch,
        1,
    );
    row(&mut o, "aws-auth write round trip", &e.write_rtt, 1);
    row(
        &mut o,
        "probe ConfigMap watch delivery, from the write returning",
        &probes_return,
        1,
    );
    row(
        &mut o,
        "probe ConfigMap watch delivery, from the write starting",
        &probes_start,
        1,
    );
    row(&mut o, "probe ConfigMap write round trip", &probes_rtt, 1);
    let _ = writeln!(o);
    let ratio = |a: f64, b: f64| {
        if b > 0.0 { f(a / b, 1) } else { "–".into() }
    };
    let _ = writeln!(
        o,
        "Ratios: change-to-status p50 is {}× (first) and {}× (last) the write round trip + watch delivery p50 ({} ms); edits timed out: {}.\n",
        ratio(e.first.p50, probes_start.p50),
        ratio(e.last.p50, probes_start.p50),
        f(probes_start.p50, 1),
        e.timed_out
    );
    let with_aws: Vec<&Edit> = r
        .edits
        .iter()
        .filter(|x| x.aws_calls.is_some_and(|c| c > 0.0))
        .collect();
    let without_aws: Vec<&Edit> = r
        .edits
        .iter()
        .filter(|x| x.aws_calls == Some(0.0))
        .collect();
    let last_of = |v: &[&Edit]| summary(&v.iter().filter_map(|x| x.last_ms).collect::<Vec<_>>());
    let first_of = |v: &[&Edit]| summary(&v.iter().filter_map(|x| x.first_ms).collect::<Vec<_>>());
    let _ = writeln!(
        o,
        "Edits split by whether the operator called AWS while handling them (an AWS cache entry had expired):\n"
    );
    let _ = writeln!(
        o,
        "| Series | n | p50 | p90 | p99 | max | mean |\n|---|---|---|---|---|---|---|"
    );
    row(&mut o, "first, no AWS call", &first_of(&without_aws), 1);
    row(&mut o, "last, no AWS call", &last_of(&without_aws), 1);
    row(&mut o, "first, with AWS calls", &first_of(&with_aws), 1);
    row(&mut o, "last, with AWS calls", &last_of(&with_aws), 1);
    if r.plots.iter().any(|p| p == LATENCY_PLOT) {
        let _ = writeln!(
            o,
            "\n![Change-to-status latency, cumulative: quiet edits and edits during the storms]({LATENCY_PLOT})"
        );
    }
    let _ = writeln!(
        o,
        "\nThe operator's own `karpenter_health_change_to_status_seconds` (trigger arrival → status written, bucket-interpolated): n {}, p50 {} ms, p90 {} ms, p99 {} ms; reconcile errors {}. Reconcile duration over the run: n {}, p50 {} ms, p90 {} ms, p99 {} ms.\n",
        f(r.operator_histogram.count, 0),
        opt(r.operator_histogram.p50_ms, 1),
        opt(r.operator_histogram.p90_ms, 1),
        opt(r.operator_histogram.p99_ms, 1),
        f(r.operator_histogram.reconcile_errors, 0),
        f(r.operator_histogram.reconciles, 0),
        opt(r.operator_histogram.reconcile.first().copied().flatten(), 1),
        opt(r.operator_histogram.reconcile.get(1).copied().flatten(), 1),
        opt(r.operator_histogram.reconcile.get(2).copied().flatten(), 1)
    );

    let _ = writeln!(o, "Memory (RSS from /proc/PID/status, MiB):\n");
    let _ = writeln!(
        o,
        "| Series | n | p50 | p90 | p99 | max | mean |\n|---|---|---|---|---|---|---|"
    );
    row(
        &mut o,
        "steady, idle window samples (50 ms)",
        &r.idle.rss_mib,
        1,
    );
    row(&mut o, "settled after each cold start", &cold_steady, 1);
    row(&mut o, "peak (VmHWM) of each cold start", &cold_peak, 1);
    row(
        &mut o,
        "peak (VmHWM) of each forced relist",
        &relist_peak,
        1,
    );
    row(
        &mut o,
        "after the relists, settled samples",
        &r.post_relist_rss_mib,
        1,
    );
    let _ = writeln!(o);
    let _ = writeln!(
        o,
        "| NodeClaims | steady MiB | peak MiB | cold starts |\n|---|---|---|---|"
    );
    for s in &r.memory_steps {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} |",
            s.node_claims,
            f(s.steady_mib, 1),
            f(s.peak_mib, 1),
            s.runs
        );
    }
    if let (Some(lo), Some(hi)) = (r.memory_steps.first(), r.memory_steps.last())
        && hi.node_claims > lo.node_claims
    {
        let n = (hi.node_claims - lo.node_claims) as f64;
        let _ = writeln!(
            o,
            "\nMarginal memory: {} KiB steady and {} KiB peak per NodeClaim ({} → {} NodeClaims); a NodeClaim is {} bytes on the wire (list JSON, managedFields included).\n",
            f((hi.steady_mib - lo.steady_mib) * 1024.0 / n, 2),
            f((hi.peak_mib - lo.peak_mib) * 1024.0 / n, 2),
            lo.node_claims,
            hi.node_claims,
            f(r.seeding.wire_bytes_per_node_claim, 0)
        );
    }

    let _ = writeln!(o, "Cold starts at full scale (s from spawn; MiB):\n");
    let _ = writeln!(
        o,
        "| Series | n | p50 | p90 | p99 | max | mean |\n|---|---|---|---|---|---|---|"
    );
    row(&mut o, "/readyz 200 (every watch listed)", &cold_ready, 2);
    row(
        &mut o,
        "every KarpenterHealth evaluated (no condition Pending)",
        &cold_eval,
        2,
    );
    row(&mut o, "both (ready and evaluated)", &cold_both, 2);
    row(
        &mut o,
        "last status write of the start-up",
        &cold_last_write,
        2,
    );
    let _ = writeln!(
        o,
        "\nThe bench's own paginated list of all {} NodeClaims (500 per page, JSON not decoded) took {} s on this bed: the API server's share of /readyz.",
        r.seeding.node_claims_listed,
        f(r.seeding.list_all_node_claims_s, 2)
    );
    let _ = writeln!(
        o,
        "\nShutdown on SIGTERM: median {} s over {}.\n",
        f(median(&r.shutdowns_s), 2),
        r.shutdowns_s.len()
    );

    let _ = writeln!(
        o,
        "Forced relists (API server restarted on the same etcd): recovery (API server back → an aws-auth edit landed on every EC2NodeClass) median {} s, max {} s over {}:\n",
        f(relist_recovery.p50, 1),
        f(relist_recovery.max, 1),
        relist_recovery.n
    );
    let _ = writeln!(
        o,
        "| # | restart s | recovery s | RSS before | peak | RSS after |\n|---|---|---|---|---|---|"
    );
    for (i, x) in r.relists.iter().enumerate() {
        let _ = writeln!(
            o,
            "| {} | {} | {} | {} | {} | {} |",
            i + 1,
            f(x.restart_s, 1),
            opt(x.recovery_s, 1),
            f(x.rss_before_mib, 1),
            f(x.peak_mib, 1),
            f(x.rss_after_mib, 1)
        );
    }
    let _ = writeln!(
        o,
        "\nOperator logs: {} watch errors ({} of them 410 Gone / too old resource version), {} warnings in all.\n",
        r.logs.watch_errors, r.logs.gone_410, r.logs.warnings
    );

    let _ = writeln!(
        o,
        "AWS calls per hour by operation (idle {:.0} s: {} reconciles, {} status writes, {:.2} CPU s; edits {:.0} s: {} reconciles, {} status writes, {:.2} CPU s):\n",
        r.idle.window.seconds,
        f(r.idle.window.reconciles, 0),
        f(r.idle.window.status_patches, 0),
        r.idle.window.cpu_s,
        r.edit_window.seconds,
        f(r.edit_window.reconciles, 0),
        f(r.edit_window.status_patches, 0),
        r.edit_window.cpu_s
    );
    let _ = writeln!(o, "| Operation | idle | during edits |\n|---|---|---|");
    let mut ops: Vec<&String> = r
        .idle
        .window
        .aws_calls_by_operation_per_hour
        .keys()
        .chain(r.edit_window.aws_calls_by_operation_per_hour.keys())
        .collect();
    ops.sort();
    ops.dedup();
    for op in ops {
        let _ = writeln!(
            o,
            "| {op} | {} | {} |",
            f(
                r.idle
                    .window
                    .aws_calls_by_operation_per_hour
                    .get(op)
                    .copied()
                    .unwrap_or(0.0),
                0
            ),
            f(
                r.edit_window
                    .aws_calls_by_operation_per_hour
                    .get(op)
                    .copied()
                    .unwrap_or(0.0),
                0
            )
        );
    }
    crate::storm_report::storms(&mut o, r);
    let _ = writeln!(
        o,
        "\nSeeding: AWS {} s, Karpenter install + EC2NodeClasses + NodePools {} s, {} NodeClaims (create + status) {} s = {} NodeClaims/s.\n",
        f(r.seeding.aws_s, 1),
        f(r.seeding.kubernetes_s, 1),
        r.seeding.node_claims_listed,
        f(r.seeding.node_claims_s, 1),
        f(r.seeding.node_claims_per_s, 0)
    );
    let _ = writeln!(o, "Baseline conditions before the edits:\n");
    for (k, v) in &r.baseline {
        let _ = writeln!(o, "- {k}: {v}");
    }
    o
}
