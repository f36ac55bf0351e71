//! `KarpenterVersionCompatible`: the installed Karpenter supports the cluster's Kubernetes
//! version (the karpenter.sh compatibility matrix, [`crate::karpenter_versions`]), its CRDs are
//! not older than the controller, no `v1beta1` is left in the CRDs' `status.storedVersions` on
//! Karpenter 1.1 or later (1.1 dropped v1beta1 and its conversion webhook, so applying its CRDs
//! over stored v1beta1 fails: aws/karpenter-provider-aws #6271, #7629, #7630, #7134), and no
//! Karpenter webhook points at a Service without ready endpoints. Pure: no IO.

use crate::facts::Observed;
use crate::karpenter_versions::{self, CRD_FIELDS, Support};
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use karpenter_health_api::{ConditionType, Reason, SubjectRef};
use semver::Version;
use std::collections::BTreeSet;

/// The release that removed v1beta1 from Karpenter's CRDs.
pub const V1BETA1_DROPPED: (u64, u64, u64) = (1, 1, 0);

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::KarpenterVersionCompatible, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(
        ConditionType::KarpenterVersionCompatible,
        "karpenter-version",
    );
    let mut ok = Vec::new();
    match &ctx.version {
        Err(why) => c.unknown(why.clone()),
        Ok(version) => {
            kubernetes_support(ctx, &mut c, version, &mut ok);
            crds(ctx, &mut c, version);
        }
    }
    webhooks(ctx, &mut c);
    let version = ctx
        .version
        .as_ref()
        .map(ToString::to_string)
        .unwrap_or_default();
    ok.push(format!(
        "its CRDs match controller {version}, none stores v1beta1, and every Karpenter webhook \
         the API server calls reaches a ready Service"
    ));
    c.finish(
        Reason::KarpenterVersionSupported,
        format!("{}.", ok.join("; ")),
    )
}

/// The cluster's Kubernetes version, where it came from, and (for the API server's fallback) why
/// EKS could not say.
fn kubernetes_version(ctx: &Context) -> Result<(String, &'static str, Option<Why>), Why> {
    let eks = match &ctx.facts.aws.eks_cluster {
        Observed::Found(eks) => match eks.version.as_deref().filter(|v| !v.is_empty()) {
            Some(v) => return Ok((v.to_owned(), "EKS DescribeCluster", None)),
            None => Why::new(
                Reason::NotObserved,
                "EKS DescribeCluster returned no version.",
            ),
        },
        Observed::Absent => Why::new(Reason::NotObserved, "EKS has no cluster of this name."),
        Observed::Unknown(u) => Why::unobserved("The EKS cluster", u),
    };
    match &ctx.facts.cluster.apiserver_version {
        Observed::Found(v) => Ok((v.clone(), "the API server's /version", Some(eks))),
        Observed::Unknown(u) => {
            let api = Why::unobserved("The API server's /version", u);
            Err(Why::new(
                eks.reason,
                format!("{} {}", eks.message, api.message),
            ))
        }
        Observed::Absent => Err(eks),
    }
}

fn kubernetes_support(ctx: &Context, c: &mut Check, version: &Version, ok: &mut Vec<String>) {
    let (raw, source, eks_unknown) = match kubernetes_version(ctx) {
        Ok(v) => v,
        Err(why) => return c.unknown(why),
    };
    let shown = crate::clip(&raw, 64);
    // The fallback only decides when the matrix knows its answer; otherwise the cause is that
    // EKS could not be read, which is what to fix.
    let rows = &ctx.settings.kubernetes_compatibility;
    let known = karpenter_versions::parse_kubernetes_version(&raw).is_some_and(|(a, b)| {
        karpenter_versions::first_supporting(a, b, rows) != Support::NotInMatrix
    });
    if let Some(eks) = eks_unknown.filter(|_| !known) {
        return c.unknown(Why::new(
            eks.reason,
            format!(
                "{} The API server's /version ({shown}) is not in the compatibility matrix.",
                eks.message
            ),
        ));
    }
    let Some((major, minor)) = karpenter_versions::parse_kubernetes_version(&raw) else {
        return c.unknown(Why::new(
            Reason::KubernetesVersionNotInMatrix,
            format!("The Kubernetes version {shown:?} (from {source}) could not be read."),
        ));
    };
    match karpenter_versions::first_supporting(major, minor, rows) {
        Support::NotInMatrix => c.unknown(Why::new(
            Reason::KubernetesVersionNotInMatrix,
            format!(
                "Kubernetes {major}.{minor} (from {source}) is not in the compatibility matrix \
                 this karpenter-health knows (1.{}-1.{}){}: whether Karpenter {version} supports \
                 it, this karpenter-health does not know. Give the row with \
                 --kubernetes-compatibility 1.{minor}=<first Karpenter release supporting it> \
                 (chart: settings.kubernetesCompatibility).",
                karpenter_versions::COMPATIBILITY[0].0,
                karpenter_versions::COMPATIBILITY[karpenter_versions::COMPATIBILITY.len() - 1].0,
                given_rows(rows),
            ),
        )),
        Support::From(first, table) if strip_pre(version) < first => c.fail(
            Reason::KubernetesVersionUnsupported,
            format!(
                "Karpenter {version} does not support Kubernetes {major}.{minor} (from {source}): \
                 Kubernetes {major}.{minor} needs Karpenter {first} or later ({}). Upgrade \
                 Karpenter and its CRDs.",
                table.named()
            ),
            vec![
                ctx.node_class_subject(),
                SubjectRef::new("Deployment", "karpenter"),
            ],
        ),
        Support::From(first, table) => ok.push(format!(
            "Karpenter {version} supports Kubernetes {major}.{minor} (from {source}; needs \
             {first} or later: {})",
            table.named()
        )),
    }
}

