# The operator's IAM role beside the community EKS module's Karpenter submodule
# (terraform-aws-modules/eks/aws//modules/karpenter), through EKS Pod Identity: the policy is the
# one `karpenter-health iam-policy` prints, read from the shipped template with the cluster's
# account, region and partition filled in, and scoped to the submodule's controller role and
# interruption queue. One role per cluster here; for one role across clusters, use
# iam-policy-pod-identity.json, whose resources name the cluster by the eks-cluster-name session
# tag, and associate the same role in each cluster.

variable "cluster_name" {
  description = "The EKS cluster karpenter-health watches."
  type        = string
}

variable "karpenter_controller_role_arn" {
  description = "The Karpenter controller role: module.karpenter.iam_role_arn."
  type        = string
}

variable "karpenter_queue_name" {
  description = "Karpenter's interruption queue: module.karpenter.queue_name."
  type        = string
}

variable "namespace" {
  description = "Where the chart installs karpenter-health."
  type        = string
  default     = "kube-system"
}

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}
data "aws_region" "current" {}

locals {
  # The template's placeholders are envsubst's; Terraform's templatefile would read ${...} as its
  # own interpolation, so they are replaced as plain strings.
  template = file("${path.module}/../iam-policy.json")
  policy = replace(replace(replace(replace(replace(replace(local.template,
    "$${AWS_PARTITION}", data.aws_partition.current.partition),
    "$${AWS_ACCOUNT_ID}", data.aws_caller_identity.current.account_id),
    "$${AWS_REGION}", data.aws_region.current.name),
    "$${CLUSTER_NAME}", var.cluster_name),
    # The submodule names its controller role with a prefix of its own: name it exactly.
    "arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:role/KarpenterController*",
    var.karpenter_controller_role_arn),
    # The submodule's queue is named after the cluster unless set otherwise.
    ":sqs:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:${var.cluster_name}\"",
    ":sqs:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:${var.karpenter_queue_name}\"")
}

resource "aws_iam_policy" "karpenter_health" {
  name   = "karpenter-health-${var.cluster_name}"
  policy = local.policy
}

resource "aws_iam_role" "karpenter_health" {
  name = "karpenter-health-${var.cluster_name}"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "pods.eks.amazonaws.com" }
      Action    = ["sts:AssumeRole", "sts:TagSession"]
    }]
  })
}

resource "aws_iam_role_policy_attachment" "karpenter_health" {
  role       = aws_iam_role.karpenter_health.name
  policy_arn = aws_iam_policy.karpenter_health.arn
}

resource "aws_eks_pod_identity_association" "karpenter_health" {
  cluster_name    = var.cluster_name
  namespace       = var.namespace
  service_account = "karpenter-health"
  role_arn        = aws_iam_role.karpenter_health.arn
}

output "role_arn" {
  value = aws_iam_role.karpenter_health.arn
}
