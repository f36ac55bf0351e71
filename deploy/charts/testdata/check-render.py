#!/usr/bin/env python3
"""Assertions on `helm template` output of the karpenter-health chart, called by
deploy/charts/test.sh:

    check-render.py default  RENDERED   # default values, --api-versions monitoring.coreos.com/v1
    check-render.py all      RENDERED   # ci/all-values.yaml, same API versions
    check-render.py absent   RENDERED   # monitoring enabled, but the API server lacks the API
    check-render.py ksm      CRD KSM_CONFIG
    check-render.py dashboard DASHBOARD_JSON RULES_OUT METRICS_RS
    check-render.py schema   VALUES_SCHEMA VALUES ALL_VALUES
    check-render.py alerts   RULES VALUES_SCHEMA   # the rule groups as a Prometheus rules file

Every failed check prints what was expected and what was found, and exits 1.
"""
import json
import re
import sys

import yaml

failures = []


def check(cond, message):
    if not cond:
        failures.append(message)


def load(path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d]


def index(docs):
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def env_of(container):
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


SELECTOR = {"app.kubernetes.io/name": "karpenter-health", "app.kubernetes.io/instance": "karpenter-health"}
RESTRICTED = {
    "allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True, "runAsNonRoot": True,
    "runAsUser": 65532, "runAsGroup": 65532, "capabilities": {"drop": ["ALL"]},
}
KARPENTER_AFFINITY = {"key": "karpenter.sh/nodepool", "operator": "DoesNotExist"}


def common_pod_checks(pod, selector, what):
    psc = pod["securityContext"]
    for key, value in {"runAsNonRoot": True, "runAsUser": 65532, "runAsGroup": 65532, "fsGroup": 65532,
                       "seccompProfile": {"type": "RuntimeDefault"}}.items():
        check(psc.get(key) == value, f"{what}: podSecurityContext.{key} should be {value!r}, is {psc.get(key)!r}")
    container = pod["containers"][0]
    for key, value in RESTRICTED.items():
        check(container["securityContext"].get(key) == value,
              f"{what}: securityContext.{key} should be {value!r}, is {container['securityContext'].get(key)!r}")
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    check(all(KARPENTER_AFFINITY in t["matchExpressions"] for t in terms),
          f"{what}: every node selector term must keep karpenter.sh/nodepool DoesNotExist: {terms}")
    anti = pod["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    check(anti and anti[0]["topologyKey"] == "kubernetes.io/hostname"
          and anti[0]["labelSelector"] == {"matchLabels": selector},
          f"{what}: pod anti-affinity on hostname selecting the chart's Pods, found {anti}")
    for tsc in pod["topologySpreadConstraints"]:
        check(tsc["labelSelector"] == {"matchLabels": selector},
              f"{what}: topology spread must select the chart's Pods, found {tsc}")
    env = env_of(container)
    check(env.get("POD_NAME") == {"fieldRef": {"fieldPath": "metadata.name"}}, f"{what}: POD_NAME from the downward API")
    check(env.get("POD_NAMESPACE") == {"fieldRef": {"fieldPath": "metadata.namespace"}},
          f"{what}: POD_NAMESPACE from the downward API")
    check(container["livenessProbe"]["httpGet"] == {"path": "/livez", "port": "http"}, f"{what}: liveness on /livez")
    check(container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}, f"{what}: readiness on /readyz")
    check(container["args"][0] == "run", f"{what}: the container runs `karpenter-health run`: {container['args']}")
    return container, env


def rbac_rules(objs, kind, name):
    return objs[(kind, name)]["rules"]


