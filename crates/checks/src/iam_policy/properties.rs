//! Property tests of the IAM policy evaluator. Pure.

use super::*;
use proptest::prelude::*;

fn action() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "iam:PassRole",
        "ec2:RunInstances",
        "ec2:CreateFleet",
        "sqs:SendMessage",
        "s3:GetObject",
    ])
    .prop_map(str::to_owned)
}

fn pattern() -> impl Strategy<Value = String> {
    prop::sample::select(vec![
        "*",
        "iam:*",
        "ec2:Run*",
        "ec2:CreateFleet",
        "sqs:SendMessage",
        "s3:?etObject",
        "x:y",
    ])
    .prop_map(str::to_owned)
}

fn statement() -> impl Strategy<Value = String> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::collection::vec(pattern(), 1..3),
        prop::sample::select(vec!["*", "arn:aws:iam::1:role/*", "arn:aws:ec2:*"]),
        0u8..3,
    )
        .prop_map(|(allow, not, actions, resource, condition)| {
            let condition = match condition {
                0 => "",
                1 => r#","Condition":{"StringEquals":{"iam:PassedToService":"ec2.amazonaws.com"}}"#,
                _ => r#","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}"#,
            };
            format!(
                r#"{{"Effect":"{}","{}":{},"Resource":"{resource}"{condition}}}"#,
                if allow { "Allow" } else { "Deny" },
                if not { "NotAction" } else { "Action" },
                serde_json::to_string(&actions).unwrap_or_default()
            )
        })
}

fn policy() -> impl Strategy<Value = String> {
    prop::collection::vec(statement(), 0..5)
        .prop_map(|s| format!(r#"{{"Statement":[{}]}}"#, s.join(",")))
}

fn decide(doc: &str, action: &str) -> Decision {
    let policy = parse(doc).expect("generated policies parse");
    let context = RequestContext::new().with_value("iam:PassedToService", "ec2.amazonaws.com");
    evaluate(
        &[Named {
            name: "p",
            policy: &policy,
        }],
        &Request {
            principal: None,
            action,
            resource: "arn:aws:iam::1:role/r",
            context: &context,
        },
    )
}

proptest! {
    #[test]
    fn an_unconditional_deny_always_wins(doc in policy(), action in action()) {
        let denied = doc.replacen("[", &format!(r#"[{{"Effect":"Deny","Action":"{action}","Resource":"*"}},"#), 1)
            .replace(",]", "]");
        prop_assert!(matches!(decide(&denied, &action), Decision::ExplicitDeny(_)));
    }

    #[test]
    fn allow_all_without_denies_allows_everything(action in action()) {
        let doc = r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}"#;
        prop_assert!(decide(doc, &action).is_allowed());
    }

    #[test]
    fn action_and_not_action_partition_every_action(p in pattern(), action in action()) {
        let with = |element: &str| format!(r#"{{"Statement":[{{"Effect":"Allow","{element}":"{p}","Resource":"*"}}]}}"#);
        let by_action = decide(&with("Action"), &action).is_allowed();
        let by_not_action = decide(&with("NotAction"), &action).is_allowed();
        prop_assert!(by_action != by_not_action);
    }

    #[test]
    fn an_unknown_condition_alone_never_decides_for_or_against(action in action()) {
        for effect in ["Allow", "Deny"] {
            let doc = format!(r#"{{"Statement":[{{"Effect":"{effect}","Action":"*","Resource":"*","Condition":{{"StringEquals":{{"aws:PrincipalTag/team":"a"}}}}}}]}}"#);
            prop_assert!(matches!(decide(&doc, &action), Decision::Undecided(_) | Decision::ImplicitDeny));
            prop_assert!(!decide(&doc, &action).is_allowed());
        }
    }

    #[test]
    fn evaluation_never_panics_on_any_document(doc in "\\PC{0,200}", action in "\\PC{0,20}") {
        if let Ok(policy) = parse(&doc) {
            let context = RequestContext::new();
            let _ = evaluate(&[Named { name: "p", policy: &policy }], &Request { principal: None, action: &action, resource: "*", context: &context });
        }
    }
}
