//! What the AWS Load Balancer Controller's Deployment says of where its Pods run and how it finds
//! its VPC, trimmed to that: its Pod template's scheduling constraints, `hostNetwork`, and its
//! container's image, command, arguments and env names (env values are dropped: they may hold
//! secrets and are not read). Pure: works on objects already fetched.
//!
//! The controller needs its VPC id before it starts: `--aws-vpc-id`, else a `DescribeVpcs` by
//! `--aws-vpc-tags`, else instance metadata, else (since v2.4.5) `DescribeInstances` of the node
//! its `NODENAME` env names (kubernetes-sigs/aws-load-balancer-controller `pkg/aws/cloud.go`
//! `getVpcID`, `inferVPCID`; the flags in `pkg/aws/cloud_config.go`). Its Helm chart passes the
//! flags from the values `vpcId` and `vpcTags` and sets no `NODENAME`
//! (`helm/aws-load-balancer-controller/templates/deployment.yaml`).

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Container, EnvVar, PodSpec};
use karpenter_health_checks::facts::LoadBalancerControllerFacts;
use karpenter_health_checks::pod_template::LOAD_BALANCER_CONTROLLER;

/// Where the controller's chart puts it when installed as AWS's EKS guide says (release
/// `aws-load-balancer-controller` in `kube-system`).
pub const NAMESPACE: &str = LOAD_BALANCER_CONTROLLER.0;
pub const DEPLOYMENT: &str = LOAD_BALANCER_CONTROLLER.1;

/// Keeps of the Deployment its replicas, its Pod template's scheduling constraints and
/// `hostNetwork`, and each container's image, command, arguments and env names.
pub fn trim(deployment: &mut Deployment) {
    crate::trim::metadata(deployment);
    deployment.status = None;
    let Some(spec) = deployment.spec.as_mut() else {
        return;
    };
    spec.template.metadata = None;
    let Some(pod_spec) = spec.template.spec.as_mut() else {
        return;
    };
    let containers = std::mem::take(&mut pod_spec.containers)
        .into_iter()
        .map(|c| Container {
            name: c.name,
            image: c.image,
            command: c.command,
            args: c.args,
            env: c.env.map(|env| {
                env.into_iter()
                    .map(|e| EnvVar {
                        name: e.name,
                        ..EnvVar::default()
                    })
                    .collect()
            }),
            env_from: c.env_from,
            ..Container::default()
        })
        .collect();
    let host_network = pod_spec.host_network;
    *pod_spec = PodSpec {
        host_network,
        ..crate::trim::scheduling_only(pod_spec, containers)
    };
}

