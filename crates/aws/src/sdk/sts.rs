//! The STS port over the AWS SDK client. Does IO (every method is one STS request).

use super::{SdkPorts, text};
use crate::classify::classify;
use crate::ports::{PortResult, Service, StsApi};
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::AccountFacts;

impl StsApi for SdkPorts {
    fn get_caller_identity(&self) -> BoxFuture<'_, PortResult<AccountFacts>> {
        async move {
            let out = self
                .sts
                .get_caller_identity()
                .send()
                .await
                .map_err(|e| classify(Service::Sts, &e))?;
            let arn = text(out.arn());
            // arn:<partition>:sts::<account>:...
            let partition = arn.split(':').nth(1).unwrap_or_default().to_owned();
            Ok(AccountFacts {
                account_id: text(out.account()),
                partition,
            })
        }
        .boxed()
    }
}
