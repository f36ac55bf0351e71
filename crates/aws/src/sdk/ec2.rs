//! The EC2 port over the AWS SDK client. Does IO (every method is one EC2 request).

use super::{SdkPorts, next_page, text};
use crate::classify::classify;
use crate::ports::{Ec2Api, Filter, Page, PortResult, Service};
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::{InstanceFacts, SecurityGroupFacts};
use std::collections::BTreeMap;

fn ec2_tags(tags: &[aws_sdk_ec2::types::Tag]) -> BTreeMap<String, String> {
    tags.iter()
        .filter_map(|t| Some((t.key()?.to_owned(), text(t.value()))))
        .collect()
}

fn ec2_filters(filters: &[Filter]) -> Vec<aws_sdk_ec2::types::Filter> {
    filters
        .iter()
        .map(|f| {
            aws_sdk_ec2::types::Filter::builder()
                .name(&f.name)
                .set_values(Some(f.values.clone()))
                .build()
        })
        .collect()
}

impl Ec2Api for SdkPorts {
    fn describe_security_groups<'a>(
        &'a self,
        filters: &'a [Filter],
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SecurityGroupFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_security_groups()
                .set_filters(Some(ec2_filters(filters)))
                .max_results(1000)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            Ok(Page {
                items: out
                    .security_groups()
                    .iter()
                    .map(|g| SecurityGroupFacts {
                        id: text(g.group_id()),
                        name: text(g.group_name()),
                        vpc_id: g.vpc_id().map(str::to_owned),
                        tags: ec2_tags(g.tags()),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_instances<'a>(
        &'a self,
        filters: &'a [Filter],
        max_results: i32,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<InstanceFacts>>> {
        async move {
            let out = self
                .ec2
                .describe_instances()
                .set_filters(Some(ec2_filters(filters)))
                .max_results(max_results)
                .set_next_token(next_token)
                .customize()
                .config_override(
                    aws_sdk_ec2::config::Builder::default()
                        .timeout_config(self.sweep_timeouts.clone()),
                )
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            let items = out
                .reservations()
                .iter()
                .flat_map(|r| r.instances())
                .map(|i| InstanceFacts {
                    id: text(i.instance_id()),
                    vpc_id: i.vpc_id().map(str::to_owned),
                    state: i
                        .state()
                        .and_then(|s| s.name())
                        .map(|n| n.as_str().to_owned())
                        .unwrap_or_default(),
                    launch_time: i
                        .launch_time()
                        .and_then(|t| jiff::Timestamp::new(t.secs(), t.subsec_nanos() as i32).ok()),
                    tags: ec2_tags(i.tags()),
                })
                .collect();
            Ok(Page {
                items,
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn get_ebs_encryption_by_default(&self) -> BoxFuture<'_, PortResult<bool>> {
        async move {
            let out = self
                .ec2
                .get_ebs_encryption_by_default()
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            out.ebs_encryption_by_default()
                .ok_or_else(|| super::missing(Service::Ec2, "EbsEncryptionByDefault"))
        }
        .boxed()
    }

    fn get_ebs_default_kms_key_id(&self) -> BoxFuture<'_, PortResult<String>> {
        async move {
            let out = self
                .ec2
                .get_ebs_default_kms_key_id()
                .send()
                .await
                .map_err(|e| classify(Service::Ec2, &e))?;
            out.kms_key_id()
                .filter(|k| !k.is_empty())
                .map(str::to_owned)
                .ok_or_else(|| super::missing(Service::Ec2, "KmsKeyId"))
        }
        .boxed()
    }
}
