//! The facade: turns one EC2NodeClass's [`AwsRequest`] into [`AwsFacts`], reading through the
//! shared caches, the rate limiters and the ports. Does IO (through the ports).
//!
//! It never fails: every call that does not succeed becomes `Observed::Unknown` with a cause and
//! a detail naming the call; `Absent` only comes from an answer that proves absence.

use crate::cache::{Cache, Loaded, Read, Ttls};
use crate::limits::{Limiters, RateLimits, WouldWait};
use crate::metrics::{CallStats, Counters, Outcome};
use crate::ports::{
    CallError, Ec2Api, EksApi, ErrorKind, Filter, IamApi, PortResult, RoleData, Service, StsApi,
};
use crate::sdk::{SdkOptions, SdkPorts};
use futures::future::{BoxFuture, join_all};
use futures::{FutureExt, join};
use karpenter_health_api::karpenter::SelectorTerm;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, AwsFacts, EksClusterFacts, InstanceFacts, InstanceProfileFacts,
    Observed, RoleFacts, SecurityGroupFacts, UnknownCause, Unobserved,
};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

/// What the adapter is asked about one EC2NodeClass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AwsRequest {
    /// Karpenter's cluster name (`CLUSTER_NAME`), which names the EKS cluster and tags instances.
    /// `None` when not known: EKS and instance facts are then unknown (not observed).
    pub cluster_name: Option<String>,
    /// `spec.instanceProfile`, else `status.instanceProfile`, as written. A value IAM would
    /// reject as a name (an ARN, a `/`, a space, over 128 characters) is reported `Absent`
    /// without a call: IAM's answer would be `ValidationError`, and Karpenter, which passes it as
    /// `IamInstanceProfile.Name`, cannot launch with it. The engine tells ARNs apart itself.
    pub instance_profile: Option<String>,
    /// `spec.role`. When `None`, the node role is the instance profile's role.
    pub role: Option<String>,
    pub security_group_selector_terms: Vec<SelectorTerm>,
}

/// Knobs of the observer. The defaults suit a real account; tests shrink them.
#[derive(Clone, Debug, PartialEq)]
pub struct ObserverOptions {
    /// How long a found/absent answer is reused. 60 s: an AWS-side change shows at the first
    /// refresh a minute after it, like Karpenter's own 1-minute EC2 caches (its 15-minute
    /// instance-profile cache is why the operator must not copy that one).
    pub ttl: Duration,
    /// STS GetCallerIdentity: the account of the operator's own credentials does not change.
    pub account_ttl: Duration,
    /// A failure is reported (as unknown) for this long before the call is tried again, so an
    /// outage or throttling is not answered with more calls.
    pub error_ttl: Duration,
    /// Cache entries nobody asked for in this long are dropped (deleted EC2NodeClasses).
    pub idle_eviction: Duration,
    pub sdk: SdkOptions,
    pub rate_limits: RateLimits,
    /// A call that would wait longer than this for the client-side limiter is not made and is
    /// reported unknown (throttled); it bounds how long one observation can take.
    pub max_rate_limit_wait: Duration,
    /// DescribeInstances `MaxResults` (EC2 allows 5..=1000).
    pub instance_page_size: i32,
    /// Also sweep instances by `eks:eks-cluster-name=<name>` (Karpenter >= 1.0's own listing
    /// filter) in a second query. Off by default: every Karpenter version tags its instances
    /// `kubernetes.io/cluster/<name>=owned` (its IAM policy requires that tag on launch), so the
    /// first query already finds them, and the second would double the pages.
    pub sweep_eks_cluster_name_tag: bool,
}

impl Default for ObserverOptions {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(60),
            account_ttl: Duration::from_secs(3600),
            error_ttl: Duration::from_secs(15),
            idle_eviction: Duration::from_secs(1800),
            sdk: SdkOptions::default(),
            rate_limits: RateLimits::default(),
            max_rate_limit_wait: Duration::from_secs(20),
            instance_page_size: 1000,
            sweep_eks_cluster_name_tag: false,
        }
    }
}

