#!/usr/bin/env bash
# Builds kube-apiserver and kube-controller-manager from Debian's `kubernetes` source package and
# caches them, because no container engine or binary download works on these machines.
# Prints the folder holding both binaries. A second run with a warm cache takes well under a second.
#
# Honours the envtest conventions: with KUBEBUILDER_ASSETS (a folder holding kube-apiserver and,
# optionally, kube-controller-manager) or TEST_ASSET_KUBE_APISERVER set, nothing is built.
set -euo pipefail

cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
bin_dir="$cache_root/kube-bin"
if [ -x "$bin_dir/kube-apiserver" ] && [ -x "$bin_dir/kube-controller-manager" ]; then
  echo "$bin_dir"; exit 0
fi

log() { echo "build-kube: $*" >&2; }
work="$cache_root/kube-src"
mkdir -p "$work" "$bin_dir"
cd "$work"

# 1. Fetch the source package through a private deb-src list derived from the system's own sources,
#    so no mirror address is written anywhere in the project.
if ! ls kubernetes_*.orig.tar.gz >/dev/null 2>&1; then
  log "fetching Debian's kubernetes source package"
  src_list="$work/deb-src.sources"
  lists="$work/apt-lists"
  mkdir -p "$lists/partial"
  system_sources=/etc/apt/sources.list.d/debian.sources
  if [ -f "$system_sources" ]; then
    sed 's/^Types: deb$/Types: deb-src/' "$system_sources" > "$src_list"
    opts=(-o "Dir::Etc::sourcelist=$src_list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$lists")
  else
    sed -n 's/^deb /deb-src /p' /etc/apt/sources.list > "$work/deb-src.list"
    opts=(-o "Dir::Etc::sourcelist=$work/deb-src.list" -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$lists")
  fi
  apt-get "${opts[@]}" update -qq >&2
  apt-get "${opts[@]}" source --download-only kubernetes >&2
fi

tree="$work/tree"
if [ ! -f "$tree/.patched" ]; then
  log "unpacking and patching the source tree"
  rm -rf "$tree"; mkdir -p "$tree"
  tar -xzf kubernetes_*.orig.tar.gz -C "$tree" --strip-components=1
  cd "$tree"
  # reflect2 v1.0.1 segfaults under Go >= 1.18 the first time a custom resource is created.
  rm -rf vendor/github.com/modern-go/reflect2
  cp -r /usr/share/gocode/src/github.com/modern-go/reflect2 vendor/github.com/modern-go/reflect2
  rm -f vendor/github.com/modern-go/reflect2/go.mod
  # json-iterator v1.1.12 is the release made for reflect2 v1.0.2.
  rm -rf vendor/github.com/json-iterator/go
  cp -r /usr/share/gocode/src/github.com/json-iterator/go vendor/github.com/json-iterator/go
  rm -f vendor/github.com/json-iterator/go/go.mod vendor/github.com/json-iterator/go/go.sum
  # Under Go >= 1.19 the vendored OpenAPI validators treat "" as null (reflect.Zero shares the zero
  # buffer with ValueOf("")), rejecting every empty string field such as a condition's message.
  for f in vendor/k8s.io/kube-openapi/pkg/validation/validate/type.go vendor/github.com/go-openapi/validate/type.go; do
    [ -f "$f" ] || continue
    sed -i 's/if data == nil || reflect.DeepEqual(reflect.Zero(reflect.TypeOf(data)), reflect.ValueOf(data)) {/if data == nil {/' "$f"
    grep -q 'if data == nil {' "$f" || { log "patch of $f did not apply"; exit 1; }
  done
  mkdir -p .go/src/k8s.io
  ln -sfn ../../.. .go/src/k8s.io/kubernetes
  touch .patched
fi

cd "$tree"
mkdir -p "$work/home"
for what in kube-apiserver kube-controller-manager; do
  if [ ! -x "$bin_dir/$what" ]; then
    log "building $what (several minutes on a cold Go cache)"
    env GOPATH="$tree/.go" GO111MODULE=off CGO_ENABLED=0 HOME="$work/home" GOFLAGS= \
      make WHAT="cmd/$what" >&2
    cp "_output/local/bin/linux/amd64/$what" "$bin_dir/$what.tmp"
    mv "$bin_dir/$what.tmp" "$bin_dir/$what"
  fi
done
echo "$bin_dir"
