# shellcheck shell=bash
# Sourced by the scripts that build with Go: puts the pinned Go that install-deps.sh installs (on a
# machine with no Go of 1.21 or later) first on PATH when it is there. No other effect.
_kh_go_bin="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}/go/bin"
if [ -x "$_kh_go_bin/go" ]; then
  PATH="$_kh_go_bin:$PATH"
  export PATH
fi
unset _kh_go_bin