/// One fact whose latest read failed while an older good answer is kept.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StaleFact {
    /// The `AwsFacts` field (`node_role.attached_policy_arns` for the nested one).
    pub fact: &'static str,
    /// Age of the kept answer.
    pub age: Duration,
}

/// An observation with the diagnostics the plain [`AwsFacts`] have no room for.
#[derive(Clone, Debug)]
pub struct AwsObservation {
    /// What to evaluate: unknown where the latest read failed.
    pub facts: AwsFacts,
    /// The last found/absent answer of every fact, where one was ever read (best effort for facts
    /// that depend on another: they follow the current answer of what they depend on).
    pub last_good: AwsFacts,
    /// The facts that are unknown now but have an older good answer in `last_good`.
    pub stale: Vec<StaleFact>,
}

/// The port the operator holds, so tests can substitute a fake.
pub trait AwsFactsSource: Send + Sync {
    fn observe<'a>(&'a self, request: &'a AwsRequest) -> BoxFuture<'a, AwsFacts>;
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
    security_groups: Cache<SelectorTerm, Vec<SecurityGroupFacts>>,
    instances: Cache<String, Vec<InstanceFacts>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AwsObserver")
            .field("region", &self.region)
            .field("options", &self.options)
            .finish_non_exhaustive()
    }
}

/// The character set and length IAM accepts for a name (`[\w+=,.@-]+`).
fn valid_iam_name(name: &str, max_len: usize) -> bool {
    !name.is_empty()
        && name.len() <= max_len
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_+=,.@-".contains(&b))
}

fn unobserved(service: Service, op: &str, subject: &str, err: &CallError) -> Unobserved {
    let cause = err
        .kind
        .unknown_cause()
        .unwrap_or(UnknownCause::NotObserved);
    let subject = if subject.is_empty() {
        String::new()
    } else {
        format!(" {subject}")
    };
    Unobserved {
        cause,
        detail: format!("{} {op}{subject}: {err}", service.display()),
    }
}

/// A port result as a cache load: absent is a proof, everything else unknown.
fn settle<T>(r: PortResult<T>, service: Service, op: &str, subject: &str) -> Loaded<T> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(e) if e.kind == ErrorKind::Absent => Ok(None),
        Err(e) => Err(unobserved(service, op, subject, &e)),
    }
}

fn not_observed<T>(detail: impl Into<String>) -> Observed<T> {
    Observed::unknown(UnknownCause::NotObserved, detail)
}

fn no_cluster<T>() -> Observed<T> {
    not_observed("Karpenter's cluster name is not known")
}

fn good<V: Clone>(r: &Read<V>) -> Option<Observed<V>> {
    r.last_good.as_ref().map(|(o, _)| o.clone())
}

/// Instance states worth knowing: terminated instances are gone (and linger in answers for an
/// hour), so they only cost pages.
const LIVE_STATES: [&str; 5] = ["pending", "running", "stopping", "stopped", "shutting-down"];

/// EC2 filters for one selector term: fields ANDed, `*` meaning any value.
pub fn security_group_filters(term: &SelectorTerm) -> Vec<Filter> {
    let mut filters = Vec::new();
    if let Some(id) = &term.id {
        filters.push(Filter::new("group-id", [id]));
    }
    if let Some(name) = &term.name {
        filters.push(Filter::new("group-name", [name]));
    }
    for (k, v) in &term.tags {
        if v == "*" {
            filters.push(Filter::new("tag-key", [k]));
        } else {
            filters.push(Filter::new(format!("tag:{k}"), [v]));
        }
    }
    filters
}

/// The DescribeInstances queries of one sweep. Each query names a filter once: EC2 ANDs repeated
/// names, but emulators (moto) keep only the last one.
pub fn instance_filters(cluster: &str, also_eks_cluster_name_tag: bool) -> Vec<Vec<Filter>> {
    let common = |cluster_filter: Filter| {
        vec![
            cluster_filter,
            Filter::new("tag-key", ["karpenter.sh/nodepool"]),
            Filter::new("instance-state-name", LIVE_STATES),
        ]
    };
    let mut queries = vec![common(Filter::new(
        format!("tag:kubernetes.io/cluster/{cluster}"),
        ["owned"],
    ))];
    if also_eks_cluster_name_tag {
        queries.push(common(Filter::new("tag:eks:eks-cluster-name", [cluster])));
    }
    queries
}

