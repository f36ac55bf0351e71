#!/usr/bin/env bash
# Measures what the e2e tests' AWS timeouts are derived from: runs chosen e2e tests N times
# (e2e/repeat.sh) with every gap proxy logging each operation's slowest answer, then prints per
# operation the number of proxies that saw it, the median and the worst of their slowest answers.
#
#   e2e/measure-aws-latency.sh N TEST...      e.g. e2e/measure-aws-latency.sh 5 aws
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
log="$(mktemp "${TMPDIR:-/tmp}/kh-aws-latency.XXXXXX")"
KH_AWS_LATENCY_LOG="$log" bash "$here/repeat.sh" "$@"
python3 - "$log" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    service, operation, ms = line.split()
    by.setdefault((service, operation), []).append(int(ms))
print(f"{'operation':<48} {'proxies':>7} {'median ms':>9} {'worst ms':>8}")
for (service, operation), values in sorted(by.items(), key=lambda kv: -max(kv[1])):
    print(f"{service + ' ' + operation:<48} {len(values):>7} {statistics.median(values):>9.0f} {max(values):>8}")
PY
rm -f "$log"
