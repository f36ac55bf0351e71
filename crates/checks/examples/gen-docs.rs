//! Prints docs/checks.md, generated from the condition, reason and warning tables. No IO beyond
//! stdout. From the repository root:
//! `cargo run -q -p karpenter-health-checks --example gen-docs > docs/checks.md`

fn main() {
    print!("{}", karpenter_health_checks::docs_markdown());
}
