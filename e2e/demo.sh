#!/usr/bin/env bash
# `make demo`: start the local bed with the real Karpenter controller, seed a Karpenter setup
# broken the ways users break it, run the operator against it and show, side by side, what
# Karpenter does (its EC2NodeClass conditions, its NodeClaims) and what `kubectl get
# karpenterhealth` says. Leaves the bed, Karpenter and the operator running for exploration;
# `make demo-down` stops them all.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
# A bed of its own: the demo's Karpenter, operator and stand-in keep running after it, and must
# never share a bed with `make test`'s (bed.sh refuses a bed up for another role).
bed_dir="${KH_DEMO_BED_DIR:-$root/e2e/.bed-demo}"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
release="${KH_KARPENTER_RELEASE:-v1.14.1}"
export KH_KARPENTER_RELEASE="$release"

# The bed installs the Karpenter CRDs of the release the demo runs, whatever the caller's
# KARPENTER_CRDS_DIR says (CI sets it to another release's for the operator tests).
KARPENTER_CRDS_DIR="$(bash e2e/bed/build-karpenter.sh crds "$release")"
export KARPENTER_CRDS_DIR
KH_BED_ROLE="demo $release" bash e2e/bed/bed.sh up "$bed_dir"
# shellcheck disable=SC1091
source "$bed_dir/env"

echo "demo: building karpenter-health, the aws-gap-proxy and the node stand-in" >&2
cargo build --quiet --locked -p karpenter-health
cargo build --quiet --locked -p karpenter-health-aws-gaps --bin aws-gap-proxy
cargo build --quiet --locked -p karpenter-health-e2e --bin node-stand-in
target="${CARGO_TARGET_DIR:-$root/target}/debug"
binary="$target/karpenter-health"
# moto lacks reads that every operator and Karpenter make (EC2 GetEbsDefaultKmsKeyId, the public
# SSM image parameters, paged instance types): both talk to moto through the project's proxy.
KH_AWS_GAP_PROXY="$target/aws-gap-proxy" bash e2e/bed/bed.sh aws-gap-proxy "$bed_dir"
# shellcheck disable=SC1091
source "$bed_dir/env"

export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="$KH_MOTO_URL"
"$cache_root/moto-venv/bin/python" e2e/demo/seed_aws.py
export AWS_ENDPOINT_URL="$KH_AWS_URL"
"$binary" crd | kubectl apply -f - >/dev/null
# The Deployment's tag and CLUSTER_ENDPOINT follow the release and the bed actually running.
sed -e "s|controller:1.14.1|controller:${release#v}|" \
    -e "s|https://127.0.0.1:6443|https://127.0.0.1:$KH_APISERVER_PORT|" e2e/demo/seed.yaml \
  | kubectl apply -f - >/dev/null
KH_NODE_STAND_IN="$target/node-stand-in" bash e2e/bed/bed.sh karpenter "$bed_dir"

if [ -f "$bed_dir/pids/operator.pid" ] && kill -0 "$(cat "$bed_dir/pids/operator.pid")" 2>/dev/null; then
  kill "$(cat "$bed_dir/pids/operator.pid")"; sleep 1
fi
"$binary" run --refresh-interval 30s > "$bed_dir/logs/operator.log" 2>&1 &
echo $! > "$bed_dir/pids/operator.pid"

# What the demo must show once settled (not at the first evaluation: a class can be Unknown while
# an AWS read that the next refresh completes is outstanding), class by class: a condition and
# its status(reason). `make test` runs the demo (`make demo-smoke`) and fails on any other.
expected=(
  "default Ready True(AllChecksPassed)"
  "arn-profile InstanceProfileReady False(InstanceProfileIsArn)"
  "batch NodeRoleMapped False(ControllerRoleMappedInstead)"
)
verdict() { # verdict CLASS CONDITION -> status(reason)
  kubectl get kh "$1" -o jsonpath="{.status.conditions[?(@.type==\"$2\")].status}({.status.conditions[?(@.type==\"$2\")].reason})" 2>/dev/null || true
}
unsettled() { # the classes whose Ready is still Pending or Unknown
  kubectl get kh -o jsonpath='{range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].reason}{"\n"}{end}' 2>/dev/null \
    | awk '$2 != "True" && $2 != "False" {print $1}'
}
missing() { # the expectations not met now
  local line class condition want
  for line in "${expected[@]}"; do
    read -r class condition want <<< "$line"
    [ "$(verdict "$class" "$condition")" = "$want" ] || echo "$class: $condition is $(verdict "$class" "$condition"), expected $want"
  done
}

echo "demo: waiting for Karpenter to act and for every EC2NodeClass's verdict to settle (up to 4 minutes)" >&2
started=$SECONDS
while [ $((SECONDS - started)) -lt 240 ]; do
  # Karpenter has launched for the batch Pod, and the web Pod runs on the node it launched.
  launched="$(kubectl get nodeclaims -l karpenter.sh/nodepool=batch-spot --no-headers 2>/dev/null | wc -l)"
  running="$(kubectl get pod web -o jsonpath='{.status.phase}' 2>/dev/null || true)"
  classes="$(kubectl get kh --no-headers 2>/dev/null | wc -l)"
  if [ "$classes" -ge 3 ] && [ -z "$(unsettled)" ] && [ -z "$(missing)" ] \
    && [ "$launched" -ge 1 ] && [ "$running" = Running ]; then
    break
  fi
  sleep 1
done
settled_after=$((SECONDS - started))

echo
echo "What Karpenter $release does:"
echo "\$ kubectl get ec2nodeclasses"
kubectl get ec2nodeclasses
echo "\$ kubectl get nodeclaims"
kubectl get nodeclaims
echo "\$ kubectl get pods -o wide"
kubectl get pods -o wide
echo "(reports waits behind arn-profile, whose validation never concludes; batch-spot's node never"
echo " joins, its role not in aws-auth; the bed's moto does not refuse spot without the service-linked role)"
echo
echo "What karpenter-health says:"
echo "\$ kubectl get karpenterhealth"
kubectl get karpenterhealth
echo
echo "The same checks once, without the operator (what an on-call engineer runs):"
echo "\$ karpenter-health check --node-class batch"
"$binary" check --node-class batch || echo "(exit code $?: 1 means a problem was proven)"
echo
echo "Details of one EC2NodeClass:   kubectl describe kh batch     (KUBECONFIG=$KUBECONFIG)"
echo "Logs:                          $bed_dir/logs/{operator,karpenter,node-stand-in}.log"
echo "Stop everything:               make demo-down"
echo
# Karpenter is started once by bed.sh and never again: an exit would show here, not be hidden.
if ! kill -0 "$(cat "$bed_dir/pids/karpenter.pid")" 2>/dev/null; then
  echo "demo: FAILED: Karpenter exited (its log: $bed_dir/logs/karpenter.log)" >&2; exit 1
fi
wrong="$(missing; unsettled | sed 's/$/: Ready not settled/')"
if [ -n "$wrong" ]; then
  echo "demo: FAILED after ${settled_after} s, the verdicts are not the expected ones:" >&2
  echo "$wrong" >&2
  exit 1
fi
echo "demo: every EC2NodeClass settled as expected after ${settled_after} s" >&2
