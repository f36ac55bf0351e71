//! How an [`AwsObserver`] is made: over the AWS SDK, or over any ports (fakes in tests), with
//! its caches in their families. No IO (the ports do it later).

use super::{AwsObserver, Inner, ObserverOptions};
use crate::cache::{Cache, Changes};
use crate::limits::Limiters;
use crate::metrics::Counters;
use crate::ports::{Ec2Api, EksApi, EventsApi, IamApi, KmsApi, QuotasApi, SqsApi, SsmApi, StsApi};
use crate::sdk::SdkPorts;
use std::sync::Arc;

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
            ports.clone(),
            ports.clone(),
            ports.clone(),
            ports.clone(),
            ports.clone(),
            ports,
            region,
            options,
        )
    }

    /// The adapter over any ports (fakes in tests).
    #[allow(clippy::too_many_arguments)]
    pub fn with_ports(
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
    ) -> Self {
        let families = options.families();
        let (ttls, account_ttls, permission_ttls, catalog_ttls) = (
            families.general,
            families.account,
            families.permissions,
            families.catalog,
        );
        let changes = Arc::new(Changes::default());
        Self {
            inner: Arc::new(Inner {
                iam,
                ec2,
                eks,
                sts,
                sqs,
                events,
                kms,
                quotas,
                ssm,
                region,
                limiters: Limiters::new(options.rate_limits),
                counters: Counters::default(),
                account: Cache::with_changes(account_ttls, changes.clone()),
                profiles: Cache::with_changes(ttls, changes.clone()),
                roles: Cache::with_changes(ttls, changes.clone()),
                attached: Cache::with_changes(ttls, changes.clone()),
                clusters: Cache::with_changes(ttls, changes.clone()),
                access: Cache::with_changes(ttls, changes.clone()),
                pod_identity: Cache::with_changes(ttls, changes.clone()),
                security_groups: Cache::with_changes(ttls, changes.clone()),
                instances: Cache::with_changes(ttls, changes.clone()),
                oidc_providers: Cache::with_changes(ttls, changes.clone()),
                simulations: Cache::with_changes(permission_ttls, changes.clone()),
                asked: Default::default(),
                inline_policies: Cache::with_changes(permission_ttls, changes.clone()),
                managed_policies: Cache::with_changes(permission_ttls, changes.clone()),
                queues: Cache::with_changes(ttls, changes.clone()),
                subnets: Cache::with_changes(ttls, changes.clone()),
                route_tables: Cache::with_changes(ttls, changes.clone()),
                nat_gateways: Cache::with_changes(ttls, changes.clone()),
                vpc_endpoints: Cache::with_changes(ttls, changes.clone()),
                vpc_attributes: Cache::with_changes(ttls, changes.clone()),
                ebs_by_default: Cache::with_changes(account_ttls, changes.clone()),
                ebs_default_key: Cache::with_changes(account_ttls, changes.clone()),
                kms_keys: Cache::with_changes(ttls, changes.clone()),
                kms_grants: Cache::with_changes(ttls, changes.clone()),
                instance_types: Cache::with_changes(catalog_ttls, changes.clone()),
                instance_type_zones: Cache::with_changes(catalog_ttls, changes.clone()),
                service_quotas: Cache::with_changes(account_ttls, changes.clone()),
                ssm_parameters: Cache::with_changes(catalog_ttls, changes.clone()),
                providers: super::providers::Caches::new(&families, &changes),
                judged_memo: Default::default(),
                options,
                changes,
            }),
        }
    }
}