/// `arn:aws:iam::1:role/a/b/Name` -> `arn:aws:iam::1:role/Name` (aws-auth and access entries
/// are often written without the path).
fn path_stripped_role_arn(arn: &str, name: &str) -> Option<String> {
    let (prefix, _) = arn.split_once(":role/")?;
    Some(format!("{prefix}:role/{name}"))
}

impl AwsObserver {
    /// The adapter over the AWS SDK, with credentials, region and endpoints from `config`
    /// (load it with `aws_config::load_defaults(BehaviorVersion::latest())`).
    pub fn new(config: &aws_config::SdkConfig, options: ObserverOptions) -> Self {
        let ports = Arc::new(SdkPorts::new(config, &options.sdk));
        let region = config.region().map(|r| r.to_string());
        Self::with_ports(
            ports.clone(),
            ports.clone(),
            ports.clone(),
            ports,
            region,
            options,
        )
    }

    /// The adapter over any ports (fakes in tests).
    pub fn with_ports(
        iam: Arc<dyn IamApi>,
        ec2: Arc<dyn Ec2Api>,
        eks: Arc<dyn EksApi>,
        sts: Arc<dyn StsApi>,
        region: Option<String>,
        options: ObserverOptions,
    ) -> Self {
        let ttls = Ttls {
            ttl: options.ttl,
            error_ttl: options.error_ttl,
            idle: options.idle_eviction,
        };
        let account_ttls = Ttls {
            ttl: options.account_ttl,
            ..ttls
        };
        Self {
            inner: Arc::new(Inner {
                iam,
                ec2,
                eks,
                sts,
                region,
                limiters: Limiters::new(options.rate_limits),
                counters: Counters::default(),
                account: Cache::new(account_ttls),
                profiles: Cache::new(ttls),
                roles: Cache::new(ttls),
                attached: Cache::new(ttls),
                clusters: Cache::new(ttls),
                access: Cache::new(ttls),
                security_groups: Cache::new(ttls),
                instances: Cache::new(ttls),
                options,
            }),
        }
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
        let (account, (profile, role), eks, sgs, instances) = join!(
            self.account(),
            role_chain,
            cluster_read,
            self.security_groups(&request.security_group_selector_terms),
            instances_read,
        );
        let access = self.access_entries(cluster, eks.as_ref(), &role).await;

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
            role.role
                .as_ref()
                .and_then(|r| r.attached.as_ref())
                .and_then(Read::stale_age),
        );
        note("eks_cluster", eks.as_ref().and_then(Read::stale_age));
        note(
            "node_role_access_entries",
            access.as_ref().and_then(Read::stale_age),
        );
        note("security_groups", sgs.stale_age());
        note(
            "cluster_instances",
            instances.as_ref().and_then(Read::stale_age),
        );

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
            security_groups: sgs.current.clone(),
            cluster_instances: instances
                .as_ref()
                .map_or_else(no_cluster, |r| r.current.clone()),
        };
        let last_good = AwsFacts {
            region: inner.region.clone(),
            account: good(&account).unwrap_or_default(),
            instance_profile: profile.as_ref().map(|p| good(p).unwrap_or_default()),
            node_role: role.last_good(),
            eks_cluster: eks.as_ref().and_then(good).unwrap_or_default(),
            node_role_access_entries: access.as_ref().and_then(good).unwrap_or_default(),
            security_groups: sgs
                .last_good
                .as_ref()
                .map(|(o, _)| o.clone())
                .unwrap_or_default(),
            cluster_instances: instances.as_ref().and_then(good).unwrap_or_default(),
        };
        AwsObservation {
            facts,
            last_good,
            stale,
        }
    }
}

