#!/usr/bin/env python3
"""Serves /metrics, /livez and /readyz the way `karpenter-health run` does (crates/operator/src/
metrics.rs and http.rs: prometheus-client's OpenMetrics text, the same names, HELP texts, types
and labels), for the chart's alerting test where the Rust operator is not built. Not the
operator: its conditions come from a state file, re-read on every scrape, one line per condition
that is not True:

    <node_class> <ConditionType> <True|False|Unknown>

Every node class named in the file reports all ten condition types (True unless listed), Ready
folded from the others as the operator does (False if any False, else Unknown if any Unknown).

    metrics-mimic.py --state FILE --port-file FILE [--port N]
"""
import argparse
import http.server
import os

TYPES = [
    "InstanceProfileReady", "NodeRoleReady", "NodeRoleMapped", "SecurityGroupsReady",
    "ClusterIdentityUnique", "MetadataOptionsSupported", "LabelsAllowed",
    "KarpenterStatusConsistent", "NodeClaimsRegistered", "Ready",
]
STATUSES = ["True", "False", "Unknown"]
BUCKETS = [0.01, 0.025, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0]


def read_state(path):
    classes = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                parts = line.split()
                if len(parts) == 3 and parts[1] in TYPES[:-1] and parts[2] in STATUSES:
                    classes.setdefault(parts[0], {})[parts[1]] = parts[2]
                elif len(parts) == 1:
                    classes.setdefault(parts[0], {})
    return classes


def ready_of(conditions):
    subs = [conditions.get(t, "True") for t in TYPES[:-1]]
    if "False" in subs:
        return "False"
    if "Unknown" in subs:
        return "Unknown"
    return "True"


def histogram(name, help_text):
    out = [f"# HELP {name} {help_text}.", f"# TYPE {name} histogram",
           f"{name}_sum 0.0", f"{name}_count 0"]
    out += [f'{name}_bucket{{le="{b}"}} 0' for b in BUCKETS]
    out.append(f'{name}_bucket{{le="+Inf"}} 0')
    return out


def exposition(state_path):
    classes = read_state(state_path)
    lines = ["# HELP karpenter_health_condition 1 for the status a KarpenterHealth condition has, 0 for the others.",
             "# TYPE karpenter_health_condition gauge"]
    for node_class, conditions in sorted(classes.items()):
        current = dict(conditions)
        current["Ready"] = ready_of(conditions)
        for t in TYPES:
            status = current.get(t, "True")
            for candidate in STATUSES:
                value = 1 if candidate == status else 0
                lines.append(f'karpenter_health_condition{{node_class="{node_class}",type="{t}",status="{candidate}"}} {value}')
    lines += ["# HELP karpenter_health_findings Findings by EC2NodeClass, check and severity.",
              "# TYPE karpenter_health_findings gauge"]
    lines += histogram("karpenter_health_reconcile_duration_seconds",
                       "Time of one reconcile: gather, evaluate, render, patch")
    lines += ["# HELP karpenter_health_reconcile_errors Reconciles that could not observe or write, by error.",
              "# TYPE karpenter_health_reconcile_errors counter",
              "# HELP karpenter_health_status_patches Status writes (only on change).",
              "# TYPE karpenter_health_status_patches counter",
              "karpenter_health_status_patches_total 0"]
    lines += histogram("karpenter_health_change_to_status_seconds",
                       "From a watched Kubernetes change arriving to the changed status being written")
    lines += ["# HELP karpenter_health_aws_calls AWS API calls by service, operation and outcome.",
              "# TYPE karpenter_health_aws_calls counter",
              "# HELP karpenter_health_leader 1 while this replica reconciles (holds the Lease, or runs without leader election).",
              "# TYPE karpenter_health_leader gauge",
              "karpenter_health_leader 1",
              "# EOF"]
    return "\n".join(lines) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--state", required=True)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--port-file", required=True)
    args = parser.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            if self.path == "/metrics":
                body = exposition(args.state).encode()
                ctype = "application/openmetrics-text; version=1.0.0; charset=utf-8"
            elif self.path in ("/livez", "/readyz"):
                body, ctype = b"ok", "text/plain; charset=utf-8"
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("content-type", ctype)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *_):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    with open(args.port_file + ".tmp", "w") as f:
        f.write(str(server.server_address[1]))
    os.replace(args.port_file + ".tmp", args.port_file)
    server.serve_forever()


if __name__ == "__main__":
    main()
