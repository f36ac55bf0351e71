#!/usr/bin/env bash
# `make terraform-test`: the Terraform example's policy module (./policy), applied offline (it has
# no provider), makes the same document as `karpenter-health iam-policy` for the same cluster,
# controller role and queue; and every .tf file is `terraform fmt` clean. Needs terraform on PATH
# (CI machines have it; elsewhere the test says so and fails) and the built binary.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
fail() { echo "FAIL: terraform-test: $*" >&2; exit 1; }
command -v terraform >/dev/null || fail "terraform is not on PATH"
binary="${KH_BINARY:-${CARGO_TARGET_DIR:-$repo/target}/debug/karpenter-health}"
[ -x "$binary" ] || fail "no binary at $binary: run cargo build -p karpenter-health (make terraform-test does)"
# No CLI configuration or plugin cache of the host's: the module needs no provider.
export TF_CLI_CONFIG_FILE=/dev/null TF_IN_AUTOMATION=1
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

terraform fmt -check -recursive "$here" >/dev/null || fail "terraform fmt -check: run terraform fmt -recursive deploy/terraform"

module="$(python3 -c 'import os,sys; print(os.path.relpath(sys.argv[1], sys.argv[2]))' "$here/policy" "$work")"
account=111122223333 region=eu-west-1 cluster=prod
role="arn:aws:iam::$account:role/KarpenterController-20240101"
compare() { # <queue or empty> <what>
  local queue="$1" what="$2" queue_hcl="null" queue_args=()
  if [ -n "$queue" ]; then queue_hcl="\"$queue\""; queue_args=(--interruption-queue "$queue"); fi
  cat > "$work/main.tf" <<HCL
module "policy" {
  source                        = "$module"
  partition                     = "aws"
  account_id                    = "$account"
  region                        = "$region"
  cluster_name                  = "$cluster"
  karpenter_controller_role_arn = "$role"
  karpenter_queue_name          = $queue_hcl
}
output "json" {
  value = module.policy.json
}
HCL
  (cd "$work" && terraform init -input=false -no-color >"$work/init.log" 2>&1) \
    || { cat "$work/init.log"; fail "terraform init ($what)"; }
  (cd "$work" && terraform apply -input=false -auto-approve -no-color >"$work/apply.log" 2>&1) \
    || { cat "$work/apply.log"; fail "terraform apply ($what)"; }
  (cd "$work" && terraform output -raw json) > "$work/terraform.json"
  "$binary" iam-policy --cluster-name "$cluster" --account-id "$account" --region "$region" \
    --controller-role "$role" "${queue_args[@]}" > "$work/binary.json"
  python3 - "$work/terraform.json" "$work/binary.json" "$what" <<'CMP' || fail "the module's policy differs from the binary's ($what)"
import json, sys
terraform, binary, what = (json.load(open(sys.argv[1])), json.load(open(sys.argv[2])), sys.argv[3])
if terraform != binary:
    for t, b in zip(terraform["Statement"], binary["Statement"]):
        if t != b:
            print(f"{what}: terraform {t}\n{what}: binary    {b}", file=sys.stderr)
    sys.exit(1)
CMP
  echo "terraform-test: $what: the module's policy is the binary's ($(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["Statement"]))' "$work/binary.json") statements)"
}
compare "" "queue named after the cluster"
compare "Karpenter-prod" "a queue of its own name"
