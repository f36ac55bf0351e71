//! How the fault proxy reads and writes AWS on the wire: which service and operation a request
//! is (SigV4 credential scope, JSON target, EKS REST path, query `Action`), the error each
//! protocol really sends for a fault, and EKS access entries served from test data. Pure, no IO.

use super::PodIdentityAssociation;
use super::{AccessEntry, Fault};
use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, StatusCode};
use percent_encoding::percent_decode_str;
use std::collections::BTreeMap;

/// Which AWS operation a request is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Call {
    pub(super) service: String,
    /// The SigV4 scope's region (`us-east-1` when the request is unsigned).
    pub(super) region: String,
    pub(super) operation: String,
    /// EKS: the cluster and the access entry's principal (or the Pod Identity association's
    /// id) named in the path.
    pub(super) cluster: Option<String>,
    pub(super) principal: Option<String>,
    /// EKS ListPodIdentityAssociations: the `namespace` and `serviceAccount` query parameters.
    pub(super) service_account: Option<(String, String)>,
    /// The SigV4 scope's access key id: who signed the request.
    pub(super) access_key: Option<String>,
}

/// The form parameters of an awsQuery body, decoded.
pub(super) fn form(body: &str) -> BTreeMap<String, String> {
    body.split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| {
            let decode = |s: &str| {
                percent_decode_str(&s.replace('+', " "))
                    .decode_utf8_lossy()
                    .into_owned()
            };
            (decode(k), decode(v))
        })
        .collect()
}

/// Whether an awsQuery body asks for a dry run (`DryRun=true`).
pub(super) fn dry_run(body: &[u8]) -> bool {
    form(&String::from_utf8_lossy(body))
        .get("DryRun")
        .map(String::as_str)
        == Some("true")
}

pub(super) fn identify<B>(req: &Request<B>, body: &[u8]) -> Call {
    // SigV4: Credential=<key>/<date>/<region>/<service>/aws4_request
    let scope = |i: usize| {
        req.headers()
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split("Credential=").nth(1))
            .and_then(|c| c.split('/').nth(i))
            .map(str::to_owned)
    };
    let mut call = Call {
        service: scope(3).unwrap_or_else(|| "unknown".into()),
        region: scope(2).unwrap_or_else(|| "us-east-1".into()),
        operation: "unknown".into(),
        cluster: None,
        principal: None,
        service_account: None,
        access_key: scope(0),
    };
    if let Some(target) = req
        .headers()
        .get("x-amz-target")
        .and_then(|v| v.to_str().ok())
    {
        call.operation = target.rsplit('.').next().unwrap_or(target).to_owned();
        return call;
    }
    if call.service == "eks" {
        let segments: Vec<String> = req
            .uri()
            .path()
            .split('/')
            .filter(|s| !s.is_empty())
            .map(|s| percent_decode_str(s).decode_utf8_lossy().into_owned())
            .collect();
        let method = req.method().as_str();
        call.operation = match (method, segments.as_slice()) {
            ("GET", [c, name]) if c == "clusters" => {
                call.cluster = Some(name.clone());
                "DescribeCluster".into()
            }
            ("GET", [c, name, a]) if c == "clusters" && a == "access-entries" => {
                call.cluster = Some(name.clone());
                "ListAccessEntries".into()
            }
            ("GET", [c, name, a, principal]) if c == "clusters" && a == "access-entries" => {
                call.cluster = Some(name.clone());
                call.principal = Some(principal.clone());
                "DescribeAccessEntry".into()
            }
            ("GET", [c, name, a]) if c == "clusters" && a == "pod-identity-associations" => {
                call.cluster = Some(name.clone());
                let query: Vec<(String, String)> = req
                    .uri()
                    .query()
                    .unwrap_or_default()
                    .split('&')
                    .filter_map(|kv| kv.split_once('='))
                    .map(|(k, v)| {
                        (
                            k.to_owned(),
                            percent_decode_str(v).decode_utf8_lossy().into_owned(),
                        )
                    })
                    .collect();
                let param = |key: &str| {
                    query
                        .iter()
                        .find(|(k, _)| k == key)
                        .map(|(_, v)| v.clone())
                        .unwrap_or_default()
                };
                call.service_account = Some((param("namespace"), param("serviceAccount")));
                "ListPodIdentityAssociations".into()
            }
            ("GET", [c, name, a, id]) if c == "clusters" && a == "pod-identity-associations" => {
                call.cluster = Some(name.clone());
                call.principal = Some(id.clone());
                "DescribePodIdentityAssociation".into()
            }
            ("POST", [c]) if c == "clusters" => "CreateCluster".into(),
            _ => format!("{method} {}", req.uri().path()),
        };
        return call;
    }
    // Query protocols (IAM, EC2, STS): form body with Action=<Operation>.
    let form = String::from_utf8_lossy(body);
    if let Some(action) = form.split('&').find_map(|kv| kv.strip_prefix("Action=")) {
        call.operation = action.to_owned();
    }
    call
}

