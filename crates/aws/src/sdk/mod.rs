//! The ports implemented over the AWS SDK clients, with timeouts and bounded standard retries.
//! Does IO (every method is one AWS request).
//!
//! Endpoints, credentials and region come from the `SdkConfig` the caller loaded with the
//! standard chain; `aws_sdk_*::config::Builder::from(&SdkConfig)` also applies the per-service
//! `AWS_ENDPOINT_URL_<SERVICE>` overrides of the environment.

use crate::ports::{CallError, ErrorKind, Service};
use aws_config::SdkConfig;
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

mod ec2;
mod ec2_instance_types;
mod eks;
mod events;
mod iam;
mod kms;
mod quotas;
mod sqs;
mod ssm;
mod sts;

/// Time limits of one SDK operation. aws-sdk-rust sets none by default but the connect timeout,
/// so a hung endpoint would block a reconcile forever without these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// One HTTP attempt.
    pub attempt: Duration,
    /// The whole operation, retries and backoff included.
    pub operation: Duration,
}

impl Timeouts {
    fn config(&self) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(self.connect)
            .operation_attempt_timeout(self.attempt)
            .operation_timeout(self.operation)
            .build()
    }
}

/// How the SDK clients are built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdkOptions {
    /// Every call but DescribeInstances.
    pub timeouts: Timeouts,
    /// DescribeInstances pages: 1,000 instances are megabytes of XML and take seconds.
    pub sweep_timeouts: Timeouts,
    /// Standard retry mode attempts, the first included.
    pub max_attempts: u32,
    /// First retry backoff (the SDK doubles it, with jitter, up to 20 s).
    pub initial_backoff: Duration,
}

impl Default for SdkOptions {
    fn default() -> Self {
        Self {
            timeouts: Timeouts {
                connect: Duration::from_millis(3100),
                attempt: Duration::from_secs(3),
                operation: Duration::from_secs(10),
            },
            sweep_timeouts: Timeouts {
                connect: Duration::from_millis(3100),
                attempt: Duration::from_secs(20),
                operation: Duration::from_secs(45),
            },
            max_attempts: 3,
            initial_backoff: Duration::from_secs(1),
        }
    }
}

/// The service clients behind the ports.
#[derive(Clone, Debug)]
pub struct SdkPorts {
    iam: aws_sdk_iam::Client,
    ec2: aws_sdk_ec2::Client,
    eks: aws_sdk_eks::Client,
    sts: aws_sdk_sts::Client,
    sqs: aws_sdk_sqs::Client,
    events: aws_sdk_eventbridge::Client,
    kms: aws_sdk_kms::Client,
    quotas: aws_sdk_servicequotas::Client,
    ssm: aws_sdk_ssm::Client,
    sweep_timeouts: TimeoutConfig,
}

/// Distinguishes the retry partitions of observers in one process (tests build many): the
/// standard retry quota is shared per partition name, and one observer's outage must not drain
/// another's.
static NEXT_PARTITION: AtomicU64 = AtomicU64::new(0);

impl SdkPorts {
    pub fn new(config: &SdkConfig, options: &SdkOptions) -> Self {
        let id = NEXT_PARTITION.fetch_add(1, Ordering::Relaxed);
        let partition = |service: &str| {
            aws_smithy_runtime::client::retries::RetryPartition::new(format!(
                "karpenter-health-{service}-{id}"
            ))
        };
        let retry = RetryConfig::standard()
            .with_max_attempts(options.max_attempts.max(1))
            .with_initial_backoff(options.initial_backoff);
        let timeouts = options.timeouts.config();
        macro_rules! client {
            ($sdk:ident, $name:literal) => {
                $sdk::Client::from_conf(
                    $sdk::config::Builder::from(config)
                        .retry_config(retry.clone())
                        .timeout_config(timeouts.clone())
                        .retry_partition(partition($name))
                        .build(),
                )
            };
        }
        Self {
            iam: client!(aws_sdk_iam, "iam"),
            ec2: client!(aws_sdk_ec2, "ec2"),
            eks: client!(aws_sdk_eks, "eks"),
            sts: client!(aws_sdk_sts, "sts"),
            sqs: client!(aws_sdk_sqs, "sqs"),
            events: client!(aws_sdk_eventbridge, "events"),
            kms: client!(aws_sdk_kms, "kms"),
            quotas: client!(aws_sdk_servicequotas, "servicequotas"),
            ssm: client!(aws_sdk_ssm, "ssm"),
            sweep_timeouts: options.sweep_timeouts.config(),
        }
    }
}

pub(super) fn text(s: Option<&str>) -> String {
    s.unwrap_or_default().to_owned()
}

/// The token of the next page. An empty one counts as none: it names no page, and sending it
/// back could only repeat the listing.
pub(super) fn next_page(token: Option<&str>) -> Option<String> {
    token.filter(|t| !t.is_empty()).map(str::to_owned)
}

pub(super) fn missing(service: Service, what: &str) -> CallError {
    // A success without the object is a malformed answer, not a proof of absence.
    CallError::new(
        ErrorKind::Unavailable,
        format!("{} answer without {what}", service.display()),
    )
}
