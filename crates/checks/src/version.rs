//! Parses Karpenter versions from image tags (`1.8.6`, `v1.0.1`, `1.7.0-rc.1`, or a whole image
//! reference) and compares them with the releases that changed behaviour. Pure: no IO.

use semver::Version;
use std::fmt;

/// First release that stops sending `httpProtocolIPv6` in isolated regions (aws PR #8404).
pub const HTTP_PROTOCOL_IPV6_FIX: (u64, u64, u64) = (1, 7, 0);
/// First release with the relaxed label-domain rules (kubernetes-sigs/karpenter PR #2586).
pub const RELAXED_LABEL_DOMAINS: (u64, u64, u64) = (1, 9, 0);

/// Why a version string could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VersionError {
    pub input: String,
    pub message: String,
}

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:?} is not a Karpenter version: {}",
            self.input, self.message
        )
    }
}

impl std::error::Error for VersionError {}

/// The tag of an image reference (`registry:5000/karpenter/controller:1.8.6@sha256:…` → `1.8.6`),
/// `None` when it has none (digest only, or no `:` after the last `/`). The tag follows the last
/// `:` after the last `/`, so a registry port is not taken for it.
pub fn image_tag(image: &str) -> Option<&str> {
    let without_digest = image.split('@').next().unwrap_or(image);
    let last_segment = without_digest.rsplit('/').next().unwrap_or(without_digest);
    last_segment.rsplit_once(':').map(|(_, tag)| tag.trim())
}

/// Parses a Karpenter version. Accepts a leading `v`, a missing patch (`1.8`), and a full image
/// reference (`public.ecr.aws/karpenter/controller:1.8.6@sha256:...`), taking its tag.
pub fn parse(raw: &str) -> Result<Version, VersionError> {
    let error = |message: String| VersionError {
        input: crate::clip(raw, 128).into_owned(),
        message,
    };
    let s = raw.trim();
    let s = image_tag(s).unwrap_or(s);
    let s = s.strip_prefix(['v', 'V']).unwrap_or(s);
    if s.is_empty() {
        return Err(error("empty".into()));
    }
    match Version::parse(s) {
        Ok(v) => Ok(v),
        Err(first) => {
            // `1.8` and `1.8-rc.1`: add the missing patch.
            let (core, rest) = match s.find(['-', '+']) {
                Some(i) => s.split_at(i),
                None => (s, ""),
            };
            if core.split('.').count() == 2 {
                Version::parse(&format!("{core}.0{rest}")).map_err(|_| error(first.to_string()))
            } else {
                Err(error(first.to_string()))
            }
        }
    }
}

/// Whether `v` is at least `major.minor.patch`. Pre-releases count as their release: release
/// candidates are cut from the release branch and carry its fixes.
pub fn at_least(v: &Version, (major, minor, patch): (u64, u64, u64)) -> bool {
    (v.major, v.minor, v.patch) >= (major, minor, patch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_tags_in_every_shape_parse() {
        for (raw, want) in [
            ("1.8.6", "1.8.6"),
            ("v1.0.1", "1.0.1"),
            ("1.7.0-rc.1", "1.7.0-rc.1"),
            (" V0.37.7 ", "0.37.7"),
            ("1.8", "1.8.0"),
            (
                "public.ecr.aws/karpenter/controller:1.8.6@sha256:abc",
                "1.8.6",
            ),
            ("registry:5000/karpenter/controller:v1.9.0", "1.9.0"),
        ] {
            assert_eq!(parse(raw).unwrap().to_string(), want, "{raw}");
        }
    }

    #[test]
    fn image_tags_skip_registry_ports_and_digests() {
        assert_eq!(
            image_tag("registry:5000/karpenter/controller:1.8.6@sha256:abc"),
            Some("1.8.6")
        );
        assert_eq!(image_tag("registry:5000/karpenter/controller"), None);
        assert_eq!(image_tag("karpenter/controller@sha256:abc"), None);
        assert_eq!(image_tag("1.8.6"), None);
    }

    #[test]
    fn non_versions_are_errors() {
        for raw in [
            "",
            "latest",
            "v",
            "1",
            "1.x.0",
            "public.ecr.aws/karpenter/controller",
            "١.٢.٣",
        ] {
            assert!(parse(raw).is_err(), "{raw:?}");
        }
    }

    #[test]
    fn release_candidates_count_as_their_release() {
        assert!(at_least(
            &parse("1.7.0-rc.1").unwrap(),
            HTTP_PROTOCOL_IPV6_FIX
        ));
        assert!(!at_least(&parse("1.6.9").unwrap(), HTTP_PROTOCOL_IPV6_FIX));
        assert!(at_least(&parse("2.0.0").unwrap(), RELAXED_LABEL_DOMAINS));
        assert!(!at_least(&parse("1.8.6").unwrap(), RELAXED_LABEL_DOMAINS));
    }
}