fn respond(
    status: u16,
    content_type: &str,
    extra: &[(&str, &str)],
    body: String,
) -> Response<Full<Bytes>> {
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let headers = resp.headers_mut();
    headers.insert(
        CONTENT_TYPE,
        HeaderValue::from_str(content_type).unwrap_or(HeaderValue::from_static("text/plain")),
    );
    headers.insert("x-amzn-requestid", HeaderValue::from_static("fault-proxy"));
    for (k, v) in extra {
        if let (Ok(name), Ok(value)) = (
            hyper::header::HeaderName::from_bytes(k.as_bytes()),
            HeaderValue::from_str(v),
        ) {
            headers.insert(name, value);
        }
    }
    resp
}

/// The error each protocol really sends: awsQuery XML (IAM, STS), ec2Query XML, restJson1 (EKS).
pub(super) fn aws_error(service: &str, fault: Fault) -> Response<Full<Bytes>> {
    let (status, code, message) = match (service, fault) {
        ("ec2", Fault::Throttle) => (503, "RequestLimitExceeded", "Request limit exceeded."),
        ("eks", Fault::Throttle) => (429, "ThrottlingException", "Rate exceeded"),
        ("sqs" | "events" | "kms" | "ssm" | "servicequotas", Fault::Throttle) => {
            (400, "ThrottlingException", "Rate exceeded")
        }
        ("sqs" | "events" | "kms" | "ssm" | "servicequotas", Fault::ServerError) => {
            (500, "InternalFailure", "Internal failure")
        }
        ("sqs" | "events" | "kms" | "ssm" | "servicequotas", _) => (
            400,
            "AccessDeniedException",
            "User is not authorized to perform this operation",
        ),
        (_, Fault::Throttle) => (400, "Throttling", "Rate exceeded"),
        ("ec2", Fault::ServerError) => (500, "InternalError", "An internal error has occurred"),
        ("eks", Fault::ServerError) => (500, "ServerException", "Internal server error"),
        ("iam", Fault::ServerError) => (500, "ServiceFailure", "Internal failure"),
        (_, Fault::ServerError) => (500, "InternalFailure", "Internal failure"),
        ("ec2", _) => (
            403,
            "UnauthorizedOperation",
            "You are not authorized to perform this operation.",
        ),
        ("eks", _) => (
            403,
            "AccessDeniedException",
            "User is not authorized to perform this operation",
        ),
        (_, _) => (
            403,
            "AccessDenied",
            "User is not authorized to perform this operation",
        ),
    };
    match service {
        "ec2" => ec2_error(status, code, message),
        "eks" | "sqs" | "events" | "kms" | "ssm" | "servicequotas" => respond(
            status,
            "application/json",
            &[("x-amzn-errortype", code)],
            serde_json::json!({ "message": message }).to_string(),
        ),
        _ => {
            let (kind, ns) = match (service, status) {
                ("sts", s) if s >= 500 => ("Receiver", "https://sts.amazonaws.com/doc/2011-06-15/"),
                ("sts", _) => ("Sender", "https://sts.amazonaws.com/doc/2011-06-15/"),
                (_, s) if s >= 500 => ("Receiver", "https://iam.amazonaws.com/doc/2010-05-08/"),
                _ => ("Sender", "https://iam.amazonaws.com/doc/2010-05-08/"),
            };
            respond(
                status,
                "text/xml",
                &[],
                format!(
                    "<ErrorResponse xmlns=\"{ns}\"><Error><Type>{kind}</Type><Code>{code}</Code>\
                     <Message>{message}</Message></Error><RequestId>fault-proxy</RequestId></ErrorResponse>"
                ),
            )
        }
    }
}

