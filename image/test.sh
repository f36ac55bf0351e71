#!/usr/bin/env bash
# `make image-test`: the image end to end, as a cluster would run it.
#
#   1. builds the image twice and fails unless both digests (podman's and the oci-archive's
#      manifest) and the archive's bytes are the same; checks the image's contents and config;
#   2. starts a bed of its own (e2e/bed/bed.sh), seeds the demo's broken EC2NodeClasses and AWS
#      side, applies deploy/rbac.yaml with the bed's operator user added to its bindings;
#   3. runs the image under podman as the Deployment does (read-only root, no capabilities,
#      no-new-privileges, user 65532, `run --leader-elect --log-format json`) with in-cluster
#      configuration: a service-account directory mounted read-only, KUBERNETES_SERVICE_HOST/PORT;
#   4. asserts /livez, /readyz within a deadline, a KarpenterHealth with settled conditions for
#      every EC2NodeClass, the Lease held; then `podman stop --time 10` (SIGTERM) ends it with exit
#      code 0 within the grace period and the Lease is released.
#
# Prints the measured times. Everything it starts is stopped on exit, whatever happens.
set -euo pipefail
# shellcheck source=image/lib.sh
source "$(dirname "$0")/lib.sh"
cd "$repo_root"

READY_DEADLINE="${KH_IMAGE_TEST_READY_DEADLINE:-60}"
EVAL_DEADLINE="${KH_IMAGE_TEST_EVAL_DEADLINE:-90}"
GRACE=10
# e2e/demo/seed.yaml deploys Karpenter of the lab's release: the bed installs that release's CRDs.
KARPENTER_CRDS_DIR="$(bash e2e/bed/build-karpenter.sh crds "${KH_KARPENTER_RELEASE:-v1.14.1}")"
export KARPENTER_CRDS_DIR

step() { echo "image-test: $*" >&2; }
fail() {
  echo "image-test: FAIL: $*" >&2
  if [ -n "${container:-}" ] && kh_podman container exists "$container" 2>/dev/null; then
    echo "image-test: last lines of the container's log:" >&2
    kh_podman logs --tail 30 "$container" >&2 2>&1 || true
  fi
  exit 1
}

work="$(mktemp -d "${TMPDIR:-/tmp}/kh-image-test.XXXXXX")"
bed="$work/bed"
container=""
cleanup() {
  local status=$?
  if [ -n "$container" ]; then kh_podman rm --force --time 0 "$container" >/dev/null 2>&1 || true; fi
  if [ -f "$bed/env" ] || [ -d "$bed/pids" ]; then bash e2e/bed/bed.sh down "$bed" >/dev/null 2>&1 || true; fi
  rm -rf "$work"
  [ "$status" -eq 0 ] || echo "image-test: failed (exit $status)" >&2
}
trap cleanup EXIT

# --- 1. reproducible build ----------------------------------------------------------------------
tag="$image_name:$image_version"
t="$(now_ms)"
digest1="$(bash image/build.sh)" || fail "first image build failed"
build1="$(secs_since "$t")"
cp "$archive.digest" "$work/digest1"; sha256sum < "$archive" > "$work/sha1"
sha256sum < "$sbom" > "$work/sbom1"
t="$(now_ms)"
digest2="$(KH_IMAGE_SKIP_CARGO=1 bash image/build.sh)" || fail "second image build failed"
build2="$(secs_since "$t")"
sha256sum < "$archive" > "$work/sha2"
[ -n "$digest1" ] || fail "the build printed no digest"
[ "$digest1" = "$digest2" ] || fail "not reproducible: the oci-archive's manifest digest was $digest1, then $digest2"
diff -u "$work/digest1" "$archive.digest" >&2 || fail "not reproducible: podman's image digest differs between two builds"
diff -q "$work/sha1" "$work/sha2" >/dev/null || fail "not reproducible: the archive's bytes differ between two builds"
image_digest="$(sed -n 's/^image //p' "$archive.digest")"
step "reproducible: two builds gave manifest $digest1 (podman: $image_digest), archive sha256 $(cut -d' ' -f1 "$work/sha1")"

# The image's configuration is what the Deployment relies on.
config="$(kh_podman image inspect --format '{{.Config.User}}|{{json .Config.Entrypoint}}|{{json .Config.Cmd}}' "$tag")"
[ "$config" = '65532:65532|["/karpenter-health"]|["run"]' ] \
  || fail "image config: want user 65532:65532, entrypoint [/karpenter-health], cmd [run]; got $config"
