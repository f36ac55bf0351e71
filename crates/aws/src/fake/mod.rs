//! Programmable in-memory AWS behind the ports, and a fixed [`AwsFactsSource`], for unit tests
//! of the adapter and the operator and for call-budget proofs at sizes an emulator cannot seed.
//! No IO.
//!
//! The fake answers like AWS does where the adapter depends on it: EC2 filters (ANDed, values
//! ORed), pagination with `MaxResults`/`NextToken`, IAM markers, `NoSuchEntity`-style absence.
//! Errors can be injected per operation, persistently or for the next N calls.

use crate::ports::{
    CallError, Ec2Api, EksApi, ErrorKind, EventBus, EventsApi, Filter, IamApi, KmsApi,
    KmsGrantData, KmsKeyData, Page, PodIdentityRoles, PortResult, QueueAttributes, QuotasApi,
    RoleData, ServiceAccountRef, Simulation, SqsApi, SsmApi, StsApi, VpcAttribute,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, CapacityReservationFacts, EksClusterFacts, EventRuleFacts,
    ImageFacts, InstanceFacts, InstanceProfileFacts, InstanceTypeFacts, NatGatewayFacts,
    RouteTableFacts, SecurityGroupFacts, SimulatedDecision, SubnetFacts, VpcEndpointFacts,
};
use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// What the fake AWS holds. Edit it with [`FakeAws::with`].
#[derive(Clone, Debug)]
pub struct FakeState {
    pub account: AccountFacts,
    pub instance_profiles: BTreeMap<String, InstanceProfileFacts>,
    pub roles: BTreeMap<String, RoleData>,
    /// Attached managed policy ARNs by role name.
    pub attached_policies: BTreeMap<String, Vec<String>>,
    pub clusters: BTreeMap<String, EksClusterFacts>,
    /// Access entries by cluster name.
    pub access_entries: BTreeMap<String, Vec<AccessEntryFacts>>,
    /// `false` answers access-entry and Pod Identity calls like moto does (an HTML 404).
    pub access_entries_supported: bool,
    /// Pod Identity associations by cluster: (ServiceAccount, association id, role ARN).
    pub pod_identity: BTreeMap<String, Vec<(ServiceAccountRef, String, PodIdentityRoles)>>,
    pub security_groups: Vec<SecurityGroupFacts>,
    pub instances: Vec<InstanceFacts>,
    /// IAM `MaxItems` of ListAttachedRolePolicies pages.
    pub iam_page_size: usize,
    /// EKS page size of ListAccessEntries.
    pub eks_page_size: usize,
    /// Latency of every call (tokio time).
    pub latency: Duration,
    /// Inline policies by role name: (policy name, document).
    pub role_policies: BTreeMap<String, Vec<(String, String)>>,
    /// Managed policy documents (default version `v1`) by ARN.
    pub managed_policies: BTreeMap<String, String>,
    pub oidc_providers: Vec<String>,
    /// What the simulator answers per `"action resource"`, else per action (`allowed` when
    /// neither is listed).
    pub simulated: BTreeMap<String, String>,
    /// Queues by name: (URL, attributes).
    pub queues: BTreeMap<String, (String, QueueAttributes)>,
    /// EventBridge rules with their target ARNs.
    pub rules: Vec<(EventRuleFacts, Vec<String>)>,
    pub subnets: Vec<SubnetFacts>,
    /// Route tables, NAT gateways and VPC endpoints by VPC id.
    pub route_tables: BTreeMap<String, Vec<RouteTableFacts>>,
    pub nat_gateways: BTreeMap<String, Vec<NatGatewayFacts>>,
    pub vpc_endpoints: BTreeMap<String, Vec<VpcEndpointFacts>>,
    /// VPC attributes by (VPC id, attribute); a VPC without an entry answers `true`.
    pub vpc_attributes: BTreeMap<(String, VpcAttribute), bool>,
    /// EC2 GetEbsEncryptionByDefault.
    pub ebs_encryption_by_default: bool,
    /// EC2 GetEbsDefaultKmsKeyId (an ARN; the aws/ebs alias ARN unless changed).
    pub ebs_default_kms_key_id: String,
    /// KMS keys with their key policy, by key id.
    pub kms_keys: BTreeMap<String, (KmsKeyData, String)>,
    /// KMS aliases (`alias/...`) to key ids.
    pub kms_aliases: BTreeMap<String, String>,
    /// KMS grants by key id.
    pub kms_grants: BTreeMap<String, Vec<KmsGrantData>>,
    /// EC2 DescribeInstanceTypes.
    pub instance_types: Vec<InstanceTypeFacts>,
    /// EC2 DescribeInstanceTypeOfferings by zone: `(instance type, zone)`.
    pub instance_type_offerings: Vec<(String, String)>,
    /// Page size of both instance-type calls (EC2's are 100 and 1000).
    pub instance_type_page_size: usize,
    /// Service Quotas values by (service code, quota code); a missing one is absent.
    pub service_quotas: BTreeMap<(String, String), f64>,
    /// SSM parameter values by name; a missing one is absent (`ParameterNotFound`).
    pub ssm_parameters: BTreeMap<String, String>,
    /// The account's active open capacity reservations, as DescribeCapacityReservations
    /// answers the adapter's filtered question.
    pub open_capacity_reservations: Vec<CapacityReservationFacts>,
    /// The images the account can see (DescribeImages); one not here is gone.
    pub images: Vec<ImageFacts>,
}

