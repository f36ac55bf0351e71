//! Scenarios of `AmisResolvable` beyond one sentence per reason: an alias published only for
//! some variants stays True, the next Kubernetes minor is a warning only once AWS publishes it,
//! reads that failed are Unknown never False, builds of one's own are never judged against
//! `amiFamily`, and deprecated images are a warning. Pure.

use super::reasons::condition_of;
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::{karpenter_condition, now};
use karpenter_health_api::ConditionType;

fn amis(f: &Facts) -> (String, String, String, Vec<String>) {
    condition_of(f, ConditionType::AmisResolvable)
}

const PINNED: &str = "al2023@v20240807";
const X86_1_29: &str = "/aws/service/eks/optimized-ami/1.29/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.29-v20240807/image_id";
const X86_1_30: &str = "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/amazon-eks-node-al2023-x86_64-standard-1.30-v20240807/image_id";
const LATEST_1_30: &str =
    "/aws/service/eks/optimized-ami/1.30/amazon-linux-2023/x86_64/standard/recommended/image_id";

fn only(found: &'static [&'static str]) -> impl Fn(&str) -> Observed<String> {
    move |name| {
        if found.contains(&name) {
            Observed::Found("ami-0published".into())
        } else {
            Observed::Absent
        }
    }
}

#[test]
fn one_published_variant_is_enough_and_the_next_minor_is_judged_only_once_published() {
    // Published for 1.29 (x86_64 standard only) and 1.30.
    let f = Facts::healthy().with_ami_alias(PINNED, "1.29", only(&[X86_1_29, X86_1_30]));
    let (status, _, message, warnings) = amis(&f);
    assert_eq!(status, "True", "{message}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        message.contains("1.29") && message.contains("1.30"),
        "{message}"
    );

    // AWS has not published 1.30 images at all yet: nothing to warn about.
    let f = Facts::healthy().with_ami_alias(PINNED, "1.29", only(&[X86_1_29]));
    let (status, _, message, warnings) = amis(&f);
    assert_eq!(status, "True", "{message}");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert!(
        message.contains("no EKS image for Kubernetes 1.30"),
        "{message}"
    );

    // AWS publishes 1.30, the pinned release was never built for it: a warning, not False.
    let f = Facts::healthy().with_ami_alias(PINNED, "1.29", only(&[X86_1_29, LATEST_1_30]));
    let (status, _, message, warnings) = amis(&f);
    assert_eq!(status, "True", "{message}");
    assert_eq!(warnings, vec!["AmiAliasNotPublishedForNextMinor"]);
    assert!(
        !message.contains("1.30"),
        "a True message never contradicts the warning: {message}"
    );
}

#[test]
fn what_was_not_read_is_unknown_never_false() {
    let denied = || Observed::unknown(UnknownCause::AccessDenied, "ssm:GetParameter denied");
    for (what, f) in [
        (
            "one parameter denied, the rest absent",
            Facts::healthy().with_ami_alias(PINNED, "1.29", |name| {
                if name == X86_1_29 {
                    denied()
                } else {
                    Observed::Absent
                }
            }),
        ),
        (
            "the Kubernetes version not known",
            Facts::healthy()
                .with_ami_alias(PINNED, "1.29", |_| Observed::Absent)
                .with(|f| {
                    f.aws.ami_parameters = Some(Observed::unknown(
                        UnknownCause::NotObserved,
                        "the cluster's Kubernetes version is not known",
                    ))
                }),
        ),
        (
            "not asked yet",
            Facts::healthy().with(|f| f.aws.ami_parameters = None),
        ),
        (
            "Karpenter resolved no image yet",
            Facts::healthy().with_ami_family("AL2023", &[]),
        ),
    ] {
        let (status, reason, message, _) = amis(&f);
        assert_eq!(status, "Unknown", "{what}: {reason} {message}");
    }
    // Denied for the next minor only: True, and the message says what is not known.
    let f = Facts::healthy().with_ami_alias(PINNED, "1.29", |name| {
        if name == X86_1_29 {
            Observed::Found("ami-0published".into())
        } else if name.contains("/1.30/") {
            denied()
        } else {
            Observed::Absent
        }
    });
    let (status, _, message, warnings) = amis(&f);
    assert_eq!(status, "True", "{message}");
    assert!(warnings.is_empty());
    assert!(message.contains("not known"), "{message}");
}