def check_default(path):
    docs = load(path)
    objs = index(docs)
    kinds = sorted({d["kind"] for d in docs})
    check(kinds == ["ClusterRole", "ClusterRoleBinding", "Deployment", "PodDisruptionBudget", "Role",
                    "RoleBinding", "Service", "ServiceAccount"],
          f"default: kinds rendered {kinds} (ServiceMonitor/PrometheusRule/ConfigMaps must be off by default)")
    dep = objs[("Deployment", "karpenter-health")]
    check(dep["metadata"]["namespace"] == "kube-system", "default: Deployment in the release namespace")
    check(dep["spec"]["replicas"] == 2, f"default: replicas 2, is {dep['spec']['replicas']}")
    pod = dep["spec"]["template"]["spec"]
    container, env = common_pod_checks(pod, SELECTOR, "default")
    # The image is amd64 only: the default keeps it off other architectures.
    check(pod.get("nodeSelector") == {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
          f"default: nodeSelector should hold the image to linux/amd64, is {pod.get('nodeSelector')!r}")
    check(pod["priorityClassName"] == "system-cluster-critical", "default: priorityClassName system-cluster-critical")
    check(container["image"] == "registry.example.com/karpenter-health:0.1.0",
          f"default: image is --set image.repository, the tag defaults to appVersion, is {container['image']}")
    check("volumes" not in pod and "volumeMounts" not in container,
          f"default: no volumes: {pod.get('volumes')} {container.get('volumeMounts')}")
    check(pod["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": SELECTOR}}], f"default: zone spread: {pod['topologySpreadConstraints']}")
    for doc in docs:
        what = f"default: {doc['kind']} {doc['metadata']['name']}"
        check("team" not in doc["metadata"].get("labels", {}), f"{what}: no additionalLabels by default")
    check(container["args"] == ["run", "--log-format", "json"], f"default: args {container['args']}")
    kh = sorted(k for k in env if k.startswith("KH_") or k == "RUST_LOG")
    check(kh == ["KH_LEADER_ELECT"], f"default: only KH_LEADER_ELECT (2 replicas) is set, the binary keeps its defaults; found {kh}")
    check(env.get("KH_LEADER_ELECT") == "true", "default: leader election on with 2 replicas")
    check(container["ports"] == [{"name": "http", "containerPort": 8080, "protocol": "TCP"}], f"default: port {container['ports']}")
    pdb = objs[("PodDisruptionBudget", "karpenter-health")]
    check(pdb["spec"].get("maxUnavailable") == 1, f"default: PDB maxUnavailable 1: {pdb['spec']}")
    check(pdb["spec"]["selector"] == {"matchLabels": SELECTOR}, "default: PDB selects the chart's Pods")
    svc = objs[("Service", "karpenter-health")]
    check(svc["spec"]["ports"] == [{"name": "http", "port": 8080, "targetPort": "http", "protocol": "TCP"}],
          f"default: Service port {svc['spec']['ports']}")
    check(objs[("ServiceAccount", "karpenter-health")]["metadata"].get("annotations") is None,
          "default: no ServiceAccount annotations")
    karpenter_role = objs[("Role", "karpenter-health-karpenter")]
    check(karpenter_role["metadata"]["namespace"] == "kube-system", "default: Karpenter Role in kube-system")
    check([r.get("resourceNames") for r in karpenter_role["rules"]] == [["karpenter"], ["karpenter"], None],
          "default: Karpenter Role pinned to the binary's default names (Endpoints: any webhook Service)")
    check(karpenter_role["rules"][2] == {"apiGroups": [""], "resources": ["endpoints"], "verbs": ["list", "watch"]},
          f"default: the Karpenter Role only reads Endpoints: {karpenter_role['rules'][2]}")
    lease = objs[("Role", "karpenter-health-leader-election")]
    check(lease["rules"][1]["resourceNames"] == ["karpenter-health"], "default: Lease Role pinned to karpenter-health")
    check(not any(r.get("resourceNames") == ["karpenterhealths.karpenter-health.io"]
                  for r in rbac_rules(objs, "ClusterRole", "karpenter-health")),
          "default: no CRD write rules without settings.installCRD")
    view = objs[("ClusterRole", "karpenter-health-view")]
    labels = view["metadata"]["labels"]
    for role in ["view", "edit", "admin"]:
        check(labels.get(f"rbac.authorization.k8s.io/aggregate-to-{role}") == "true",
              f"default: the read-only role aggregates into {role}: {labels}")
    check(view["rules"] == [{"apiGroups": ["karpenter-health.io"],
                             "resources": ["karpenterhealths", "karpenterhealths/status"],
                             "verbs": ["get", "list", "watch"]}],
          f"default: viewers may only read KarpenterHealth: {view['rules']}")


