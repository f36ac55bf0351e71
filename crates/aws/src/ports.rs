//! The narrow ports to AWS: one trait per service listing only the calls the adapter makes, with
//! plain-data results and classified errors. No IO here; `sdk/` implements them over the AWS
//! SDK and `fake.rs` in memory.
//!
//! Ports speak in the check engine's fact types where they fit, so the observer does no SDK type
//! juggling and a fake is a few lines. A port call is one AWS request (one page).

use futures::future::BoxFuture;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, CapacityReservationFacts, EksClusterFacts, EventRuleFacts,
    ImageFacts, InstanceFacts, InstanceProfileFacts, InstanceTypeFacts, NatGatewayFacts,
    RouteTableFacts, SecurityGroupFacts, SimulatedDecision, SubnetFacts, UnknownCause,
    VpcEndpointFacts,
};
use std::fmt;

/// The AWS service a call goes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Service {
    Iam,
    Ec2,
    Eks,
    Sts,
    Sqs,
    /// EventBridge (SigV4 name `events`).
    Events,
    Kms,
    /// Service Quotas (SigV4 name `servicequotas`).
    ServiceQuotas,
    /// Systems Manager Parameter Store (SigV4 name `ssm`).
    Ssm,
}

impl Service {
    /// Lower-case name, as in metrics labels and SigV4 scopes.
    pub fn as_str(self) -> &'static str {
        match self {
            Service::Iam => "iam",
            Service::Ec2 => "ec2",
            Service::Eks => "eks",
            Service::Sts => "sts",
            Service::Sqs => "sqs",
            Service::Events => "events",
            Service::Kms => "kms",
            Service::ServiceQuotas => "servicequotas",
            Service::Ssm => "ssm",
        }
    }

    /// Display name, as in condition messages.
    pub fn display(self) -> &'static str {
        match self {
            Service::Iam => "IAM",
            Service::Ec2 => "EC2",
            Service::Eks => "EKS",
            Service::Sts => "STS",
            Service::Sqs => "SQS",
            Service::Events => "EventBridge",
            Service::Kms => "KMS",
            Service::ServiceQuotas => "Service Quotas",
            Service::Ssm => "SSM",
        }
    }
}

/// How a failed call failed, after classification.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// A successful answer that the named thing does not exist (`NoSuchEntity`,
    /// `InvalidGroup.NotFound`, `ResourceNotFoundException`, IAM `ValidationError` on a name).
    Absent,
    AccessDenied,
    Throttled,
    Unavailable,
    Unsupported,
}

impl ErrorKind {
    /// The engine's cause for an unknown fact; `None` for [`ErrorKind::Absent`], which is a proof.
    pub fn unknown_cause(self) -> Option<UnknownCause> {
        match self {
            ErrorKind::Absent => None,
            ErrorKind::AccessDenied => Some(UnknownCause::AccessDenied),
            ErrorKind::Throttled => Some(UnknownCause::Throttled),
            ErrorKind::Unavailable => Some(UnknownCause::Unavailable),
            ErrorKind::Unsupported => Some(UnknownCause::Unsupported),
        }
    }
}

/// A classified call failure. `code`/`message` are what AWS said; `detail` is for humans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallError {
    pub kind: ErrorKind,
    /// AWS error code (`Throttling`, `NoSuchEntity`, ...), when the response carried one.
    pub code: Option<String>,
    /// HTTP status, when a response arrived.
    pub status: Option<u16>,
    /// Error message or transport error text (no request ids: it ends up in condition messages,
    /// which must not change on every refresh).
    pub message: String,
}

impl CallError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Self {
            kind,
            code: None,
            status: None,
            message: message.into(),
        }
    }

    pub fn with_code(mut self, code: impl Into<String>) -> Self {
        self.code = Some(code.into());
        self
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.code, self.message.is_empty()) {
            (Some(code), false) => write!(f, "{code}: {}", self.message)?,
            (Some(code), true) => f.write_str(code)?,
            (None, _) => f.write_str(&self.message)?,
        }
        if let Some(status) = self.status {
            write!(f, " (HTTP {status})")?;
        }
        Ok(())
    }
}

pub type PortResult<T> = Result<T, CallError>;

/// One page of a paginated answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Token (or IAM marker) for the next page; `None` on the last page.
    pub next: Option<String>,
}

/// An EC2 `Filter`: values of one filter are ORed, filters are ANDed.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Filter {
    pub name: String,
    pub values: Vec<String>,
}

