//! The SSM Parameter Store port over the AWS SDK client. Does IO (every method is one request).

use super::SdkPorts;
use crate::classify::classify;
use crate::ports::{PortResult, Service, SsmApi};
use futures::FutureExt;
use futures::future::BoxFuture;

impl SsmApi for SdkPorts {
    fn get_parameter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<String>> {
        async move {
            let out = self
                .ssm
                .get_parameter()
                .name(name)
                .send()
                .await
                .map_err(|e| classify(Service::Ssm, &e))?;
            out.parameter()
                .and_then(|p| p.value())
                .map(str::to_owned)
                .ok_or_else(|| super::missing(Service::Ssm, "Parameter.Value"))
        }
        .boxed()
    }
}
