//! The EKS port over the AWS SDK client. Does IO (every method is one EKS request).

use super::{SdkPorts, missing, next_page, text};
use crate::classify::classify;
use crate::ports::{EksApi, Page, PodIdentityRoles, PortResult, Service, ServiceAccountRef};
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::{AccessEntryFacts, EksClusterFacts};

impl EksApi for SdkPorts {
    fn describe_cluster<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<EksClusterFacts>> {
        async move {
            let out = self
                .eks
                .describe_cluster()
                .name(name)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            let c = out
                .cluster()
                .ok_or_else(|| missing(Service::Eks, "cluster"))?;
            Ok(EksClusterFacts {
                name: c.name().unwrap_or(name).to_owned(),
                vpc_id: c
                    .resources_vpc_config()
                    .and_then(|v| v.vpc_id())
                    .map(str::to_owned),
                authentication_mode: c
                    .access_config()
                    .and_then(|a| a.authentication_mode())
                    .map(|m| m.as_str().to_owned()),
                oidc_issuer: c
                    .identity()
                    .and_then(|i| i.oidc())
                    .and_then(|o| o.issuer())
                    .map(str::to_owned),
                version: c.version().map(str::to_owned),
                subnet_ids: c
                    .resources_vpc_config()
                    .map(|v| v.subnet_ids().to_vec())
                    .unwrap_or_default(),
                ip_family: c
                    .kubernetes_network_config()
                    .and_then(|n| n.ip_family())
                    .map(|f| f.as_str().to_owned()),
            })
        }
        .boxed()
    }

    fn list_access_entries<'a>(
        &'a self,
        cluster: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        async move {
            let out = self
                .eks
                .list_access_entries()
                .cluster_name(cluster)
                .max_results(100)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            Ok(Page {
                items: out.access_entries().to_vec(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_access_entry<'a>(
        &'a self,
        cluster: &'a str,
        principal_arn: &'a str,
    ) -> BoxFuture<'a, PortResult<AccessEntryFacts>> {
        async move {
            let out = self
                .eks
                .describe_access_entry()
                .cluster_name(cluster)
                .principal_arn(principal_arn)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            let e = out
                .access_entry()
                .ok_or_else(|| missing(Service::Eks, "accessEntry"))?;
            Ok(AccessEntryFacts {
                principal_arn: e.principal_arn().unwrap_or(principal_arn).to_owned(),
                type_: text(e.r#type()),
                username: e.username().map(str::to_owned),
            })
        }
        .boxed()
    }

    fn list_pod_identity_associations<'a>(
        &'a self,
        cluster: &'a str,
        service_account: &'a ServiceAccountRef,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        async move {
            let out = self
                .eks
                .list_pod_identity_associations()
                .cluster_name(cluster)
                .namespace(&service_account.namespace)
                .service_account(&service_account.name)
                .max_results(100)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            Ok(Page {
                items: out
                    .associations()
                    .iter()
                    .filter_map(|a| a.association_id().map(str::to_owned))
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_pod_identity_association<'a>(
        &'a self,
        cluster: &'a str,
        association_id: &'a str,
    ) -> BoxFuture<'a, PortResult<PodIdentityRoles>> {
        async move {
            let out = self
                .eks
                .describe_pod_identity_association()
                .cluster_name(cluster)
                .association_id(association_id)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            let association = out.association();
            let role_arn = association
                .and_then(|a| a.role_arn())
                .map(str::to_owned)
                .ok_or_else(|| missing(Service::Eks, "association.roleArn"))?;
            Ok(PodIdentityRoles {
                role_arn,
                target_role_arn: association
                    .and_then(|a| a.target_role_arn())
                    .filter(|t| !t.is_empty())
                    .map(str::to_owned),
            })
        }
        .boxed()
    }
}
