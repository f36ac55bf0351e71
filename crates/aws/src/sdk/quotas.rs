//! The Service Quotas port over the AWS SDK client. Does IO (every method is one request).

use super::SdkPorts;
use crate::classify::classify;
use crate::ports::{PortResult, QuotasApi, Service};
use futures::FutureExt;
use futures::future::BoxFuture;

impl QuotasApi for SdkPorts {
    fn get_service_quota<'a>(
        &'a self,
        service_code: &'a str,
        quota_code: &'a str,
    ) -> BoxFuture<'a, PortResult<f64>> {
        async move {
            let out = self
                .quotas
                .get_service_quota()
                .service_code(service_code)
                .quota_code(quota_code)
                .send()
                .await
                .map_err(|e| classify(Service::ServiceQuotas, &e))?;
            out.quota()
                .and_then(|q| q.value())
                .ok_or_else(|| super::missing(Service::ServiceQuotas, "Quota.Value"))
        }
        .boxed()
    }
}
