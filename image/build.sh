#!/usr/bin/env bash
# `make image`: the karpenter-health container image, FROM scratch, without a daemon or a base image.
#
#   1. cargo build --release (reusing ${CARGO_TARGET_DIR:-target}), hadolint on the Containerfile;
#   2. a rootfs with the binary, exactly the shared libraries ldd lists plus the dynamic loader,
#      the CA bundle, and /etc/passwd and /etc/group for the non-root user 65532;
#      owners, modes and mtimes normalized to SOURCE_DATE_EPOCH (the last commit's time);
#   3. podman build --timestamp --omit-history --no-cache, so the same sources give the same digest;
#   4. an oci-archive at $KH_IMAGE_BUILD_DIR/karpenter-health-<version>.oci.tar, itself byte for byte
#      reproducible, to push with `skopeo copy oci-archive:<file> docker://<registry>/<name>:<tag>`;
#   5. beside it, the SBOM of the binary (CycloneDX JSON from Cargo.lock, cargo-cyclonedx, with
#      SOURCE_DATE_EPOCH so it is reproducible too): karpenter-health-<version>.cdx.json.
#
# KH_TARGET (a Rust target triple, default the host's) builds for another target: it needs that
# target's standard library (rustup target add) and a C toolchain and libc for it, and the rootfs
# takes the libraries ldd lists, which ldd can only tell for the host's architecture. These
# machines have only x86_64's standard library, so only the host's image is built and tested.
#
# Prints the archive's manifest digest on stdout and writes it, with podman's digest of the image in
# its storage, to <archive>.digest.
set -euo pipefail
# shellcheck source=image/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$repo_root"

log() { echo "image: $*" >&2; }
die() { echo "image: FAIL: $*" >&2; exit 1; }

# podman, buildah, skopeo, umoci, runc, hadolint: installed when missing, only checked otherwise.
bash "$repo_root/e2e/bed/install-image-tools.sh" || die "installing the image tools failed"
for tool in podman skopeo ldd readelf; do command -v "$tool" >/dev/null || die "$tool not found"; done
hadolint="$cache_root/hadolint-venv/bin/hadolint"
[ -x "$hadolint" ] || die "hadolint not found at $hadolint: run bash e2e/bed/install-image-tools.sh"
"$hadolint" "$image_dir/Containerfile" || die "hadolint found problems in image/Containerfile"
log "hadolint: image/Containerfile is clean"

target_args=()
release_dir="$target_dir/release"
if [ -n "${KH_TARGET:-}" ]; then
  target_args=(--target "$KH_TARGET")
  release_dir="$target_dir/$KH_TARGET/release"
fi
if [ "${KH_IMAGE_SKIP_CARGO:-}" != 1 ]; then
  cargo build --release --locked -p karpenter-health "${target_args[@]}"
fi
binary="$release_dir/karpenter-health"
[ -x "$binary" ] || die "no release binary at $binary"

export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
if [ "$revision" != unknown ] && [ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]; then
  revision="$revision-dirty"
fi
created="$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)"
# The source label: where the sources are published, when the clone came from an https remote.
source_url="$(git config --get remote.origin.url 2>/dev/null || true)"
case "$source_url" in https://*) ;; *) source_url=unknown ;; esac

# --- rootfs -------------------------------------------------------------------------------------
context="$build_dir/context"
rootfs="$context/rootfs"
rm -rf "$context"
mkdir -p "$rootfs/etc/ssl/certs"
install -m 0755 "$binary" "$rootfs/karpenter-health"
install -m 0644 "$repo_root/LICENSE" "$rootfs/LICENSE"

# Every absolute path ldd prints: the libraries and the dynamic loader (PT_INTERP), each copied
# (dereferenced) to the same path in the rootfs.
libs="$(ldd "$binary" | grep -o '/[^ ]*' || true)"
[ -n "$libs" ] || die "ldd lists no libraries for $binary (a static binary needs no loader: adjust build.sh)"
for lib in $libs; do
  [ -f "$lib" ] || die "ldd names $lib, which does not exist"
  mkdir -p "$rootfs$(dirname "$lib")"
  cp -L "$lib" "$rootfs$lib"
  chmod 0755 "$rootfs$lib"