#[test]
fn latest_in_capitals_is_a_release_of_that_name_and_resolves_nothing() {
    // Karpenter compares the version with `latest` exactly (aws/karpenter-provider-aws
    // pkg/providers/amifamily/al2023.go): `@LATEST` reads release "LATEST", which AWS never built.
    let published_recommended = |name: &str| {
        if name.ends_with("/recommended/image_id") {
            Observed::Found("ami-0latest".into())
        } else {
            Observed::Absent
        }
    };
    let f = Facts::healthy()
        .with_ami_alias("al2023@LATEST", "1.29", published_recommended)
        .with_no_images_resolved();
    let (status, reason, message, _) = amis(&f);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "AmiAliasNotPublished")
    );
    assert!(message.contains("Write @latest in lower case"), "{message}");
    let f = Facts::healthy().with_ami_alias("al2023@latest", "1.29", published_recommended);
    assert_eq!(amis(&f).0, "True");
}

#[test]
fn latest_follows_aws_and_is_never_warned_about_the_next_minor() {
    let f = Facts::healthy().with_ami_alias("al2023@latest", "1.29", |name| {
        if name.contains("/1.29/") {
            Observed::Found("ami-0latest".into())
        } else {
            Observed::Absent
        }
    });
    let (status, _, message, warnings) = amis(&f);
    assert_eq!(status, "True", "{message}");
    assert!(warnings.is_empty(), "{warnings:?}");
    // A Kubernetes version AWS publishes nothing for: even @latest resolves nothing, for a
    // class Karpenter holds no image of.
    let f = Facts::healthy()
        .with_ami_alias("bottlerocket@latest", "1.29", |_| Observed::Absent)
        .with_no_images_resolved();
    assert_eq!(amis(&f).1, "AmiAliasNotPublished");
}

/// Karpenter refuses some aliases before reading any parameter (aws/karpenter-provider-aws
/// `pkg/providers/amifamily/ami.go` `DescribeImageQueries`): AL2 from 1.33 (since 1.6), Windows
/// Server 2025 before 1.35 (since 1.9), with `AMIsReady=False UnsupportedAlias`
/// (`pkg/controllers/nodeclass/ami.go`), whichever release the alias pins and whatever images
/// it holds. The fixture's Karpenter is 1.8.6.
#[test]
fn al2_from_1_33_and_windows_2025_before_1_35_are_refused_by_karpenter() {
    let published = |_: &str| Observed::Found("ami-0published".into());
    for alias in ["al2@latest", "al2@v20250101"] {
        let (status, reason, message, _) =
            amis(&Facts::healthy().with_ami_alias(alias, "1.33", published));
        assert_eq!(
            (status.as_str(), reason.as_str()),
            ("False", "AmiAliasUnsupported"),
            "{alias}: {message}"
        );
        assert!(
            message.contains("al2023@latest") && !message.contains("not published"),
            "the fix names a family that has images, never 'not published': {message}"
        );
    }
    // Windows Server 2025 refused at 1.34 by 1.9 and later; 1.8.6 does not refuse it.
    let windows = |version: &'static str| {
        Facts::healthy()
            .with_ami_alias("windows2025@latest", "1.34", published)
            .with(move |f| {
                if let Observed::Found(k) = &mut f.cluster.karpenter {
                    k.version = Some(version.into());
                }
            })
    };
    assert_eq!(amis(&windows("1.9.0")).1, "AmiAliasUnsupported");
    // No 1.8.6 case: its CRD admits no windows2025 alias (aws/karpenter-provider-aws v1.8.6
    // `pkg/apis/crds/karpenter.k8s.aws_ec2nodeclasses.yaml` lists al2, al2023, bottlerocket,
    // windows2019 and windows2022), so such a class never reaches that release.
    // Karpenter's own UnsupportedAlias decides when its version is not known.
    let said = windows("unknown").with(|f| {
        if let Some(status) = f.cluster.node_class.status.as_mut() {
            status.conditions.retain(|c| c.type_ != "AMIsReady");
            let mut refused = karpenter_condition("AMIsReady", "False", now());
            refused.reason = Some("UnsupportedAlias".into());
            status.conditions.push(refused);
        }
    });
    assert_eq!(amis(&said).1, "AmiAliasUnsupported");
    assert_eq!(
        amis(&windows("1.9.0").with_ami_alias("windows2025@latest", "1.35", published)).0,
        "True"
    );

    // At 1.32 an AL2 alias still works: a warning before the upgrade, pinned or latest, and
    // never "AWS has published no 1.33 images".
    for alias in ["al2@latest", "al2@v20250101"] {
        let (status, _, message, warnings) =
            amis(&Facts::healthy().with_ami_alias(alias, "1.32", published));
        assert_eq!(status, "True", "{alias}: {message}");
        assert_eq!(warnings, vec!["AmiAliasRefusedAfterUpgrade"], "{alias}");
        assert!(!message.contains("1.33"), "{alias}: {message}");
    }
}

