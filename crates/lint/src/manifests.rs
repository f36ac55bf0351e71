//! What the files say together of the cluster around each EC2NodeClass: the NodePools that use
//! it, the AWS Load Balancer Controller's Deployment, Cilium's settings and agent, and the
//! DaemonSets. Lint hands them to the engine as facts, so the checks that the manifests alone
//! decide (instance metadata kept from the controller, Cilium's taint missing from startup
//! taints) run offline too; what the files do not hold stays unknown. Pure: no IO.

use crate::documents::{Document, Object, Workload};
use crate::model::Rule;
use karpenter_health_api::karpenter::NodePool;
use karpenter_health_checks::facts::{
    ClusterFacts, DaemonSetFacts, LoadBalancerControllerFacts, Observed,
};
use karpenter_health_checks::pod_template::{self, LOAD_BALANCER_CONTROLLER};
use karpenter_health_checks::warnings::Warning;
use std::collections::BTreeMap;
use std::sync::Arc;

/// The cluster objects of every file of one lint run.
#[derive(Debug, Default)]
pub struct Manifests<'d> {
    node_pools: Vec<&'d NodePool>,
    load_balancer_controller: Option<LoadBalancerControllerFacts>,
    cilium_config: Option<&'d BTreeMap<String, String>>,
    daemonsets: Vec<DaemonSetFacts>,
}

/// A workload's namespace and name (`namespace/name`, or `name` alone when its document names no
/// namespace: a rendered chart applied with `-n`, taken to be where the chart puts it).
fn named(w: &Workload, default_namespace: &str) -> (String, String) {
    match w.name.split_once('/') {
        Some((ns, name)) => (ns.to_owned(), name.to_owned()),
        None => (default_namespace.to_owned(), w.name.clone()),
    }
}

impl<'d> Manifests<'d> {
    /// The rules the files decide together, and lint reports from them.
    pub const DECIDED: [Rule; 2] = [
        Rule::Warning(Warning::MetadataOutOfReach),
        Rule::Warning(Warning::AgentTaintNotStartupTaint),
    ];

    pub fn of(documents: impl IntoIterator<Item = &'d Document>) -> Self {
        let mut m = Manifests::default();
        for doc in documents {
            match &doc.object {
                Object::NodePool(pool) => m.node_pools.push(pool),
                Object::CiliumConfig(data) => m.cilium_config = Some(data),
                Object::Workload(w) if w.kind == "DaemonSet" => {
                    let (ns, name) = named(w, "default");
                    m.daemonsets
                        .push(pod_template::daemonset(&ns, &name, Some(&w.pod)));
                }
                Object::Workload(w) if w.kind == "Deployment" => {
                    let (ns, name) = named(w, LOAD_BALANCER_CONTROLLER.0);
                    if (ns.as_str(), name.as_str()) == LOAD_BALANCER_CONTROLLER {
                        m.load_balancer_controller = Some(pod_template::load_balancer_controller(
                            &ns,
                            &name,
                            w.replicas,
                            Some(&w.pod),
                        ));
                    }
                }
                _ => {}
            }
        }
        m
    }

