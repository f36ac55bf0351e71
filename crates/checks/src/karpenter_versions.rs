//! Version data for `KarpenterVersionCompatible`: which Karpenter release first supports each
//! Kubernetes minor version, and which CRD schema fields each Karpenter release added. Pure data
//! and parsing, no IO.

use semver::Version;
use serde_json::Value;
use std::collections::BTreeSet;

/// Kubernetes minor version → the first Karpenter release that supports it. Source: the
/// "Compatibility Matrix" of karpenter.sh (`website/content/en/<version>/upgrading/compatibility.md`
/// in aws/karpenter-provider-aws; rows up to 1.29 from the v0.34 page, later rows from the
/// preview page), the same bounds as the supported ranges endoflife.date lists per release.
pub const COMPATIBILITY: &[(u64, (u64, u64, u64))] = &[
    (23, (0, 21, 0)),
    (24, (0, 21, 0)),
    (25, (0, 25, 0)),
    (26, (0, 28, 0)),
    (27, (0, 28, 0)),
    (28, (0, 31, 0)),
    (29, (0, 34, 0)),
    (30, (0, 37, 0)),
    (31, (1, 0, 5)),
    (32, (1, 2, 0)),
    (33, (1, 5, 0)),
    (34, (1, 6, 0)),
    (35, (1, 9, 0)),
    (36, (1, 13, 0)),
];

/// What the matrix says about one Kubernetes version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Support {
    /// Karpenter from this release on supports it, as the table named says.
    From(Version, Table),
    /// Neither table has a row for it (newer than, or older than, what they know).
    NotInMatrix,
}

/// Which compatibility table a row came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// [`COMPATIBILITY`], as this release of karpenter-health was built with it.
    BuiltIn,
    /// The rows the operator was started with (`--kubernetes-compatibility`), so a Kubernetes
    /// minor newer than this release needs no new release; they win over built-in rows.
    Override,
}

impl Table {
    /// How a message names the table.
    pub fn named(self) -> &'static str {
        match self {
            Table::BuiltIn => "karpenter.sh compatibility matrix, as built in",
            Table::Override => {
                "the compatibility rows this operator was given (--kubernetes-compatibility)"
            }
        }
    }
}

/// Rows added at run time: Kubernetes minor (of major 1) → the first Karpenter release
/// supporting it.
pub type CompatibilityOverride = std::collections::BTreeMap<u64, Version>;

/// The first Karpenter release supporting Kubernetes `1.<minor>`: the override's row if it has
/// one, else the built-in table's.
pub fn first_supporting(major: u64, minor: u64, rows: &CompatibilityOverride) -> Support {
    if major != 1 {
        return Support::NotInMatrix;
    }
    if let Some(first) = rows.get(&minor) {
        return Support::From(first.clone(), Table::Override);
    }
    COMPATIBILITY
        .iter()
        .find(|(m, _)| *m == minor)
        .map(|(_, (a, b, c))| Support::From(Version::new(*a, *b, *c), Table::BuiltIn))
        .unwrap_or(Support::NotInMatrix)
}

/// Reads override rows written `1.37=1.15.0,1.38=1.17.0` (spaces allowed); an error names the
/// entry that cannot be read.
pub fn parse_compatibility_override(text: &str) -> Result<CompatibilityOverride, String> {
    let mut rows = CompatibilityOverride::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (kubernetes, karpenter) = entry.split_once('=').ok_or_else(|| {
            format!("{entry:?}: want <kubernetes minor>=<karpenter version>, e.g. 1.37=1.15.0")
        })?;
        let minor = match parse_kubernetes_version(kubernetes.trim()) {
            Some((1, minor))
                if kubernetes.trim().trim_start_matches('v').split('.').count() == 2 =>
            {
                minor
            }
            _ => {
                return Err(format!(
                    "{entry:?}: {:?} is not a Kubernetes minor version such as 1.37",
                    kubernetes.trim()
                ));
            }
        };
        let version = Version::parse(karpenter.trim().trim_start_matches('v')).map_err(|e| {
            format!(
                "{entry:?}: {:?} is not a Karpenter release such as 1.15.0 ({e})",
                karpenter.trim()
            )
        })?;
        if rows.insert(minor, version).is_some() {
            return Err(format!("{entry:?}: Kubernetes 1.{minor} is given twice"));
        }
    }
    Ok(rows)
}