/// An EC2 error as EC2 sends it (ec2Query XML).
pub(super) fn ec2_error(status: u16, code: &str, message: &str) -> Response<Full<Bytes>> {
    respond(
        status,
        "text/xml;charset=UTF-8",
        &[],
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>{code}</Code>\
             <Message>{}</Message></Error></Errors><RequestID>fault-proxy</RequestID></Response>",
            xml_escape(message)
        ),
    )
}

/// ListAccessEntries / DescribeAccessEntry from test data, as EKS answers them.
pub(super) fn access_entries(call: &Call, entries: &[AccessEntry]) -> Response<Full<Bytes>> {
    let cluster = call.cluster.clone().unwrap_or_default();
    match &call.principal {
        None => {
            let arns: Vec<&str> = entries.iter().map(|e| e.principal_arn.as_str()).collect();
            respond(200, "application/json", &[], serde_json::json!({ "accessEntries": arns }).to_string())
        }
        Some(principal) => match entries.iter().find(|e| &e.principal_arn == principal) {
            Some(e) => respond(
                200,
                "application/json",
                &[],
                serde_json::json!({ "accessEntry": {
                    "clusterName": cluster,
                    "principalArn": e.principal_arn,
                    "kubernetesGroups": [],
                    "accessEntryArn": format!("arn:aws:eks:us-east-1:123456789012:access-entry/{cluster}/x"),
                    "createdAt": 1_700_000_000,
                    "modifiedAt": 1_700_000_000,
                    "tags": {},
                    "username": e.username,
                    "type": e.type_,
                }})
                .to_string(),
            ),
            None => respond(
                404,
                "application/json",
                &[("x-amzn-errortype", "ResourceNotFoundException")],
                serde_json::json!({ "message": format!("The specified access entry resource is not found. Principal: {principal}") }).to_string(),
            ),
        },
    }
}

/// ListPodIdentityAssociations / DescribePodIdentityAssociation from test data, as EKS answers
/// them.
pub(super) fn pod_identity_associations(
    call: &Call,
    associations: &[PodIdentityAssociation],
) -> Response<Full<Bytes>> {
    let cluster = call.cluster.clone().unwrap_or_default();
    let arn = |a: &PodIdentityAssociation| {
        format!(
            "arn:aws:eks:us-east-1:123456789012:podidentityassociation/{cluster}/{}",
            a.id
        )
    };
    match (&call.principal, &call.service_account) {
        (Some(id), _) => match associations.iter().find(|a| &a.id == id) {
            Some(a) => {
                let mut association = serde_json::json!({
                    "clusterName": cluster,
                    "namespace": a.namespace,
                    "serviceAccount": a.service_account,
                    "roleArn": a.role_arn,
                    "associationArn": arn(a),
                    "associationId": a.id,
                    "tags": {},
                    "createdAt": 1_700_000_000,
                    "modifiedAt": 1_700_000_000,
                });
                // EKS API reference, PodIdentityAssociation: targetRoleArn and externalId are
                // present only on associations that chain to a target role.
                if let Some(target) = &a.target_role_arn {
                    association["targetRoleArn"] = serde_json::json!(target);
                    association["externalId"] = serde_json::json!(format!("{}-external", a.id));
                }
                respond(
                    200,
                    "application/json",
                    &[],
                    serde_json::json!({ "association": association }).to_string(),
                )
            }
            None => respond(
                404,
                "application/json",
                &[("x-amzn-errortype", "ResourceNotFoundException")],
                serde_json::json!({ "message": format!("Pod identity association {id} not found") })
                    .to_string(),
            ),
        },
        (None, wanted) => {
            let listed: Vec<serde_json::Value> = associations
                .iter()
                .filter(|a| {
                    wanted.as_ref().is_none_or(|(ns, sa)| {
                        (ns.is_empty() || *ns == a.namespace)
                            && (sa.is_empty() || *sa == a.service_account)
                    })
                })
                .map(|a| {
                    serde_json::json!({
                        "clusterName": cluster,
                        "namespace": a.namespace,
                        "serviceAccount": a.service_account,
                        "associationArn": arn(a),
                        "associationId": a.id,
                    })
                })
                .collect();
            respond(
                200,
                "application/json",
                &[],
                serde_json::json!({ "associations": listed }).to_string(),
            )
        }
    }
}

