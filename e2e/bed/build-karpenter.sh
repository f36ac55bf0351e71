#!/usr/bin/env bash
# Builds the real Karpenter controller (aws/karpenter-provider-aws `cmd/controller`) of a pinned
# release from its Go module and caches it. Prints the binary's path.
#
#   build-karpenter.sh [RELEASE]       RELEASE: a folder of e2e/bed/karpenter/ (v1.14.1, the
#                                      default, or v1.8.6; KH_KARPENTER_RELEASE chooses too)
#   build-karpenter.sh crds [RELEASE]  prints the folder of that release's own CRDs (in its Go
#                                      module), which the lab's bed installs
#
# Each release's folder is a module that requires that release, with its go.sum committed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
want_crds=""
if [ "${1:-}" = crds ]; then want_crds=1; shift; fi
release="${1:-${KH_KARPENTER_RELEASE:-v1.14.1}}"
module="$here/karpenter/$release"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
log() { echo "build-karpenter: $*" >&2; }

[ -f "$module/go.mod" ] || { log "no module for Karpenter $release (releases: $(ls "$here/karpenter" | tr '\n' ' '))"; exit 1; }
# The pinned Go install-deps.sh installs where the machine has none.
# shellcheck source=e2e/bed/go-path.sh
source "$here/go-path.sh"
command -v go >/dev/null || { log "no Go toolchain on PATH (e2e/bed/install-deps.sh installs one)"; exit 1; }
if [ -n "$want_crds" ]; then
  dir="$(cd "$module" && GOFLAGS="-mod=readonly" GOSUMDB=off go list -m -f '{{.Dir}}' github.com/aws/karpenter-provider-aws)"
  if [ -z "$dir" ] || [ ! -d "$dir/pkg/apis/crds" ]; then
    (cd "$module" && GOFLAGS="-mod=readonly" GOSUMDB=off go mod download github.com/aws/karpenter-provider-aws >&2)
    dir="$(cd "$module" && GOFLAGS="-mod=readonly" GOSUMDB=off go list -m -f '{{.Dir}}' github.com/aws/karpenter-provider-aws)"
  fi
  echo "$dir/pkg/apis/crds"; exit 0
fi
# `go version` inside the module: the toolchain that builds it (a go line newer than the
# machine's Go switches to that release), not merely the one on PATH.
digest="$( { cat "$module/go.mod" "$module/go.sum"; (cd "$module" && go version); } | sha256sum | cut -c1-12)"
binary="$cache_root/karpenter-bin/$release-$digest/controller"
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi

mkdir -p "$(dirname "$binary")"
log "building Karpenter $release from its Go module (about 3 minutes on 2 cold cores)"
cd "$module"
# The version Karpenter reports (its Makefile's LDFLAGS: the tag without its "v").
env CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOSUMDB=off \
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/karpenter/pkg/operator.Version=${release#v}" \
  -o "$binary.tmp" github.com/aws/karpenter-provider-aws/cmd/controller >&2
mv "$binary.tmp" "$binary"
echo "$binary"
