#!/usr/bin/env bash
# The local test bed: etcd + kube-apiserver + kube-controller-manager + kube-scheduler of the
# Kubernetes release e2e/bed/kube/go.mod pins (built from Go modules by build-kube.sh) and moto
# server, on loopback.
#
#   bed.sh up   [DIR]   start everything, write DIR/env (source it) and DIR/kubeconfig
#   bed.sh down [DIR]   stop exactly the processes `up` started (by pid) and remove DIR
#   bed.sh status [DIR]
#   bed.sh aws-gap-proxy [DIR]   start the project's aws-gap-proxy (KH_AWS_GAP_PROXY: its binary)
#                       in front of moto and add KH_AWS_URL (moto plus what it lacks) to DIR/env
#   bed.sh karpenter [DIR]       start the real Karpenter controller (KH_KARPENTER_RELEASE, built by
#                       build-karpenter.sh) against KH_AWS_URL in AWS_REGION, with the settings of
#                       its Deployment kube-system/karpenter (as its chart passes them), and the
#                       node stand-in (KH_NODE_STAND_IN: its binary) that makes its instances' Nodes
#
# DIR defaults to $KH_BED_DIR, else e2e/.bed. All state lives under DIR; ports are chosen free at
# start. KARPENTER_CRDS_DIR may point at a folder of real Karpenter CRDs to install instead of the
# project's minimal ones.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
e2e_dir="$(dirname "$here")"
cmd="${1:-}"; shift || true
dir="${1:-${KH_BED_DIR:-$e2e_dir/.bed}}"
cache_root="${KARPENTER_HEALTH_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-health}"

log() { echo "bed: $*" >&2; }

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

stop_all() {
  [ -d "$dir/pids" ] || return 0
  # Reverse start order; only processes this script started, by their recorded pids.
  for name in operator node-stand-in karpenter aws-gap-proxy moto kube-scheduler kube-controller-manager kube-apiserver etcd; do
    stop_one "$name"
  done
}

wait_http() { # url, what, seconds, [curl args...]
  local url="$1" what="$2" secs="$3"; shift 3
  for _ in $(seq 1 $((secs * 5))); do
    if curl -fsS -o /dev/null "$@" "$url" 2>/dev/null; then return 0; fi
    sleep 0.2
  done
  log "$what did not become ready within ${secs}s; last log lines:"
  tail -n 20 "$dir/logs/$what.log" >&2 || true
  return 1
}

resolve_binaries() {
  local assets="${KUBEBUILDER_ASSETS:-}" built=""
  apiserver="${TEST_ASSET_KUBE_APISERVER:-${assets:+$assets/kube-apiserver}}"
  etcd_bin="${TEST_ASSET_ETCD:-${assets:+$assets/etcd}}"
  kcm="${TEST_ASSET_KUBE_CONTROLLER_MANAGER:-${assets:+$assets/kube-controller-manager}}"
  scheduler="${TEST_ASSET_KUBE_SCHEDULER:-${assets:+$assets/kube-scheduler}}"
  # envtest's asset folders often hold only kube-apiserver and etcd: build what they lack.
  for b in "$apiserver" "$etcd_bin" "$kcm" "$scheduler"; do
    if [ -z "$b" ] || [ ! -x "$b" ]; then built="$("$here/build-kube.sh")"; break; fi
  done
  { [ -n "$apiserver" ] && [ -x "$apiserver" ]; } || apiserver="$built/kube-apiserver"
  { [ -n "$etcd_bin" ] && [ -x "$etcd_bin" ]; } || etcd_bin="$built/etcd"
  { [ -n "$kcm" ] && [ -x "$kcm" ]; } || kcm="$built/kube-controller-manager"
  { [ -n "$scheduler" ] && [ -x "$scheduler" ]; } || scheduler="$built/kube-scheduler"
  for b in "$apiserver" "$etcd_bin" "$kcm" "$scheduler"; do
    [ -x "$b" ] || { log "missing binary: $b"; exit 1; }
  done
  # kubectl of the server's release: envtest's assets carry one; else the one build-kube.sh makes.
  kubectl_dir="${assets:-}"
  if [ -z "$kubectl_dir" ] || [ ! -x "$kubectl_dir/kubectl" ]; then
    kubectl_dir="${built:-$("$here/build-kube.sh")}"
  fi
  [ -x "$kubectl_dir/kubectl" ] || { log "missing binary: $kubectl_dir/kubectl"; exit 1; }
  PATH="$kubectl_dir:$PATH"
}

