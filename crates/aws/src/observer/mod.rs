//! The facade: turns one EC2NodeClass's [`AwsRequest`] into [`AwsFacts`], reading through the
//! shared caches, the rate limiters and the ports. Does IO (through the ports).
//!
//! It never fails: every call that does not succeed becomes `Observed::Unknown` with a cause and
//! a detail naming the call; `Absent` only comes from an answer that proves absence.
//!
//! This module holds the orchestration; the reads live in one module per AWS service (`iam`,
//! `eks`, `ec2`, `sts`), so a new service is a new module and a few lines in
//! [`AwsObserver::observe_detailed`].

mod amis;
mod catalog;
mod construct;
mod controller;
mod ec2;
mod eks;
mod iam;
mod interruption;
mod network;
mod options;
mod pod_identity;
mod quotas;
mod request;
mod revalidate;
mod shared;
mod sts;
mod volumes;

pub use controller::simulations;
pub use ec2::{instance_filters, security_group_filters};
pub use network::SubnetQuery;
pub use options::{Families, ObserverOptions};
pub use request::{AwsObservation, AwsRequest, ControllerRequest, StaleFact};
pub use revalidate::REVALIDATE_MIN_AGE;

use crate::cache::{Cache, Changed, Changes, Read};
use crate::limits::Limiters;
use crate::metrics::{CallStats, Counters};
pub use crate::ports::ServiceAccountRef;
use crate::ports::{
    Ec2Api, EksApi, EventsApi, IamApi, KmsApi, PodIdentityRoles, QuotasApi, RoleData, Simulation,
    SqsApi, SsmApi, StsApi,
};
use futures::future::{BoxFuture, join_all};
use futures::stream::BoxStream;
use futures::{FutureExt, join};
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, AwsFacts, EksClusterFacts, InstanceFacts, InstanceProfileFacts,
    Observed, QueueFacts, SecurityGroupFacts, SimulatedDecision, Unobserved,
};
use shared::{good, no_cluster};
use std::sync::Arc;
use std::time::Duration;

/// The port the operator holds, so tests can substitute a fake.
pub trait AwsFactsSource: Send + Sync {
    fn observe<'a>(&'a self, request: &'a AwsRequest) -> BoxFuture<'a, AwsFacts>;

    /// Whom each changed answer concerns, when the source refreshes answers on its own.
    fn changes(&self) -> Option<BoxStream<'static, Changed>> {
        None
    }

    /// Evidence that `reader`'s answers may be out of date: refresh them soon.
    fn revalidate(&self, _reader: &str) {}
}

/// The AWS facts adapter: caches, limits and counters shared by all EC2NodeClasses. Cheap to
/// clone.
#[derive(Clone, Debug)]
pub struct AwsObserver {
    inner: Arc<Inner>,
}

