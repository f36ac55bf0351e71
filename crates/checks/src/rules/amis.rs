//! `AmisResolvable`: the images this EC2NodeClass launches can be resolved and boot nodes that
//! join. Pure: no IO.
//!
//! - An `alias` term (`al2023@v20240807`) resolves only through the SSM parameters AWS publishes
//!   for the cluster's Kubernetes minor (aws/karpenter-provider-aws
//!   `pkg/providers/amifamily/{al2,al2023,bottlerocket,windows}.go DescribeImageQuery`, the
//!   version from `pkg/providers/version/version.go`). None published: Karpenter resolves no
//!   image and launches nothing (#7457, #8564). None published for the next minor while AWS has
//!   published that minor's images: a warning, every launch breaks at the upgrade (#9159).
//! - An `amiFamily` decides the user data's format (nodeadm, bootstrap.sh, TOML, PowerShell);
//!   images of another family's official EKS build never join (#5940). Judged only from images
//!   whose name is an official EKS build's name; any other image may be anything.
//! - Deprecated images are a warning: EC2 still launches them, and Karpenter uses one only when
//!   nothing newer matches.
//! - What EC2 says of the images now (deregistered, disabled, deprecated soon): `images.rs`.

mod images;

pub use images::DEPRECATION_AHEAD;

use crate::plan::ami_alias::{Alias, LATEST, next_minor};
use crate::plan::images::images_karpenter_keeps;

use crate::facts::{AmiParameters, Observed};
use crate::plan::Context;
use crate::verdict::{Check, Outcome, Rule, Why};
use crate::warnings::Warning;
use karpenter_health_api::karpenter::ResolvedAmi;
use karpenter_health_api::{ConditionStatus, ConditionType, Reason};

/// The family of official EKS builds whose user data an image expects, from its name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageFamily {
    Al2,
    Al2023,
    Bottlerocket,
    Windows,
}

impl ImageFamily {
    fn as_str(self) -> &'static str {
        match self {
            ImageFamily::Al2 => "AL2",
            ImageFamily::Al2023 => "AL2023",
            ImageFamily::Bottlerocket => "Bottlerocket",
            ImageFamily::Windows => "Windows",
        }
    }

    /// The family whose user data `spec.amiFamily` makes Karpenter write; `None` for `Custom`
    /// (the user writes it) and anything unknown.
    pub fn of_ami_family(ami_family: &str) -> Option<Self> {
        match ami_family {
            "AL2" => Some(ImageFamily::Al2),
            "AL2023" => Some(ImageFamily::Al2023),
            "Bottlerocket" => Some(ImageFamily::Bottlerocket),
            "Windows2019" | "Windows2022" | "Windows2025" => Some(ImageFamily::Windows),
            _ => None,
        }
    }

    /// The family of an official EKS build by its name (`amazon-eks-node-al2023-x86_64-standard-
    /// 1.31-v20241024`, `amazon-eks-node-1.29-v20240117`, `bottlerocket-aws-k8s-1.31-x86_64-v1.26.1-
    /// 943d9a41`, `Windows_Server-2022-English-Core-EKS_Optimized-1.31-2024.10.08`); `None` for
    /// any other name, which may be built from anything.
    pub fn of_image_name(name: &str) -> Option<Self> {
        if name.starts_with("amazon-eks-node-al2023-") {
            return Some(ImageFamily::Al2023);
        }
        let al2 = [
            "amazon-eks-node-",
            "amazon-eks-arm64-node-",
            "amazon-eks-gpu-node-",
        ]
        .iter()
        .any(|prefix| {
            name.strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        });
        if al2 {
            return Some(ImageFamily::Al2);
        }
        if name.starts_with("bottlerocket-aws-k8s-") {
            return Some(ImageFamily::Bottlerocket);
        }
        if name.starts_with("Windows_Server-") && name.contains("-EKS_Optimized-") {
            return Some(ImageFamily::Windows);
        }
        None
    }
}

/// Whether any parameter answered, all answered absent, or some could not be read.
enum Published<'a> {
    Yes,
    No,
    NotRead(Why, &'a str),
}

