# The operator's IAM role beside the community EKS module's Karpenter submodule
# (terraform-aws-modules/eks/aws//modules/karpenter), through EKS Pod Identity, with the policy
# `karpenter-health iam-policy` prints (./policy) scoped to the submodule's controller role and
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

module "policy" {
  source                        = "./policy"
  partition                     = data.aws_partition.current.partition
  account_id                    = data.aws_caller_identity.current.account_id
  region                        = data.aws_region.current.name
  cluster_name                  = var.cluster_name
  karpenter_controller_role_arn = var.karpenter_controller_role_arn
  karpenter_queue_name          = var.karpenter_queue_name
}

resource "aws_iam_policy" "karpenter_health" {
  name   = "karpenter-health-${var.cluster_name}"
  policy = module.policy.json
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
