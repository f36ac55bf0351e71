module karpenter-health.io/oracle

go 1.26.6
