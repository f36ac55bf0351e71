#!/usr/bin/env bash
# Refuses a release whose version has no section in the changelog: `## [<version>]` followed by at
# least one entry before the next section. Usage: changelog-check.sh <version> [changelog]
# (default CHANGELOG.md at the repository root).
set -euo pipefail
version="${1:?usage: changelog-check.sh <version> [changelog]}"
changelog="${2:-$(cd "$(dirname "$0")/.." && pwd)/CHANGELOG.md}"
[ -f "$changelog" ] || { echo "changelog-check: $changelog is missing" >&2; exit 1; }
entries="$(awk -v heading="## [$version]" '
  index($0, heading) == 1 { inside = 1; next }
  inside && /^## / { exit }
  inside && /^- / { n++ }
  END { print n + 0 }' "$changelog")"
if [ "$entries" -eq 0 ]; then
  echo "changelog-check: $changelog has no entries under '## [$version]': say what v$version changes" >&2
  exit 1
fi
