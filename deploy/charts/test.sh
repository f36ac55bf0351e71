#!/usr/bin/env bash
# The Helm chart's tests (make chart-test):
#   1. helm lint (default values, --strict, ci/*.yaml) and helm template with default
#      and with every value set, asserting the rendered objects (testdata/check-render.py);
#      values.schema.json against values.yaml, and what it refuses (wrong type, unknown key),
#      with the message helm prints; no render without image.repository;
#      the chart's CRD byte-identical to crds/; deploy/rbac.yaml equal to a fresh render;
#      kube-state-metrics paths against the CRD schema; the dashboard's queries through promtool.
#   2. A bed of its own (e2e/bed/bed.sh): every rendered object applied with --dry-run=server
#      (except the Prometheus Operator kinds, whose CRDs the bed lacks), then a real
#      `helm install` into kube-system, its objects checked against the render (no Pod runs: the
#      bed has no deployment controller, scheduler or kubelet), and `helm uninstall` removing them.
#   3. The alerts: the PrometheusRule's groups through `promtool check rules` and the unit tests
#      in karpenter-health/tests/*.test.yaml, every alert covered.
#   4. Prometheus and Alertmanager on loopback: Prometheus scrapes the operator's metrics and
#      evaluates the chart's rules (short `for` via values); the alert for a broken EC2NodeClass
#      reaches Alertmanager's webhook, then resolves once the team accepts the finding with an
#      annotation on the class (the metric then carries FindingAccepted, and no alert is pending).
#      The metrics come from the real operator (the debug build of `karpenter-health`, built by
#      `make chart-test`) on a bed seeded with the demo's broken setups: EC2NodeClass
#      `arn-profile` fails InstanceProfileReady (InstanceProfileIsArn).
# The CRD chart (karpenter-health-crd) is linted and rendered in step 1 and, in step 2, installs
# the CRD the main chart then skips, and upgrades it with helm upgrade.
# KH_CHART_TEST_SKIP_BED=1 skips step 2 (no kube binaries).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
chart="$here/karpenter-health"
crd_chart="$here/karpenter-health-crd"
testdata="$here/testdata"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"
# e2e/demo/seed.yaml deploys Karpenter of the lab's release: the beds install that release's CRDs.
KARPENTER_CRDS_DIR="$(bash "$repo/e2e/bed/build-karpenter.sh" crds "${KH_KARPENTER_RELEASE:-v1.14.1}")"
export KARPENTER_CRDS_DIR
helm="${HELM:-$cache_root/bin/helm}"
alertmanager_bin="$(command -v prometheus-alertmanager || command -v alertmanager || true)"

step() { echo "== chart-test: $*"; }
fail() { echo "FAIL: chart-test: $*" >&2; exit 1; }

for tool in "$helm" promtool prometheus "$alertmanager_bin" python3 curl; do
  command -v "$tool" >/dev/null 2>&1 || [ -x "$tool" ] \
    || fail "missing $tool: run e2e/bed/install-chart-tools.sh (make deps)"
done

tmp="$(mktemp -d "${TMPDIR:-/tmp}/kh-chart-test.XXXXXX")"
pids=()
bed_dir=""
cleanup() {
  local status=$?
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  if [ -n "$bed_dir" ]; then bash "$repo/e2e/bed/bed.sh" down "$bed_dir" >/dev/null 2>&1 || true; fi
  if [ "$status" -ne 0 ] && [ "${KH_CHART_TEST_KEEP:-}" = 1 ]; then
    echo "chart-test: kept $tmp" >&2
  else
    rm -rf "$tmp"
  fi
}
trap cleanup EXIT

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}
wait_for() { # seconds, description, command...
  local secs="$1" what="$2"; shift 2
  local deadline=$((SECONDS + secs))
  until "$@" >/dev/null 2>&1; do
    [ "$SECONDS" -lt "$deadline" ] || fail "$what did not happen within ${secs}s"
    sleep 0.5
  done
}
wait_file() { wait_for "$1" "$2 wrote $3" test -s "$3"; }