struct Inner {
    iam: Arc<dyn IamApi>,
    ec2: Arc<dyn Ec2Api>,
    eks: Arc<dyn EksApi>,
    sts: Arc<dyn StsApi>,
    sqs: Arc<dyn SqsApi>,
    events: Arc<dyn EventsApi>,
    kms: Arc<dyn KmsApi>,
    quotas: Arc<dyn QuotasApi>,
    ssm: Arc<dyn SsmApi>,
    region: Option<String>,
    options: ObserverOptions,
    limiters: Limiters,
    counters: Counters,
    account: Cache<(), AccountFacts>,
    profiles: Cache<String, InstanceProfileFacts>,
    roles: Cache<String, RoleData>,
    attached: Cache<String, Vec<String>>,
    clusters: Cache<String, EksClusterFacts>,
    /// Keyed by (cluster, node role ARN): ListAccessEntries then DescribeAccessEntry.
    access: Cache<(String, String), Vec<AccessEntryFacts>>,
    /// Keyed by (cluster, ServiceAccount): the role of its Pod Identity association, if any.
    pod_identity: Cache<(String, ServiceAccountRef), Option<PodIdentityRoles>>,
    security_groups: Cache<SelectorTerm, Vec<SecurityGroupFacts>>,
    instances: Cache<String, Vec<InstanceFacts>>,
    oidc_providers: Cache<(), Vec<String>>,
    simulations: Cache<Simulation, Vec<SimulatedDecision>>,
    /// The simulations asked lately, newest last: a class whose question differs from one of
    /// them only in values the role's policies cannot tell apart shares its answer
    /// (`controller.rs`).
    asked: std::sync::Mutex<std::collections::VecDeque<Simulation>>,
    /// Inline policy documents by role name.
    inline_policies: Cache<String, Vec<karpenter_health_checks::facts::PolicyDocument>>,
    /// Default-version documents by managed policy ARN.
    managed_policies: Cache<String, String>,
    queues: Cache<String, QueueFacts>,
    subnets: Cache<network::SubnetQuery, Vec<karpenter_health_checks::facts::SubnetFacts>>,
    /// Per VPC id (issue 12): shared by every class whose subnets are in the VPC.
    /// Keyed by (VPC, the sorted subnets asked about): see `network.rs`.
    route_tables:
        Cache<(String, Vec<String>), Vec<karpenter_health_checks::facts::RouteTableFacts>>,
    nat_gateways: Cache<String, Vec<karpenter_health_checks::facts::NatGatewayFacts>>,
    vpc_endpoints: Cache<String, Vec<karpenter_health_checks::facts::VpcEndpointFacts>>,
    vpc_attributes: Cache<(String, crate::ports::VpcAttribute), bool>,
    ebs_by_default: Cache<(), bool>,
    ebs_default_key: Cache<(), String>,
    /// By the reference the volumes use (id, ARN, alias).
    kms_keys: Cache<String, karpenter_health_checks::facts::KmsKeyFacts>,
    /// By (key ARN, grantee).
    kms_grants: Cache<(String, String), Vec<karpenter_health_checks::facts::KmsGrantFacts>>,
    /// The region's instance types and their zones (`catalog.rs`): one key each.
    instance_types: Cache<(), catalog::Types>,
    instance_type_zones: Cache<(), catalog::Offerings>,
    /// NodePool verdicts on the current catalog, with its two answers (`catalog.rs`).
    judged_memo: std::sync::Mutex<Option<catalog::JudgedMemo>>,
    /// Service Quotas values by quota code (`quotas.rs`), in the account family.
    service_quotas: Cache<&'static str, f64>,
    /// SSM parameter values by name (`amis.rs`), in the catalog family.
    ssm_parameters: Cache<String, String>,
    /// The account's active open capacity reservations (`ec2.rs`), in the account family.
    open_reservations: Cache<(), Vec<karpenter_health_checks::facts::CapacityReservationFacts>>,
    /// The images of a class, by their sorted ids (`amis.rs`), in the account family.
    images: Cache<Vec<String>, Vec<karpenter_health_checks::facts::ImageFacts>>,
    /// Every cache's changed answers.
    changes: Arc<Changes>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsObserver")
            .field("region", &self.region)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

impl AwsObserver {
    /// Whom each changed AWS answer concerns, from now on: the EC2NodeClasses that read the
    /// answer before (through [`crate::cache::read_as`]).
    pub fn changes(&self) -> BoxStream<'static, Changed> {
        self.inner.changes.subscribe()
    }

    /// The facts for one EC2NodeClass.
    pub async fn observe(&self, request: &AwsRequest) -> AwsFacts {
        self.observe_detailed(request).await.facts
    }

    /// Counters of the calls made so far.
    pub fn call_stats(&self) -> CallStats {
        self.inner.counters.snapshot()
    }