for label in version revision created title licenses source; do
  value="$(kh_podman image inspect --format "{{index .Labels \"org.opencontainers.image.$label\"}}" "$tag")"
  [ -n "$value" ] || fail "the image has no org.opencontainers.image.$label label"
done
# The SBOM beside the archive: CycloneDX, the binary's crates from Cargo.lock, reproducible.
sbom_check="$(python3 - "$sbom" "$repo_root/Cargo.lock" <<'PY'
import json, sys, tomllib
bom = json.load(open(sys.argv[1]))
assert bom["bomFormat"] == "CycloneDX", bom["bomFormat"]
names = {c["name"] for c in bom["components"]}
locked = {p["name"] for p in tomllib.load(open(sys.argv[2], "rb"))["package"]}
missing = [n for n in ("kube-client", "aws-sdk-iam", "tokio") if n not in names]
assert not missing, f"the SBOM lacks {missing}"
assert names <= locked, f"components not in Cargo.lock: {sorted(names - locked)[:5]}"
print(len(names))
PY
)" || fail "the SBOM $sbom is not the binary's CycloneDX BOM"
diff -q "$work/sbom1" <(sha256sum < "$sbom") >/dev/null || fail "the SBOM differs between two builds"
step "sbom: $sbom_check crates of Cargo.lock in $(basename "$sbom"), the same twice"
# Exactly the expected files: the binary, the license, ldd's libraries and the loader, the CA
# bundle, passwd, group.
blob_of() { # path inside the archive -> its content
  tar -xOf "$archive" "./$1"
}
manifest_digest="$(blob_of index.json | python3 -c 'import json,sys; print(json.load(sys.stdin)["manifests"][0]["digest"].split(":")[1])')"
layers="$(blob_of "blobs/sha256/$manifest_digest" | python3 -c 'import json,sys; print(" ".join(l["digest"].split(":")[1] for l in json.load(sys.stdin)["layers"]))')"
[ "$(wc -w <<<"$layers")" -eq 1 ] || fail "want one layer, got: $layers"
blob_of "blobs/sha256/$layers" | tar -tzv > "$work/layer.txt" || fail "cannot list the image's layer"
files="$(awk '$1 !~ /^d/ {print $NF}' "$work/layer.txt" | sed 's|^\./||; s|^|/|' | sort)"
expected="$( { printf '/karpenter-health\n/LICENSE\n/etc/passwd\n/etc/group\n/etc/ssl/certs/ca-certificates.crt\n'
  ldd "$target_dir/release/karpenter-health" | grep -o '/[^ ]*'; } | sort -u)"
[ "$files" = "$expected" ] || fail "the image's files differ from the expected set:
$(diff <(echo "$expected") <(echo "$files") || true)"
grep -q '^nonroot:x:65532:65532:' "$build_dir/context/rootfs/etc/passwd" || fail "no user 65532 in /etc/passwd"
if awk '{print $2}' "$work/layer.txt" | grep -v '^0/0$' >/dev/null; then fail "files in the layer not owned by 0/0"; fi
size_uncompressed="$(kh_podman image inspect --format '{{.Size}}' "$tag")"
size_archive="$(stat -c %s "$archive")"
step "contents: $(wc -l <<<"$files") files ($(tr '\n' ' ' <<<"$files")), owned by root, user 65532"
step "size: $((size_uncompressed / 1024)) KiB uncompressed, archive $((size_archive / 1024)) KiB"

# --- 2. a bed of its own, seeded like the demo --------------------------------------------------
t="$(now_ms)"
bash e2e/bed/bed.sh up "$bed" >"$work/bed-up.log" 2>&1 || { tail -20 "$work/bed-up.log" >&2; fail "the bed did not start"; }
bed_up="$(secs_since "$t")"
# shellcheck disable=SC1091
source "$bed/env"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="$KH_MOTO_URL"
"$cache_root/moto-venv/bin/python" e2e/demo/seed_aws.py >/dev/null || fail "seeding moto failed"
# The container reads AWS through the project's proxy, which answers what moto lacks.
KH_AWS_GAP_PROXY="${KH_AWS_GAP_PROXY:-${CARGO_TARGET_DIR:-target}/debug/aws-gap-proxy}" \
  bash e2e/bed/bed.sh aws-gap-proxy "$bed" >>"$work/bed-up.log" 2>&1 \
  || { tail -20 "$work/bed-up.log" >&2; fail "the aws-gap-proxy did not start"; }
# shellcheck disable=SC1091
source "$bed/env"
# The CRD comes from the image itself.
kh_podman run --rm --read-only --user 65532:65532 --network none "$tag" crd > "$work/crd.yaml" \
  || fail "karpenter-health crd in the image failed"
