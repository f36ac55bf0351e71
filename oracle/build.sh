#!/usr/bin/env bash
# Builds the scheduling oracle (oracle/karpenter, a Go program over Karpenter's own provisioner and
# AWS provider) against one Karpenter release and caches it. Prints the binary's path.
#
#   oracle/build.sh RELEASE     RELEASE: a file oracle/karpenter/releases/RELEASE.mod (v1.14.1, ...)
#   oracle/build.sh --list      the releases there are modules for, one per line
#
# Each release is the same program built with -modfile=releases/RELEASE.mod (its go.sum beside it)
# and the build tag of its wiring file (wiring_<minor>.go): the wiring differs where Karpenter's
# constructors do. The binary is cached under the project's cache by a digest of the sources, the
# module files and the Go version, like the lab's controller (e2e/bed/build-karpenter.sh).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
src="$here/karpenter"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
log() { echo "oracle/build.sh: $*" >&2; }

if [ "${1:-}" = --list ]; then
  for mod in "$src"/releases/*.mod; do basename "$mod" .mod; done | sort -V
  exit 0
fi
release="${1:?usage: oracle/build.sh RELEASE (oracle/build.sh --list names them)}"
modfile="$src/releases/$release.mod"
[ -f "$modfile" ] || { log "no module for Karpenter $release (releases: $(bash "$0" --list | tr '\n' ' '))"; exit 1; }
command -v go >/dev/null || { log "no Go toolchain on PATH (e2e/bed/install-deps.sh installs one)"; exit 1; }
# v1.14.1 → karpenter_v1_14: the wiring file for that minor.
minor="$(echo "$release" | sed -E 's/^v([0-9]+)\.([0-9]+)\..*/v\1_\2/')"
tag="karpenter_$minor"
grep -lq "^//go:build $tag\$" "$src"/wiring_*.go \
  || { log "no wiring file with //go:build $tag for $release"; exit 1; }

digest="$( { cat "$src"/*.go "$modfile" "$src/releases/$release.sum"; go version; } | sha256sum | cut -c1-12)"
binary="$cache_root/oracle-bin/$release-$digest/oracle"
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi

mkdir -p "$(dirname "$binary")"
log "building the oracle for Karpenter $release from its Go modules (several minutes on 2 cold cores)"
cd "$src"
env CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOSUMDB=off \
  go build -trimpath -modfile="$modfile" -tags "$tag" -ldflags "-s -w" -o "$binary.tmp" . >&2
mv "$binary.tmp" "$binary"
echo "$binary"
