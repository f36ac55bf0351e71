//! Programmable in-memory AWS behind the ports, and a fixed [`AwsFactsSource`], for unit tests
//! of the adapter and the operator and for call-budget proofs at sizes an emulator cannot seed.
//! No IO.
//!
//! The fake answers like AWS does where the adapter depends on it: EC2 filters (ANDed, values
//! ORed), pagination with `MaxResults`/`NextToken`, IAM markers, `NoSuchEntity`-style absence.
//! Errors can be injected per operation, persistently or for the next N calls.

use crate::observer::AwsFactsSource;
use crate::ports::{
    CallError, Ec2Api, EksApi, ErrorKind, EventBus, EventsApi, Filter, IamApi, KmsApi,
    KmsGrantData, KmsKeyData, Page, PodIdentityRoles, PortResult, QueueAttributes, RoleData,
    ServiceAccountRef, Simulation, SqsApi, StsApi, VpcAttribute,
};
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, AwsFacts, EksClusterFacts, EventRuleFacts, InstanceFacts,
    InstanceProfileFacts, NatGatewayFacts, RouteTableFacts, SecurityGroupFacts, SimulatedDecision,
    SubnetFacts, VpcEndpointFacts,
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
    /// What the simulator answers per action (`allowed` when not listed).
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

impl IamApi for FakeAws {
    fn get_instance_profile<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, PortResult<InstanceProfileFacts>> {
        let name = name.to_owned();
        self.answer("GetInstanceProfile", move |s| {
            named(&s.instance_profiles, &name, "NoSuchEntity")
        })
    }

    fn get_role<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<RoleData>> {
        let name = name.to_owned();
        self.answer("GetRole", move |s| named(&s.roles, &name, "NoSuchEntity"))
    }

    fn list_attached_role_policies<'a>(
        &'a self,
        role_name: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let name = role_name.to_owned();
        self.answer("ListAttachedRolePolicies", move |s| {
            if !s.roles.contains_key(&name) {
                return Err(absent("NoSuchEntity"));
            }
            let arns = s.attached_policies.get(&name).cloned().unwrap_or_default();
            page(arns, s.iam_page_size, marker)
        })
    }

    fn simulate_principal_policy<'a>(
        &'a self,
        simulation: &'a Simulation,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SimulatedDecision>>> {
        let simulation = simulation.clone();
        self.answer("SimulatePrincipalPolicy", move |s| {
            let role = simulation
                .policy_source_arn
                .rsplit('/')
                .next()
                .unwrap_or_default();
            if !s.roles.contains_key(role) {
                return Err(absent("NoSuchEntity"));
            }
            let mut all = Vec::new();
            for action in &simulation.actions {
                for resource in &simulation.resources {
                    all.push(SimulatedDecision {
                        action: action.clone(),
                        resource: resource.clone(),
                        decision: s
                            .simulated
                            .get(action)
                            .cloned()
                            .unwrap_or_else(|| "allowed".into()),
                        denied_by_boundary: false,
                        denied_by_organizations: false,
                        missing_context: Vec::new(),
                        matched: Vec::new(),
                    });
                }
            }
            page(all, 1000, marker)
        })
    }

    fn list_role_policies<'a>(
        &'a self,
        role_name: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let name = role_name.to_owned();
        self.answer("ListRolePolicies", move |s| {
            if !s.roles.contains_key(&name) {
                return Err(absent("NoSuchEntity"));
            }
            let names = s
                .role_policies
                .get(&name)
                .map(|ps| ps.iter().map(|(n, _)| n.clone()).collect())
                .unwrap_or_default();
            page(names, s.iam_page_size, marker)
        })
    }

    fn get_role_policy<'a>(
        &'a self,
        role_name: &'a str,
        policy_name: &'a str,
    ) -> BoxFuture<'a, PortResult<String>> {
        let (role, policy) = (role_name.to_owned(), policy_name.to_owned());
        self.answer("GetRolePolicy", move |s| {
            s.role_policies
                .get(&role)
                .and_then(|ps| ps.iter().find(|(n, _)| *n == policy))
                .map(|(_, d)| d.clone())
                .ok_or_else(|| absent("NoSuchEntity"))
        })
    }

    fn get_policy<'a>(&'a self, arn: &'a str) -> BoxFuture<'a, PortResult<String>> {
        let arn = arn.to_owned();
        self.answer("GetPolicy", move |s| {
            named(&s.managed_policies, &arn, "NoSuchEntity").map(|_| "v1".to_owned())
        })
    }

    fn get_policy_version<'a>(
        &'a self,
        arn: &'a str,
        _version: &'a str,
    ) -> BoxFuture<'a, PortResult<String>> {
        let arn = arn.to_owned();
        self.answer("GetPolicyVersion", move |s| {
            named(&s.managed_policies, &arn, "NoSuchEntity")
        })
    }

    fn list_open_id_connect_providers(&self) -> BoxFuture<'_, PortResult<Vec<String>>> {
        self.answer("ListOpenIDConnectProviders", |s| {
            Ok(s.oidc_providers.clone())
        })
    }
}

