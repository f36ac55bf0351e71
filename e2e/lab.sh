#!/usr/bin/env bash
# `make e2e-lab`: the lab's tests (the `lab` test binary, e2e/tests/lab/) against each Karpenter
# release named, each run on a bed of its own whose Karpenter CRDs are that release's, all runs
# side by side.
# A lab mostly waits on Karpenter's timers (about a fifth of 2 cores while one runs), so runs side
# by side take little longer than one. Each bed is stopped afterwards whatever happens; every line
# of a run is prefixed with its spec; the exit status is non-zero if any run failed, and the
# failures of each failed run are printed again at the end (they would be lost among the lines of
# the others).
#
#   e2e/lab.sh SPEC...           e.g. e2e/lab.sh v1.14.1 v1.8.6
#   RELEASE                      every lab test against that release
#   RELEASE/MODULES              the tests of those modules only: comma-separated names of
#                                e2e/tests/lab/*.rs, or `rest` for every lab module no other spec
#                                of the same release names (v1.14.1/reasons v1.14.1/rest splits
#                                one release over two beds)
#   RELEASE/MODULES/FILTER       those modules' tests whose names contain FILTER only
#                                (v1.6.3/classic_failures/before_1_7)
#   LAB_TEST_ARGS="--nocapture"  more arguments for the test binary (what the tests print)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
[ $# -gt 0 ] || { echo "usage: e2e/lab.sh SPEC..." >&2; exit 2; }
cargo="${CARGO:-cargo}"
lab_modules=()
for f in e2e/tests/lab/*.rs; do
  [ "$(basename "$f" .rs)" = main ] || lab_modules+=("$(basename "$f" .rs)")
done

# A spec's parts: its release, the modules it names ("" for all, `rest`) and its filter.
parts_of() { IFS=/ read -r part_release part_files part_filter <<<"$1"; }

# The lab modules a spec runs, one per line.
files_of() {
  local spec="$1" named=() other more=() f
  parts_of "$spec"
  local release="$part_release" files="$part_files"
  if [ -z "$files" ]; then printf '%s\n' "${lab_modules[@]}"; return; fi
  if [ "$files" != rest ]; then tr ',' '\n' <<<"$files"; return; fi
  for other in "${specs[@]}"; do
    parts_of "$other"
    if [ "$part_release" = "$release" ] && [ -n "$part_files" ] && [ "$part_files" != rest ]; then
      IFS=',' read -r -a more <<<"$part_files"
      named+=("${more[@]}")
    fi
  done
  for f in "${lab_modules[@]}"; do
    case " ${named[*]} " in *" $f "*) ;; *) echo "$f" ;; esac
  done
}

specs=("$@")
for spec in "${specs[@]}"; do
  mapfile -t chosen < <(files_of "$spec")
  [ ${#chosen[@]} -gt 0 ] || { echo "lab: $spec runs no test module" >&2; exit 2; }
  for f in "${chosen[@]}"; do
    [ -f "e2e/tests/lab/$f.rs" ] || { echo "lab: $spec names e2e/tests/lab/$f.rs, which does not exist" >&2; exit 2; }
  done
done

# Built once before the runs start, so that they do not wait on each other's build lock.
"$cargo" test --locked -p karpenter-health-e2e --test lab --no-run --quiet || exit 1
# Every lab test's full name (module::function), so that a spec runs exactly the tests of its
# modules that contain its filter (libtest's own filters match any substring of the name).
mapfile -t lab_tests < <("$cargo" test --locked -q -p karpenter-health-e2e --test lab -- --list --format terse \
  | sed -n 's/: test$//p')
[ ${#lab_tests[@]} -gt 0 ] || { echo "lab: the lab binary lists no test" >&2; exit 1; }

# The full names of the tests a spec runs, one per line.
tests_of() {
  local spec="$1" modules=() t
  mapfile -t modules < <(files_of "$spec")
  parts_of "$spec"
  for t in "${lab_tests[@]}"; do
    case " ${modules[*]} " in *" ${t%%::*} "*) ;; *) continue ;; esac
    [[ "$t" == *"$part_filter"* ]] && echo "$t"
  done
}
for spec in "${specs[@]}"; do
  [ -n "$(tests_of "$spec")" ] || { echo "lab: $spec selects no test" >&2; exit 2; }
done
declare -A built
for spec in "${specs[@]}"; do
  [ -n "${built[${spec%%/*}]:-}" ] && continue
  bash e2e/bed/build-karpenter.sh "${spec%%/*}" >/dev/null || exit 1
  built[${spec%%/*}]=1
done
# The AWS IAM Authenticator's mapping, which the node stand-in asks (e2e/src/node_authentication.rs).
KH_AUTHENTICATE_BIN="$(bash e2e/bed/build-authenticator.sh)" || exit 1
export KH_AUTHENTICATE_BIN

logs="$(mktemp -d)"
trap 'rm -rf "$logs"' EXIT

# A spec's label: its release and, when it names files, what it names (no slashes).
label_of() { parts_of "$1"; echo "$part_release${part_files:+ $part_files}"; }

run_spec() {
  local spec="$1" index="$2" release="${1%%/*}" status=0 crds chosen=() began=$SECONDS
  local bed="$root/e2e/.bed-lab-$release-$index"
  mapfile -t chosen < <(tests_of "$spec")
  crds="$(bash e2e/bed/build-karpenter.sh crds "$release")" || return 1
  KARPENTER_CRDS_DIR="$crds" KH_BED_DIR="$bed" KH_BED_ROLE="lab $release" \
    bash e2e/bed/bed.sh up "$bed" || return 1
  echo "lab: the real Karpenter $release ($(bash e2e/bed/build-karpenter.sh "$release")), ${#chosen[@]} tests"
  KH_KARPENTER_RELEASE="$release" KH_BED_DIR="$bed" \
    "$cargo" test --locked -p karpenter-health-e2e --test lab -- --test-threads=1 ${LAB_TEST_ARGS:-} --exact "${chosen[@]}" \
    || status=$?
  bash e2e/bed/bed.sh down "$bed"
  # Each bed's own time, so that the split of LAB_RELEASES can be balanced.
  echo "lab: $spec took $((SECONDS - began)) s"
  return "$status"
}

declare -A pids
started=$SECONDS
for i in "${!specs[@]}"; do
  spec="${specs[$i]}"
  ( run_spec "$spec" "$i" 2>&1 | tee "$logs/$i.log" | sed -u "s|^|[$(label_of "$spec")] |"; exit "${PIPESTATUS[0]}" ) &
  pids[$i]=$!
done
failed=()
for i in "${!specs[@]}"; do
  wait "${pids[$i]}" || failed+=("$i")
done
echo "lab: ${specs[*]} in $((SECONDS - started)) s"
[ ${#failed[@]} -eq 0 ] && exit 0
for i in "${failed[@]}"; do
  echo "lab: FAILED: ${specs[$i]}; its failures again:" >&2
  # cargo test's own summary of each failed test: its output and the names, up to the result,
  # without the backtraces' frames.
  sed -n '/^failures:$/,/^test result:/p' "$logs/$i.log" \
    | grep -Ev '^ +([0-9]+: |at )' | tail -n 200 >&2
  grep -E '^error: test failed|^lab: ' "$logs/$i.log" >&2 || true
done
exit 1
