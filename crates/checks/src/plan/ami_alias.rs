//! AMI aliases as Karpenter reads them: `family@version`, the SSM parameters each resolves
//! through per Kubernetes minor, and the aliases Karpenter refuses outright at a minor. Pure: no
//! IO.

use karpenter_health_api::karpenter::EC2NodeClass;

/// The alias version that follows AWS's newest release.
pub const LATEST: &str = "latest";

/// What an alias's family resolves through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AliasFamily {
    Al2,
    Al2023,
    Bottlerocket,
    /// Windows Server 2019, 2022 or 2025 (only `@latest`).
    Windows(&'static str),
}

/// One `alias` term: `family@version`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Alias {
    pub family: AliasFamily,
    pub version: String,
    /// As written.
    pub written: String,
}

impl Alias {
    /// Parses `family@version` as the CRD admits it; `None` for anything else. Karpenter compares
    /// both parts exactly: the family must be lower case, and only `latest` follows AWS's
    /// newest release; `LATEST` is a release of that name, which AWS never published
    /// (aws/karpenter-provider-aws `pkg/apis/v1/ec2nodeclass.go` `amiFamilyFromAlias`,
    /// `pkg/providers/amifamily/al2023.go` `amiVersion == v1.AliasVersionLatest`).
    pub fn parse(written: &str) -> Option<Self> {
        let (family, version) = written.trim().split_once('@')?;
        let family = match family {
            "al2" => AliasFamily::Al2,
            "al2023" => AliasFamily::Al2023,
            "bottlerocket" => AliasFamily::Bottlerocket,
            "windows2019" => AliasFamily::Windows("2019"),
            "windows2022" => AliasFamily::Windows("2022"),
            "windows2025" => AliasFamily::Windows("2025"),
            _ => return None,
        };
        let version = version.trim();
        (!version.is_empty()).then(|| Self {
            family,
            version: version.to_owned(),
            written: written.trim().to_owned(),
        })
    }

    /// The class's alias term, if it has one (the CRD makes it the only term).
    pub fn of(class: &EC2NodeClass) -> Option<Self> {
        class
            .spec
            .ami_selector_terms
            .iter()
            .find_map(|t| t.alias.as_deref())
            .and_then(Self::parse)
    }

    /// Pinned to a release: it does not follow AWS's newest.
    pub fn pinned(&self) -> bool {
        self.version != LATEST
    }

    /// The SSM parameters Karpenter reads to resolve this alias for Kubernetes `minor`: every
    /// architecture and variant; any one answering is enough.
    pub fn parameters(&self, minor: &str) -> Vec<String> {
        parameters(self.family, &self.version, minor)
    }

    /// The parameters the same family's `@latest` reads for `minor`: whether AWS has published
    /// images for that minor at all.
    pub fn latest_parameters(&self, minor: &str) -> Vec<String> {
        parameters(self.family, LATEST, minor)
    }

    /// Every parameter the check needs: this minor's; for a pinned alias the next minor's and
    /// the family's `@latest` for the next minor, unless Karpenter refuses the alias there.
    pub fn parameters_to_read(&self, minor: &str) -> Vec<String> {
        let mut names = self.parameters(minor);
        if let Some(next) =
            next_minor(minor).filter(|n| self.pinned() && self.refused_at(n).is_none())
        {
            names.extend(self.parameters(&next));
            names.extend(self.latest_parameters(&next));
        }
        names.sort();
        names.dedup();
        names
    }
}

/// Why Karpenter refuses an alias outright for a Kubernetes minor, before reading any parameter
/// (aws/karpenter-provider-aws `pkg/providers/amifamily/ami.go` `DescribeImageQueries`), setting
/// `AMIsReady=False UnsupportedAlias` (`pkg/controllers/nodeclass/ami.go`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The first Karpenter release that refuses it.
    pub since: (u64, u64, u64),
    /// What Karpenter refuses, as a sentence part: "al2 aliases from Kubernetes 1.33".
    pub what: &'static str,
    /// What to do instead.
    pub fix: &'static str,
}

impl Alias {
    /// Karpenter's refusal of this alias at Kubernetes `minor` (`1.33`), if it refuses it: AL2
    /// from 1.33 (since Karpenter 1.6; AWS builds no AL2 image from 1.33), Windows Server 2025
    /// before 1.35 (since Karpenter 1.9).
    pub fn refused_at(&self, minor: &str) -> Option<Refusal> {
        let number = minor.split_once('.')?.1.parse::<u64>().ok()?;
        match self.family {
            AliasFamily::Al2 if number >= 33 => Some(Refusal {
                since: (1, 6, 0),
                what: "al2 aliases from Kubernetes 1.33 (AWS builds no Amazon Linux 2 image for \
                       1.33 or later)",
                fix: "Move the class to al2023@latest (or bottlerocket@latest): set the alias, and \
                      move any userData to the new family's format (AL2023 reads nodeadm's \
                      NodeConfig, Bottlerocket TOML).",
            }),
            AliasFamily::Windows("2025") if number < 35 => Some(Refusal {
                since: (1, 9, 0),
                what: "windows2025 aliases before Kubernetes 1.35",
                fix: "Use windows2022@latest until the cluster runs Kubernetes 1.35.",
            }),
            _ => None,
        }
    }
}