/// The override's minors, as a message adds them to the built-in range.
fn given_rows(rows: &karpenter_versions::CompatibilityOverride) -> String {
    if rows.is_empty() {
        return String::new();
    }
    let minors: Vec<String> = rows.keys().map(|m| format!("1.{m}")).collect();
    format!(" or the rows it was given ({})", minors.join(", "))
}

/// A pre-release of X counts as X for the matrix (release candidates carry the support).
fn strip_pre(v: &Version) -> Version {
    Version::new(v.major, v.minor, v.patch)
}

fn crds(ctx: &Context, c: &mut Check, version: &Version) {
    let crds = match &ctx.facts.cluster.karpenter_crds {
        Observed::Found(crds) => crds,
        Observed::Absent => return,
        Observed::Unknown(u) => return c.unknown(Why::unobserved("The Karpenter CRDs", u)),
    };
    let version = strip_pre(version);
    for crd in crds {
        let missing: Vec<_> = CRD_FIELDS
            .iter()
            .filter(|f| f.crd == crd.name)
            .filter(|f| karpenter_versions::release(f.release) <= version)
            .filter(|f| !crd.fields.contains(f.path))
            .collect();
        if let Some(newest) = missing.iter().map(|f| f.release).max() {
            let paths: Vec<&str> = missing.iter().map(|f| f.path).collect();
            c.fail(
                Reason::CrdsOlderThanController,
                format!(
                    "CRD {} lacks {} that Karpenter {}.{}.{} and later write, but the controller \
                     is {version}: its CRDs were not upgraded with it, and the API server \
                     drops what the controller writes there.",
                    crd.name,
                    crate::wording::list_bounded(&paths, 3),
                    newest.0,
                    newest.1,
                    newest.2
                ),
                vec![SubjectRef::new("CustomResourceDefinition", &crd.name)],
            );
        }
        if version >= karpenter_versions::release(V1BETA1_DROPPED)
            && crd.stored_versions.iter().any(|v| v == "v1beta1")
        {
            c.fail(
                Reason::StoredVersionsStale,
                format!(
                    "CRD {} still lists v1beta1 in status.storedVersions ({}), but Karpenter \
                     {version} dropped v1beta1 and its conversion webhook (1.1.0): applying its \
                     CRDs fails until v1beta1 is removed from storedVersions.",
                    crd.name,
                    crd.stored_versions.join(", ")
                ),
                vec![SubjectRef::new("CustomResourceDefinition", &crd.name)],
            );
        }
    }
}

fn webhooks(ctx: &Context, c: &mut Check) {
    // (what calls, Service, whether the API server calls it at all)
    let mut callers: Vec<(String, SubjectRef, &str, bool)> = Vec::new();
    match &ctx.facts.cluster.karpenter_crds {
        Observed::Found(crds) => {
            for crd in crds {
                if let Some(svc) = &crd.conversion_service {
                    // The API server converts only between versions: a CRD that serves and
                    // stores one version never calls its conversion webhook
                    // (apiextensions-apiserver's converter returns objects already in the
                    // requested version as they are).
                    let versions: BTreeSet<&String> = crd
                        .served_versions
                        .iter()
                        .chain(&crd.stored_versions)
                        .collect();
                    callers.push((
                        format!("The conversion webhook of CRD {}", crd.name),
                        SubjectRef::new("CustomResourceDefinition", &crd.name),
                        svc,
                        versions.len() > 1,
                    ));
                }
            }
        }
        // Reported by the CRD part already (or no CRDs: nothing converts).
        Observed::Absent | Observed::Unknown(_) => {}
    }
    match &ctx.facts.cluster.karpenter_webhooks {
        Observed::Found(hooks) => {
            for h in hooks {
                callers.push((
                    format!("Webhook {} of {} {}", h.webhook, h.kind, h.configuration),
                    SubjectRef::new(&h.kind, &h.configuration),
                    &h.service,
                    true,
                ));
            }
        }
        Observed::Absent => {}
        Observed::Unknown(u) => c.unknown(Why::unobserved("The webhook configurations", u)),
    }
    for (what, subject, service, called) in callers {
        let service_shown = crate::clip(service, 256);
        let endpoints = ctx.facts.cluster.service_endpoints.get(service);
        match endpoints {
            Some(Observed::Found(n)) if *n > 0 => {}
            // What an uncalled webhook's Service looks like cannot change the verdict.
            None | Some(Observed::Unknown(_)) if !called => {}
            None => c.unknown(Why::new(
                Reason::NotObserved,
                format!("The endpoints of Service {service_shown} have not been read yet."),
            )),
            Some(Observed::Unknown(u)) => c.unknown(Why::unobserved(
                &format!("The endpoints of Service {service_shown}"),
                u,
            )),
            Some(found) => {
                let state = if matches!(found, Observed::Absent) {
                    "which does not exist (no Endpoints object)"
                } else {
                    "which has no ready endpoints"
                };
                let subjects = vec![subject, SubjectRef::new("Service", &*service_shown)];
                if called {
                    c.fail(
                        Reason::WebhookServiceMissing,
                        format!(
                            "{what} points at Service {service_shown}, {state}: the API server \
                             fails every request it sends there."
                        ),
                        subjects,
                    );
                } else {
                    c.warn(
                        Warning::UnusedConversionWebhookUnreachable,
                        format!(
                            "{what} points at Service {service_shown}, {state}; the CRD serves \
                             and stores a single version, so the API server does not call it \
                             today, but would fail any conversion."
                        ),
                        subjects,
                    );
                }
            }
        }
    }
}