make_pki() {
  local pki="$dir/pki"; mkdir -p "$pki"
  openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj "/CN=karpenter-health-bed-ca" \
    -keyout "$pki/ca.key" -out "$pki/ca.crt" \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" 2>/dev/null
  # rustls refuses a CA used as a server certificate: sign a separate serving certificate.
  openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" \
    -keyout "$pki/server.key" -out "$pki/server.csr" 2>/dev/null
  printf 'basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature,keyEncipherment\nextendedKeyUsage=serverAuth\nsubjectAltName=IP:127.0.0.1,DNS:localhost\n' > "$pki/server.ext"
  openssl x509 -req -in "$pki/server.csr" -CA "$pki/ca.crt" -CAkey "$pki/ca.key" -CAcreateserial \
    -days 2 -extfile "$pki/server.ext" -out "$pki/server.crt" 2>/dev/null
  openssl genrsa -out "$pki/sa.key" 2048 2>/dev/null
  openssl rsa -in "$pki/sa.key" -pubout -out "$pki/sa.pub" 2>/dev/null
}

write_kubeconfig() { # file, user, token
  cat > "$1" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: bed
  cluster: {server: "https://127.0.0.1:$api_port", certificate-authority: "$dir/pki/ca.crt"}
users:
- name: $2
  user: {token: "$3"}
contexts:
- name: bed
  context: {cluster: bed, user: $2}
current-context: bed
KUBECONFIG
}

install_karpenter_crds() {
  local kc=(kubectl --kubeconfig "$dir/kubeconfig")
  if [ -n "${KARPENTER_CRDS_DIR:-}" ]; then
    log "installing Karpenter CRDs from $KARPENTER_CRDS_DIR"
    local f name
    for f in "$KARPENTER_CRDS_DIR"/*.yaml; do
      "${kc[@]}" create --validate=false -f "$f" >/dev/null
      name="$(basename "$f" .yaml)"; name="${name#*_}.${name%%_*}"
      # Conversion webhooks point at the Karpenter Service, which the bed does not run.
      "${kc[@]}" patch crd "$name" --type=merge -p '{"spec":{"conversion":{"strategy":"None","webhook":null}}}' >/dev/null
    done
  else
    "${kc[@]}" create -f "$e2e_dir/crds/karpenter-minimal.yaml" >/dev/null
  fi
  "${kc[@]}" wait --for condition=established --timeout=60s crd/ec2nodeclasses.karpenter.k8s.aws crd/nodepools.karpenter.sh crd/nodeclaims.karpenter.sh >/dev/null
}

start_apiserver() {
  local bin port
  bin="$(cat "$dir/apiserver.bin")"
  # shellcheck disable=SC2046
  "$bin" $(cat "$dir/apiserver.args") >> "$dir/logs/kube-apiserver.log" 2>&1 &
  echo $! > "$dir/pids/kube-apiserver.pid"
  port="$(sed -n 's/.*--secure-port \([0-9]*\).*/\1/p' "$dir/apiserver.args")"
  wait_http "https://127.0.0.1:$port/readyz" kube-apiserver 90 --cacert "$dir/pki/ca.crt" -H "Authorization: Bearer $(cat "$dir/pki/admin.token")"
}

stop_one() { # name
  local pidfile="$dir/pids/$1.pid" pid
  [ -f "$pidfile" ] || return 0
  pid="$(cat "$pidfile")"
  if kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
  fi
  rm -f "$pidfile"
}

# Runs whole operators (demo, chart and image tests) against moto plus what moto lacks; the e2e
# tests start a proxy of their own per test instead.
start_aws_gap_proxy() {
  local binary="${KH_AWS_GAP_PROXY:?KH_AWS_GAP_PROXY must name the aws-gap-proxy binary}" url=""
  # shellcheck disable=SC1091
  source "$dir/env"
  stop_one aws-gap-proxy
  "$binary" --upstream "$KH_MOTO_URL" > "$dir/logs/aws-gap-proxy.log" 2>&1 &
  echo $! > "$dir/pids/aws-gap-proxy.pid"
  for _ in $(seq 1 100); do
    url="$(head -n 1 "$dir/logs/aws-gap-proxy.log" 2>/dev/null | grep '^http://' || true)"
    [ -n "$url" ] && break
    sleep 0.1
  done
  [ -n "$url" ] || { log "aws-gap-proxy did not start:"; cat "$dir/logs/aws-gap-proxy.log" >&2; exit 1; }
  sed -i '/^export KH_AWS_URL=/d' "$dir/env"
  echo "export KH_AWS_URL=\"$url\"" >> "$dir/env"
  log "aws-gap-proxy at $url in front of moto"
}

