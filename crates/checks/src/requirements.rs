//! Karpenter's algebra of node requirements, as its scheduler computes it: one label's admitted
//! values are a set or the complement of a set, with integer bounds from `Gt` and `Lt`
//! (kubernetes-sigs/karpenter `pkg/scheduling/requirement.go` `NewRequirementWithFlexibility`,
//! `Intersection`, `HasIntersection`, `Operator`), and a set of them per label key
//! (`pkg/scheduling/requirements.go` `Add`, `Compatible`, `Intersects`), with keys normalized
//! (`pkg/apis/v1/labels.go` `NormalizedLabels`). The same in every v1 release. Pure: no IO.

use std::collections::{BTreeMap, BTreeSet};

/// The label keys Karpenter reads as others (core `NormalizedLabels`, and the EBS CSI driver's
/// zone key the AWS provider adds in `pkg/operator/operator.go`, in every release).
const NORMALIZED: [(&str, &str); 6] = [
    (
        "failure-domain.beta.kubernetes.io/zone",
        "topology.kubernetes.io/zone",
    ),
    ("beta.kubernetes.io/arch", "kubernetes.io/arch"),
    ("beta.kubernetes.io/os", "kubernetes.io/os"),
    (
        "beta.kubernetes.io/instance-type",
        "node.kubernetes.io/instance-type",
    ),
    (
        "failure-domain.beta.kubernetes.io/region",
        "topology.kubernetes.io/region",
    ),
    (
        "topology.ebs.csi.aws.com/zone",
        "topology.kubernetes.io/zone",
    ),
];

/// `key` as Karpenter stores it.
pub fn normalized(key: &str) -> &str {
    NORMALIZED
        .iter()
        .find(|(from, _)| *from == key)
        .map_or(key, |(_, to)| to)
}

/// What one label may be: `values` (or, with `complement`, anything but them), within `gte` and
/// `lte` when set.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Requirement {
    complement: bool,
    values: BTreeSet<String>,
    gte: Option<i64>,
    lte: Option<i64>,
}

/// The operator a requirement amounts to (`Requirement.Operator`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operator {
    In,
    NotIn,
    Exists,
    DoesNotExist,
}

fn within_bounds(value: &str, gte: Option<i64>, lte: Option<i64>) -> bool {
    if gte.is_none() && lte.is_none() {
        return true;
    }
    // With bounds, a value that is no integer is out of them (Go's strconv.Atoi).
    let Ok(v) = value.parse::<i64>() else {
        return false;
    };
    gte.is_none_or(|g| v >= g) && lte.is_none_or(|l| v <= l)
}

fn max_bound(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, None) | (None, x) => x,
    }
}

fn min_bound(a: Option<i64>, b: Option<i64>) -> Option<i64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, None) | (None, x) => x,
    }
}

impl Requirement {
    /// `operator values`, as Karpenter builds it; `None` for an operator it does not know or a
    /// bound that is not an integer (both refused by the API server's validation).
    pub fn new(operator: &str, values: &[String]) -> Option<Self> {
        let set = || values.iter().cloned().collect::<BTreeSet<String>>();
        let bound = || values.first()?.trim().parse::<i64>().ok();
        let any = |gte, lte| Self {
            complement: true,
            values: BTreeSet::new(),
            gte,
            lte,
        };
        Some(match operator {
            "In" => Self {
                complement: false,
                values: set(),
                gte: None,
                lte: None,
            },
            "NotIn" => Self {
                complement: true,
                values: set(),
                gte: None,
                lte: None,
            },
            "Exists" => any(None, None),
            "DoesNotExist" => Self::does_not_exist(),
            // `Gt N` is `Gte N+1`; `Gt MaxInt` matches nothing.
            "Gt" => match bound()? {
                i64::MAX => Self::does_not_exist(),
                n => any(Some(n + 1), None),
            },
            "Lt" => any(None, Some(bound()?.saturating_sub(1))),
            "Gte" => any(Some(bound()?), None),
            "Lte" => any(None, Some(bound()?)),
            _ => return None,
        })
    }

    /// `In [value]`.
    pub fn single(value: &str) -> Self {
        Self {
            complement: false,
            values: BTreeSet::from([value.to_owned()]),
            gte: None,
            lte: None,
        }
    }

