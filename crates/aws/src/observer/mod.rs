//! The facade: turns one EC2NodeClass's [`AwsRequest`] into [`AwsFacts`], reading through the
//! shared caches, the rate limiters and the ports. Does IO (through the ports).
//!
//! It never fails: every call that does not succeed becomes `Observed::Unknown` with a cause and
//! a detail naming the call; `Absent` only comes from an answer that proves absence.
//!
//! This module holds the adapter's state; the providers (one per fact) live in one module per
//! AWS service (`iam`, `eks`, `ec2`, `sts`, ...), the list of facts in `facts.rs` (which says how
//! to add one) and the join over the providers in `observe.rs`.

mod amis;
mod catalog;
mod construct;
mod controller;
mod ec2;
mod eks;
mod fact_read;
mod facts;
mod iam;
mod interruption;
mod network;
mod observe;
mod options;
mod pod_identity;
mod providers;
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

use crate::cache::{Cache, Changed, Changes};
use crate::limits::Limiters;
use crate::metrics::{CallStats, Counters};
pub use crate::ports::ServiceAccountRef;
use crate::ports::{
    Ec2Api, EksApi, EventsApi, IamApi, KmsApi, PodIdentityRoles, QuotasApi, RoleData, Simulation,
    SqsApi, SsmApi, StsApi,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, AwsFacts, EksClusterFacts, InstanceFacts, InstanceProfileFacts,
    QueueFacts, SecurityGroupFacts, SimulatedDecision,
};
use std::sync::Arc;

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
    /// (`controller/simulation.rs`).
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
    /// The caches of the providers of `providers/`, each declared by its file.
    providers: providers::Caches,
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
        let reads = self.read_facts(request).await;
        AwsObservation {
            facts: reads.current(),
            last_good: reads.last_good(),
            stale: reads.stale(),
        }
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
