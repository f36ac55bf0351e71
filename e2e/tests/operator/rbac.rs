//! The shipped RBAC (deploy/rbac.yaml) is minimal: the bed's operator user, bound to it, and the
//! operator's in-cluster ServiceAccount may do what the operator uses and nothing more, asked of
//! the API server's authorizer; the real calls are refused where they must be. The operator tests
//! in `failures` prove the same rules sufficient. Does IO (API server).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: what is
//! checked is the operator's own requests; Karpenter's status only has to exist.

use anyhow::{Context, Result, bail, ensure};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret, ServiceAccount};
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::audit;
use karpenter_health_e2e::fixture::{DEADLINE, Fixture};
use karpenter_health_e2e::names::unique;
use karpenter_health_e2e::rbac::{
    KARPENTER_NAMESPACE_ROLE, OPERATOR_USER, allowed, attributes, bind_operator_user, shipped_rbac,
    unbind_operator_user,
};
use karpenter_health_e2e::{Bed, apply_json, install_health_crd, wait_for};
use kube::api::{Api, DeleteParams, ListParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_identity_is_not_admin_and_the_shipped_rbac_grants_only_what_it_uses()
-> Result<()> {
    let bed = Bed::from_env()?;
    let admin = bed.admin_client().await?;
    install_health_crd(&admin).await?;
    let name = unique("kh-rbac");
    apply_json(
        &admin,
        &[json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})],
    )
    .await?;
    let bindings = bind_operator_user(&admin, &name, &name).await?;
    let outcome: Result<()> = async {
        // The real calls: no Secrets, no other ConfigMaps in kube-system (once the new
        // bindings have reached the authorizer's cache).
        let operator = bed.operator_client().await?;
        let aws_auth: Api<ConfigMap> = Api::namespaced(operator.clone(), "kube-system");
        wait_for("the bindings to take effect", DEADLINE, || async {
            let by_name = ListParams::default().fields("metadata.name=aws-auth");
            Ok(aws_auth.list(&by_name).await.ok().map(|_| ()))
        })
        .await?;
        match Api::<Secret>::all(operator.clone())
            .list(&ListParams::default())
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 403 => {}
            other => bail!("listing Secrets must be forbidden, got {other:?}"),
        }
        match Api::<ConfigMap>::namespaced(operator.clone(), "kube-system")
            .list(&ListParams::default())
            .await
        {
            Err(kube::Error::Api(e)) if e.code == 403 => {}
            other => {
                bail!("listing every ConfigMap in kube-system must be forbidden, got {other:?}")
            }
        }
        Api::<ConfigMap>::namespaced(operator.clone(), "kube-system")
            .list(&ListParams::default().fields("metadata.name=aws-auth"))
            .await
            .context("listing aws-auth by name is allowed")?;
        Api::<ServiceAccount>::namespaced(operator.clone(), &name)
            .list(&ListParams::default().fields("metadata.name=karpenter"))
            .await
            .context("listing Karpenter's ServiceAccount by name is allowed")?;

        let ks = Some("kube-system");
        // (the test user's Karpenter namespace, the ServiceAccount's Karpenter namespace)
        let subjects = [
            (
                OPERATOR_USER.to_owned(),
                vec!["system:authenticated"],
                name.clone(),
            ),
            (
                "system:serviceaccount:kube-system:karpenter-health".to_owned(),
                vec![
                    "system:serviceaccounts",
                    "system:serviceaccounts:kube-system",
                    "system:authenticated",
                ],
                "kube-system".to_owned(),
            ),
        ];
        for (user, groups, karpenter_ns) in &subjects {
            let kns = Some(karpenter_ns.as_str());
            let must_allow = [
                attributes("watch", "karpenter.k8s.aws:ec2nodeclasses", None, None),
                attributes("list", "karpenter.sh:nodepools", None, None),
                attributes("watch", "karpenter.sh:nodeclaims", None, None),
                attributes("list", "pods", None, None),
                attributes("watch", "configmaps", ks, Some("aws-auth")),
                attributes("list", "serviceaccounts", ks, Some("aws-node")),
                attributes(
                    "watch",
                    "apps:deployments",
                    ks,
                    Some("aws-load-balancer-controller"),
                ),
                // NodesFitWorkloads: every DaemonSet's requests (and aws-node's env).
                attributes("watch", "apps:daemonsets", None, None),
                attributes("list", "apps:daemonsets", None, None),
                attributes("watch", "apps:deployments", kns, Some("karpenter")),
                attributes("list", "serviceaccounts", kns, Some("karpenter")),
                // KarpenterVersionCompatible: Karpenter's CRDs, webhooks and their endpoints.
                attributes(
                    "watch",
                    "apiextensions.k8s.io:customresourcedefinitions",
                    None,
                    Some("ec2nodeclasses.karpenter.k8s.aws"),
                ),
                attributes(
                    "list",
                    "admissionregistration.k8s.io:validatingwebhookconfigurations",
                    None,
                    None,
                ),
                attributes(
                    "watch",
                    "admissionregistration.k8s.io:mutatingwebhookconfigurations",
                    None,
                    None,
                ),
                attributes("list", "endpoints", kns, None),
                attributes("create", "karpenter-health.io:karpenterhealths", None, None),
                attributes(
                    "patch",
                    "karpenter-health.io:karpenterhealths/status",
                    None,
                    Some("x"),
                ),
                attributes("create", "events.k8s.io:events", Some("default"), None),
                attributes("create", "coordination.k8s.io:leases", ks, None),
                attributes(
                    "patch",
                    "coordination.k8s.io:leases",
                    ks,
                    Some("karpenter-health"),
                ),
                // A standby watches its Lease to contend the moment it is released.
                attributes(
                    "watch",
                    "coordination.k8s.io:leases",
                    ks,
                    Some("karpenter-health"),
                ),
            ];
            for attrs in must_allow {
                ensure!(
                    allowed(&admin, user, groups, attrs.clone()).await?,
                    "{user} must be allowed {attrs:?}"
                );
            }
            let must_deny = [
                attributes("list", "secrets", None, None),
                attributes("get", "secrets", ks, Some("aws-auth")),
                attributes("list", "configmaps", ks, None),
                attributes("get", "configmaps", ks, Some("kube-proxy")),
                attributes("patch", "configmaps", ks, Some("aws-auth")),
                attributes("list", "apps:deployments", None, None),
                attributes("get", "apps:deployments", ks, Some("coredns")),
                attributes("patch", "apps:daemonsets", ks, Some("aws-node")),
                attributes("get", "apps:daemonsets", ks, Some("kube-proxy")),
                attributes("patch", "apps:deployments", kns, Some("karpenter")),
                attributes("get", "serviceaccounts", ks, Some("default")),
                attributes("create", "serviceaccounts/token", kns, Some("karpenter")),
                attributes("patch", "karpenter.k8s.aws:ec2nodeclasses", None, Some("x")),
                attributes(
                    "update",
                    "karpenter.k8s.aws:ec2nodeclasses/status",
                    None,
                    Some("x"),
                ),
                attributes("delete", "karpenter.sh:nodeclaims", None, Some("x")),
                attributes("create", "karpenter.sh:nodepools", None, None),
                attributes("delete", "pods", Some("default"), Some("x")),
                attributes("create", "pods/exec", Some("default"), Some("x")),
                attributes(
                    "delete",
                    "karpenter-health.io:karpenterhealths",
                    None,
                    Some("x"),
                ),
                attributes(
                    "patch",
                    "coordination.k8s.io:leases",
                    ks,
                    Some("kube-controller-manager"),
                ),
                attributes("watch", "coordination.k8s.io:leases", ks, None),
                attributes("list", "nodes", None, None),
                attributes("list", "endpoints", Some("default"), None),
                attributes("get", "endpoints", kns, Some("karpenter")),
                attributes(
                    "patch",
                    "admissionregistration.k8s.io:validatingwebhookconfigurations",
                    None,
                    Some("x"),
                ),
                attributes(
                    "list",
                    "apiextensions.k8s.io:customresourcedefinitions",
                    None,
                    Some("certificates.cert-manager.io"),
                ),
                attributes(
                    "create",
                    "apiextensions.k8s.io:customresourcedefinitions",
                    None,
                    None,
                ),
                attributes(
                    "bind",
                    "rbac.authorization.k8s.io:clusterroles",
                    None,
                    Some("cluster-admin"),
                ),
            ];
            for attrs in must_deny {
                ensure!(
                    !allowed(&admin, user, groups, attrs.clone()).await?,
                    "{user} must not be allowed {attrs:?}"
                );
            }
        }
        Ok(())
    }
    .await;
    let cleanup = async {
        unbind_operator_user(&admin, &bindings).await?;
        Api::<Namespace>::all(admin.clone())
            .delete(&name, &DeleteParams::default())
            .await?;
        Ok::<(), anyhow::Error>(())
    }
    .await;
    outcome.and(cleanup)
}

