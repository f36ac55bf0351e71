//! Tests of the fault proxy simulator's front: the request form, the documents as moto gives
//! them, the XML answer read back by the AWS SDK the product uses, and the simulator's
//! independence from the product. Does IO (loopback only: a one-shot HTTP server the SDK reads
//! the answer from; the simulator's own source files).

use super::matcher_tests::{ROLE, allow, deny, doc, identity, imds_v2_required, inline, scp};
use super::policy::{self, Decision, Policies};
use super::{ActionResult, Form, answer, decode_document, evaluate_form, parse_form};
use serde_json::json;

#[test]
fn documents_are_read_percent_encoded_or_plain() {
    let plain = doc(json!([allow("ec2:*", "*")]));
    let encoded: String =
        percent_encoding::utf8_percent_encode(&plain, percent_encoding::NON_ALPHANUMERIC)
            .to_string();
    assert_ne!(encoded, plain);
    assert_eq!(decode_document(&encoded), plain);
    // A plain document keeps its percent signs.
    let with_percent = doc(json!([allow("ec2:*", "arn:aws:s3:::a%20b")]));
    assert_eq!(decode_document(&with_percent), with_percent);
}

#[test]
fn the_request_form_keeps_member_order_past_nine() {
    let mut body =
        "Action=SimulatePrincipalPolicy&PolicySourceArn=arn%3Aaws%3Aiam%3A%3A1%3Arole%2FR"
            .to_owned();
    for i in 1..=11 {
        body.push_str(&format!("&ActionNames.member.{i}=ec2%3AA{i}"));
    }
    body.push_str(
        "&ResourceArns.member.1=%2A&ContextEntries.member.1.ContextKeyName=aws%3ATagKeys",
    );
    body.push_str("&ContextEntries.member.1.ContextKeyValues.member.2=b&ContextEntries.member.1.ContextKeyValues.member.1=a+b");
    let form = parse_form(&body);
    let want: Vec<String> = (1..=11).map(|i| format!("ec2:A{i}")).collect();
    assert_eq!(
        form,
        Form {
            source: "arn:aws:iam::1:role/R".into(),
            actions: want,
            resources: vec!["*".into()],
            context: vec![("aws:TagKeys".into(), vec!["a b".into(), "b".into()])],
        }
    );
}

/// Serves `xml` once on loopback and reads it with the IAM SDK, as the product does.
async fn through_sdk(
    xml: String,
) -> aws_sdk_iam::operation::simulate_principal_policy::SimulatePrincipalPolicyOutput {
    use hyper::server::conn::http1;
    use hyper::service::service_fn;
    use hyper_util::rt::TokioIo;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let service = service_fn(move |_| {
            let xml = xml.clone();
            async move { Ok::<_, std::convert::Infallible>(super::super::aws_wire::query_xml(200, xml)) }
        });
        let _ = http1::Builder::new()
            .serve_connection(TokioIo::new(stream), service)
            .await;
    });
    let config = aws_sdk_iam::Config::builder()
        .behavior_version(aws_sdk_iam::config::BehaviorVersion::latest())
        .region(aws_sdk_iam::config::Region::new("us-east-1"))
        .endpoint_url(format!("http://{addr}"))
        .credentials_provider(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "test",
        ))
        .build();
    let out = aws_sdk_iam::Client::from_conf(config)
        .simulate_principal_policy()
        .policy_source_arn(ROLE)
        .action_names("ec2:RunInstances")
        .send()
        .await
        .expect("the SDK reads the answer");
    server.abort();
    out
}

/// The form of one action on two resources, the second in another account.
fn launch_form(context: Vec<(String, Vec<String>)>) -> Form {
    Form {
        source: ROLE.into(),
        actions: vec!["ec2:RunInstances".into()],
        resources: vec![
            "arn:aws:ec2:us-east-1:111122223333:instance/*".into(),
            "arn:aws:ec2:us-east-1:444455556666:instance/*".into(),
        ],
        context,
    }
}