impl FakeState {
    /// What the EKS APIs newer than moto (access entries, Pod Identity) answer before looking at
    /// data: unsupported like moto's 404 when switched off, and not found for an unknown cluster.
    fn newer_eks_api(&self, cluster: Option<&str>) -> PortResult<()> {
        if !self.access_entries_supported {
            return Err(unsupported());
        }
        match cluster {
            Some(c) if !self.clusters.contains_key(c) => Err(absent("ResourceNotFoundException")),
            _ => Ok(()),
        }
    }
}

impl Default for FakeState {
    fn default() -> Self {
        Self {
            account: AccountFacts {
                account_id: "123456789012".into(),
                partition: "aws".into(),
            },
            instance_profiles: BTreeMap::new(),
            roles: BTreeMap::new(),
            attached_policies: BTreeMap::new(),
            clusters: BTreeMap::new(),
            access_entries: BTreeMap::new(),
            access_entries_supported: true,
            pod_identity: BTreeMap::new(),
            security_groups: Vec::new(),
            instances: Vec::new(),
            iam_page_size: 100,
            eks_page_size: 100,
            latency: Duration::ZERO,
            role_policies: BTreeMap::new(),
            managed_policies: BTreeMap::new(),
            oidc_providers: Vec::new(),
            simulated: BTreeMap::new(),
            queues: BTreeMap::new(),
            rules: Vec::new(),
            subnets: Vec::new(),
            route_tables: BTreeMap::new(),
            nat_gateways: BTreeMap::new(),
            vpc_endpoints: BTreeMap::new(),
            vpc_attributes: BTreeMap::new(),
            ebs_encryption_by_default: false,
            ebs_default_kms_key_id: "arn:aws:kms:us-west-2:123456789012:alias/aws/ebs".into(),
            kms_keys: BTreeMap::new(),
            kms_aliases: BTreeMap::new(),
            kms_grants: BTreeMap::new(),
            instance_types: Vec::new(),
            instance_type_offerings: Vec::new(),
            instance_type_page_size: 100,
            service_quotas: BTreeMap::new(),
            ssm_parameters: BTreeMap::new(),
            open_capacity_reservations: Vec::new(),
            images: Vec::new(),
        }
    }
}

#[derive(Debug, Default)]
struct Faults {
    /// Returned by every call of the operation until healed.
    always: BTreeMap<String, CallError>,
    /// Returned by the next calls of the operation, in order.
    next: BTreeMap<String, VecDeque<CallError>>,
}

#[derive(Debug, Default)]
struct Shared {
    state: FakeState,
    faults: Faults,
    /// Operation names of the calls received, in order.
    calls: Vec<String>,
    /// `MaxResults` of each DescribeInstances call.
    instance_page_sizes: Vec<i32>,
}

/// The fake; implements all four ports. Cheap to clone (shared state).
#[derive(Clone, Debug, Default)]
pub struct FakeAws {
    shared: Arc<Mutex<Shared>>,
}