kubectl apply -f "$work/crd.yaml" >/dev/null || fail "applying the CRD printed by the image failed"
kubectl apply -f e2e/demo/seed.yaml >/dev/null || fail "applying e2e/demo/seed.yaml failed"
# The chart, installed for real (its RBAC, ServiceAccount, Deployment, Service, PDB) with this
# image; the container below runs with the installed Deployment's args, env and security context.
# The bed's operator user (whose token the container gets) is added to every binding, so the image
# runs with exactly the permissions the chart grants.
helm="${HELM:-$cache_root/bin/helm}"
http_port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')"
"$helm" install karpenter-health deploy/charts/karpenter-health --namespace kube-system --skip-crds \
  --set image.repository="${tag%:*}" --set image.tag="${tag##*:}" \
  --set settings.httpAddress="127.0.0.1:$http_port" >"$work/helm-install.log" 2>&1 \
  || { cat "$work/helm-install.log" >&2; fail "helm install of the chart failed"; }
kubectl get deployment karpenter-health --namespace kube-system -o json > "$work/deployment.json" \
  || fail "the chart installed no Deployment"
user_subject='[{"op":"add","path":"/subjects/-","value":{"kind":"User","apiGroup":"rbac.authorization.k8s.io","name":"karpenter-health-operator"}}]'
bindings="$(kubectl get clusterrolebindings,rolebindings -A -l app.kubernetes.io/name=karpenter-health \
  -o jsonpath='{range .items[*]}{.kind}/{.metadata.name}/{.metadata.namespace}{"\n"}{end}')"
[ -n "$bindings" ] || fail "the chart created no bindings"
while IFS=/ read -r kind name namespace; do
  kubectl patch "$kind" "$name" ${namespace:+-n "$namespace"} --type=json -p "$user_subject" >/dev/null \
    || fail "cannot bind the operator user to $kind/$name"
done <<<"$bindings"
step "bed up in ${bed_up}s (apiserver :$KH_APISERVER_PORT), demo seeded, RBAC: $(wc -l <<<"$bindings") bindings"

# --- 3. run the image with in-cluster configuration ---------------------------------------------
openssl x509 -in "$bed/pki/ca.crt" -noout >/dev/null || fail "no CA certificate in the bed"
openssl x509 -in "$bed/pki/server.crt" -noout -ext subjectAltName | grep -q 'IP Address:127.0.0.1' \
  || fail "the bed's serving certificate does not name 127.0.0.1, so in-cluster config cannot verify it"