def check_all(path):
    docs = load(path)
    objs = index(docs)
    selector = {"app.kubernetes.io/name": "kh", "app.kubernetes.io/instance": "kh"}
    dep = objs[("Deployment", "kh-operator")]
    check(dep["metadata"]["namespace"] == "ops", "all: Deployment in the release namespace ops")
    check(dep["spec"]["replicas"] == 3, "all: replicas 3")
    for doc in docs:
        what = f"all: {doc['kind']} {doc['metadata']['name']}"
        check(doc["metadata"]["labels"].get("team") == "platform", f"{what}: additionalLabels {doc['metadata']['labels']}")
        check(doc["metadata"].get("annotations", {}).get("owner") == "platform-team",
              f"{what}: additionalAnnotations {doc['metadata'].get('annotations')}")
    check(dep["metadata"]["annotations"] == {"owner": "platform-team", "example.com/deployment": "yes"},
          f"all: Deployment annotations {dep['metadata'].get('annotations')}")
    pod = dep["spec"]["template"]["spec"]
    meta = dep["spec"]["template"]["metadata"]
    check(meta["labels"] == dict(selector, **{"cost-center": "42"}), f"all: pod labels {meta['labels']}")
    check(meta["annotations"] == {"example.com/scrape": "true"}, "all: pod annotations")
    container, env = common_pod_checks(pod, selector, "all")
    check(container["image"] == "registry.example.com/karpenter-health@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
          f"all: the digest wins over the tag: {container['image']}")
    check(container["imagePullPolicy"] == "Always", "all: pullPolicy")
    check(pod["imagePullSecrets"] == [{"name": "registry-credentials"}], "all: imagePullSecrets")
    check(pod["serviceAccountName"] == "kh-sa", "all: serviceAccountName")
    check(pod["priorityClassName"] == "system-node-critical", "all: priorityClassName")
    terms = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    check(terms[0]["matchExpressions"][1] == {"key": "eks.amazonaws.com/compute-type", "operator": "NotIn",
                                              "values": ["fargate"]}, f"all: affinity as given: {terms}")
    check(pod["topologySpreadConstraints"] == [{
        "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": selector}}], f"all: topologySpreadConstraints {pod['topologySpreadConstraints']}")
    check(pod.get("volumes") == [{"name": "ca-bundle", "configMap": {"name": "corporate-ca"}}],
          f"all: extraVolumes in the Pod spec: {pod.get('volumes')}")
    check(container.get("volumeMounts") == [{"name": "ca-bundle", "mountPath": "/etc/ssl/corporate", "readOnly": True}],
          f"all: extraVolumeMounts in the container: {container.get('volumeMounts')}")
    # Helm merges a map value into the default: the arch guard stays unless set to null.
    check(pod["nodeSelector"] == {"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64", "node-role": "system"},
          f"all: nodeSelector {pod['nodeSelector']!r}")
    check(len(pod["tolerations"]) == 2, "all: tolerations")
    check(pod["terminationGracePeriodSeconds"] == 45, "all: terminationGracePeriodSeconds")
    check(container["resources"] == {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "512Mi"}},
          "all: resources")
    check(container["args"] == ["run", "--log-format", "text"], f"all: --log-format text: {container['args']}")
    expected = {
        "RUST_LOG": "debug,kube=info", "KH_CLUSTER_NAME": "prod-eu", "KH_REGION": "eu-west-1",
        "KH_KARPENTER_VERSION": "1.6.2", "KH_KARPENTER_NAMESPACE": "karpenter",
        "KH_KARPENTER_DEPLOYMENT": "karpenter-controller", "KH_KARPENTER_SERVICE_ACCOUNT": "karpenter-sa",
        "KH_REFRESH_INTERVAL": "2m", "KH_REGISTRATION_TIMEOUT": "10m", "KH_VALIDATION_STUCK_AFTER": "15m",
        "KH_STATUS_STALE_AFTER": "20m", "KH_ORPHAN_INSTANCE_AFTER": "30m", "KH_CONCURRENCY": "8",
        "KH_TERMINATING_LONG_AFTER": "2h",
        "KH_WAITING_ON_LIMITS_AFTER": "5m",
        "KH_INITIALIZATION_TIMEOUT": "20m",
        "KH_KUBERNETES_COMPATIBILITY": "1.37=1.15.0,1.38=1.17.0",
        "KH_COPY_LABELS": "team,example.com/owner",
        "KH_EXCLUDE_POD_NAMESPACES": "tenant-a,tenant-b",
        "KH_ACCEPT_ANNOTATIONS": "false",
        "KH_ACCEPTANCES": '[{"nodeClasses":"batch-*","reason":"ZoneSubnetsLowOnAddresses","until":"2027-01-31","why":"the subnets grow in January"}]',
        "KH_BULK_TRIGGER_INTERVAL": "2s",
        "KH_INSTALL_CRD": "true", "KH_HTTP_ADDRESS": "[::]:9090", "KH_LEADER_ELECT": "true",
        "KH_LEASE_NAME": "kh-lease", "AWS_REGION": "eu-west-1",
    }
    for key, value in expected.items():
        check(env.get(key) == value, f"all: env {key} should be {value!r}, is {env.get(key)!r}")
    extra = sorted(set(env) - set(expected) - {"POD_NAME", "POD_NAMESPACE"})
    check(not extra, f"all: unexpected env {extra}")
    check(container["ports"][0]["containerPort"] == 9090, "all: container port follows settings.httpPort")
    pdb = objs[("PodDisruptionBudget", "kh-operator")]
    check(pdb["spec"] == {"minAvailable": 2, "selector": {"matchLabels": selector}}, f"all: PDB minAvailable wins: {pdb['spec']}")
    sa = objs[("ServiceAccount", "kh-sa")]
    check(sa["metadata"]["annotations"]["eks.amazonaws.com/role-arn"] == "arn:aws:iam::111122223333:role/karpenter-health",
          "all: IRSA annotation on the ServiceAccount")
    role = objs[("Role", "kh-operator-karpenter")]
    check(role["metadata"]["namespace"] == "karpenter", "all: the Karpenter Role lives in settings.karpenterNamespace")
    check(objs[("RoleBinding", "kh-operator-karpenter")]["metadata"]["namespace"] == "karpenter",
          "all: its RoleBinding too")
    check([r.get("resourceNames") for r in role["rules"]] == [["karpenter-controller"], ["karpenter-sa"], None],
          f"all: Karpenter Role pinned to the configured names: {role['rules']}")
    check(objs[("Role", "kh-operator-kube-system")]["metadata"]["namespace"] == "kube-system",
          "all: aws-auth/aws-node Role stays in kube-system")
    lease = objs[("Role", "kh-operator-leader-election")]
    check(lease["metadata"]["namespace"] == "ops" and lease["rules"][1]["resourceNames"] == ["kh-lease"],
          "all: Lease Role in the release namespace, pinned to settings.leaseName")
    for kind in ("ClusterRoleBinding", "RoleBinding"):
        for (k, name), doc in objs.items():
            if k == kind:
                check(doc["subjects"] == [{"kind": "ServiceAccount", "name": "kh-sa", "namespace": "ops"}],
                      f"all: {kind} {name} binds kh-sa in ops: {doc['subjects']}")
    crd_rules = [r for r in rbac_rules(objs, "ClusterRole", "kh-operator")
                 if r["resources"] == ["customresourcedefinitions"]]
    check(len(crd_rules) == 3, f"all: settings.installCRD adds the CRD rules: {crd_rules}")
    svc = objs[("Service", "kh-operator")]
    check(svc["spec"]["ports"][0]["port"] == 9090 and svc["metadata"]["labels"].get("metrics") == "true",
          "all: Service port and labels")
    sm = objs[("ServiceMonitor", "kh-operator")]
    ep = sm["spec"]["endpoints"][0]
    check(sm["metadata"]["labels"].get("release") == "prometheus", "all: ServiceMonitor additionalLabels")
    check(ep["interval"] == "30s" and ep["scrapeTimeout"] == "10s" and ep["port"] == "http", f"all: ServiceMonitor endpoint {ep}")
    check(len(ep["relabelings"]) == 1 and len(ep["metricRelabelings"]) == 1, "all: ServiceMonitor relabelings")
    rule = objs[("PrometheusRule", "kh-operator")]
    check(rule["metadata"]["labels"].get("release") == "prometheus", "all: PrometheusRule additionalLabels")
    alerts = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    check("KarpenterHealthLabelsAllowedFalse" not in alerts, "all: a disabled alert is not rendered")
    mapped = alerts["KarpenterHealthNodeRoleMappedFalse"]
    check(mapped["for"] == "1m" and mapped["labels"] == {"severity": "page", "team": "platform"},
          f"all: per-alert override: {mapped['for']} {mapped['labels']}")
    check(mapped["annotations"]["runbook_url"] == "https://docs.example.com/karpenter-health/checks.md#{{ $labels.reason | toLower }}",
          f"all: docsBaseURL (trailing slash dropped): {mapped['annotations']['runbook_url']}")
    sg = alerts["KarpenterHealthSecurityGroupsReadyFalse"]
    check(sg["for"] == "10m" and sg["labels"]["severity"] == "critical", "all: conditionFalse defaults")
    unknown = alerts["KarpenterHealthConditionUnknown"]
    check(unknown["for"] == "1h" and unknown["labels"]["severity"] == "warning", "all: conditionUnknown defaults")
    leader = alerts["KarpenterHealthNoLeader"]
    check(leader["for"] == "15m" and leader["annotations"]["runbook_url"] == "https://docs.example.com/karpenter-health/no-leader",
          "all: noLeader and operatorRunbookURL")
    stale = alerts["KarpenterHealthStale"]
    check(stale["for"] == "20m" and stale["labels"]["severity"] == "critical"
          and stale["expr"].endswith("> 3600")
          and stale["annotations"]["runbook_url"] == "https://docs.example.com/karpenter-health/no-leader",
          f"all: stale, staleAfterSeconds and operatorRunbookURL: {stale}")
    dash = objs[("ConfigMap", "kh-operator-dashboard")]
    check(dash["metadata"]["namespace"] == "monitoring" and dash["metadata"]["labels"].get("grafana_dashboard") == "1"
          and dash["metadata"]["annotations"].get("grafana_folder") == "Karpenter", "all: dashboard ConfigMap")
    json.loads(dash["data"]["karpenter-health.json"])
    ksm = objs[("ConfigMap", "kh-operator-kube-state-metrics")]
    check(ksm["metadata"]["namespace"] == "monitoring", "all: kube-state-metrics ConfigMap namespace")
    check(yaml.safe_load(ksm["data"]["config.yaml"])["kind"] == "CustomResourceStateMetrics", "all: KSM config")


