{{/* The chart name. */}}
{{- define "karpenter-health.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* The full name of every object: the release name when it holds the chart name. */}}
{{- define "karpenter-health.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "karpenter-health.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "karpenter-health.selectorLabels" -}}
app.kubernetes.io/name: {{ include "karpenter-health.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "karpenter-health.labels" -}}
helm.sh/chart: {{ include "karpenter-health.chart" . }}
{{ include "karpenter-health.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "karpenter-health.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "karpenter-health.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/*
image@digest when a digest is set, else image:tag (tag defaulting to appVersion). The repository
has no default: no public registry publishes the image, and a default that cannot be pulled would
only show up later as Pods in ImagePullBackOff.
*/}}
{{- define "karpenter-health.image" -}}
{{- $repository := required "image.repository is required: pass --set image.repository=<registry>/karpenter-health, where you pushed the image make image builds (no public registry publishes it)" .Values.image.repository -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" $repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" $repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{/*
What RBAC must know of the settings: the binary's defaults when unset (config.rs). These are the
only defaults the chart repeats, because resourceNames and the Role's namespace need them.
*/}}
{{- define "karpenter-health.karpenterNamespace" -}}
{{- default "kube-system" .Values.settings.karpenterNamespace -}}
{{- end -}}
{{- define "karpenter-health.karpenterDeployment" -}}
{{- default "karpenter" .Values.settings.karpenterDeployment -}}
{{- end -}}
{{- define "karpenter-health.karpenterServiceAccount" -}}
{{- default "karpenter" .Values.settings.karpenterServiceAccount -}}
{{- end -}}
{{- define "karpenter-health.leaseName" -}}
{{- default "karpenter-health" .Values.settings.leaseName -}}
{{- end -}}

{{/* "true" when leader election is on: settings.leaderElect, else on with more than one replica. */}}
{{- define "karpenter-health.leaderElect" -}}
{{- if kindIs "bool" .Values.settings.leaderElect -}}
{{- .Values.settings.leaderElect -}}
{{- else -}}
{{- gt (int .Values.replicas) 1 -}}
{{- end -}}
{{- end -}}

{{/* The PodDisruptionBudget API of this cluster. */}}
{{- define "karpenter-health.pdbApiVersion" -}}
{{- if .Capabilities.APIVersions.Has "policy/v1" -}}
policy/v1
{{- else -}}
policy/v1beta1
{{- end -}}
{{- end -}}

{{/* The Prometheus Operator's API is served: ServiceMonitor and PrometheusRule can be applied. */}}
{{- define "karpenter-health.hasPrometheusOperator" -}}
{{- if .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" -}}true{{- end -}}
{{- end -}}