/// Escapes text for an XML element.
pub(super) fn xml_escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// An awsQuery XML answer (IAM).
/// The ARN of the AWS-managed EBS key's alias in `region` of moto's account.
pub(super) fn aws_ebs_alias_arn(region: &str) -> String {
    let partition = if region.starts_with("us-isob-") {
        "aws-iso-b"
    } else if region.starts_with("us-iso") {
        "aws-iso"
    } else if region.starts_with("cn-") {
        "aws-cn"
    } else if region.starts_with("us-gov-") {
        "aws-us-gov"
    } else {
        "aws"
    };
    format!("arn:{partition}:kms:{region}:123456789012:alias/aws/ebs")
}

/// EC2 GetEbsDefaultKmsKeyId's answer, in the ec2Query shape the EC2 API reference documents.
pub(super) fn ebs_default_kms_key_id(key: &str) -> Response<Full<Bytes>> {
    respond(
        200,
        "text/xml;charset=UTF-8",
        &[],
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<GetEbsDefaultKmsKeyIdResponse \
             xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\"><requestId>fault-proxy</requestId>\
             <kmsKeyId>{key}</kmsKeyId></GetEbsDefaultKmsKeyIdResponse>"
        ),
    )
}

pub(super) fn query_xml(status: u16, body: String) -> Response<Full<Bytes>> {
    respond(status, "text/xml", &[], body)
}

/// Service Quotas GetServiceQuota's answer (awsJson1.1), in the shape the Service Quotas API
/// reference documents: the quota with its `Value`.
pub(super) fn service_quota(service: &str, code: &str, value: f64) -> Response<Full<Bytes>> {
    let body = serde_json::json!({"Quota": {
        "ServiceCode": service,
        "QuotaCode": code,
        "QuotaArn": format!("arn:aws:servicequotas:::{service}/{code}"),
        "Value": value,
        "Unit": "None",
        "Adjustable": true,
        "GlobalQuota": false,
    }});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/x-amz-json-1.1"),
    );
    response
}

/// SSM GetParameter's answer (awsJson1.1), in the shape the Systems Manager API reference
/// documents for a public parameter: AWS owns it, so its ARN has no account.
pub(super) fn ssm_parameter(name: &str, value: &str, region: &str) -> Response<Full<Bytes>> {
    let body = serde_json::json!({"Parameter": {
        "Name": name,
        "Type": "String",
        "Value": value,
        "Version": 1,
        "ARN": format!("arn:aws:ssm:{region}::parameter{name}"),
        "DataType": "text",
    }});
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("application/x-amz-json-1.1"),
    );
    response
}

/// An EKS DescribeCluster answer (`body`, JSON) with `accessConfig.authenticationMode` and
/// `resourcesVpcConfig.vpcId` added (moto leaves both out); `None` when there is nothing to add
/// or the answer is no cluster.
pub(super) fn cluster_with(body: &[u8], mode: Option<&str>, vpc: Option<&str>) -> Option<String> {
    if mode.is_none() && vpc.is_none() {
        return None;
    }
    let mut json = serde_json::from_slice::<serde_json::Value>(body).ok()?;
    let cluster = json.get_mut("cluster")?.as_object_mut()?;
    if let Some(mode) = mode {
        cluster.insert(
            "accessConfig".into(),
            serde_json::json!({ "authenticationMode": mode }),
        );
    }
    if let Some(vpc) = vpc {
        let config = cluster
            .entry("resourcesVpcConfig")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(config) = config.as_object_mut() {
            config.insert("vpcId".into(), serde_json::json!(vpc));
        }
    }
    Some(json.to_string())
}

/// Appends each operation's slowest answer to `path` as `service operation milliseconds` lines.
pub(super) fn append_slowest(
    path: &std::ffi::OsStr,
    slowest: &std::collections::BTreeMap<(String, String), std::time::Duration>,
) {
    let lines: String = slowest
        .iter()
        .map(|((service, operation), took)| format!("{service} {operation} {}\n", took.as_millis()))
        .collect();
    let _ = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .and_then(|mut file| std::io::Write::write_all(&mut file, lines.as_bytes()));
}

/// Whether moto's answer says it could not serve the call: a server error, or a client error
/// whose body names something moto does not implement (an unknown action or path).
pub(super) fn unserved(status: u16, body: &[u8]) -> bool {
    if status >= 500 {
        return true;
    }
    let text = String::from_utf8_lossy(body);
    (400..500).contains(&status)
        && [
            "not yet implemented",
            "NotImplemented",
            "InvalidAction",
            "UnknownOperation",
        ]
        .iter()
        .any(|marker| text.contains(marker))
}
