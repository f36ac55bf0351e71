#!/usr/bin/env bash
# Builds the bed's `authenticate` (e2e/bed/authenticator: the AWS IAM Authenticator's own mapping
# of an identity through aws-auth, from its Go module) and caches it. Prints the binary's path.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/authenticator"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
# shellcheck source=e2e/bed/go-path.sh
source "$here/go-path.sh"
command -v go >/dev/null || { echo "build-authenticator: no Go toolchain on PATH (e2e/bed/install-deps.sh installs one)" >&2; exit 1; }
digest="$( { cat "$module/go.mod" "$module/go.sum" "$module/main.go"; (cd "$module" && go version); } | sha256sum | cut -c1-12)"
binary="$cache_root/authenticator-bin/$digest/authenticate"
if [ -x "$binary" ]; then echo "$binary"; exit 0; fi
mkdir -p "$(dirname "$binary")"
echo "build-authenticator: building the authenticator's mapping from its Go module" >&2
(cd "$module" && env CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOSUMDB=off \
  go build -trimpath -ldflags "-s -w" -o "$binary.tmp" . >&2)
mv "$binary.tmp" "$binary"
echo "$binary"