monitoring=(--api-versions monitoring.coreos.com/v1)
# image.repository has no default (no public registry publishes the image): every render and
# install below sets it, in the one flag the chart README documents.
image_repository=registry.example.com/karpenter-health
required=(--set "image.repository=$image_repository")
render() { "$helm" template "$@"; }
# Helm must refuse the values and print TEXT, so a refusal for another reason (say, a missing
# image.repository) cannot pass for the one under test.
refused() { # what, text, command...
  local what="$1" text="$2"; shift 2
  if "$@" >"$tmp/refused.log" 2>&1; then fail "$what was accepted: ${*:2}"; fi
  grep -qF -- "$text" "$tmp/refused.log" \
    || { cat "$tmp/refused.log"; fail "$what was refused, but helm did not print: $text"; }
}
# The rule groups of the chart's PrometheusRule as a plain Prometheus rules file.
render_rules() { # out, extra helm args...
  local out="$1"; shift
  render karpenter-health "$chart" --namespace kube-system "${monitoring[@]}" "${required[@]}" \
    --set prometheusRule.enabled=true --show-only templates/prometheusrule.yaml "$@" \
    | python3 -c 'import sys, yaml; yaml.safe_dump(yaml.safe_load(sys.stdin)["spec"], sys.stdout)' > "$out"
}

# ---------------------------------------------------------------------------------------------
step "1. lint and render"
# Lint tolerates a missing `required` value (it only logs it), so the bare defaults lint too.
"$helm" lint "$chart" >"$tmp/lint.log" 2>&1 || { cat "$tmp/lint.log"; fail "helm lint with default values"; }
"$helm" lint --strict "$chart" >"$tmp/lint.log" 2>&1 || { cat "$tmp/lint.log"; fail "helm lint --strict"; }
grep -qF "Missing required value: image.repository is required" "$tmp/lint.log" \
  || { cat "$tmp/lint.log"; fail "helm lint did not report the missing image.repository"; }
"$helm" lint --strict "$chart" "${required[@]}" >"$tmp/lint.log" \
  || { cat "$tmp/lint.log"; fail "helm lint --strict with image.repository"; }
ci_files=0
for values in "$chart"/ci/*.yaml; do
  "$helm" lint --strict "$chart" -f "$values" >"$tmp/lint.log" \
    || { cat "$tmp/lint.log"; fail "helm lint --strict with ci/${values##*/}"; }
  render kh "$chart" -f "$values" "${monitoring[@]}" >/dev/null || fail "helm template with ci/${values##*/}"
  ci_files=$((ci_files + 1))
done

render karpenter-health "$chart" --namespace kube-system "${required[@]}" >"$tmp/default.yaml"
render karpenter-health "$chart" --namespace kube-system "${required[@]}" "${monitoring[@]}" >"$tmp/default-monitoring.yaml"
python3 "$testdata/check-render.py" default "$tmp/default-monitoring.yaml" \
  || fail "default render (even with the Prometheus Operator API, monitoring objects are opt-in)"
render kh "$chart" --namespace ops -f "$chart/ci/all-values.yaml" "${monitoring[@]}" >"$tmp/all.yaml"
python3 "$testdata/check-render.py" all "$tmp/all.yaml" || fail "render with every value set"
render kh "$chart" --namespace ops -f "$chart/ci/all-values.yaml" >"$tmp/all-no-monitoring.yaml"
python3 "$testdata/check-render.py" absent "$tmp/all-no-monitoring.yaml" \
  || fail "ServiceMonitor/PrometheusRule rendered without the Prometheus Operator API"
{ grep -q '^kind: ServiceMonitor' "$tmp/all.yaml" && grep -q '^kind: PrometheusRule' "$tmp/all.yaml"; } \
  || fail "ServiceMonitor/PrometheusRule missing with --api-versions monitoring.coreos.com/v1"
render kh "$chart" "${required[@]}" --set rbac.aggregateToView=false >"$tmp/no-view.yaml"
if grep -q 'aggregate-to-view' "$tmp/no-view.yaml"; then
  fail "rbac.aggregateToView=false still renders the aggregated read-only ClusterRole"
fi
for off in off OFF; do
  refused "settings.httpAddress=$off (the probes need the endpoints)" "would turn off /livez and /readyz" \
    render kh "$chart" "${required[@]}" --set "settings.httpAddress=$off"
done
refused "a render without image.repository" "image.repository is required: pass --set image.repository=" \
  render kh "$chart"

# values.schema.json: the same keys as values.yaml, closed wherever the chart owns the shape,
# every value set by ci/all-values.yaml; then what it must refuse, at install (template) and in
# helm lint, naming the offending key.
python3 "$testdata/check-render.py" schema "$chart/values.schema.json" "$chart/values.yaml" \
  "$chart/ci/all-values.yaml" || fail "values.schema.json"
for cmd in template lint; do
  if [ "$cmd" = template ]; then run=(render kh "$chart"); else run=("$helm" lint --strict "$chart"); fi
  refused "helm $cmd with a wrong type" "at '/replicas': got string, want integer" \
    "${run[@]}" "${required[@]}" --set replicas=two
  refused "helm $cmd with an unknown top-level key" "additional properties 'bogus' not allowed" \
    "${run[@]}" "${required[@]}" --set bogus=1
  refused "helm $cmd with an unknown key under image" "at '/image': additional properties 'repo' not allowed" \
    "${run[@]}" "${required[@]}" --set image.repo=x