impl SqsApi for FakeAws {
    fn get_queue_url<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<String>> {
        let name = name.to_owned();
        self.answer("GetQueueUrl", move |s| {
            s.queues
                .get(&name)
                .map(|(url, _)| url.clone())
                .ok_or_else(|| absent("AWS.SimpleQueueService.NonExistentQueue"))
        })
    }

    fn get_queue_attributes<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, PortResult<QueueAttributes>> {
        let url = url.to_owned();
        self.answer("GetQueueAttributes", move |s| {
            s.queues
                .values()
                .find(|(u, _)| *u == url)
                .map(|(_, a)| a.clone())
                .ok_or_else(|| absent("AWS.SimpleQueueService.NonExistentQueue"))
        })
    }
}

/// The ARN EventBridge gives event bus `name` in the fake's account and region.
pub fn event_bus_arn(name: &str) -> String {
    format!("arn:aws:events:us-west-2:111122223333:event-bus/{name}")
}

impl EventsApi for FakeAws {
    fn list_event_buses<'a>(
        &'a self,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<EventBus>>> {
        self.answer("ListEventBuses", move |s| {
            let mut names: Vec<String> = s.rules.iter().map(|(r, _)| r.event_bus.clone()).collect();
            names.push("default".into());
            names.sort();
            names.dedup();
            let buses = names
                .into_iter()
                .map(|name| EventBus {
                    arn: event_bus_arn(&name),
                    name,
                })
                .collect();
            page(buses, 100, next_token)
        })
    }

    fn list_rule_names_by_target<'a>(
        &'a self,
        target_arn: &'a str,
        bus: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let (target, bus) = (target_arn.to_owned(), bus.to_owned());
        self.answer("ListRuleNamesByTarget", move |s| {
            let names = s
                .rules
                .iter()
                .filter(|(r, targets)| r.event_bus == bus && targets.contains(&target))
                .map(|(r, _)| r.name.clone())
                .collect();
            page(names, 100, next_token)
        })
    }

    fn describe_rule<'a>(
        &'a self,
        name: &'a str,
        bus: &'a str,
    ) -> BoxFuture<'a, PortResult<EventRuleFacts>> {
        let (name, bus) = (name.to_owned(), bus.to_owned());
        self.answer("DescribeRule", move |s| {
            s.rules
                .iter()
                .find(|(r, _)| r.name == name && r.event_bus == bus)
                .map(|(r, _)| r.clone())
                .ok_or_else(|| absent("ResourceNotFoundException"))
        })
    }
}