def check_absent(path):
    kinds = {d["kind"] for d in load(path)}
    check("ServiceMonitor" not in kinds and "PrometheusRule" not in kinds,
          f"absent: without monitoring.coreos.com/v1 no ServiceMonitor/PrometheusRule may render: {kinds}")


def schema_has(schema, path):
    """Whether the openAPIV3Schema has PATH (metadata is ObjectMeta, not in the CRD schema)."""
    if path[0] == "metadata":
        return path[1] in ("name", "namespace", "uid", "labels", "annotations", "generation", "creationTimestamp")
    node = schema
    for key in path:
        if node.get("type") == "array":
            node = node["items"]
        props = node.get("properties", {})
        if key not in props:
            return False
        node = props[key]
    return True


def schema_node(root, node):
    """NODE with its $ref and allOf resolved (the schema only refers into #/definitions)."""
    node = dict(node)
    while "$ref" in node:
        target = root
        for part in node.pop("$ref").lstrip("#/").split("/"):
            target = target[part]
        node = {**target, **node}
    for sub in node.pop("allOf", []):
        node = {**schema_node(root, sub), **node}
    return node


def check_schema(schema_path, values_path, all_values_path):
    with open(schema_path) as f:
        root = json.load(f)
    with open(values_path) as f:
        values = yaml.safe_load(f)
    with open(all_values_path) as f:
        all_values = yaml.safe_load(f)
    check(root.get("$schema") == "http://json-schema.org/draft-07/schema#", "schema: draft-07, the draft Helm 3 documents")

    def owned(node, path):
        """The key paths of the objects whose shape the chart owns (those with properties)."""
        node = schema_node(root, node)
        if "properties" not in node:
            return
        check(node.get("additionalProperties") is False,
              f"schema: {'.'.join(path) or '(top level)'} has properties but accepts unknown keys")
        for key, sub in node["properties"].items():
            if path or key != "global":  # Helm's, when the chart is a dependency
                yield from owned(sub, path + [key]) if "properties" in schema_node(root, sub) else [path + [key]]

    def keys(v, node, path):
        node = schema_node(root, node)
        for key, x in v.items():
            sub = node.get("properties", {}).get(key)
            if isinstance(x, dict) and sub is not None and "properties" in schema_node(root, sub):
                yield from keys(x, sub, path + [key])
            else:
                yield path + [key]

    in_schema = {".".join(p) for p in owned(root, [])}
    in_values = {".".join(p) for p in keys(values, root, [])}
    check(in_values <= in_schema, f"schema: values.yaml keys the schema lacks: {sorted(in_values - in_schema)}")
    check(in_schema <= in_values, f"schema: keys only the schema has (stale?): {sorted(in_schema - in_values)}")

    def has(v, path):
        for p in path.split("."):
            if not isinstance(v, dict) or p not in v:
                return False
            v = v[p]
        return True
    unset = sorted(k for k in in_values if not has(all_values, k))
    check(not unset, f"schema: ci/all-values.yaml must set every value, misses {unset}")
    if not failures:
        print(f"schema: {len(in_schema)} values, closed objects, all set by ci/all-values.yaml")