done
refused "a misspelt alert override" "invalid propertyName 'KarpenterHealthNodeRoleMapedFalse'" \
  render kh "$chart" "${required[@]}" --set prometheusRule.alerts.KarpenterHealthNodeRoleMapedFalse.for=1m
refused "a tag inside image.repository" "at '/image/repository'" \
  render kh "$chart" --set image.repository=karpenter-health:0.1.0
refused "a label that is not a string" "at '/podLabels/cost-center': got number, want string" \
  render kh "$chart" "${required[@]}" --set podLabels.cost-center=42
refused "a malformed image digest" "at '/image/digest'" \
  render kh "$chart" "${required[@]}" --set image.digest=sha256:abc

crd="karpenter-health.io_karpenterhealths.yaml"
cmp -s "$repo/crds/$crd" "$chart/crds/$crd" \
  || fail "$chart/crds/$crd differs from crds/$crd: run make crds"
# The CRD chart: lints, and renders exactly the CRD (a template, so helm upgrade upgrades it).
"$helm" lint --strict "$crd_chart" >"$tmp/lint.log" 2>&1 || { cat "$tmp/lint.log"; fail "helm lint --strict of the CRD chart"; }
"$helm" template karpenter-health-crd "$crd_chart" >"$tmp/crd-chart.yaml" || fail "helm template of the CRD chart"
python3 - "$tmp/crd-chart.yaml" "$repo/crds/$crd" <<'PY' || fail "the CRD chart does not render exactly the CRD: run make crds"
import sys, yaml
rendered = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
assert rendered == [yaml.safe_load(open(sys.argv[2]))], [d.get("kind") for d in rendered]
PY
grep -qx "version: $(sed -n 's/^version: //p' "$chart/Chart.yaml")" "$crd_chart/Chart.yaml" \
  || fail "the CRD chart's version is not the main chart's: they are released together"
bash "$repo/deploy/render-rbac.sh" | diff -u "$repo/deploy/rbac.yaml" - >"$tmp/rbac.diff" \
  || { cat "$tmp/rbac.diff"; fail "deploy/rbac.yaml drifts from the chart: run make rbac"; }

python3 "$testdata/check-render.py" ksm "$chart/crds/$crd" "$chart/files/kube-state-metrics.yaml" \
  || fail "kube-state-metrics customResourceState paths"
python3 "$testdata/check-render.py" dashboard "$chart/files/dashboard.json" "$tmp/dashboard-rules.yaml" \
  "$repo/crates/operator/src/metrics.rs" || fail "dashboard queries"
promtool check rules "$tmp/dashboard-rules.yaml" >"$tmp/promtool.log" \
  || { cat "$tmp/promtool.log"; fail "a dashboard query does not parse as PromQL"; }

# The chart's alerted condition types (_conditions.tpl), its alert names in values.schema.json,
# the per-condition alert tests (tests/conditions.test.yaml) and the README's alert row are
# generated from the vocabulary table (crates/api/src/vocabulary.rs) by `make generate`;
# crates/checks/src/generated.rs fails in make test-unit when one is stale.
python3 - "$chart/values.yaml" "$chart/README.md" <<'PY' || fail "the chart README's values table drifts from values.yaml"
import re, sys, yaml
values = yaml.safe_load(open(sys.argv[1]))
keys = re.findall(r"^\| `([A-Za-z][\w.]*)` \|", open(sys.argv[2]).read().split("## Values", 1)[1], re.M)
def has(path):
    v = values
    for p in path.split("."):
        if not isinstance(v, dict) or p not in v:
            return False
        v = v[p]
    return True
stale = [k for k in keys if not has(k)]
assert not stale, f"README documents values that do not exist: {stale}"
def leaves(v, prefix=""):
    for k, x in v.items():
        path = prefix + k
        if path in keys:
            continue
        if isinstance(x, dict) and x:
            yield from leaves(x, path + ".")
        else:
            yield path
undocumented = list(leaves(values))
assert not undocumented, f"values missing from the README table: {undocumented}"
print(f"README: {len(keys)} values documented")
PY
echo "render: lint x3 + ci/*.yaml ($ci_files), default, every value, monitoring gating, schema and its refusals, required image.repository, CRD, RBAC, KSM, dashboard, README: ok"

