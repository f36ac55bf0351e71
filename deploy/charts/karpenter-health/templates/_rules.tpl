{{/*
The alerting rules, shared by the PrometheusRule and the chart tests (which render them into a
plain rules file for promtool). Conditions have positive polarity: False means a check ran and
proved a problem, Unknown that a check could not run (conditions.md rules 5 and 16), so each
sub-condition's False gets an alert of its own and Unknown one alert of its own kind. Ready=False
is not alerted: it only repeats its False sub-conditions.

The series of a condition's current status carries its reason
(karpenter_health_condition{node_class,type,status,reason}), so every alert keeps the reason as a
label and its runbook resolves to that reason's section of docs/checks.md (anchors are the reason
in lower case). Only the replica holding the Lease exports conditions that are current, so each expression keeps
the series of the leader (karpenter_health_leader == 1) and drops the per-replica labels, so a
fail-over does not restart the alert's `for`.

KarpenterHealthStale reads the object itself, through kube-state-metrics' custom resource state
(files/kube-state-metrics.yaml): it fires for a class whose checks stopped running, whether the
operator is stuck, stopped or removed, where the operator's own series are simply absent.

A central ruler (Thanos, Mimir, a Prometheus federating many clusters) sees every cluster's series
at once, told apart by an external label (prometheusRule.clusterLabel). Then the leader join also
matches on that label (two clusters' replicas may share a Pod IP), and KarpenterHealthNoLeader is
per cluster: absent() sees one leader anywhere as enough, so instead it fires for a cluster that
exported karpenter_health_leader within prometheusRule.clusterLookback and has no leader now.

The sub-conditions alerted on (karpenter-health.conditionTypes) are generated from the vocabulary
table (crates/api/src/vocabulary.rs) into _conditions.tpl by `make generate`.
*/}}

{{- define "karpenter-health.alert" -}}
{{- $root := index . 0 -}}
{{- $name := index . 1 -}}
{{- $defaults := index . 2 -}}
{{- $override := index $root.Values.prometheusRule.alerts $name | default dict -}}
{{- if not $override.disabled -}}
- alert: {{ $name }}
  expr: {{ index . 3 }}
  for: {{ $override.for | default $defaults.for }}
  labels:
    severity: {{ $override.severity | default $defaults.severity }}
    {{- with $root.Values.prometheusRule.extraAlertLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    summary: {{ index . 4 | quote }}
    description: {{ index . 5 | quote }}
    runbook_url: {{ index . 6 | quote }}
{{- end }}
{{- end -}}

{{- define "karpenter-health.ruleGroups" -}}
{{- $p := .Values.prometheusRule -}}
{{- $tree := printf "https://github.com/karpenter-health/karpenter-health/blob/v%s" .Chart.AppVersion -}}
{{- $docs := trimSuffix "/" (default (printf "%s/docs/checks.md" $tree) $p.docsBaseURL) -}}
{{- $operatorRunbook := default (printf "%s/deploy/charts/karpenter-health/README.md#karpenterhealthnoleader" $tree) $p.operatorRunbookURL -}}
{{- $cluster := $p.clusterLabel -}}
{{- $leader := ternary (printf "and on (%s, instance) (karpenter_health_leader == 1)" $cluster) "and on (instance) (karpenter_health_leader == 1)" (ne $cluster "") -}}
{{- $noLeader := "absent(karpenter_health_leader == 1)" -}}
{{- if $cluster }}
{{- $noLeader = printf "group by (%s) (last_over_time(karpenter_health_leader[%s])) unless on (%s) group by (%s) (karpenter_health_leader == 1)" $cluster $p.clusterLookback $cluster $cluster -}}
{{- end -}}
groups:
  - name: karpenter-health
    rules:
      {{- range (include "karpenter-health.conditionTypes" . | splitList " ") }}
      {{- $expr := printf "max without (instance, pod) ((karpenter_health_condition{type=%q,status=\"False\"} == 1) %s)" . $leader }}
      {{- $summary := printf "EC2NodeClass {{ $labels.node_class }}: %s is False" . }}
      {{- $description := printf "A check of %s ran and found a problem for EC2NodeClass {{ $labels.node_class }}. `kubectl describe karpenterhealth {{ $labels.node_class }}` names the reason and the fix." . }}
      {{- $runbook := printf "%s#{{ $labels.reason | toLower }}" $docs }}
      {{- with include "karpenter-health.alert" (list $ (printf "KarpenterHealth%sFalse" .) $p.conditionFalse $expr $summary $description $runbook) }}{{ . | nindent 6 }}{{ end }}
      {{- end }}
      {{- $expr := printf "max without (instance, pod) ((karpenter_health_condition{type!=\"Ready\",status=\"Unknown\"} == 1) %s)" $leader }}
      {{- $summary := "EC2NodeClass {{ $labels.node_class }}: {{ $labels.type }} could not be checked" }}
      {{- $description := "The check of {{ $labels.type }} for EC2NodeClass {{ $labels.node_class }} could not run (AWS access denied or throttled, AWS unreachable, or a fact not observed yet). `kubectl describe karpenterhealth {{ $labels.node_class }}` names the reason." }}
      {{- $runbook := printf "%s#{{ $labels.reason | toLower }}" $docs }}
      {{- with include "karpenter-health.alert" (list $ "KarpenterHealthConditionUnknown" $p.conditionUnknown $expr $summary $description $runbook) }}{{ . | nindent 6 }}{{ end }}
      {{- $summary := "No karpenter-health replica is reconciling" }}
      {{- $description := "No scraped karpenter-health replica holds the leader-election Lease (or none is scraped at all), so KarpenterHealth conditions are not kept current." }}
      {{- if $cluster }}
      {{- $summary = printf "No karpenter-health replica is reconciling in cluster {{ $labels.%s }}" $cluster }}
      {{- $description = printf "No scraped karpenter-health replica of cluster {{ $labels.%s }} holds the leader-election Lease (its replicas exported karpenter_health_leader within %s and none leads now), so its KarpenterHealth conditions are not kept current. After %s without any series, KarpenterHealthStale still fires for its classes." $cluster $p.clusterLookback $p.clusterLookback }}
      {{- end }}
      {{- with include "karpenter-health.alert" (list $ "KarpenterHealthNoLeader" $p.noLeader $noLeader $summary $description $operatorRunbook) }}{{ . | nindent 6 }}{{ end }}
      {{- $expr := printf "time() - max without (instance, pod, job) (kube_karpenterhealth_status_last_evaluated) > %v" (int $p.staleAfterSeconds) }}
      {{- $summary := "KarpenterHealth {{ $labels.name }}'s verdict is stale" }}
      {{- $description := printf "The checks of EC2NodeClass {{ $labels.node_class }} last ran {{ $value | humanizeDuration }} ago (more than %ds): its conditions are not current. Is karpenter-health running (KarpenterHealthNoLeader), or was it removed?" (int $p.staleAfterSeconds) }}
      {{- $staleRunbook := default (printf "%s/deploy/charts/karpenter-health/README.md#karpenterhealthstale" $tree) $p.operatorRunbookURL }}
      {{- with include "karpenter-health.alert" (list $ "KarpenterHealthStale" $p.stale $expr $summary $description $staleRunbook) }}{{ . | nindent 6 }}{{ end }}
{{- end -}}