fn published<'a>(facts: &'a AmiParameters, names: &'a [String]) -> Published<'a> {
    let mut unread = None;
    for name in names {
        match facts.values.get(name) {
            Some(Observed::Found(_)) => return Published::Yes,
            Some(Observed::Absent) => {}
            Some(Observed::Unknown(u)) => {
                unread.get_or_insert((Why::unobserved("The SSM parameter", u), name.as_str()));
            }
            None => {
                unread.get_or_insert((
                    Why::new(Reason::NotObserved, "The SSM parameter was not read yet."),
                    name.as_str(),
                ));
            }
        }
    }
    match unread {
        Some((why, name)) => Published::NotRead(why, name),
        None => Published::No,
    }
}

fn image_label(ami: &ResolvedAmi) -> String {
    match &ami.name {
        Some(name) => format!("{} ({name})", ami.id),
        None => ami.id.clone(),
    }
}

/// This rule, listed in the registry by the crate's build script.
pub(crate) const RULE: Rule = Rule::alone(ConditionType::AmisResolvable, check);

pub(crate) fn check(ctx: &Context) -> Outcome {
    let mut c = Check::new(ConditionType::AmisResolvable, "amis");
    let class = &ctx.facts.cluster.node_class;
    let amis: &[ResolvedAmi] = class.status.as_ref().map_or(&[], |s| &s.amis);
    let mut ok = Vec::new();

    match Alias::of(class) {
        Some(alias) => alias_published(ctx, &mut c, &alias, &mut ok),
        None => family_matches(ctx, &mut c, amis, &mut ok),
    }
    images::images_usable(ctx, &mut c, &mut ok);

    let deprecated: Vec<String> = amis
        .iter()
        .filter(|a| a.deprecated == Some(true))
        .map(image_label)
        .collect();
    if !deprecated.is_empty() {
        c.warn(
            Warning::AmiDeprecated,
            format!(
                "EC2 has deprecated image(s) {} that Karpenter resolved for this EC2NodeClass: \
                 launches still work, but AWS no longer updates them and may deregister them.",
                crate::wording::list_bounded(&deprecated, 3)
            ),
            vec![ctx.node_class_subject()],
        );
    } else if !amis.is_empty() {
        ok.push("no resolved image is deprecated".to_owned());
    }
    let message = if ok.is_empty() {
        "Nothing to judge.".to_owned()
    } else {
        let mut m = ok.join("; ");
        if let Some(first) = m.get_mut(0..1) {
            first.make_ascii_uppercase();
        }
        format!("{m}.")
    };
    c.finish(Reason::AmisResolved, message)
}

/// An alias term: published for the cluster's minor (else False, or a warning while Karpenter
/// still launches from images it resolved before), and for the next minor when AWS has
/// published that minor (else a warning).
fn alias_published(ctx: &Context, c: &mut Check, alias: &Alias, ok: &mut Vec<String>) {
    let Some(facts) = alias_parameters(ctx, c, alias) else {
        return;
    };
    let minor = facts.kubernetes_minor.as_str();
    let cluster_minor = minor.to_owned();
    if refused_now(ctx, c, alias, &cluster_minor) {
        return;
    }
    if !published_for_cluster(ctx, c, alias, facts, ok) {
        return;
    }
    // Refused once the cluster is upgraded, whichever release the alias names (and whatever
    // Karpenter's version: an older one finds no parameter for AL2 either).
    if let Some(next) = next_minor(&cluster_minor)
        && let Some(refusal) = alias.refused_at(&next)
        && alias.refused_at(&cluster_minor).is_none()
    {
        return c.warn(
            Warning::AmiAliasRefusedAfterUpgrade,
            format!(
                "The alias {} serves Kubernetes {cluster_minor}, but Karpenter refuses {}: once \
                 the cluster is upgraded to {next}, AMIsReady goes False UnsupportedAlias and \
                 nothing launches for the class. {}",
                alias.written, refusal.what, refusal.fix
            ),
            vec![ctx.node_class_subject()],
        );
    }
    published_for_next_minor(ctx, c, alias, facts, ok);
}

