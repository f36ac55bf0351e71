//! `karpenter-health iam-policy`: prints the operator's IAM policy scoped to one cluster (or, with
//! `--pod-identity`, to whichever cluster each Pod Identity session names). Pure but for the print.

use karpenter_health_aws::policy::{
    Credentials, DEFAULT_CONTROLLER_ROLE, PolicyScope, operator_policy, partition_of, render,
};

/// Print the operator's IAM policy, every action scoped as far as it allows.
#[derive(Debug, clap::Args)]
pub struct IamPolicyArgs {
    /// The EKS cluster's name (not needed with --pod-identity, whose session tag names it).
    #[arg(long, required_unless_present = "pod_identity")]
    cluster_name: Option<String>,
    /// The AWS account the cluster, its roles and its queue are in.
    #[arg(long, value_parser = account_id)]
    account_id: String,
    /// The cluster's region; `*` lets one Pod Identity role serve every region.
    #[arg(long)]
    region: String,
    /// The partition (default: the region's: aws, aws-cn, aws-us-gov, ...).
    #[arg(long)]
    partition: Option<String>,
    /// One role for many clusters through EKS Pod Identity: resources name the cluster by the
    /// `eks-cluster-name` session tag (the role's trust policy must allow sts:TagSession).
    #[arg(long)]
    pod_identity: bool,
    /// The Karpenter controller role, the only one IAM's simulator is asked about: a name,
    /// path/name, a pattern with `*`, or an ARN.
    #[arg(long, default_value = DEFAULT_CONTROLLER_ROLE)]
    controller_role: String,
    /// Karpenter's interruption queue (settings.interruptionQueue), if not named after the
    /// cluster.
    #[arg(long)]
    interruption_queue: Option<String>,
}

/// A 12-digit account id, or a placeholder (`${...}`) for a template.
fn account_id(value: &str) -> Result<String, String> {
    let digits = value.len() == 12 && value.bytes().all(|b| b.is_ascii_digit());
    if digits || (value.starts_with("${") && value.ends_with('}')) {
        Ok(value.to_owned())
    } else {
        Err(format!("{value:?} is not a 12-digit AWS account id"))
    }
}

impl IamPolicyArgs {
    fn scope(&self) -> PolicyScope {
        PolicyScope {
            partition: self
                .partition
                .clone()
                .unwrap_or_else(|| partition_of(&self.region).to_owned()),
            account: self.account_id.clone(),
            region: self.region.clone(),
            cluster_name: self.cluster_name.clone().unwrap_or_default(),
            controller_role: self.controller_role.clone(),
            interruption_queue: self.interruption_queue.clone(),
            credentials: if self.pod_identity {
                Credentials::PodIdentity
            } else {
                Credentials::Irsa
            },
        }
    }
}

/// The policy document `args` asks for, as printed.
pub fn policy_text(args: &IamPolicyArgs) -> String {
    render(&operator_policy(&args.scope()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Wrapper {
        #[command(flatten)]
        args: IamPolicyArgs,
    }

    fn parse(args: &[&str]) -> Result<IamPolicyArgs, clap::Error> {
        Wrapper::try_parse_from(std::iter::once("iam-policy").chain(args.iter().copied()))
            .map(|w| w.args)
    }

    #[test]
    fn a_cluster_policy_names_the_cluster_in_the_regions_partition() {
        let args = parse(&[
            "--cluster-name",
            "prod",
            "--account-id",
            "111122223333",
            "--region",
            "cn-north-1",
        ])
        .unwrap();
        let text = policy_text(&args);
        assert!(
            text.contains("arn:aws-cn:eks:cn-north-1:111122223333:cluster/prod"),
            "{text}"
        );
        assert!(!text.contains("PrincipalTag"), "{text}");
    }

    #[test]
    fn pod_identity_needs_no_cluster_name() {
        let args = parse(&[
            "--pod-identity",
            "--account-id",
            "111122223333",
            "--region",
            "*",
        ])
        .unwrap();
        let text = policy_text(&args);
        assert!(
            text.contains(
                "arn:aws:eks:*:111122223333:cluster/${aws:PrincipalTag/eks-cluster-name}"
            ),
            "{text}"
        );
    }

    #[test]
    fn bad_input_is_refused_with_its_name() {
        let no_cluster = parse(&["--account-id", "111122223333", "--region", "us-east-1"]);
        assert!(
            no_cluster
                .unwrap_err()
                .to_string()
                .contains("--cluster-name")
        );
        let bad_account = parse(&[
            "--cluster-name",
            "prod",
            "--account-id",
            "1111",
            "--region",
            "us-east-1",
        ]);
        assert!(bad_account.unwrap_err().to_string().contains("12-digit"));
    }
}
