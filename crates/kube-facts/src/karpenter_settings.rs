//! Reads the Karpenter controller's version and settings from its Deployment and ServiceAccount.
//! Pure: works on objects already fetched.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, ServiceAccount};
use karpenter_health_checks::facts::Setting;

/// The annotation IRSA uses to name a ServiceAccount's IAM role.
pub const ROLE_ARN_ANNOTATION: &str = "eks.amazonaws.com/role-arn";

/// What the Deployment says about the controller.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ControllerSettings {
    pub version: Option<String>,
    pub cluster_name: Option<String>,
    pub isolated_vpc: bool,
    pub service_account: Option<String>,
    /// `--interruption-queue`, else `INTERRUPTION_QUEUE` (aws/karpenter-provider-aws
    /// `pkg/operator/options/options.go`: the flag wins, the env var is its default).
    pub interruption_queue: Setting,
    /// `--disable-dry-run`, else `DISABLE_DRY_RUN` (Go `strconv.ParseBool`).
    pub dry_run_disabled: bool,
    /// `--feature-gates`, else `FEATURE_GATES` (kubernetes-sigs/karpenter
    /// `pkg/operator/options/options.go`), as written: `ReservedCapacity=true,NodeRepair=false`.
    pub feature_gates: Setting,
    /// `--min-values-policy`, else `MIN_VALUES_POLICY` (kubernetes-sigs/karpenter
    /// `pkg/operator/options/options.go`, 1.6 and later): `Strict` or `BestEffort`.
    pub min_values_policy: Setting,
    /// `--reserved-enis`, else `RESERVED_ENIS` (aws/karpenter-provider-aws
    /// `pkg/operator/options/options.go`): ENIs left out of the Pod density it computes.
    pub reserved_enis: Setting,
}

/// A flag's value in the container's args: `--name=value`, `--name value`, or `--name` alone
/// (`Some("")`, a boolean flag's true).
fn flag(container: &Container, name: &str) -> Option<String> {
    let args = container.args.as_deref().unwrap_or_default();
    let long = format!("--{name}");
    let short = format!("-{name}");
    let mut found = None;
    let mut i = 0;
    while i < args.len() {
        let arg = args[i].as_str();
        if let Some(value) = arg
            .strip_prefix(&format!("{long}="))
            .or_else(|| arg.strip_prefix(&format!("{short}=")))
        {
            found = Some(value.to_owned());
        } else if arg == long || arg == short {
            match args.get(i + 1) {
                Some(next) if !next.starts_with('-') => {
                    found = Some(next.clone());
                    i += 1;
                }
                _ => found = Some(String::new()),
            }
        }
        i += 1;
    }
    found
}

/// A boolean flag or env as Karpenter reads it (`strconv.ParseBool`; its `env.WithDefaultBool`
/// keeps the default, false, for anything else).
fn parse_bool(value: &str) -> bool {
    karpenter_health_checks::go::parse_bool(value).unwrap_or(false)
}

/// An env var of the container: its literal value, or how it is set when from a reference.
fn env_setting(container: &Container, name: &str) -> Setting {
    let Some(var) = container
        .env
        .as_ref()
        .and_then(|env| env.iter().rev().find(|e| e.name == name))
    else {
        return Setting::Unset;
    };
    match (&var.value, &var.value_from) {
        (Some(v), _) if !v.trim().is_empty() => Setting::Value(v.trim().to_owned()),
        (_, Some(from)) => {
            let how = if let Some(r) = &from.config_map_key_ref {
                format!("from ConfigMap {} key {}", r.name, r.key)
            } else if let Some(r) = &from.secret_key_ref {
                format!("from Secret {} key {}", r.name, r.key)
            } else {
                "from a field reference".to_owned()
            };
            Setting::Unresolved(how)
        }
        _ => Setting::Unset,
    }
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
    // A string setting: the flag wins, its env var is the flag's default.
    let setting = |name: &str, env_name: &str| match container.and_then(|c| flag(c, name)) {
        Some(v) if !v.trim().is_empty() => Setting::Value(v.trim().to_owned()),
        Some(_) => Setting::Unset,
        None => container.map_or(Setting::Unset, |c| env_setting(c, env_name)),
    };
    let interruption_queue = setting("interruption-queue", "INTERRUPTION_QUEUE");
    let dry_run_disabled = match container.and_then(|c| flag(c, "disable-dry-run")) {
        Some(v) if v.is_empty() => true,
        Some(v) => parse_bool(&v),
        None => matches!(
            container.map(|c| env_setting(c, "DISABLE_DRY_RUN")),
            Some(Setting::Value(v)) if parse_bool(&v)
        ),
    };
    ControllerSettings {
        interruption_queue,
        dry_run_disabled,
        feature_gates: setting("feature-gates", "FEATURE_GATES"),
        min_values_policy: setting("min-values-policy", "MIN_VALUES_POLICY"),
        reserved_enis: setting("reserved-enis", "RESERVED_ENIS"),
        version: container
            .and_then(|c| c.image.as_deref())
            .and_then(version_from_image),
        cluster_name: env("CLUSTER_NAME"),
        isolated_vpc: env("ISOLATED_VPC").is_some_and(|v| parse_bool(&v)),
        service_account: pod_spec.and_then(|p| p.service_account_name.clone()),
    }
}

