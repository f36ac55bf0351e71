//! The permission questions `ControllerCanLaunch` and `SpotReady` ask of IAM
//! (`karpenter_permissions.rs`): which, on what, in which context. Pure.

use crate::karpenter_permissions::*;
use std::collections::BTreeMap;

fn inputs(manages: bool) -> Inputs {
    Inputs {
        partition: "aws".into(),
        account: "111122223333".into(),
        region: "us-west-2".into(),
        cluster: "demo".into(),
        node_role_arn: "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo".into(),
        node_class: "default".into(),
        node_class_uid: "uid-1".into(),
        node_pool: "general".into(),
        spec_tags: BTreeMap::from([("team".into(), "a".into())]),
        manages_instance_profile: manages,
        instance_profile: None,
        metadata: MetadataKeys::default(),
        ami_parameter: None,
        allows_spot: false,
    }
}

#[test]
fn a_class_with_spot_asks_whether_ec2_may_create_the_spot_service_linked_role() {
    assert!(
        !inputs(false)
            .questions()
            .iter()
            .any(|q| q.group == Group::SpotServiceLinkedRole)
    );
    let spot = Inputs {
        allows_spot: true,
        ..inputs(false)
    };
    let asked: Vec<Question> = spot
        .questions()
        .into_iter()
        .filter(|q| q.group == Group::SpotServiceLinkedRole)
        .collect();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].action, "iam:CreateServiceLinkedRole");
    assert_eq!(
        asked[0].resource,
        "arn:aws:iam::111122223333:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot"
    );
    let context = spot.context(Group::SpotServiceLinkedRole);
    assert!(
        context
            .entries()
            .any(|(k, v)| k == "iam:AWSServiceName" && v == ["spot.amazonaws.com"]),
        "{context:?}"
    );
}

#[test]
fn an_alias_adds_the_read_of_its_first_parameter_for_the_clusters_minor() {
    let class = ClassInputs {
        cluster: "demo".into(),
        ami_alias: Some("al2023@latest".into()),
        ..Default::default()
    };
    let unknown_minor = class.complete("aws", "111122223333", "us-west-2", "arn:r", None);
    assert!(
        !unknown_minor
            .questions()
            .iter()
            .any(|q| q.action == READ_PARAMETER)
    );
    let inputs = class.complete("aws", "111122223333", "us-west-2", "arn:r", Some("1.31"));
    let read: Vec<Question> = inputs
        .questions()
        .into_iter()
        .filter(|q| q.action == READ_PARAMETER)
        .collect();
    assert_eq!(
        read,
        vec![Question {
            group: Group::AmiParameters,
            action: READ_PARAMETER,
            resource: "arn:aws:ssm:us-west-2::parameter/aws/service/eks/optimized-ami/1.31/\
                       amazon-linux-2023/x86_64/standard/recommended/image_id"
                .into(),
        }]
    );
    // No tag of a launch reaches the parameter's context.
    let context: Vec<String> = inputs
        .context(Group::AmiParameters)
        .entries()
        .map(|(k, _)| k.to_owned())
        .collect();
    assert_eq!(context, vec!["aws:RequestedRegion".to_owned()]);
}

#[test]
fn the_launch_questions_are_always_asked_and_the_profile_ones_only_for_spec_role() {
    let launch = inputs(false).questions();
    // PassRole; RunInstances and CreateFleet on 7 kinds; CreateFleet on the fleet;
    // CreateLaunchTemplate; CreateTags on 5 kinds; DescribeImages.
    assert_eq!(launch.len(), 1 + 14 + 1 + 1 + 5 + 1);
    assert!(
        launch.iter().any(|q| q.group == Group::Images
            && q.action == DESCRIBE_IMAGES
            && q.resource == "*")
    );
    for kind in [
        "subnet/*",
        "security-group/*",
        "image/*",
        "volume/*",
        "network-interface/*",
    ] {
        assert!(
            launch
                .iter()
                .any(|q| q.action == "ec2:RunInstances" && q.resource.ends_with(kind)),
            "{kind}"
        );
    }
    let all = inputs(true).questions();
    assert_eq!(all.len(), launch.len() + 3);
    assert_eq!(
        all[0].resource,
        "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo"
    );
    assert_eq!(
        all[1].resource,
        "arn:aws:ec2:us-west-2:111122223333:instance/*"
    );
    assert!(all[all.len() - 2].resource.starts_with(
        "arn:aws:iam::111122223333:instance-profile/karpenter/us-west-2/demo/uid-1/"
    ));
}

#[test]
fn contexts_carry_karpenters_tags() {
    let launch: Vec<(String, Vec<String>)> = inputs(true)
        .context(Group::Launch)
        .entries()
        .map(|(k, v)| (k.to_owned(), v.to_vec()))
        .collect();
    let has = |k: &str, v: &str| {
        launch
            .iter()
            .any(|(key, vals)| key == k && vals == &[v.to_owned()])
    };
    assert!(has("aws:RequestTag/kubernetes.io/cluster/demo", "owned"));
    assert!(has("aws:RequestTag/karpenter.sh/nodepool", "general"));
    assert!(has("aws:RequestTag/team", "a"));
    assert!(has("iam:PassedToService", "ec2.amazonaws.com"));
    // An SCP requiring IMDSv2 is decided from the class's own setting.
    assert!(has("ec2:MetadataHttpTokens", "required"));
    assert!(has("ec2:CreateAction", "CreateFleet"));
}
