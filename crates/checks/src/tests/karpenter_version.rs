//! Scenarios of `KarpenterVersionCompatible` beyond one sentence per reason: where the Kubernetes
//! version comes from, conversion webhooks the API server never calls, and stored versions. Pure.

use super::reasons::status;
use crate::facts::{Facts, Observed, UnknownCause};
use crate::testing::*;
use karpenter_health_api::ConditionType;

fn version(f: &Facts) -> (String, String, String) {
    let s = status(f);
    let c = s
        .condition(ConditionType::KarpenterVersionCompatible)
        .unwrap();
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[test]
fn the_kubernetes_version_falls_back_to_the_api_server_and_says_so() {
    let f = Facts::healthy().with(|f| f.aws.eks_cluster = unknown(UnknownCause::AccessDenied));
    let (s, r, m) = version(&f);
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("True", "KarpenterVersionSupported"),
        "{m}"
    );
    assert!(m.contains("/version"), "{m}");
    let (_, _, m) = version(&Facts::healthy());
    assert!(m.contains("EKS DescribeCluster"), "{m}");
    let blind = f.with(|f| f.cluster.apiserver_version = unknown(UnknownCause::AccessDenied));
    let (s, r, m) = version(&blind);
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("Unknown", "AwsAccessDenied"),
        "{m}"
    );
}

#[test]
fn a_conversion_webhook_the_api_server_never_calls_is_a_warning_not_a_failure() {
    let leftover = |served: &[&str]| {
        let served: Vec<String> = served.iter().map(|v| (*v).to_owned()).collect();
        Facts::healthy()
            .with_crd("nodepools.karpenter.sh", |c| {
                c.conversion_service = Some("kube-system/karpenter".into());
                c.served_versions = served.clone();
            })
            .with(|f| {
                f.cluster
                    .service_endpoints
                    .insert("kube-system/karpenter".into(), Observed::Absent);
            })
    };
    // One version served and stored: never called, so only a warning.
    let f = leftover(&["v1"]);
    let (s, r, m) = version(&f);
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("True", "KarpenterVersionSupported"),
        "{m}"
    );
    let st = status(&f);
    let warning = st
        .findings
        .iter()
        .find(|w| w.reason == "UnusedConversionWebhookUnreachable")
        .expect("a warning");
    assert!(
        warning.message.contains("nodepools.karpenter.sh"),
        "{}",
        warning.message
    );
    // Its Service's endpoints unknown: still no Unknown, since it is never called.
    let unseen = leftover(&["v1"]).with(|f| {
        f.cluster.service_endpoints.clear();
    });
    assert_eq!(version(&unseen).0, "True");
    // A second served version: the API server converts through it, so it fails for real.
    let (s, r, m) = version(&leftover(&["v1", "v1beta1"]));
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("False", "WebhookServiceMissing"),
        "{m}"
    );
}

#[test]
fn stored_v1beta1_is_only_stale_from_karpenter_1_1_and_webhooks_with_ready_endpoints_pass() {
    let stored = Facts::healthy()
        .with_crd("nodepools.karpenter.sh", |c| {
            c.stored_versions.push("v1beta1".into());
            c.conversion_service = Some("kube-system/karpenter".into());
        })
        .with(|f| {
            f.cluster
                .service_endpoints
                .insert("kube-system/karpenter".into(), Observed::Found(1));
        });
    let (s, r, m) = version(&stored.clone().with_karpenter_version("1.0.8"));
    // 1.0.8 on Kubernetes 1.29, v1beta1 stored, conversion webhook served: all fine.
    assert_eq!(
        (s.as_str(), r.as_str()),
        ("True", "KarpenterVersionSupported"),
        "{m}"
    );
    let (s, r, _) = version(&stored);
    assert_eq!((s.as_str(), r.as_str()), ("False", "StoredVersionsStale"));
}

