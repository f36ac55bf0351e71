//! Joins the vocabulary table's parts, `src/vocabulary/table/NN_<entry>.in` (the shared reasons,
//! then one file per condition), in their file names' order into one `vocabulary! { … }`
//! invocation at `$OUT_DIR/vocabulary_table.rs`, which `src/vocabulary.rs` includes: a macro's
//! input cannot span files, and the order is the conditions' order everywhere (the CRD's
//! columns, docs/checks.md, the chart's lists). File IO at build time only.

use std::path::Path;

fn main() {
    let dir = Path::new("src/vocabulary/table");
    // A directory as rerun-if-changed reruns this script when a file in it changes, is added or
    // is removed.
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut parts: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|x| x == "in"))
        .collect();
    parts.sort();
    let mut table = String::from("vocabulary! {\n");
    for part in &parts {
        let text =
            std::fs::read_to_string(part).unwrap_or_else(|e| panic!("{}: {e}", part.display()));
        table.push_str(&text);
        table.push('\n');
    }
    table.push_str("}\n");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join("vocabulary_table.rs"), table)
        .expect("OUT_DIR is writable");
}