# The demo's Karpenter: one process for the bed, configured from its Deployment's env.
start_karpenter() {
  local binary stand_in="${KH_NODE_STAND_IN:?KH_NODE_STAND_IN must name the node-stand-in binary}"
  # shellcheck disable=SC1091
  source "$dir/env"
  binary="$("$here/build-karpenter.sh" "${KH_KARPENTER_RELEASE:-v1.14.1}")"
  stop_one karpenter; stop_one node-stand-in
  local settings
  settings="$(kubectl --kubeconfig "$dir/kubeconfig" -n kube-system get deployment karpenter \
    -o jsonpath='{range .spec.template.spec.containers[0].env[*]}{.name}={.value}{"\n"}{end}')"
  local metrics probe
  metrics="$(free_port)"; probe="$(free_port)"
  # shellcheck disable=SC2046
  env $(echo "$settings" | grep -E '^[A-Z_]+=' | tr '\n' ' ') \
    KUBECONFIG="$dir/kubeconfig" AWS_ENDPOINT_URL="${KH_AWS_URL:?start the aws-gap-proxy first}" \
    AWS_REGION="${AWS_REGION:-us-east-1}" AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing \
    AWS_EC2_METADATA_DISABLED=true DISABLE_LEADER_ELECTION=true METRICS_PORT="$metrics" \
    HEALTH_PROBE_PORT="$probe" LOG_LEVEL=debug "$binary" > "$dir/logs/karpenter.log" 2>&1 &
  echo $! > "$dir/pids/karpenter.pid"
  wait_http "http://127.0.0.1:$probe/readyz" karpenter 90
  KUBECONFIG="$dir/kubeconfig" "$stand_in" > "$dir/logs/node-stand-in.log" 2>&1 &
  echo $! > "$dir/pids/node-stand-in.pid"
  log "Karpenter ${KH_KARPENTER_RELEASE:-v1.14.1} and the node stand-in running (logs/karpenter.log)"
}

# What a bed is up for: its role (KH_BED_ROLE: the operator tests, a lab release, the demo) and
# the Karpenter CRDs it installed. A running bed is reused only for the same; another role would
# run its tests beside a controller it does not know of (the demo's Karpenter reconciles every
# NodePool on its bed), so `up` refuses.
bed_role() {
  echo "role=${KH_BED_ROLE:-tests} crds=${KARPENTER_CRDS_DIR:-minimal}"
}

up() {
  if [ -f "$dir/env" ] && [ -f "$dir/pids/kube-apiserver.pid" ] && kill -0 "$(cat "$dir/pids/kube-apiserver.pid")" 2>/dev/null; then
    local running wanted
    running="$(cat "$dir/role" 2>/dev/null || echo "role=unknown")"; wanted="$(bed_role)"
    if [ "$running" != "$wanted" ]; then
      log "refusing to reuse the bed in $dir: it is up as [$running], this asks for [$wanted]; stop it first: bash e2e/bed/bed.sh down $dir"
      exit 1
    fi
    log "already up in $dir ($running)"; return 0
  fi
  "$here/install-deps.sh"
  resolve_binaries
  stop_all; rm -rf "$dir"; mkdir -p "$dir"/{pids,logs,etcd,certs}
  # Stop what was started if anything below fails, so a failed start leaves nothing behind.
  trap 'stop_all' ERR
  etcd_port="$(free_port)"; etcd_peer="$(free_port)"; api_port="$(free_port)"; moto_port="$(free_port)"
  make_pki
  admin_token="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  operator_token="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  reader_token="$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')"
  # The reader is who runs `karpenter-health check` in the tests: bound to read verbs only.
  printf '%s,admin,admin,"system:masters"\n%s,karpenter-health-operator,karpenter-health-operator\n%s,karpenter-health-reader,karpenter-health-reader\n' \
    "$admin_token" "$operator_token" "$reader_token" > "$dir/pki/tokens.csv"

  "$etcd_bin" --data-dir "$dir/etcd" --listen-client-urls "http://127.0.0.1:$etcd_port" \
    --advertise-client-urls "http://127.0.0.1:$etcd_port" --listen-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-advertise-peer-urls "http://127.0.0.1:$etcd_peer" \
    --initial-cluster "default=http://127.0.0.1:$etcd_peer" \
    > "$dir/logs/etcd.log" 2>&1 &
  echo $! > "$dir/pids/etcd.pid"
  wait_http "http://127.0.0.1:$etcd_port/health" etcd 30

  # Every request of the operator's and the reader's identities is audited, and Event writes of
  # anyone (nobody else's requests, to keep the log small): the RBAC test compares the shipped
  # Roles with the requests the operator really made, the check test proves `check` only reads,
  # the status writer's test counts the Events it publishes (this API server refuses Events
  # about cluster-scoped objects after auditing them, so the log is where they can be counted).
  cat > "$dir/audit-policy.yaml" <<'POLICY'
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived]
rules:
  - level: Metadata
    users: [karpenter-health-operator, karpenter-health-reader]
  - level: Metadata
    verbs: [create, patch, update]
    resources: [{group: "events.k8s.io", resources: [events]}, {group: "", resources: [events]}]
  - level: None
