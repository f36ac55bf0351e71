//! EKS Pod Identity on the real API server, moto and the fault proxy (which serves the Pod
//! Identity API that moto lacks): when `kube-system/aws-node` has no IRSA annotation, the VPC
//! CNI's permissions may come from a Pod Identity association, so a node role without
//! AmazonEKS_CNI_Policy is a problem only once EKS answers that there is none; while the
//! association cannot be read, NodeRoleReady is Unknown with the cause, never False. Does IO (API
//! server, moto, fault proxy).
//!
//! Karpenter's state is written by hand here, not produced by the lab's real controller: moto has
//! no Pod Identity; the gap proxy serves the associations from test data.

use anyhow::Result;
use k8s_openapi::api::core::v1::ServiceAccount;
use karpenter_health_api::{ConditionType, Reason};
use karpenter_health_e2e::aws_seed::partition_and_account;
use karpenter_health_e2e::fault_proxy::{FaultProxy, PodIdentityAssociation};
use karpenter_health_e2e::fixture::{Fixture, REFRESH};
use karpenter_health_e2e::status_log::StatusLog;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cni_role_from_pod_identity_is_honoured_and_an_unreadable_association_is_never_false()
-> Result<()> {
    let fx = Fixture::seed("podid", "ca-central-1", "1.8.6").await?;
    let service_accounts: Api<ServiceAccount> = Api::namespaced(fx.admin.clone(), "kube-system");
    let outcome: Result<()> = async {
        let proxy = FaultProxy::start(fx.bed.moto_url()?).await?;
        let operator = fx.start_operator(Some(&proxy.url()), true).await?;
        fx.wait_healthy("before the CNI moves to Pod Identity")
            .await?;

        // The CNI's ServiceAccount without an IRSA annotation, and the node role without the CNI
        // policy: as a cluster set up with Pod Identity looks. moto has no Pod Identity API (its
        // 404 is "unsupported"), so the association is unknown: never a False.
        let aws_node: ServiceAccount = serde_json::from_value(
            json!({"metadata": {"name": "aws-node", "namespace": "kube-system"}}),
        )?;
        service_accounts
            .create(&PostParams::default(), &aws_node)
            .await?;
        let log = StatusLog::start(&fx.admin, &fx.name);
        fx.aws
            .detach_policy(&fx.node_role_arn, "AmazonEKS_CNI_Policy")
            .await?;
        let status = fx
            .wait_status(
                "NodeRoleReady Unknown: the association is unreadable",
                |s| {
                    s.condition(ConditionType::NodeRoleReady)
                        .is_some_and(|c| c.status == "Unknown" && c.reason == "AwsUnsupported")
                },
            )
            .await?;
        let message = &status
            .condition(ConditionType::NodeRoleReady)
            .expect("NodeRoleReady")
            .message;
        assert!(message.contains("Pod Identity"), "{message}");
        tokio::time::sleep(REFRESH * 2).await;
        for held in log.stop().await {
            let node_role = held.condition(ConditionType::NodeRoleReady);
            assert!(
                node_role.is_none_or(|c| c.status != "False"),
                "False while the association was unreadable: {node_role:?}"
            );
        }

        // EKS answers: no association. Now the missing policy is proven.
        proxy.set_pod_identity(&fx.cluster, Vec::new());
        fx.wait_failed(&[(
            ConditionType::NodeRoleReady,
            Reason::NodeRoleMissingPolicies,
        )])
        .await?;

        // The CNI gets its own role through Pod Identity: the node role needs no CNI policy.
        proxy.set_pod_identity(
            &fx.cluster,
            vec![PodIdentityAssociation {
                namespace: "kube-system".into(),
                service_account: "aws-node".into(),
                id: "a-0123456789".into(),
                role_arn: {
                    let (partition, account) = partition_and_account(&fx.node_role_arn);
                    format!(
                        "arn:{partition}:iam::{account}:role/AmazonEKSPodIdentityAmazonVPCCNIRole"
                    )
                },
                target_role_arn: None,
            }],
        );
        fx.wait_healthy("once the CNI has its Pod Identity role")
            .await?;
        assert!(
            proxy.count("eks", "DescribePodIdentityAssociation") > 0,
            "the association's role was read"
        );
        operator.stop().await
    }
    .await;
    let cleanup = service_accounts
        .delete("aws-node", &DeleteParams::default())
        .await;
    let outcome = match cleanup {
        Ok(_) | Err(kube::Error::Api(_)) => outcome,
        Err(e) => outcome.and(Err(e.into())),
    };
    fx.finish(outcome).await
}
