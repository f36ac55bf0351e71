#!/usr/bin/env bash
# Builds the scheduling oracle (oracle/karpenter, a Go program over Karpenter's own provisioner and
# AWS provider) against one Karpenter release and caches it. Prints the binary's path.
#
#   oracle/build.sh RELEASE          RELEASE: a file oracle/karpenter/releases/RELEASE.mod (v1.14.1, ...)
#   oracle/build.sh --list           the releases there are modules for, one per line
#   oracle/build.sh --module RELEASE (re)writes releases/RELEASE.mod and .sum from the module proxy
#                                    (`go mod tidy` over the sources and that release's wiring only)
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
tidy=""
if [ "${1:-}" = --module ]; then tidy=1; shift; fi
release="${1:?usage: oracle/build.sh RELEASE (oracle/build.sh --list names them)}"
modfile="$src/releases/$release.mod"
# The pinned Go install-deps.sh installs where the machine has none.
# shellcheck source=e2e/bed/go-path.sh
source "$here/../e2e/bed/go-path.sh"
command -v go >/dev/null || { log "no Go toolchain on PATH (e2e/bed/install-deps.sh installs one)"; exit 1; }
# v1.14.1 → karpenter_v1_14: the wiring file for that minor.
minor="$(echo "$release" | sed -E 's/^v([0-9]+)\.([0-9]+)\..*/v\1_\2/')"
tag="karpenter_$minor"
wiring="$(grep -l "^//go:build $tag\$" "$src"/wiring_*.go | head -1)"
[ -n "$wiring" ] || { log "no wiring file with //go:build $tag for $release"; exit 1; }
if [ -n "$tidy" ]; then
  # `go mod tidy` weighs every build tag at once; tidy a copy that holds this release's wiring only.
  work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
  find "$src" -maxdepth 1 -name '*.go' ! -name 'wiring_*.go' -exec cp {} "$work/" \;
  sed "s|^//go:build $tag\$||" "$wiring" > "$work/$(basename "$wiring")"
  printf 'module karpenter-health.io/oracle\n\ngo 1.25\n\nrequire github.com/aws/karpenter-provider-aws %s\n' "$release" > "$work/go.mod"
  (cd "$work" && GOFLAGS=-mod=mod go mod tidy >&2)
  cp "$work/go.mod" "$modfile"; cp "$work/go.sum" "$src/releases/$release.sum"
  log "wrote $modfile and its go.sum"; exit 0
fi
[ -f "$modfile" ] || { log "no module for Karpenter $release (releases: $(bash "$0" --list | tr '\n' ' '); add one with --module)"; exit 1; }

# `go version` inside the module: the toolchain that builds it, not merely the one on PATH.
digest="$( { cat "$src"/*.go "$modfile" "$src/releases/$release.sum"; (cd "$src" && go version); } | sha256sum | cut -c1-12)"
binary="$cache_root/oracle-bin/$release-$digest/oracle"
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi

mkdir -p "$(dirname "$binary")"
log "building the oracle for Karpenter $release from its Go modules (several minutes on 2 cold cores)"
cd "$src"
env CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOSUMDB=off \
  go build -trimpath -modfile="$modfile" -tags "$tag" -ldflags "-s -w" -o "$binary.tmp" . >&2
mv "$binary.tmp" "$binary"
echo "$binary"
