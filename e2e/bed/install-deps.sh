#!/usr/bin/env bash
# Installs what the local test bed needs from Debian's packages and PyPI. Idempotent: a second run
# only checks. Used by `make demo`, `make test` and CI, so a fresh machine needs nothing by hand.
set -euo pipefail

# rust-toolchain.toml pins the compiler. Where rustup cannot download, a stable toolchain of
# exactly that version is linked under the pinned name (rustup runs from / so the pin does not
# apply to this very check).
pinned="$(sed -n 's/^channel = "\(.*\)"/\1/p' "$(dirname "$0")/../../rust-toolchain.toml")"
if command -v rustup >/dev/null 2>&1 && [ -n "$pinned" ] \
   && ! (cd / && rustup toolchain list | grep -q "^$pinned"); then
  stable_version="$(cd / && rustup run stable rustc --version | awk '{print $2}')"
  if [ "$stable_version" = "$pinned" ]; then
    echo "toolchain: linking the installed stable $stable_version as $pinned"
    (cd / && rustup toolchain link "$pinned" "$(rustup run stable rustc --print sysroot)")
  else
    echo "toolchain: rust-toolchain.toml pins $pinned but stable is $stable_version; rustup will fetch it" >&2
  fi
fi

need_apt=()
command -v openssl >/dev/null 2>&1 || need_apt+=(openssl)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
python3 -c 'import venv' >/dev/null 2>&1 || need_apt+=(python3-venv)

if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "bed: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Go builds the control plane and Karpenter from the module proxy (build-kube.sh,
# build-karpenter.sh, oracle/build.sh). A machine's own Go of 1.21 or later is used as it is (it
# fetches from the same proxy the newer Go a module's go.mod asks for); without one, the pinned
# release below is installed from the Go module proxy (the toolchain module the go command itself
# downloads for GOTOOLCHAIN), its archive checked against the SHA-256 pinned here, into the cache,
# where go-path.sh puts it on PATH.
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
go_pinned=1.26.8
declare -A go_sha256=(
  [amd64]=30c2b1bf7dcc88d3eb0a1364e47ddd9128edb3110a30e8a0ef61cd5856b31de7
  [arm64]=02b36b6787b3ac767668f630e2998df45a3b1f9ffee08d1bf3ef6487cd658d99
)
# shellcheck source=e2e/bed/go-path.sh
source "$(dirname "$0")/go-path.sh"
go_minor="$( { go env GOVERSION 2>/dev/null || true; } | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
if [ -z "$go_minor" ] || [ "$go_minor" -lt 21 ]; then
  case "$(uname -m)" in x86_64) go_arch=amd64 ;; aarch64|arm64) go_arch=arm64 ;; *) go_arch="" ;; esac
  [ -n "$go_arch" ] || { echo "bed: no Go 1.21+ on PATH and no pinned Go for $(uname -m)" >&2; exit 1; }
  module="v0.0.1-go$go_pinned.linux-$go_arch"
  echo "bed: no Go 1.21+ on PATH (found: $(go version 2>/dev/null || echo none)); installing Go $go_pinned from the Go module proxy"
  tmp="$(mktemp -d)"
  curl -sSfL -o "$tmp/go.zip" "${GOPROXY_URL:-https://proxy.golang.org}/golang.org/toolchain/@v/$module.zip"
  echo "${go_sha256[$go_arch]}  $tmp/go.zip" | sha256sum -c --quiet - \
    || { echo "bed: the Go $go_pinned archive does not match its pinned SHA-256" >&2; rm -rf "$tmp"; exit 1; }
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$tmp/go.zip" "$tmp"
  rm -rf "$cache_root/go"; mkdir -p "$cache_root"
  mv "$tmp/golang.org/toolchain@$module" "$cache_root/go"
  chmod +x "$cache_root"/go/bin/* "$cache_root"/go/pkg/tool/*/* 2>/dev/null || true
  rm -rf "$tmp"
  # shellcheck source=e2e/bed/go-path.sh
  source "$(dirname "$0")/go-path.sh"
  echo "bed: $(go version) in $cache_root/go"
fi

# moto server (AWS API emulator) in a virtualenv of its own, outside the work tree, with every
# package pinned (moto-requirements.txt). A cached virtualenv made from another list, or broken,
# is made again: the bed never runs a moto other than the pinned one.
venv="$cache_root/moto-venv"
requirements="$(dirname "$0")/moto-requirements.txt"
pinned_list="$(grep -v '^#' "$requirements" | sha256sum | cut -c1-16)"
if [ ! -x "$venv/bin/python" ] || [ "$(cat "$venv/.kh-requirements" 2>/dev/null)" != "$pinned_list" ] \
   || ! "$venv/bin/python" -c "import moto.server, flask_cors" >/dev/null 2>&1; then
  if [ -x "$venv/bin/pip" ] && [ ! -f "$venv/.kh-requirements" ] \
     && [ "$("$venv/bin/pip" freeze --disable-pip-version-check 2>/dev/null | sha256sum | cut -c1-16)" = "$pinned_list" ]; then
    # Made before the list was recorded, with exactly the pinned packages: record it.
    echo "$pinned_list" > "$venv/.kh-requirements"
  else
    echo "bed: installing moto[server] and its pinned dependencies into a virtualenv"
    rm -rf "$venv"; mkdir -p "$cache_root"
    python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check --no-deps -r "$requirements"
    echo "$pinned_list" > "$venv/.kh-requirements"
  fi
fi

# The image and chart tools (podman and its tools; helm, Prometheus, Alertmanager) are installed
# by the targets that need them (install-image-tools.sh, install-chart-tools.sh), not for every
# bed: `make demo` and the lab need neither.
