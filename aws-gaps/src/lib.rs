//! A fault-injecting HTTP proxy between the AWS SDK and moto: on demand it answers AWS throttling,
//! 500s and access-denied errors in each protocol's own shape, hangs, or resets the connection;
//! it can serve EKS access entries and Pod Identity associations (which moto lacks) from test
//! data, IAM's policy simulator from the roles' policies in moto, and the public SSM parameters of
//! EKS-optimized images and their images; it pages instance types as EC2 does, refuses the launch
//! parameters EC2 refuses and moto takes; and it counts requests by service and operation and
//! keeps the slowest answer of each. Does IO (listens on loopback, forwards to the upstream).
//!
//! One proxy per test keeps faults and counts private to that test. How requests and errors look
//! on the wire is in [`aws_wire`].

mod answer;
mod aws_wire;
pub mod capacity_reservations;
mod catalogue;
mod faults;
mod fleet_errors;
mod images;
mod launch_parameters;
mod offerings;
mod paging;
pub mod public_parameters;
mod simulator;
mod upstream;
pub mod vcpu_quotas;

use answer::handle;
use anyhow::Result;
use aws_wire::{Call, access_entries, aws_error, identify, pod_identity_associations};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

/// What the proxy does instead of forwarding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The service's throttling error: IAM/STS `Throttling` (400), EC2 `RequestLimitExceeded`
    /// (503), EKS `ThrottlingException` (429).
    Throttle,
    /// The service's internal error: IAM `ServiceFailure`, STS `InternalFailure`, EC2
    /// `InternalError`, EKS `ServerException`, all HTTP 500.
    ServerError,
    /// IAM/STS `AccessDenied`, EC2 `UnauthorizedOperation`, EKS `AccessDeniedException` (403).
    AccessDenied,
    /// Never answers (until the proxy stops).
    Hang,
    /// Resets the TCP connection (RST) without answering.
    Reset,
}

/// An EKS access entry the proxy serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AccessEntry {
    pub principal_arn: String,
    /// `STANDARD`, `EC2_LINUX`, ...
    pub type_: String,
    pub username: Option<String>,
}

/// An EKS Pod Identity association the proxy serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodIdentityAssociation {
    pub namespace: String,
    pub service_account: String,
    pub id: String,
    pub role_arn: String,
    /// The role EKS assumes with `role_arn` for the Pods (cross-account Pod Identity), if any.
    pub target_role_arn: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    rules: Vec<Rule>,
    access_entries: BTreeMap<String, Vec<AccessEntry>>,
    pod_identity: BTreeMap<String, Vec<PodIdentityAssociation>>,
    authentication_modes: BTreeMap<String, String>,
    cluster_vpcs: BTreeMap<String, String>,
    counts: BTreeMap<(String, String), usize>,
    /// The longest time each (service, operation) took to answer, what the proxy adds included.
    slowest: BTreeMap<(String, String), Duration>,
    /// Calls moto could not serve (it answers 5xx, or 4xx naming something it does not
    /// implement), by (service, operation): how many, and the last status.
    unserved: BTreeMap<(String, String), (usize, u16)>,
    /// Serve IAM SimulatePrincipalPolicy (moto has none).
    simulator: bool,
    /// The service control policies (JSON documents) the simulator applies; none: the account
    /// is in no organization.
    service_control_policies: Vec<String>,
    /// What EC2 GetEbsDefaultKmsKeyId answers (moto has none); `None`: the AWS-managed
    /// `alias/aws/ebs` of the request's region, as for an account that never changed it.
    ebs_default_kms_key: Option<String>,
    /// What Service Quotas GetServiceQuota answers for service `ec2`, by quota code (moto knows
    /// the `vpc` service's quotas only); a code not here is forwarded to moto, which answers
    /// NoSuchResourceException.
    ec2_quotas: BTreeMap<String, f64>,
    /// The public SSM parameters AWS publishes under `/aws/service/` (the EKS-optimized image
    /// ids), by name: moto ships only a few families of them and refuses to create names under
    /// `/aws`. Starts with [`public_parameters::published`]; a name not here is forwarded to
    /// moto, which answers ParameterNotFound.
    public_parameters: BTreeMap<String, String>,
    /// The account's On-Demand Capacity Reservations (moto has none): DescribeCapacityReservations
    /// answers from them, filtered (`capacity_reservations.rs`).
    capacity_reservations: Vec<capacity_reservations::CapacityReservation>,
    /// When each image is deprecated (EnableImageDeprecation, which moto lacks), by image id:
    /// DescribeImages answers carry it (`images.rs`).
    image_deprecations: BTreeMap<String, String>,
    /// Images other accounts share with the bed's (moto shows none of another account's):
    /// DescribeImages answers that ask for them list them (`images.rs`).
    shared_images: Vec<images::SharedImage>,
    /// Full answers of the paged instance-type listings, served a page at a time (`paging.rs`).
    listings: paging::Listings,
    /// The instance types moto lists, by region (fixed data), for emulated offerings.
    catalogue_names: BTreeMap<String, Arc<Vec<String>>>,
    /// The caller held to an identity policy, if any (`simulator/enforce.rs`).
    enforced: Option<simulator::Enforced>,
    /// The (action, resource) pairs the enforced policy refused, in order.
    refused: Vec<(String, String)>,
    /// The launches refused as EC2 refuses what moto accepts (`launch_parameters.rs`), in order.
    launch_refusals: Vec<LaunchRefusal>,
}

