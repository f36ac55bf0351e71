//! Counts in the operator logs of the run (every `*.log` in the output directory): watch errors,
//! those that were 410 Gone / too old resource version, and warnings. Does IO (reads files).

use crate::results::Logs;
use std::path::Path;

pub fn count(dir: &Path) -> Logs {
    let (mut watch_errors, mut gone, mut warnings) = (0, 0, 0);
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().is_some_and(|e| e == "log")
                && let Ok(text) = std::fs::read_to_string(&path)
            {
                for line in text.lines() {
                    if line.contains("WARN") {
                        warnings += 1;
                    }
                    if line.contains("watch failed") {
                        watch_errors += 1;
                        if line.contains("410") || line.contains("too old") {
                            gone += 1;
                        }
                    }
                }
            }
        }
    }
    Logs {
        watch_errors,
        gone_410: gone,
        warnings,
    }
}