/// An alias AWS publishes nothing for at the cluster's minor that a newer Karpenter than the
/// installed one refuses there: a warning while Karpenter launches from the images it resolved for
/// an earlier Kubernetes version, False when it holds none; either way the fix is the refusal's.
fn refused_by_newer(
    ctx: &Context,
    c: &mut Check,
    alias: &Alias,
    minor: &str,
    refusal: crate::plan::ami_alias::Refusal,
) {
    let (a, b, p) = refusal.since;
    let installed = match &ctx.version {
        Ok(v) => format!("Karpenter {v}"),
        Err(_) => "The installed Karpenter".to_owned(),
    };
    let newer = format!(
        "Karpenter {a}.{b}.{p} and later refuse {} (AMIsReady False UnsupportedAlias) and launch \
         nothing, so upgrading Karpenter does not help either",
        refusal.what
    );
    if let Some(kept) = images_karpenter_keeps(ctx) {
        return c.warn(
            Warning::AmiAliasNoLongerResolves,
            format!(
                "The alias {} resolves nothing at Kubernetes {minor}, the cluster's version: \
                 {installed} keeps launching from the image(s) it resolved for an earlier \
                 Kubernetes version ({kept}), whose kubelet is older than the control plane and \
                 which no upgrade of the cluster replaces; {newer}. {}",
                alias.written, refusal.fix
            ),
            vec![ctx.node_class_subject()],
        );
    }
    c.fail(
        Reason::AmiAliasNotPublished,
        format!(
            "The alias {} resolves nothing at Kubernetes {minor}, the cluster's version, and \
             {installed} holds no image resolved for this version of the EC2NodeClass, so it \
             launches nothing; {newer}. {}",
            alias.written, refusal.fix
        ),
        vec![ctx.node_class_subject()],
    );
}

/// The SSM parameters read for the alias, or why they are not known.
fn alias_parameters<'a>(
    ctx: &Context<'a>,
    c: &mut Check,
    alias: &Alias,
) -> Option<&'a AmiParameters> {
    match &ctx.facts.aws.ami_parameters {
        Some(Observed::Found(facts)) => Some(facts),
        Some(Observed::Unknown(u)) => {
            c.unknown(Why::unobserved(
                &format!("The SSM parameters of the alias {}", alias.written),
                u,
            ));
            None
        }
        Some(Observed::Absent) | None => {
            c.unknown(Why::new(
                Reason::NotObserved,
                format!(
                    "The SSM parameters of the alias {} were not read yet.",
                    alias.written
                ),
            ));
            None
        }
    }
}

/// False when Karpenter refuses the alias at the cluster's minor (its version refuses it, or it
/// said so); true when it did.
fn refused_now(ctx: &Context, c: &mut Check, alias: &Alias, cluster_minor: &str) -> bool {
    let Some(refusal) = alias.refused_at(cluster_minor) else {
        return false;
    };
    let refuses = ctx
        .version
        .as_ref()
        .is_ok_and(|v| *v >= crate::karpenter_versions::release(refusal.since));
    let said = ctx.karpenter_condition("AMIsReady").is_some_and(|c| {
        ConditionStatus::parse(&c.status) == ConditionStatus::False
            && c.reason.as_deref() == Some("UnsupportedAlias")
    });
    // An older Karpenter does not refuse it: what it resolves is judged below.
    if refuses || said {
        c.fail(
            Reason::AmiAliasUnsupported,
            format!(
                "The alias {} is refused by Karpenter at Kubernetes {cluster_minor}, the \
                 cluster's version: Karpenter refuses {}, sets AMIsReady=False \
                 UnsupportedAlias and launches nothing for the class. {}",
                alias.written, refusal.what, refusal.fix
            ),
            vec![ctx.node_class_subject()],
        );
        return true;
    }
    false
}

