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
    Run(karpenter_health_operator::OperatorConfig),
    /// Print the KarpenterHealth CRD as YAML.
    Crd,
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
        Command::Run(config) => {
            let shutdown = karpenter_health_operator::controller::shutdown_signal();
            init_logging(cli.log_format);
            let client = kube::Client::try_default()
                .await
                .context("connecting to Kubernetes")?;
            karpenter_health_operator::run(client, config, shutdown).await
        }
    }
}
