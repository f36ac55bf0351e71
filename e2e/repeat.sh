#!/usr/bin/env bash
# Runs chosen e2e tests N times in a row and reports every failure: which round, which module,
# which tests, and the log kept for it. A flake shows up as a failure in some rounds only.
#
#   e2e/repeat.sh N TEST...        e.g. e2e/repeat.sh 20 operator/leader_election operator/shutdown
#   TEST is a test binary (operator, aws, lab: e2e/tests/<binary>/) or one of its modules
#   (<binary>/<module>, e2e/tests/<binary>/<module>.rs)
#
# Environment: KH_BED_DIR (the bed's folder; default e2e/.bed-repeat), KH_REPEAT_FILTER (only the
# test functions whose names contain it), KH_REPEAT_FRESH_BED=1 (a fresh bed for every round, as
# `make e2e` has; by default one bed serves every round, which also catches tests that leave state
# behind), KH_REPEAT_LOGS (where logs go; default the bed's folder's parent, repeat-logs/).
# Exits 1 when any run failed. Builds the binary and the tests first (the same flags as `make e2e`).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
rounds="${1:?usage: $0 N TEST...}"; shift
[ "$#" -gt 0 ] || { echo "usage: $0 N TEST..." >&2; exit 2; }
tests=("$@")
bed_dir="${KH_BED_DIR:-$here/.bed-repeat}"
export KH_BED_DIR="$bed_dir"
logs="${KH_REPEAT_LOGS:-$(dirname "$bed_dir")/repeat-logs}"
filter="${KH_REPEAT_FILTER:-}"
cargo="${CARGO:-cargo}"
mkdir -p "$logs"

test_flags=()
for t in "${tests[@]}"; do
  [ -f "$here/tests/${t%%/*}/main.rs" ] || { echo "$t: no test binary e2e/tests/${t%%/*}/" >&2; exit 2; }
  case "$t" in */*) [ -f "$here/tests/$t.rs" ] || { echo "$t: no module e2e/tests/$t.rs" >&2; exit 2; } ;; esac
  test_flags+=(--test "${t%%/*}")
done
$cargo build --quiet --locked -p karpenter-health
$cargo test --quiet --locked -p karpenter-health-e2e "${test_flags[@]}" --no-run

# The lab's tests (the real Karpenter) need the CRDs of the release they run.
case " ${tests[*]} " in
  *" lab"*) KARPENTER_CRDS_DIR="$(bash "$here/bed/build-karpenter.sh" crds)"; export KARPENTER_CRDS_DIR ;;
esac
bed_up() { bash "$here/bed/bed.sh" up "$bed_dir" >/dev/null; }
bed_down() { bash "$here/bed/bed.sh" down "$bed_dir" >/dev/null 2>&1 || true; }
trap bed_down EXIT
bed_up

failures=0
runs=0
summary=()
for round in $(seq 1 "$rounds"); do
  if [ "$round" -gt 1 ] && [ "${KH_REPEAT_FRESH_BED:-0}" = 1 ]; then bed_down; bed_up; fi
  for t in "${tests[@]}"; do
    log="$logs/${t//\//-}-round$round.log"
    # A module runs as the tests whose names start with it, narrowed by FILTER: exact names,
    # since libtest's filters are any substring and several of them are alternatives.
    selection=()
    mapfile -t names < <($cargo test --quiet --locked -p karpenter-health-e2e --test "${t%%/*}" -- \
      --list --format terse | sed -n 's/: test$//p')
    for name in "${names[@]}"; do
      case "$t" in */*) [[ "$name" == "${t#*/}::"* ]] || continue ;; esac
      [[ "$name" == *"$filter"* ]] && selection+=("$name")
    done
    [ ${#selection[@]} -gt 0 ] || { echo "$t: no test matches${filter:+ $filter}" >&2; exit 2; }
    runs=$((runs + 1))
    started=$(date +%s)
    # Operator tests share cluster singletons, so every file runs one test at a time.
    if $cargo test --quiet --locked -p karpenter-health-e2e --test "${t%%/*}" -- --test-threads=1 \
         --exact "${selection[@]}" >"$log" 2>&1; then
      echo "round $round/$rounds $t: ok ($(( $(date +%s) - started )) s)"
      rm -f "$log"
    else
      failures=$((failures + 1))
      failed="$(sed -n '/^failures:$/,/^test result/p' "$log" | grep -E '^    ' | tr -s ' ' | paste -sd, -)"
      echo "round $round/$rounds $t: FAILED ($(( $(date +%s) - started )) s):${failed:- see the log} -> $log"
      summary+=("round $round $t:${failed:- (no test list; see the log)}")
    fi
  done
done

echo "repeat: $failures of $runs runs failed (${rounds} rounds of: ${tests[*]})"
for line in "${summary[@]}"; do echo "  $line"; done
[ "$failures" -eq 0 ]