impl Ec2Api for FakeAws {
    fn describe_security_groups<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SecurityGroupFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeSecurityGroups", move |s| {
            let found: Vec<_> = s
                .security_groups
                .iter()
                .filter(|g| sg_matches(g, &filters))
                .cloned()
                .collect();
            page(found, 1000, next_token)
        })
    }

    fn describe_instances<'a>(
        &'a self,
        filters: &'a [Filter],
        max_results: i32,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<InstanceFacts>>> {
        let filters = filters.to_vec();
        let this = self.clone();
        let answer = self.answer("DescribeInstances", move |s| {
            let found: Vec<_> = s
                .instances
                .iter()
                .filter(|i| instance_matches(i, &filters))
                .cloned()
                .collect();
            page(
                found,
                usize::try_from(max_results).unwrap_or(1000),
                next_token,
            )
        });
        async move {
            this.lock().instance_page_sizes.push(max_results);
            answer.await
        }
        .boxed()
    }

    fn describe_subnets<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SubnetFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeSubnets", move |s| {
            let found: Vec<_> = s
                .subnets
                .iter()
                .filter(|x| subnet_matches(x, &filters))
                .cloned()
                .collect();
            page(found, 1000, next_token)
        })
    }

    fn describe_route_tables<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<RouteTableFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeRouteTables", move |s| {
            page(by_vpc(&s.route_tables, &filters), 100, next_token)
        })
    }

    fn describe_nat_gateways<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<NatGatewayFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeNatGateways", move |s| {
            page(by_vpc(&s.nat_gateways, &filters), 1000, next_token)
        })
    }

    fn describe_vpc_endpoints<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<VpcEndpointFacts>>> {
        let filters = filters.to_vec();
        self.answer("DescribeVpcEndpoints", move |s| {
            page(by_vpc(&s.vpc_endpoints, &filters), 1000, next_token)
        })
    }

    fn describe_vpc_attribute<'a>(
        &'a self,
        vpc_id: &'a str,
        attribute: VpcAttribute,
    ) -> BoxFuture<'a, PortResult<bool>> {
        let vpc = vpc_id.to_owned();
        self.answer("DescribeVpcAttribute", move |s| {
            Ok(s.vpc_attributes
                .get(&(vpc, attribute))
                .copied()
                .unwrap_or(true))
        })
    }

    fn get_ebs_encryption_by_default(&self) -> BoxFuture<'_, PortResult<bool>> {
        self.answer("GetEbsEncryptionByDefault", |s| {
            Ok(s.ebs_encryption_by_default)
        })
    }

    fn get_ebs_default_kms_key_id(&self) -> BoxFuture<'_, PortResult<String>> {
        self.answer("GetEbsDefaultKmsKeyId", |s| {
            Ok(s.ebs_default_kms_key_id.clone())
        })
    }
}

impl FakeState {
    /// The key a KMS reference names: key id, key ARN, alias name or alias ARN.
    fn kms_key(&self, reference: &str) -> PortResult<(KmsKeyData, String)> {
        let tail = reference
            .rsplit_once(':')
            .map_or(reference, |(_, tail)| tail);
        let id = if tail.starts_with("alias/") {
            self.kms_aliases
                .get(tail)
                .cloned()
                .ok_or_else(|| absent("NotFoundException"))?
        } else {
            tail.strip_prefix("key/").unwrap_or(tail).to_owned()
        };
        self.kms_keys
            .get(&id)
            .cloned()
            .ok_or_else(|| absent("NotFoundException"))
    }
}

impl KmsApi for FakeAws {
    fn describe_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, PortResult<KmsKeyData>> {
        let key = key.to_owned();
        self.answer("DescribeKey", move |s| s.kms_key(&key).map(|(k, _)| k))
    }

    fn get_key_policy<'a>(&'a self, key: &'a str) -> BoxFuture<'a, PortResult<String>> {
        let key = key.to_owned();
        self.answer("GetKeyPolicy", move |s| s.kms_key(&key).map(|(_, p)| p))
    }

    /// Every grant of the key, whatever `grantee` asks for: like moto, which ignores the
    /// `GranteePrincipal` filter, so the observer's own filtering is what the tests see.
    fn list_grants<'a>(
        &'a self,
        key: &'a str,
        _grantee: &'a str,
        _marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<KmsGrantData>>> {
        let key = key.to_owned();
        self.answer("ListGrants", move |s| {
            let (data, _) = s.kms_key(&key)?;
            let items = s.kms_grants.get(&data.key_id).cloned().unwrap_or_default();
            Ok(Page { items, next: None })
        })
    }
}

