//! What `launch_parameters.rs` refuses, and of which launch. Pure.

use super::*;

fn held() -> Held {
    let pairs = |items: &[(&str, &str)]| {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    Held {
        missing_profiles: ["Gone".to_owned()].into(),
        vpc_of: pairs(&[
            ("sg-home", "vpc-1"),
            ("sg-stray", "vpc-2"),
            ("subnet-a", "vpc-1"),
            ("subnet-full", "vpc-1"),
        ]),
        free: [("subnet-a".to_owned(), 40), ("subnet-full".to_owned(), 0)].into(),
        vcpu_room: Some(crate::vcpu_quotas::Room {
            on_demand: Some(crate::vcpu_quotas::Quota {
                value: 4.0,
                used: 2.0,
            }),
            spot: None,
            vcpus: [("m5.large".to_owned(), 2), ("m5.xlarge".to_owned(), 4)].into(),
        }),
    }
}

fn launch(profile: &str, groups: &[&str], subnet: &str) -> Launch {
    Launch {
        profile: Some(profile.to_owned()),
        http_protocol_ipv6: None,
        security_groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        subnet: Some(subnet.to_owned()),
        instance_type: Some("m5.large".to_owned()),
        spot: false,
        dry_run: false,
    }
}

#[test]
fn a_profile_that_is_no_iam_name_or_that_iam_lacks_is_refused_dry_or_not() {
    let arn = "arn:aws:iam::123456789012:instance-profile/Node";
    for dry_run in [true, false] {
        for profile in [arn, "Gone"] {
            let asked = Launch {
                dry_run,
                ..launch(profile, &["sg-home"], "subnet-a")
            };
            let refused = launch_refusal("us-west-2", &asked, &held()).expect("refused");
            assert_eq!(refused.0, "InvalidParameterValue");
            assert!(
                refused.1.contains("Invalid IAM Instance Profile name"),
                "{}",
                refused.1
            );
        }
    }
    let named = launch(
        "KarpenterNodeInstanceProfile-a_b.c@d+e=f,g",
        &["sg-home"],
        "subnet-a",
    );
    assert_eq!(launch_refusal("us-west-2", &named, &held()), None);
}

#[test]
fn the_network_and_the_metadata_option_are_refused_at_launch_not_in_a_dry_run() {
    let stray = launch("Node", &["sg-home", "sg-stray"], "subnet-a");
    let refused = launch_refusal("us-west-2", &stray, &held()).expect("refused");
    assert_eq!(refused.0, "InvalidParameter");
    assert!(
        refused.1.contains("sg-stray") && refused.1.contains("subnet-a"),
        "{}",
        refused.1
    );
    let full = launch("Node", &["sg-home"], "subnet-full");
    let refused = launch_refusal("us-west-2", &full, &held()).expect("refused");
    assert_eq!(refused.0, "InsufficientFreeAddressesInSubnet");
    assert!(refused.1.contains("subnet-full"), "{}", refused.1);
    let ipv6 = Launch {
        http_protocol_ipv6: Some("disabled".into()),
        ..launch("Node", &["sg-home"], "subnet-a")
    };
    assert_eq!(
        launch_refusal("us-iso-east-1", &ipv6, &held()).map(|r| r.0),
        Some("UnsupportedOperation")
    );
    assert_eq!(launch_refusal("us-west-2", &ipv6, &held()), None);
    for asked in [stray, full, ipv6] {
        let dry = Launch {
            dry_run: true,
            ..asked
        };
        assert_eq!(launch_refusal("us-iso-east-1", &dry, &held()), None);
    }
    // Past the on-demand vCPU quota (2 of 4 in use), not in a dry run, not as spot.
    let larger = Launch {
        instance_type: Some("m5.xlarge".into()),
        ..launch("Node", &["sg-home"], "subnet-a")
    };
    assert_eq!(
        launch_refusal("us-west-2", &larger, &held()).map(|r| r.0),
        Some("VcpuLimitExceeded")
    );
    for asked in [
        Launch {
            dry_run: true,
            ..larger.clone()
        },
        Launch {
            spot: true,
            ..larger.clone()
        },
    ] {
        assert_eq!(launch_refusal("us-west-2", &asked, &held()), None);
    }
    // What moto does not know is moto's to refuse.
    let unknown = launch("Node", &["sg-stray"], "subnet-unknown");
    assert_eq!(launch_refusal("us-west-2", &unknown, &held()), None);
}

#[test]
fn a_fleet_lists_its_overrides_with_their_templates() {
    let asked = form(
        "Action=CreateFleet&Type=instant\
         &LaunchTemplateConfigs.1.LaunchTemplateSpecification.LaunchTemplateName=karpenter-a\
         &LaunchTemplateConfigs.1.LaunchTemplateSpecification.Version=%24Latest\
         &LaunchTemplateConfigs.1.Overrides.1.InstanceType=m5.large\
         &LaunchTemplateConfigs.1.Overrides.1.SubnetId=subnet-a\
         &LaunchTemplateConfigs.1.Overrides.2.InstanceType=m5.xlarge\
         &LaunchTemplateConfigs.1.Overrides.2.SubnetId=subnet-full\
         &LaunchTemplateConfigs.2.LaunchTemplateSpecification.LaunchTemplateId=lt-0b",
    );
    let overrides = fleet_overrides(&asked);
    assert_eq!(overrides.len(), 3, "{overrides:?}");
    assert_eq!(
        overrides[0].template,
        (TemplateRef::Name("karpenter-a".into()), "$Latest".into())
    );
    assert_eq!(overrides[1].fields["SubnetId"], "subnet-full");
    assert_eq!(overrides[1].index, Some(2));
    assert_eq!(
        (
            overrides[2].config,
            overrides[2].index,
            &overrides[2].template.0
        ),
        (2, None, &TemplateRef::Id("lt-0b".into()))
    );
    // The full subnet's override is refused and the roomy one's is not: EC2 launches there.
    let template = TemplateData {
        profile_name: Some("Node".into()),
        http_protocol_ipv6: None,
        security_groups: vec!["sg-home".into()],
    };
    let refusals: Vec<Option<Refusal>> = overrides[..2]
        .iter()
        .map(|o| {
            let launch = fleet_launch(o, &template, false, false);
            launch_refusal("us-west-2", &launch, &held())
        })
        .collect();
    assert!(
        refusals[0].is_none() && refusals[1].is_some(),
        "{refusals:?}"
    );
}

#[test]
fn a_run_instances_form_reads_its_own_fields_over_its_template() {
    let asked = form(
        "Action=RunInstances&LaunchTemplate.LaunchTemplateName=lt&DryRun=true\
         &NetworkInterface.1.SubnetId=subnet-a&SecurityGroupId.1=sg-stray\
         &IamInstanceProfile.Name=arn%3Aaws%3Aiam%3A%3A1%3Ainstance-profile%2Fx",
    );
    let template = TemplateData {
        profile_name: Some("Node".into()),
        http_protocol_ipv6: Some("disabled".into()),
        security_groups: vec!["sg-home".into()],
    };
    let launch = run_instances_launch(&asked, &template);
    assert_eq!(
        launch.profile.as_deref(),
        Some("arn:aws:iam::1:instance-profile/x")
    );
    assert_eq!(launch.subnet.as_deref(), Some("subnet-a"));
    assert_eq!(launch.security_groups, ["sg-stray", "sg-home"]);
    assert!(launch.dry_run);
    assert_eq!(
        named_template(&asked),
        Some((TemplateRef::Name("lt".into()), "$Default".into()))
    );
}
