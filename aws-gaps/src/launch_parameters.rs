//! Launches EC2 refuses and moto accepts, refused as EC2 refuses them, for RunInstances (an
//! error) and for an instant CreateFleet (the fleet's `Errors[]`, one per launch template override
//! that fails; no error at all while one override can launch), the two ways Karpenter launches:
//! - an instance profile named by something that is no IAM name (an ARN, say), or by a name IAM
//!   has no profile of: `InvalidParameterValue` "Invalid IAM Instance Profile name", whether the
//!   profile is given in the request or in its launch template (IAM names match
//!   `[\w+=,.@-]{1,128}`, the IAM API reference; EC2 resolves the profile at launch, the EC2 API
//!   reference for IamInstanceProfileSpecification; Karpenter reads the text as "profile not
//!   found", aws/karpenter-provider-aws `pkg/errors/errors.go` IsInstanceProfileNotFound). Dry
//!   runs too: field reports show Karpenter's validation refused so (#8312);
//! - checked only when an instance launches, since what EC2's dry run says of them is not
//!   documented:
//!   - `HttpProtocolIpv6` in the metadata options in the isolated regions (`us-iso-*`,
//!     `us-isob-*`, `us-isof-*`), which have no IPv6 metadata endpoint: the launch template is
//!     made and the launch refused, `UnsupportedOperation` (aws/karpenter-provider-aws #5700,
//!     #7081);
//!   - a security group in another VPC than the launch's subnet (`InvalidParameter`);
//!   - a subnet without a free address (`InsufficientFreeAddressesInSubnet`; moto counts the
//!     addresses its network interfaces take but launches regardless);
//!   - a standard instance past the account's vCPU quota a test set (`vcpu_quotas.rs`).
//!
//! The decisions are pure ([`launch_refusal`]); [`refused`] and [`fleet_refused`] first read what
//! they need from moto (the launch templates, IAM's profiles, the groups' and subnets' VPCs and
//! free addresses).

use std::collections::{BTreeMap, BTreeSet};

use super::aws_wire::form;

/// A refusal: (error code, message).
pub(super) type Refusal = (&'static str, String);

/// Whether `name` is an IAM name.
fn is_iam_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_+=,.@-".contains(c))
}

fn in_isolated_region(region: &str) -> bool {
    ["us-iso-", "us-isob-", "us-isof-"]
        .iter()
        .any(|prefix| region.starts_with(prefix))
}

fn profile_refusal(name: &str) -> Refusal {
    (
        "InvalidParameterValue",
        format!(
            "Value ({name}) for parameter iamInstanceProfile.name is invalid. Invalid IAM \
             Instance Profile name"
        ),
    )
}

/// A launch template by id or name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum TemplateRef {
    Id(String),
    Name(String),
}

/// What a launch template holds that EC2 checks at launch.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct TemplateData {
    pub(super) profile_name: Option<String>,
    pub(super) http_protocol_ipv6: Option<String>,
    /// The security groups its network interfaces (or the template itself) name.
    pub(super) security_groups: Vec<String>,
}

/// One launch as EC2 checks it: the request's fields over its launch template's.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct Launch {
    pub(super) profile: Option<String>,
    pub(super) http_protocol_ipv6: Option<String>,
    pub(super) security_groups: Vec<String>,
    pub(super) subnet: Option<String>,
    pub(super) instance_type: Option<String>,
    /// Bought as spot (held to the spot quota), else on demand.
    pub(super) spot: bool,
    /// `DryRun=true`: nothing launches, and only the profile is checked.
    pub(super) dry_run: bool,
}

/// What the bed holds that a launch is checked against, read from moto.
#[derive(Debug, Default)]
pub(super) struct Held {
    /// The IAM-named profiles IAM answered NoSuchEntity for.
    pub(super) missing_profiles: BTreeSet<String>,
    /// The VPC of each security group and subnet moto knows.
    pub(super) vpc_of: BTreeMap<String, String>,
    /// The free addresses of each subnet moto knows.
    pub(super) free: BTreeMap<String, i32>,
    /// The vCPU quotas a test set and the room they leave; `None`: none set.
    pub(super) vcpu_room: Option<crate::vcpu_quotas::Room>,
}

