//! Unit tests of the IAM policy evaluator. Pure.

use super::*;

fn decide(doc: &str, action: &str, resource: &str, context: &RequestContext) -> Decision {
    let policy = parse(doc).expect("policy");
    evaluate(
        &[Named {
            name: "p",
            policy: &policy,
        }],
        &Request {
            principal: None,
            action,
            resource,
            context,
        },
    )
}

const NODE_ROLE: &str = "arn:aws:iam::111122223333:role/KarpenterNodeRole-demo";

fn pass_role_context() -> RequestContext {
    RequestContext::new().with_value("iam:PassedToService", "ec2.amazonaws.com")
}

#[test]
fn karpenters_pass_role_statement_allows_the_node_role_to_ec2_only() {
    let doc = r#"{"Statement":[{"Sid":"AllowPassingInstanceRole","Effect":"Allow","Resource":"arn:aws:iam::111122223333:role/KarpenterNodeRole-demo","Action":"iam:PassRole","Condition":{"StringEquals":{"iam:PassedToService":["ec2.amazonaws.com","ec2.amazonaws.com.cn"]}}}]}"#;
    assert!(decide(doc, "iam:PassRole", NODE_ROLE, &pass_role_context()).is_allowed());
    let to_lambda = RequestContext::new().with_value("iam:PassedToService", "lambda.amazonaws.com");
    assert_eq!(
        decide(doc, "iam:PassRole", NODE_ROLE, &to_lambda),
        Decision::ImplicitDeny
    );
    // The same role name on another path is another ARN.
    let with_path = "arn:aws:iam::111122223333:role/nodes/KarpenterNodeRole-demo";
    assert_eq!(
        decide(doc, "iam:PassRole", with_path, &pass_role_context()),
        Decision::ImplicitDeny
    );
}

#[test]
fn actions_match_case_insensitively_with_wildcards_and_resources_case_sensitively() {
    let doc = r#"{"Statement":{"Effect":"Allow","Action":"IAM:Pass*","Resource":"arn:aws:iam::*:role/Karpenter?odeRole-*"}}"#;
    let ctx = RequestContext::new();
    assert!(decide(doc, "iam:PassRole", NODE_ROLE, &ctx).is_allowed());
    let lower = "arn:aws:iam::111122223333:role/karpenternoderole-demo";
    assert_eq!(
        decide(doc, "iam:PassRole", lower, &ctx),
        Decision::ImplicitDeny
    );
}

#[test]
fn not_action_and_not_resource_invert_their_lists() {
    let doc = r#"{"Statement":[{"Effect":"Allow","NotAction":"iam:*","Resource":"*"},{"Effect":"Allow","Action":"iam:PassRole","NotResource":"arn:aws:iam::*:role/admin*"}]}"#;
    let ctx = RequestContext::new();
    assert!(decide(doc, "ec2:RunInstances", "*", &ctx).is_allowed());
    assert!(decide(doc, "iam:PassRole", NODE_ROLE, &ctx).is_allowed());
    assert_eq!(
        decide(doc, "iam:PassRole", "arn:aws:iam::1:role/admin-x", &ctx),
        Decision::ImplicitDeny
    );
    assert_eq!(
        decide(doc, "iam:CreateRole", "*", &ctx),
        Decision::ImplicitDeny
    );
}

#[test]
fn an_explicit_deny_wins_over_any_allow() {
    let doc = r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"},{"Sid":"NoPass","Effect":"Deny","Action":"iam:PassRole","Resource":"*"}]}"#;
    assert_eq!(
        decide(doc, "iam:PassRole", NODE_ROLE, &RequestContext::new()),
        Decision::ExplicitDeny(vec![StatementRef {
            policy: "p".into(),
            statement: "NoPass".into()
        }])
    );
}

#[test]
fn conditions_on_unknown_keys_leave_the_decision_open_unless_something_else_decides() {
    let allow_from_vpc = r#"{"Statement":[{"Effect":"Allow","Action":"ec2:RunInstances","Resource":"*","Condition":{"StringEquals":{"aws:SourceVpc":"vpc-1"}}}]}"#;
    let ctx = RequestContext::new();
    assert!(matches!(
        decide(allow_from_vpc, "ec2:RunInstances", "*", &ctx),
        Decision::Undecided(_)
    ));
    // A maybe-Allow cannot help an action it does not cover.
    assert_eq!(
        decide(allow_from_vpc, "ec2:CreateFleet", "*", &ctx),
        Decision::ImplicitDeny
    );
    // A maybe-Deny undecides an Allow, but an unconditional Deny decides.
    let maybe_deny = r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"},{"Effect":"Deny","Action":"*","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}"#;
    assert!(matches!(
        decide(maybe_deny, "ec2:RunInstances", "*", &ctx),
        Decision::Undecided(_)
    ));
    let policy_variable = r#"{"Statement":[{"Effect":"Allow","Action":"iam:PassRole","Resource":"arn:aws:iam::1:role/${aws:PrincipalTag/team}-*"}]}"#;
    assert!(matches!(
        decide(
            policy_variable,
            "iam:PassRole",
            "arn:aws:iam::1:role/a-b",
            &ctx
        ),
        Decision::Undecided(_)
    ));
}

