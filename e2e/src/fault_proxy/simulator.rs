//! The IAM policy simulator the fault proxy serves, since moto has none: `SimulatePrincipalPolicy`
//! for a role, decided from the role's policies as moto holds them (inline, attached managed, the
//! permissions boundary) with the check engine's policy evaluator, and answered in IAM's awsQuery
//! XML with per-resource results (IAM API reference, `EvaluationResult`). Keys the request does
//! not give are absent, as IAM treats them. Does IO (reads moto through the IAM SDK).

use super::aws_wire::xml_escape;
use anyhow::{Context, Result};
use karpenter_health_checks::iam_policy::{self, Decision, Named, Request, RequestContext};
use percent_encoding::percent_decode_str;
use std::collections::BTreeMap;

/// The form of a `SimulatePrincipalPolicy` request.
#[derive(Debug, Default)]
struct Form {
    source: String,
    actions: Vec<String>,
    resources: Vec<String>,
    context: BTreeMap<String, (String, Vec<String>)>,
}

fn parse_form(body: &str) -> Form {
    let mut form = Form::default();
    let decode = |v: &str| {
        percent_decode_str(&v.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    let mut ordered: BTreeMap<String, String> = BTreeMap::new();
    for pair in body.split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        ordered.insert(decode(k), decode(v));
    }
    for (k, v) in ordered {
        if k == "PolicySourceArn" {
            form.source = v;
        } else if k.starts_with("ActionNames.member.") {
            form.actions.push(v);
        } else if k.starts_with("ResourceArns.member.") {
            form.resources.push(v);
        } else if let Some(rest) = k.strip_prefix("ContextEntries.member.") {
            let Some((n, field)) = rest.split_once('.') else {
                continue;
            };
            let entry = form.context.entry(n.to_owned()).or_default();
            if field == "ContextKeyName" {
                entry.0 = v;
            } else if field.starts_with("ContextKeyValues.member.") {
                entry.1.push(v);
            }
        }
    }
    form
}

async fn documents(upstream: &str, role: &str) -> Result<(Vec<(String, String)>, Option<String>)> {
    let config = aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new("us-east-1"))
        .endpoint_url(upstream)
        .credentials_provider(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "proxy",
        ))
        .load()
        .await;
    let iam = aws_sdk_iam::Client::new(&config);
    let got = iam.get_role().role_name(role).send().await?;
    let boundary = got
        .role()
        .and_then(|r| r.permissions_boundary())
        .and_then(|b| b.permissions_boundary_arn())
        .map(str::to_owned);
    let mut docs = Vec::new();
    for name in iam
        .list_role_policies()
        .role_name(role)
        .send()
        .await?
        .policy_names()
    {
        let doc = iam
            .get_role_policy()
            .role_name(role)
            .policy_name(name)
            .send()
            .await?;
        docs.push((name.clone(), doc.policy_document().to_owned()));
    }
    let managed = |arn: String| {
        let iam = iam.clone();
        async move {
            let policy = iam.get_policy().policy_arn(&arn).send().await?;
            let version = policy
                .policy()
                .and_then(|p| p.default_version_id())
                .context("default version")?
                .to_owned();
            let doc = iam
                .get_policy_version()
                .policy_arn(&arn)
                .version_id(version)
                .send()
                .await?;
            anyhow::Ok(
                doc.policy_version()
                    .and_then(|v| v.document())
                    .context("document")?
                    .to_owned(),
            )
        }
    };
    let attached = iam
        .list_attached_role_policies()
        .role_name(role)
        .send()
        .await?;
    for p in attached.attached_policies() {
        if let Some(arn) = p.policy_arn() {
            docs.push((arn.to_owned(), managed(arn.to_owned()).await?));
        }
    }
    let boundary = match boundary {
        Some(arn) => Some(managed(arn).await?),
        None => None,
    };
    Ok((docs, boundary))
}