    /// Sets in `cluster` what the files decide for the EC2NodeClass `class`: its NodePools when
    /// the files hold any, the controller, Cilium's settings and the DaemonSets when they hold
    /// them. The rest stays as `cluster` has it (unknown: lint is offline). Whether the files
    /// said anything of it.
    pub fn fill(&self, class: &str, cluster: &mut ClusterFacts) -> bool {
        let pools: Vec<NodePool> = self
            .node_pools
            .iter()
            .filter(|p| {
                p.spec
                    .template
                    .spec
                    .node_class_ref
                    .as_ref()
                    .map(|r| r.name.as_str())
                    == Some(class)
            })
            .map(|p| (*p).clone())
            .collect();
        if pools.is_empty() {
            // No NodePool of the class in the files: nothing here is judged per NodePool.
            return false;
        }
        cluster.node_pools = Observed::Found(pools);
        if let Some(controller) = &self.load_balancer_controller {
            cluster.load_balancer_controller = Observed::Found(controller.clone());
        }
        if let Some(data) = self.cilium_config {
            cluster.cilium_node_taint =
                pod_template::cilium_node_taint_key(data).map_or(Observed::Absent, Observed::Found);
        }
        if !self.daemonsets.is_empty() {
            cluster.daemonsets = Observed::Found(Arc::new(self.daemonsets.clone()));
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::documents::read_stream;

    const POOL: &str = "apiVersion: karpenter.sh/v1\nkind: NodePool\nmetadata: {name: general}\nspec:\n  template:\n    spec:\n      nodeClassRef: {group: karpenter.k8s.aws, kind: EC2NodeClass, name: defaults}\n";

    fn controller(namespace: &str, replicas: u32, args: &str) -> String {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: aws-load-balancer-controller{namespace}}}\nspec:\n  replicas: {replicas}\n  selector: {{matchLabels: {{a: b}}}}\n  template:\n    metadata: {{labels: {{a: b}}}}\n    spec:\n      containers:\n        - {{name: c, image: public.ecr.aws/eks/aws-load-balancer-controller:v2.14.1, args: [{args}]}}\n"
        )
    }

    fn filled(text: &str, class: &str) -> (bool, ClusterFacts) {
        let docs = read_stream(text);
        let manifests = Manifests::of(&docs);
        let mut cluster = ClusterFacts::default();
        let said = manifests.fill(class, &mut cluster);
        (said, cluster)
    }

    #[test]
    fn the_files_decide_only_for_a_class_whose_node_pools_they_hold() {
        let text = format!(
            "{POOL}---\n{}",
            controller(", namespace: kube-system", 1, "")
        );
        let (said, cluster) = filled(&text, "defaults");
        assert!(said);
        assert!(matches!(&cluster.node_pools, Observed::Found(p) if p.len() == 1));
        let Observed::Found(lbc) = &cluster.load_balancer_controller else {
            panic!("{:?}", cluster.load_balancer_controller)
        };
        assert!(!lbc.vpc_id_configured && lbc.replicas == 1);
        // Another class: no NodePool of it in the files, nothing is said.
        let (said, cluster) = filled(&text, "other");
        assert!(!said);
        assert!(matches!(
            cluster.load_balancer_controller,
            Observed::Unknown(_)
        ));
    }

    #[test]
    fn the_controller_is_read_where_its_chart_puts_it_as_written() {
        // A rendered chart without a namespace is applied with -n: taken as kube-system.
        let bare = format!("{POOL}---\n{}", controller("", 0, "--aws-vpc-id=vpc-0abc"));
        let (_, cluster) = filled(&bare, "defaults");
        let Observed::Found(lbc) = &cluster.load_balancer_controller else {
            panic!("{:?}", cluster.load_balancer_controller)
        };
        assert_eq!((lbc.replicas, lbc.vpc_id_configured), (0, true));
        // Another namespace is another Deployment.
        let elsewhere = format!("{POOL}---\n{}", controller(", namespace: ingress", 1, ""));
        let (_, cluster) = filled(&elsewhere, "defaults");
        assert!(matches!(
            cluster.load_balancer_controller,
            Observed::Unknown(_)
        ));
    }

    #[test]
    fn ciliums_settings_in_the_files_say_whether_it_taints() {
        let config = |value: &str| {
            format!(
                "{POOL}---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: cilium-config, namespace: kube-system}}\ndata: {{set-cilium-node-taints: \"{value}\"}}\n"
            )
        };
        let (_, cluster) = filled(&config("true"), "defaults");
        assert_eq!(
            cluster.cilium_node_taint,
            Observed::Found(pod_template::CILIUM_DEFAULT_TAINT_KEY.to_owned())
        );
        let (_, cluster) = filled(&config("false"), "defaults");
        assert_eq!(cluster.cilium_node_taint, Observed::Absent);
    }
}
