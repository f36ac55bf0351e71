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
command -v kubectl >/dev/null 2>&1 || need_apt+=(kubernetes-client)
command -v curl >/dev/null 2>&1 || need_apt+=(curl)
python3 -c 'import venv' >/dev/null 2>&1 || need_apt+=(python3-venv)

if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "bed: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Go builds the control plane and Karpenter from the module proxy (build-kube.sh,
# build-karpenter.sh). The machine's Go must know toolchain switching (1.21 or later): it then
# fetches, from the same proxy, the newer Go a module's go.mod asks for.
go_minor="$(go env GOVERSION 2>/dev/null | sed -n 's/^go1\.\([0-9]*\).*/\1/p')"
if [ -z "$go_minor" ] || [ "$go_minor" -lt 21 ]; then
  echo "bed: Go 1.21 or later is needed on PATH to build the bed (found: $(go version 2>&1 || echo none))" >&2
  exit 1
fi

# moto server (AWS API emulator) in a virtualenv of its own, outside the work tree.
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
venv="$cache_root/moto-venv"
moto_version="${MOTO_VERSION:-5.2.5}"
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c "import moto.server, flask_cors" >/dev/null 2>&1; then
  echo "bed: installing moto[server]==$moto_version into a virtualenv"
  mkdir -p "$cache_root"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "moto[server]==$moto_version"
fi

# What the image and chart tests need (podman and its tools; helm, Prometheus, Alertmanager),
# each in a script of its own.
for extra in install-image-tools.sh install-chart-tools.sh; do
  if [ -f "$(dirname "$0")/$extra" ]; then
    bash "$(dirname "$0")/$extra"
  fi
done
