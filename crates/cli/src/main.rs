//! The karpenter-health command line: `run` the operator, print its `crd`. Does IO.
#![forbid(unsafe_code)]

use anyhow::Context as _;
use clap::{Parser, Subcommand, ValueEnum};
use karpenter_health_api::KarpenterHealth;
use kube::CustomResourceExt;

/// Diagnoses Karpenter's AWS setup and publishes one KarpenterHealth per EC2NodeClass.
#[derive(Debug, Parser)]
#[command(name = "karpenter-health", version, about)]
struct Cli {
    /// Log format.
    #[arg(long, env = "KH_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text, global = true)]
    log_format: LogFormat,
    #[command(subcommand)]
    command: Command,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the operator in the cluster of the current kubeconfig or service account.
    Run(Box<karpenter_health_operator::OperatorConfig>),
    /// Print the KarpenterHealth CRD as YAML.
    Crd,
    /// Lint manifests offline (no cluster, no AWS): exit 1 on findings at or above --fail-on.
    Lint(karpenter_health_lint::LintArgs),
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", serde_yaml::to_string(&KarpenterHealth::crd())?);
            Ok(())
        }
        Command::Lint(args) => {
            let code = karpenter_health_lint::run(&args, &mut std::io::stdout().lock())?;
            std::process::exit(code)
        }
        Command::Run(config) => {
            let shutdown = karpenter_health_operator::shutdown_signal();
            init_logging(cli.log_format);
            let client = kube::Client::try_default()
                .await
                .context("connecting to Kubernetes")?;
            karpenter_health_operator::run(client, *config, shutdown).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn every_flag_is_well_formed() {
        Cli::command().debug_assert();
    }

    #[test]
    fn the_readme_documents_every_flag_of_run() {
        let readme = include_str!("../../../README.md");
        let command = Cli::command();
        let run = command.find_subcommand("run").expect("run subcommand");
        let flags: Vec<String> = run
            .get_arguments()
            .chain(command.get_arguments())
            .filter_map(|arg| arg.get_long())
            .filter(|long| *long != "help")
            .map(|long| format!("`--{long}`"))
            .collect();
        assert!(flags.len() > 10, "{flags:?}");
        for flag in flags {
            assert!(readme.contains(&flag), "README.md does not document {flag}");
        }
    }

    #[test]
    fn run_parses_its_flags_and_defaults() {
        let cli =
            Cli::try_parse_from(["karpenter-health", "run", "--http-address", "off"]).unwrap();
        let Command::Run(config) = cli.command else {
            panic!("not run")
        };
        assert_eq!(config.http_address.0, None);
        assert_eq!(config.refresh_interval, std::time::Duration::from_secs(300));
        assert_eq!(config.karpenter_namespace, "kube-system");
    }
}