/// The parameter names of Karpenter's `DescribeImageQuery` for each family.
fn parameters(family: AliasFamily, version: &str, minor: &str) -> Vec<String> {
    let latest = version == LATEST;
    match family {
        AliasFamily::Al2023 => [
            ("x86_64", "standard"),
            ("x86_64", "nvidia"),
            ("x86_64", "neuron"),
            ("arm64", "standard"),
            ("arm64", "nvidia"),
        ]
        .iter()
        .map(|(arch, variant)| {
            let name = if latest {
                "recommended".to_owned()
            } else {
                format!("amazon-eks-node-al2023-{arch}-{variant}-{minor}-{version}")
            };
            format!("/aws/service/eks/optimized-ami/{minor}/amazon-linux-2023/{arch}/{variant}/{name}/image_id")
        })
        .collect(),
        AliasFamily::Al2 => [
            ("amazon-linux-2", "amazon-eks-node"),
            ("amazon-linux-2-arm64", "amazon-eks-arm64-node"),
            ("amazon-linux-2-gpu", "amazon-eks-gpu-node"),
        ]
        .iter()
        .map(|(path, image)| {
            let name = if latest {
                "recommended".to_owned()
            } else {
                format!("{image}-{minor}-{version}")
            };
            format!("/aws/service/eks/optimized-ami/{minor}/{path}/{name}/image_id")
        })
        .collect(),
        AliasFamily::Bottlerocket => {
            // Bottlerocket's SSM paths carry the version without the `v` its releases are
            // named with; Karpenter accepts both (`bottlerocket.go`).
            let version = if latest {
                LATEST
            } else {
                version.trim_start_matches('v')
            };
            ["", "-nvidia"]
                .iter()
                .flat_map(|flavour| {
                    ["x86_64", "arm64"].map(|arch| {
                        format!("/aws/service/bottlerocket/aws-k8s-{minor}{flavour}/{arch}/{version}/image_id")
                    })
                })
                .collect()
        }
        AliasFamily::Windows(year) => vec![format!(
            "/aws/service/ami-windows-latest/Windows_Server-{year}-English-Core-EKS_Optimized-{minor}/image_id"
        )],
    }
}

/// `1.31` → `1.32`.
pub fn next_minor(minor: &str) -> Option<String> {
    let (major, minor) = minor.split_once('.')?;
    let next = minor.parse::<u64>().ok()?.checked_add(1)?;
    Some(format!("{major}.{next}"))
}

/// The Kubernetes minor (`1.31`) of a version as EKS or the API server writes it.
pub fn minor_of(raw: &str) -> Option<String> {
    crate::karpenter_versions::parse_kubernetes_version(raw).map(|(a, b)| format!("{a}.{b}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alias_parameters_are_karpenters_paths() {
        let pinned = Alias::parse("al2023@v20240807").unwrap();
        let names = pinned.parameters("1.31");
        assert_eq!(names.len(), 5);
        assert!(names.contains(&"/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.31-v20240807/image_id".to_owned()));
        assert!(pinned.latest_parameters("1.32").contains(&"/aws/service/eks/optimized-ami/1.32/amazon-linux-2023/arm64/standard/recommended/image_id".to_owned()));
        let al2 = Alias::parse("al2@v20240807").unwrap().parameters("1.29");
        assert!(al2.contains(&"/aws/service/eks/optimized-ami/1.29/amazon-linux-2-arm64/amazon-eks-arm64-node-1.29-v20240807/image_id".to_owned()));
        let br = Alias::parse("bottlerocket@v1.20.0")
            .unwrap()
            .parameters("1.30");
        assert!(br.contains(
            &"/aws/service/bottlerocket/aws-k8s-1.30-nvidia/arm64/1.20.0/image_id".to_owned()
        ));
        let win = Alias::parse("windows2022@latest").unwrap();
        assert!(!win.pinned());
        assert_eq!(win.parameters_to_read("1.31").len(), 1);
        assert_eq!(pinned.parameters_to_read("1.31").len(), 15);
        assert_eq!(Alias::parse("ubuntu@latest"), None);
        // Karpenter compares exactly: `LATEST` is a pinned release of that name, `AL2023` no family.
        let shouting = Alias::parse("al2023@LATEST").unwrap();
        assert!(shouting.pinned());
        assert!(
            shouting
                .parameters("1.34")
                .iter()
                .all(|p| p.ends_with("-1.34-LATEST/image_id"))
        );
        assert_eq!(Alias::parse("AL2023@latest"), None);
        assert_eq!(Alias::parse("al2023@"), None);
    }

    #[test]
    fn minors() {
        assert_eq!(next_minor("1.31").as_deref(), Some("1.32"));
        assert_eq!(next_minor("1.x"), None);
        assert_eq!(minor_of("v1.30.4-eks-a737599").as_deref(), Some("1.30"));
        assert_eq!(minor_of("1.31").as_deref(), Some("1.31"));
    }
}
