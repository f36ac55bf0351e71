//! Lists the rule modules of `src/rules/` (one `.rs` file each, `mod.rs` aside) into
//! `$OUT_DIR/registered_rules.rs`, the registry `rules/mod.rs` includes, and the test files of
//! `src/tests/` with sentences into `$OUT_DIR/registered_sentences.rs`, so a new rule and its
//! test file are new files and no list is kept by hand. File IO at build time only.

use std::fmt::Write as _;
use std::path::Path;

/// The names, sorted, of the `.rs` files of `dir` (`mod.rs` aside) whose text passes `keep`.
fn modules(dir: &Path, keep: impl Fn(&str) -> bool) -> Vec<String> {
    // A directory as rerun-if-changed reruns this script when a file in it changes, is added or
    // is removed.
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut modules: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| {
            let path = entry.ok()?.path();
            let module = path.file_name()?.to_str()?.strip_suffix(".rs")?.to_owned();
            let text = std::fs::read_to_string(&path).ok()?;
            (module != "mod" && keep(&text)).then_some(module)
        })
        .collect();
    modules.sort();
    modules
}

/// Writes `items`, one per line, as a slice expression into `$OUT_DIR/file`.
fn write_slice(file: &str, items: impl Iterator<Item = String>) {
    let mut slice = String::from("&[\n");
    for item in items {
        let _ = writeln!(slice, "    {item},");
    }
    slice.push_str("]\n");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join(file), slice).expect("OUT_DIR is writable");
}

fn main() {
    let rules = modules(Path::new("src/rules"), |_| true);
    write_slice(
        "registered_rules.rs",
        rules.iter().map(|rule| format!("&{rule}::RULE")),
    );
    let with_sentences = modules(Path::new("src/tests"), |text| text.contains("sentences! {"));
    write_slice(
        "registered_sentences.rs",
        with_sentences
            .iter()
            .map(|file| format!("crate::tests::{file}::by_reason::SENTENCES")),
    );
}
