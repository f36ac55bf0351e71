#!/usr/bin/env bash
# `make demo`: start the local bed with the real Karpenter controller, seed a Karpenter setup
# broken the ways users break it, run the operator against it and show, side by side, what
# Karpenter does (its EC2NodeClass conditions, its NodeClaims) and what `kubectl get
# karpenterhealth` says. Leaves the bed, Karpenter and the operator running for exploration;
# `make e2e-down` stops them all.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bed_dir="${KH_BED_DIR:-$root/e2e/.bed}"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
release="${KH_KARPENTER_RELEASE:-v1.14.1}"
export KH_KARPENTER_RELEASE="$release"

# The bed installs the Karpenter CRDs of the release the demo runs.
KARPENTER_CRDS_DIR="${KARPENTER_CRDS_DIR:-$(bash e2e/bed/build-karpenter.sh crds "$release")}"
export KARPENTER_CRDS_DIR
bash e2e/bed/bed.sh up "$bed_dir"
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

echo "demo: waiting for Karpenter to act and for the first evaluation of every EC2NodeClass" >&2
for _ in $(seq 1 225); do
  # A KarpenterHealth exists a moment before its first (Pending) status: count evaluated ones.
  evaluated="$(kubectl get kh -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].reason}{"\n"}{end}' 2>/dev/null | grep -cv '^\(Pending\)\?$' || true)"
  # Karpenter has launched for the batch Pod, and the web Pod runs on the node it launched.
  launched="$(kubectl get nodeclaims -l karpenter.sh/nodepool=batch-spot --no-headers 2>/dev/null | wc -l)"
  running="$(kubectl get pod web -o jsonpath='{.status.phase}' 2>/dev/null || true)"
  [ "$evaluated" -ge 3 ] && [ "$launched" -ge 1 ] && [ "$running" = Running ] && break
  sleep 0.4
done

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
echo "Stop everything:               make e2e-down"
