//! The CRD field table of `karpenter_versions` against Karpenter's real CRDs: each field is in
//! the release the table names and every later sampled release, and absent from the sampled
//! release before it (so the table is derived, not guessed). Reads the CRD files (IO in a test
//! only); the CRDs are not copied into the project: `KARPENTER_CRDS_ROOT`, else the
//! `shared/karpenter-crds` folder beside it.

use karpenter_health_checks::karpenter_versions::{CRD_FIELDS, fields_present, release};
use std::path::PathBuf;

const RELEASES: [&str; 5] = ["v0.37.7", "v1.0.8", "v1.5.0", "v1.8.6", "v1.14.1"];

fn v1_schema(release: &str, crd: &str) -> serde_json::Value {
    let root = std::env::var_os("KARPENTER_CRDS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/karpenter-crds")
        });
    let (plural, group) = crd.split_once('.').expect("CRD name");
    let path = root.join(release).join(format!("{group}_{plural}.yaml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no Karpenter CRD at {} ({e}): set KARPENTER_CRDS_ROOT to a folder with one \
             sub-folder per release",
            path.display()
        )
    });
    let doc: serde_json::Value = serde_yaml::from_str(&text).expect("CRD YAML");
    doc["spec"]["versions"]
        .as_array()
        .expect("versions")
        .iter()
        .find(|v| v["name"] == "v1")
        .expect("a v1 version")["schema"]["openAPIV3Schema"]
        .clone()
}

#[test]
fn every_field_first_appears_in_the_release_the_table_names() {
    for field in CRD_FIELDS {
        let first = release(field.release);
        let mut seen_before = false;
        for r in RELEASES {
            let version = semver::Version::parse(r.trim_start_matches('v')).unwrap();
            let present = fields_present(field.crd, &v1_schema(r, field.crd)).contains(field.path);
            if version >= first {
                assert!(present, "{} {} missing in {r}", field.crd, field.path);
            } else {
                seen_before |= present;
            }
        }
        assert!(
            !seen_before,
            "{} {} is older than {first}",
            field.crd, field.path
        );
    }
}