impl FakeAws {
    pub fn new(state: FakeState) -> Self {
        Self {
            shared: Arc::new(Mutex::new(Shared {
                state,
                ..Default::default()
            })),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        self.shared.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Edits the state.
    pub fn with<R>(&self, f: impl FnOnce(&mut FakeState) -> R) -> R {
        f(&mut self.lock().state)
    }

    /// Every call of `operation` fails with `err` until [`FakeAws::heal`].
    pub fn fail(&self, operation: &str, err: CallError) {
        self.lock().faults.always.insert(operation.to_owned(), err);
    }

    /// The next call of `operation` fails with `err` (queued after earlier ones).
    pub fn fail_next(&self, operation: &str, err: CallError) {
        self.lock()
            .faults
            .next
            .entry(operation.to_owned())
            .or_default()
            .push_back(err);
    }

    /// Removes every injected fault.
    pub fn heal(&self) {
        self.lock().faults = Faults::default();
    }

    /// Calls of `operation` received so far.
    pub fn calls(&self, operation: &str) -> usize {
        self.lock().calls.iter().filter(|c| *c == operation).count()
    }

    /// All calls received so far, in order.
    pub fn call_log(&self) -> Vec<String> {
        self.lock().calls.clone()
    }

    /// `MaxResults` of each DescribeInstances call so far.
    pub fn instance_page_sizes(&self) -> Vec<i32> {
        self.lock().instance_page_sizes.clone()
    }

    /// Forgets the calls received and the faults; keeps the state.
    pub fn reset_calls(&self) {
        let mut s = self.lock();
        s.calls.clear();
        s.instance_page_sizes.clear();
        s.faults = Faults::default();
    }

    /// Records the call when it is sent (polled), then returns the injected fault or
    /// `answer(state)`.
    fn answer<T: Send + 'static>(
        &self,
        operation: &'static str,
        answer: impl FnOnce(&FakeState) -> PortResult<T> + Send + 'static,
    ) -> BoxFuture<'static, PortResult<T>> {
        let this = self.clone();
        async move {
            let (latency, result) = {
                let mut s = this.lock();
                s.calls.push(operation.to_owned());
                let injected = match s
                    .faults
                    .next
                    .get_mut(operation)
                    .and_then(VecDeque::pop_front)
                {
                    Some(e) => Some(e),
                    None => s.faults.always.get(operation).cloned(),
                };
                let result = match injected {
                    Some(e) => Err(e),
                    None => answer(&s.state),
                };
                (s.state.latency, result)
            };
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            result
        }
        .boxed()
    }
}

/// The error the fake answers for a missing named object.
pub fn absent(code: &str) -> CallError {
    CallError::new(ErrorKind::Absent, "not found")
        .with_code(code)
        .with_status(404)
}

/// An AWS-style throttling error.
pub fn throttled() -> CallError {
    CallError::new(ErrorKind::Throttled, "Rate exceeded")
        .with_code("Throttling")
        .with_status(400)
}

fn tags_match(tags: &BTreeMap<String, String>, filter: &Filter) -> Option<bool> {
    if filter.name == "tag-key" {
        return Some(filter.values.iter().any(|k| tags.contains_key(k)));
    }
    let key = filter.name.strip_prefix("tag:")?;
    Some(
        tags.get(key)
            .is_some_and(|v| filter.values.iter().any(|want| want == v)),
    )
}

fn sg_matches(g: &SecurityGroupFacts, filters: &[Filter]) -> bool {
    filters.iter().all(|f| match f.name.as_str() {
        "group-id" => f.values.contains(&g.id),
        "group-name" => f.values.contains(&g.name),
        "vpc-id" => g.vpc_id.as_ref().is_some_and(|v| f.values.contains(v)),
        _ => tags_match(&g.tags, f).unwrap_or(false),
    })
}

fn subnet_matches(subnet: &SubnetFacts, filters: &[Filter]) -> bool {
    filters.iter().all(|f| match f.name.as_str() {
        "subnet-id" => f.values.contains(&subnet.id),
        "vpc-id" => f.values.contains(&subnet.vpc_id),
        _ => tags_match(&subnet.tags, f).unwrap_or(false),
    })
}

/// The items of the VPCs a `vpc-id` filter names (every VPC without one).
fn by_vpc<T: Clone>(items: &BTreeMap<String, Vec<T>>, filters: &[Filter]) -> Vec<T> {
    let wanted = filters.iter().find(|f| f.name == "vpc-id");
    items
        .iter()
        .filter(|(vpc, _)| wanted.is_none_or(|f| f.values.contains(vpc)))
        .flat_map(|(_, v)| v.iter().cloned())
        .collect()
}

fn instance_matches(i: &InstanceFacts, filters: &[Filter]) -> bool {
    filters.iter().all(|f| match f.name.as_str() {
        "instance-state-name" => f.values.contains(&i.state),
        "vpc-id" => i.vpc_id.as_ref().is_some_and(|v| f.values.contains(v)),
        _ => tags_match(&i.tags, f).unwrap_or(false),
    })
}

/// The object `name` of a Get/Describe call, or the error AWS answers (with `code`) when there is
/// none.
fn named<V: Clone>(objects: &BTreeMap<String, V>, name: &str, code: &str) -> PortResult<V> {
    objects.get(name).cloned().ok_or_else(|| absent(code))
}

/// One page of `items` starting at the numeric `token`.
fn page<T: Clone>(items: Vec<T>, size: usize, token: Option<String>) -> PortResult<Page<T>> {
    let start = match token {
        Some(t) => t.parse::<usize>().map_err(|_| {
            CallError::new(ErrorKind::Unsupported, "invalid token")
                .with_code("InvalidParameterValue")
                .with_status(400)
        })?,
        None => 0,
    };
    let size = size.max(1);
    let end = (start + size).min(items.len());
    let slice = items.get(start..end).unwrap_or_default().to_vec();
    Ok(Page {
        items: slice,
        next: (end < items.len()).then(|| end.to_string()),
    })
}

mod ec2;
mod ports;

pub use ports::event_bus_arn;
use ports::unsupported;