def check_alerts(rules_path, schema_path):
    with open(rules_path) as f:
        rules = yaml.safe_load(f)
    with open(schema_path) as f:
        schema = json.load(f)
    alerts = {r["alert"] for g in rules["groups"] for r in g["rules"]}
    names = set(schema["properties"]["prometheusRule"]["properties"]["alerts"]["propertyNames"]["enum"])
    check(names == alerts, f"alerts: prometheusRule.alerts names in the schema {sorted(names ^ alerts)} "
          "are not exactly the rendered alerts")
    print(f"alerts: the schema's {len(names)} overridable alert names are the rendered alerts")


def check_ksm(crd_path, config_path):
    crd = load(crd_path)[0]
    config = load(config_path)[0]
    versions = {v["name"]: v for v in crd["spec"]["versions"]}
    for resource in config["spec"]["resources"]:
        gvk = resource["groupVersionKind"]
        check(gvk["group"] == crd["spec"]["group"] and gvk["kind"] == crd["spec"]["names"]["kind"],
              f"ksm: {gvk} is not the CRD's group/kind")
        check(gvk["version"] in versions, f"ksm: version {gvk['version']} not served by the CRD")
        schema = versions[gvk["version"]]["schema"]["openAPIV3Schema"]
        paths = list(resource.get("labelsFromPath", {}).values())
        for metric in resource["metrics"]:
            each = metric["each"]
            body = each[each["type"].lower()]
            base = body.get("path", [])
            if base:
                paths.append(base)
            paths += [base + p for p in body.get("labelsFromPath", {}).values()]
            if "valueFrom" in body:
                paths.append(base + body["valueFrom"])
        for p in paths:
            check(schema_has(schema, p), f"ksm: path {'.'.join(p)} is not in the CRD schema")
        print(f"ksm: {len(paths)} paths checked against the CRD schema")