/// The facts of the controller's Deployment
/// ([`karpenter_health_checks::pod_template::load_balancer_controller`]).
pub fn facts_of(deployment: &Deployment) -> LoadBalancerControllerFacts {
    let spec = deployment.spec.as_ref();
    karpenter_health_checks::pod_template::load_balancer_controller(
        deployment.metadata.namespace.as_deref().unwrap_or_default(),
        deployment.metadata.name.as_deref().unwrap_or_default(),
        spec.and_then(|s| s.replicas),
        spec.and_then(|s| s.template.spec.as_ref()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The Deployment the controller's chart renders with `extra` merged into its container.
    fn deployment(container: serde_json::Value, pod: serde_json::Value) -> Deployment {
        let mut c = json!({
            "name": "aws-load-balancer-controller",
            "image": "public.ecr.aws/eks/aws-load-balancer-controller:v2.14.1",
            "args": ["--cluster-name=demo", "--ingress-class=alb"],
        });
        c.as_object_mut()
            .unwrap()
            .extend(container.as_object().cloned().unwrap_or_default());
        let mut spec =
            json!({"serviceAccountName": "aws-load-balancer-controller", "containers": [c]});
        spec.as_object_mut()
            .unwrap()
            .extend(pod.as_object().cloned().unwrap_or_default());
        serde_json::from_value(json!({
            "metadata": {"namespace": NAMESPACE, "name": DEPLOYMENT},
            "spec": {
                "replicas": 2,
                "selector": {"matchLabels": {"app.kubernetes.io/name": "aws-load-balancer-controller"}},
                "template": {"spec": spec},
            },
        }))
        .unwrap()
    }

    #[test]
    fn the_charts_default_install_reads_its_vpc_from_instance_metadata() {
        let facts = facts_of(&deployment(json!({}), json!({})));
        assert!(!facts.vpc_id_configured && !facts.vpc_source_unjudged);
        assert!(!facts.host_network && !facts.constraints_unjudged);
        assert_eq!(facts.replicas, 2);
        assert_eq!(
            (facts.pod.namespace.as_str(), facts.pod.name.as_str()),
            (NAMESPACE, DEPLOYMENT)
        );
    }

    #[test]
    fn either_vpc_flag_in_either_form_names_the_vpc() {
        for args in [
            json!(["--aws-vpc-id=vpc-0abc"]),
            json!(["--aws-vpc-id", "vpc-0abc"]),
            json!(["--aws-vpc-tags=env=prod"]),
            json!(["--aws-vpc-tags", "env=prod,team=a"]),
        ] {
            let facts = facts_of(&deployment(json!({"args": args}), json!({})));
            assert!(facts.vpc_id_configured, "{args}");
        }
        // In the command, too.
        let facts = facts_of(&deployment(
            json!({"command": ["/controller", "--aws-vpc-id=vpc-0abc"], "args": []}),
            json!({}),
        ));
        assert!(facts.vpc_id_configured);
        // An empty id is unset; a flag that only starts alike is another flag.
        for args in [
            json!(["--aws-vpc-id="]),
            json!(["--aws-vpc-id-extra=vpc-0abc"]),
            json!(["--aws-region=eu-west-1"]),
        ] {
            let facts = facts_of(&deployment(json!({"args": args}), json!({})));
            assert!(!facts.vpc_id_configured, "{args}");
        }
    }

    #[test]
    fn what_may_name_the_vpc_elsewhere_is_not_judged() {
        let node_name = json!({"env": [{"name": "NODENAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}]});
        assert!(facts_of(&deployment(node_name, json!({}))).vpc_source_unjudged);
        let env_from = json!({"envFrom": [{"configMapRef": {"name": "lbc-env"}}]});
        assert!(facts_of(&deployment(env_from, json!({}))).vpc_source_unjudged);
        let other_image = json!({"image": "example.com/ingress:1.0"});
        assert!(facts_of(&deployment(other_image, json!({}))).vpc_source_unjudged);
        // Another env name is no such source; an image by digest is still the controller's.
        let other_env = json!({"env": [{"name": "AWS_REGION", "value": "eu-west-1"}]});
        assert!(!facts_of(&deployment(other_env, json!({}))).vpc_source_unjudged);
        let by_digest = json!({"image": "602401143452.dkr.ecr.eu-west-1.amazonaws.com/amazon/aws-load-balancer-controller@sha256:0123"});
        assert!(!facts_of(&deployment(by_digest, json!({}))).vpc_source_unjudged);
    }

    #[test]
    fn the_trimmed_deployment_keeps_what_decides_and_no_env_value() {
        let mut full = deployment(
            json!({"env": [{"name": "SECRET_TOKEN", "value": "hunter2"}], "resources": {"requests": {"cpu": "100m"}}}),
            json!({
                "hostNetwork": true,
                "nodeSelector": {"kubernetes.io/os": "linux"},
                "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "infra"}],
                "affinity": {
                    "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["on-demand"]}]},
                    ]}},
                    "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []},
                },
            }),
        );
        let before = facts_of(&full);
        trim(&mut full);
        assert_eq!(facts_of(&full), before);
        assert!(before.host_network);
        assert_eq!(before.pod.tolerations.len(), 1);
        assert_eq!(before.pod.required_affinity.len(), 1);
        let text = serde_json::to_string(&full).unwrap();
        assert!(
            !text.contains("hunter2") && !text.contains("podAntiAffinity"),
            "{text}"
        );
        assert!(text.contains("SECRET_TOKEN"), "{text}");
    }
}
