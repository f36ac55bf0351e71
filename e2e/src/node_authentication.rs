//! Whether an instance's kubelet would be let into the bed's cluster, as on EKS in aws-auth
//! mode: the instance's role (its instance profile's, read from moto), as the STS session EC2
//! gives it (`assumed-role/<role>/<instance id>`), mapped through kube-system/aws-auth by the AWS
//! IAM Authenticator's own code (e2e/bed/authenticator, built from its Go module), then asked of
//! the bed's API server, whose Node authorizer decides whether that user may create its Node.
//! The node stand-in makes a Node only when this admits it, so that aws-auth, not a test, decides
//! whether a node joins. Does IO (moto, the API server, the authenticator's process).

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use tokio::io::AsyncWriteExt as _;

/// What the authenticator and the API server made of an instance's kubelet.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Admission {
    /// Let in as `system:node:<node_name>`: the kubelet registers a Node of that name.
    Admitted { node_name: String },
    /// Kept out, and why (the authenticator's or the authorizer's own words).
    Refused(String),
}

/// Reads an instance's identity from moto and judges it (see the module's documentation).
#[derive(Clone, Debug)]
pub struct NodeAuthentication {
    ec2: aws_sdk_ec2::Client,
    iam: aws_sdk_iam::Client,
    /// The authenticator's mapping (e2e/bed/build-authenticator.sh).
    authenticate: PathBuf,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct MapRequest<'a> {
    arn: &'a str,
    #[serde(rename = "privateDNSName")]
    private_dns_name: &'a str,
    data: BTreeMap<String, String>,
}

#[derive(Deserialize)]
struct MapAnswer {
    #[serde(default)]
    username: String,
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default)]
    error: String,
}

impl NodeAuthentication {
    /// For instances in `region` of the bed's moto; the authenticator's binary from
    /// `KH_AUTHENTICATE_BIN`, else built (or found in the cache) by e2e/bed/build-authenticator.sh.
    pub async fn new(bed: &crate::Bed, region: &str) -> Result<Self> {
        let config = bed.aws_config(region).await?;
        let authenticate = match std::env::var_os("KH_AUTHENTICATE_BIN") {
            Some(path) => PathBuf::from(path),
            None => {
                let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("bed/build-authenticator.sh");
                let out = tokio::process::Command::new("bash")
                    .arg(&script)
                    .output()
                    .await
                    .context("running e2e/bed/build-authenticator.sh")?;
                if !out.status.success() {
                    bail!(
                        "e2e/bed/build-authenticator.sh failed: {}",
                        String::from_utf8_lossy(&out.stderr)
                    );
                }
                PathBuf::from(String::from_utf8(out.stdout)?.trim())
            }
        };
        Ok(Self {
            ec2: aws_sdk_ec2::Client::new(&config),
            iam: aws_sdk_iam::Client::new(&config),
            authenticate,
        })
    }