impl AwsFactsSource for AwsObserver {
    fn observe<'a>(&'a self, request: &'a AwsRequest) -> BoxFuture<'a, AwsFacts> {
        AwsObserver::observe(self, request).boxed()
    }
}

/// The node role's reads, and why access entries could not be looked up if so.
#[derive(Default)]
struct RoleReads {
    /// `None`: no role name known (no `spec.role`; profile absent, without a role, or not asked).
    role: Option<RoleRead>,
    /// The role name could not be determined (the profile read failed).
    undetermined: Option<Unobserved>,
    /// Set when access entries cannot be looked up for lack of a role ARN.
    access_blocked: Option<Observed<Vec<AccessEntryFacts>>>,
}

struct RoleRead {
    role: Read<RoleData>,
    /// `None` when the name was rejected without a call.
    attached: Option<Read<Vec<String>>>,
}

fn role_facts(role: RoleData, attached: Observed<Vec<String>>) -> RoleFacts {
    RoleFacts {
        name: role.name,
        arn: role.arn,
        path: role.path,
        assume_role_policy_document: role.assume_role_policy_document,
        attached_policy_arns: attached,
    }
}

impl RoleReads {
    fn current(&self) -> Option<Observed<RoleFacts>> {
        if let Some(u) = &self.undetermined {
            return Some(Observed::Unknown(u.clone()));
        }
        let r = self.role.as_ref()?;
        let attached = || {
            r.attached
                .as_ref()
                .map_or(Observed::Absent, |a| a.current.clone())
        };
        Some(
            r.role
                .current
                .clone()
                .map(|data| role_facts(data, attached())),
        )
    }

    fn last_good(&self) -> Option<Observed<RoleFacts>> {
        if self.undetermined.is_some() && self.role.is_none() {
            return Some(Observed::default());
        }
        let r = self.role.as_ref()?;
        let attached = || {
            r.attached
                .as_ref()
                .and_then(|a| a.last_good.as_ref().map(|(o, _)| o.clone()))
                .unwrap_or_default()
        };
        Some(match &r.role.last_good {
            Some((obs, _)) => obs.clone().map(|data| role_facts(data, attached())),
            None => Observed::default(),
        })
    }
}

/// The union of the selector terms' answers.
struct SecurityGroupsRead {
    current: Observed<Vec<SecurityGroupFacts>>,
    last_good: Option<(Observed<Vec<SecurityGroupFacts>>, Duration)>,
}

impl SecurityGroupsRead {
    fn stale_age(&self) -> Option<Duration> {
        match (&self.current, &self.last_good) {
            (Observed::Unknown(_), Some((_, age))) => Some(*age),
            _ => None,
        }
    }
}

fn union(groups: impl IntoIterator<Item = SecurityGroupFacts>) -> Vec<SecurityGroupFacts> {
    let by_id: BTreeMap<String, SecurityGroupFacts> =
        groups.into_iter().map(|g| (g.id.clone(), g)).collect();
    by_id.into_values().collect()
}

impl AwsObserver {
    /// One counted, rate-limited port call.
    async fn call<T>(
        &self,
        service: Service,
        op: &'static str,
        f: impl Future<Output = PortResult<T>>,
    ) -> PortResult<T> {
        call(&self.inner, service, op, f).await
    }

    async fn account(&self) -> Read<AccountFacts> {
        let this = self.clone();
        self.inner
            .account
            .get((), move || async move {
                let r = this
                    .call(
                        Service::Sts,
                        "GetCallerIdentity",
                        this.inner.sts.get_caller_identity(),
                    )
                    .await;
                settle(r, Service::Sts, "GetCallerIdentity", "")
            })
            .await
    }

