#!/usr/bin/env bash
# Builds the bed's control plane from Go modules and caches it: etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl of the Kubernetes release
# e2e/bed/kube/go.mod pins (k8s.io/kubernetes, its staging modules at the matching v0.x, and
# etcd's server at the release that Kubernetes requires), verified against the committed go.sum.
# kubectl is the server's own release, so no client skew is tested by accident (Debian's package
# is 1.20). Prints the folder holding the five binaries; a second run with a warm cache takes well
# under a second.
#
# Honours the envtest conventions: with KUBEBUILDER_ASSETS (a folder holding kube-apiserver, etcd
# and, optionally, kube-controller-manager and kube-scheduler) or TEST_ASSET_* set, `bed.sh`
# takes those binaries and this script builds only what is missing.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
module="$here/kube"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
log() { echo "build-kube: $*" >&2; }

# The pinned Go install-deps.sh installs where the machine has none.
# shellcheck source=e2e/bed/go-path.sh
source "$here/go-path.sh"
command -v go >/dev/null || { log "no Go toolchain on PATH (e2e/bed/install-deps.sh installs one)"; exit 1; }
# The pinned release and a digest of the module and the compiler: a new pin or Go gets new binaries.
version="$(sed -n 's/^\(require \)\{0,1\}[[:space:]]*k8s.io\/kubernetes \(v[^ ]*\).*/\2/p' "$module/go.mod")"
[ -n "$version" ] || { log "e2e/bed/kube/go.mod pins no k8s.io/kubernetes"; exit 1; }
# `go version` inside the module: the toolchain that builds it (a go line newer than the
# machine's Go switches to that release), not merely the one on PATH.
digest="$( { cat "$module/go.mod" "$module/go.sum"; (cd "$module" && go version); } | sha256sum | cut -c1-12)"
bin_dir="$cache_root/kube-bin/$version-$digest"
binaries=(etcd kube-apiserver kube-controller-manager kube-scheduler kubectl)
missing=()
for b in "${binaries[@]}"; do [ -x "$bin_dir/$b" ] || missing+=("$b"); done
if [ "${#missing[@]}" -eq 0 ]; then echo "$bin_dir"; exit 0; fi

mkdir -p "$bin_dir"
# What `kube-apiserver --version` and the API server's /version report, as Kubernetes' own
# release build stamps them (hack/lib/version.sh): Karpenter and the operator read /version.
minor="${version#v1.}"; minor="${minor%%.*}"
stamp=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  stamp+=" -X $pkg.gitVersion=$version -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  stamp+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done
cd "$module"
for b in "${missing[@]}"; do
  case "$b" in
    etcd) pkg=go.etcd.io/etcd/server/v3 ;;
    *) pkg="k8s.io/kubernetes/cmd/$b" ;;
  esac
  log "building $b $version from Go modules (about 6 minutes for all five on 2 cold cores)"
  # go.sum is committed: -mod=readonly refuses any module it does not already vouch for, so the
  # checksum database (which these machines cannot reach) is never needed.
  env CGO_ENABLED=0 GOFLAGS="-mod=readonly -buildvcs=false" GOSUMDB=off \
    go build -trimpath -ldflags "-s -w$stamp" -o "$bin_dir/$b.tmp" "$pkg" >&2
  mv "$bin_dir/$b.tmp" "$bin_dir/$b"
done
echo "$bin_dir"