# ---------------------------------------------------------------------------------------------
step "3. alert rules: promtool check and unit tests"
mkdir -p "$tmp/rules"
render_rules "$tmp/rules/rules.yaml"
promtool check rules "$tmp/rules/rules.yaml" >"$tmp/promtool.log" \
  || { cat "$tmp/promtool.log"; fail "promtool check rules on the chart's PrometheusRule"; }
cp "$chart"/tests/*.test.yaml "$tmp/rules/"
promtool test rules "$tmp/rules/"*.test.yaml >"$tmp/promtool.log" 2>&1 \
  || { cat "$tmp/promtool.log"; fail "promtool test rules"; }
python3 - "$tmp/rules/rules.yaml" "$tmp/rules/"*.test.yaml <<'PY' || fail "an alert has no unit test"
import sys, yaml
rules = yaml.safe_load(open(sys.argv[1]))
alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
for r in (r for g in rules["groups"] for r in g["rules"]):
    assert r.get("for") and r["labels"].get("severity") and r["annotations"].get("runbook_url"), \
        f"{r['alert']}: needs for, a severity label and a runbook_url (conditions.md rule 16)"
tested = {t["alertname"]: t for f in sys.argv[2:] for g in yaml.safe_load(open(f))["tests"]
          for t in g.get("alert_rule_test", [])}
missing = alerts - set(tested)
fired = {a for a in alerts if any(t.get("exp_alerts") for f in sys.argv[2:]
         for g in yaml.safe_load(open(f))["tests"] for t in g.get("alert_rule_test", [])
         if t["alertname"] == a)}
assert not missing, f"alerts without a test: {sorted(missing)}"
assert fired == alerts, f"alerts never expected to fire: {sorted(alerts - fired)}"
print(f"alerts: {len(alerts)} alerts, each tested firing and silent")
PY
grep -A2 'SUCCESS' "$tmp/promtool.log" | head -n 2
python3 "$testdata/check-render.py" alerts "$tmp/rules/rules.yaml" "$chart/values.schema.json" \
  || fail "values.schema.json's alert names (prometheusRule.alerts) differ from the rendered alerts"
# The same alerts as one ruler evaluates them for many clusters (prometheusRule.clusterLabel).
mkdir -p "$tmp/rules-cluster"
render_rules "$tmp/rules-cluster/rules.yaml" --set prometheusRule.clusterLabel=cluster
cp "$chart"/tests/cluster-label/*.test.yaml "$tmp/rules-cluster/"
promtool test rules "$tmp/rules-cluster/"*.test.yaml >"$tmp/promtool.log" 2>&1 \
  || { cat "$tmp/promtool.log"; fail "promtool test rules with prometheusRule.clusterLabel=cluster"; }
grep -c 'SUCCESS' "$tmp/promtool.log" >/dev/null || fail "the per-cluster alert tests did not run"
echo "alerts per cluster (clusterLabel=cluster): NoLeader per cluster, leader join within a cluster: ok"

# ---------------------------------------------------------------------------------------------
if [ "${KH_CHART_TEST_SKIP_BED:-}" = 1 ]; then
  step "2. bed: skipped (KH_CHART_TEST_SKIP_BED=1)"
else
  step "2. bed: server-side dry run of every object, helm install and uninstall"
  bed_dir="$tmp/bed"
  bash "$repo/e2e/bed/bed.sh" up "$bed_dir" >"$tmp/bed.log" 2>&1 || { tail -n 30 "$tmp/bed.log"; fail "bed up"; }
  # shellcheck disable=SC1091
  source "$bed_dir/env"
  kubectl version -o json 2>/dev/null | python3 -c 'import sys,json; v=json.load(sys.stdin)["serverVersion"]; print("bed: Kubernetes", v["gitVersion"])'
  kubectl create namespace ops >/dev/null
  kubectl create namespace karpenter >/dev/null
  kubectl create namespace monitoring >/dev/null
  # The CRD from its own chart, as the README installs it; the main chart then skips crds/.
  "$helm" install karpenter-health-crd "$crd_chart" --wait=false >"$tmp/crd-install.log" 2>&1 \
    || { cat "$tmp/crd-install.log"; fail "helm install of the CRD chart"; }
  kubectl wait --for=condition=Established crd/karpenterhealths.karpenter-health.io --timeout=30s >/dev/null \
    || fail "the CRD chart's CRD is not established"
  # --validate renders with the API server's own capabilities (PDB policy/v1 on 1.34; no
  # monitoring.coreos.com, so the ServiceMonitor and PrometheusRule stay out though enabled).
  for values in default all; do
    if [ "$values" = default ]; then
      render karpenter-health "$chart" --namespace kube-system --validate "${required[@]}" --set serviceMonitor.enabled=true \
        --set prometheusRule.enabled=true --set dashboard.enabled=true \
        --set kubeStateMetrics.customResourceState.enabled=true >"$tmp/dry.yaml"
    else
      render kh "$chart" --namespace ops --validate -f "$chart/ci/all-values.yaml" >"$tmp/dry.yaml"
    fi
    python3 - "$tmp/dry.yaml" "$tmp/dry-core.yaml" <<'PY'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
keep = [d for d in docs if not d["apiVersion"].startswith("monitoring.coreos.com/")]
kinds = sorted({d["kind"] for d in keep})
print(f"dry run: {len(keep)} objects: {', '.join(kinds)}")
yaml.safe_dump_all(keep, open(sys.argv[2], "w"))
PY
    kubectl apply --dry-run=server -f "$tmp/dry-core.yaml" >"$tmp/dry.log" 2>&1 \
      || { cat "$tmp/dry.log"; fail "the API server refuses the $values render"; }
  done
  grep -q 'apiVersion: policy/v1$' "$tmp/dry-core.yaml" \
    || fail "on the bed's Kubernetes (1.34, which serves no policy/v1beta1) the PodDisruptionBudget must be policy/v1"

  refused "helm install without image.repository" "image.repository is required: pass --set image.repository=" \
    "$helm" install karpenter-health "$chart" --namespace kube-system --wait=false
  if "$helm" status karpenter-health --namespace kube-system >/dev/null 2>&1; then
    fail "the refused helm install left a release behind"
  fi
  "$helm" install karpenter-health "$chart" --namespace kube-system --wait=false --skip-crds "${required[@]}" >"$tmp/install.log" 2>&1 \
    || { cat "$tmp/install.log"; fail "helm install"; }
  expect=(deployment/karpenter-health service/karpenter-health serviceaccount/karpenter-health
    poddisruptionbudget/karpenter-health role/karpenter-health-kube-system
    rolebinding/karpenter-health-kube-system role/karpenter-health-karpenter
    rolebinding/karpenter-health-karpenter role/karpenter-health-leader-election
    rolebinding/karpenter-health-leader-election)
  for object in "${expect[@]}"; do
    kubectl -n kube-system get "$object" >/dev/null 2>&1 || fail "helm install did not create kube-system/$object"
  done
  kubectl get clusterrole/karpenter-health clusterrolebinding/karpenter-health >/dev/null 2>&1 \
    || fail "helm install did not create the ClusterRole and its binding"
  # What was installed is what was rendered: rules, replicas, env, affinity.
  kubectl get clusterrole,clusterrolebinding -l app.kubernetes.io/instance=karpenter-health -o yaml >"$tmp/live-cluster.yaml"
  kubectl -n kube-system get role,rolebinding,deployment,poddisruptionbudget -l app.kubernetes.io/instance=karpenter-health -o yaml >"$tmp/live-ns.yaml"
  python3 - "$tmp/default.yaml" "$tmp/live-cluster.yaml" "$tmp/live-ns.yaml" <<'PY' || fail "installed objects differ from the render"
import sys, yaml
rendered = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(open(sys.argv[1])) if d}
live = {}
for path in sys.argv[2:]:
    for item in yaml.safe_load(open(path))["items"]:
        live[(item["kind"], item["metadata"]["name"])] = item
for key, doc in rendered.items():
    if key[0] in ("ClusterRole", "Role"):
        assert live[key]["rules"] == doc["rules"], f"{key}: rules differ"
    if key[0] in ("ClusterRoleBinding", "RoleBinding"):
        assert live[key]["subjects"] == doc["subjects"] and live[key]["roleRef"] == doc["roleRef"], f"{key}: binding differs"
dep = live[("Deployment", "karpenter-health")]["spec"]
assert dep["replicas"] == 2, dep["replicas"]
pod = dep["template"]["spec"]
assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0]["matchExpressions"][0] == \
    {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}
assert pod["containers"][0]["securityContext"]["readOnlyRootFilesystem"] is True
assert pod["priorityClassName"] == "system-cluster-critical"
assert pod["containers"][0]["image"] == "registry.example.com/karpenter-health:0.1.0", pod["containers"][0]["image"]
pdb = live[("PodDisruptionBudget", "karpenter-health")]
assert pdb["apiVersion"] in ("policy/v1beta1", "policy/v1") and pdb["spec"]["maxUnavailable"] == 1
print(f"install: {len(live)} live objects match the render")
PY
  # Whoever may view the cluster may read KarpenterHealth, through the built-in view role into
  # which the bed's controller manager aggregates the chart's read-only role; and may not write it.
  kubectl create clusterrolebinding kh-chart-test-viewer --clusterrole=view --user=kh-chart-test-viewer >/dev/null
  for _ in $(seq 1 30); do
    kubectl auth can-i list karpenterhealths.karpenter-health.io --as=kh-chart-test-viewer >/dev/null 2>&1 && break
    sleep 1
  done
  kubectl auth can-i list karpenterhealths.karpenter-health.io --as=kh-chart-test-viewer >/dev/null 2>&1 \
    || fail "a user bound to view cannot list karpenterhealths: the read-only role is not aggregated into view"
  if kubectl auth can-i patch karpenterhealths.karpenter-health.io/status --as=kh-chart-test-viewer >/dev/null 2>&1; then
    fail "a user bound to view may patch a KarpenterHealth's status"
  fi
  kubectl delete clusterrolebinding kh-chart-test-viewer >/dev/null
  echo "install: a user bound to view may get and list KarpenterHealth, and not write it"
  # The bed has no kubelet: no Pod runs here, the objects themselves are what is checked.
  "$helm" uninstall karpenter-health --namespace kube-system >"$tmp/uninstall.log" 2>&1 \
    || { cat "$tmp/uninstall.log"; fail "helm uninstall"; }
  for object in "${expect[@]}"; do
    if kubectl -n kube-system get "$object" >/dev/null 2>&1; then fail "helm uninstall left kube-system/$object"; fi
  done
  if kubectl get clusterrole/karpenter-health >/dev/null 2>&1; then fail "helm uninstall left the ClusterRole"; fi
  if kubectl get clusterrole/karpenter-health-view >/dev/null 2>&1; then fail "helm uninstall left the view ClusterRole"; fi
  kubectl get crd karpenterhealths.karpenter-health.io >/dev/null \
    || fail "the CRD must survive the main chart's helm uninstall (the CRD chart owns it)"
  echo "bed: install created ${#expect[@]} namespaced objects + ClusterRole/Binding as rendered; uninstall removed them, the CRD stays"
  # The CRD upgrades with its chart: a next version that adds a printer column reaches the API
  # server through helm upgrade (what crds/ never does).
  cp -r "$crd_chart" "$tmp/crd-next"
  python3 - "$tmp/crd-next/templates/$crd" "$tmp/crd-next/Chart.yaml" <<'PY'
import sys, yaml
crd = yaml.safe_load(open(sys.argv[1]))
for v in crd["spec"]["versions"]:
    v["additionalPrinterColumns"].append({"name": "Next", "type": "string", "jsonPath": ".status.notReady", "priority": 1})
yaml.safe_dump(crd, open(sys.argv[1], "w"), sort_keys=False)
chart = open(sys.argv[2]).read().replace("version: 0.", "version: 99.", 1)
open(sys.argv[2], "w").write(chart)
PY
  "$helm" upgrade karpenter-health-crd "$tmp/crd-next" >"$tmp/crd-upgrade.log" 2>&1 \
    || { cat "$tmp/crd-upgrade.log"; fail "helm upgrade of the CRD chart"; }
  kubectl get crd karpenterhealths.karpenter-health.io -o jsonpath='{.spec.versions[0].additionalPrinterColumns[*].name}' \
    | grep -qw Next || fail "helm upgrade of the CRD chart did not upgrade the CRD"
  "$helm" uninstall karpenter-health-crd >"$tmp/crd-uninstall.log" 2>&1 \
    || { cat "$tmp/crd-uninstall.log"; fail "helm uninstall of the CRD chart"; }
  echo "bed: the CRD chart installs the CRD, helm upgrade upgrades it, helm uninstall removes it"
  bash "$repo/e2e/bed/bed.sh" down "$bed_dir" >/dev/null 2>&1 || true
  bed_dir=""
fi

# ---------------------------------------------------------------------------------------------
step "4. Prometheus + Alertmanager: the alert of a broken EC2NodeClass fires, and resolves once the finding is accepted"
e2e="$tmp/e2e"
mkdir -p "$e2e/prometheus" "$e2e/alertmanager"

python3 "$testdata/webhook-recorder.py" --out "$e2e/webhook.jsonl" --port-file "$e2e/webhook.port" \
  >"$e2e/webhook.log" 2>&1 &
pids+=($!)
wait_file 10 "the webhook receiver" "$e2e/webhook.port"

node_class=arn-profile condition=InstanceProfileReady reason=InstanceProfileIsArn
binary="${KH_BINARY:-${CARGO_TARGET_DIR:-$repo/target}/debug/karpenter-health}"
[ -x "$binary" ] || fail "no operator binary at $binary: run cargo build -p karpenter-health (make chart-test does)"
bed_dir="$tmp/bed-alerts"
bash "$repo/e2e/bed/bed.sh" up "$bed_dir" >"$tmp/bed-alerts.log" 2>&1 || { tail -n 30 "$tmp/bed-alerts.log"; fail "bed up"; }
# shellcheck disable=SC1091
source "$bed_dir/env"
export AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing AWS_REGION=us-east-1
export AWS_ENDPOINT_URL="$KH_MOTO_URL"
"$cache_root/moto-venv/bin/python" "$repo/e2e/demo/seed_aws.py" >"$e2e/seed.log" 2>&1 \
  || { cat "$e2e/seed.log"; fail "seeding AWS"; }
# The operator reads AWS through the project's proxy, which answers what moto lacks.
KH_AWS_GAP_PROXY="${KH_AWS_GAP_PROXY:-${CARGO_TARGET_DIR:-$repo/target}/debug/aws-gap-proxy}" \
  bash "$repo/e2e/bed/bed.sh" aws-gap-proxy "$bed_dir" >>"$tmp/bed-alerts.log" 2>&1 \
  || { tail -n 30 "$tmp/bed-alerts.log"; fail "aws-gap-proxy"; }
# shellcheck disable=SC1091
source "$bed_dir/env"
export AWS_ENDPOINT_URL="$KH_AWS_URL"
"$binary" crd | kubectl apply -f - >/dev/null
kubectl apply -f "$repo/e2e/demo/seed.yaml" >/dev/null
# The team that owns the class labels it; the operator copies the label (settings.copyLabels)
# onto its series, and Alertmanager routes the alert by it.
kubectl label ec2nodeclass "$node_class" team=payments >/dev/null
operator_port="$(free_port)"
"$binary" run --leader-elect --lease-namespace default --http-address "127.0.0.1:$operator_port" \
  --refresh-interval 30s --copy-labels team >"$e2e/operator.log" 2>&1 &
pids+=($!)
target="127.0.0.1:$operator_port"
mode="the operator ($binary) at $target"
# The team accepts the finding on its EC2NodeClass: it stops counting, so the alert resolves.
accept_it() {
  kubectl annotate ec2nodeclass arn-profile --overwrite \
    "accept.karpenter-health.io/InstanceProfileIsArn=2099-01-31: the profile moves to its name next release" >/dev/null
}
alertname="KarpenterHealth${condition}False"
echo "metrics: $mode"

am_port="$(free_port)"
cat >"$e2e/alertmanager.yml" <<EOF
route:
  receiver: nobody
  group_by: [alertname, node_class]
  group_wait: 1s
  group_interval: 1s
  repeat_interval: 1h
  routes:
    - matchers: ['team="payments"']
      receiver: webhook
receivers:
  - name: nobody
  - name: webhook
    webhook_configs:
      - url: http://127.0.0.1:$(cat "$e2e/webhook.port")/
        send_resolved: true
EOF
"$alertmanager_bin" --config.file="$e2e/alertmanager.yml" --storage.path="$e2e/alertmanager" \
  --web.listen-address="127.0.0.1:$am_port" --cluster.listen-address= >"$e2e/alertmanager.log" 2>&1 &
pids+=($!)
wait_for 30 "Alertmanager ready" curl -fsS "http://127.0.0.1:$am_port/-/ready"

render_rules "$e2e/rules.yaml" --set prometheusRule.conditionFalse.for=3s \
  --set prometheusRule.conditionUnknown.for=3s --set prometheusRule.noLeader.for=3s
prom_port="$(free_port)"
cat >"$e2e/prometheus.yml" <<EOF
global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [$e2e/rules.yaml]
alerting:
  alertmanagers:
    - static_configs:
        - targets: ["127.0.0.1:$am_port"]
scrape_configs:
  - job_name: karpenter-health
    static_configs:
      - targets: ["$target"]
EOF
promtool check config "$e2e/prometheus.yml" >"$e2e/check.log" 2>&1 || { cat "$e2e/check.log"; fail "prometheus config"; }
prometheus --config.file="$e2e/prometheus.yml" --storage.tsdb.path="$e2e/prometheus" \
  --web.listen-address="127.0.0.1:$prom_port" --rules.alert.resend-delay=1s \
  >"$e2e/prometheus.log" 2>&1 &
pids+=($!)
wait_for 30 "Prometheus ready" curl -fsS "http://127.0.0.1:$prom_port/-/ready"
wait_for 30 "Prometheus scraping $target" bash -c \
  "curl -fsS 'http://127.0.0.1:$prom_port/api/v1/query?query=up' | grep -q '\"value\":\\[[0-9.]*,\"1\"\\]'"

# Whether the webhook got a notification for the alert with this status (firing/resolved).
webhook_has() { # status
  python3 - "$e2e/webhook.jsonl" "$alertname" "$node_class" "$1" <<'PY'
import json, sys
path, alertname, node_class, status = sys.argv[1:]
try:
    lines = open(path).read().splitlines()
except FileNotFoundError:
    sys.exit(1)
for line in lines:
    for alert in json.loads(line)["alerts"]:
        labels = alert["labels"]
        if labels.get("alertname") == alertname and labels.get("node_class") == node_class and alert["status"] == status:
            sys.exit(0)
sys.exit(1)
PY
}

started=$SECONDS
wait_for 90 "$alertname for $node_class firing at the webhook" webhook_has firing
fired_after=$((SECONDS - started))
python3 - "$e2e/webhook.jsonl" "$alertname" "$node_class" "$condition" "$reason" <<'PY' || fail "the firing notification's labels/annotations"
import json, sys
path, alertname, node_class, condition, reason = sys.argv[1:]
alerts = [a for line in open(path) for a in json.loads(line)["alerts"]
          if a["labels"].get("alertname") == alertname and a["status"] == "firing"]
a = alerts[0]
assert a["labels"]["severity"] == "warning", a["labels"]
assert a["labels"]["type"] == condition and a["labels"]["status"] == "False", a["labels"]
assert "instance" not in a["labels"], "per-replica labels must be aggregated away"
assert a["labels"]["reason"] == reason, a["labels"]
assert a["labels"].get("team") == "payments", f"the class's team label routes the alert: {a['labels']}"
assert a["annotations"]["runbook_url"].endswith("docs/checks.md#" + reason.lower()), a["annotations"]
assert a["annotations"]["summary"] == f"EC2NodeClass {node_class}: {condition} is False", a["annotations"]
others = {x["labels"].get("node_class") for line in open(path) for x in json.loads(line)["alerts"]
          if x["labels"].get("alertname") == alertname}
assert others == {node_class}, f"only {node_class} fails {condition}, got {others}"
print(f"webhook: {alertname} firing for {node_class}, routed by its team label, labels and runbook as expected")
PY
# The dashboard's timeline, as Grafana sends it (variables All / this class), shows it False (2).
timeline_is() { # value
  python3 - "$chart/files/dashboard.json" "$prom_port" "$1" <<'PY'
import json, sys, urllib.parse, urllib.request
dashboard, port, want = sys.argv[1:]
panel = next(p for p in json.load(open(dashboard))["panels"] if p["type"] == "state-timeline")
expr = panel["targets"][0]["expr"].replace("$cluster", ".*").replace("$node_class", "arn-profile")
url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
result = json.load(urllib.request.urlopen(url))["data"]["result"]
values = {r["metric"].get("type"): r["value"][1] for r in result}
sys.exit(0 if values.get("InstanceProfileReady") == want else 1)
PY
}
wait_for 30 "the dashboard timeline showing InstanceProfileReady False" timeline_is 2
accept_it
started=$SECONDS
wait_for 90 "$alertname for $node_class resolved at the webhook" webhook_has resolved
resolved_after=$((SECONDS - started))
# The metrics carry it as accepted, and nothing fires for it any more.
accepted_query='karpenter_health_condition{node_class="arn-profile",type="InstanceProfileReady",status="True",reason="FindingAccepted"}'
wait_for 30 "the accepted condition in Prometheus" bash -c \
  "curl -fsS --get 'http://127.0.0.1:$prom_port/api/v1/query' --data-urlencode 'query=$accepted_query == 1' | grep -q '\"value\"'"
curl -fsS --get "http://127.0.0.1:$prom_port/api/v1/alerts" | python3 -c '
import json, sys
firing = [a for a in json.load(sys.stdin)["data"]["alerts"]
          if a["labels"].get("node_class") == "arn-profile" and a["state"] != "inactive"]
assert not firing, firing
' || fail "an alert is still pending or firing for the accepted finding"
wait_for 30 "the dashboard timeline showing InstanceProfileReady True once accepted" timeline_is 0
echo "alerting: fired ${fired_after}s after the break (for: 3s), resolved ${resolved_after}s after the finding was accepted (metrics carry FindingAccepted, no alert pending); $(wc -l <"$e2e/webhook.jsonl") webhook notifications"

step "all chart tests passed"
