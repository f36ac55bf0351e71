//! Launch parameters EC2 refuses and moto accepts, refused as EC2 refuses them:
//! - an instance profile named by something that is no IAM name (an ARN, say), or by a name IAM
//!   has no profile of: RunInstances answers `InvalidParameterValue` "Invalid IAM Instance Profile
//!   name", whether the profile is given in the request or in its launch template (IAM names match
//!   `[\w+=,.@-]{1,128}`, the IAM API reference; EC2 resolves the profile at launch, the EC2 API
//!   reference for IamInstanceProfileSpecification; Karpenter reads this text as "profile not
//!   found", aws/karpenter-provider-aws `pkg/errors/errors.go` IsInstanceProfileNotFound);
//! - a launch whose security group is in another VPC than its subnet (`InvalidParameter`), or
//!   none of whose subnets has a free address (`InsufficientFreeAddressesInSubnet`); checked when
//!   it launches, not in a dry run, whose answer to them EC2 does not document;
//! - `HttpProtocolIpv6` in the metadata options of a launch template or launch in the isolated
//!   regions (`us-iso-*`, `us-isob-*`, `us-isof-*`), where EC2 has no IPv6 metadata endpoint and
//!   refuses the option (aws/karpenter-provider-aws #7081).
//!
//! Each refusal is made by RunInstances (an error) and by an instant CreateFleet (the fleet's
//! `Errors[]`, no instance), the two ways Karpenter launches.
//!
//! Pure except [`template_data`], [`refused`] and [`fleet_refused`], which read the launch
//! templates a launch names from moto.

use std::collections::BTreeMap;

use super::aws_wire::form;

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