/// A Kubernetes minor newer than the built-in matrix is Unknown until the operator is given its
/// row; then it is judged like any other, and the message names the table it used.
#[test]
fn a_compatibility_row_given_at_run_time_judges_a_newer_kubernetes_and_says_so() {
    use crate::karpenter_versions::parse_compatibility_override;
    use crate::{Settings, evaluate};
    let on_1_37 = Facts::healthy().with(|f| {
        if let Observed::Found(e) = &mut f.aws.eks_cluster {
            e.version = Some("1.37".into());
        }
    });
    let judged = |rows: &str| {
        let settings = Settings {
            kubernetes_compatibility: parse_compatibility_override(rows).unwrap(),
            ..Settings::default()
        };
        let s = evaluate(&on_1_37, &settings, None, now());
        let c = s
            .condition(ConditionType::KarpenterVersionCompatible)
            .unwrap()
            .clone();
        (c.status, c.reason, c.message)
    };
    let (s, r, m) = judged("");
    assert_eq!((s.as_str(), r.as_str()), ("Unknown", "KubernetesVersionNotInMatrix"), "{m}");
    assert!(m.contains("--kubernetes-compatibility 1.37="), "{m}");
    // The healthy fixture runs Karpenter 1.8.6.
    let (s, r, m) = judged("1.37=1.8.0");
    assert_eq!((s.as_str(), r.as_str()), ("True", "KarpenterVersionSupported"), "{m}");
    assert!(m.contains("needs 1.8.0 or later: the compatibility rows this operator was given"), "{m}");
    let (s, r, m) = judged("1.37=1.15.0");
    assert_eq!((s.as_str(), r.as_str()), ("False", "KubernetesVersionUnsupported"), "{m}");
    assert!(m.contains("(the compatibility rows this operator was given"), "{m}");
    // A row for another minor leaves 1.37 unknown, and the message lists what it was given.
    let (s, _, m) = judged("1.38=1.17.0");
    assert_eq!(s, "Unknown", "{m}");
    assert!(m.contains("the rows it was given (1.38)"), "{m}");
    let (_, _, m) = version(&Facts::healthy());
    assert!(m.contains("karpenter.sh compatibility matrix, as built in"), "{m}");
}

/// One sentence per reason of this condition (`sentences!`, in `tests/mod.rs`).
pub(crate) mod by_reason {
    use crate::tests::reasons::prelude::*;

    sentences! {
        karpenter_1_8_on_kubernetes_1_29_is_karpenter_version_supported:
            Facts::healthy() => KarpenterVersionCompatible is True because KarpenterVersionSupported;
        karpenter_1_0_1_on_kubernetes_1_31_is_kubernetes_version_unsupported:
            Facts::healthy().with_karpenter_version("1.0.1").with(|f| if let Observed::Found(e) = &mut f.aws.eks_cluster { e.version = Some("1.31".into()) })
            => KarpenterVersionCompatible is False because KubernetesVersionUnsupported;
        kubernetes_newer_than_the_matrix_is_kubernetes_version_not_in_matrix:
            Facts::healthy().with(|f| if let Observed::Found(e) = &mut f.aws.eks_cluster { e.version = Some("1.99".into()) })
            => KarpenterVersionCompatible is Unknown because KubernetesVersionNotInMatrix;
        a_nodepool_crd_without_status_nodes_under_1_8_6_is_crds_older_than_controller:
            Facts::healthy().with_crd("nodepools.karpenter.sh", |c| { c.fields.remove("status.nodes"); })
            => KarpenterVersionCompatible is False because CrdsOlderThanController;
        a_stored_v1beta1_on_1_8_is_stored_versions_stale:
            Facts::healthy().with_crd("nodeclaims.karpenter.sh", |c| c.stored_versions.push("v1beta1".into()))
            => KarpenterVersionCompatible is False because StoredVersionsStale;
        a_conversion_webhook_of_a_crd_serving_two_versions_to_a_missing_service_is_webhook_service_missing:
            Facts::healthy().with_crd("nodepools.karpenter.sh", |c| { c.conversion_service = Some("kube-system/karpenter".into()); c.served_versions.push("v1beta1".into()); })
                .with(|f| { f.cluster.service_endpoints.insert("kube-system/karpenter".into(), Observed::Absent); })
            => KarpenterVersionCompatible is False because WebhookServiceMissing;
    }
}
