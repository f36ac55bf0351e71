#!/usr/bin/env bash
# `make bench` and `make bench-large`: the karpenter-health benchmark (not a test). Builds the
# operator in release mode, starts a bed of its own, runs bench/ (the bench program) (10,000 NodeClaims,
# 50 NodePools, 20 EC2NodeClasses, then the Pod and NodeClaim storms, by default) and stops the
# bed whatever happens. Does IO: builds, processes, files under target/bench/.
#
#   bash e2e/bench.sh [bench flags...]      e.g. --idle 120s --edits 50 (see --help; the last of
#                                           a flag given twice wins)
#
# Results: target/bench/<UTC time>/results.{md,json}, the plots rss.svg and
# change-to-status.svg, and the operator logs.
# KH_BENCH_BED_DIR overrides where the bed lives (default target/bench/bed).
# KH_BENCH_OPERATOR runs an operator binary built before (e.g. the release build of another
# worktree) instead of building this tree's, which takes about 10 CPU-minutes from scratch.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
out="${KH_BENCH_OUT:-$root/target/bench/$stamp}"
bed_dir="${KH_BENCH_BED_DIR:-$root/target/bench/bed}"
mkdir -p "$out"

operator_flags=()
if [ -n "${KH_BENCH_OPERATOR:-}" ]; then
  echo "bench: building the bench program; the operator is $KH_BENCH_OPERATOR" >&2
  operator_flags=(--operator "$KH_BENCH_OPERATOR")
else
  echo "bench: building the operator (release) and the bench program" >&2
  cargo build --release --locked -p karpenter-health
fi
cargo build --locked -p karpenter-health-bench --bin bench

bash e2e/bed/bed.sh up "$bed_dir"
trap 'bash e2e/bed/bed.sh down "$bed_dir"' EXIT
export KH_BED_DIR="$bed_dir"

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain --untracked-files=no -- crates Cargo.lock 2>/dev/null)" ]; then
  commit="$commit with uncommitted changes in crates/"
fi
if [ -n "${KH_BENCH_OPERATOR:-}" ]; then
  operator="prebuilt binary \`$(basename "$KH_BENCH_OPERATOR")\` (KH_BENCH_OPERATOR); bench at $commit"
else
  operator="release build (\`cargo build --release\`) of $commit"
fi
info="Operator: $operator, $(rustc -V | cut -d' ' -f1-2); bench: debug build; moto $("${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}/moto-venv/bin/python" -c 'import moto; print(moto.__version__)' 2>/dev/null || echo '?'). Command: \`bash e2e/bench.sh$(printf ' %s' "$@")\`."

# Cargo's target directory, wherever CARGO_TARGET_DIR puts it (CI keeps it in a cache).
target_dir="${CARGO_TARGET_DIR:-$root/target}"
"$target_dir/debug/bench" --out "$out" --build-info "$info" "${operator_flags[@]}" "$@" | tee "$out/bench.log"
echo "bench: results in ${out#"$root"/}/results.md" >&2
