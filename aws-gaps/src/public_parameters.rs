//! The public SSM parameters AWS publishes for EKS-optimized images, which moto lacks (it ships
//! a few other families under `/aws/service/` and refuses to create names under `/aws`). From
//! the EKS user guide ("Retrieve recommended Amazon Linux AMI IDs", "Retrieve recommended
//! Bottlerocket AMI IDs"): for each Kubernetes version EKS supports, the recommended image of
//! each Amazon Linux 2023 architecture and variant, of Amazon Linux 2 (whose last version is
//! 1.32), and Bottlerocket's latest. Image ids are made up, one per name. No IO.

use std::collections::BTreeMap;

/// The Kubernetes versions the bed's AWS publishes images for.
pub const PUBLISHED_MINORS: std::ops::RangeInclusive<u32> = 26..=34;
/// The last version EKS builds Amazon Linux 2 images for.
const LAST_AL2_MINOR: u32 = 32;

/// The architectures and variants AWS builds Amazon Linux 2023 EKS images for.
const AL2023_VARIANTS: [(&str, &str); 5] = [
    ("x86_64", "standard"),
    ("x86_64", "nvidia"),
    ("x86_64", "neuron"),
    ("arm64", "standard"),
    ("arm64", "nvidia"),
];

/// The recommended (`@latest`) Amazon Linux 2023 parameters of Kubernetes `minor` (`1.34`), one
/// per architecture and variant.
pub fn al2023_recommended(minor: &str) -> Vec<String> {
    AL2023_VARIANTS
        .iter()
        .map(|(arch, variant)| {
            format!(
                "/aws/service/eks/optimized-ami/{minor}/amazon-linux-2023/{arch}/{variant}/recommended/image_id"
            )
        })
        .collect()
}

/// Every parameter published from the start.
pub(super) fn published() -> BTreeMap<String, String> {
    let mut names = Vec::new();
    for minor in PUBLISHED_MINORS {
        let v = format!("1.{minor}");
        names.extend(al2023_recommended(&v));
        if minor <= LAST_AL2_MINOR {
            for flavour in [
                "amazon-linux-2",
                "amazon-linux-2-arm64",
                "amazon-linux-2-gpu",
            ] {
                names.push(format!(
                    "/aws/service/eks/optimized-ami/{v}/{flavour}/recommended/image_id"
                ));
            }
        }
        for variant in ["", "-nvidia"] {
            for arch in ["x86_64", "arm64"] {
                names.push(format!(
                    "/aws/service/bottlerocket/aws-k8s-{v}{variant}/{arch}/latest/image_id"
                ));
            }
        }
    }
    names
        .into_iter()
        .enumerate()
        .map(|(i, name)| (name, format!("ami-0e{i:015x}")))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_supported_version_has_its_recommended_images_and_al2_ends_at_1_32() {
        let published = super::published();
        assert!(published.contains_key(
            "/aws/service/eks/optimized-ami/1.29/amazon-linux-2023/x86_64/standard/recommended/image_id"
        ));
        assert!(published.contains_key(
            "/aws/service/eks/optimized-ami/1.32/amazon-linux-2-arm64/recommended/image_id"
        ));
        assert!(!published.contains_key(
            "/aws/service/eks/optimized-ami/1.33/amazon-linux-2/recommended/image_id"
        ));
        assert!(!published.contains_key(
            "/aws/service/eks/optimized-ami/1.35/amazon-linux-2023/x86_64/standard/recommended/image_id"
        ));
        let ids: std::collections::BTreeSet<&String> = published.values().collect();
        assert_eq!(ids.len(), published.len(), "one image per name");
    }
}
