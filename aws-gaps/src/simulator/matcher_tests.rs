//! Tests of the fault proxy simulator's own matcher against the IAM User Guide's rules
//! ("Policy evaluation logic", "Condition operators"), and the helpers the answer's tests share.
//! Pure, no IO.

use super::condition::Context;
use super::policy::{self, Decision, Matched, Outcome, Policies, Policy, Request};
use serde_json::json;

pub(super) const INSTANCE: &str = "arn:aws:ec2:us-east-1:111122223333:instance/*";
pub(super) const ROLE: &str = "arn:aws:iam::111122223333:role/KarpenterNodeRole";

pub(super) fn doc(statements: serde_json::Value) -> String {
    json!({"Version": "2012-10-17", "Statement": statements}).to_string()
}

pub(super) fn inline(name: &str, statements: serde_json::Value) -> Policy {
    policy::parse(name, Some("role"), &doc(statements)).expect("policy")
}

pub(super) fn allow(action: &str, resource: &str) -> serde_json::Value {
    json!({"Effect": "Allow", "Action": action, "Resource": resource})
}

pub(super) fn deny(action: &str, resource: &str) -> serde_json::Value {
    json!({"Effect": "Deny", "Action": action, "Resource": resource})
}

pub(super) fn identity(policies: Vec<Policy>) -> Policies {
    Policies {
        identity: policies,
        ..Policies::default()
    }
}

fn ask(policies: &Policies, action: &str, resource: &str, context: &Context) -> Outcome {
    policy::evaluate(
        policies,
        &Request {
            action,
            resource,
            context,
        },
    )
}

fn decide(policies: &Policies, action: &str, resource: &str, context: &Context) -> Decision {
    ask(policies, action, resource, context).decision
}

fn ids(matched: &[Matched]) -> Vec<&str> {
    matched.iter().map(|m| m.id.as_str()).collect()
}

/// Any SCP allowing everything, as AWS's `FullAWSAccess`.
fn full_aws_access() -> serde_json::Value {
    allow("*", "*")
}

pub(super) fn scp(statements: serde_json::Value) -> Policy {
    policy::parse("scp-1", None, &doc(statements)).expect("scp")
}

#[test]
fn an_identity_policy_allows_and_is_named() {
    let policies = identity(vec![inline(
        "Launch",
        json!([allow("ec2:RunInstances", "arn:aws:ec2:*:*:instance/*")]),
    )]);
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &Context::default());
    assert_eq!(got.decision, Decision::Allowed);
    assert_eq!(ids(&got.matched), ["Launch"]);
    assert_eq!(got.matched[0].kind, Some("role"));
    assert!(got.missing.is_empty());
    assert_eq!(got.allowed_by_boundary, None);
    assert_eq!(got.allowed_by_organizations, None);
    // Actions compare without case, resources with.
    let ctx = Context::default();
    assert_eq!(
        decide(&policies, "EC2:runinstances", INSTANCE, &ctx),
        Decision::Allowed
    );
    let upper = "arn:aws:ec2:us-east-1:111122223333:INSTANCE/i-1";
    assert_eq!(
        decide(&policies, "ec2:RunInstances", upper, &ctx),
        Decision::ImplicitDeny
    );
}

#[test]
fn an_explicit_deny_wins_over_an_allow_and_names_the_denying_policy() {
    let policies = identity(vec![
        inline("Everything", json!([allow("*", "*")])),
        inline("NoLaunch", json!([deny("ec2:Run*", "*")])),
    ]);
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &Context::default());
    assert_eq!(got.decision, Decision::ExplicitDeny);
    assert_eq!(ids(&got.matched), ["NoLaunch"]);
    let ctx = Context::default();
    assert_eq!(
        decide(&policies, "ec2:CreateFleet", INSTANCE, &ctx),
        Decision::Allowed
    );
}

#[test]
fn nothing_allowing_is_an_implicit_deny_with_no_matched_statement() {
    let policies = identity(vec![inline("Pass", json!([allow("iam:PassRole", ROLE)]))]);
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &Context::default());
    assert_eq!(got.decision, Decision::ImplicitDeny);
    assert!(got.matched.is_empty());
    let other_role = "arn:aws:iam::111122223333:role/Other";
    let ctx = Context::default();
    assert_eq!(
        decide(&policies, "iam:PassRole", other_role, &ctx),
        Decision::ImplicitDeny
    );
    assert_eq!(
        decide(&policies, "iam:PassRole", ROLE, &ctx),
        Decision::Allowed
    );
}