    async fn instance_profile(&self, name: &str) -> Read<InstanceProfileFacts> {
        if !valid_iam_name(name, 128) {
            // IAM would answer ValidationError (no such name can exist): spare the call. ARNs land
            // here; the engine recognises them from the spec and says so.
            return Read::answered(Observed::Absent);
        }
        let this = self.clone();
        let name = name.to_owned();
        self.inner
            .profiles
            .get(name.clone(), move || async move {
                let op = "GetInstanceProfile";
                let r = this
                    .call(Service::Iam, op, this.inner.iam.get_instance_profile(&name))
                    .await;
                settle(r, Service::Iam, op, &name)
            })
            .await
    }

    async fn node_role(
        &self,
        spec_role: Option<&str>,
        profile: Option<&Read<InstanceProfileFacts>>,
    ) -> RoleReads {
        let name = match spec_role.filter(|r| !r.is_empty()) {
            Some(r) => r.to_owned(),
            None => match profile.map(|p| &p.current) {
                Some(Observed::Found(p)) => match p.roles.first() {
                    Some(role) => role.name.clone(),
                    None => return self.no_role("the instance profile has no role"),
                },
                Some(Observed::Unknown(u)) => {
                    let u = Unobserved {
                        cause: u.cause,
                        detail: format!("node role not determined: {}", u.detail),
                    };
                    return RoleReads {
                        role: None,
                        undetermined: Some(u.clone()),
                        access_blocked: Some(Observed::Unknown(u)),
                    };
                }
                Some(Observed::Absent) => {
                    return self.no_role("the instance profile does not exist");
                }
                None => return self.no_role("no node role or instance profile is known"),
            },
        };
        if !valid_iam_name(&name, 64) {
            return RoleReads {
                role: Some(RoleRead {
                    role: Read::answered(Observed::Absent),
                    attached: None,
                }),
                undetermined: None,
                access_blocked: None,
            };
        }
        let attached = self.attached_policies(name.clone());
        let this = self.clone();
        let key = name.clone();
        let role = self.inner.roles.get(key, move || async move {
            let r = this
                .call(Service::Iam, "GetRole", this.inner.iam.get_role(&name))
                .await;
            settle(r, Service::Iam, "GetRole", &name)
        });
        let (role, attached) = join!(role, attached);
        RoleReads {
            role: Some(RoleRead {
                role,
                attached: Some(attached),
            }),
            undetermined: None,
            access_blocked: None,
        }
    }

    fn no_role(&self, why: &str) -> RoleReads {
        RoleReads {
            role: None,
            undetermined: None,
            access_blocked: Some(not_observed(format!("no node role to look up: {why}"))),
        }
    }

    async fn attached_policies(&self, role_name: String) -> Read<Vec<String>> {
        let this = self.clone();
        self.inner
            .attached
            .get(role_name.clone(), move || async move {
                let op = "ListAttachedRolePolicies";
                let mut arns = Vec::new();
                let mut marker = None;
                loop {
                    let r = this
                        .call(
                            Service::Iam,
                            op,
                            this.inner
                                .iam
                                .list_attached_role_policies(&role_name, marker.take()),
                        )
                        .await;
                    match settle(r, Service::Iam, op, &role_name)? {
                        None => return Ok(None),
                        Some(page) => {
                            arns.extend(page.items);
                            match page.next {
                                Some(next) => marker = Some(next),
                                None => break,
                            }
                        }
                    }
                }
                arns.sort();
                arns.dedup();
                Ok(Some(arns))
            })
            .await
    }

    async fn eks_cluster(&self, name: &str) -> Read<EksClusterFacts> {
        let this = self.clone();
        let name = name.to_owned();
        self.inner
            .clusters
            .get(name.clone(), move || async move {
                let r = this
                    .call(
                        Service::Eks,
                        "DescribeCluster",
                        this.inner.eks.describe_cluster(&name),
                    )
                    .await;
                settle(r, Service::Eks, "DescribeCluster", &name)
            })
            .await
    }