/// Parses a Kubernetes version as EKS (`1.31`) or the API server (`v1.31.2-eks-1234`) gives it,
/// into `(major, minor)`.
pub fn parse_kubernetes_version(raw: &str) -> Option<(u64, u64)> {
    let s = raw.trim();
    let s = s.strip_prefix(['v', 'V']).unwrap_or(s);
    let mut parts = s.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor: String = parts
        .next()?
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    Some((major, minor.parse().ok()?))
}

/// One schema field a Karpenter release's controller writes, and the earliest of the sampled
/// releases whose CRD has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CrdField {
    pub crd: &'static str,
    /// Path in the `v1` schema: `status.amis[].deprecated` (`[]` steps into list items).
    pub path: &'static str,
    /// The first sampled release whose CRD has the field (the field may be a little older: a
    /// controller between the previous sample and this one is never judged on it).
    pub release: (u64, u64, u64),
}

const NODE_POOLS: &str = "nodepools.karpenter.sh";
const NODE_CLASSES: &str = "ec2nodeclasses.karpenter.k8s.aws";

/// Status fields the controller writes, from comparing the CRDs released with Karpenter 0.37.7,
/// 1.0.8, 1.5.0, 1.8.6 and 1.14.1 (`pkg/apis/crds/` of aws/karpenter-provider-aws at those tags):
/// a CRD without one prunes what the controller writes there, so the controller's status never
/// settles. Only status fields: a missing spec field merely cannot be set.
pub const CRD_FIELDS: &[CrdField] = &[
    CrdField {
        crd: NODE_POOLS,
        path: "status.nodeClassObservedGeneration",
        release: (1, 5, 0),
    },
    CrdField {
        crd: NODE_POOLS,
        path: "status.nodes",
        release: (1, 8, 6),
    },
    CrdField {
        crd: NODE_CLASSES,
        path: "status.amis[].deprecated",
        release: (1, 5, 0),
    },
    CrdField {
        crd: NODE_CLASSES,
        path: "status.capacityReservations",
        release: (1, 5, 0),
    },
    CrdField {
        crd: NODE_CLASSES,
        path: "status.capacityReservations[].state",
        release: (1, 8, 6),
    },
    CrdField {
        crd: NODE_CLASSES,
        path: "status.capacityReservations[].interruptible",
        release: (1, 14, 1),
    },
];

/// Whether `crd` (a Karpenter CRD's name) is one the version checks read.
pub fn is_karpenter_crd(name: &str) -> bool {
    name.ends_with(".karpenter.sh") || name.ends_with(".karpenter.k8s.aws")
}

/// The [`CRD_FIELDS`] paths of `crd_name` that `schema` (the `openAPIV3Schema` of its `v1`
/// version) has.
pub fn fields_present(crd_name: &str, schema: &Value) -> BTreeSet<String> {
    CRD_FIELDS
        .iter()
        .filter(|f| f.crd == crd_name && has_path(schema, f.path))
        .map(|f| f.path.to_owned())
        .collect()
}

/// Whether the API server keeps `path` of an object under `schema`: the path is declared, or an
/// object on the way preserves unknown fields (nothing below it is pruned).
fn has_path(schema: &Value, path: &str) -> bool {
    let preserves = |at: &Value| at["x-kubernetes-preserve-unknown-fields"] == Value::Bool(true);
    let mut at = schema;
    for segment in path.split('.') {
        if preserves(at) {
            return true;
        }
        let (name, items) = match segment.strip_suffix("[]") {
            Some(name) => (name, true),
            None => (segment, false),
        };
        match at.get("properties").and_then(|p| p.get(name)) {
            Some(next) => at = next,
            None => return false,
        }
        if items {
            if preserves(at) {
                return true;
            }
            match at.get("items") {
                Some(next) => at = next,
                None => return false,
            }
        }
    }
    true
}

