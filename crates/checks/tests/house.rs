//! The house rules of the workspace's layout, checked on its sources: rules depend on the facts
//! and the plan, never on one another; nothing outside the check engine reaches into its rules;
//! and no product file grows past the size where it stops being one concept.

use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root, two folders above this crate.
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else {
        return files;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files.sort();
    files
}

/// Product sources: `src` of every crate, without unit-test files and fixture builders.
fn product_files() -> Vec<PathBuf> {
    let crates = workspace().join("crates");
    let mut files = Vec::new();
    for entry in fs::read_dir(&crates).expect("crates/").flatten() {
        files.extend(rust_files(&entry.path().join("src")));
    }
    files.retain(|f| {
        let path = f.to_string_lossy();
        !(path.contains("/tests/") || path.contains("/testing/") || path.ends_with("tests.rs"))
    });
    files
}

fn shown(path: &Path) -> String {
    path.strip_prefix(workspace())
        .unwrap_or(path)
        .display()
        .to_string()
}

#[test]
fn nothing_outside_the_check_engine_imports_its_rules() {
    // Spelled in two pieces, so this file does not name what it looks for.
    let needle = concat!("karpenter_health_checks", "::rules");
    let mut offenders = Vec::new();
    for dir in ["crates", "e2e", "bench", "aws-gaps", "fuzz"] {
        for file in rust_files(&workspace().join(dir)) {
            let text = fs::read_to_string(&file).unwrap_or_default();
            if text.contains(needle) {
                offenders.push(shown(&file));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "these files import the check engine's rules; take what they need from \
         `karpenter_health_checks::plan` (or the crate root) instead: {offenders:?}"
    );
}

#[test]
fn a_rule_imports_no_other_rule() {
    let rules = workspace().join("crates/checks/src/rules");
    let mut offenders = Vec::new();
    for file in rust_files(&rules) {
        if file.ends_with("rules/mod.rs") {
            continue;
        }
        let text = fs::read_to_string(&file).unwrap_or_default();
        let nested = file.parent() != Some(rules.as_path());
        for (n, line) in text.lines().enumerate() {
            let reaches_a_sibling = line.contains("crate::rules::")
                || (nested && line.contains("super::super::"))
                || (!nested
                    && line.contains("super::")
                    && !line.trim_start().starts_with("use super::*"));
            if reaches_a_sibling && !line.trim_start().starts_with("//") {
                offenders.push(format!("{}:{}: {}", shown(&file), n + 1, line.trim()));
            }
        }
    }
    assert!(
        offenders.is_empty(),
        "a rule reaches into another (or the registry); move what they share into \
         `crate::plan` (or the facts): {offenders:#?}"
    );
}

/// Files allowed past the size alarm, each with why (none: the vocabulary table, once the one,
/// is a file per condition in `crates/api/src/vocabulary/table/`).
const LONG_ON_PURPOSE: &[(&str, &str)] = &[];

/// The size at which a product file is to be cut along its concepts.
const FILE_ALARM_LINES: usize = 600;

#[test]
fn no_product_file_grows_past_the_alarm() {
    let mut long = Vec::new();
    for file in product_files() {
        let lines = fs::read_to_string(&file)
            .unwrap_or_default()
            .lines()
            .count();
        let name = shown(&file);
        let exempt = LONG_ON_PURPOSE.iter().any(|(path, _)| name.ends_with(path));
        if lines > FILE_ALARM_LINES && !exempt {
            long.push(format!("{name}: {lines} lines"));
        }
    }
    assert!(
        long.is_empty(),
        "cut these along their concepts (functions over 80 lines are clippy's alarm, \
         files over {FILE_ALARM_LINES} this one's): {long:?}"
    );
}