#[test]
fn an_alias_that_stops_resolving_is_a_warning_while_karpenter_keeps_its_images() {
    // Karpenter leaves status.amis and AMIsReady alone when resolving fails and launches from
    // them (aws/karpenter-provider-aws pkg/controllers/nodeclass/ami.go).
    let unpublished =
        || Facts::healthy().with_ami_alias("al2023@latest", "1.29", |_| Observed::Absent);
    let (status, reason, message, warnings) = amis(&unpublished());
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "AmisResolved"),
        "{message}"
    );
    assert_eq!(warnings, vec!["AmiAliasNoLongerResolves"]);
    // Karpenter holds none: False.
    assert_eq!(
        amis(&unpublished().with_no_images_resolved()).1,
        "AmiAliasNotPublished"
    );
    // Its AMIsReady speaks for an older generation of the class (edited since): False.
    let mut stale = karpenter_condition("AMIsReady", "True", now());
    stale.observed_generation = Some(0);
    assert_eq!(
        amis(&unpublished().with_karpenter_condition(stale)).1,
        "AmiAliasNotPublished"
    );
    // Refused (UnsupportedAlias): False.
    let refused = karpenter_condition("AMIsReady", "False", now());
    assert_eq!(
        amis(&unpublished().with_karpenter_condition(refused)).1,
        "AmiAliasNotPublished"
    );
}

#[test]
fn only_official_builds_of_another_family_are_judged_against_ami_family() {
    for (what, family, names) in [
        (
            "images of one's own",
            "AL2023",
            vec!["golden-al2023-2024-10", "team-base-image"],
        ),
        (
            "the right family",
            "AL2",
            vec![
                "amazon-eks-node-1.29-v20240807",
                "amazon-eks-arm64-node-1.29-v20240807",
            ],
        ),
        (
            "Custom writes no user data of its own",
            "Custom",
            vec!["bottlerocket-aws-k8s-1.29-x86_64-v1.20.0-abcdef12"],
        ),
        (
            "one of the images is the class's own: Karpenter may never use the other",
            "AL2023",
            vec!["golden-al2023", "amazon-eks-node-1.29-v20240807"],
        ),
    ] {
        let (status, _, message, _) = amis(&Facts::healthy().with_ami_family(family, &names));
        assert_eq!(status, "True", "{what}: {message}");
    }
    let (_, _, message, warnings) = amis(&Facts::healthy().with_ami_family(
        "AL2023",
        &["golden-al2023", "amazon-eks-node-1.29-v20240807"],
    ));
    assert_eq!(warnings, vec!["AmiFamilyPartlyMismatched"], "{message}");
    let (status, reason, message, _) = amis(&Facts::healthy().with_ami_family(
        "AL2",
        &["amazon-eks-node-al2023-x86_64-standard-1.29-v20240807"],
    ));
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "AmiFamilyMismatch")
    );
    assert!(
        message.contains("amiFamily is AL2") && message.contains("AL2023"),
        "{message}"
    );
}

