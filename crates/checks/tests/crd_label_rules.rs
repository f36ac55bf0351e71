//! The label rules read from Karpenter's real NodePool and NodeClaim CRDs: v1.8.6 still restricts
//! `kubernetes.io`, v1.14.1 does not (kubernetes-sigs/karpenter PR #2586), whatever controller
//! version runs beside them. Reads the CRD files (IO in a test only); the CRDs are not copied into
//! the project: `KARPENTER_CRDS_ROOT`, else the `shared/karpenter-crds` folder beside it.

use karpenter_health_checks::labels::{KeyContext, LabelRules};
use std::path::PathBuf;

fn crd(release: &str, file: &str) -> serde_json::Value {
    let root = std::env::var_os("KARPENTER_CRDS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/karpenter-crds")
        });
    let path = root.join(release).join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "no Karpenter CRD at {} ({e}): set KARPENTER_CRDS_ROOT to a folder with one \
             sub-folder per release",
            path.display()
        )
    });
    serde_yaml::from_str(&text).expect("CRD YAML")
}

#[test]
fn the_installed_crds_decide_which_label_domains_are_restricted() {
    for file in [
        "karpenter.sh_nodepools.yaml",
        "karpenter.sh_nodeclaims.yaml",
    ] {
        assert_eq!(
            LabelRules::from_crd(&crd("v1.8.6", file)),
            Some(LabelRules::UpTo1_8),
            "{file} of v1.8.6"
        );
        assert_eq!(
            LabelRules::from_crd(&crd("v1.14.1", file)),
            Some(LabelRules::From1_9),
            "{file} of v1.14.1"
        );
    }
    let rejected = |rules: LabelRules| {
        rules.restriction("node-role.kubernetes.io/web", KeyContext::Requirement)
    };
    assert!(rejected(LabelRules::UpTo1_8).is_some());
    assert!(rejected(LabelRules::From1_9).is_none());
}

#[test]
fn a_crd_served_without_its_validation_rules_leaves_the_decision_to_the_version() {
    // What an API server before 1.25 serves: the schema without x-kubernetes-validations.
    let mut stripped = crd("v1.8.6", "karpenter.sh_nodepools.yaml");
    strip_validations(&mut stripped);
    assert_eq!(LabelRules::from_crd(&stripped), None);
}

fn strip_validations(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::Object(map) => {
            map.remove("x-kubernetes-validations");
            map.values_mut().for_each(strip_validations);
        }
        serde_json::Value::Array(items) => items.iter_mut().for_each(strip_validations),
        _ => {}
    }
}