/// Whether the alias is published for the cluster's minor: False when not (a warning while
/// Karpenter keeps images it resolved before), Unknown when not read; true when it is.
fn published_for_cluster(
    ctx: &Context,
    c: &mut Check,
    alias: &Alias,
    facts: &AmiParameters,
    ok: &mut Vec<String>,
) -> bool {
    let minor = facts.kubernetes_minor.as_str();
    match published(facts, &alias.parameters(minor)) {
        Published::Yes => {
            ok.push(format!(
                "the alias {} is published for Kubernetes {minor}",
                alias.written
            ));
            true
        }
        Published::NotRead(why, name) => {
            c.unknown(Why::new(
                why.reason,
                format!("{} ({name}).", why.message.trim_end_matches('.')),
            ));
            false
        }
        Published::No => {
            not_published(ctx, c, alias, minor);
            false
        }
    }
}

/// The alias is not published for the cluster's minor: a warning while Karpenter keeps
/// launching from images it resolved before, else False.
fn not_published(ctx: &Context, c: &mut Check, alias: &Alias, minor: &str) {
    // An alias a newer Karpenter refuses at this minor (AL2 from 1.33): AWS publishes no image for
    // it, so no pin or `@latest` helps, and the installed release, older than the refusal, keeps
    // what it resolved before (aws/karpenter-provider-aws v1.5 `pkg/providers/amifamily/al2.go`
    // `DescribeImageQuery` fails, `pkg/controllers/nodeclass/ami.go` returns before the status).
    if let Some(refusal) = alias.refused_at(minor) {
        return refused_by_newer(ctx, c, alias, minor, refusal);
    }
    // `@LATEST`: Karpenter reads a release of that name, not AWS's newest.
    let fix = if alias.version.eq_ignore_ascii_case(LATEST) {
        format!(
            "Write @{LATEST} in lower case: Karpenter compares it exactly and reads \
             @{} as a release of that name.",
            alias.version
        )
    } else {
        format!("Pin a release published for {minor} or use @{LATEST}.")
    };
    let unpublished = format!(
        "The alias {} resolves through SSM parameters AWS has not published for \
         Kubernetes {minor}, the cluster's version (none of {} answers, e.g. {})",
        alias.written,
        alias.parameters(minor).len(),
        alias.parameters(minor)[0]
    );
    // Karpenter leaves its status alone when resolving fails (an error returns before
    // it is touched; only UnsupportedAlias sets AMIsReady False) and launches from the
    // images it resolved before (pkg/controllers/nodeclass/ami.go).
    if let Some(kept) = images_karpenter_keeps(ctx) {
        return c.warn(
            Warning::AmiAliasNoLongerResolves,
            format!(
                "{unpublished}. Karpenter keeps launching from the image(s) it resolved \
                 before ({kept}), but the next edit of this EC2NodeClass, and any new \
                 class with this alias, resolves nothing. {fix}"
            ),
            vec![ctx.node_class_subject()],
        );
    }
    c.fail(
        Reason::AmiAliasNotPublished,
        format!(
            "{unpublished}, and Karpenter holds no image resolved for this version of \
             the EC2NodeClass, so it launches nothing. {fix}"
        ),
        vec![ctx.node_class_subject()],
    );
}

/// A pinned alias: a warning when it is not published for the next minor while AWS publishes
/// images for it.
fn published_for_next_minor(
    ctx: &Context,
    c: &mut Check,
    alias: &Alias,
    facts: &AmiParameters,
    ok: &mut Vec<String>,
) {
    let Some(next) = next_minor(&facts.kubernetes_minor).filter(|_| alias.pinned()) else {
        return;
    };
    match (
        published(facts, &alias.parameters(&next)),
        published(facts, &alias.latest_parameters(&next)),
    ) {
        (Published::Yes, _) => ok.push(format!("and for Kubernetes {next}")),
        (Published::No, Published::Yes) => c.warn(
            Warning::AmiAliasNotPublishedForNextMinor,
            format!(
                "The alias {} is not published for Kubernetes {next}, while AWS publishes \
                 images for {next}: once the cluster is upgraded to {next}, Karpenter resolves \
                 no image for this EC2NodeClass and every launch fails.",
                alias.written
            ),
            vec![ctx.node_class_subject()],
        ),
        (Published::No, Published::No) => ok.push(format!(
            "AWS has published no EKS image for Kubernetes {next} in this region yet"
        )),
        (Published::NotRead(why, _), _) | (_, Published::NotRead(why, _)) => ok.push(format!(
            "whether it is published for Kubernetes {next} is not known ({})",
            why.message.trim_end_matches('.')
        )),
    }
}

