//! The karpenter-health command line: `run` the operator, `check` a cluster once, print the
//! `crd` and the `iam-policy`; installed as `kubectl-karpenter_health` it is a kubectl plugin. Does IO.
#![forbid(unsafe_code)]
// A function over 80 lines (clippy.toml) is cut along what its parts decide; tests are exempt.
#![warn(clippy::too_many_lines)]

mod check;
mod iam_policy;
mod report;

use anyhow::Context as _;
use clap::{CommandFactory as _, FromArgMatches as _, Parser, Subcommand, ValueEnum};

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
    /// Check every EC2NodeClass once, now, against live IAM, EC2 and EKS; print the result and
    /// exit. Writes nothing to the cluster and needs only read access.
    Check(Box<check::CheckArgs>),
    /// Print the KarpenterHealth CRD as YAML.
    Crd,
    /// Print the IAM policy the operator's role needs, scoped to one cluster (or, with
    /// --pod-identity, to the cluster each Pod Identity session names).
    IamPolicy(iam_policy::IamPolicyArgs),
    /// Lint manifests offline (no cluster, no AWS): exit 1 on findings at or above --fail-on.
    Lint(karpenter_health_lint::LintArgs),
}

/// Logs to stderr; RUST_LOG overrides `default_filter`.
fn init_logging(format: LogFormat, default_filter: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

/// The name the binary is invoked as decides how usage reads: as the kubectl plugin
/// `kubectl-karpenter_health`, kubectl runs it for `kubectl karpenter-health`, so that is what
/// the help text says (kubectl's plugin convention: `_` in the file name is `-` in the command).
fn display_name(argv0: Option<&std::ffi::OsStr>) -> &'static str {
    let file_name = argv0
        .map(std::path::Path::new)
        .and_then(std::path::Path::file_name)
        .and_then(std::ffi::OsStr::to_str)
        .unwrap_or_default();
    if file_name.starts_with("kubectl-") {
        "kubectl karpenter-health"
    } else {
        "karpenter-health"
    }
}

fn parse_cli(args: Vec<std::ffi::OsString>) -> Result<Cli, clap::Error> {
    let name = display_name(args.first().map(std::ffi::OsString::as_os_str));
    let matches = Cli::command()
        .name(name)
        .bin_name(name)
        .try_get_matches_from(args)?;
    Cli::from_arg_matches(&matches)
}

fn main() -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let result = runtime.block_on(run_command());
    // Dropping a runtime waits for its blocking threads without limit; a request abandoned at the
    // shutdown bound may still hold one (a DNS lookup), and must not hold the exit.
    runtime.shutdown_timeout(std::time::Duration::from_millis(100));
    result
}

