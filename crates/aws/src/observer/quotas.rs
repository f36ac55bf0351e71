//! Service Quotas reads of the observer for `LimitsLeaveRoom`: the account's vCPU quotas for
//! standard on-demand and spot instances in the region (GetServiceQuota, service `ec2`), one key
//! per quota shared by every class, in the account family (an increase shows within its period,
//! or at once on evidence). Does IO (through the Service Quotas port).
//!
//! Provides the fact `vcpu_quotas`.

use super::fact_read::FactRead;
use super::{AwsObserver, AwsRequest, StaleFact};
use crate::cache::Read;
use crate::ports::Service;
use futures::join;
use karpenter_health_checks::facts::VcpuQuotas;
use karpenter_health_checks::plan::request::{ON_DEMAND_STANDARD_QUOTA, SPOT_STANDARD_QUOTA};

/// Both quotas as read.
pub(super) struct QuotaReads {
    on_demand: Read<f64>,
    spot: Read<f64>,
}

/// Not noted stale: the quotas never were (their last good answers are in `last_good`).
impl FactRead for QuotaReads {
    type Field = VcpuQuotas;

    fn current(&self) -> VcpuQuotas {
        VcpuQuotas {
            on_demand: self.on_demand.current.clone(),
            spot: self.spot.current.clone(),
        }
    }

    fn last_good(&self) -> VcpuQuotas {
        let good = |r: &Read<f64>| super::shared::good(r).unwrap_or_default();
        VcpuQuotas {
            on_demand: good(&self.on_demand),
            spot: good(&self.spot),
        }
    }

    fn note_stale(&self, _fact: &'static str, _stale: &mut Vec<StaleFact>) {}
}

impl AwsObserver {
    /// Provider of `vcpu_quotas`, read when a NodePool uses the class.
    pub(super) async fn vcpu_quotas_fact(&self, request: &AwsRequest) -> Option<QuotaReads> {
        if request.instance_types {
            Some(self.vcpu_quotas().await)
        } else {
            None
        }
    }

    async fn vcpu_quotas(&self) -> QuotaReads {
        let (on_demand, spot) = join!(
            self.service_quota(ON_DEMAND_STANDARD_QUOTA),
            self.service_quota(SPOT_STANDARD_QUOTA)
        );
        QuotaReads { on_demand, spot }
    }

    async fn service_quota(&self, code: &'static str) -> Read<f64> {
        let this = self.clone();
        self.inner
            .service_quotas
            .get(code, move || async move {
                this.load(
                    Service::ServiceQuotas,
                    "GetServiceQuota",
                    &format!("ec2 {code}"),
                    this.inner.quotas.get_service_quota("ec2", code),
                )
                .await
            })
            .await
    }
}
