#!/usr/bin/env bash
# `make e2e-lab`: the lab's tests (e2e/tests/lab_*.rs) against each Karpenter release named, each
# run on a bed of its own whose Karpenter CRDs are that release's, all runs side by side.
# A lab mostly waits on Karpenter's timers (about a fifth of 2 cores while one runs), so runs side
# by side take little longer than one. Each bed is stopped afterwards whatever happens; every line
# of a run is prefixed with its spec; the exit status is non-zero if any run failed, and the
# failures of each failed run are printed again at the end (they would be lost among the lines of
# the others).
#
#   e2e/lab.sh SPEC...           e.g. e2e/lab.sh v1.14.1 v1.8.6
#   RELEASE                      every lab test file against that release
#   RELEASE/FILES                the tests of those files only: comma-separated names of
#                                e2e/tests/*.rs, or `rest` for every lab file no other spec of
#                                the same release names (v1.14.1/lab_reasons v1.14.1/rest splits
#                                one release over two beds)
#   RELEASE/FILES/FILTER         those files' tests whose names contain FILTER only
#                                (v1.6.3/lab_classic_failures/before_1_7)
#   E2E_LAB_TESTS="--test lab_reasons ..." chooses the lab test files (all lab_*.rs by default)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root" || exit 1
[ $# -gt 0 ] || { echo "usage: e2e/lab.sh SPEC..." >&2; exit 2; }
cargo="${CARGO:-cargo}"
read -r -a lab_files <<<"$(for w in ${E2E_LAB_TESTS:-$(for f in e2e/tests/lab_*.rs; do printf -- '--test %s ' "$(basename "$f" .rs)"; done)}; do
  [ "$w" = --test ] || printf '%s ' "$w"; done)"

# A spec's parts: its release, the files it names ("" for all, `rest`) and its filter.
parts_of() { IFS=/ read -r part_release part_files part_filter <<<"$1"; }

# The test files a spec runs, one per line.
files_of() {
  local spec="$1" named=() other more=() f
  parts_of "$spec"
  local release="$part_release" files="$part_files"
  if [ -z "$files" ]; then printf '%s\n' "${lab_files[@]}"; return; fi
  if [ "$files" != rest ]; then tr ',' '\n' <<<"$files"; return; fi
  for other in "${specs[@]}"; do
    parts_of "$other"
    if [ "$part_release" = "$release" ] && [ -n "$part_files" ] && [ "$part_files" != rest ]; then
      IFS=',' read -r -a more <<<"$part_files"
      named+=("${more[@]}")
    fi
  done
  for f in "${lab_files[@]}"; do
    case " ${named[*]} " in *" $f "*) ;; *) echo "$f" ;; esac
  done
}

specs=("$@")
all_files=()
for spec in "${specs[@]}"; do
  mapfile -t chosen < <(files_of "$spec")
  [ ${#chosen[@]} -gt 0 ] || { echo "lab: $spec runs no test file" >&2; exit 2; }
  for f in "${chosen[@]}"; do
    [ -f "e2e/tests/$f.rs" ] || { echo "lab: $spec names e2e/tests/$f.rs, which does not exist" >&2; exit 2; }
    all_files+=(--test "$f")
  done
done

# Built once before the runs start, so that they do not wait on each other's build lock.
"$cargo" test --locked -p karpenter-health-e2e "${all_files[@]}" --no-run --quiet || exit 1
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
  local spec="$1" index="$2" release="${1%%/*}" status=0 crds filter=() chosen=() f
  local bed="$root/e2e/.bed-lab-$release-$index"
  while read -r f; do chosen+=(--test "$f"); done < <(files_of "$spec")
  parts_of "$spec"
  [ -z "$part_filter" ] || filter=("$part_filter")
  crds="$(bash e2e/bed/build-karpenter.sh crds "$release")" || return 1
  KARPENTER_CRDS_DIR="$crds" KH_BED_DIR="$bed" KH_BED_ROLE="lab $release" \
    bash e2e/bed/bed.sh up "$bed" || return 1
  echo "lab: the real Karpenter $release ($(bash e2e/bed/build-karpenter.sh "$release"))"
  KH_KARPENTER_RELEASE="$release" KH_BED_DIR="$bed" \
    "$cargo" test --locked -p karpenter-health-e2e "${chosen[@]}" -- --test-threads=1 "${filter[@]}" \
    || status=$?
  bash e2e/bed/bed.sh down "$bed"
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
