//! Lists the providers of `src/observer/providers/` (one `.rs` file each, named like the
//! `AwsFacts` field it reads) into `$OUT_DIR/registered_providers.rs`, the `providers!`
//! invocation `observer/providers.rs` includes, so a new fact of that kind is a new file and no
//! list is kept by hand. File IO at build time only.

use std::fmt::Write as _;
use std::path::Path;

fn main() {
    let dir = Path::new("src/observer/providers");
    // A directory as rerun-if-changed reruns this script when a file in it is added or removed.
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut providers: Vec<String> = std::fs::read_dir(dir)
        .expect("src/observer/providers is readable")
        .filter_map(|entry| {
            let name = entry.ok()?.file_name().into_string().ok()?;
            name.strip_suffix(".rs").map(str::to_owned)
        })
        .collect();
    providers.sort();
    let mut invocation = String::from("providers! {\n");
    for provider in &providers {
        let _ = writeln!(invocation, "    {provider},");
    }
    invocation.push_str("}\n");
    let out = std::env::var("OUT_DIR").expect("cargo sets OUT_DIR");
    std::fs::write(Path::new(&out).join("registered_providers.rs"), invocation)
        .expect("OUT_DIR is writable");
}
