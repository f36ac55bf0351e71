//! The unit tests mirror the rules: every rule module `rules/mod.rs` declares has its scenarios in
//! `tests/<same name>.rs`, declared in `tests/mod.rs`. Reads this crate's sources only.

use std::collections::BTreeSet;
use std::path::Path;

/// Rule modules with no scenario test yet (their reasons are proven by sentences in `reasons.rs`
/// only). Each must still lack its file: once the file exists, drop the name here.
const WITHOUT_SCENARIOS: &[&str] = &["spot_ready"];

/// The modules a Rust source declares (`mod x;`, `pub mod x;`, `pub(crate) mod x;`), in order.
fn declared_modules(source: &str) -> Vec<&str> {
    source
        .lines()
        .filter_map(|line| {
            let line = line.trim_start();
            let line = match line.strip_prefix("pub") {
                Some(rest) => rest.trim_start_matches(|c| c != ' ').trim_start(),
                None => line,
            };
            line.strip_prefix("mod ")?.strip_suffix(';').map(str::trim)
        })
        .collect()
}

/// The names, without `.rs`, of the Rust files in this crate's `src/tests`.
fn test_files() -> BTreeSet<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("src")
        .join("tests");
    std::fs::read_dir(&dir)
        .expect("src/tests is readable")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.is_file())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?;
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect()
}

#[test]
fn every_rule_module_has_a_test_file_of_the_same_name() {
    let rules = declared_modules(include_str!("../rules/mod.rs"));
    assert!(
        rules.contains(&"amis") && rules.contains(&"volume_encryption"),
        "rules/mod.rs read wrong: {rules:?}"
    );
    let files = test_files();
    let declared = declared_modules(include_str!("mod.rs"));
    let missing: Vec<String> = rules
        .iter()
        .filter(|rule| !WITHOUT_SCENARIOS.contains(rule))
        .filter(|rule| !files.contains(**rule) || !declared.contains(rule))
        .map(|rule| format!("src/tests/{rule}.rs (declared as `mod {rule};` in src/tests/mod.rs)"))
        .collect();
    assert!(
        missing.is_empty(),
        "rule modules in src/rules/ without their test file: create {}",
        missing.join(", ")
    );
    for rule in WITHOUT_SCENARIOS {
        assert!(
            rules.contains(rule),
            "{rule} in WITHOUT_SCENARIOS is no rule module"
        );
        assert!(
            !files.contains(*rule),
            "src/tests/{rule}.rs exists: drop {rule} from WITHOUT_SCENARIOS"
        );
    }
}

#[test]
fn declared_modules_reads_every_visibility_and_nothing_else() {
    let source =
        "//! mod docs;\nmod a;\npub mod b;\npub(crate) mod c;\npub use d::e;\nfn mod_f() {}\n";
    assert_eq!(declared_modules(source), ["a", "b", "c"]);
}