/// The other half of minimal: every permission the shipped roles grant is used. The operator runs
/// as the bed's non-admin user bound to exactly the shipped roles, through what it does in a
/// cluster (first start, leader election, every watch, the drain of a NodeClaim stuck
/// terminating, creating and patching KarpenterHealths and their status, Events, a clean stop),
/// and the API server's audit log of that user's requests must use every granted verb on every
/// resource and name.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_permission_the_shipped_rbac_grants_is_used_by_the_operator() -> Result<()> {
    let audit_log = std::path::PathBuf::from(Bed::from_env()?.var("KH_AUDIT_LOG")?);
    let from = audit::offset(&audit_log);
    let fx = Fixture::seed("used", "ap-south-1", "1.8.6").await?;
    let outcome: Result<()> = async {
        // Any terminating NodeClaim counts as stuck, so the drain's lists run too.
        let operator = fx
            .start_operator_with(None, |config| {
                config.leader_elect = true;
                config.evaluation.terminating_long_after = std::time::Duration::ZERO;
            })
            .await?;
        fx.wait_healthy("for the seeded setup").await?;
        let node = format!("{}-node", fx.name);
        fx.running_pod("web-1", &node, json!({})).await?;
        let claim = fx.terminating_node_claim("stuck", &node).await?;
        fx.wait_status("the Pods on the stuck NodeClaim's Node read", |s| {
            s.findings
                .iter()
                .any(|f| f.reason == "NodeClaimTerminatingLong" && f.message.contains("web-1"))
        })
        .await?;
        fx.release_node_claim(&claim).await?;
        fx.pod_gone("web-1").await?;
        // A second replica stands by: it watches the Lease (to take it the moment it is released)
        // and keeps caches of its own, so those grants are exercised too.
        let standby = fx
            .start_operator_with(None, |config| {
                config.leader_elect = true;
                config.lease_identity = Some("standby".into());
            })
            .await?;
        // The same transition twice, each announced by an Event of its own (this API server
        // refuses Events about cluster-scoped objects after authorizing them, so creating them
        // is what can be proven here).
        for round in ["first", "second"] {
            fx.map_roles(&[&fx.controller_role_arn]).await?;
            fx.wait_failed(&[(
                ConditionType::NodeRoleMapped,
                Reason::ControllerRoleMappedInstead,
            )])
            .await
            .with_context(|| format!("{round} break"))?;
            fx.map_roles(&[&fx.node_role_arn]).await?;
            fx.wait_healthy(&format!("after the {round} repair"))
                .await?;
        }
        // The leader stops and releases the Lease; the standby takes over and reconciles.
        operator.stop().await?;
        fx.map_roles(&[&fx.controller_role_arn]).await?;
        fx.wait_failed(&[(
            ConditionType::NodeRoleMapped,
            Reason::ControllerRoleMappedInstead,
        )])
        .await
        .context("break after the hand-over")?;
        fx.map_roles(&[&fx.node_role_arn]).await?;
        fx.wait_healthy("after the hand-over").await?;
        standby.stop().await?;

        let requests = audit::requests_since(&audit_log, from, OPERATOR_USER)?;
        ensure!(
            !requests.is_empty(),
            "no audited request of {OPERATOR_USER}"
        );
        // The Role for Karpenter's namespace is bound in this test's namespace.
        let mut grants = audit::grants(&shipped_rbac()?);
        for grant in &mut grants {
            if grant.role == format!("Role {KARPENTER_NAMESPACE_ROLE}") {
                grant.namespace = Some(fx.name.clone());
            }
        }
        let unused: Vec<String> = audit::unused(&grants, &requests)
            .into_iter()
            .map(ToString::to_string)
            .collect();
        ensure!(
            unused.is_empty(),
            "granted but never used by the operator (remove them from deploy/rbac.yaml):\n  {}",
            unused.join("\n  ")
        );
        Ok(())
    }
    .await;
    fx.finish(outcome).await
}
