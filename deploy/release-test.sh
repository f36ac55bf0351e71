#!/usr/bin/env bash
# `make release-test`: runs `make release`'s script and checks what it wrote: every artifact there
# and in SHA256SUMS, which verifies; the chart's version and appVersion are the crates'; the krew
# manifest names the plugin tarball's checksum and version, without placeholders; the plugin
# inside runs; the LICENSE is in the folder, the chart, the plugin tarball and the image; and the
# changelog check refuses a version without entries.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
fail() { echo "FAIL: release-test: $*" >&2; exit 1; }

out="$(bash "$repo/deploy/release.sh")" || fail "deploy/release.sh failed"
work_changelog="$(mktemp)"
trap 'rm -f "$work_changelog"' EXIT
version="$(sed -n '/^\[workspace.package\]/,/^\[/s/^version = "\(.*\)"/\1/p' "$repo/Cargo.toml")"
expected=(
  "karpenter-health-$version.oci.tar" "karpenter-health-$version.oci.tar.digest"
  "karpenter-health-$version.cdx.json" "karpenter-health-$version.tgz" iam-policy.json
  iam-policy-pod-identity.json LICENSE CHANGELOG.md "karpenter-health-crd-$version.tgz"
  kubectl-karpenter_health-linux-amd64.tar.gz karpenter-health.yaml
)
for file in "${expected[@]}"; do
  [ -s "$out/$file" ] || fail "$file missing from $out"
  grep -q "  $file\$" "$out/SHA256SUMS" || fail "$file not in SHA256SUMS"
done
(cd "$out" && sha256sum --quiet -c SHA256SUMS) || fail "SHA256SUMS does not verify"

chart="$(tar -xzOf "$out/karpenter-health-$version.tgz" karpenter-health/Chart.yaml)"
grep -qx "version: $version" <<<"$chart" || fail "the chart's version is not $version"
grep -qx "appVersion: $version" <<<"$chart" || fail "the chart's appVersion is not $version"

# Listed first: with pipefail, grep -q closing the pipe early would fail tar's side.
chart_files="$(tar -tzf "$out/karpenter-health-$version.tgz")"
grep -qx karpenter-health/LICENSE <<<"$chart_files" || fail "the chart package carries no LICENSE"
crd_chart_files="$(tar -tzf "$out/karpenter-health-crd-$version.tgz")"
grep -qx karpenter-health-crd/LICENSE <<<"$crd_chart_files" || fail "the CRD chart package carries no LICENSE"
grep -qx "karpenter-health-crd/templates/karpenter-health.io_karpenterhealths.yaml" <<<"$crd_chart_files" \
  || fail "the CRD chart package carries no CRD template"
plugin_files="$(tar -tzf "$out/kubectl-karpenter_health-linux-amd64.tar.gz")"
grep -qx LICENSE <<<"$plugin_files" || fail "the plugin tarball carries no LICENSE"
grep -q "from: LICENSE" "$out/karpenter-health.yaml" || fail "krew does not install the LICENSE"
oci="$(mktemp -d)"
tar -xf "$out/karpenter-health-$version.oci.tar" -C "$oci"
found=""
for layer in "$oci"/blobs/sha256/*; do
  listed="$(tar -tf "$layer" 2>/dev/null || true)"
  if grep -qx 'LICENSE\|\./LICENSE' <<<"$listed"; then found=yes; fi
done
rm -rf "$oci"
[ -n "$found" ] || fail "the image carries no /LICENSE"
# A version the changelog does not describe is refused before anything is built.
printf '# Changelog\n\n## [%s]\n\n- the release being tested\n' "$version" > "$work_changelog"
bash "$repo/deploy/changelog-check.sh" "$version" "$work_changelog" \
  || fail "changelog-check refused a section with an entry"
printf '# Changelog\n\n## [%s]\n\n## [0.0.1]\n\n- older\n' "$version" > "$work_changelog"
if bash "$repo/deploy/changelog-check.sh" "$version" "$work_changelog" 2>/dev/null; then
  fail "changelog-check accepted an empty section for $version"
fi

manifest="$out/karpenter-health.yaml"
plugin_sha="$(sha256sum < "$out/kubectl-karpenter_health-linux-amd64.tar.gz" | cut -d' ' -f1)"
grep -q "sha256: $plugin_sha" "$manifest" || fail "the krew manifest does not name the plugin's sha256"
grep -q "version: v$version" "$manifest" || fail "the krew manifest is not for v$version"
if grep -q 'SHA256_\|vVERSION' "$manifest"; then fail "the krew manifest keeps placeholders"; fi

work="$(mktemp -d)"
trap 'rm -rf "$work" "$work_changelog"' EXIT
tar -xzf "$out/kubectl-karpenter_health-linux-amd64.tar.gz" -C "$work"
"$work/kubectl-karpenter_health" --version | grep -q "$version" \
  || fail "the plugin in the tarball does not run as version $version"

echo "release-test: $(wc -l < "$out/SHA256SUMS") artifacts of v$version in $out verified"
