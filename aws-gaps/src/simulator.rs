//! The IAM policy simulator the fault proxy serves, since moto has none: `SimulatePrincipalPolicy`
//! for a role, decided from the role's policies as moto holds them (inline, attached managed, the
//! permissions boundary) and the service control policies a test installed, by the proxy's own
//! deliberately simple matcher ([`policy`], [`condition`]) written from AWS's documentation and
//! sharing nothing with the product's evaluator; answered in IAM's awsQuery XML with
//! per-resource results (IAM API reference, `EvaluationResult`, `ResourceSpecificResult`). Does
//! IO (reads moto through the IAM SDK).
//!
//! What IAM's simulator does that this one does not:
//! - the service control policies are one level of the organization (see [`policy::evaluate`]);
//! - no policy variables (`${aws:username}`), no condition operators but the String, Arn, Bool
//!   and Null families: a policy using others is refused with `InvalidInput` rather than guessed;
//! - `Resource` patterns match the whole ARN with `*`/`?` (only the Arn operators go component
//!   by component), no resource-based policies, session policies or `CallerArn`, and only the
//!   request's `ContextEntries` (no keys filled in from the role or the resource);
//! - `MatchedStatements` names each deciding policy once, without statement positions, and
//!   leaves `SourcePolicyType` out for boundaries and service control policies;
//! - the action-level result sums up its resources: the most restrictive decision, the union of
//!   the missing keys, and `AllowedBy...` true only if true for every resource.

#[cfg(test)]
mod answer_tests;
mod condition;
mod enforce;
#[cfg(test)]
mod matcher_tests;
mod policy;

use super::aws_wire::xml_escape;
use anyhow::{Context as _, Result};
use condition::Context;
pub(super) use enforce::Enforced;
use percent_encoding::percent_decode_str;
use policy::{Decision, Matched, Outcome, Policies, Request};
use std::collections::BTreeMap;

/// The form of a `SimulatePrincipalPolicy` request.
#[derive(Debug, Default, PartialEq, Eq)]
struct Form {
    source: String,
    actions: Vec<String>,
    resources: Vec<String>,
    /// `ContextEntries`: key and values, in member order.
    context: Vec<(String, Vec<String>)>,
}

fn parse_form(body: &str) -> Form {
    let decode = |v: &str| {
        percent_decode_str(&v.replace('+', " "))
            .decode_utf8_lossy()
            .into_owned()
    };
    let index = |n: &str| n.parse::<u32>().ok();
    let mut form = Form::default();
    let mut actions = BTreeMap::new();
    let mut resources = BTreeMap::new();
    let mut entries: BTreeMap<u32, (String, BTreeMap<u32, String>)> = BTreeMap::new();
    for pair in body.split('&') {
        let Some((k, v)) = pair.split_once('=') else {
            continue;
        };
        let (k, v) = (decode(k), decode(v));
        if k == "PolicySourceArn" {
            form.source = v;
        } else if let Some(n) = k.strip_prefix("ActionNames.member.").and_then(index) {
            actions.insert(n, v);
        } else if let Some(n) = k.strip_prefix("ResourceArns.member.").and_then(index) {
            resources.insert(n, v);
        } else if let Some(rest) = k.strip_prefix("ContextEntries.member.")
            && let Some((n, field)) = rest.split_once('.')
            && let Some(n) = index(n)
        {
            let entry = entries.entry(n).or_default();
            if field == "ContextKeyName" {
                entry.0 = v;
            } else if let Some(i) = field
                .strip_prefix("ContextKeyValues.member.")
                .and_then(index)
            {
                entry.1.insert(i, v);
            }
        }
    }
    form.actions = actions.into_values().collect();
    form.resources = resources.into_values().collect();
    form.context = entries
        .into_values()
        .filter(|(key, _)| !key.is_empty())
        .map(|(key, values)| (key, values.into_values().collect()))
        .collect();
    form
}

/// A policy document as IAM's API gives it (URL-encoded JSON) or as moto may (plain JSON).
fn decode_document(document: &str) -> String {
    if document.trim_start().starts_with('{') {
        document.to_owned()
    } else {
        percent_decode_str(document)
            .decode_utf8_lossy()
            .into_owned()
    }
}