    /// Whether instance `instance_id`'s kubelet is let in; `Err` only when the bed could not be
    /// read (the stand-in then makes no Node and says so).
    pub async fn admission(&self, client: &kube::Client, instance_id: &str) -> Result<Admission> {
        let described = self
            .ec2
            .describe_instances()
            .instance_ids(instance_id)
            .send()
            .await
            .with_context(|| format!("describing instance {instance_id}"))?;
        let Some(instance) = described
            .reservations()
            .iter()
            .flat_map(|r| r.instances())
            .next()
        else {
            return Ok(Admission::Refused(format!("no instance {instance_id}")));
        };
        let dns_name = instance.private_dns_name().unwrap_or_default().to_owned();
        let Some(profile_arn) = instance.iam_instance_profile().and_then(|p| p.arn()) else {
            return Ok(Admission::Refused(format!(
                "instance {instance_id} has no instance profile: its kubelet has no AWS credentials"
            )));
        };
        // arn:aws:iam::ACCOUNT:instance-profile[/path]/NAME
        let profile_name = profile_arn.rsplit('/').next().unwrap_or(profile_arn);
        let profile = match self
            .iam
            .get_instance_profile()
            .instance_profile_name(profile_name)
            .send()
            .await
        {
            Ok(answer) => answer.instance_profile,
            Err(e)
                if e.as_service_error()
                    .is_some_and(|e| e.is_no_such_entity_exception()) =>
            {
                return Ok(Admission::Refused(format!(
                    "instance profile {profile_arn} does not exist: the instance has no credentials"
                )));
            }
            Err(e) => return Err(e).context("reading the instance profile"),
        };
        let Some(role) = profile.as_ref().and_then(|p| p.roles().first()) else {
            return Ok(Admission::Refused(format!(
                "instance profile {profile_arn} holds no role: the instance has no credentials"
            )));
        };
        // EC2 names the role's session after the instance, and an assumed-role ARN carries the
        // role's name, never its path (IAM User Guide, "IAM identifiers").
        let (partition, account) = crate::aws_seed::partition_and_account(role.arn());
        let session_arn = format!(
            "arn:{partition}:sts::{account}:assumed-role/{}/{instance_id}",
            role.role_name()
        );
        let aws_auth = Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
            .get_opt("aws-auth")
            .await
            .context("reading kube-system/aws-auth")?
            .and_then(|cm| cm.data)
            .unwrap_or_default();
        let answer = self
            .map(&MapRequest {
                arn: &session_arn,
                private_dns_name: &dns_name,
                data: aws_auth,
            })
            .await?;
        if !answer.error.is_empty() {
            return Ok(Admission::Refused(format!(
                "the authenticator refuses {session_arn}: {}",
                answer.error
            )));
        }
        // The kubelet registers under its host name, the instance's private DNS name on EKS; the
        // NodeRestriction admission plugin lets a node create only the Node of its own user name
        // (kubernetes `plugin/pkg/admission/noderestriction/admission.go`).
        let node_name = answer
            .username
            .strip_prefix("system:node:")
            .unwrap_or_default()
            .to_owned();
        if node_name.is_empty() || node_name != dns_name {
            return Ok(Admission::Refused(format!(
                "the authenticator maps {session_arn} to user {:?}, which is not the node {dns_name:?}",
                answer.username
            )));
        }
        let mut groups = answer.groups.clone();
        groups.push("system:authenticated".into());
        let review = SubjectAccessReview {
            spec: SubjectAccessReviewSpec {
                user: Some(answer.username.clone()),
                groups: Some(groups),
                resource_attributes: Some(ResourceAttributes {
                    verb: Some("create".into()),
                    resource: Some("nodes".into()),
                    name: Some(node_name.clone()),
                    ..ResourceAttributes::default()
                }),
                ..SubjectAccessReviewSpec::default()
            },
            ..SubjectAccessReview::default()
        };
        let reviewed = Api::<SubjectAccessReview>::all(client.clone())
            .create(&PostParams::default(), &review)
            .await
            .context("asking the API server whether the node may register")?;
        let status = reviewed.status.unwrap_or_default();
        if !status.allowed {
            return Ok(Admission::Refused(format!(
                "the API server refuses {} (groups {:?}) to create Node {node_name}: {}",
                answer.username,
                answer.groups,
                status.reason.unwrap_or_default()
            )));
        }
        Ok(Admission::Admitted { node_name })
    }

    async fn map(&self, request: &MapRequest<'_>) -> Result<MapAnswer> {
        let mut child = tokio::process::Command::new(&self.authenticate)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.authenticate.display()))?;
        let mut stdin = child.stdin.take().context("the authenticator's stdin")?;
        stdin.write_all(&serde_json::to_vec(request)?).await?;
        drop(stdin);
        let out = child.wait_with_output().await?;
        serde_json::from_slice(&out.stdout).with_context(|| {
            format!(
                "the authenticator's answer ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            )
        })
    }
}
