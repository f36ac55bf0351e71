//! IAM's simulations shared among EC2NodeClasses whose questions the controller's policies
//! cannot tell apart: one set of calls for twenty classes that differ only by name, their own
//! questions for classes whose tags or node role differ, whose names a policy singles out, or
//! whose shared answer was anything but allowed.

use crate::common::{CONTROLLER_ROLE, observer, options, wiring_request, world};
use karpenter_health_aws::AwsRequest;
use karpenter_health_aws::fake::FakeAws;
use karpenter_health_checks::facts::AwsFacts;
use std::collections::BTreeMap;

/// The request of a class named `name` (its NodePool has the same name), with `tags`.
fn class(name: &str, tags: &[(&str, &str)]) -> AwsRequest {
    let mut request = wiring_request();
    let inputs = request
        .controller
        .as_mut()
        .and_then(|c| c.class.as_mut())
        .expect("the wiring request asks about the controller");
    inputs.node_class = name.into();
    inputs.node_pool = name.into();
    inputs.node_class_uid = format!("uid-{name}");
    inputs.spec_tags = tags
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect::<BTreeMap<_, _>>();
    request
}

/// Every question of `facts` with its decision, by action and resource.
fn decisions(facts: &AwsFacts) -> Vec<(String, String, String)> {
    let mut all: Vec<_> = facts
        .controller_permissions
        .as_ref()
        .and_then(|p| p.simulated.found().cloned())
        .expect("simulated")
        .into_iter()
        .map(|d| (d.action, d.resource, d.decision))
        .collect();
    all.sort();
    all
}

async fn simulations_for(fake: &FakeAws, requests: &[AwsRequest]) -> (usize, Vec<AwsFacts>) {
    let obs = observer(fake, options());
    let mut all = Vec::new();
    for request in requests {
        all.push(obs.observe(request).await);
    }
    (fake.calls("SimulatePrincipalPolicy"), all)
}

#[tokio::test(start_paused = true)]
async fn twenty_classes_that_differ_only_by_name_ask_iam_once() {
    let one = FakeAws::new(world());
    let (alone, _) = simulations_for(&one, &[class("c0", &[("team", "a")])]).await;
    assert!(alone > 0);

    let fake = FakeAws::new(world());
    let classes: Vec<_> = (0..20)
        .map(|n| class(&format!("c{n}"), &[("team", "a")]))
        .collect();
    let (calls, facts) = simulations_for(&fake, &classes).await;
    assert_eq!(calls, alone, "twenty classes cost what one does");
    // Each class's answers name its own resources (its own instance profile), all allowed.
    for (request, facts) in classes.iter().zip(&facts) {
        let uid = &request
            .controller
            .as_ref()
            .unwrap()
            .class
            .as_ref()
            .unwrap()
            .node_class_uid;
        let own = decisions(facts);
        assert!(own.iter().all(|(_, _, d)| d == "allowed"));
        let profiles: Vec<_> = own
            .iter()
            .filter(|(_, r, _)| r.contains(":instance-profile/"))
            .collect();
        assert!(!profiles.is_empty());
        assert!(
            profiles.iter().all(|(_, r, _)| r.contains(uid.as_str())),
            "{profiles:?} names {uid}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn classes_with_other_tags_ask_their_own_questions() {
    let fake = FakeAws::new(world());
    let (one, _) = simulations_for(&fake, &[class("c0", &[("team", "a")])]).await;
    let fake = FakeAws::new(world());
    let (two, _) = simulations_for(
        &fake,
        &[class("c0", &[("team", "a")]), class("c1", &[("team", "b")])],
    )
    .await;
    // Every question a tag reaches is asked per class; DescribeImages, which carries none, is
    // asked once.
    assert_eq!(
        two,
        2 * one - 1,
        "a user tag may be what an SCP guardrail requires"
    );
}

#[tokio::test(start_paused = true)]
async fn a_policy_that_names_a_class_keeps_its_questions_apart() {
    let fake = FakeAws::new(world());
    let (one, _) = simulations_for(&fake, &[class("c0", &[])]).await;
    let fake = FakeAws::new(world());
    fake.with(|s| {
        s.role_policies.get_mut(CONTROLLER_ROLE).unwrap().push((
            "gpu-only".into(),
            r#"{"Statement":[{"Effect":"Deny","Action":"ec2:RunInstances","Resource":"*",
                "Condition":{"StringEquals":{"aws:RequestTag/karpenter.sh/nodepool":"gpu"}}}]}"#
                .into(),
        ));
    });
    let (calls, _) = simulations_for(&fake, &[class("c0", &[]), class("gpu", &[])]).await;
    // DescribeImages names no NodePool: still shared.
    assert_eq!(calls, 2 * one - 1);
}