sa="$work/serviceaccount"
mkdir -p "$sa"
awk -F, '$2 == "karpenter-health-operator" {print $1}' "$bed/pki/tokens.csv" | tr -d '\n' > "$sa/token"
[ -s "$sa/token" ] || fail "no token for karpenter-health-operator in the bed's tokens.csv"
cp "$bed/pki/ca.crt" "$sa/ca.crt"
printf kube-system > "$sa/namespace"
# The container runs as 65532: the mount must be readable by anyone, as a projected volume is.
chmod 0755 "$work" "$sa"; chmod 0644 "$sa"/*

pod_name="karpenter-health-image-test"
# The installed Deployment's container, as podman flags: its image, args and env (the downward
# API's Pod name and namespace filled in), and its security context, which must ask for what
# the flags below give (non-root 65532, read-only root, no privilege escalation, no capabilities).
python3 - "$work/deployment.json" "$pod_name" "$work/container" <<'PY' || fail "the chart's Deployment"
import json, sys
deployment, pod_name, out = sys.argv[1:]
spec = json.load(open(deployment))["spec"]["template"]["spec"]
container = spec["containers"][0]
security = container.get("securityContext", {})
pod_security = spec.get("securityContext", {})
assert security.get("readOnlyRootFilesystem") is True, security
assert security.get("allowPrivilegeEscalation") is False, security
assert security.get("capabilities", {}).get("drop") == ["ALL"], security
assert (security.get("runAsUser") or pod_security.get("runAsUser")) == 65532, (security, pod_security)
fields = {"metadata.name": pod_name, "metadata.namespace": "kube-system"}
with open(out + ".env", "w") as env:
    for var in container.get("env", []):
        value = var.get("value")
        if value is None:
            value = fields[var["valueFrom"]["fieldRef"]["fieldPath"]]
        env.write(f"{var['name']}={value}\n")
open(out + ".args", "w").write("\n".join(container.get("args", [])) + "\n")
open(out + ".image", "w").write(container["image"])
PY
[ "$(cat "$work/container.image")" = "$tag" ] || fail "the Deployment runs $(cat "$work/container.image"), not $tag"
mapfile -t chart_args <"$work/container.args"
step "the chart's container: args ${chart_args[*]}; env $(cut -d= -f1 "$work/container.env" | tr '\n' ' ')"
container="kh-image-test-$$"
t_start="$(now_ms)"
kh_podman run --detach --name "$container" \
  --read-only --read-only-tmpfs=false --cap-drop=ALL --security-opt=no-new-privileges \
  --user 65532:65532 --network host \
  --volume "$sa:/var/run/secrets/kubernetes.io/serviceaccount:ro" \
  --env-file "$work/container.env" \
  --env AWS_ENDPOINT_URL="$KH_AWS_URL" --env AWS_ACCESS_KEY_ID=testing \
  --env AWS_SECRET_ACCESS_KEY=testing --env AWS_REGION=us-east-1 \
  --env KUBERNETES_SERVICE_HOST=127.0.0.1 --env KUBERNETES_SERVICE_PORT="$KH_APISERVER_PORT" \
  "$tag" "${chart_args[@]}" >/dev/null || fail "podman run failed"

running() { [ "$(kh_podman inspect --format '{{.State.Running}}' "$container" 2>/dev/null)" = true ]; }
# wait_until SECONDS WHAT COMMAND...: polls every 0.2s; fails (with the container's log) at the deadline.
wait_until() {
  local secs="$1" what="$2"; shift 2
  local end=$(($(now_ms) + secs * 1000))
  while [ "$(now_ms)" -lt "$end" ]; do
    if "$@"; then return 0; fi
    running || fail "the container exited (code $(kh_podman inspect --format '{{.State.ExitCode}}' "$container")) while waiting for $what"
    sleep 0.2
  done
  fail "$what did not happen within ${secs}s"
}
http_code() { curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$http_port$1" 2>/dev/null || true; }
livez_ok() { [ "$(curl -sf "http://127.0.0.1:$http_port/livez" 2>/dev/null)" = ok ]; }
readyz_ok() { [ "$(http_code /readyz)" = 200 ]; }

wait_until 15 "/livez to answer ok" livez_ok
livez_s="$(secs_since "$t_start")"
wait_until "$READY_DEADLINE" "/readyz to return 200" readyz_ok
readyz_s="$(secs_since "$t_start")"
step "/livez ok after ${livez_s}s, /readyz 200 after ${readyz_s}s"

# Every demo EC2NodeClass gets a KarpenterHealth whose conditions are all evaluated (none Pending).
node_classes="$(kubectl get ec2nodeclasses -o jsonpath='{range .items[*]}{.metadata.name}{"\n"}{end}' | sort)"
[ "$(wc -l <<<"$node_classes")" -ge 3 ] || fail "want the demo's 3 EC2NodeClasses, got: $node_classes"
all_evaluated() {
  local name reasons
  for name in $node_classes; do
    reasons="$(kubectl get kh "$name" -o jsonpath='{range .status.conditions[*]}{.reason}{"\n"}{end}' 2>/dev/null)" || return 1
    [ -n "$reasons" ] || return 1
    if grep -qx 'Pending' <<<"$reasons"; then return 1; fi
  done
}
wait_until "$EVAL_DEADLINE" "a KarpenterHealth with non-Pending conditions for every EC2NodeClass ($(tr '\n' ' ' <<<"$node_classes"))" all_evaluated
evaluated_s="$(secs_since "$t_start")"
kubectl get karpenterhealth >&2
step "every EC2NodeClass evaluated after ${evaluated_s}s"

holder() { kubectl get lease -n kube-system karpenter-health -o jsonpath='{.spec.holderIdentity}' 2>/dev/null || true; }
holds_lease() { [ "$(holder)" = "$pod_name" ]; }
wait_until 30 "the Lease to be held by $pod_name" holds_lease

# --- 4. SIGTERM: a clean exit within the grace period, the Lease released ------------------------
t="$(now_ms)"
kh_podman stop --time "$GRACE" "$container" >/dev/null || fail "podman stop failed"
stop_s="$(secs_since "$t")"
exit_code="$(kh_podman inspect --format '{{.State.ExitCode}}' "$container")"
[ "$exit_code" = 0 ] || fail "exit code $exit_code after SIGTERM (want 0; 137 means podman had to SIGKILL it)"
stop_ms=$(($(now_ms) - t))
[ "$stop_ms" -lt $((GRACE * 1000)) ] || fail "stopping took ${stop_s}s, not within the ${GRACE}s grace period"
[ -z "$(holder)" ] || fail "the Lease is still held by '$(holder)' after the operator stopped"
kh_podman logs "$container" > "$work/container.log" 2>&1 || fail "cannot read the container's log"
python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1]) if l.strip()]' "$work/container.log" \
  || fail "a log line is not JSON (--log-format json): $(head -3 "$work/container.log")"
grep -q 'lease released' "$work/container.log" || fail "the log does not say the lease was released"
step "SIGTERM: exit code 0 after ${stop_s}s (grace ${GRACE}s), Lease released"

echo "image-test: measured: builds ${build1}s and ${build2}s, digest $digest1 twice;" \
  "image $((size_uncompressed / 1024)) KiB uncompressed, archive $((size_archive / 1024)) KiB;" \
  "bed ${bed_up}s; /livez ${livez_s}s, /readyz ${readyz_s}s, all evaluated ${evaluated_s}s after start;" \
  "stop on SIGTERM ${stop_s}s"
echo "image-test: PASS"