/// The audience of a ServiceAccount's IRSA token when not `sts.amazonaws.com`
/// (amazon-eks-pod-identity-webhook `README.md`).
pub const AUDIENCE_ANNOTATION: &str = "eks.amazonaws.com/audience";

/// The IRSA token audience a ServiceAccount is annotated with, if any.
pub fn irsa_audience(service_account: &ServiceAccount) -> Option<String> {
    service_account
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(AUDIENCE_ANNOTATION))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
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
        assert_eq!(settings.interruption_queue, Setting::Unset);
        assert!(!settings.dry_run_disabled);
    }

    fn controller(container: serde_json::Value) -> ControllerSettings {
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "karpenter"},
            "spec": {"selector": {}, "template": {"spec": {"containers": [container]}}}
        }))
        .unwrap();
        controller_settings(&deployment)
    }

    #[test]
    fn feature_gates_come_from_the_flag_over_env_as_written() {
        let gates = "ReservedCapacity=false,SpotToSpotConsolidation=false";
        let s = controller(serde_json::json!({"name": "controller", "env": [
            {"name": "FEATURE_GATES", "value": gates}]}));
        assert_eq!(s.feature_gates, Setting::Value(gates.into()));
        let s = controller(serde_json::json!({"name": "controller",
            "args": ["--feature-gates=ReservedCapacity=true"],
            "env": [{"name": "FEATURE_GATES", "value": gates}]}));
        assert_eq!(
            s.feature_gates,
            Setting::Value("ReservedCapacity=true".into())
        );
        assert_eq!(
            controller(serde_json::json!({"name": "controller"})).feature_gates,
            Setting::Unset
        );
    }

    #[test]
    fn the_min_values_policy_comes_from_the_flag_over_env() {
        let s = controller(serde_json::json!({"name": "controller", "env": [
            {"name": "MIN_VALUES_POLICY", "value": "BestEffort"}]}));
        assert_eq!(s.min_values_policy, Setting::Value("BestEffort".into()));
        let s = controller(serde_json::json!({"name": "controller",
            "args": ["--min-values-policy", "Strict"],
            "env": [{"name": "MIN_VALUES_POLICY", "value": "BestEffort"}]}));
        assert_eq!(s.min_values_policy, Setting::Value("Strict".into()));
    }

    #[test]
    fn the_interruption_queue_and_dry_run_come_from_flags_over_env() {
        let s = controller(serde_json::json!({"name": "controller", "env": [
            {"name": "INTERRUPTION_QUEUE", "value": "demo"}, {"name": "DISABLE_DRY_RUN", "value": "True"}]}));
        assert_eq!(s.interruption_queue, Setting::Value("demo".into()));
        assert!(s.dry_run_disabled);
        let s = controller(serde_json::json!({"name": "controller",
            "args": ["--interruption-queue", "from-flag", "--disable-dry-run=false"],
            "env": [{"name": "INTERRUPTION_QUEUE", "value": "demo"}, {"name": "DISABLE_DRY_RUN", "value": "true"}]}));
        assert_eq!(s.interruption_queue, Setting::Value("from-flag".into()));
        assert!(!s.dry_run_disabled);
        let s = controller(
            serde_json::json!({"name": "controller", "args": ["--disable-dry-run"],
            "env": [{"name": "INTERRUPTION_QUEUE", "valueFrom": {"configMapKeyRef": {"name": "k", "key": "q"}}}]}),
        );
        assert!(s.dry_run_disabled);
        assert_eq!(
            s.interruption_queue,
            Setting::Unresolved("from ConfigMap k key q".into())
        );
    }
}