fn parse_all(docs: &[(String, String)]) -> Vec<(String, iam_policy::Policy)> {
    docs.iter()
        .filter_map(|(n, d)| Some((n.clone(), iam_policy::parse(d).ok()?)))
        .collect()
}

/// The answer to one request body: the XML and its HTTP status.
pub(super) async fn simulate(upstream: &str, body: &str) -> (u16, String) {
    let form = parse_form(body);
    let role = form
        .source
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let (identity, boundary) = match documents(upstream, &role).await {
        Ok(found) => found,
        Err(e) => {
            return (
                404,
                format!(
                    "<ErrorResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"><Error><Type>Sender</Type>\
                     <Code>NoSuchEntity</Code><Message>{}</Message></Error><RequestId>fault-proxy</RequestId></ErrorResponse>",
                    xml_escape(&format!("{e:#}"))
                ),
            );
        }
    };
    let identity = parse_all(&identity);
    let boundary = boundary.map(|b| parse_all(&[("boundary".into(), b)]));
    let named =
        |ps: &[(String, iam_policy::Policy)]| -> Vec<(String, iam_policy::Policy)> { ps.to_vec() };
    let identity = named(&identity);
    let mut context = RequestContext::new();
    for (key, values) in form.context.values() {
        let values: Vec<&str> = values.iter().map(String::as_str).collect();
        context = context.with(key, &values);
    }
    let context = context.all_given_under("");
    let mut results = String::new();
    for action in &form.actions {
        let mut per_resource = String::new();
        let mut worst = "allowed";
        for resource in &form.resources {
            let request = Request {
                principal: None,
                action,
                resource,
                context: &context,
            };
            let by = |ps: &[(String, iam_policy::Policy)]| {
                let named: Vec<Named> = ps
                    .iter()
                    .map(|(name, policy)| Named { name, policy })
                    .collect();
                iam_policy::evaluate(&named, &request)
            };
            let identity_decision = by(&identity);
            let boundary_decision = boundary.as_deref().map(by);
            let boundary_denies = boundary_decision.as_ref().is_some_and(|d| !d.is_allowed());
            let decision = match (&identity_decision, boundary_denies) {
                (Decision::ExplicitDeny(_), _) => "explicitDeny",
                (_, true) => "implicitDeny",
                (Decision::Allowed(_), false) => "allowed",
                _ => "implicitDeny",
            };
            if decision != "allowed" && worst != "explicitDeny" {
                worst = decision;
            }
            let boundary_detail = if boundary.is_some() {
                format!(
                    "<PermissionsBoundaryDecisionDetail><AllowedByPermissionsBoundary>{}</AllowedByPermissionsBoundary></PermissionsBoundaryDecisionDetail>",
                    !boundary_denies
                )
            } else {
                String::new()
            };
            per_resource.push_str(&format!(
                "<member><EvalResourceName>{}</EvalResourceName><EvalResourceDecision>{decision}</EvalResourceDecision>\
                 <MatchedStatements/><MissingContextValues/>{boundary_detail}</member>",
                xml_escape(resource)
            ));
        }
        results.push_str(&format!(
            "<member><EvalActionName>{}</EvalActionName><EvalResourceName>*</EvalResourceName>\
             <EvalDecision>{worst}</EvalDecision><MatchedStatements/><MissingContextValues/>\
             <ResourceSpecificResults>{per_resource}</ResourceSpecificResults></member>",
            xml_escape(action)
        ));
    }
    (
        200,
        format!(
            "<SimulatePrincipalPolicyResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\">\
             <SimulatePrincipalPolicyResult><IsTruncated>false</IsTruncated><EvaluationResults>{results}</EvaluationResults>\
             </SimulatePrincipalPolicyResult><ResponseMetadata><RequestId>fault-proxy</RequestId></ResponseMetadata>\
             </SimulatePrincipalPolicyResponse>"
        ),
    )
}
