//! Lists the rule modules of `src/rules/` (one `.rs` file each, `mod.rs` aside) into
//! `$OUT_DIR/registered_rules.rs`, the registry `rules/mod.rs` includes, so a new rule is a new
//! file and no list is kept by hand. File IO at build time only.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new("src/rules");
    // A directory as rerun-if-changed reruns this script when a file in it is added or removed.
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut modules: Vec<String> = std::fs::read_dir(dir)
        .expect("src/rules is readable")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            let module = name.strip_suffix(".rs")?;
            (module != "mod").then(|| module.to_owned())
        })
        .collect();
    modules.sort();
    let mut registry = String::from("&[\n");
    for module in &modules {
        let _ = writeln!(registry, "    &{module}::RULE,");
    }
    registry.push_str("]\n");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join("registered_rules.rs"), registry)
        .expect("OUT_DIR is writable");
}