fn simulated(form: &Form, policies: &Policies) -> (Vec<ActionResult>, String) {
    let results = evaluate_form(form, policies);
    let xml = answer(&results);
    (results, xml)
}

#[tokio::test]
async fn the_answer_of_an_allow_an_implicit_and_an_explicit_deny_reads_back() {
    let policies = identity(vec![
        inline(
            "Launch",
            json!([allow("ec2:RunInstances", "arn:aws:ec2:*:111122223333:*")]),
        ),
        policy::parse(
            "arn:aws:iam::aws:policy/NoLaunch",
            Some("aws-managed"),
            &doc(json!([deny("ec2:RunInstances", "*")])),
        )
        .expect("policy"),
    ]);
    // Allowed in the role's account, implicitly denied in the other.
    let launch_only = identity(policies.identity[..1].to_vec());
    let (_, xml) = simulated(&launch_form(Vec::new()), &launch_only);
    let out = through_sdk(xml).await;
    assert!(!out.is_truncated());
    let r = &out.evaluation_results()[0];
    assert_eq!(r.eval_action_name(), "ec2:RunInstances");
    assert_eq!(r.eval_decision().as_str(), "implicitDeny");
    assert!(r.organizations_decision_detail().is_none());
    let rs = r.resource_specific_results();
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0].eval_resource_decision().as_str(), "allowed");
    let m = &rs[0].matched_statements()[0];
    assert_eq!(m.source_policy_id(), Some("Launch"));
    assert_eq!(m.source_policy_type().map(|t| t.as_str()), Some("role"));
    assert_eq!(rs[1].eval_resource_decision().as_str(), "implicitDeny");
    assert!(rs[1].matched_statements().is_empty());
    assert!(rs[1].permissions_boundary_decision_detail().is_none());
    // The managed policy's deny wins everywhere.
    let (_, xml) = simulated(&launch_form(Vec::new()), &policies);
    let out = through_sdk(xml).await;
    let r = &out.evaluation_results()[0];
    assert_eq!(r.eval_decision().as_str(), "explicitDeny");
    let m = &r.matched_statements()[0];
    assert_eq!(
        m.source_policy_id(),
        Some("arn:aws:iam::aws:policy/NoLaunch")
    );
    assert_eq!(
        m.source_policy_type().map(|t| t.as_str()),
        Some("aws-managed")
    );
    for rr in r.resource_specific_results() {
        assert_eq!(rr.eval_resource_decision().as_str(), "explicitDeny");
    }
}

#[tokio::test]
async fn the_answer_of_a_boundary_that_does_not_allow_reads_back() {
    let mut policies = identity(vec![inline("Everything", json!([allow("*", "*")]))]);
    policies.boundary = Some(
        policy::parse(
            "arn:aws:iam::111122223333:policy/Boundary",
            None,
            &doc(json!([allow("ec2:*", "arn:aws:ec2:*:111122223333:*")])),
        )
        .expect("boundary"),
    );
    let (_, xml) = simulated(&launch_form(Vec::new()), &policies);
    let out = through_sdk(xml).await;
    let r = &out.evaluation_results()[0];
    let detail = |d: Option<&aws_sdk_iam::types::PermissionsBoundaryDecisionDetail>| {
        d.expect("boundary detail")
            .allowed_by_permissions_boundary()
    };
    assert!(!detail(r.permissions_boundary_decision_detail()));
    let rs = r.resource_specific_results();
    assert_eq!(rs[0].eval_resource_decision().as_str(), "allowed");
    assert!(detail(rs[0].permissions_boundary_decision_detail()));
    assert_eq!(rs[1].eval_resource_decision().as_str(), "implicitDeny");
    assert!(!detail(rs[1].permissions_boundary_decision_detail()));
}