/// What EC2 refuses of `launch` in `region`, given what the bed holds; `None` to let moto launch.
/// Something moto does not know (a group, a subnet) is moto's to refuse.
pub(super) fn launch_refusal(region: &str, launch: &Launch, held: &Held) -> Option<Refusal> {
    if let Some(profile) = &launch.profile
        && (!is_iam_name(profile) || held.missing_profiles.contains(profile))
    {
        return Some(profile_refusal(profile));
    }
    if launch.dry_run {
        return None;
    }
    if in_isolated_region(region) && launch.http_protocol_ipv6.is_some() {
        // The text a user reported from EC2 (#7081), its typos corrected.
        return Some((
            "UnsupportedOperation",
            "specifying HttpProtocol Metadata Options for an instance is not supported in this \
             region"
                .to_owned(),
        ));
    }
    if let Some(subnet) = &launch.subnet
        && let Some(subnet_vpc) = held.vpc_of.get(subnet)
    {
        if let Some(group) = launch
            .security_groups
            .iter()
            .find(|g| held.vpc_of.get(*g).is_some_and(|vpc| vpc != subnet_vpc))
        {
            return Some((
                "InvalidParameter",
                format!("Security group {group} and subnet {subnet} belong to different networks."),
            ));
        }
        if held.free.get(subnet).is_some_and(|free| *free < 1) {
            return Some((
                "InsufficientFreeAddressesInSubnet",
                format!(
                    "There are not enough free addresses in subnet '{subnet}' to satisfy the \
                     requested number of instances."
                ),
            ));
        }
    }
    let (instance_type, room) = (launch.instance_type.as_ref()?, held.vcpu_room.as_ref()?);
    crate::vcpu_quotas::quota_refusal(instance_type, launch.spot, room)
}

/// The launch template a RunInstances form names: (id or name, version).
pub(super) fn named_template(form: &BTreeMap<String, String>) -> Option<(TemplateRef, String)> {
    let version = form
        .get("LaunchTemplate.Version")
        .cloned()
        .unwrap_or_else(|| "$Default".to_owned());
    if let Some(id) = form.get("LaunchTemplate.LaunchTemplateId") {
        return Some((TemplateRef::Id(id.clone()), version));
    }
    form.get("LaunchTemplate.LaunchTemplateName")
        .map(|name| (TemplateRef::Name(name.clone()), version))
}

/// The launch a RunInstances form asks for, over its launch template's `template` data.
pub(super) fn run_instances_launch(
    form: &BTreeMap<String, String>,
    template: &TemplateData,
) -> Launch {
    let groups = form
        .iter()
        .filter(|(k, _)| k.starts_with("SecurityGroupId.") || k.contains(".SecurityGroupId."))
        .map(|(_, v)| v.clone());
    Launch {
        profile: form
            .get("IamInstanceProfile.Name")
            .or(template.profile_name.as_ref())
            .cloned(),
        http_protocol_ipv6: form
            .get("MetadataOptions.HttpProtocolIpv6")
            .or(template.http_protocol_ipv6.as_ref())
            .cloned(),
        security_groups: groups
            .chain(template.security_groups.iter().cloned())
            .collect(),
        subnet: form
            .iter()
            .find(|(k, _)| *k == "SubnetId" || k.ends_with(".SubnetId"))
            .map(|(_, v)| v.clone()),
        instance_type: form.get("InstanceType").cloned(),
        spot: form
            .get("InstanceMarketOptions.MarketType")
            .is_some_and(|m| m == "spot"),
        dry_run: form.get("DryRun").map(String::as_str) == Some("true"),
    }
}

/// One override of an instant CreateFleet: its launch template config (1-based), its index in
/// that config's overrides (1-based; `None` for a config without overrides) and its fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct FleetOverride {
    pub(super) config: usize,
    pub(super) index: Option<usize>,
    pub(super) template: (TemplateRef, String),
    /// `InstanceType`, `SubnetId`, `AvailabilityZone`, as asked.
    pub(super) fields: BTreeMap<String, String>,
}

