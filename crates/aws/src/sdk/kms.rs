//! The KMS port over the AWS SDK client. Does IO (every method is one KMS request).

use super::{SdkPorts, missing, next_page, text};
use crate::classify::classify;
use crate::ports::{KmsApi, KmsGrantData, KmsKeyData, Page, PortResult, Service};
use futures::FutureExt;
use futures::future::BoxFuture;

impl KmsApi for SdkPorts {
    fn describe_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, PortResult<KmsKeyData>> {
        async move {
            let out = self
                .kms
                .describe_key()
                .key_id(key)
                .send()
                .await
                .map_err(|e| classify(Service::Kms, &e))?;
            let meta = out
                .key_metadata()
                .ok_or_else(|| missing(Service::Kms, "KeyMetadata"))?;
            Ok(KmsKeyData {
                key_id: meta.key_id().to_owned(),
                arn: text(meta.arn()),
                state: meta
                    .key_state()
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default(),
                manager: meta
                    .key_manager()
                    .map(|m| m.as_str().to_owned())
                    .unwrap_or_default(),
            })
        }
        .boxed()
    }

    fn get_key_policy<'a>(&'a self, key: &'a str) -> BoxFuture<'a, PortResult<String>> {
        async move {
            let out = self
                .kms
                .get_key_policy()
                .key_id(key)
                .policy_name("default")
                .send()
                .await
                .map_err(|e| classify(Service::Kms, &e))?;
            out.policy()
                .map(str::to_owned)
                .ok_or_else(|| missing(Service::Kms, "Policy"))
        }
        .boxed()
    }

    fn list_grants<'a>(
        &'a self,
        key: &'a str,
        grantee: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<KmsGrantData>>> {
        async move {
            let out = self
                .kms
                .list_grants()
                .key_id(key)
                .grantee_principal(grantee)
                .set_marker(marker)
                .send()
                .await
                .map_err(|e| classify(Service::Kms, &e))?;
            let items = out
                .grants()
                .iter()
                .map(|g| KmsGrantData {
                    grantee_principal: text(g.grantee_principal()),
                    operations: g
                        .operations()
                        .iter()
                        .map(|o| o.as_str().to_owned())
                        .collect(),
                    constrained: g.constraints().is_some_and(|c| {
                        c.encryption_context_subset().is_some()
                            || c.encryption_context_equals().is_some()
                    }),
                })
                .collect();
            // KMS sends a marker only with `Truncated`; without it there is no next page.
            let next = next_page(out.next_marker().filter(|_| out.truncated()));
            Ok(Page { items, next })
        }
        .boxed()
    }
}
