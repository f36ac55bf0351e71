#!/usr/bin/env bash
# `make demo`: start the local bed, seed a Karpenter setup broken the ways users break it, run the
# operator against it and show what `kubectl get karpenterhealth` says. Leaves the bed and the
# operator running for exploration; `make e2e-down` stops both.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
bed_dir="${KH_BED_DIR:-$root/e2e/.bed}"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"

bash e2e/bed/bed.sh up "$bed_dir"
# shellcheck disable=SC1091
source "$bed_dir/env"

echo "demo: building karpenter-health and the aws-gap-proxy" >&2
cargo build --quiet --locked -p karpenter-health
cargo build --quiet --locked -p karpenter-health-aws-gaps --bin aws-gap-proxy
binary="${CARGO_TARGET_DIR:-$root/target}/debug/karpenter-health"
# moto lacks a read every operator makes (EC2 GetEbsDefaultKmsKeyId): the operator talks to moto
# through the project's proxy, which answers it.
KH_AWS_GAP_PROXY="${CARGO_TARGET_DIR:-$root/target}/debug/aws-gap-proxy" bash e2e/bed/bed.sh aws-gap-proxy "$bed_dir"
# shellcheck disable=SC1091
source "$bed_dir/env"

export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="$KH_MOTO_URL"
"$cache_root/moto-venv/bin/python" e2e/demo/seed_aws.py
export AWS_ENDPOINT_URL="$KH_AWS_URL"
"$binary" crd | kubectl apply -f - >/dev/null
kubectl apply -f e2e/demo/seed.yaml >/dev/null
# The bed runs no scheduler: write its verdict on the demo's Pod as kube-scheduler would, so the
# Pod is one Karpenter provisions for.
curl -sf --cacert "$bed_dir/pki/ca.crt" -H "Authorization: Bearer $(cat "$bed_dir/pki/admin.token")" \
  -X PATCH -H 'Content-Type: application/merge-patch+json' \
  "https://127.0.0.1:$KH_APISERVER_PORT/api/v1/namespaces/default/pods/web/status" \
  -d '{"status":{"conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/0 nodes are available"}]}}' \
  >/dev/null

if [ -f "$bed_dir/pids/operator.pid" ] && kill -0 "$(cat "$bed_dir/pids/operator.pid")" 2>/dev/null; then
  kill "$(cat "$bed_dir/pids/operator.pid")"; sleep 1
fi
"$binary" run --refresh-interval 30s > "$bed_dir/logs/operator.log" 2>&1 &
echo $! > "$bed_dir/pids/operator.pid"

echo "demo: waiting for the first evaluation of every EC2NodeClass" >&2
for _ in $(seq 1 100); do
  # A KarpenterHealth exists a moment before its first (Pending) status: count evaluated ones.
  evaluated="$(kubectl get kh -o jsonpath='{range .items[*]}{.status.conditions[?(@.type=="Ready")].reason}{"\n"}{end}' 2>/dev/null | grep -cv '^\(Pending\)\?$' || true)"
  [ "$evaluated" -ge 3 ] && break
  sleep 0.3
done

echo
kubectl get karpenterhealth
echo
echo "The same checks once, without the operator (what an on-call engineer runs):"
echo "\$ karpenter-health check --node-class batch"
"$binary" check --node-class batch || echo "(exit code $?: 1 means a problem was proven)"
echo
echo "Details of one EC2NodeClass:   kubectl describe kh batch     (KUBECONFIG=$KUBECONFIG)"
echo "Operator logs:                 $bed_dir/logs/operator.log"
echo "Stop the bed and the operator: make e2e-down"