done
interp="$(readelf -l "$binary" 2>/dev/null | sed -n 's/.*Requesting program interpreter: \(.*\)\]/\1/p' || true)"
if [ -n "$interp" ] && [ ! -f "$rootfs$interp" ]; then
  mkdir -p "$rootfs$(dirname "$interp")"; cp -L "$interp" "$rootfs$interp"; chmod 0755 "$rootfs$interp"
fi
log "libraries: $(echo "$libs" | tr '\n' ' ')"

ca_bundle=/etc/ssl/certs/ca-certificates.crt
[ -s "$ca_bundle" ] || die "no CA bundle at $ca_bundle (Debian package ca-certificates)"
install -m 0644 "$ca_bundle" "$rootfs/etc/ssl/certs/ca-certificates.crt"
printf 'root:x:0:0:root:/:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/:/sbin/nologin\n' > "$rootfs/etc/passwd"
printf 'root:x:0:\nnonroot:x:65532:\n' > "$rootfs/etc/group"
chmod 0644 "$rootfs/etc/passwd" "$rootfs/etc/group"

# Normalize: directories 0755, executables 0755, other files 0644, one mtime, root's ownership.
find "$rootfs" -type d -exec chmod 0755 {} +
find "$rootfs" -type f ! -perm -u+x -exec chmod 0644 {} +
chown -R 0:0 "$rootfs" 2>/dev/null || true
find "$context" -exec touch -h -d "@$SOURCE_DATE_EPOCH" {} +

# --- image --------------------------------------------------------------------------------------
tag="$image_name:$image_version"
mkdir -p "$build_dir"
start="$(now_ms)"
kh_podman build --quiet --no-cache --pull=never --format oci --timestamp "$SOURCE_DATE_EPOCH" --omit-history \
  --identity-label=false \
  --build-arg VERSION="$image_version" --build-arg REVISION="$revision" --build-arg CREATED="$created" \
  --build-arg SOURCE="$source_url" \
  -f "$image_dir/Containerfile" -t "$tag" "$context" >/dev/null \
  || die "podman build failed"
# Earlier builds of other sources leave untagged images behind.
kh_podman image prune --force >/dev/null || true
digest="$(kh_podman image inspect --format '{{.Digest}}' "$tag")"
size="$(kh_podman image inspect --format '{{.Size}}' "$tag")"
log "built $tag ($digest, $size bytes uncompressed) in $(secs_since "$start")s"

# --- oci-archive --------------------------------------------------------------------------------
# An OCI layout written by podman, then tarred with sorted names, fixed mtimes and owners: the
# archive is byte for byte the same for the same sources (podman's own oci-archive is not: its tar
# carries the export time).
layout="$build_dir/oci-layout"
rm -rf "$layout" "$archive" "$archive.digest"
kh_podman push --quiet "$tag" "oci:$layout:karpenter-health:$image_version" >/dev/null \
  || die "podman push to an OCI layout failed"
tar --sort=name --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner \
  --format=posix --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
  -C "$layout" -cf "$archive" .
rm -rf "$layout"
archive_digest="$(kh_skopeo inspect --format '{{.Digest}}' "oci-archive:$archive")"
printf 'image %s\narchive %s\n' "$digest" "$archive_digest" > "$archive.digest"
log "archive: $archive ($(du -k "$archive" | cut -f1) KiB), manifest $archive_digest"

# --- SBOM ---------------------------------------------------------------------------------------
# cargo-cyclonedx writes beside the crate's Cargo.toml; the file is moved beside the archive.
command -v cargo-cyclonedx >/dev/null || die "cargo-cyclonedx not found: run bash e2e/bed/install-image-tools.sh"
sbom_target="${KH_TARGET:-$(rustc -vV | sed -n 's/^host: //p')}"
(cd "$repo_root" && cargo cyclonedx --quiet --format json --manifest-path crates/cli/Cargo.toml \
  --target "$sbom_target" --override-filename karpenter-health.cdx) || die "cargo cyclonedx failed"
mv "$repo_root/crates/cli/karpenter-health.cdx.json" "$sbom"
log "sbom: $sbom ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["components"]))' "$sbom") components)"
log "push it: skopeo copy oci-archive:$archive docker://<registry>/karpenter-health:$image_version"
echo "$archive_digest"