/// The overrides of a CreateFleet form (`LaunchTemplateConfigs.N.LaunchTemplateSpecification`,
/// `LaunchTemplateConfigs.N.Overrides.M.*`), in order.
pub(super) fn fleet_overrides(form: &BTreeMap<String, String>) -> Vec<FleetOverride> {
    let mut overrides = Vec::new();
    for config in 1.. {
        let spec = format!("LaunchTemplateConfigs.{config}.LaunchTemplateSpecification");
        let template = if let Some(id) = form.get(&format!("{spec}.LaunchTemplateId")) {
            TemplateRef::Id(id.clone())
        } else if let Some(name) = form.get(&format!("{spec}.LaunchTemplateName")) {
            TemplateRef::Name(name.clone())
        } else {
            break;
        };
        let version = form
            .get(&format!("{spec}.Version"))
            .cloned()
            .unwrap_or_else(|| "$Default".to_owned());
        let before = overrides.len();
        for index in 1.. {
            let prefix = format!("LaunchTemplateConfigs.{config}.Overrides.{index}.");
            let asked: Vec<(&String, &String)> = form
                .iter()
                .filter(|(k, _)| k.starts_with(&prefix))
                .collect();
            if asked.is_empty() {
                break;
            }
            let fields = asked
                .into_iter()
                .filter_map(|(k, v)| {
                    let field = k.strip_prefix(&prefix)?;
                    ["InstanceType", "SubnetId", "AvailabilityZone"]
                        .contains(&field)
                        .then(|| (field.to_owned(), v.clone()))
                })
                .collect();
            overrides.push(FleetOverride {
                config,
                index: Some(index),
                template: (template.clone(), version.clone()),
                fields,
            });
        }
        if overrides.len() == before {
            overrides.push(FleetOverride {
                config,
                index: None,
                template: (template, version),
                fields: BTreeMap::new(),
            });
        }
    }
    overrides
}

/// The launch one fleet override asks for, from its launch template's `template` data, bought
/// as spot or not (the fleet's default target capacity type).
pub(super) fn fleet_launch(
    over: &FleetOverride,
    template: &TemplateData,
    spot: bool,
    dry_run: bool,
) -> Launch {
    Launch {
        profile: template.profile_name.clone(),
        http_protocol_ipv6: template.http_protocol_ipv6.clone(),
        security_groups: template.security_groups.clone(),
        subnet: over.fields.get("SubnetId").cloned(),
        instance_type: over.fields.get("InstanceType").cloned(),
        spot,
        dry_run,
    }
}

/// Reads the launch template `template` names from moto (`upstream`) in `region`.
pub(super) async fn template_data(
    upstream: &str,
    region: &str,
    template: &TemplateRef,
    version: &str,
) -> anyhow::Result<TemplateData> {
    let ec2 = aws_sdk_ec2::Client::new(&super::upstream::moto_config(upstream, region).await);
    let asked = ec2.describe_launch_template_versions().versions(version);
    let asked = match template {
        TemplateRef::Id(id) => asked.launch_template_id(id),
        TemplateRef::Name(name) => asked.launch_template_name(name),
    };
    let out = asked.send().await?;
    let Some(data) = out
        .launch_template_versions()
        .first()
        .and_then(|v| v.launch_template_data())
    else {
        return Ok(TemplateData::default());
    };
    Ok(TemplateData {
        profile_name: data
            .iam_instance_profile()
            .and_then(|p| p.name())
            .map(str::to_owned),
        http_protocol_ipv6: data
            .metadata_options()
            .and_then(|m| m.http_protocol_ipv6())
            .map(|v| v.as_str().to_owned()),
        security_groups: data
            .security_group_ids()
            .iter()
            .cloned()
            .chain(
                data.network_interfaces()
                    .iter()
                    .flat_map(|n| n.groups().iter().cloned()),
            )
            .collect(),
    })
}