    async fn access_entries(
        &self,
        cluster: Option<&str>,
        eks: Option<&Read<EksClusterFacts>>,
        role: &RoleReads,
    ) -> Option<Read<Vec<AccessEntryFacts>>> {
        let fixed = |current| Some(Read::answered(current));
        let (Some(cluster), Some(eks)) = (cluster, eks) else {
            return None;
        };
        match &eks.current {
            Observed::Found(c) if c.authentication_mode.as_deref() == Some("CONFIG_MAP") => {
                // Proven by DescribeCluster: a CONFIG_MAP cluster has no access entries (the mode
                // only ever moves towards API, so none were made before either).
                return fixed(Observed::Found(Vec::new()));
            }
            Observed::Found(_) => {}
            Observed::Absent => {
                return fixed(not_observed(format!(
                    "EKS cluster {cluster} does not exist"
                )));
            }
            Observed::Unknown(u) => {
                return fixed(Observed::Unknown(Unobserved {
                    cause: u.cause,
                    detail: format!("access entries not read: {}", u.detail),
                }));
            }
        }
        let role_arn = match role.role.as_ref().map(|r| &r.role.current) {
            Some(Observed::Found(r)) => r.arn.clone(),
            Some(Observed::Absent) => {
                return fixed(not_observed(
                    "no access entries read: the node role does not exist",
                ));
            }
            Some(Observed::Unknown(u)) => {
                return fixed(Observed::Unknown(Unobserved {
                    cause: u.cause,
                    detail: format!("access entries not read: {}", u.detail),
                }));
            }
            None => return None,
        };
        let role_name = role
            .role
            .as_ref()
            .and_then(|r| r.role.current.found().map(|d| d.name.clone()))
            .unwrap_or_default();
        let this = self.clone();
        let key = (cluster.to_owned(), role_arn.clone());
        let cluster = cluster.to_owned();
        let read = self
            .inner
            .access
            .get(key, move || async move {
                let mut wanted = BTreeSet::from([role_arn.clone()]);
                wanted.extend(path_stripped_role_arn(&role_arn, &role_name));
                let op = "ListAccessEntries";
                let mut matching = Vec::new();
                let mut token = None;
                loop {
                    let r = this
                        .call(
                            Service::Eks,
                            op,
                            this.inner.eks.list_access_entries(&cluster, token.take()),
                        )
                        .await;
                    let Some(page) = settle(r, Service::Eks, op, &cluster)? else {
                        // The cluster vanished between the calls: nothing proven about entries.
                        return Err(Unobserved {
                            cause: UnknownCause::NotObserved,
                            detail: format!("EKS {op} {cluster}: cluster not found"),
                        });
                    };
                    matching.extend(page.items.into_iter().filter(|a| wanted.contains(a)));
                    match page.next {
                        Some(next) => token = Some(next),
                        None => break,
                    }
                }
                let mut entries = Vec::new();
                for arn in matching {
                    let op = "DescribeAccessEntry";
                    let r = this
                        .call(
                            Service::Eks,
                            op,
                            this.inner.eks.describe_access_entry(&cluster, &arn),
                        )
                        .await;
                    // Absent: deleted since the listing; it is gone either way.
                    if let Some(entry) = settle(r, Service::Eks, op, &arn)? {
                        entries.push(entry);
                    }
                }
                entries.sort_by(|a, b| a.principal_arn.cmp(&b.principal_arn));
                Ok(Some(entries))
            })
            .await;
        Some(match read.current {
            // ListAccessEntries is never "absent" here (mapped above); keep the type honest.
            Observed::Absent => Read {
                current: Observed::Found(Vec::new()),
                ..read
            },
            _ => read,
        })
    }

    async fn security_groups(&self, terms: &[SelectorTerm]) -> SecurityGroupsRead {
        let distinct: BTreeSet<&SelectorTerm> = terms
            .iter()
            .filter(|t| !security_group_filters(t).is_empty())
            .collect();
        let reads = join_all(
            distinct
                .into_iter()
                .map(|t| self.security_group_term(t.clone())),
        )
        .await;
        let mut current = Ok(Vec::new());
        let mut last_good = Some((Vec::new(), Duration::ZERO));
        for read in reads {
            match (&mut current, read.current) {
                (Ok(all), Observed::Found(groups)) => all.extend(groups),
                (Ok(_), Observed::Absent) => {}
                (Ok(_), Observed::Unknown(u)) => current = Err(u),
                (Err(_), _) => {}
            }
            last_good = match (last_good, read.last_good) {
                (Some((mut all, age)), Some((obs, a))) => {
                    if let Observed::Found(groups) = obs {
                        all.extend(groups);
                    }
                    Some((all, age.max(a)))
                }
                _ => None,
            };
        }
        SecurityGroupsRead {
            current: match current {
                Ok(all) => Observed::Found(union(all)),
                Err(u) => Observed::Unknown(u),
            },
            last_good: last_good.map(|(all, age)| (Observed::Found(union(all)), age)),
        }
    }