/// A refusal: (error code, message).
pub(super) type Refusal = (&'static str, String);

fn profile_refusal(name: &str) -> Option<Refusal> {
    (!is_iam_name(name)).then(|| {
        (
            "InvalidParameterValue",
            format!(
                "Value ({name}) for parameter iamInstanceProfile.name is invalid. Invalid IAM \
                 Instance Profile name"
            ),
        )
    })
}

fn ipv6_metadata_refusal(region: &str, value: Option<&String>) -> Option<Refusal> {
    (in_isolated_region(region) && value.is_some()).then(|| {
        (
            "InvalidParameterValue",
            format!("The parameter HttpProtocolIpv6 is not supported in region {region}."),
        )
    })
}

/// What EC2 refuses of a CreateLaunchTemplate / CreateLaunchTemplateVersion form in `region`.
pub(super) fn launch_template_refusal(
    region: &str,
    form: &BTreeMap<String, String>,
) -> Option<Refusal> {
    ipv6_metadata_refusal(
        region,
        form.get("LaunchTemplateData.MetadataOptions.HttpProtocolIpv6"),
    )
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

#[derive(Clone, Debug, PartialEq, Eq)]
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

/// What EC2 refuses of a RunInstances form in `region`, its launch template's data included.
pub(super) fn run_instances_refusal(
    region: &str,
    form: &BTreeMap<String, String>,
    template: &TemplateData,
) -> Option<Refusal> {
    let profile = form
        .get("IamInstanceProfile.Name")
        .or(template.profile_name.as_ref());
    if let Some(refusal) = profile.and_then(|p| profile_refusal(p)) {
        return Some(refusal);
    }
    let ipv6 = form
        .get("MetadataOptions.HttpProtocolIpv6")
        .or(template.http_protocol_ipv6.as_ref());
    ipv6_metadata_refusal(region, ipv6)
}

/// Whether IAM (moto, `upstream`) holds an instance profile named `name`; an unanswered
/// question counts as held, so that only IAM's own NoSuchEntity refuses a launch.
async fn profile_held(upstream: &str, name: &str) -> bool {
    let iam = aws_sdk_iam::Client::new(&super::upstream::moto_config(upstream, "us-east-1").await);
    match iam.get_instance_profile().instance_profile_name(name).send().await {
        Ok(_) => true,
        Err(e) => !e
            .as_service_error()
            .is_some_and(aws_sdk_iam::operation::get_instance_profile::GetInstanceProfileError::is_no_such_entity_exception),
    }
}

/// The refusal of a launch whose instance profile, an IAM name, names no profile IAM holds.
async fn missing_profile_refusal(upstream: &str, profile: Option<&String>) -> Option<Refusal> {
    let name = profile.filter(|p| is_iam_name(p))?;
    if profile_held(upstream, name).await {
        return None;
    }
    Some((
        "InvalidParameterValue",
        format!(
            "Value ({name}) for parameter iamInstanceProfile.name is invalid. Invalid IAM \
             Instance Profile name"
        ),
    ))
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

/// EC2's refusal of a launch whose security group is in another VPC than its subnet: "Security
/// group sg-… and subnet subnet-… belong to different networks" (`InvalidParameter`), the error EC2
/// returns for a launch (moto launches). `vpc_of` maps each security group and subnet id moto
/// knows to its VPC.
pub(super) fn network_refusal(
    groups: &[String],
    subnets: &[String],
    vpc_of: &BTreeMap<String, String>,
) -> Option<Refusal> {
    for subnet in subnets {
        let Some(subnet_vpc) = vpc_of.get(subnet) else {
            continue;
        };
        if let Some(group) = groups
            .iter()
            .find(|g| vpc_of.get(*g).is_some_and(|vpc| vpc != subnet_vpc))
        {
            return Some((
                "InvalidParameter",
                format!("Security group {group} and subnet {subnet} belong to different networks."),
            ));
        }
    }
    None
}

/// EC2's refusal of a launch none of whose `subnets` has a free address:
/// `InsufficientFreeAddressesInSubnet` (the EC2 API reference's error codes; Karpenter marks the
/// subnet unavailable on it, aws/karpenter-provider-aws `pkg/providers/instance/instance.go`).
/// moto counts the addresses its network interfaces take but launches regardless. A subnet moto
/// does not know, or one with room, lets the launch through.
pub(super) fn address_refusal(subnets: &[String], free: &BTreeMap<String, i32>) -> Option<Refusal> {
    let full = |s: &String| free.get(s).is_some_and(|n| *n < 1);
    let first = subnets.first()?;
    subnets.iter().all(full).then(|| {
        (
            "InsufficientFreeAddressesInSubnet",
            format!(
                "There are not enough free addresses in subnet '{first}' to satisfy the requested \
                 number of instances."
            ),
        )
    })
}

/// What moto (`upstream`) knows in `region` of a launch's network: the VPC of each of `groups`
/// and `subnets`, and each subnet's free addresses; an id moto cannot describe is left out
/// (moto's to refuse).
#[derive(Debug, Default)]
struct Network {
    vpc_of: BTreeMap<String, String>,
    free: BTreeMap<String, i32>,
}

impl Network {
    /// The refusal EC2 makes of a launch of `groups` into `subnets`, if any.
    fn refusal(&self, groups: &[String], subnets: &[String]) -> Option<Refusal> {
        network_refusal(groups, subnets, &self.vpc_of)
            .or_else(|| address_refusal(subnets, &self.free))
    }
}

async fn network_of(
    upstream: &str,
    region: &str,
    groups: &[String],
    subnets: &[String],
) -> Network {
    let ec2 = aws_sdk_ec2::Client::new(&super::upstream::moto_config(upstream, region).await);
    let mut vpc_of = BTreeMap::new();
    let mut free = BTreeMap::new();
    if !groups.is_empty()
        && let Ok(out) = ec2
            .describe_security_groups()
            .set_group_ids(Some(groups.to_vec()))
            .send()
            .await
    {
        for group in out.security_groups() {
            if let (Some(id), Some(vpc)) = (group.group_id(), group.vpc_id()) {
                vpc_of.insert(id.to_owned(), vpc.to_owned());
            }
        }
    }
    if !subnets.is_empty()
        && let Ok(out) = ec2
            .describe_subnets()
            .set_subnet_ids(Some(subnets.to_vec()))
            .send()
            .await
    {
        for subnet in out.subnets() {
            if let (Some(id), Some(vpc)) = (subnet.subnet_id(), subnet.vpc_id()) {
                vpc_of.insert(id.to_owned(), vpc.to_owned());
            }
            if let (Some(id), Some(count)) =
                (subnet.subnet_id(), subnet.available_ip_address_count())
            {
                free.insert(id.to_owned(), count);
            }
        }
    }
    Network { vpc_of, free }
}

/// The subnets of a CreateFleet form's overrides.
fn fleet_subnets(form: &BTreeMap<String, String>) -> Vec<String> {
    let mut subnets: Vec<String> = form
        .iter()
        .filter(|(k, _)| k.starts_with("LaunchTemplateConfigs.") && k.ends_with(".SubnetId"))
        .map(|(_, v)| v.clone())
        .collect();
    subnets.sort();
    subnets.dedup();
    subnets
}

/// The launch templates of a CreateFleet form (`LaunchTemplateConfigs.N.
/// LaunchTemplateSpecification.*`), in the order of their configs.
pub(super) fn fleet_templates(form: &BTreeMap<String, String>) -> Vec<(TemplateRef, String)> {
    let mut templates = Vec::new();
    for n in 1.. {
        let spec = format!("LaunchTemplateConfigs.{n}.LaunchTemplateSpecification");
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
        templates.push((template, version));
    }
    templates
}

/// What EC2 refuses of an instant CreateFleet in `region` whose launch templates hold
/// `templates`: the first refusal of any, which EC2 reports in the fleet's `Errors[]` (an
/// instant fleet answers 200 with the errors of each launch it could not make, the EC2 API
/// reference for CreateFleet; aws/karpenter-provider-aws #3051 shows the profile error there).
pub(super) fn fleet_refusal(region: &str, templates: &[TemplateData]) -> Option<Refusal> {
    let empty = BTreeMap::new();
    templates
        .iter()
        .find_map(|template| run_instances_refusal(region, &empty, template))
}

/// What EC2 refuses of an instant CreateFleet that moto would launch: the refusal, read from
/// the launch templates in moto (`upstream`); `None` for every other request.
pub(super) async fn fleet_refused(
    upstream: &str,
    call: &super::aws_wire::Call,
    body: &str,
) -> Option<Refusal> {
    if call.operation != "CreateFleet" {
        return None;
    }
    let form = form(body);
    // A dry run (Karpenter's validation sends one before its RunInstances dry run) is left to
    // moto as before: what EC2's dry-run CreateFleet says of the profile is not documented.
    if form.get("Type").map(String::as_str) != Some("instant")
        || form.get("DryRun").map(String::as_str) == Some("true")
    {
        return None;
    }
    let mut templates = Vec::new();
    for (template, version) in fleet_templates(&form) {
        // A template moto cannot describe is moto's to refuse.
        if let Ok(data) = template_data(upstream, &call.region, &template, &version).await {
            templates.push(data);
        }
    }
    if let Some(refusal) = fleet_refusal(&call.region, &templates) {
        return Some(refusal);
    }
    for template in &templates {
        if let Some(refusal) =
            missing_profile_refusal(upstream, template.profile_name.as_ref()).await
        {
            return Some(refusal);
        }
    }
    let groups: Vec<String> = templates
        .iter()
        .flat_map(|t| t.security_groups.iter().cloned())
        .collect();
    let subnets = fleet_subnets(&form);
    network_of(upstream, &call.region, &groups, &subnets)
        .await
        .refusal(&groups, &subnets)
}

/// What EC2 refuses at launch and moto lets through ; `None` for every
/// other request.
pub(super) async fn refused(
    upstream: &str,
    call: &super::aws_wire::Call,
    body: &str,
) -> Option<Refusal> {
    match call.operation.as_str() {
        "CreateLaunchTemplate" | "CreateLaunchTemplateVersion" => {
            launch_template_refusal(&call.region, &form(body))
        }
        "RunInstances" => {
            let form = form(body);
            let template = match named_template(&form) {
                // A template moto cannot describe is moto's to refuse.
                Some((template, version)) => {
                    template_data(upstream, &call.region, &template, &version)
                        .await
                        .unwrap_or_default()
                }
                None => TemplateData::default(),
            };
            if let Some(refusal) = run_instances_refusal(&call.region, &form, &template) {
                return Some(refusal);
            }
            let profile = form
                .get("IamInstanceProfile.Name")
                .or(template.profile_name.as_ref());
            if let Some(refusal) = missing_profile_refusal(upstream, profile).await {
                return Some(refusal);
            }
            // A launch's network is checked when it launches: what EC2's dry run says of it is not
            // documented, so a dry run (Karpenter's validation) is left to moto.
            if super::aws_wire::dry_run(body.as_bytes()) {
                return None;
            }
            let groups: Vec<String> = form
                .iter()
                .filter(|(k, _)| {
                    k.starts_with("SecurityGroupId.") || k.contains(".SecurityGroupId.")
                })
                .map(|(_, v)| v.clone())
                .chain(template.security_groups.iter().cloned())
                .collect();
            let subnets: Vec<String> = form
                .iter()
                .filter(|(k, _)| *k == "SubnetId" || k.ends_with(".SubnetId"))
                .map(|(_, v)| v.clone())
                .collect();
            network_of(upstream, &call.region, &groups, &subnets)
                .await
                .refusal(&groups, &subnets)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_launch_is_refused_only_when_every_subnet_it_may_use_is_full() {
        let free: BTreeMap<String, i32> = [("subnet-full", 0), ("subnet-roomy", 40)]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        let refused = address_refusal(&["subnet-full".to_owned()], &free).expect("refused");
        assert_eq!(refused.0, "InsufficientFreeAddressesInSubnet");
        assert!(refused.1.contains("subnet-full"), "{}", refused.1);
        let both = ["subnet-full".to_owned(), "subnet-roomy".to_owned()];
        assert_eq!(address_refusal(&both, &free), None);
        assert_eq!(address_refusal(&["subnet-unknown".to_owned()], &free), None);
        assert_eq!(address_refusal(&[], &free), None);
    }

    #[test]
    fn a_security_group_of_another_vpc_than_the_subnet_is_refused() {
        let vpc_of: BTreeMap<String, String> = [
            ("sg-home", "vpc-1"),
            ("sg-stray", "vpc-2"),
            ("subnet-a", "vpc-1"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let groups = vec!["sg-home".to_owned(), "sg-stray".to_owned()];
        let refused = network_refusal(&groups, &["subnet-a".to_owned()], &vpc_of).expect("refused");
        assert_eq!(refused.0, "InvalidParameter");
        assert!(
            refused.1.contains("sg-stray") && refused.1.contains("subnet-a"),
            "{}",
            refused.1
        );
        assert_eq!(
            network_refusal(&groups[..1], &["subnet-a".to_owned()], &vpc_of),
            None
        );
        // What moto does not know is moto's to refuse.
        assert_eq!(
            network_refusal(&groups, &["subnet-unknown".to_owned()], &vpc_of),
            None
        );
    }

    #[test]
    fn a_fleet_whose_template_names_an_arn_is_refused_and_one_naming_a_profile_is_not() {
        let form = form(
            "Action=CreateFleet&Type=instant\
             &LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=karpenter-a\
             &LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version=%24Latest\
             &LaunchTemplateConfigs.2.LaunchTemplateSpecification.LaunchTemplateId=lt-0b\
             &LaunchTemplateConfigs.2.Overrides.1.InstanceType=m5.large",
        );
        assert_eq!(
            fleet_templates(&form),
            vec![
                (TemplateRef::Name("karpenter-a".into()), "$Latest".into()),
                (TemplateRef::Id("lt-0b".into()), "$Default".into()),
            ]
        );
        let arn = TemplateData {
            profile_name: Some("arn:aws:iam::123456789012:instance-profile/Node".into()),
            http_protocol_ipv6: None,
            security_groups: Vec::new(),
        };
        let named = TemplateData {
            profile_name: Some("Node".into()),
            http_protocol_ipv6: None,
            security_groups: Vec::new(),
        };
        let refused = fleet_refusal("eu-west-1", &[named.clone(), arn]).expect("refused");
        assert!(refused.1.contains("Invalid IAM Instance Profile name"));
        assert_eq!(fleet_refusal("eu-west-1", &[named]), None);
    }

    #[test]
    fn an_arn_is_no_instance_profile_name_and_a_name_is() {
        let arn = "arn:aws:iam::123456789012:instance-profile/KarpenterNodeInstanceProfile";
        let template = TemplateData {
            profile_name: Some(arn.into()),
            http_protocol_ipv6: None,
            security_groups: Vec::new(),
        };
        let form = form("Action=RunInstances&LaunchTemplate.LaunchTemplateName=lt&DryRun=true");
        let refused = run_instances_refusal("us-west-2", &form, &template).expect("refused");
        assert_eq!(refused.0, "InvalidParameterValue");
        assert!(
            refused.1.contains("Invalid IAM Instance Profile name"),
            "{}",
            refused.1
        );
        let template = TemplateData {
            profile_name: Some("KarpenterNodeInstanceProfile-a_b.c@d+e=f,g".into()),
            http_protocol_ipv6: None,
            security_groups: Vec::new(),
        };
        assert_eq!(run_instances_refusal("us-west-2", &form, &template), None);
        // The request's own profile counts too, percent-encoded as the SDK sends it.
        let form = super::form(
            "Action=RunInstances&IamInstanceProfile.Name=arn%3Aaws%3Aiam%3A%3A1%3Ainstance-profile%2Fx",
        );
        assert!(run_instances_refusal("us-west-2", &form, &TemplateData::default()).is_some());
    }

    #[test]
    fn ipv6_metadata_is_refused_in_the_isolated_regions_only() {
        let form = form(
            "Action=CreateLaunchTemplate&LaunchTemplateData.MetadataOptions.HttpProtocolIpv6=disabled",
        );
        for region in ["us-iso-east-1", "us-isob-east-1", "us-isof-south-1"] {
            assert!(launch_template_refusal(region, &form).is_some(), "{region}");
        }
        for region in ["us-east-1", "eu-isoe-west-1", "us-gov-west-1"] {
            assert_eq!(launch_template_refusal(region, &form), None, "{region}");
        }
        let without = super::form("Action=CreateLaunchTemplate&LaunchTemplateData.ImageId=ami-1");
        assert_eq!(launch_template_refusal("us-iso-east-1", &without), None);
    }

    #[test]
    fn a_run_instances_names_its_template_by_id_or_name() {
        let by_name = form(
            "LaunchTemplate.LaunchTemplateName=karpenter.k8s.aws%2F123&LaunchTemplate.Version=%24Latest",
        );
        assert_eq!(
            named_template(&by_name),
            Some((
                TemplateRef::Name("karpenter.k8s.aws/123".into()),
                "$Latest".into()
            ))
        );
        let by_id = form("LaunchTemplate.LaunchTemplateId=lt-1");
        assert_eq!(
            named_template(&by_id),
            Some((TemplateRef::Id("lt-1".into()), "$Default".into()))
        );
        assert_eq!(named_template(&form("ImageId=ami-1")), None);
    }
}
