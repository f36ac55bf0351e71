//! `karpenter-health check`: one evaluation of the cluster of the current kubeconfig against live
//! AWS, printed and turned into an exit code; writes nothing to the cluster. Does IO.

use crate::report::{self, ExitCode, Palette};
use anyhow::Context as _;
use karpenter_health_checks::acceptance::Accepted;
use karpenter_health_operator::EvaluationConfig;
use karpenter_health_operator::one_shot::{self, CannotRun};
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::io::{IsTerminal as _, Write};
use std::path::PathBuf;

/// Output formats of `check`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// A table per EC2NodeClass (colour on a terminal unless NO_COLOR is set).
    Table,
    /// A KarpenterHealthList, the shape of `kubectl get karpenterhealth -o json`.
    Json,
    /// The same list as YAML.
    Yaml,
    /// Markdown, for an incident ticket.
    Markdown,
}

/// Flags of `check`.
#[derive(Clone, Debug, clap::Args)]
#[command(
    after_help = "Exit codes: 0 every EC2NodeClass Ready; 1 some condition False; \
    2 nothing False but something Unknown; 3 could not run (no cluster, no AWS credentials or \
    region, no such EC2NodeClass)."
)]
pub struct CheckArgs {
    /// The kubeconfig file; defaults to KUBECONFIG, then ~/.kube/config, then the in-cluster
    /// service account.
    #[arg(long, env = "KUBECONFIG", value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use instead of the current one.
    #[arg(long)]
    pub context: Option<String>,

    /// Check only this EC2NodeClass (repeat the flag for several).
    #[arg(long = "node-class", value_name = "NAME")]
    pub node_classes: Vec<String>,

    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Output::Table)]
    pub output: Output,

    /// Accept this finding for this run, on every class checked (a reason of a False
    /// condition, or a warning; repeat the flag for several): it is listed as accepted and does
    /// not count against the exit code.
    #[arg(long = "accept", value_name = "REASON", value_parser = accepted)]
    pub accept: Vec<Accepted>,

    #[command(flatten)]
    pub evaluation: EvaluationConfig,
}

fn accepted(name: &str) -> Result<Accepted, String> {
    Accepted::named(name)
}

/// A Kubernetes client from the flags: the named kubeconfig (KUBECONFIG may list several files,
/// as kubectl merges them), else the usual inference.
async fn client(args: &CheckArgs) -> anyhow::Result<kube::Client> {
    let options = KubeConfigOptions {
        context: args.context.clone(),
        ..KubeConfigOptions::default()
    };
    let config = match &args.kubeconfig {
        Some(paths) => {
            let mut merged: Option<Kubeconfig> = None;
            for path in std::env::split_paths(paths) {
                let file = Kubeconfig::read_from(&path)
                    .with_context(|| format!("reading kubeconfig {}", path.display()))?;
                merged = Some(match merged {
                    Some(m) => m.merge(file)?,
                    None => file,
                });
            }
            let kubeconfig = merged.context("--kubeconfig names no file")?;
            kube::Config::from_custom_kubeconfig(kubeconfig, &options).await?
        }
        None if args.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    Ok(kube::Client::try_from(config)?)
}

/// Runs `check` and returns its exit code; what it found goes to `stdout`, progress and the
/// reason it could not run to stderr.
pub async fn run(args: &CheckArgs, stdout: &mut impl Write) -> anyhow::Result<ExitCode> {
    let show_progress = std::io::stderr().is_terminal();
    let progress = move |what: &str| {
        if show_progress {
            eprintln!("… {what}");
        }
    };
    let outcome = async {
        let client = client(args)
            .await
            .context("connecting to Kubernetes")
            .map_err(|e| format!("{e:#}"))?;
        let aws = one_shot::aws_from_environment(args.evaluation.region.clone())
            .await
            .map_err(|e: CannotRun| e.to_string())?;
        let evaluation = EvaluationConfig {
            one_shot_acceptances: args.accept.clone(),
            ..args.evaluation.clone()
        };
        one_shot::evaluate_once(&client, &aws, &evaluation, &args.node_classes, &progress)
            .await
            .map_err(|e| e.to_string())
    }
    .await;
    let reports = match outcome {
        Ok(reports) => reports,
        Err(why) => {
            eprintln!("karpenter-health check could not run: {why}");
            return Ok(ExitCode::CouldNotRun);
        }
    };
    let text = match args.output {
        Output::Table => {
            let colour = std::io::stdout().is_terminal()
                && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            report::table(&reports, Palette { colour })
        }
        Output::Json => serde_json::to_string_pretty(&report::as_list(&reports))? + "\n",
        Output::Yaml => serde_yaml::to_string(&report::as_list(&reports))?,
        Output::Markdown => report::markdown(&reports),
    };
    stdout.write_all(text.as_bytes())?;
    stdout.flush()?;
    Ok(report::exit_code(&reports))
}
