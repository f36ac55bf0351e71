//! Holds one caller to an identity policy, as IAM would: the proxy decides each request signed
//! with the enforced access key from the policy (its `${aws:PrincipalTag/...}` variables filled
//! from the caller's session tags first, as IAM fills them) and refuses what it does not allow.
//! Which resource a request touches is written here from the Service Authorization Reference's
//! ARN formats, simply, independent of the product's policy builder. Pure, no IO.

use super::condition::Context;
use super::policy::{self, Decision, Policies, Request};
use crate::aws_wire::{Call, form};
use serde_json::Value;
use std::collections::BTreeMap;

/// The account moto serves (its default), which owns everything the bed creates.
const ACCOUNT: &str = "123456789012";

/// A caller held to a policy.
#[derive(Clone, Debug)]
pub(crate) struct Enforced {
    pub(crate) access_key: String,
    policies: Policies,
    tags: BTreeMap<String, String>,
}

impl Enforced {
    /// Reads `document` with `tags` as the caller's session tags; fails on what the simulator's
    /// reader refuses (a variable no tag fills included).
    pub(crate) fn new(
        access_key: &str,
        document: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let mut filled = document.to_owned();
        for (key, value) in tags {
            filled = filled.replace(&format!("${{aws:PrincipalTag/{key}}}"), value);
        }
        if let Some(at) = filled.find("${") {
            return Err(format!(
                "the policy uses a variable no session tag fills: {}",
                &filled[at..filled[at..].find('}').map_or(filled.len(), |e| at + e + 1)]
            ));
        }
        Ok(Self {
            access_key: access_key.to_owned(),
            policies: Policies {
                identity: vec![policy::parse("enforced", None, &filled)?],
                ..Policies::default()
            },
            tags: tags.clone(),
        })
    }

    /// `None` when the policy allows the request, else the action and resource refused. Calls
    /// that need no permission (`sts:GetCallerIdentity`) are always allowed.
    pub(crate) fn refuses(&self, call: &Call, body: &[u8]) -> Option<(String, String)> {
        if call.service == "sts" && call.operation == "GetCallerIdentity" {
            return None;
        }
        let action = format!("{}:{}", call.service, call.operation);
        let resource = resource(call, body);
        let mut context = Context::default();
        context.insert("aws:RequestedRegion", vec![call.region.clone()]);
        for (key, value) in &self.tags {
            context.insert(&format!("aws:PrincipalTag/{key}"), vec![value.clone()]);
        }
        let request = Request {
            action: &action,
            resource: &resource,
            context: &context,
        };
        (policy::evaluate(&self.policies, &request).decision != Decision::Allowed)
            .then_some((action, resource))
    }
}