/// `SourcePolicyType` of a managed policy: AWS's own (account `aws`) or the customer's.
fn managed_kind(arn: &str) -> &'static str {
    if arn.split(':').nth(4) == Some("aws") {
        "aws-managed"
    } else {
        "user-managed"
    }
}

/// A policy document with its `SourcePolicyId` and `SourcePolicyType`.
type Document = (String, Option<&'static str>, String);

/// The role's identity policies and its permissions boundary (ARN, document) from moto.
async fn documents(
    upstream: &str,
    role: &str,
) -> Result<(Vec<Document>, Option<(String, String)>)> {
    // IAM is global; moto serves it in any region.
    let iam = aws_sdk_iam::Client::new(&super::upstream::moto_config(upstream, "us-east-1").await);
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
        docs.push((name.clone(), Some("role"), doc.policy_document().to_owned()));
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
            let doc = managed(arn.to_owned()).await?;
            docs.push((arn.to_owned(), Some(managed_kind(arn)), doc));
        }
    }
    let boundary = match boundary {
        Some(arn) => Some((arn.clone(), managed(arn).await?)),
        None => None,
    };
    Ok((docs, boundary))
}

/// Reads every document; the service control policies are named `scp-1`, `scp-2`, ... in the
/// order given.
fn read_policies(
    identity: &[Document],
    boundary: Option<&(String, String)>,
    service_control: &[String],
) -> Result<Policies, String> {
    let read = |id: &str, kind, doc: &str| policy::parse(id, kind, &decode_document(doc));
    Ok(Policies {
        identity: identity
            .iter()
            .map(|(id, kind, doc)| read(id, *kind, doc))
            .collect::<Result<_, _>>()?,
        boundary: boundary.map(|(id, doc)| read(id, None, doc)).transpose()?,
        service_control: service_control
            .iter()
            .enumerate()
            .map(|(i, doc)| read(&format!("scp-{}", i + 1), None, doc))
            .collect::<Result<_, _>>()?,
    })
}

/// One action's results, one per resource.
#[derive(Debug)]
struct ActionResult {
    action: String,
    resources: Vec<(String, Outcome)>,
}

/// Every action of the form on every resource (`*` if it names none) in its context.
fn evaluate_form(form: &Form, policies: &Policies) -> Vec<ActionResult> {
    let mut context = Context::default();
    for (key, values) in &form.context {
        context.insert(key, values.clone());
    }
    let star = ["*".to_owned()];
    let resources: &[String] = if form.resources.is_empty() {
        &star
    } else {
        &form.resources
    };
    form.actions
        .iter()
        .map(|action| ActionResult {
            action: action.clone(),
            resources: resources
                .iter()
                .map(|resource| {
                    let request = Request {
                        action,
                        resource,
                        context: &context,
                    };
                    (resource.clone(), policy::evaluate(policies, &request))
                })
                .collect(),
        })
        .collect()
}

fn matched_xml(matched: &[Matched]) -> String {
    let members: String = matched
        .iter()
        .map(|m| {
            let kind = m
                .kind
                .map(|k| format!("<SourcePolicyType>{k}</SourcePolicyType>"))
                .unwrap_or_default();
            format!(
                "<member><SourcePolicyId>{}</SourcePolicyId>{kind}</member>",
                xml_escape(&m.id)
            )
        })
        .collect();
    format!("<MatchedStatements>{members}</MatchedStatements>")
}

fn missing_xml(missing: &[String]) -> String {
    let members: String = missing
        .iter()
        .map(|k| format!("<member>{}</member>", xml_escape(k)))
        .collect();
    format!("<MissingContextValues>{members}</MissingContextValues>")
}

fn boundary_xml(allowed: Option<bool>) -> String {
    allowed
        .map(|a| {
            format!(
                "<PermissionsBoundaryDecisionDetail><AllowedByPermissionsBoundary>{a}\
                 </AllowedByPermissionsBoundary></PermissionsBoundaryDecisionDetail>"
            )
        })
        .unwrap_or_default()
}

/// `Some(true)` if every `Some` is true, `None` if all are `None`.
fn all_allowed(each: impl Iterator<Item = Option<bool>>) -> Option<bool> {
    each.fold(None, |sum, one| match (sum, one) {
        (s, None) => s,
        (None, Some(o)) => Some(o),
        (Some(s), Some(o)) => Some(s && o),
    })
}

