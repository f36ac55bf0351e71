#!/usr/bin/env bash
# Runs Argo CD's health check for KarpenterHealth (deploy/argocd/health.lua) under Lua 5.1, the
# language of Argo CD's gopher-lua, on KarpenterHealth objects: every file in DIR named
# <Healthy|Degraded|Progressing>-<anything>.json must come out with that health status, and each of
# the three must be there. The chart test writes DIR from a real operator's statuses (a class just
# created, broken, repaired). Also checks that deploy/argocd/argocd-cm.yaml carries this script.
#
#   deploy/argocd/test.sh DIR
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
dir="${1:?usage: $0 DIR}"
fail() { echo "FAIL: argocd health: $*" >&2; exit 1; }
command -v lua5.1 >/dev/null || fail "lua5.1 missing: run e2e/bed/install-chart-tools.sh"

# The ConfigMap's copy is the script, indented under its key.
diff <(sed -n '/^  resource.customizations.health/,$p' "$here/argocd-cm.yaml" | tail -n +2 \
         | sed 's/^    //') "$here/health.lua" >/dev/null \
  || fail "argocd-cm.yaml does not carry health.lua as it is"

# Argo CD sets the object as the global `obj` and takes the table the script returns.
harness="$(mktemp "${TMPDIR:-/tmp}/kh-argocd-harness.XXXXXX.lua")"
trap 'rm -f "$harness"' EXIT
cat > "$harness" <<'LUA'
local cjson = require("cjson")
obj = cjson.decode(io.read("*a"))
local hs = dofile(arg[1])
io.write(hs.status, "\t", hs.message or "")
LUA

seen=()
for file in "$dir"/*.json; do
  [ -e "$file" ] || fail "no KarpenterHealth objects in $dir"
  want="$(basename "$file")"; want="${want%%-*}"
  case "$want" in Healthy|Degraded|Progressing) ;; *) fail "$file: name it <status>-*.json" ;; esac
  got="$(lua5.1 "$harness" "$here/health.lua" < "$file")" || fail "$file: the script failed"
  status="${got%%$'\t'*}"
  [ "$status" = "$want" ] || fail "$(basename "$file"): $got (want $want)"
  echo "argocd health: $(basename "$file"): $got"
  seen+=("$want")
done
for want in Healthy Degraded Progressing; do
  printf '%s\n' "${seen[@]}" | grep -qx "$want" || fail "no $want object in $dir"
done