/// The resource ARN a request touches; `*` for actions without a resource type (every EC2
/// Describe, the List calls).
fn resource(call: &Call, body: &[u8]) -> String {
    let region = call.region.as_str();
    let json: Value = serde_json::from_slice(body).unwrap_or_default();
    let field = |name: &str| json[name].as_str().unwrap_or_default().to_owned();
    let query = form(&String::from_utf8_lossy(body));
    let param = |name: &str| query.get(name).cloned().unwrap_or_default();
    let cluster = call.cluster.clone().unwrap_or_default();
    let principal = call.principal.clone().unwrap_or_default();
    let regional =
        |service: &str, rest: &str| format!("arn:aws:{service}:{region}:{ACCOUNT}:{rest}");
    let global = |rest: &str| format!("arn:aws:iam::{ACCOUNT}:{rest}");
    match (call.service.as_str(), call.operation.as_str()) {
        ("iam", "GetRole" | "ListAttachedRolePolicies" | "ListRolePolicies" | "GetRolePolicy") => {
            global(&format!("role/{}", param("RoleName")))
        }
        ("iam", "GetInstanceProfile") => global(&format!(
            "instance-profile/{}",
            param("InstanceProfileName")
        )),
        ("iam", "GetPolicy" | "GetPolicyVersion") => param("PolicyArn"),
        ("iam", "SimulatePrincipalPolicy") => param("PolicySourceArn"),
        ("eks", "DescribeCluster" | "ListAccessEntries" | "ListPodIdentityAssociations") => {
            regional("eks", &format!("cluster/{cluster}"))
        }
        ("eks", "DescribeAccessEntry") => {
            regional("eks", &format!("access-entry/{cluster}/{principal}"))
        }
        ("eks", "DescribePodIdentityAssociation") => regional(
            "eks",
            &format!("podidentityassociation/{cluster}/{principal}"),
        ),
        ("sqs", "GetQueueUrl") => regional("sqs", &field("QueueName")),
        ("sqs", _) => {
            let url = field("QueueUrl");
            regional("sqs", url.rsplit('/').next().unwrap_or_default())
        }
        ("events", "DescribeRule") => {
            let bus = field("EventBusName");
            let name = field("Name");
            if bus.is_empty() || bus == "default" {
                regional("events", &format!("rule/{name}"))
            } else {
                regional("events", &format!("rule/{bus}/{name}"))
            }
        }
        ("kms", _) => {
            let key = field("KeyId");
            if key.starts_with("arn:") {
                key
            } else {
                regional("kms", &format!("key/{key}"))
            }
        }
        ("servicequotas", "GetServiceQuota") => regional(
            "servicequotas",
            &format!("{}/{}", field("ServiceCode"), field("QuotaCode")),
        ),
        // AWS's public parameters have no account in their ARN.
        ("ssm", "GetParameter") => {
            let name = field("Name");
            let name = name.trim_start_matches('/');
            let owner = if name.starts_with("aws/service/") {
                ""
            } else {
                ACCOUNT
            };
            format!("arn:aws:ssm:{region}:{owner}:parameter/{name}")
        }
        _ => "*".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(service: &str, operation: &str) -> Call {
        Call {
            service: service.into(),
            region: "us-west-2".into(),
            operation: operation.into(),
            cluster: None,
            principal: None,
            service_account: None,
            access_key: None,
        }
    }

    const POLICY: &str = r#"{"Statement": [
        {"Effect": "Allow", "Action": "ssm:GetParameter",
         "Resource": "arn:aws:ssm:us-west-2::parameter/aws/service/*"},
        {"Effect": "Allow", "Action": "eks:DescribeCluster",
         "Resource": "arn:aws:eks:us-west-2:123456789012:cluster/${aws:PrincipalTag/eks-cluster-name}"},
        {"Effect": "Allow", "Action": "ec2:DescribeSubnets", "Resource": "*",
         "Condition": {"StringEquals": {"aws:RequestedRegion": "us-west-2"}}}
    ]}"#;

    fn enforced(cluster: &str) -> Enforced {
        let tags = BTreeMap::from([("eks-cluster-name".to_owned(), cluster.to_owned())]);
        Enforced::new("AKID", POLICY, &tags).unwrap()
    }

    #[test]
    fn public_parameters_are_allowed_and_the_accounts_own_refused() {
        let e = enforced("a");
        let public = br#"{"Name": "/aws/service/eks/optimized-ami/1.31/amazon-linux-2023/x86_64/standard/recommended/image_id"}"#;
        assert_eq!(e.refuses(&call("ssm", "GetParameter"), public), None);
        let own = br#"{"Name": "/team/database-password"}"#;
        assert_eq!(
            e.refuses(&call("ssm", "GetParameter"), own),
            Some((
                "ssm:GetParameter".into(),
                "arn:aws:ssm:us-west-2:123456789012:parameter/team/database-password".into()
            ))
        );
    }

    #[test]
    fn the_session_tag_names_the_only_cluster_allowed() {
        let mut describe = call("eks", "DescribeCluster");
        describe.cluster = Some("a".into());
        assert_eq!(enforced("a").refuses(&describe, b""), None);
        assert!(enforced("b").refuses(&describe, b"").is_some());
    }

    #[test]
    fn the_region_condition_holds_describes_to_the_region() {
        let e = enforced("a");
        assert_eq!(e.refuses(&call("ec2", "DescribeSubnets"), b""), None);
        let mut elsewhere = call("ec2", "DescribeSubnets");
        elsewhere.region = "eu-west-1".into();
        assert!(e.refuses(&elsewhere, b"").is_some());
        assert!(e.refuses(&call("ec2", "DescribeImages"), b"").is_some());
    }

    #[test]
    fn a_variable_no_tag_fills_is_refused_when_read() {
        let error = Enforced::new("AKID", POLICY, &BTreeMap::new()).unwrap_err();
        assert!(
            error.contains("${aws:PrincipalTag/eks-cluster-name}"),
            "{error}"
        );
    }
}