fn unsupported() -> CallError {
    CallError::new(ErrorKind::Unsupported, "response without an AWS error code").with_status(404)
}

impl EksApi for FakeAws {
    fn describe_cluster<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<EksClusterFacts>> {
        let name = name.to_owned();
        self.answer("DescribeCluster", move |s| {
            named(&s.clusters, &name, "ResourceNotFoundException")
        })
    }

    fn list_access_entries<'a>(
        &'a self,
        cluster: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let cluster = cluster.to_owned();
        self.answer("ListAccessEntries", move |s| {
            s.newer_eks_api(Some(&cluster))?;
            let arns = s
                .access_entries
                .get(&cluster)
                .map(|es| es.iter().map(|e| e.principal_arn.clone()).collect())
                .unwrap_or_default();
            page(arns, s.eks_page_size, next_token)
        })
    }

    fn describe_access_entry<'a>(
        &'a self,
        cluster: &'a str,
        principal_arn: &'a str,
    ) -> BoxFuture<'a, PortResult<AccessEntryFacts>> {
        let (cluster, arn) = (cluster.to_owned(), principal_arn.to_owned());
        self.answer("DescribeAccessEntry", move |s| {
            s.newer_eks_api(None)?;
            s.access_entries
                .get(&cluster)
                .and_then(|es| es.iter().find(|e| e.principal_arn == arn))
                .cloned()
                .ok_or_else(|| absent("ResourceNotFoundException"))
        })
    }

    fn list_pod_identity_associations<'a>(
        &'a self,
        cluster: &'a str,
        service_account: &'a ServiceAccountRef,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let (cluster, service_account) = (cluster.to_owned(), service_account.clone());
        self.answer("ListPodIdentityAssociations", move |s| {
            s.newer_eks_api(Some(&cluster))?;
            let ids = s
                .pod_identity
                .get(&cluster)
                .into_iter()
                .flatten()
                .filter(|(sa, _, _)| *sa == service_account)
                .map(|(_, id, _)| id.clone())
                .collect();
            page(ids, s.eks_page_size, next_token)
        })
    }

    fn describe_pod_identity_association<'a>(
        &'a self,
        cluster: &'a str,
        association_id: &'a str,
    ) -> BoxFuture<'a, PortResult<PodIdentityRoles>> {
        let (cluster, id) = (cluster.to_owned(), association_id.to_owned());
        self.answer("DescribePodIdentityAssociation", move |s| {
            s.newer_eks_api(None)?;
            s.pod_identity
                .get(&cluster)
                .and_then(|all| all.iter().find(|(_, i, _)| *i == id))
                .map(|(_, _, role)| role.clone())
                .ok_or_else(|| absent("ResourceNotFoundException"))
        })
    }
}

impl StsApi for FakeAws {
    fn get_caller_identity(&self) -> BoxFuture<'_, PortResult<AccountFacts>> {
        self.answer("GetCallerIdentity", |s| Ok(s.account.clone()))
    }
}

/// An [`AwsFactsSource`] that answers the same facts to every request (settable), for tests of
/// the operator.
#[derive(Debug, Default)]
pub struct FixedFacts {
    facts: Mutex<AwsFacts>,
}

impl FixedFacts {
    pub fn new(facts: AwsFacts) -> Self {
        Self {
            facts: Mutex::new(facts),
        }
    }

    pub fn set(&self, facts: AwsFacts) {
        *self.facts.lock().unwrap_or_else(PoisonError::into_inner) = facts;
    }
}

impl AwsFactsSource for FixedFacts {
    fn observe<'a>(&'a self, _request: &'a crate::observer::AwsRequest) -> BoxFuture<'a, AwsFacts> {
        let facts = self
            .facts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        futures::future::ready(facts).boxed()
    }
}