#[tokio::test(start_paused = true)]
async fn a_denial_is_never_shared() {
    let fake = FakeAws::new(world());
    fake.with(|s| {
        s.simulated
            .insert("iam:PassRole".into(), "implicitDeny".into());
    });
    let (calls, facts) = simulations_for(&fake, &[class("c0", &[]), class("c1", &[])]).await;
    let fake_one = FakeAws::new(world());
    fake_one.with(|s| {
        s.simulated
            .insert("iam:PassRole".into(), "implicitDeny".into());
    });
    let (one, _) = simulations_for(&fake_one, &[class("c0", &[])]).await;
    // Three groups of questions: the one with iam:PassRole, denied, is asked again as the
    // second class's own; the others, all allowed, are shared.
    assert_eq!(one, 3);
    assert_eq!(
        calls,
        one + 1,
        "the second class asked the denied group itself"
    );
    for f in &facts {
        assert!(
            decisions(f)
                .iter()
                .any(|(a, _, d)| a == "iam:PassRole" && d == "implicitDeny")
        );
    }
}

/// `"iam:PassRole <resource>"` of the simulated pair whose resource contains `resource`, as the
/// fake simulator's key for a per-pair answer.
fn pass_role_on(facts: &AwsFacts, resource: &str) -> String {
    decisions(facts)
        .into_iter()
        .find(|(a, r, _)| a == "iam:PassRole" && r.contains(resource))
        .map(|(a, r, _)| format!("{a} {r}"))
        .unwrap_or_else(|| panic!("the launch simulation asks iam:PassRole on {resource}"))
}

#[tokio::test(start_paused = true)]
async fn a_denial_no_question_reads_does_not_keep_an_answer_apart() {
    // One class alone, to learn what it asks and which pairs no question reads.
    let probe = FakeAws::new(world());
    let (one, facts) = simulations_for(&probe, &[class("c0", &[])]).await;
    let unread = pass_role_on(&facts[0], ":instance/*");
    // The simulator denies that pair, as IAM does when the policy grants PassRole on the node
    // role only: the rule never reads it, so the answer is still shared.
    let fake = FakeAws::new(world());
    fake.with(|s| {
        s.simulated.insert(unread.clone(), "implicitDeny".into());
    });
    let classes: Vec<_> = (0..20).map(|n| class(&format!("c{n}"), &[])).collect();
    let (calls, facts) = simulations_for(&fake, &classes).await;
    assert_eq!(calls, one, "twenty classes cost what one does");
    for f in &facts {
        let own = decisions(f);
        assert!(
            own.iter()
                .filter(|(a, r, _)| format!("{a} {r}") != unread)
                .all(|(_, _, d)| d == "allowed"),
            "{own:?}"
        );
    }
    // The same denial on the node role, which the rule reads, is asked by each class itself.
    let node_role = pass_role_on(&facts[0], ":role/");
    let fake = FakeAws::new(world());
    fake.with(|s| {
        s.simulated.insert(node_role.clone(), "implicitDeny".into());
    });
    let (calls, _) = simulations_for(&fake, &classes[..2]).await;
    assert_eq!(
        calls,
        one + 1,
        "the second class asked the denied group itself"
    );
}

/// The request of `class` whose images come from `alias`.
fn with_alias(mut request: AwsRequest, alias: &str) -> AwsRequest {
    request.ami_alias = Some(alias.into());
    if let Some(inputs) = request.controller.as_mut().and_then(|c| c.class.as_mut()) {
        inputs.ami_alias = Some(alias.into());
    }
    request
}

#[tokio::test(start_paused = true)]
async fn the_alias_parameter_is_asked_for_eks_s_minor_once_for_every_class() {
    let one = FakeAws::new(world());
    let (alone, facts) = simulations_for(&one, &[class("c0", &[("team", "a")])]).await;
    assert!(
        !decisions(&facts[0])
            .iter()
            .any(|(action, _, _)| action == "ssm:GetParameter"),
        "no alias, no parameter"
    );

    let fake = FakeAws::new(world());
    let classes: Vec<_> = (0..20)
        .map(|n| with_alias(class(&format!("c{n}"), &[("team", "a")]), "al2023@latest"))
        .collect();
    let (calls, facts) = simulations_for(&fake, &classes).await;
    // One simulation more than without an alias, whatever the number of classes: the
    // parameter's question is the same for every class of the alias.
    assert_eq!(calls, alone + 1);
    // The world's EKS cluster runs 1.31: the parameter Karpenter reads for it.
    let parameter = "arn:aws:ssm:us-west-2::parameter/aws/service/eks/optimized-ami/1.31/\
                     amazon-linux-2023/x86_64/standard/recommended/image_id";
    for facts in &facts {
        let read: Vec<_> = decisions(facts)
            .into_iter()
            .filter(|(action, _, _)| action == "ssm:GetParameter")
            .collect();
        assert_eq!(
            read,
            vec![(
                "ssm:GetParameter".to_owned(),
                parameter.to_owned(),
                "allowed".to_owned()
            )]
        );
    }
}