POLICY
  # Kept in a file so `restart-apiserver` can bring the same server back (outage tests).
  # Authorization Node,RBAC as on EKS: the Node authorizer is what admits a kubelet's identity
  # (system:node:<name> in system:nodes) to create its Node, and the node stand-in asks it.
  cat > "$dir/apiserver.args" <<ARGS
--audit-policy-file $dir/audit-policy.yaml --audit-log-path $dir/logs/audit.log --audit-log-format json --audit-log-mode blocking --etcd-servers http://127.0.0.1:$etcd_port --bind-address 127.0.0.1 --secure-port $api_port --advertise-address 127.0.0.1 --tls-cert-file $dir/pki/server.crt --tls-private-key-file $dir/pki/server.key --client-ca-file $dir/pki/ca.crt --token-auth-file $dir/pki/tokens.csv --authorization-mode Node,RBAC --service-account-issuer https://kubernetes.default.svc --service-account-key-file $dir/pki/sa.pub --service-account-signing-key-file $dir/pki/sa.key --service-cluster-ip-range 10.0.0.0/24 --cert-dir $dir/certs
ARGS
  echo "$apiserver" > "$dir/apiserver.bin"
  echo "$admin_token" > "$dir/pki/admin.token"
  start_apiserver

  write_kubeconfig "$dir/kubeconfig" admin "$admin_token"
  write_kubeconfig "$dir/operator.kubeconfig" karpenter-health-operator "$operator_token"
  write_kubeconfig "$dir/reader.kubeconfig" karpenter-health-reader "$reader_token"

  # The controllers the tests and Karpenter's behaviour rely on: namespaces and their default
  # ServiceAccount (no Pod is admitted without it), garbage collection of owned objects, the
  # disruption controller's PodDisruptionBudget status, workloads (Deployments to Pods) and the
  # removal of Pods whose Node is gone, and the aggregation of labelled ClusterRoles into view,
  # edit and admin (the chart's read-only role), and taint-based eviction: a Pod on a Node with a
  # NoExecute taint it does not tolerate is deleted, as on EKS (Karpenter's unregistered taint, an
  # agent's NoExecute taint; a controller of its own since Kubernetes 1.29,
  # kubernetes/kubernetes `pkg/controller/tainteviction`). Node lifecycle stays off: the bed's
  # Nodes have no kubelet, and their readiness is the node stand-in's to say.
  "$kcm" --kubeconfig "$dir/kubeconfig" \
    --controllers=garbagecollector,namespace,serviceaccount,serviceaccount-token,disruption,deployment,replicaset,statefulset,daemonset,job,podgc,clusterrole-aggregation,taint-eviction-controller \
    --leader-elect=false --service-account-private-key-file "$dir/pki/sa.key" \
    --root-ca-file "$dir/pki/ca.crt" --bind-address 127.0.0.1 --secure-port 0 \
    > "$dir/logs/kube-controller-manager.log" 2>&1 &
  echo $! > "$dir/pids/kube-controller-manager.pid"
  # Karpenter provisions only for Pods the scheduler marked Unschedulable
  # (kubernetes-sigs/karpenter pkg/utils/pod/scheduling.go, IsProvisionable). The node stand-in
  # brings a Node up in fewer updates than a kubelet does, and a lab Pod rejected while its Node
  # was still tainted was seen left unbound on the Ready, untainted Node until the scheduler's
  # periodic flush of unschedulable Pods (5 minutes after a Pod's last attempt by default, checked
  # every 30 s): here a Pod is flushed 15 s after its last attempt, so a launch never waits long on
  # which Node update the scheduler's queueing hints caught. The operators the tests start are told
  # (`e2e/src/fixture/mod.rs`, BED_SCHEDULER_RETRIES_WITHIN).
  "$scheduler" --kubeconfig "$dir/kubeconfig" --authentication-kubeconfig "$dir/kubeconfig" \
    --authorization-kubeconfig "$dir/kubeconfig" --leader-elect=false \
    --bind-address 127.0.0.1 --secure-port 0 --pod-max-in-unschedulable-pods-duration=15s \
    > "$dir/logs/kube-scheduler.log" 2>&1 &
  echo $! > "$dir/pids/kube-scheduler.pid"

  # moto's own server, with the corrections moto_server.py lists. Its port is chosen free just
  # before it binds; beds starting side by side (the lab) can still take it in between, and then
  # moto exits at once: another port is tried.
  local attempt
  for attempt in 1 2 3; do
    moto_port="$(free_port)"
    MOTO_IAM_LOAD_MANAGED_POLICIES=true "$cache_root/moto-venv/bin/python" "$here/moto_server.py" \
      -H 127.0.0.1 -p "$moto_port" > "$dir/logs/moto.log" 2>&1 &
    echo $! > "$dir/pids/moto.pid"
    for _ in $(seq 1 300); do
      curl -fsS -o /dev/null "http://127.0.0.1:$moto_port/moto-api/" 2>/dev/null && break 2
      kill -0 "$(cat "$dir/pids/moto.pid")" 2>/dev/null || break
      sleep 0.2
    done
    grep -q "in use" "$dir/logs/moto.log" || break
    log "moto's port $moto_port was taken before it bound (attempt $attempt); trying another"
  done
  wait_http "http://127.0.0.1:$moto_port/moto-api/" moto 5

  install_karpenter_crds
  # Every namespace needs its default ServiceAccount before Pods can be created.
  for _ in $(seq 1 100); do
    kubectl --kubeconfig "$dir/kubeconfig" -n default get serviceaccount default >/dev/null 2>&1 && break
    sleep 0.2
  done

  cat > "$dir/env" <<ENV
