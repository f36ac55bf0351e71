//! The read-only mirrors against Karpenter's real CRDs of five releases: a maximal object built
//! from each served version's schema (every property filled) must deserialize, with the fields
//! the checks read intact. Reads the CRD files (IO in a test only).
//!
//! The CRDs are not copied into the project: the test reads `KARPENTER_CRDS_ROOT`, else the
//! `shared/karpenter-crds` folder beside the repository.

use karpenter_health_api::karpenter::{EC2NodeClass, NodeClaim, NodePool};
use serde_json::{Map, Value, json};
use std::path::PathBuf;

/// The folder of Karpenter's real CRDs. Missing is a failure, not a silent pass: a test that
/// reads nothing proves nothing (CI always has the folder beside the clone).
fn crds_root() -> PathBuf {
    let root = std::env::var_os("KARPENTER_CRDS_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/karpenter-crds")
        });
    assert!(
        root.is_dir(),
        "no Karpenter CRDs at {}: set KARPENTER_CRDS_ROOT to a folder with one sub-folder per \
         release",
        root.display()
    );
    root
}

/// A value for every property of `schema`, recursively: the first enum value, a parseable time
/// for date-times, one element per array and one entry per map.
fn sample(schema: &Value) -> Value {
    if let Some(first) = schema.get("enum").and_then(|e| e.get(0)) {
        return first.clone();
    }
    if schema.get("x-kubernetes-int-or-string").is_some() {
        return json!("1");
    }
    match schema.get("type").and_then(Value::as_str) {
        Some("object") => {
            let mut object = Map::new();
            if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
                for (name, property) in properties {
                    object.insert(name.clone(), sample(property));
                }
            }
            if let Some(values) = schema.get("additionalProperties").filter(|v| v.is_object()) {
                object.insert("example.com/key".into(), sample(values));
            }
            Value::Object(object)
        }
        Some("array") => json!([sample(schema.get("items").unwrap_or(&json!({})))]),
        Some("integer") | Some("number") => {
            json!(schema.get("minimum").cloned().unwrap_or(json!(1)))
        }
        Some("boolean") => json!(true),
        Some("string") if schema.get("format").and_then(Value::as_str) == Some("date-time") => {
            json!("2025-01-01T00:00:00Z")
        }
        Some("string") => json!("sample"),
        _ => json!({}),
    }
}

fn maximal_objects(file: &str) -> Vec<(String, String, Value)> {
    let root = crds_root();
    let mut out = Vec::new();
    let mut releases: Vec<_> = std::fs::read_dir(&root)
        .expect("readable CRD test data")
        .flatten()
        .map(|e| e.path())
        .collect();
    releases.sort();
    for release in releases {
        let path = release.join(file);
        let Ok(text) = std::fs::read_to_string(&path) else {
            continue;
        };
        let crd: Value = serde_yaml::from_str(&text).expect("CRD YAML");
        for version in crd["spec"]["versions"].as_array().expect("versions") {
            let mut object = sample(&version["schema"]["openAPIV3Schema"]);
            object["apiVersion"] = json!(format!(
                "{}/{}",
                crd["spec"]["group"]
                    .as_str()
                    .expect("readable CRD test data"),
                version["name"].as_str().expect("readable CRD test data")
            ));
            object["kind"] = crd["spec"]["names"]["kind"].clone();
            object["metadata"] = json!({"name": "maximal", "generation": 3});
            let name = release
                .file_name()
                .expect("release")
                .to_string_lossy()
                .into_owned();
            out.push((
                name,
                version["name"].as_str().expect("name").to_owned(),
                object,
            ));
        }
    }
    out
}

fn assert_every_release_is_read(kind: &str, count: usize) {
    assert!(
        count >= 5,
        "{kind}: expected the five releases under {}, read {count}",
        crds_root().display()
    );
}

#[test]
fn maximal_ec2_node_classes_of_every_release_deserialize() {
    let objects = maximal_objects("karpenter.k8s.aws_ec2nodeclasses.yaml");
    for (release, version, object) in &objects {
        let node_class: EC2NodeClass = serde_json::from_value(object.clone())
            .unwrap_or_else(|e| panic!("EC2NodeClass of {release} {version}: {e}"));
        assert_eq!(
            node_class.spec.role.as_deref(),
            Some("sample"),
            "{release} {version}"
        );
        assert_eq!(
            node_class.spec.security_group_selector_terms.len(),
            1,
            "{release} {version}"
        );
        let status = node_class.status.expect("status");
        assert_eq!(status.conditions.len(), 1, "{release} {version}");
        assert!(
            status.conditions[0].last_transition_time.is_some(),
            "{release} {version}"
        );
    }
    assert_every_release_is_read("EC2NodeClass", objects.len());
}

#[test]
fn maximal_node_pools_of_every_release_deserialize() {
    let objects = maximal_objects("karpenter.sh_nodepools.yaml");
    for (release, version, object) in &objects {
        let pool: NodePool = serde_json::from_value(object.clone())
            .unwrap_or_else(|e| panic!("NodePool of {release} {version}: {e}"));
        let reference = pool
            .spec
            .template
            .spec
            .node_class_ref
            .expect("nodeClassRef");
        assert_eq!(reference.name, "sample", "{release} {version}");
        assert_eq!(
            pool.spec.template.spec.requirements.len(),
            1,
            "{release} {version}"
        );
    }
    assert_every_release_is_read("NodePool", objects.len());
}

#[test]
fn maximal_node_claims_of_every_release_deserialize() {
    let objects = maximal_objects("karpenter.sh_nodeclaims.yaml");
    for (release, version, object) in &objects {
        let claim: NodeClaim = serde_json::from_value(object.clone())
            .unwrap_or_else(|e| panic!("NodeClaim of {release} {version}: {e}"));
        let status = claim.status.expect("status");
        assert_eq!(
            status.provider_id.as_deref(),
            Some("sample"),
            "{release} {version}"
        );
        assert_eq!(status.conditions.len(), 1, "{release} {version}");
    }
    assert_every_release_is_read("NodeClaim", objects.len());
}