#[tokio::test]
async fn the_answer_of_service_control_policies_reads_back() {
    let context = |v: Option<&str>| {
        v.map(|v| vec![("ec2:MetadataHttpTokens".to_owned(), vec![v.to_owned()])])
            .unwrap_or_default()
    };
    // Given `required`: allowed by Organizations, nothing missing.
    let (results, xml) = simulated(&launch_form(context(Some("required"))), &imds_v2_required());
    assert_eq!(results[0].resources[0].1.decision, Decision::Allowed);
    let out = through_sdk(xml).await;
    let r = &out.evaluation_results()[0];
    assert_eq!(r.eval_decision().as_str(), "allowed");
    let orgs = r
        .organizations_decision_detail()
        .expect("organizations detail");
    assert!(orgs.allowed_by_organizations());
    assert!(r.missing_context_values().is_empty());
    // Not given: denied by the SCP, the key reported at both levels.
    let (_, xml) = simulated(&launch_form(context(None)), &imds_v2_required());
    let out = through_sdk(xml).await;
    let r = &out.evaluation_results()[0];
    assert_eq!(r.eval_decision().as_str(), "explicitDeny");
    let orgs = r
        .organizations_decision_detail()
        .expect("organizations detail");
    assert!(!orgs.allowed_by_organizations());
    assert_eq!(r.missing_context_values(), ["ec2:MetadataHttpTokens"]);
    let rr = &r.resource_specific_results()[0];
    assert_eq!(rr.missing_context_values(), ["ec2:MetadataHttpTokens"]);
    assert_eq!(rr.matched_statements()[0].source_policy_id(), Some("scp-1"));
    // Not allowing: an implicit deny, still not allowed by Organizations.
    let mut policies = imds_v2_required();
    policies.service_control = vec![scp(json!([allow("s3:*", "*")]))];
    let (_, xml) = simulated(&launch_form(context(Some("required"))), &policies);
    let out = through_sdk(xml).await;
    let r = &out.evaluation_results()[0];
    assert_eq!(r.eval_decision().as_str(), "implicitDeny");
    let orgs = r
        .organizations_decision_detail()
        .expect("organizations detail");
    assert!(!orgs.allowed_by_organizations());
}

#[tokio::test]
async fn the_action_sums_up_the_missing_keys_of_its_resources_sorted() {
    let policies = identity(vec![inline(
        "Launch",
        json!([
            {"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "arn:aws:ec2:*:111122223333:*",
             "Condition": {"StringEquals": {"z:Key": "v"}}},
            {"Effect": "Allow", "Action": "ec2:RunInstances", "Resource": "arn:aws:ec2:*:444455556666:*",
             "Condition": {"StringEquals": {"a:Key": "v", "Z:KEY": "v"}}},
        ]),
    )]);
    let (_, xml) = simulated(&launch_form(Vec::new()), &policies);
    let out = through_sdk(xml).await;
    let r = &out.evaluation_results()[0];
    assert_eq!(r.missing_context_values(), ["a:Key", "z:Key"]);
    let rs = r.resource_specific_results();
    assert_eq!(rs[0].missing_context_values(), ["z:Key"]);
    assert_eq!(rs[1].missing_context_values(), ["a:Key", "Z:KEY"]);
}

/// The simulator must not share the product's logic: no file of it may name the product's
/// check crate or its policy evaluator.
#[test]
fn the_simulator_shares_nothing_with_the_product() {
    let forbidden = [
        ["karpenter", "_health_checks"].concat(),
        ["karpenter", "_health_aws"].concat(),
        ["iam", "_policy::"].concat(),
    ];
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    let mut pending = vec![root.clone()];
    while let Some(dir) = pending.pop() {
        let entries =
            std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("entry").path();
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if dir == root && !name.starts_with("simulator") {
                continue;
            }
            if path.is_dir() {
                pending.push(path);
            } else {
                files.push(path);
            }
        }
    }
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.strip_prefix(&root).ok())
        .map(|p| p.display().to_string())
        .collect();
    for want in [
        "simulator.rs",
        "simulator/policy.rs",
        "simulator/condition.rs",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "{want} not among {names:?}"
        );
    }
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read");
        for word in &forbidden {
            assert!(
                !text.contains(word.as_str()),
                "{} mentions {word}",
                path.display()
            );
        }
    }
}
