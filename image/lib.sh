# shellcheck shell=bash
# Sourced by image/build.sh and image/test.sh: podman with the repository's configuration and its
# state under the build directory, nothing in system paths.
#
#   KH_IMAGE_BUILD_DIR   where the rootfs, podman's storage and the archive go
#                        (default: ${CARGO_TARGET_DIR:-target}/image)

# Variables for the scripts that source this file.
# shellcheck disable=SC2034
{
image_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo_root="$(dirname "$image_dir")"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
target_dir="${CARGO_TARGET_DIR:-target}"
case "$target_dir" in /*) ;; *) target_dir="$repo_root/$target_dir" ;; esac
build_dir="${KH_IMAGE_BUILD_DIR:-$target_dir/image}"
case "$build_dir" in /*) ;; *) build_dir="$repo_root/$build_dir" ;; esac

export CONTAINERS_CONF="$image_dir/containers.conf"
mkdir -p "$build_dir"
sed "s|@BUILD_DIR@|$build_dir|g" "$image_dir/storage.conf" > "$build_dir/storage.conf"
export CONTAINERS_STORAGE_CONF="$build_dir/storage.conf"

image_name="localhost/karpenter-health"
image_version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$repo_root/Cargo.toml")"
archive="$build_dir/karpenter-health-$image_version.oci.tar"
sbom="$build_dir/karpenter-health-$image_version.cdx.json"
}

kh_podman() {
  mkdir -p "$build_dir/tmp"
  # The tmp directory (libpod's state, events log) cannot be set in containers.conf relative to
  # anything, so it is given here.
  TMPDIR="$build_dir/tmp" podman --tmpdir "$build_dir/tmp" "$@"
}

kh_skopeo() {
  mkdir -p "$build_dir/tmp"
  TMPDIR="$build_dir/tmp" skopeo "$@"
}

now_ms() { date +%s%3N; }
# Seconds since a now_ms reading, with milliseconds: 12.345
secs_since() {
  local d=$(($(now_ms) - $1))
  printf '%d.%03d' $((d / 1000)) $((d % 1000))
}