#[test]
fn a_deprecated_image_is_a_warning() {
    let f = Facts::healthy().with(|f| {
        if let Some(status) = f.cluster.node_class.status.as_mut() {
            status.amis[0].deprecated = Some(true);
        }
    });
    let (status, _, message, warnings) = amis(&f);
    assert_eq!(status, "True", "{message}");
    assert_eq!(warnings, vec!["AmiDeprecated"]);
    assert!(!message.contains("deprecated"), "{message}");
}

#[test]
fn images_karpenter_resolved_for_an_older_generation_prove_no_mismatch() {
    // amiFamily just edited to AL2: status.amis still lists the images of the generation before.
    let f = Facts::healthy()
        .with_ami_family(
            "AL2",
            &["amazon-eks-node-al2023-x86_64-standard-1.29-v20240807"],
        )
        .with(|f| f.cluster.node_class.metadata.generation = Some(2));
    let (status, reason, message, _) = amis(&f);
    assert_eq!(status, "Unknown", "{reason}: {message}");
    assert!(message.contains("older"), "{message}");
}

#[test]
fn images_named_by_id_are_false_only_when_none_of_them_can_launch() {
    use crate::testing::image;
    // Both ids gone or disabled, and nothing else selected: nothing resolves.
    let f = Facts::healthy().with_image_ids(
        &["ami-0gone", "ami-0off"],
        vec![image("ami-0off", "disabled", None)],
    );
    let (status, reason, message, _) = amis(&f);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "AmiUnavailable")
    );
    assert!(
        message.contains("ami-0gone is deregistered or no longer shared")
            && message.contains("ami-0off (image-ami-0off) is disabled"),
        "{message}"
    );

    // One of two still available: launches go on from it, a warning.
    let f = Facts::healthy().with_image_ids(
        &["ami-0gone", "ami-0ok"],
        vec![image("ami-0ok", "available", None)],
    );
    let (status, _, message, warnings) = amis(&f);
    assert_eq!(status, "True", "{message}");
    assert_eq!(warnings, vec!["AmiSomeUnavailable"]);
    assert!(!message.contains("available"), "{message}");

    // A pending image (just copied) is not judged.
    let f =
        Facts::healthy().with_image_ids(&["ami-0new"], vec![image("ami-0new", "pending", None)]);
    assert_eq!(amis(&f).0, "True");

    // The same gone id beside a tag term: Karpenter resolves from the tags, a warning only.
    let f = Facts::healthy()
        .with_image_ids(&["ami-0gone"], Vec::new())
        .with(|f| {
            f.cluster.node_class.spec.ami_selector_terms.push(
                karpenter_health_api::karpenter::AmiSelectorTerm {
                    tags: [("team".to_owned(), "a".to_owned())].into(),
                    ..Default::default()
                },
            );
        });
    let (status, _, message, warnings) = amis(&f);
    assert_eq!(status, "True", "{message}");
    assert_eq!(warnings, vec!["AmiSomeUnavailable"]);
}

