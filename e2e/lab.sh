#!/usr/bin/env bash
# `make e2e-lab`: the lab's tests (e2e/tests/lab_*.rs) against each Karpenter release named, each
# release on a bed of its own whose Karpenter CRDs are that release's, the releases side by side.
# A lab mostly waits on Karpenter's timers (about a fifth of 2 cores while one runs), so two
# releases take little longer than one. Each bed is stopped afterwards whatever happens; every
# line of a release's run is prefixed with it; the exit status is non-zero if any release failed.
#
#   e2e/lab.sh RELEASE...        e.g. e2e/lab.sh v1.14.1 v1.8.6
#   RELEASE/FILE/FILTER          that release for the tests of e2e/tests/FILE.rs whose names
#                                contain FILTER only (v1.6.3/lab_classic_failures/before_1_7)
#   E2E_LAB_TESTS="--test lab_reasons ..." chooses the test files (all lab_*.rs by default)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
[ $# -gt 0 ] || { echo "usage: e2e/lab.sh RELEASE..." >&2; exit 2; }
cargo="${CARGO:-cargo}"
tests="${E2E_LAB_TESTS:-$(for f in e2e/tests/lab_*.rs; do printf -- '--test %s ' "$(basename "$f" .rs)"; done)}"

# Built once before the releases start, so that they do not wait on each other's build lock.
# shellcheck disable=SC2086
"$cargo" test --locked -p karpenter-health-e2e $tests --no-run --quiet || exit 1
for spec in "$@"; do
  bash e2e/bed/build-karpenter.sh "${spec%%/*}" >/dev/null || exit 1
done

run_release() {
  local spec="$1" release="${1%%/*}" bed="$root/e2e/.bed-lab-${1%%/*}" crds status=0
  local chosen="$tests" filter=()
  if [ "$spec" != "$release" ]; then
    local rest="${spec#*/}"
    chosen="--test ${rest%%/*}"; filter=("${rest#*/}")
  fi
  crds="$(bash e2e/bed/build-karpenter.sh crds "$release")" || return 1
  KARPENTER_CRDS_DIR="$crds" KH_BED_DIR="$bed" KH_BED_ROLE="lab $release" \
    bash e2e/bed/bed.sh up "$bed" || return 1
  echo "lab: the real Karpenter $release ($(bash e2e/bed/build-karpenter.sh "$release"))"
  # shellcheck disable=SC2086
  KH_KARPENTER_RELEASE="$release" KH_BED_DIR="$bed" \
    "$cargo" test --locked -p karpenter-health-e2e $chosen -- --test-threads=1 "${filter[@]}" \
    || status=$?
  bash e2e/bed/bed.sh down "$bed"
  return "$status"
}

declare -A pids
started=$SECONDS
for spec in "$@"; do
  ( run_release "$spec" 2>&1 | sed -u "s|^|[${spec%%/*}] |"; exit "${PIPESTATUS[0]}" ) &
  pids[$spec]=$!
done
failed=()
for spec in "$@"; do
  wait "${pids[$spec]}" || failed+=("$spec")
done
echo "lab: $* in $((SECONDS - started)) s"
if [ ${#failed[@]} -gt 0 ]; then
  echo "lab: FAILED on ${failed[*]}" >&2
  exit 1
fi
