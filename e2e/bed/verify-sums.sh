#!/usr/bin/env bash
# Checks the committed go.sum of every Go module the bed builds (the control plane, each Karpenter
# release, each oracle release) against the Go checksum database, once, where it is reachable:
# every module is downloaded into an empty module cache with GOSUMDB on, so the go command checks
# each hash against sum.golang.org as well as against go.sum. The builds themselves run with
# GOSUMDB=off and -mod=readonly (go.sum vouches for every module), because the machines that run
# them cannot reach the database; this script is how the committed hashes were, or can be, tied to
# it. Exits 0 when every module verified, 1 when one did not, 2 when the database is unreachable.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
# shellcheck source=e2e/bed/go-path.sh
source "$root/e2e/bed/go-path.sh"
sumdb="${GOSUMDB_URL:-https://sum.golang.org}"
if ! curl -sSf -o /dev/null --max-time 10 "$sumdb/latest"; then
  echo "verify-sums: $sumdb is not reachable from this machine; nothing verified" >&2
  exit 2
fi
cache="$(mktemp -d)"
trap 'chmod -R u+w "$cache"; rm -rf "$cache"' EXIT
status=0
check() { # check DIR [GOFLAGS]
  if (cd "$1" && GOMODCACHE="$cache" GOSUMDB=sum.golang.org GOFLAGS="${2:-} -mod=readonly" go mod download all >/dev/null); then
    echo "verify-sums: $1: every module matches the checksum database"
  else
    echo "verify-sums: $1: a module does not match (see above)" >&2; status=1
  fi
}
check "$root/e2e/bed/kube"
for module in "$root"/e2e/bed/karpenter/*/; do check "${module%/}"; done
for modfile in "$root"/oracle/karpenter/releases/*.mod; do
  check "$root/oracle/karpenter" "-modfile=$modfile"
done
exit "$status"