    /// The facts, the last good answers and which facts are stale.
    pub async fn observe_detailed(&self, request: &AwsRequest) -> AwsObservation {
        let inner = &self.inner;
        let cluster = request.cluster_name.as_deref().filter(|c| !c.is_empty());
        let spec_role = request.role.as_deref().filter(|r| !r.is_empty());
        let role_chain = async {
            let profile = async {
                match request
                    .instance_profile
                    .as_deref()
                    .filter(|p| !p.is_empty())
                {
                    Some(name) => Some(self.instance_profile(name).await),
                    None => None,
                }
            };
            match spec_role {
                // The role is named: no need to wait for the profile.
                Some(role) => join!(profile, self.node_role(Some(role), None)),
                None => {
                    let profile = profile.await;
                    let role = self.node_role(None, profile.as_ref()).await;
                    (profile, role)
                }
            }
        };
        let cluster_read = async {
            match cluster {
                Some(c) => Some(self.eks_cluster(c).await),
                None => None,
            }
        };
        let instances_read = async {
            match cluster {
                Some(c) => Some(self.instances(c).await),
                None => None,
            }
        };
        let (account, (profile, role), eks, sgs, instances, subnets) = join!(
            self.account(),
            role_chain,
            cluster_read,
            self.security_groups(&request.security_group_selector_terms),
            instances_read,
            self.subnets(&request.subnet_ids, &request.subnet_selector_terms),
        );
        // Where nodes land (issue 12): the cluster's VPC and the network of each VPC the class's
        // subnets are in, read once per VPC whatever the number of classes.
        let mut vpcs: std::collections::BTreeMap<String, Vec<String>> = Default::default();
        for subnet in subnets.current.found().into_iter().flatten() {
            vpcs.entry(subnet.vpc_id.clone())
                .or_default()
                .push(subnet.id.clone());
        }
        let (cluster_vpc, networks) = join!(
            self.cluster_vpc(eks.as_ref()),
            join_all(vpcs.into_iter().map(|(vpc, mut ids)| async move {
                ids.sort();
                let network = self.vpc_network(&vpc, ids).await;
                (vpc, Observed::Found(network))
            }))
        );
        let eks_read = eks.as_ref();
        let pod_identity_reads = request
            .pod_identity_service_accounts
            .iter()
            .map(|sa| async move { (sa, self.pod_identity_role(cluster, eks_read, sa).await) });
        let (access, pod_identity) = join!(
            self.access_entries(cluster, eks.as_ref(), &role),
            join_all(pod_identity_reads)
        );

        // The controller's wiring (issue 11): its role comes from IRSA or from the Pod Identity
        // association just read; the permission questions need the account and the node role.
        let controller_role_arn = request.controller.as_ref().and_then(|c| {
            c.irsa_role_arn.clone().or_else(|| {
                let sa = c.service_account.as_ref()?;
                pod_identity
                    .iter()
                    .find(|(asked, _)| *asked == sa)
                    .and_then(|(_, read)| read.as_ref()?.current.found().cloned().flatten())
                    .map(|roles| roles.effective().to_owned())
            })
        });
        let wants_irsa = request
            .controller
            .as_ref()
            .is_some_and(|c| c.irsa_role_arn.is_some());
        let inputs = || -> Result<_, Unobserved> {
            let class = request
                .controller
                .as_ref()
                .and_then(|c| c.class.clone())
                .ok_or_else(|| unobserved("Karpenter's cluster name is not known"))?;
            let account = match &account.current {
                Observed::Found(a) => a,
                Observed::Unknown(u) => return Err(shared::because("account not read", u)),
                Observed::Absent => return Err(unobserved("the AWS account is not known")),
            };
            let region = inner
                .region
                .as_deref()
                .ok_or_else(|| unobserved("the AWS region is not known"))?;
            let node_role = match role.current() {
                Some(Observed::Found(r)) => r.arn,
                Some(Observed::Unknown(u)) => {
                    return Err(shared::because("node role not read", &u));
                }
                _ => return Err(unobserved("the node role is not known in IAM")),
            };
            // The minor the alias's parameters are read for (`amis.rs`), which names the
            // parameter the controller must be allowed to read.
            let minor = amis::kubernetes_minor(
                eks.as_ref().map(|r| &r.current),
                request.apiserver_version.as_deref(),
            )
            .ok()
            .flatten();
            Ok(class.complete(
                &account.partition,
                &account.account_id,
                region,
                &node_role,
                minor.as_deref(),
            ))
        };
        let controller_read = async {
            match controller_role_arn.as_deref() {
                Some(arn) => {
                    let own = account.current.found().map(|a| a.account_id.as_str());
                    Some(self.controller(arn, own, inputs()).await)
                }
                None => None,
            }
        };
        let oidc_read = async {
            if wants_irsa {
                Some(self.oidc_providers().await)
            } else {
                None
            }
        };
        let queue_read = async {
            match request
                .interruption_queue
                .as_deref()
                .filter(|q| !q.is_empty())
            {
                Some(name) => Some(self.interruption_queue(name).await),
                None => None,
            }
        };
        let slr_read = async {
            if request.spot_service_linked_role {
                Some(
                    self.role(karpenter_health_checks::plan::request::SPOT_SERVICE_LINKED_ROLE)
                        .await,
                )
            } else {
                None
            }
        };
        let volumes_read = async {
            match &request.volume_keys {
                Some(keys) => Some(self.volumes(keys, controller_role_arn.as_deref()).await),
                None => None,
            }
        };
        let catalog_read: futures::future::OptionFuture<_> = request
            .instance_types
            .then_some(async {
                join!(
                    self.instance_catalog(),
                    self.vcpu_quotas(),
                    self.open_capacity_reservations()
                )
            })
            .into();
        let amis_read: futures::future::OptionFuture<_> = request
            .ami_alias
            .as_deref()
            .map(|alias| {
                self.ami_parameters(
                    alias,
                    eks.as_ref().map(|r| &r.current),
                    request.apiserver_version.as_deref(),
                )
            })
            .into();
        let images_read: futures::future::OptionFuture<_> = (!request.image_ids.is_empty())
            .then(|| self.images(&request.image_ids))
            .into();
        let (controller, oidc, queue, slr, volumes, catalog_and_quotas, amis, images) = join!(
            controller_read,
            oidc_read,
            queue_read,
            slr_read,
            volumes_read,
            catalog_read,
            amis_read,
            images_read
        );
        let (catalog, quotas, reservations) = match catalog_and_quotas {
            Some((catalog, quotas, reservations)) => {
                (Some(catalog), Some(quotas), Some(reservations))
            }
            None => (None, None, None),
        };

        let mut stale = Vec::new();
        let mut note = |fact: &'static str, age: Option<Duration>| {
            if let Some(age) = age {
                stale.push(StaleFact { fact, age });
            }
        };
        note("account", account.stale_age());
        note(
            "instance_profile",
            profile.as_ref().and_then(Read::stale_age),
        );
        note(
            "node_role",
            role.role.as_ref().and_then(|r| r.role.stale_age()),
        );
        note(
            "node_role.attached_policy_arns",
            role.role.as_ref().and_then(|r| r.attached.stale_age()),
        );
        note("eks_cluster", eks.as_ref().and_then(Read::stale_age));
        note(
            "node_role_access_entries",
            access.as_ref().and_then(Read::stale_age),
        );
        for (_, read) in &pod_identity {
            note(
                "pod_identity_roles",
                read.as_ref().and_then(Read::stale_age),
            );
        }
        note("security_groups", sgs.stale_age());
        note("subnets", subnets.stale_age());
        note(
            "controller_role",
            controller.as_ref().and_then(|c| c.role.stale_age()),
        );
        note(
            "interruption_queue",
            queue.as_ref().and_then(Read::stale_age),
        );
        note(
            "cluster_instances",
            instances.as_ref().and_then(Read::stale_age),
        );
        note("instance_types", catalog.as_ref().and_then(Read::stale_age));
        note(
            "open_capacity_reservations",
            reservations.as_ref().and_then(Read::stale_age),
        );
        note(
            "ami_parameters",
            amis.as_ref().and_then(amis::AmiReads::stale_age),
        );
        note("images", images.as_ref().and_then(Read::stale_age));
        if let Some(v) = &volumes {
            note("ebs_encryption", v.ebs.as_ref().and_then(Read::stale_age));
            for read in v.keys.values() {
                note("kms_keys", read.stale_age());
            }
        }

