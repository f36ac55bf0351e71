//! The SQS port over the AWS SDK client. Does IO (every method is one SQS request).

use super::{SdkPorts, missing};
use crate::classify::classify;
use crate::ports::{PortResult, QueueAttributes, Service, SqsApi};
use futures::FutureExt;
use futures::future::BoxFuture;

impl SqsApi for SdkPorts {
    fn get_queue_url<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<String>> {
        async move {
            let out = self
                .sqs
                .get_queue_url()
                .queue_name(name)
                .send()
                .await
                .map_err(|e| classify(Service::Sqs, &e))?;
            out.queue_url()
                .map(str::to_owned)
                .ok_or_else(|| missing(Service::Sqs, "QueueUrl"))
        }
        .boxed()
    }

    fn get_queue_attributes<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, PortResult<QueueAttributes>> {
        use aws_sdk_sqs::types::QueueAttributeName;
        async move {
            let out = self
                .sqs
                .get_queue_attributes()
                .queue_url(url)
                .attribute_names(QueueAttributeName::QueueArn)
                .attribute_names(QueueAttributeName::Policy)
                .attribute_names(QueueAttributeName::KmsMasterKeyId)
                .send()
                .await
                .map_err(|e| classify(Service::Sqs, &e))?;
            let attributes = out.attributes();
            let get = |name: QueueAttributeName| attributes.and_then(|a| a.get(&name)).cloned();
            Ok(QueueAttributes {
                arn: get(QueueAttributeName::QueueArn)
                    .ok_or_else(|| missing(Service::Sqs, "QueueArn"))?,
                policy: get(QueueAttributeName::Policy).filter(|p| !p.is_empty()),
                kms_master_key_id: get(QueueAttributeName::KmsMasterKeyId)
                    .filter(|k| !k.trim().is_empty()),
            })
        }
        .boxed()
    }
}
