//! Writes the shipped IAM policy templates (`karpenter_health_aws::policy::TEMPLATES`), each only
//! when its text changes; does file IO. From the repository root:
//! `cargo run -q -p karpenter-health-aws --example generate_policies` (part of `make generate`).

use karpenter_health_aws::policy::{PolicyScope, TEMPLATES, operator_policy, render};
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut failed = false;
    for (path, credentials) in TEMPLATES {
        let text = render(&operator_policy(&PolicyScope::placeholders(*credentials)));
        if std::fs::read_to_string(path).is_ok_and(|current| current == text) {
            continue;
        }
        match std::fs::write(path, text) {
            Ok(()) => println!("wrote {path}"),
            Err(e) => {
                eprintln!("{path}: {e}");
                failed = true;
            }
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