impl Filter {
    pub fn new(
        name: impl Into<String>,
        values: impl IntoIterator<Item = impl Into<String>>,
    ) -> Self {
        Self {
            name: name.into(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }
}

/// What GetRole returns that the facts need (attached policies come from their own call).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleData {
    pub name: String,
    pub arn: String,
    pub path: String,
    pub assume_role_policy_document: Option<String>,
    /// `PermissionsBoundary.PermissionsBoundaryArn`.
    pub permissions_boundary_arn: Option<String>,
}

/// One `SimulatePrincipalPolicy` request: every action on every resource, in one context.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Simulation {
    pub policy_source_arn: String,
    pub actions: Vec<String>,
    pub resources: Vec<String>,
    /// Context keys and their values; several values make a `stringList` key.
    pub context: Vec<(String, Vec<String>)>,
}

pub trait IamApi: Send + Sync {
    fn get_instance_profile<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, PortResult<InstanceProfileFacts>>;
    fn get_role<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<RoleData>>;
    /// One page of attached managed policy ARNs; `marker` from the previous page.
    fn list_attached_role_policies<'a>(
        &'a self,
        role_name: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>>;
    /// One page of decisions, one per (action, resource): per-resource results when IAM gives
    /// them, else the action's own.
    fn simulate_principal_policy<'a>(
        &'a self,
        simulation: &'a Simulation,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SimulatedDecision>>>;
    /// One page of a role's inline policy names.
    fn list_role_policies<'a>(
        &'a self,
        role_name: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>>;
    /// An inline policy's document.
    fn get_role_policy<'a>(
        &'a self,
        role_name: &'a str,
        policy_name: &'a str,
    ) -> BoxFuture<'a, PortResult<String>>;
    /// A managed policy's default version id.
    fn get_policy<'a>(&'a self, arn: &'a str) -> BoxFuture<'a, PortResult<String>>;
    /// A managed policy version's document.
    fn get_policy_version<'a>(
        &'a self,
        arn: &'a str,
        version: &'a str,
    ) -> BoxFuture<'a, PortResult<String>>;
    /// The ARNs of the account's OIDC providers (not paginated).
    fn list_open_id_connect_providers(&self) -> BoxFuture<'_, PortResult<Vec<String>>>;
}

/// A queue's attributes the checks read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct QueueAttributes {
    pub arn: String,
    pub policy: Option<String>,
    /// `KmsMasterKeyId`: the SSE-KMS key as the queue names it; `None` without SSE-KMS.
    pub kms_master_key_id: Option<String>,
}

pub trait SqsApi: Send + Sync {
    /// The queue's URL; absent when no queue has the name.
    fn get_queue_url<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<String>>;
    fn get_queue_attributes<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, PortResult<QueueAttributes>>;
}

/// One EventBridge event bus (ListEventBuses).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventBus {
    pub name: String,
    pub arn: String,
}

pub trait EventsApi: Send + Sync {
    /// One page of the account's event buses in the region, the default bus included.
    fn list_event_buses<'a>(
        &'a self,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<EventBus>>>;
    /// One page of the names of the rules on event bus `bus` that target `target_arn`.
    fn list_rule_names_by_target<'a>(
        &'a self,
        target_arn: &'a str,
        bus: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>>;
    /// A rule of event bus `bus`; its `event_bus` is `bus`.
    fn describe_rule<'a>(
        &'a self,
        name: &'a str,
        bus: &'a str,
    ) -> BoxFuture<'a, PortResult<EventRuleFacts>>;
}

pub trait Ec2Api: Send + Sync {
    fn describe_security_groups<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SecurityGroupFacts>>>;
    fn describe_instances<'a>(
        &'a self,
        filters: &'a [Filter],
        max_results: i32,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<InstanceFacts>>>;
    fn describe_subnets<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SubnetFacts>>>;
    fn describe_route_tables<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<RouteTableFacts>>>;
    fn describe_nat_gateways<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<NatGatewayFacts>>>;
    fn describe_vpc_endpoints<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<VpcEndpointFacts>>>;
    /// One boolean attribute of a VPC.
    fn describe_vpc_attribute<'a>(
        &'a self,
        vpc_id: &'a str,
        attribute: VpcAttribute,
    ) -> BoxFuture<'a, PortResult<bool>>;
    /// Whether the account encrypts new EBS volumes by default in this region.
    fn get_ebs_encryption_by_default(&self) -> BoxFuture<'_, PortResult<bool>>;
    /// The key EC2 encrypts volumes with when none is named (an ARN).
    fn get_ebs_default_kms_key_id(&self) -> BoxFuture<'_, PortResult<String>>;
    /// One page of the region's instance types (DescribeInstanceTypes, no filter).
    fn describe_instance_types(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<InstanceTypeFacts>>>;
    /// One page of `(instance type, zone)` offerings (DescribeInstanceTypeOfferings with
    /// `LocationType=availability-zone`, no filter).
    fn describe_instance_type_offerings(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<(String, String)>>>;
    /// One page of the account's active open On-Demand Capacity Reservations
    /// (DescribeCapacityReservations with `state=active`, `instance-match-criteria=open`).
    fn describe_open_capacity_reservations(
        &self,
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<CapacityReservationFacts>>>;
    /// One page of the images among `ids` EC2 has for the account (DescribeImages with the
    /// `image-id` filter, deprecated and disabled images included): an id it leaves out is
    /// deregistered or not shared with the account, and that is an answer, not an error (a
    /// missing id in `ImageIds` would fail the whole call with InvalidAMIID.NotFound).
    fn describe_images(
        &self,
        ids: &[String],
        next_token: Option<String>,
    ) -> BoxFuture<'_, PortResult<Page<ImageFacts>>>;
}

/// The VPC attributes the checks read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum VpcAttribute {
    EnableDnsSupport,
    EnableDnsHostnames,
}

impl VpcAttribute {
    /// The attribute's name in the EC2 API.
    pub fn as_str(self) -> &'static str {
        match self {
            VpcAttribute::EnableDnsSupport => "enableDnsSupport",
            VpcAttribute::EnableDnsHostnames => "enableDnsHostnames",
        }
    }
}

