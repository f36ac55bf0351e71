//! Reads the Karpenter controller's version and settings from its Deployment and ServiceAccount.
//! Pure: works on objects already fetched.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ServiceAccount;

/// The annotation IRSA uses to name a ServiceAccount's IAM role.
pub const ROLE_ARN_ANNOTATION: &str = "eks.amazonaws.com/role-arn";

/// What the Deployment says about the controller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerSettings {
    pub version: Option<String>,
    pub cluster_name: Option<String>,
    pub isolated_vpc: bool,
    pub service_account: Option<String>,
}

/// The version from an image reference such as
/// `public.ecr.aws/karpenter/controller:1.8.6@sha256:...`; `None` for digest-only or `latest`.
pub fn version_from_image(image: &str) -> Option<String> {
    let tag = karpenter_health_checks::version::image_tag(image)?;
    let looks_like_version = tag
        .trim_start_matches('v')
        .starts_with(|c: char| c.is_ascii_digit());
    looks_like_version.then(|| tag.to_owned())
}

/// Reads the controller container (named `controller`, else the first) of the Deployment.
pub fn controller_settings(deployment: &Deployment) -> ControllerSettings {
    let pod_spec = deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref());
    let containers = pod_spec
        .map(|p| p.containers.as_slice())
        .unwrap_or_default();
    let container = containers
        .iter()
        .find(|c| c.name == "controller")
        .or_else(|| containers.first());
    let env = |name: &str| {
        container
            .and_then(|c| c.env.as_ref())
            .and_then(|env| env.iter().find(|e| e.name == name))
            .and_then(|e| e.value.clone())
            .filter(|v| !v.is_empty())
    };
    ControllerSettings {
        version: container
            .and_then(|c| c.image.as_deref())
            .and_then(version_from_image),
        cluster_name: env("CLUSTER_NAME"),
        isolated_vpc: env("ISOLATED_VPC").is_some_and(|v| v.eq_ignore_ascii_case("true")),
        service_account: pod_spec.and_then(|p| p.service_account_name.clone()),
    }
}

/// The IAM role ARN a ServiceAccount is annotated with, if any.
pub fn role_arn(service_account: &ServiceAccount) -> Option<String> {
    service_account
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(ROLE_ARN_ANNOTATION))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_come_from_image_tags_and_never_from_digests() {
        let v = |s: &str| version_from_image(s);
        assert_eq!(
            v("public.ecr.aws/karpenter/controller:1.8.6@sha256:abc").as_deref(),
            Some("1.8.6")
        );
        assert_eq!(
            v("registry:5000/karpenter/controller:v1.0.1").as_deref(),
            Some("v1.0.1")
        );
        assert_eq!(v("public.ecr.aws/karpenter/controller@sha256:abc"), None);
        assert_eq!(v("karpenter/controller:latest"), None);
        assert_eq!(v("registry:5000/karpenter/controller"), None);
    }

    #[test]
    fn settings_come_from_the_controller_container_env() {
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "karpenter"},
            "spec": {"selector": {}, "template": {"spec": {
                "serviceAccountName": "karpenter",
                "containers": [
                    {"name": "sidecar", "image": "busybox:1.36"},
                    {"name": "controller", "image": "public.ecr.aws/karpenter/controller:1.5.0",
                     "env": [{"name": "CLUSTER_NAME", "value": "prod"}, {"name": "ISOLATED_VPC", "value": "true"}]}
                ]}}}
        }))
        .unwrap();
        let settings = controller_settings(&deployment);
        assert_eq!(settings.version.as_deref(), Some("1.5.0"));
        assert_eq!(settings.cluster_name.as_deref(), Some("prod"));
        assert!(settings.isolated_vpc);
        assert_eq!(settings.service_account.as_deref(), Some("karpenter"));
    }
}