        let current_pod_identity =
            pod_identity::pod_identity_facts(pod_identity.iter().map(|(sa, read)| {
                let current = read.as_ref().map_or_else(no_cluster, |r| r.current.clone());
                (sa.to_string(), current)
            }));
        let good_pod_identity =
            pod_identity::pod_identity_facts(pod_identity.iter().map(|(sa, read)| {
                (
                    sa.to_string(),
                    read.as_ref().and_then(good).unwrap_or_default(),
                )
            }));
        let facts = AwsFacts {
            region: inner.region.clone(),
            account: account.current.clone(),
            instance_profile: profile.as_ref().map(|p| p.current.clone()),
            node_role: role.current(),
            eks_cluster: eks.as_ref().map_or_else(no_cluster, |r| r.current.clone()),
            node_role_access_entries: match (&access, &role.access_blocked) {
                (Some(r), _) => r.current.clone(),
                (None, Some(why)) => why.clone(),
                (None, None) => no_cluster(),
            },
            pod_identity_roles: current_pod_identity.0,
            pod_identity_via: current_pod_identity.1,
            security_groups: sgs.current.clone(),
            cluster_instances: instances
                .as_ref()
                .map_or_else(no_cluster, |r| r.current.clone()),
            controller_role: controller
                .as_ref()
                .map(|c| c.role.current.as_ref().map(controller::role_facts)),
            oidc_providers: oidc
                .as_ref()
                .map_or_else(|| shared::not_observed("not asked"), |r| r.current.clone()),
            controller_permissions: controller.as_ref().and_then(|c| c.permissions.clone()),
            interruption_queue: queue.as_ref().map(|r| r.current.clone()),
            spot_service_linked_role: slr.as_ref().map(|r| r.current.clone().map(|role| role.arn)),
            cluster_vpc: cluster_vpc.clone(),
            subnets: subnets.current.clone(),
            vpc_networks: networks.iter().cloned().collect(),
            instance_types: catalog.as_ref().map(|r| r.current.clone()),
            vcpu_quotas: quotas.as_ref().map(|q| q.current()),
            ami_parameters: amis.as_ref().map(amis::AmiReads::current),
            open_capacity_reservations: reservations.as_ref().map(|r| r.current.clone()),
            images: images.as_ref().map(|r| r.current.clone()),
            ebs_encryption: volumes
                .as_ref()
                .and_then(|v| v.ebs.as_ref().map(|r| r.current.clone())),
            kms_keys: volumes
                .as_ref()
                .map(|v| {
                    v.keys
                        .iter()
                        .map(|(k, r)| (k.clone(), r.current.clone()))
                        .collect()
                })
                .unwrap_or_default(),
        };
        let last_good = AwsFacts {
            region: inner.region.clone(),
            account: good(&account).unwrap_or_default(),
            instance_profile: profile.as_ref().map(|p| good(p).unwrap_or_default()),
            node_role: role.last_good(),
            eks_cluster: eks.as_ref().and_then(good).unwrap_or_default(),
            node_role_access_entries: access.as_ref().and_then(good).unwrap_or_default(),
            pod_identity_roles: good_pod_identity.0,
            pod_identity_via: good_pod_identity.1,
            security_groups: good(&sgs).unwrap_or_default(),
            cluster_instances: instances.as_ref().and_then(good).unwrap_or_default(),
            controller_role: controller.as_ref().map(|c| {
                good(&c.role)
                    .unwrap_or_default()
                    .map(|r| controller::role_facts(&r))
            }),
            oidc_providers: oidc.as_ref().and_then(good).unwrap_or_default(),
            controller_permissions: controller.as_ref().and_then(|c| c.permissions.clone()),
            interruption_queue: queue.as_ref().map(|r| good(r).unwrap_or_default()),
            spot_service_linked_role: slr
                .as_ref()
                .map(|r| good(r).unwrap_or_default().map(|role| role.arn)),
            cluster_vpc: match cluster_vpc {
                Observed::Unknown(_) => Observed::default(),
                known => known,
            },
            subnets: good(&subnets).unwrap_or_default(),
            vpc_networks: networks.into_iter().collect(),
            instance_types: catalog.as_ref().map(|r| good(r).unwrap_or_default()),
            vcpu_quotas: quotas.as_ref().map(|q| q.last_good()),
            ami_parameters: amis.as_ref().map(amis::AmiReads::last_good),
            open_capacity_reservations: reservations.as_ref().map(|r| good(r).unwrap_or_default()),
            images: images.as_ref().map(|r| good(r).unwrap_or_default()),
            ebs_encryption: volumes
                .as_ref()
                .and_then(|v| v.ebs.as_ref().map(|r| good(r).unwrap_or_default())),
            kms_keys: volumes
                .as_ref()
                .map(|v| {
                    v.keys
                        .iter()
                        .map(|(k, r)| (k.clone(), good(r).unwrap_or_default()))
                        .collect()
                })
                .unwrap_or_default(),
        };
        AwsObservation {
            facts,
            last_good,
            stale,
        }
    }
}

fn unobserved(detail: &str) -> Unobserved {
    Unobserved {
        cause: karpenter_health_checks::facts::UnknownCause::NotObserved,
        detail: detail.to_owned(),
    }
}

impl AwsFactsSource for AwsObserver {
    fn observe<'a>(&'a self, request: &'a AwsRequest) -> BoxFuture<'a, AwsFacts> {
        AwsObserver::observe(self, request).boxed()
    }

    fn changes(&self) -> Option<BoxStream<'static, Changed>> {
        Some(AwsObserver::changes(self))
    }

    fn revalidate(&self, reader: &str) {
        let made_due = AwsObserver::revalidate(self, reader);
        tracing::debug!(
            node_class = reader,
            made_due,
            "AWS answers revalidated on evidence"
        );
    }
}