/// What DescribeKey returns that the checks read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KmsKeyData {
    pub key_id: String,
    pub arn: String,
    /// `KeyState`: `Enabled`, `Disabled`, `PendingDeletion`, ...
    pub state: String,
    /// `KeyManager`: `AWS` or `CUSTOMER`.
    pub manager: String,
}

/// What ListGrants returns of one grant that the checks read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KmsGrantData {
    pub grantee_principal: String,
    /// `Decrypt`, `CreateGrant`, ... (without the `kms:` prefix, as KMS names them).
    pub operations: Vec<String>,
    /// Whether the grant only applies under an encryption context constraint.
    pub constrained: bool,
}

pub trait KmsApi: Send + Sync {
    /// A key by id, key ARN, alias name or alias ARN; absent only on `NotFoundException`.
    fn describe_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, PortResult<KmsKeyData>>;
    /// The key policy named `default` (the only name KMS has), by key id or ARN.
    fn get_key_policy<'a>(&'a self, key: &'a str) -> BoxFuture<'a, PortResult<String>>;
    /// One page of the key's grants to `grantee` (KMS filters by grantee principal).
    fn list_grants<'a>(
        &'a self,
        key: &'a str,
        grantee: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<KmsGrantData>>>;
}

pub trait QuotasApi: Send + Sync {
    /// A quota's applied value (GetServiceQuota); absent (`NoSuchResourceException`) when
    /// Service Quotas has none for the account.
    fn get_service_quota<'a>(
        &'a self,
        service_code: &'a str,
        quota_code: &'a str,
    ) -> BoxFuture<'a, PortResult<f64>>;
}

pub trait SsmApi: Send + Sync {
    /// A parameter's value (GetParameter); absent (`ParameterNotFound`) when it does not exist.
    /// The public parameters under `/aws/service/` are readable by every account.
    fn get_parameter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<String>>;
}

pub trait EksApi: Send + Sync {
    fn describe_cluster<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<EksClusterFacts>>;
    /// One page of principal ARNs that have an access entry.
    fn list_access_entries<'a>(
        &'a self,
        cluster: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>>;
    fn describe_access_entry<'a>(
        &'a self,
        cluster: &'a str,
        principal_arn: &'a str,
    ) -> BoxFuture<'a, PortResult<AccessEntryFacts>>;
    /// One page of the ids of the Pod Identity associations of one ServiceAccount.
    fn list_pod_identity_associations<'a>(
        &'a self,
        cluster: &'a str,
        service_account: &'a ServiceAccountRef,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>>;
    /// The roles of one Pod Identity association.
    fn describe_pod_identity_association<'a>(
        &'a self,
        cluster: &'a str,
        association_id: &'a str,
    ) -> BoxFuture<'a, PortResult<PodIdentityRoles>>;
}

/// The roles of an EKS Pod Identity association (DescribePodIdentityAssociation): its role, and
/// the target role EKS assumes with it when the association has one (cross-account access).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PodIdentityRoles {
    pub role_arn: String,
    pub target_role_arn: Option<String>,
}

impl PodIdentityRoles {
    /// The association's role alone.
    pub fn role(role_arn: impl Into<String>) -> Self {
        Self {
            role_arn: role_arn.into(),
            target_role_arn: None,
        }
    }

    /// The role whose credentials the Pods get: the target when there is one.
    pub fn effective(&self) -> &str {
        self.target_role_arn.as_deref().unwrap_or(&self.role_arn)
    }
}

pub use karpenter_health_checks::plan::ServiceAccountRef;

pub trait StsApi: Send + Sync {
    fn get_caller_identity(&self) -> BoxFuture<'_, PortResult<AccountFacts>>;
}