#[test]
fn describe_images_that_failed_is_unknown_only_where_it_could_be_false() {
    let unread = || Some(Observed::unknown(UnknownCause::Throttled, "DescribeImages"));
    let by_id = Facts::healthy()
        .with_image_ids(&["ami-0a"], Vec::new())
        .with(|f| f.aws.images = unread());
    let (status, _, message, _) = amis(&by_id);
    assert_eq!(status, "Unknown", "{message}");
    assert!(message.contains("DescribeImages"), "{message}");
    // An alias resolves without the images' answer: nothing said, never Unknown.
    let alias = Facts::healthy().with(|f| f.aws.images = unread());
    let (status, _, message, warnings) = amis(&alias);
    assert_eq!(status, "True", "{message}");
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn a_deprecation_within_thirty_days_is_a_warning_and_one_later_is_not() {
    use crate::testing::{image, now};
    use jiff::SignedDuration;
    let at = |days: i64| Some(now() + SignedDuration::from_hours(24 * days));
    let soon = Facts::healthy().with_image_ids(
        &["ami-0soon"],
        vec![image("ami-0soon", "available", at(12))],
    );
    let (status, _, message, warnings) = amis(&soon);
    assert_eq!(status, "True", "{message}");
    assert_eq!(warnings, vec!["AmiDeprecationAhead"]);
    let later = Facts::healthy().with_image_ids(
        &["ami-0later"],
        vec![image("ami-0later", "available", at(90))],
    );
    assert!(amis(&later).3.is_empty());
    // Already deprecated: Karpenter's `deprecated` says so (AmiDeprecated), not this warning.
    let past = Facts::healthy().with_image_ids(
        &["ami-0past"],
        vec![image("ami-0past", "available", at(-3))],
    );
    assert!(!amis(&past).3.contains(&"AmiDeprecationAhead".to_owned()));
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        a_published_alias_is_amis_resolved:
            Facts::healthy() => AmisResolvable is True because AmisResolved;
        a_pinned_alias_never_built_for_the_cluster_version_is_ami_alias_not_published:
            Facts::healthy()
                .with_ami_alias("al2023@v20230101", "1.29", |_| Observed::Absent)
                .with_no_images_resolved()
            => AmisResolvable is False because AmiAliasNotPublished;
        an_al2_alias_at_kubernetes_1_33_is_ami_alias_unsupported:
            Facts::healthy().with_ami_alias("al2@latest", "1.33", |_| Observed::Found("ami-0al2".into()))
            => AmisResolvable is False because AmiAliasUnsupported;
        al2023_user_data_on_bottlerocket_images_is_ami_family_mismatch:
            Facts::healthy().with_ami_family("AL2023", &["bottlerocket-aws-k8s-1.29-x86_64-v1.20.0-abcdef12"])
            => AmisResolvable is False because AmiFamilyMismatch;
        every_image_named_by_id_deregistered_is_ami_unavailable:
            Facts::healthy().with_image_ids(&["ami-0gone"], Vec::new())
            => AmisResolvable is False because AmiUnavailable;
    }
}

/// Karpenter before 1.6 does not refuse AL2 at 1.33, and AWS publishes no AL2 image for 1.33: its
/// `DescribeImageQuery` fails, the AMI controller returns before writing the status
/// (aws/karpenter-provider-aws v1.5 `pkg/providers/amifamily/al2.go`,
/// `pkg/controllers/nodeclass/ami.go`), and it keeps launching from the 1.32 images it holds. The
/// message says so, and the fix is the move to AL2023, never a pin or an upgrade of Karpenter.
#[test]
fn al2_at_1_33_on_karpenter_before_1_6_launches_from_the_images_it_held() {
    let al2_at_1_33 = |version: &str| {
        Facts::healthy()
            .with_ami_alias("al2@latest", "1.33", |_| Observed::Absent)
            .with_karpenter_version(version)
    };
    let (status, _, message, warnings) = amis(&al2_at_1_33("1.5.8"));
    assert_eq!(status, "True", "{message}");
    assert_eq!(warnings, vec!["AmiAliasNoLongerResolves"]);
    let text = super::reasons::status(&al2_at_1_33("1.5.8"))
        .findings
        .into_iter()
        .find(|f| f.reason == "AmiAliasNoLongerResolves")
        .map(|f| f.message)
        .unwrap_or_default();
    assert!(
        text.contains("Karpenter 1.5.8 keeps launching from the image(s) it resolved for an earlier")
            && text.contains("Karpenter 1.6.0 and later refuse")
            && text.contains("al2023@latest")
            && !text.contains("Pin a release"),
        "{text}"
    );
    // Holding no image, it launches nothing; from 1.6 Karpenter refuses the alias outright.
    assert_eq!(amis(&al2_at_1_33("1.5.8").with_no_images_resolved()).1, "AmiAliasNotPublished");
    assert_eq!(amis(&al2_at_1_33("1.6.0")).1, "AmiAliasUnsupported");
}
