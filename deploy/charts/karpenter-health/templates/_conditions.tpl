{{/* Generated from crates/api/src/vocabulary/table/ by `make generate`; do not edit.
Every sub-condition, in the table's order: `_rules.tpl` gives each an alert on False. */}}
{{- define "karpenter-health.conditionTypes" -}}
InstanceProfileReady NodeRoleReady NodeRoleMapped SecurityGroupsReady ClusterIdentityUnique MetadataOptionsSupported LabelsAllowed KarpenterStatusConsistent NodeClaimsRegistered ControllerCanLaunch InterruptionHandlingReady SpotReady SubnetsReady NodeNetworkReady VolumeEncryptionReady KarpenterVersionCompatible InstanceTypesAvailable LimitsLeaveRoom DriftCanBeReplaced AmisResolvable CapacityReservationsUsable NodesFitWorkloads
{{- end -}}
