# The operator's IAM policy document for one cluster: the shipped template
# (deploy/iam-policy.json, what `karpenter-health iam-policy` prints) with its placeholders filled,
# IAM's simulator held to the Karpenter controller role and SQS to its interruption queue. No
# provider: deploy/terraform/test.sh applies it offline and compares it with the binary's output.

variable "partition" {
  type = string
}

variable "account_id" {
  type = string
}

variable "region" {
  type = string
}

variable "cluster_name" {
  type = string
}

variable "karpenter_controller_role_arn" {
  description = "The only role IAM's simulator may be asked about."
  type        = string
}

variable "karpenter_queue_name" {
  description = "Karpenter's interruption queue; null when it is named after the cluster."
  type        = string
  default     = null
}

locals {
  # The template's placeholders are envsubst's; templatefile would read $${...} as Terraform's
  # own interpolation, so they are replaced as plain strings.
  filled = replace(replace(replace(replace(file("${path.module}/../../iam-policy.json"),
    "$${AWS_PARTITION}", var.partition),
    "$${AWS_ACCOUNT_ID}", var.account_id),
    "$${AWS_REGION}", var.region),
  "$${CLUSTER_NAME}", var.cluster_name)
  statements = [
    for s in jsondecode(local.filled).Statement : merge(s, (
      s.Sid == "SimulateTheKarpenterControllerRoleOnly" ? { Resource = var.karpenter_controller_role_arn } :
      s.Sid == "ReadTheInterruptionQueue" && var.karpenter_queue_name != null ? {
        Resource = "arn:${var.partition}:sqs:${var.region}:${var.account_id}:${var.karpenter_queue_name}"
      } : {}
    ))
  ]
}

output "json" {
  description = "The policy document."
  value       = jsonencode(merge(jsondecode(local.filled), { Statement = local.statements }))
}