export KH_BED_DIR="$dir"
export KUBECONFIG="$dir/kubeconfig"
export KH_OPERATOR_KUBECONFIG="$dir/operator.kubeconfig"
export KH_MOTO_URL="http://127.0.0.1:$moto_port"
export KH_APISERVER_PORT="$api_port"
export KH_ETCD_PORT="$etcd_port"
export KH_APISERVER_BIN="$apiserver"
export KH_AUDIT_LOG="$dir/logs/audit.log"
export PATH="$kubectl_dir:\$PATH"
ENV
  bed_role > "$dir/role"
  trap - ERR
  log "up in $dir (apiserver :$api_port, etcd :$etcd_port, moto :$moto_port; $(bed_role))"
  log "versions: $("$apiserver" --version 2>&1 | head -1), etcd $("$etcd_bin" --version 2>&1 | head -1 | awk '{print $3}'), moto $("$cache_root/moto-venv/bin/python" -c 'import moto; print(moto.__version__)')"
}

case "$cmd" in
  up) up ;;
  down) stop_all; [ "${KH_BED_KEEP:-}" = 1 ] || rm -rf "$dir"; log "down" ;;
  aws-gap-proxy) start_aws_gap_proxy ;;
  karpenter) start_karpenter ;;
  stop-apiserver) stop_one kube-apiserver; log "kube-apiserver stopped" ;;
  start-apiserver) start_apiserver; log "kube-apiserver started" ;;
  restart-apiserver) stop_one kube-apiserver; start_apiserver; log "kube-apiserver restarted" ;;
  status)
    for f in "$dir"/pids/*.pid; do
      [ -f "$f" ] || continue
      n="$(basename "$f" .pid)"; p="$(cat "$f")"
      if kill -0 "$p" 2>/dev/null; then echo "$n running (pid $p)"; else echo "$n stopped"; fi
    done ;;
  *) echo "usage: $0 up|down|status|aws-gap-proxy|karpenter|stop-apiserver|start-apiserver|restart-apiserver [DIR]" >&2; exit 2 ;;
esac