#[test]
fn request_tag_conditions_are_decided_when_the_whole_tag_set_is_known() {
    let doc = r#"{"Statement":[{"Effect":"Allow","Action":["ec2:RunInstances"],"Resource":"*","Condition":{"StringEquals":{"aws:RequestTag/kubernetes.io/cluster/demo":"owned","aws:RequestTag/eks:eks-cluster-name":"demo"},"StringLike":{"aws:RequestTag/karpenter.sh/nodepool":"*"}}}]}"#;
    let tags = |cluster: &str| {
        RequestContext::new()
            .with_value(
                &format!("aws:RequestTag/kubernetes.io/cluster/{cluster}"),
                "owned",
            )
            .with_value("aws:RequestTag/eks:eks-cluster-name", cluster)
            .with_value("aws:RequestTag/karpenter.sh/nodepool", "default")
            .all_given_under("aws:RequestTag/")
    };
    assert!(decide(doc, "ec2:RunInstances", "*", &tags("demo")).is_allowed());
    // A policy written for another cluster's name never matches this one's tags.
    assert_eq!(
        decide(doc, "ec2:RunInstances", "*", &tags("prod")),
        Decision::ImplicitDeny
    );
}

#[test]
fn if_exists_null_negation_and_set_qualifiers_follow_iam() {
    let ctx = RequestContext::new()
        .with("aws:TagKeys", &["Name", "karpenter.sh/nodeclaim"])
        .all_given_under("aws:RequestTag/");
    let check = |cond: &str| {
        decide(
            &format!(
                r#"{{"Statement":{{"Effect":"Allow","Action":"*","Resource":"*","Condition":{cond}}}}}"#
            ),
            "ec2:CreateTags",
            "*",
            &ctx,
        )
    };
    assert!(check(r#"{"StringEqualsIfExists":{"aws:RequestTag/x":"y"}}"#).is_allowed());
    assert_eq!(
        check(r#"{"StringEquals":{"aws:RequestTag/x":"y"}}"#),
        Decision::ImplicitDeny
    );
    assert!(check(r#"{"StringNotEquals":{"aws:RequestTag/x":"y"}}"#).is_allowed());
    assert!(check(r#"{"Null":{"aws:RequestTag/x":"true"}}"#).is_allowed());
    assert!(check(r#"{"ForAllValues:StringEquals":{"aws:TagKeys":["Name","karpenter.sh/nodeclaim","eks:eks-cluster-name"]}}"#).is_allowed());
    assert_eq!(
        check(r#"{"ForAllValues:StringEquals":{"aws:TagKeys":["Name"]}}"#),
        Decision::ImplicitDeny
    );
    assert!(check(r#"{"ForAnyValue:StringLike":{"aws:TagKeys":"karpenter.sh/*"}}"#).is_allowed());
    assert!(matches!(
        check(r#"{"NumericLessThan":{"aws:TagKeys":"3"}}"#),
        Decision::Undecided(_)
    ));
}

#[test]
fn trust_policies_match_principals_and_web_identity_conditions() {
    let provider =
        "arn:aws:iam::111122223333:oidc-provider/oidc.eks.us-west-2.amazonaws.com/id/ABC";
    let doc = format!(
        r#"{{"Statement":[{{"Effect":"Allow","Principal":{{"Federated":"{provider}"}},"Action":"sts:AssumeRoleWithWebIdentity","Condition":{{"StringEquals":{{"oidc.eks.us-west-2.amazonaws.com/id/ABC:sub":"system:serviceaccount:kube-system:karpenter","oidc.eks.us-west-2.amazonaws.com/id/ABC:aud":"sts.amazonaws.com"}}}}}}]}}"#
    );
    let policy = parse(&doc).unwrap();
    let ask = |sa: &str, principal: &Principal| {
        let ctx = RequestContext::new()
            .with_value("oidc.eks.us-west-2.amazonaws.com/id/ABC:sub", sa)
            .with_value(
                "oidc.eks.us-west-2.amazonaws.com/id/ABC:aud",
                "sts.amazonaws.com",
            );
        evaluate(
            &[Named {
                name: "trust",
                policy: &policy,
            }],
            &Request {
                principal: Some(principal),
                action: "sts:AssumeRoleWithWebIdentity",
                resource: "*",
                context: &ctx,
            },
        )
    };
    let ours = Principal::Federated(provider.into());
    assert!(ask("system:serviceaccount:kube-system:karpenter", &ours).is_allowed());
    assert_eq!(
        ask("system:serviceaccount:karpenter:karpenter", &ours),
        Decision::ImplicitDeny
    );
    let other = Principal::Federated(provider.replace("ABC", "XYZ"));
    assert_eq!(
        ask("system:serviceaccount:kube-system:karpenter", &other),
        Decision::ImplicitDeny
    );
    let service = Principal::Service("pods.eks.amazonaws.com".into());
    assert_eq!(ask("x", &service), Decision::ImplicitDeny);
}

#[test]
fn iam_encoded_documents_and_garbage() {
    let encoded = percent_encoding::utf8_percent_encode(
        r#"{"Statement":{"Effect":"Allow","Action":"*","Resource":"*"}}"#,
        percent_encoding::NON_ALPHANUMERIC,
    )
    .to_string();
    assert!(decide(&encoded, "a:b", "*", &RequestContext::new()).is_allowed());
    for doc in [
        "",
        "{",
        "[]",
        r#"{"Statement":3}"#,
        r#"{"Statement":[{"Effect":"Maybe"}]}"#,
        r#"{"Statement":[{"Effect":"Allow","Condition":{"StringEquals":"x"}}]}"#,
    ] {
        assert!(parse(doc).is_err(), "{doc}");
    }
}

#[test]
fn escaped_wildcards_match_only_themselves() {
    assert!(like("a${*}b", "a*b"));
    assert!(!like("a${*}b", "axb"));
    assert!(like("a*b", "axxb"));
}