#[test]
fn not_action_and_not_resource_apply_to_everything_else() {
    let policies = identity(vec![inline(
        "AllButIam",
        json!([{"Effect": "Allow", "NotAction": "iam:*", "NotResource": "arn:aws:ec2:*:*:volume/*"}]),
    )]);
    let ctx = Context::default();
    assert_eq!(
        decide(&policies, "ec2:RunInstances", INSTANCE, &ctx),
        Decision::Allowed
    );
    assert_eq!(
        decide(&policies, "iam:PassRole", ROLE, &ctx),
        Decision::ImplicitDeny
    );
    let volume = "arn:aws:ec2:us-east-1:111122223333:volume/vol-1";
    assert_eq!(
        decide(&policies, "ec2:CreateVolume", volume, &ctx),
        Decision::ImplicitDeny
    );
}

#[test]
fn a_boundary_that_does_not_allow_denies_implicitly() {
    let policies = Policies {
        identity: vec![inline("Everything", json!([allow("*", "*")]))],
        boundary: Some(
            policy::parse(
                "arn:aws:iam::111122223333:policy/Boundary",
                None,
                &doc(json!([allow("iam:*", "*")])),
            )
            .expect("boundary"),
        ),
        ..Policies::default()
    };
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &Context::default());
    assert_eq!(got.decision, Decision::ImplicitDeny);
    assert_eq!(got.allowed_by_boundary, Some(false));
    let got = ask(&policies, "iam:PassRole", ROLE, &Context::default());
    assert_eq!(got.decision, Decision::Allowed);
    assert_eq!(got.allowed_by_boundary, Some(true));
}

#[test]
fn a_service_control_policy_denies_explicitly() {
    let policies = Policies {
        identity: vec![inline("Everything", json!([allow("*", "*")]))],
        service_control: vec![scp(json!([
            full_aws_access(),
            deny("ec2:RunInstances", "*")
        ]))],
        ..Policies::default()
    };
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &Context::default());
    assert_eq!(got.decision, Decision::ExplicitDeny);
    assert_eq!(got.allowed_by_organizations, Some(false));
    assert_eq!(ids(&got.matched), ["scp-1"]);
    let got = ask(&policies, "iam:PassRole", ROLE, &Context::default());
    assert_eq!(got.decision, Decision::Allowed);
    assert_eq!(got.allowed_by_organizations, Some(true));
}

#[test]
fn a_service_control_policy_that_does_not_allow_denies_implicitly() {
    let policies = Policies {
        identity: vec![inline("Everything", json!([allow("*", "*")]))],
        service_control: vec![scp(json!([allow("s3:*", "*")]))],
        ..Policies::default()
    };
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &Context::default());
    assert_eq!(got.decision, Decision::ImplicitDeny);
    assert_eq!(got.allowed_by_organizations, Some(false));
    assert!(got.matched.is_empty());
    let bucket = "arn:aws:s3:::bucket";
    let got = ask(&policies, "s3:GetObject", bucket, &Context::default());
    assert_eq!(got.decision, Decision::Allowed);
}

/// An SCP requiring IMDSv2 on launch, denying unless `ec2:MetadataHttpTokens` is `required`.
pub(super) fn imds_v2_required() -> Policies {
    Policies {
        identity: vec![inline("Everything", json!([allow("*", "*")]))],
        service_control: vec![scp(json!([
            full_aws_access(),
            {"Effect": "Deny", "Action": "ec2:RunInstances", "Resource": "arn:aws:ec2:*:*:instance/*",
             "Condition": {"StringNotEquals": {"ec2:MetadataHttpTokens": "required"}}},
        ]))],
        ..Policies::default()
    }
}

#[test]
fn a_service_control_policy_on_metadata_tokens_allows_when_given_required() {
    let policies = imds_v2_required();
    let required = Context::default().with("ec2:metadatahttptokens", &["required"]);
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &required);
    assert_eq!(got.decision, Decision::Allowed);
    assert!(got.missing.is_empty(), "{:?}", got.missing);
    assert_eq!(got.allowed_by_organizations, Some(true));
    let optional = Context::default().with("ec2:MetadataHttpTokens", &["optional"]);
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &optional);
    assert_eq!(got.decision, Decision::ExplicitDeny);
    assert!(got.missing.is_empty(), "{:?}", got.missing);
}