    async fn security_group_term(&self, term: SelectorTerm) -> Read<Vec<SecurityGroupFacts>> {
        let this = self.clone();
        self.inner
            .security_groups
            .get(term.clone(), move || async move {
                let filters = security_group_filters(&term);
                let subject = filters
                    .iter()
                    .map(|f| format!("{}={}", f.name, f.values.join(",")))
                    .collect::<Vec<_>>()
                    .join(" ");
                let op = "DescribeSecurityGroups";
                let mut groups = Vec::new();
                let mut token = None;
                loop {
                    let r = this
                        .call(
                            Service::Ec2,
                            op,
                            this.inner
                                .ec2
                                .describe_security_groups(&filters, token.take()),
                        )
                        .await;
                    match settle(r, Service::Ec2, op, &subject)? {
                        // InvalidGroup.NotFound / InvalidGroupId.Malformed: this term matches nothing.
                        None => break,
                        Some(page) => {
                            groups.extend(page.items);
                            match page.next {
                                Some(next) => token = Some(next),
                                None => break,
                            }
                        }
                    }
                }
                // An empty match is a proven "nothing selected", so it is Found(empty), not Absent.
                Ok(Some(groups))
            })
            .await
    }

    async fn instances(&self, cluster: &str) -> Read<Vec<InstanceFacts>> {
        let this = self.clone();
        let cluster = cluster.to_owned();
        self.inner
            .instances
            .get(cluster.clone(), move || async move {
                let op = "DescribeInstances";
                let page_size = this.inner.options.instance_page_size.clamp(5, 1000);
                let mut by_id = BTreeMap::new();
                for filters in
                    instance_filters(&cluster, this.inner.options.sweep_eks_cluster_name_tag)
                {
                    let subject = format!("{}={}", filters[0].name, filters[0].values.join(","));
                    let mut token = None;
                    loop {
                        let r = this
                            .call(
                                Service::Ec2,
                                op,
                                this.inner.ec2.describe_instances(
                                    &filters,
                                    page_size,
                                    token.take(),
                                ),
                            )
                            .await;
                        let Some(page) = settle(r, Service::Ec2, op, &subject)? else {
                            break;
                        };
                        by_id.extend(page.items.into_iter().map(|i| (i.id.clone(), i)));
                        match page.next {
                            Some(next) => token = Some(next),
                            None => break,
                        }
                    }
                }
                Ok(Some(by_id.into_values().collect()))
            })
            .await
    }
}

async fn call<T>(
    inner: &Inner,
    service: Service,
    op: &'static str,
    f: impl Future<Output = PortResult<T>>,
) -> PortResult<T> {
    match inner
        .limiters
        .acquire(service, op, inner.options.max_rate_limit_wait)
        .await
    {
        Ok(waited) => inner.counters.waited(waited),
        Err(WouldWait(_)) => {
            inner.counters.record(service, op, Outcome::RateLimited);
            return Err(CallError::new(
                ErrorKind::Throttled,
                "not sent: the operator's own rate limit for this API is exhausted",
            ));
        }
    }
    let r = f.await;
    let outcome = match &r {
        Ok(_) => Outcome::Ok,
        Err(e) => Outcome::of(e.kind),
    };
    inner.counters.record(service, op, outcome);
    if let Err(e) = &r {
        tracing::debug!(service = service.as_str(), operation = op, error = %e, "AWS call failed");
    }
    r
}