/// A launch (a RunInstances, dry or not, or an instant CreateFleet) the proxy refused as EC2
/// does (`launch_parameters.rs`): the witness of a refusal Karpenter itself may only requeue on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LaunchRefusal {
    pub operation: String,
    pub code: String,
    pub message: String,
    /// A RunInstances with `DryRun=true` (Karpenter's validation).
    pub dry_run: bool,
}

/// The running proxy; stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<Mutex<State>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Dropping the accept loop drops its JoinSet, which aborts every connection (and hang).
        self.task.abort();
        // What the e2e timeouts are measured against (`e2e/measure-aws-latency.sh`).
        if let Some(path) = std::env::var_os("KH_AWS_LATENCY_LOG") {
            aws_wire::append_slowest(&path, &self.slowest());
        }
    }
}

fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

use faults::{ResetHandle, Rule, take_fault, with_reset_handle};
use upstream::{Upstream, forward};

impl FaultProxy {
    /// Starts a proxy on a free loopback port forwarding to `upstream` (`http://host:port`).
    pub async fn start(upstream: &str) -> Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(State {
            public_parameters: public_parameters::published(),
            ..State::default()
        }));
        let client: Upstream = Client::builder(TokioExecutor::new()).build_http();
        let upstream = upstream.trim_end_matches('/').to_owned();
        let task_state = state.clone();
        let task = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let Ok((stream, reset)) = with_reset_handle(stream) else {
                    continue;
                };
                let (state, client, upstream) =
                    (task_state.clone(), client.clone(), upstream.clone());
                let service = service_fn(move |req| {
                    handle(
                        state.clone(),
                        client.clone(),
                        upstream.clone(),
                        reset.clone(),
                        req,
                    )
                });
                connections.spawn(async move {
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(Self { addr, state, task })
    }

    /// The endpoint to give the SDK.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Every request to `service` (`iam`, `ec2`, `eks`, `sts`), or only to `operation`, gets
    /// `fault` until [`FaultProxy::clear_faults`].
    pub fn inject(&self, service: &str, operation: Option<&str>, fault: Fault) {
        self.push(service, operation, fault, None, 0);
    }

    /// Like [`FaultProxy::inject`] for the next `times` matching requests only.
    pub fn inject_times(&self, service: &str, operation: Option<&str>, fault: Fault, times: u32) {
        self.push(service, operation, fault, Some(times), 0);
    }

    /// Like [`FaultProxy::inject`] after letting `skip` matching requests through (e.g. fail the
    /// second page of a listing).
    pub fn inject_after(&self, service: &str, operation: Option<&str>, fault: Fault, skip: u32) {
        self.push(service, operation, fault, None, skip);
    }

    fn push(
        &self,
        service: &str,
        operation: Option<&str>,
        fault: Fault,
        remaining: Option<u32>,
        skip: u32,
    ) {
        lock(&self.state).rules.push(Rule {
            service: service.to_owned(),
            operation: operation.map(str::to_owned),
            fault,
            remaining,
            skip,
        });
    }

    pub fn clear_faults(&self) {
        lock(&self.state).rules.clear();
    }

    /// Serve ListAccessEntries / DescribeAccessEntry of `cluster` from `entries` (moto has none).
    pub fn set_access_entries(&self, cluster: &str, entries: Vec<AccessEntry>) {
        lock(&self.state)
            .access_entries
            .insert(cluster.to_owned(), entries);
    }

    /// Serve the Pod Identity associations of `cluster` from `associations` (moto has none).
    pub fn set_pod_identity(&self, cluster: &str, associations: Vec<PodIdentityAssociation>) {
        lock(&self.state)
            .pod_identity
            .insert(cluster.to_owned(), associations);
    }

    /// Make EC2 GetEbsDefaultKmsKeyId answer `key` (an ARN) instead of the aws/ebs alias.
    pub fn set_ebs_default_kms_key(&self, key: Option<&str>) {
        lock(&self.state).ebs_default_kms_key = key.map(str::to_owned);
    }

    /// Make Service Quotas GetServiceQuota answer `value` for EC2's quota `code` (`None`: no
    /// value, NoSuchResourceException as from an account without one).
    pub fn set_ec2_quota(&self, code: &str, value: Option<f64>) {
        let mut state = lock(&self.state);
        match value {
            Some(v) => state.ec2_quotas.insert(code.to_owned(), v),
            None => state.ec2_quotas.remove(code),
        };
    }

    /// Publish (`Some`) or withdraw (`None`) the public SSM parameter `name` (under
    /// `/aws/service/`), as AWS does when it releases an image for a Kubernetes version.
    pub fn set_public_parameter(&self, name: &str, value: Option<&str>) {
        let mut state = lock(&self.state);
        match value {
            Some(v) => state
                .public_parameters
                .insert(name.to_owned(), v.to_owned()),
            None => state.public_parameters.remove(name),
        };
    }

    /// The account's capacity reservations from now on (none at the start).
    pub fn set_capacity_reservations(
        &self,
        reservations: Vec<capacity_reservations::CapacityReservation>,
    ) {
        lock(&self.state).capacity_reservations = reservations;
    }

    /// Deprecate image `id` at `at` (RFC 3339), as EnableImageDeprecation does.
    pub fn deprecate_image(&self, id: &str, at: &str) {
        lock(&self.state)
            .image_deprecations
            .insert(id.to_owned(), at.to_owned());
    }

    /// Have account `owner` share its image `id`, named `name`, with the bed's account.
    pub fn share_image(&self, id: &str, owner: &str, name: &str) {
        lock(&self.state).shared_images.push(images::SharedImage {
            id: id.to_owned(),
            owner: owner.to_owned(),
            name: name.to_owned(),
            architecture: "x86_64".into(),
            public: false,
        });
    }

    /// Hold requests signed with `access_key` to the identity policy `document`, as IAM would:
    /// what it does not allow is refused with the service's access-denied error. `tags` are the
    /// caller's session tags (EKS Pod Identity's `eks-cluster-name`, ...), which fill the
    /// policy's `${aws:PrincipalTag/...}` variables. Fails on a policy the simulator cannot read.
    pub fn enforce_identity_policy(
        &self,
        access_key: &str,
        document: &str,
        tags: &BTreeMap<String, String>,
    ) -> Result<()> {
        let enforced =
            simulator::Enforced::new(access_key, document, tags).map_err(anyhow::Error::msg)?;
        let mut state = lock(&self.state);
        state.enforced = Some(enforced);
        state.refused.clear();
        Ok(())
    }

    /// The launches refused so far as EC2 refuses them (`launch_parameters.rs`), in order.
    pub fn launch_refusals(&self) -> Vec<LaunchRefusal> {
        lock(&self.state).launch_refusals.clone()
    }

    /// How many CreateFleet overrides were refused with the error `code` so far.
    pub fn fleets_refused(&self, code: &str) -> usize {
        lock(&self.state)
            .launch_refusals
            .iter()
            .filter(|r| r.operation == "CreateFleet" && r.code == code)
            .count()
    }

    /// What the enforced policy refused so far: (action, resource), in order.
    pub fn refused(&self) -> Vec<(String, String)> {
        lock(&self.state).refused.clone()
    }

    /// Serve IAM's SimulatePrincipalPolicy from the roles' policies in moto (which lacks it).
    pub fn serve_simulator(&self) {
        lock(&self.state).simulator = true;
    }

    /// Make the simulator apply `policies` (JSON documents) as the service control policies of
    /// the account's organization, named `scp-1`, `scp-2`, ... in its `MatchedStatements`, and
    /// answer `OrganizationsDecisionDetail`; an empty list: no organization (the default).
    pub fn set_service_control_policies(&self, policies: Vec<String>) {
        lock(&self.state).service_control_policies = policies;
    }

    /// Add `accessConfig.authenticationMode` to moto's DescribeCluster answer for `cluster`.
    pub fn set_authentication_mode(&self, cluster: &str, mode: &str) {
        lock(&self.state)
            .authentication_modes
            .insert(cluster.to_owned(), mode.to_owned());
    }

    /// Add `resourcesVpcConfig.vpcId` to moto's DescribeCluster answer for `cluster` (moto
    /// leaves it out).
    pub fn set_cluster_vpc(&self, cluster: &str, vpc: &str) {
        lock(&self.state)
            .cluster_vpcs
            .insert(cluster.to_owned(), vpc.to_owned());
    }

    /// Requests received for `service`/`operation` (whatever happened to them).
    pub fn count(&self, service: &str, operation: &str) -> usize {
        let key = (service.to_owned(), operation.to_owned());
        lock(&self.state).counts.get(&key).copied().unwrap_or(0)
    }

    /// All request counts by (service, operation).
    pub fn counts(&self) -> BTreeMap<(String, String), usize> {
        lock(&self.state).counts.clone()
    }

    pub fn reset_counts(&self) {
        let mut state = lock(&self.state);
        state.counts.clear();
        state.slowest.clear();
    }

    /// The calls moto could not serve so far, by (service, operation): how many, the last status.
    pub fn unserved(&self) -> BTreeMap<(String, String), (usize, u16)> {
        lock(&self.state).unserved.clone()
    }

    /// The longest answer of each (service, operation) so far: what an e2e test's timeouts are
    /// measured against.
    pub fn slowest(&self) -> BTreeMap<(String, String), Duration> {
        lock(&self.state).slowest.clone()
    }
}