/// What the bed holds for `launches` in `region`, read from moto (`upstream`): IAM of the
/// request's own region (moto keeps one IAM per partition, and the bed seeds the profiles there);
/// an unanswered question leaves the fact out, so only moto's own answers refuse a launch.
/// `quotas`: the EC2 quotas a test set, by code.
async fn held_for(
    upstream: &str,
    region: &str,
    launches: &[Launch],
    quotas: &BTreeMap<String, f64>,
) -> Held {
    let config = super::upstream::moto_config(upstream, region).await;
    let (iam, ec2) = (
        aws_sdk_iam::Client::new(&config),
        aws_sdk_ec2::Client::new(&config),
    );
    let mut held = Held::default();
    let profiles: BTreeSet<&String> = launches
        .iter()
        .filter_map(|l| l.profile.as_ref())
        .filter(|p| is_iam_name(p))
        .collect();
    for profile in profiles {
        let answer = iam
            .get_instance_profile()
            .instance_profile_name(profile)
            .send()
            .await;
        if answer.is_err_and(|e| {
            e.as_service_error().is_some_and(
                aws_sdk_iam::operation::get_instance_profile::GetInstanceProfileError::is_no_such_entity_exception,
            )
        }) {
            held.missing_profiles.insert(profile.clone());
        }
    }
    let launching: Vec<&Launch> = launches.iter().filter(|l| !l.dry_run).collect();
    let groups: BTreeSet<String> = launching
        .iter()
        .flat_map(|l| l.security_groups.iter().cloned())
        .collect();
    let subnets: BTreeSet<String> = launching.iter().filter_map(|l| l.subnet.clone()).collect();
    if !groups.is_empty()
        && let Ok(out) = ec2
            .describe_security_groups()
            .set_group_ids(Some(groups.into_iter().collect()))
            .send()
            .await
    {
        for group in out.security_groups() {
            if let (Some(id), Some(vpc)) = (group.group_id(), group.vpc_id()) {
                held.vpc_of.insert(id.to_owned(), vpc.to_owned());
            }
        }
    }
    if !subnets.is_empty()
        && let Ok(out) = ec2
            .describe_subnets()
            .set_subnet_ids(Some(subnets.into_iter().collect()))
            .send()
            .await
    {
        for subnet in out.subnets() {
            let Some(id) = subnet.subnet_id() else {
                continue;
            };
            if let Some(vpc) = subnet.vpc_id() {
                held.vpc_of.insert(id.to_owned(), vpc.to_owned());
            }
            if let Some(free) = subnet.available_ip_address_count() {
                held.free.insert(id.to_owned(), free);
            }
        }
    }
    let types: BTreeSet<String> = launching
        .iter()
        .filter_map(|l| l.instance_type.clone())
        .collect();
    if !types.is_empty() {
        held.vcpu_room = crate::vcpu_quotas::room_for(upstream, region, quotas, &types).await;
    }
    held
}

/// What EC2 refuses of a RunInstances that moto would launch; `None` for every other request.
/// `quotas`: the EC2 quotas a test set, by code.
pub(super) async fn refused(
    upstream: &str,
    call: &super::aws_wire::Call,
    body: &str,
    quotas: &BTreeMap<String, f64>,
) -> Option<Refusal> {
    if call.operation != "RunInstances" {
        return None;
    }
    let form = form(body);
    let template = match named_template(&form) {
        // A template moto cannot describe is moto's to refuse.
        Some((template, version)) => template_data(upstream, &call.region, &template, &version)
            .await
            .unwrap_or_default(),
        None => TemplateData::default(),
    };
    let launch = run_instances_launch(&form, &template);
    let held = held_for(
        upstream,
        &call.region,
        std::slice::from_ref(&launch),
        quotas,
    )
    .await;
    launch_refusal(&call.region, &launch, &held)
}

/// What EC2 refuses of an instant CreateFleet that moto would launch: each override's refusal,
/// when every override is refused (while one can launch, EC2 launches it); `None` for every other
/// request, a dry run included (left to moto: what EC2's dry-run CreateFleet says of the launch
/// template is not documented).
pub(super) async fn fleet_refused(
    upstream: &str,
    call: &super::aws_wire::Call,
    body: &str,
    quotas: &BTreeMap<String, f64>,
) -> Option<Vec<(FleetOverride, Refusal)>> {
    if call.operation != "CreateFleet" {
        return None;
    }
    let form = form(body);
    if form.get("Type").map(String::as_str) != Some("instant")
        || form.get("DryRun").map(String::as_str) == Some("true")
    {
        return None;
    }
    let overrides = fleet_overrides(&form);
    let mut templates: BTreeMap<(TemplateRef, String), TemplateData> = BTreeMap::new();
    for over in &overrides {
        if !templates.contains_key(&over.template) {
            let (template, version) = &over.template;
            // A template moto cannot describe is moto's to refuse.
            let data = template_data(upstream, &call.region, template, version)
                .await
                .ok()?;
            templates.insert(over.template.clone(), data);
        }
    }
    let spot = form
        .get("TargetCapacitySpecification.DefaultTargetCapacityType")
        .is_some_and(|t| t == "spot");
    let launches: Vec<Launch> = overrides
        .iter()
        .map(|over| fleet_launch(over, &templates[&over.template], spot, false))
        .collect();
    let held = held_for(upstream, &call.region, &launches, quotas).await;
    let refusals: Vec<(FleetOverride, Refusal)> = overrides
        .into_iter()
        .zip(&launches)
        .map(|(over, launch)| Some((over, launch_refusal(&call.region, launch, &held)?)))
        .collect::<Option<_>>()?;
    (!refusals.is_empty()).then_some(refusals)
}

#[cfg(test)]
mod tests;
