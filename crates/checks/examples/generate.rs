//! Writes every file generated from the vocabulary table (`karpenter_health_checks::generated`),
//! each only when its text changes; does file IO. From the repository root:
//! `cargo run -q -p karpenter-health-checks --example generate` (part of `make generate`).

use karpenter_health_checks::generated::FILES;
use std::process::ExitCode;

fn main() -> ExitCode {
    let mut failed = false;
    for file in FILES {
        let current = std::fs::read_to_string(file.path).unwrap_or_default();
        match (file.render)(&current) {
            Ok(text) if text == current => {}
            Ok(text) => match std::fs::write(file.path, text) {
                Ok(()) => println!("wrote {}", file.path),
                Err(e) => {
                    eprintln!("{}: {e}", file.path);
                    failed = true;
                }
            },
            Err(e) => {
                eprintln!("{}: {e}", file.path);
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