def check_dashboard(dashboard_path, rules_out, metrics_rs):
    with open(dashboard_path) as f:
        dashboard = json.load(f)
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    check(len(exprs) >= 10, f"dashboard: expected its queries, found {len(exprs)}")
    with open(metrics_rs) as f:
        source = f.read()
    registered = set(re.findall(r'registry\.register\(\s*"([a-z_]+)"', source))
    kinds = {"counter": "_total", "histogram": "_bucket"}
    for e in exprs:
        for name in re.findall(r"karpenter_health_[a-z_]+", e):
            base = name[len("karpenter_health_"):]
            for suffix in ("_total", "_bucket", "_sum", "_count"):
                if base.endswith(suffix) and base[: -len(suffix)] in registered:
                    base = base[: -len(suffix)]
            check(base in registered, f"dashboard: {name} is not a metric metrics.rs registers ({sorted(registered)})")
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{i}", "expr": e} for i, e in enumerate(exprs)]}]}
    with open(rules_out, "w") as f:
        yaml.safe_dump(rules, f)
    print(f"dashboard: {len(exprs)} queries written as recording rules for promtool")


def main():
    mode = sys.argv[1]
    {"default": check_default, "all": check_all, "absent": check_absent,
     "ksm": check_ksm, "dashboard": check_dashboard, "schema": check_schema,
     "alerts": check_alerts}[mode](*sys.argv[2:])
    if failures:
        for f in failures:
            print(f"FAIL: {f}", file=sys.stderr)
        sys.exit(1)
    print(f"{mode}: ok")


if __name__ == "__main__":
    main()