async fn run_command() -> anyhow::Result<()> {
    let cli = parse_cli(std::env::args_os().collect()).unwrap_or_else(|e| e.exit());
    match cli.command {
        Command::Crd => {
            print!(
                "{}",
                serde_yaml::to_string(&karpenter_health_api::custom_resource_definition())?
            );
            Ok(())
        }
        Command::IamPolicy(args) => {
            print!("{}", iam_policy::policy_text(&args));
            Ok(())
        }
        Command::Check(args) => {
            // One-shot: only warnings and errors, so stderr holds the progress and the verdict.
            init_logging(cli.log_format, "warn,kube=error");
            let code = check::run(&args, &mut std::io::stdout().lock()).await?;
            std::process::exit(code as i32)
        }
        Command::Lint(args) => {
            // Findings exit 1; a run that could not read its input exits 2, so CI tells a broken
            // manifest from a broken pipeline.
            match karpenter_health_lint::run(&args, &mut std::io::stdout().lock()) {
                Ok(code) => std::process::exit(code),
                Err(error) => {
                    eprintln!("karpenter-health lint could not run: {error:#}");
                    std::process::exit(2)
                }
            }
        }
        Command::Run(config) => {
            use karpenter_health_operator::shutdown::{SHUTDOWN_BOUND, unless_stopped};
            let shutdown = karpenter_health_operator::leader::shared(
                karpenter_health_operator::shutdown_signal(),
            );
            init_logging(cli.log_format, "info,kube=warn");
            let client = kube::Client::try_default()
                .await
                .context("connecting to Kubernetes")?;
            let operator = karpenter_health_operator::run(client, *config, shutdown.clone());
            // Each step of the way out is bounded on its own; this is the backstop for whatever
            // is not (a call that does not answer), so a replica never outlives its bound.
            unless_stopped(operator, shutdown, SHUTDOWN_BOUND)
                .await
                .unwrap_or_else(|| {
                    tracing::warn!(bound = ?SHUTDOWN_BOUND, "still shutting down at the bound; exiting");
                    Ok(())
                })
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
    fn the_readme_documents_every_flag_of_every_command() {
        let readme = include_str!("../../../README.md");
        let command = Cli::command();
        for sub in command.get_subcommands() {
            let flags: Vec<String> = sub
                .get_arguments()
                .chain(command.get_arguments())
                .filter_map(|arg| arg.get_long())
                .filter(|long| *long != "help")
                .map(|long| format!("`--{long}`"))
                .collect();
            for flag in flags {
                assert!(
                    readme.contains(&flag),
                    "README.md does not document {flag} of {}",
                    sub.get_name()
                );
            }
        }
    }

    fn help_of(argv0: &str, args: &[&str]) -> String {
        let argv = std::iter::once(argv0)
            .chain(args.iter().copied())
            .map(std::ffi::OsString::from)
            .collect();
        match parse_cli(argv) {
            Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => e.to_string(),
            other => panic!("expected help, got {other:?}"),
        }
    }

    #[test]
    fn as_a_kubectl_plugin_the_usage_reads_kubectl_karpenter_health() {
        let plugin = help_of(
            "/usr/local/bin/kubectl-karpenter_health",
            &["check", "--help"],
        );
        assert!(
            plugin.contains("Usage: kubectl karpenter-health check [OPTIONS]"),
            "{plugin}"
        );
        let plain = help_of("target/release/karpenter-health", &["check", "--help"]);
        assert!(
            plain.contains("Usage: karpenter-health check [OPTIONS]"),
            "{plain}"
        );
        assert!(
            plain.contains("Exit codes: 0 every EC2NodeClass Ready"),
            "{plain}"
        );
    }

    #[test]
    fn the_krew_manifest_installs_the_binary_under_the_plugin_name_it_answers_to() {
        let manifest: serde_json::Value =
            serde_yaml::from_str(include_str!("../../../deploy/krew/karpenter-health.yaml"))
                .expect("the krew manifest is YAML");
        assert_eq!(manifest["kind"], "Plugin");
        // krew runs `kubectl karpenter-health` as the file `kubectl-karpenter_health`.
        assert_eq!(manifest["metadata"]["name"], "karpenter-health");
        let platforms = manifest["spec"]["platforms"].as_array().expect("platforms");
        assert!(!platforms.is_empty());
        for platform in platforms {
            let bin = platform["bin"].as_str().expect("bin");
            assert_eq!(bin, "kubectl-karpenter_health");
            assert_eq!(
                display_name(Some(std::ffi::OsStr::new(bin))),
                "kubectl karpenter-health"
            );
        }
    }

    #[test]
    fn check_takes_kubectl_style_flags_and_repeatable_node_classes() {
        let cli = Cli::try_parse_from([
            "karpenter-health",
            "check",
            "--context",
            "prod",
            "--node-class",
            "a",
            "--node-class",
            "b",
            "-o",
            "json",
            "--karpenter-namespace",
            "karpenter",
        ])
        .unwrap();
        let Command::Check(args) = cli.command else {
            panic!("not check")
        };
        assert_eq!(args.context.as_deref(), Some("prod"));
        assert_eq!(args.node_classes, ["a", "b"]);
        assert_eq!(args.output, check::Output::Json);
        assert_eq!(args.evaluation.karpenter_namespace, "karpenter");
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
        assert_eq!(config.evaluation.karpenter_namespace, "kube-system");
    }
}
