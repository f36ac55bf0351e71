//! IO adapter for AWS: reads IAM, EC2, EKS and STS facts for the checks. Does IO.
#![forbid(unsafe_code)]