/// The `SimulatePrincipalPolicy` answer: one `EvaluationResult` per action, summing up its
/// `ResourceSpecificResults`.
fn answer(results: &[ActionResult]) -> String {
    let mut xml = String::new();
    for result in results {
        let outcomes = || result.resources.iter().map(|(_, o)| o);
        let decision = outcomes()
            .map(|o| o.decision)
            .max()
            .unwrap_or(Decision::ImplicitDeny);
        let mut matched: Vec<Matched> = Vec::new();
        for m in outcomes()
            .filter(|o| o.decision == decision)
            .flat_map(|o| &o.matched)
        {
            if !matched.contains(m) {
                matched.push(m.clone());
            }
        }
        let mut missing = BTreeMap::new();
        for key in outcomes().flat_map(|o| &o.missing) {
            missing
                .entry(key.to_lowercase())
                .or_insert_with(|| key.clone());
        }
        let missing: Vec<String> = missing.into_values().collect();
        let organizations = all_allowed(outcomes().map(|o| o.allowed_by_organizations))
            .map(|a| {
                format!(
                    "<OrganizationsDecisionDetail><AllowedByOrganizations>{a}\
                     </AllowedByOrganizations></OrganizationsDecisionDetail>"
                )
            })
            .unwrap_or_default();
        let boundary = boundary_xml(all_allowed(outcomes().map(|o| o.allowed_by_boundary)));
        let per_resource: String = result
            .resources
            .iter()
            .map(|(resource, o)| {
                format!(
                    "<member><EvalResourceName>{}</EvalResourceName>\
                     <EvalResourceDecision>{}</EvalResourceDecision>{}{}{}</member>",
                    xml_escape(resource),
                    o.decision.as_str(),
                    matched_xml(&o.matched),
                    missing_xml(&o.missing),
                    boundary_xml(o.allowed_by_boundary),
                )
            })
            .collect();
        xml.push_str(&format!(
            "<member><EvalActionName>{}</EvalActionName><EvalResourceName>*</EvalResourceName>\
             <EvalDecision>{}</EvalDecision>{}{}{organizations}{boundary}\
             <ResourceSpecificResults>{per_resource}</ResourceSpecificResults></member>",
            xml_escape(&result.action),
            decision.as_str(),
            matched_xml(&matched),
            missing_xml(&missing),
        ));
    }
    format!(
        "<SimulatePrincipalPolicyResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\">\
         <SimulatePrincipalPolicyResult><IsTruncated>false</IsTruncated>\
         <EvaluationResults>{xml}</EvaluationResults></SimulatePrincipalPolicyResult>\
         <ResponseMetadata><RequestId>fault-proxy</RequestId></ResponseMetadata>\
         </SimulatePrincipalPolicyResponse>"
    )
}

/// An IAM error answer.
fn error(status: u16, code: &str, message: &str) -> (u16, String) {
    (
        status,
        format!(
            "<ErrorResponse xmlns=\"https://iam.amazonaws.com/doc/2010-05-08/\"><Error>\
             <Type>Sender</Type><Code>{code}</Code><Message>{}</Message></Error>\
             <RequestId>fault-proxy</RequestId></ErrorResponse>",
            xml_escape(message)
        ),
    )
}

/// The answer to one request body, given the service control policies (JSON documents) in
/// force: the XML and its HTTP status.
pub(super) async fn simulate(
    upstream: &str,
    body: &str,
    service_control_policies: &[String],
) -> (u16, String) {
    let form = parse_form(body);
    let role = form.source.rsplit('/').next().unwrap_or_default();
    let (identity, boundary) = match documents(upstream, role).await {
        Ok(found) => found,
        Err(e) => return error(404, "NoSuchEntity", &format!("{e:#}")),
    };
    match read_policies(&identity, boundary.as_ref(), service_control_policies) {
        Ok(policies) => (200, answer(&evaluate_form(&form, &policies))),
        // What this simulator cannot read it says so, rather than guess a decision.
        Err(e) => error(400, "InvalidInput", &e),
    }
}
