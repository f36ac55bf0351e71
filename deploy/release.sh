#!/usr/bin/env bash
# `make release`: every artifact of a release of this tree, in one folder, from one command:
#
#   karpenter-health-<v>.oci.tar            the image (image/build.sh: FROM scratch, reproducible)
#   karpenter-health-<v>.oci.tar.digest     its digests
#   karpenter-health-<v>.cdx.json           the SBOM (CycloneDX, from Cargo.lock)
#   karpenter-health-<v>.tgz                the Helm chart (helm package; version and appVersion <v>)
#   karpenter-health-crd-<v>.tgz            the CRD chart, which upgrades the CRD with each release
#   LICENSE, CHANGELOG.md                   the license (also in the chart, plugin and image) and
#                                           the changes, which must have a section for <v>
#   iam-policy.json                         the operator's IAM policy template (IRSA; envsubst)
#   iam-policy-pod-identity.json            the same for one EKS Pod Identity role of many clusters
#   kubectl-karpenter_health-linux-amd64.tar.gz   the kubectl plugin for krew
#   karpenter-health.yaml                   the krew manifest, filled with version, URLs and sha256
#   SHA256SUMS                              the checksums of all of the above
#
# <v> is the workspace version in Cargo.toml. The folder is $KH_RELEASE_DIR, default
# ${CARGO_TARGET_DIR:-target}/dist/<v>. The krew manifest's download URLs start with
# $KH_RELEASE_URL (where the release's files will be downloadable), default the clone's https
# remote + /releases/download/v<v>; without either they keep the placeholder REPOSITORY. Only the
# host's platform is built (linux-amd64 here): the manifest lists the platforms it has files for.
# Prints the folder on stdout.
set -euo pipefail
# shellcheck source=image/lib.sh
source "$(dirname "$0")/../image/lib.sh"
cd "$repo_root"

log() { echo "release: $*" >&2; }
die() { echo "release: FAIL: $*" >&2; exit 1; }

version="$image_version"
bash deploy/changelog-check.sh "$version" || die "CHANGELOG.md has no section for $version"
out="${KH_RELEASE_DIR:-$target_dir/dist/$version}"
case "$out" in /*) ;; *) out="$repo_root/$out" ;; esac
helm="${HELM:-$cache_root/bin/helm}"
[ -x "$helm" ] || bash e2e/bed/install-chart-tools.sh >/dev/null
rm -rf "$out"
mkdir -p "$out"
# Not exported: cargo rebuilds crates whose build scripts watch SOURCE_DATE_EPOCH, and the image
# build sets it itself after compiling.
epoch="${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}"

# The image and its SBOM (this builds the release binary).
digest="$(bash image/build.sh)" || die "the image build failed"
cp "$archive" "$archive.digest" "$sbom" "$out/"

# The chart, versioned like the crates, packaged from a copy that carries the license.
staging="$(mktemp -d)"
trap 'rm -rf "$staging"' EXIT
cp -r deploy/charts/karpenter-health "$staging/chart"
cp LICENSE "$staging/chart/LICENSE"
"$helm" package "$staging/chart" --version "$version" --app-version "$version" \
  --destination "$out" >/dev/null || die "helm package failed"
# The CRD chart, released with it (helm upgrade upgrades the CRD only from there).
cp -r deploy/charts/karpenter-health-crd "$staging/crd-chart"
cp LICENSE "$staging/crd-chart/LICENSE"
"$helm" package "$staging/crd-chart" --version "$version" --app-version "$version" \
  --destination "$out" >/dev/null || die "helm package of the CRD chart failed"

cp LICENSE CHANGELOG.md deploy/iam-policy.json deploy/iam-policy-pod-identity.json "$out/"

# The kubectl plugin: the release binary under krew's name and the license, in a reproducible
# tarball.
platform="linux-amd64"
plugin_dir="$staging/plugin"
mkdir -p "$plugin_dir"
install -m 0755 "$target_dir/release/karpenter-health" "$plugin_dir/kubectl-karpenter_health"
install -m 0644 LICENSE "$plugin_dir/LICENSE"
plugin="$out/kubectl-karpenter_health-$platform.tar.gz"
tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
  -C "$plugin_dir" -cf - kubectl-karpenter_health LICENSE | gzip -n -9 > "$plugin"
plugin_sha="$(sha256sum < "$plugin" | cut -d' ' -f1)"

# The krew manifest: the template's platform entry for this platform only, filled in.
url="${KH_RELEASE_URL:-}"
if [ -z "$url" ]; then
  remote="$(git config --get remote.origin.url 2>/dev/null || true)"
  case "$remote" in https://*) url="${remote%.git}/releases/download/v$version" ;; esac
fi
python3 - deploy/krew/karpenter-health.yaml "$out/karpenter-health.yaml" "$version" "$url" \
  "$platform" "$plugin_sha" <<'PY' || die "filling the krew manifest failed"
import re, sys
template, target, version, url, platform, sha = sys.argv[1:]
text = open(template).read()
head, platforms = text.split("  platforms:\n", 1)
os_, arch = platform.split("-")
entries = re.split(r"(?m)^(?=  - selector:)", platforms)
kept = [e for e in entries if f"os: {os_}, arch: {arch}" in e]
if len(kept) != 1:
    sys.exit(f"the template has no single entry for {platform}")
entry = re.sub(r"sha256: SHA256_\w+", f"sha256: {sha}", kept[0])
if url:
    entry = entry.replace(f"REPOSITORY/releases/download/vVERSION", url)
lines = [l for l in head.splitlines(keepends=True) if not l.startswith("#")]
body = "".join(lines).replace("vVERSION", f"v{version}")
if url:
    body = body.replace("homepage: REPOSITORY", f"homepage: {url.split('/releases/')[0]}")
note = "# krew plugin manifest of karpenter-health v%s, written by `make release`.\n" % version
open(target, "w").write(note + body + "  platforms:\n" + entry.replace("vVERSION", f"v{version}"))
PY
[ -n "$url" ] || log "no https remote and no KH_RELEASE_URL: the krew manifest keeps REPOSITORY in its URLs"

sums="$(cd "$out" && find . -maxdepth 1 -type f -printf '%P\n' | sort | xargs sha256sum)"
printf '%s\n' "$sums" > "$out/SHA256SUMS"
log "$(wc -l < "$out/SHA256SUMS") artifacts in $out, image $digest"
log "push the image:  skopeo copy oci-archive:$out/$(basename "$archive") docker://<registry>/karpenter-health:$version"
log "push the chart:  helm push $out/karpenter-health-$version.tgz oci://<registry>/charts"
echo "$out"
