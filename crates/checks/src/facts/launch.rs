//! The AWS facts about what a launch can get (issue 25): the region's instance-type catalog and
//! its verdict memo, the account's vCPU quotas, the SSM parameters of an AMI alias, the
//! account's open capacity reservations. Plain data, no IO.

use super::*;

/// The region's instance types (EC2 DescribeInstanceTypes) and where each is offered
/// (DescribeInstanceTypeOfferings by availability zone): two region-wide answers, shared by every
/// class and every clone (`Arc`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceTypeCatalog {
    /// Sorted by name (the adapter sorts them), so a type is found by binary search.
    pub types: Arc<Vec<InstanceTypeFacts>>,
    /// Instance type name to the zone names it is offered in.
    pub zones: Arc<BTreeMap<String, BTreeSet<String>>>,
    /// What each NodePool's requirements leave of this catalog, judged once per distinct
    /// question (requirements, zones, AMI architectures) and shared by every class and every
    /// evaluation while the catalog lasts: an aws-auth edit re-evaluates every class, and the
    /// instance types they allow have not changed (issue 23's cost per change). Derived data:
    /// it takes no part in comparing catalogs.
    pub judged: Memo<crate::plan::instance_types::Judged>,
}

/// Values derived from their owner, by the hash of the question that derived them, shared by the
/// owner's clones. Derived data: it takes no part in comparing owners.
pub struct Memo<V>(Arc<std::sync::Mutex<std::collections::HashMap<u64, Arc<V>>>>);

/// At most this many answers are kept; past it the memo starts over (NodePools come and go).
const MEMO_CAPACITY: usize = 4096;

impl<V> Memo<V> {
    /// How many answers are kept.
    pub fn len(&self) -> usize {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The answer for `key`, derived by `derive` the first time.
    pub fn get_or_derive(&self, key: u64, derive: impl FnOnce() -> V) -> Arc<V> {
        let lock = || {
            self.0
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        };
        if let Some(v) = lock().get(&key) {
            return v.clone();
        }
        // Derived outside the lock: two first askers may both derive it, never wait on each
        // other.
        let v = Arc::new(derive());
        let mut memo = lock();
        if memo.len() >= MEMO_CAPACITY {
            memo.clear();
        }
        memo.entry(key).or_insert(v).clone()
    }
}

impl<V> Default for Memo<V> {
    fn default() -> Self {
        Self(Arc::default())
    }
}

impl<V> Clone for Memo<V> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<V> PartialEq for Memo<V> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<V> Eq for Memo<V> {}

impl<V> fmt::Debug for Memo<V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Memo")
    }
}

/// What the requirements of a NodePool are matched against for one instance type.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceTypeFacts {
    /// `m5.large`.
    pub name: String,
    /// `VCpuInfo.DefaultVCpus`; `None` when the answer left it out.
    pub vcpus: Option<u32>,
    /// `MemoryInfo.SizeInMiB`; `None` when the answer left it out.
    pub memory_mib: Option<u64>,
    /// `ProcessorInfo.SupportedArchitectures` as EC2 names them (`x86_64`, `arm64`, `i386`,
    /// `x86_64_mac`, ...).
    pub architectures: Vec<String>,
    /// `SupportedUsageClasses` (`on-demand`, `spot`, `capacity-block`).
    pub usage_classes: Vec<String>,
    /// `NetworkInfo.NetworkCards[DefaultNetworkCardIndex].MaximumNetworkInterfaces` (else
    /// `NetworkInfo.MaximumNetworkInterfaces`): the ENIs of the card Pods get addresses on.
    pub network_interfaces: Option<u32>,
    /// `NetworkInfo.Ipv4AddressesPerInterface`.
    pub ipv4_per_interface: Option<u32>,
}

/// One On-Demand Capacity Reservation as EC2 describes it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CapacityReservationFacts {
    pub id: String,
    pub instance_type: String,
    pub zone: String,
    /// `AvailableInstanceCount`; `None` when the answer left it out.
    pub available: Option<u32>,
    /// `InstancePlatform` (`Linux/UNIX`, `Windows`, `Red Hat Enterprise Linux`, ...): only
    /// instances of that platform fall into it.
    pub platform: Option<String>,
    /// `Tenancy` (`default` or `dedicated`).
    pub tenancy: Option<String>,
}

/// One image as EC2 DescribeImages answers it, deprecated and disabled images included.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ImageFacts {
    pub id: String,
    pub name: Option<String>,
    /// `available`, `pending`, `disabled`, `failed`, …
    pub state: String,
    /// When EC2 deprecates (or deprecated) the image.
    pub deprecation_time: Option<jiff::Timestamp>,
}

/// SSM GetParameter's answers for the parameters an AMI alias resolves through.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AmiParameters {
    /// The Kubernetes minor (`1.31`) the parameter names were built for: EKS's version, the API
    /// server's only where EKS has no such cluster (Karpenter reads one or the other; on EKS they
    /// agree).
    pub kubernetes_minor: String,
    /// The image id each parameter holds, by name; `Absent` when SSM answers `ParameterNotFound`.
    pub values: BTreeMap<String, Observed<String>>,
}

/// Service Quotas' values of the two EC2 quotas every Karpenter launch of a standard instance
/// counts against (GetServiceQuota, service `ec2`): `Absent` when Service Quotas has no value.
#[derive(Clone, Debug, PartialEq)]
pub struct VcpuQuotas {
    /// `L-1216C47A`, Running On-Demand Standard (A, C, D, H, I, M, R, T, Z) instances, in vCPUs.
    pub on_demand: Observed<f64>,
    /// `L-34B43A08`, All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests, in vCPUs.
    pub spot: Observed<f64>,
}