    /// `In values`.
    pub fn any_of<'a>(values: impl IntoIterator<Item = &'a str>) -> Self {
        Self {
            complement: false,
            values: values.into_iter().map(str::to_owned).collect(),
            gte: None,
            lte: None,
        }
    }

    fn does_not_exist() -> Self {
        Self {
            complement: false,
            values: BTreeSet::new(),
            gte: None,
            lte: None,
        }
    }

    /// Both at once (`Requirement.Intersection`).
    pub fn intersection(&self, other: &Self) -> Self {
        let complement = self.complement && other.complement;
        let gte = max_bound(self.gte, other.gte);
        let lte = min_bound(self.lte, other.lte);
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            return Self::does_not_exist();
        }
        let mut values: BTreeSet<String> = match (self.complement, other.complement) {
            (true, true) => self.values.union(&other.values).cloned().collect(),
            (true, false) => other.values.difference(&self.values).cloned().collect(),
            (false, true) => self.values.difference(&other.values).cloned().collect(),
            (false, false) => self.values.intersection(&other.values).cloned().collect(),
        };
        values.retain(|v| within_bounds(v, gte, lte));
        let (gte, lte) = if complement { (gte, lte) } else { (None, None) };
        Self {
            complement,
            values,
            gte,
            lte,
        }
    }

    /// Whether some value satisfies both (`Requirement.HasIntersection`).
    pub fn has_intersection(&self, other: &Self) -> bool {
        let gte = max_bound(self.gte, other.gte);
        let lte = min_bound(self.lte, other.lte);
        if let (Some(g), Some(l)) = (gte, lte)
            && g > l
        {
            return false;
        }
        match (self.complement, other.complement) {
            (true, true) => true,
            (true, false) => other
                .values
                .iter()
                .any(|v| !self.values.contains(v) && within_bounds(v, gte, lte)),
            (false, true) => self
                .values
                .iter()
                .any(|v| !other.values.contains(v) && within_bounds(v, gte, lte)),
            (false, false) => self
                .values
                .iter()
                .any(|v| other.values.contains(v) && within_bounds(v, gte, lte)),
        }
    }

    /// The operator this requirement amounts to (`Requirement.Operator`).
    pub fn operator(&self) -> Operator {
        match (self.complement, self.values.is_empty()) {
            (true, false) => Operator::NotIn,
            (true, true) => Operator::Exists,
            (false, false) => Operator::In,
            (false, true) => Operator::DoesNotExist,
        }
    }

    /// Whether `value` satisfies it.
    pub fn admits(&self, value: &str) -> bool {
        self.has_intersection(&Self::single(value))
    }

    /// The values it admits, when they are a finite set.
    pub fn values(&self) -> Option<&BTreeSet<String>> {
        (!self.complement).then_some(&self.values)
    }
}

/// Requirements by normalized label key (`scheduling.Requirements`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Requirements(BTreeMap<String, Requirement>);

/// Why two sets of requirements are not compatible: the first key Karpenter reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Incompatible {
    /// A label the incoming side requires that the existing side neither defines nor may leave
    /// undefined: `label "team" does not have known values`.
    Undefined(String),
    /// A label both define with no value in common.
    Disjoint(String),
}

impl Requirements {
    /// Adds `requirement` on `key`, intersected with what is there (`Requirements.Add`).
    pub fn add(&mut self, key: &str, requirement: Requirement) {
        let key = normalized(key);
        let merged = match self.0.get(key) {
            Some(existing) => requirement.intersection(existing),
            None => requirement,
        };
        self.0.insert(key.to_owned(), merged);
    }