#[test]
fn a_service_control_policy_on_metadata_tokens_reports_the_key_when_not_given() {
    let policies = imds_v2_required();
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &Context::default());
    // Absent for the decision: StringNotEquals of an absent key holds, so the SCP denies.
    assert_eq!(got.decision, Decision::ExplicitDeny);
    assert_eq!(got.allowed_by_organizations, Some(false));
    assert_eq!(got.missing, ["ec2:MetadataHttpTokens"]);
    // Only statements that apply to the action and resource report their keys.
    let got = ask(&policies, "ec2:CreateFleet", INSTANCE, &Context::default());
    assert_eq!(got.decision, Decision::Allowed);
    assert!(got.missing.is_empty(), "{:?}", got.missing);
}

#[test]
fn arn_equals_takes_a_wildcard_in_the_account_segment_only_within_it() {
    let pass = |pattern: &str| {
        identity(vec![inline(
            "Pass",
            json!([{"Effect": "Allow", "Action": "iam:PassRole", "Resource": "*",
                    "Condition": {"ArnEquals": {"aws:SourceArn": pattern}}}]),
        )])
    };
    let from = |arn: &str| Context::default().with("aws:SourceArn", &[arn]);
    let wildcard_account = pass("arn:aws:iam::*:role/Karpenter");
    let karpenter = from("arn:aws:iam::111122223333:role/Karpenter");
    let other = from("arn:aws:iam::111122223333:role/Other");
    assert_eq!(
        decide(&wildcard_account, "iam:PassRole", ROLE, &karpenter),
        Decision::Allowed
    );
    assert_eq!(
        decide(&wildcard_account, "iam:PassRole", ROLE, &other),
        Decision::ImplicitDeny
    );
    // Component by component: a `*` in the account cannot take the resource's colons, as a
    // match of the whole string would.
    let spanning = pass("arn:aws:iam::*");
    assert_eq!(
        decide(&spanning, "iam:PassRole", ROLE, &karpenter),
        Decision::ImplicitDeny
    );
    // Absent: the condition does not hold, and the key is reported.
    let got = ask(&wildcard_account, "iam:PassRole", ROLE, &Context::default());
    assert_eq!(got.decision, Decision::ImplicitDeny);
    assert_eq!(got.missing, ["aws:SourceArn"]);
}

#[test]
fn missing_keys_are_sorted_and_reported_once_without_case() {
    let policies = identity(vec![
        inline(
            "A",
            json!([{"Effect": "Allow", "Action": "ec2:*", "Resource": "*",
                    "Condition": {"StringEquals": {"aws:SourceVpc": "vpc-1"},
                                  "Bool": {"aws:SecureTransport": "true"}}}]),
        ),
        inline(
            "B",
            json!([{"Effect": "Deny", "Action": "ec2:*", "Resource": "*",
                    "Condition": {"StringNotEquals": {"AWS:SOURCEVPC": "vpc-1",
                                                      "aws:RequestedRegion": "us-east-1"}}}]),
        ),
    ]);
    let region = Context::default().with("aws:RequestedRegion", &["us-east-1"]);
    let got = ask(&policies, "ec2:RunInstances", INSTANCE, &region);
    assert_eq!(got.missing, ["aws:SecureTransport", "aws:SourceVpc"]);
    assert_eq!(got.decision, Decision::ImplicitDeny);
}

/// Whether a statement allowing everything under `condition` allows in `context`.
fn holds(condition: serde_json::Value, context: &Context) -> bool {
    let policies = identity(vec![inline(
        "C",
        json!([{"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": condition}]),
    )]);
    decide(&policies, "ec2:RunInstances", INSTANCE, context) == Decision::Allowed
}

