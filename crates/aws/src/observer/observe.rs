//! The observer's entry point: a join over the providers of the fact list (`facts.rs`), in four
//! stages, each started once the answers it needs are in. Does IO (through the providers).
//!
//! The stages, and the order of the reads within each, are those the facts depend on: the
//! cluster and the node role before the access entries, the Pod Identity associations before the
//! controller's role, and so on. The providers of `providers/` all read in the last stage, from
//! the request and the earlier answers; a provider that later reads depend on goes into the first
//! stage that has every answer it needs.

use super::controller::{EarlierAnswers, controller_role_arn};
use super::fact_read::AsIs;
use super::facts::FactReads;
use super::providers::Reads;
use super::{AwsObserver, AwsRequest};
use futures::join;

impl AwsObserver {
    /// What every provider reads for one EC2NodeClass.
    pub(super) async fn read_facts(&self, request: &AwsRequest) -> FactReads {
        let cluster = request.cluster_name.as_deref().filter(|c| !c.is_empty());
        // Stage 1: what the request alone decides (the node role may wait for the profile).
        let (
            account,
            (instance_profile, node_role),
            eks_cluster,
            security_groups,
            cluster_instances,
            subnets,
        ) = join!(
            self.account(),
            self.node_identity(request),
            self.eks_cluster_fact(cluster),
            self.security_groups(&request.security_group_selector_terms),
            self.cluster_instances(cluster),
            self.subnets(&request.subnet_ids, &request.subnet_selector_terms),
        );
        let eks = eks_cluster.read();
        // Stage 2: where nodes land (issue 12), from the cluster and the subnets.
        let (cluster_vpc, vpc_networks) = join!(self.cluster_vpc(eks), self.vpc_networks(&subnets));
        // Stage 3: what needs the cluster and the node role.
        let (node_role_access_entries, (pod_identity_roles, pod_identity_via)) = join!(
            self.node_role_access_entries(cluster, eks, &node_role),
            self.pod_identities(request, cluster, eks),
        );
        // Stage 4: the controller's wiring (issue 11), whose role comes from IRSA or from the
        // Pod Identity association just read, and the reads that wait for nothing but are asked
        // along with it.
        let controller_arn = controller_role_arn(request, &pod_identity_roles);
        let earlier = EarlierAnswers {
            account: &account,
            node_role: &node_role,
            eks,
        };
        let (
            (controller_role, controller_permissions),
            oidc_providers,
            interruption_queue,
            (ebs_encryption, kms_keys),
            instance_types,
            vcpu_quotas,
            ami_parameters,
            providers,
        ) = join!(
            self.controller_facts(request, controller_arn.as_deref(), earlier),
            self.oidc_providers_fact(request),
            self.interruption_queue_fact(request),
            self.volume_facts(request, controller_arn.as_deref()),
            self.instance_types_fact(request),
            self.vcpu_quotas_fact(request),
            self.ami_parameters_fact(request, eks),
            Reads::read(self, request, earlier, &self.inner.providers),
        );
        FactReads {
            region: AsIs(self.inner.region.clone()),
            account,
            instance_profile,
            node_role,
            eks_cluster,
            node_role_access_entries,
            pod_identity_roles,
            pod_identity_via,
            security_groups,
            subnets,
            controller_role,
            controller_permissions,
            oidc_providers,
            interruption_queue,
            cluster_instances,
            cluster_vpc,
            vpc_networks,
            instance_types,
            vcpu_quotas,
            ami_parameters,
            ebs_encryption,
            kms_keys,
            providers,
        }
    }
}