    pub fn get(&self, key: &str) -> Option<&Requirement> {
        self.0.get(normalized(key))
    }

    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(normalized(key))
    }

    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.0.keys().map(String::as_str)
    }

    /// Whether `incoming` can be met here (`Requirements.Compatible`): each label it requires is
    /// defined here, is one `allow_undefined` lets be undefined, or is required with `NotIn` or
    /// `DoesNotExist`; and every label both define intersects.
    pub fn compatible(
        &self,
        incoming: &Requirements,
        allow_undefined: impl Fn(&str) -> bool,
    ) -> Result<(), Incompatible> {
        for (key, r) in &incoming.0 {
            if allow_undefined(key)
                || self.0.contains_key(key)
                || matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist)
            {
                continue;
            }
            return Err(Incompatible::Undefined(key.clone()));
        }
        self.intersects(incoming)
    }

    /// Whether every label both define has a value in common (`Requirements.Intersects`): two
    /// `NotIn`/`DoesNotExist` requirements always do.
    pub fn intersects(&self, incoming: &Requirements) -> Result<(), Incompatible> {
        for (key, theirs) in &incoming.0 {
            let Some(ours) = self.0.get(key) else {
                continue;
            };
            if ours.has_intersection(theirs) {
                continue;
            }
            let negative =
                |r: &Requirement| matches!(r.operator(), Operator::NotIn | Operator::DoesNotExist);
            if negative(theirs) && negative(ours) {
                continue;
            }
            return Err(Incompatible::Disjoint(key.clone()));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(op: &str, values: &[&str]) -> Requirement {
        Requirement::new(
            op,
            &values.iter().map(|v| v.to_string()).collect::<Vec<_>>(),
        )
        .unwrap()
    }

    fn set(entries: &[(&str, Requirement)]) -> Requirements {
        let mut r = Requirements::default();
        for (k, v) in entries {
            r.add(k, v.clone());
        }
        r
    }

    #[test]
    fn operators_become_sets_and_bounds_as_karpenter_builds_them() {
        assert_eq!(req("In", &["a"]).operator(), Operator::In);
        assert_eq!(req("NotIn", &["a"]).operator(), Operator::NotIn);
        assert_eq!(req("Exists", &[]).operator(), Operator::Exists);
        assert_eq!(req("DoesNotExist", &[]).operator(), Operator::DoesNotExist);
        // Gt and Lt are Exists with bounds: `Gt 4` admits 5, not 4 or a word.
        let gt = req("Gt", &["4"]);
        assert_eq!(gt.operator(), Operator::Exists);
        assert!(gt.admits("5") && !gt.admits("4") && !gt.admits("large"));
        assert!(req("Lt", &["4"]).admits("3") && !req("Lt", &["4"]).admits("4"));
        assert_eq!(Requirement::new("Near", &[]), None);
        assert_eq!(Requirement::new("Gt", &["x".into()]), None);
    }

    #[test]
    fn intersection_keeps_what_both_admit() {
        let both = req("In", &["a", "b"]).intersection(&req("NotIn", &["b"]));
        assert_eq!(both, req("In", &["a"]));
        // Bounds that cross leave nothing: Gt 8 and Lt 2.
        let none = req("Gt", &["8"]).intersection(&req("Lt", &["2"]));
        assert_eq!(none.operator(), Operator::DoesNotExist);
        // A concrete set drops the values outside the bounds, and the bounds.
        let cpus = req("In", &["2", "4", "16"]).intersection(&req("Lt", &["8"]));
        assert_eq!(cpus, req("In", &["2", "4"]));
    }

    #[test]
    fn undefined_custom_labels_are_denied_well_known_ones_allowed() {
        let template = set(&[("kubernetes.io/arch", req("In", &["amd64"]))]);
        let well_known = |k: &str| k == "kubernetes.io/os";
        let pod = set(&[("node-role.kubernetes.io/edge", req("In", &["true"]))]);
        assert_eq!(
            template.compatible(&pod, well_known),
            Err(Incompatible::Undefined(
                "node-role.kubernetes.io/edge".into()
            ))
        );
        let os = set(&[("kubernetes.io/os", req("In", &["windows"]))]);
        assert_eq!(template.compatible(&os, well_known), Ok(()));
        let not = set(&[("team", req("DoesNotExist", &[]))]);
        assert_eq!(template.compatible(&not, well_known), Ok(()));
        let arm = set(&[("beta.kubernetes.io/arch", req("In", &["arm64"]))]);
        assert_eq!(
            template.compatible(&arm, well_known),
            Err(Incompatible::Disjoint("kubernetes.io/arch".into()))
        );
    }

    #[test]
    fn two_negative_requirements_always_intersect() {
        let a = set(&[("team", req("DoesNotExist", &[]))]);
        let b = set(&[("team", req("NotIn", &["x"]))]);
        assert_eq!(a.intersects(&b), Ok(()));
    }
}