#[test]
fn condition_operators_follow_the_user_guide() {
    let none = Context::default();
    let tokens = |v: &str| Context::default().with("ec2:MetadataHttpTokens", &[v]);
    let key = "ec2:MetadataHttpTokens";
    // StringLike and StringNotLike, with `*` and `?`; several policy values: any.
    assert!(holds(
        json!({"StringLike": {key: "req*"}}),
        &tokens("required")
    ));
    assert!(holds(
        json!({"StringLike": {key: ["x", "r?quired"]}}),
        &tokens("required")
    ));
    assert!(!holds(
        json!({"StringLike": {key: "Req*"}}),
        &tokens("required")
    ));
    assert!(!holds(
        json!({"StringNotLike": {key: ["x", "req*"]}}),
        &tokens("required")
    ));
    assert!(holds(json!({"StringNotLike": {key: "req*"}}), &none));
    // StringEqualsIgnoreCase; keys compare without case.
    assert!(holds(
        json!({"StringEqualsIgnoreCase": {"EC2:METADATAHTTPTOKENS": "REQUIRED"}}),
        &tokens("required")
    ));
    assert!(!holds(
        json!({"StringEquals": {key: "REQUIRED"}}),
        &tokens("required")
    ));
    // IfExists: an absent key holds; a present one is compared.
    assert!(holds(
        json!({"StringEqualsIfExists": {key: "required"}}),
        &none
    ));
    assert!(!holds(
        json!({"StringEqualsIfExists": {key: "required"}}),
        &tokens("optional")
    ));
    assert!(!holds(json!({"StringEquals": {key: "required"}}), &none));
    // Bool, its value written as JSON false or as a string.
    let secure = |v: &str| Context::default().with("aws:SecureTransport", &[v]);
    assert!(holds(
        json!({"Bool": {"aws:SecureTransport": false}}),
        &secure("false")
    ));
    assert!(!holds(
        json!({"Bool": {"aws:SecureTransport": "true"}}),
        &secure("false")
    ));
    assert!(!holds(
        json!({"Bool": {"aws:SecureTransport": "false"}}),
        &none
    ));
    // Null: true asks for absence, false for presence.
    assert!(holds(json!({"Null": {key: "true"}}), &none));
    assert!(!holds(json!({"Null": {key: "true"}}), &tokens("required")));
    assert!(holds(json!({"Null": {key: "false"}}), &tokens("required")));
    // Every operator and every key must hold.
    assert!(!holds(
        json!({"StringEquals": {key: "required"}, "Null": {"aws:SourceVpc": "false"}}),
        &tokens("required")
    ));
}

#[test]
fn set_qualifiers_follow_the_user_guide() {
    let tags = |keys: &[&str]| Context::default().with("aws:TagKeys", keys);
    let allowed = json!(["team", "env"]);
    let all = |c| json!({"ForAllValues:StringEquals": {"aws:TagKeys": c}});
    let any = |c| json!({"ForAnyValue:StringEquals": {"aws:TagKeys": c}});
    assert!(holds(all(allowed.clone()), &tags(&["team", "env"])));
    assert!(!holds(all(allowed.clone()), &tags(&["team", "owner"])));
    // ForAllValues holds for no values; ForAnyValue does not.
    assert!(holds(all(allowed.clone()), &Context::default()));
    assert!(!holds(any(allowed.clone()), &Context::default()));
    assert!(holds(any(allowed.clone()), &tags(&["owner", "env"])));
    assert!(!holds(any(allowed), &tags(&["owner"])));
    // With a Not operator each request value must match none of the policy's.
    let any_not = json!({"ForAnyValue:StringNotEquals": {"aws:TagKeys": ["team"]}});
    assert!(holds(any_not.clone(), &tags(&["team", "owner"])));
    assert!(!holds(any_not, &tags(&["team"])));
    let arn = json!({"ForAnyValue:ArnLike": {"aws:TagKeys": "arn:aws:iam::*:role/*"}});
    assert!(holds(arn, &tags(&["x", ROLE])));
}

#[test]
fn what_is_not_emulated_is_refused_rather_than_guessed() {
    let refused = |statements| policy::parse("P", None, &doc(statements)).unwrap_err();
    let e = refused(json!([{"Effect": "Allow", "Action": "*", "Resource": "*",
                            "Condition": {"NumericLessThan": {"s3:max-keys": "10"}}}]));
    assert!(e.contains("NumericLessThan"), "{e}");
    let e = refused(json!([allow("*", "arn:aws:s3:::${aws:username}/*")]));
    assert!(e.contains("policy variables"), "{e}");
    let e = refused(json!([{"Effect": "Allow", "Action": "*"}]));
    assert!(e.contains("Resource"), "{e}");
    assert!(policy::parse("P", None, "not json").is_err());
}
