//! `karpenter-health lint`: the operator's findings that need no cluster and no AWS, read from
//! manifests (files, directories, or `helm template` output on stdin). This module is the
//! imperative shell (reads files and stdin, writes the report); the core is [`lint::lint`].
#![forbid(unsafe_code)]
// A function over 80 lines (clippy.toml) is cut along what its parts decide; tests are exempt.
#![warn(clippy::too_many_lines)]

pub mod documents;
mod engine;
pub mod lint;
pub mod manifests;
pub mod model;
pub mod output;

use anyhow::Context as _;
use clap::{Args, ValueEnum};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

pub use lint::Source;
pub use model::Options;
pub use model::{Finding, Rule, Severity};

/// Files larger than this are not manifests; reading them would only cost memory.
const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// Flags of `karpenter-health lint`.
#[derive(Clone, Debug, Args)]
#[command(
    after_help = "Exit codes: 0 no finding at or above --fail-on; 1 such a finding (an \
    unreadable document counts as an error); 2 could not run (a path that cannot be read, a bad \
    flag)."
)]
pub struct LintArgs {
    /// Manifests to lint: YAML files, directories (searched recursively for .yaml and .yml
    /// files), or - for stdin (e.g. `helm template ... | karpenter-health lint -`).
    #[arg(required = true, value_name = "FILE|DIR|-")]
    pub paths: Vec<PathBuf>,
    /// The Karpenter version the manifests are for (e.g. 1.8.6); decides the restricted label
    /// domains and whether httpProtocolIPv6 is sent. Without it, only what every version rejects
    /// is reported.
    #[arg(long, value_name = "VERSION")]
    pub karpenter_version: Option<String>,
    /// The AWS region the nodes launch in (e.g. us-iso-east-1); isolated regions reject
    /// httpProtocolIPv6.
    #[arg(long)]
    pub region: Option<String>,
    /// The node IAM role (name or ARN) whose aws-auth mapping is checked, besides the spec.role
    /// of every EC2NodeClass in the input.
    #[arg(long, value_name = "ROLE")]
    pub node_role: Option<String>,
    /// The Karpenter controller's IAM role (name or ARN); aws-auth must not map it as a node.
    #[arg(long, value_name = "ROLE")]
    pub controller_role: Option<String>,
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
    /// The lowest severity that makes the exit code 1.
    #[arg(long, value_enum, default_value_t = Severity::Error)]
    pub fail_on: Severity,
}

/// Report formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// `path:line: Reason: message`, with the remediation.
    Text,
    /// A JSON array of findings.
    Json,
    /// SARIF 2.1.0, for code scanning on pull requests.
    Sarif,
}

/// Lints the inputs named by `args`, reading stdin for `-`, and writes the report to `stdout`.
/// Returns the exit code: 1 when a finding is at or above `--fail-on`, else 0.
pub fn run(args: &LintArgs, stdout: &mut impl Write) -> anyhow::Result<i32> {
    run_with_stdin(args, &mut std::io::stdin().lock(), stdout)
}

/// [`run`] with stdin given, for tests.
pub fn run_with_stdin(
    args: &LintArgs,
    stdin: &mut impl Read,
    stdout: &mut impl Write,
) -> anyhow::Result<i32> {
    let options = options(args)?;
    let inputs = read_inputs(&args.paths, stdin)?;
    let sources: Vec<Source<'_>> = inputs
        .iter()
        .map(|(path, text)| Source { path, text })
        .collect();
    let findings = lint::lint(&sources, &options);
    let report = match args.output {
        Format::Text => output::text(&findings),
        Format::Json => output::json(&findings)? + "\n",
        Format::Sarif => output::sarif(&findings)? + "\n",
    };
    stdout.write_all(report.as_bytes())?;
    stdout.flush()?;
    Ok(exit_code(&findings, args.fail_on))
}

/// 1 when any finding is at least as severe as `fail_on`.
pub fn exit_code(findings: &[Finding], fail_on: Severity) -> i32 {
    i32::from(findings.iter().any(|f| f.severity() >= fail_on))
}

fn options(args: &LintArgs) -> anyhow::Result<Options> {
    let karpenter_version = args
        .karpenter_version
        .as_deref()
        .map(|v| {
            karpenter_health_checks::version::parse(v)
                .map_err(|e| anyhow::anyhow!("--karpenter-version: the version {e}"))
        })
        .transpose()?;
    Ok(Options {
        karpenter_version,
        region: args.region.clone().filter(|r| !r.is_empty()),
        node_role: args.node_role.clone(),
        controller_role: args.controller_role.clone(),
    })
}

/// Every input as (path as given, text). Directories are walked in name order, so the report
/// is stable.
fn read_inputs(paths: &[PathBuf], stdin: &mut impl Read) -> anyhow::Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    let mut stdin_read = false;
    for path in paths {
        if path.as_os_str() == "-" {
            if stdin_read {
                continue;
            }
            stdin_read = true;
            let mut text = String::new();
            stdin
                .take(MAX_FILE_BYTES)
                .read_to_string(&mut text)
                .context("reading stdin")?;
            out.push(("-".to_owned(), text));
        } else if path.is_dir() {
            let mut files = Vec::new();
            walk(path, &mut files)?;
            files.sort();
            for file in files {
                out.push((display(&file), read_file(&file)?));
            }
        } else {
            out.push((display(path), read_file(path)?));
        }
    }
    Ok(out)
}

fn walk(dir: &Path, files: &mut Vec<PathBuf>) -> anyhow::Result<()> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for entry in entries {
        let path = entry?.path();
        // Symlinked directories are not followed: a link loop would never end.
        let file_type = std::fs::symlink_metadata(&path)?.file_type();
        if file_type.is_dir() {
            walk(&path, files)?;
        } else if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("yaml") || e.eq_ignore_ascii_case("yml"))
        {
            files.push(path);
        }
    }
    Ok(())
}

fn read_file(path: &Path) -> anyhow::Result<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .with_context(|| format!("opening {}", path.display()))?
        .take(MAX_FILE_BYTES)
        .read_to_string(&mut text)
        .with_context(|| format!("reading {} (manifests are UTF-8 text)", path.display()))?;
    Ok(text)
}

fn display(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