/// No alias: the images Karpenter resolved must be of the family whose user data `amiFamily`
/// makes it write.
fn family_matches(ctx: &Context, c: &mut Check, amis: &[ResolvedAmi], ok: &mut Vec<String>) {
    let class = &ctx.facts.cluster.node_class;
    let Some(written) = class.spec.ami_family.as_deref() else {
        return;
    };
    let Some(family) = ImageFamily::of_ami_family(written) else {
        ok.push(format!(
            "amiFamily {written}: the user data is the class's own, so no image family is judged"
        ));
        return;
    };
    // status.amis is Karpenter's answer for the generation its AMIsReady observed: right after
    // an edit of amiFamily or the selector it still lists the old images, which prove nothing.
    let generation = class.metadata.generation;
    let resolved_now = ctx
        .karpenter_condition("AMIsReady")
        .is_some_and(|k| k.observed_generation.is_none() || k.observed_generation == generation);
    if !resolved_now {
        return c.unknown(Why::new(
            Reason::NotObserved,
            "Karpenter has not resolved the images for this generation of the EC2NodeClass yet \
             (its AMIsReady is for an older one), so status.amis cannot be compared with \
             amiFamily.",
        ));
    }
    if amis.is_empty() {
        return c.unknown(Why::new(
            Reason::NotObserved,
            "Karpenter has resolved no image for this EC2NodeClass yet (status.amis is empty; its \
             AMIsReady condition says why), so their family cannot be compared with amiFamily.",
        ));
    }
    let other: Vec<(String, ImageFamily)> = amis
        .iter()
        .filter_map(|a| {
            let of = ImageFamily::of_image_name(a.name.as_deref()?)?;
            (of != family).then(|| (image_label(a), of))
        })
        .collect();
    let described = |list: &[(String, ImageFamily)]| -> Vec<String> {
        list.iter()
            .map(|(label, of)| format!("{label}, an EKS {} build", of.as_str()))
            .collect()
    };
    let subjects = vec![ctx.node_class_subject()];
    if !other.is_empty() && other.len() == amis.len() {
        c.fail(
            Reason::AmiFamilyMismatch,
            format!(
                "amiFamily is {written}, so Karpenter writes {} user data, but every image it \
                 resolved is an official EKS build of another family: {}. Nodes boot and never \
                 join the cluster. Set amiFamily to the images' family, or select {} images.",
                family.as_str(),
                crate::wording::list_bounded(&described(&other), 3),
                family.as_str()
            ),
            subjects,
        );
    } else if !other.is_empty() {
        c.warn(
            Warning::AmiFamilyPartlyMismatched,
            format!(
                "amiFamily is {written}, but some images Karpenter resolved are official EKS \
                 builds of another family: {}. A node launched from one of them never joins.",
                crate::wording::list_bounded(&described(&other), 3)
            ),
            subjects,
        );
    } else {
        ok.push(format!(
            "no resolved image is an EKS build of another family than amiFamily {written}"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_families_come_only_from_official_names() {
        use ImageFamily::*;
        let of = ImageFamily::of_image_name;
        assert_eq!(
            of("amazon-eks-node-al2023-x86_64-standard-1.31-v20241024"),
            Some(Al2023)
        );
        assert_eq!(of("amazon-eks-node-1.29-v20240117"), Some(Al2));
        assert_eq!(of("amazon-eks-gpu-node-1.29-v20240117"), Some(Al2));
        assert_eq!(
            of("bottlerocket-aws-k8s-1.31-x86_64-v1.26.1-943d9a41"),
            Some(Bottlerocket)
        );
        assert_eq!(
            of("Windows_Server-2022-English-Core-EKS_Optimized-1.31-2024.10.08"),
            Some(Windows)
        );
        // Builds of one's own, whatever they were made from.
        assert_eq!(of("amazon-eks-node-custom-hardened"), None);
        assert_eq!(of("ubuntu-eks/k8s_1.29/images/hvm-ssd"), None);
        assert_eq!(of("my-al2023-golden-image"), None);
    }
}