/// `major.minor.patch` as a version.
pub fn release(r: (u64, u64, u64)) -> Version {
    Version::new(r.0, r.1, r.2)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn kubernetes_versions_parse_from_eks_and_the_api_server() {
        assert_eq!(parse_kubernetes_version("1.31"), Some((1, 31)));
        assert_eq!(parse_kubernetes_version("v1.31.2-eks-1234"), Some((1, 31)));
        assert_eq!(parse_kubernetes_version("1.30+"), Some((1, 30)));
        assert_eq!(parse_kubernetes_version("latest"), None);
        assert_eq!(parse_kubernetes_version(""), None);
    }

    #[test]
    fn the_matrix_answers_known_rows_and_admits_what_it_does_not_know() {
        let none = CompatibilityOverride::new();
        assert_eq!(
            first_supporting(1, 31, &none),
            Support::From(Version::new(1, 0, 5), Table::BuiltIn)
        );
        assert_eq!(
            first_supporting(1, 36, &none),
            Support::From(Version::new(1, 13, 0), Table::BuiltIn)
        );
        assert_eq!(first_supporting(1, 37, &none), Support::NotInMatrix);
        assert_eq!(first_supporting(1, 20, &none), Support::NotInMatrix);
        assert_eq!(first_supporting(2, 0, &none), Support::NotInMatrix);
        // Rows ascend: a newer Kubernetes never needs an older Karpenter.
        for pair in COMPATIBILITY.windows(2) {
            assert!(pair[0].0 < pair[1].0 && pair[0].1 <= pair[1].1, "{pair:?}");
        }
    }

    #[test]
    fn override_rows_add_minors_and_win_over_built_in_ones() {
        let rows = parse_compatibility_override(" 1.37=1.15.0, v1.36=1.14.0 ,").unwrap();
        assert_eq!(
            first_supporting(1, 37, &rows),
            Support::From(Version::new(1, 15, 0), Table::Override)
        );
        assert_eq!(
            first_supporting(1, 36, &rows),
            Support::From(Version::new(1, 14, 0), Table::Override)
        );
        assert_eq!(
            first_supporting(1, 35, &rows),
            Support::From(Version::new(1, 9, 0), Table::BuiltIn)
        );
        assert_eq!(
            parse_compatibility_override(""),
            Ok(CompatibilityOverride::new())
        );
    }

    #[test]
    fn bad_override_rows_are_refused_naming_the_entry() {
        for (text, names) in [
            ("1.37", "\"1.37\": want"),
            ("1.37.1=1.15.0", "not a Kubernetes minor"),
            ("2.1=1.15.0", "not a Kubernetes minor"),
            ("latest=1.15.0", "not a Kubernetes minor"),
            ("1.37=soon", "\"soon\" is not a Karpenter release"),
            ("1.37=1.15.0,1.37=1.16.0", "given twice"),
        ] {
            let error = parse_compatibility_override(text).unwrap_err();
            assert!(error.contains(names), "{text}: {error}");
        }
    }

    #[test]
    fn schema_paths_step_through_properties_and_items() {
        let schema = json!({"properties": {"status": {"properties": {
            "amis": {"items": {"properties": {"deprecated": {"type": "boolean"}}}},
            "capacityReservations": {"items": {"properties": {"id": {}}}}
        }}}});
        let present = fields_present(NODE_CLASSES, &schema);
        assert!(present.contains("status.amis[].deprecated"));
        assert!(present.contains("status.capacityReservations"));
        assert!(!present.contains("status.capacityReservations[].state"));
        assert!(fields_present(NODE_POOLS, &schema).is_empty());
        // A status that preserves unknown fields keeps whatever the controller writes.
        let open = json!({"properties": {"status": {"type": "object",
            "x-kubernetes-preserve-unknown-fields": true}}});
        assert_eq!(fields_present(NODE_POOLS, &open).len(), 2);
    }
}
