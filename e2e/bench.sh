#!/usr/bin/env bash
# `make bench`: the karpenter-health benchmark (not a test). Builds the operator in release mode,
# starts a bed of its own, runs e2e/src/bin/bench (10,000 NodeClaims, 50 NodePools,
# 20 EC2NodeClasses by default) and stops the bed whatever happens. Does IO: builds, processes,
# files under target/bench/.
#
#   bash e2e/bench.sh [bench flags...]      e.g. --idle 120s --edits 50 (see --help)
#
# Results: target/bench/<UTC time>/results.{md,json} and the operator logs.
# KH_BENCH_BED_DIR overrides where the bed lives (default target/bench/bed).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
out="${KH_BENCH_OUT:-$root/target/bench/$stamp}"
bed_dir="${KH_BENCH_BED_DIR:-$root/target/bench/bed}"
mkdir -p "$out"

echo "bench: building the operator (release) and the bench program" >&2
cargo build --release --locked -p karpenter-health
cargo build --locked -p karpenter-health-e2e --bin bench

bash e2e/bed/bed.sh up "$bed_dir"
trap 'bash e2e/bed/bed.sh down "$bed_dir"' EXIT
export KH_BED_DIR="$bed_dir"

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
if [ -n "$(git status --porcelain --untracked-files=no -- crates Cargo.lock 2>/dev/null)" ]; then
  commit="$commit with uncommitted changes in crates/"
fi
info="Operator: release build (\`cargo build --release\`) of $commit, $(rustc -V | cut -d' ' -f1-2); bench: debug build; moto $("${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}/moto-venv/bin/python" -c 'import moto; print(moto.__version__)' 2>/dev/null || echo '?'). Command: \`make bench\` (= \`bash e2e/bench.sh$(printf ' %s' "$@")\`)."

# Cargo's target directory, wherever CARGO_TARGET_DIR puts it (CI keeps it in a cache).
target_dir="${CARGO_TARGET_DIR:-$root/target}"
"$target_dir/debug/bench" --out "$out" --build-info "$info" "$@" | tee "$out/bench.log"
echo "bench: results in ${out#"$root"/}/results.md" >&2
