//! The unit tests mirror the rules: every rule module (a file of `src/rules/`) has its scenarios
//! in `tests/<same name>.rs`. Both folders declare their files' modules themselves (`automod`).
//! Reads this crate's sources only.

use std::collections::BTreeSet;
use std::path::Path;

/// The names, without `.rs`, of the Rust files in this crate's `src/<folder>`, `mod.rs` aside.
fn files_of(folder: &str) -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src").join(folder);
    std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("src/{folder}: {e}"))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .filter(|name| name != "mod")
        .collect()
}

#[test]
fn every_rule_module_has_a_test_file_of_the_same_name() {
    let rules = files_of("rules");
    assert!(
        rules.contains("amis") && rules.contains("volume_encryption"),
        "src/rules read wrong: {rules:?}"
    );
    let files = files_of("tests");
    let missing: Vec<String> = rules
        .iter()
        .filter(|rule| !files.contains(*rule))
        .map(|rule| format!("src/tests/{rule}.rs"))
        .collect();
    assert!(
        missing.is_empty(),
        "rule modules in src/rules/ without their test file: create {}",
        missing.join(", ")
    );
}
