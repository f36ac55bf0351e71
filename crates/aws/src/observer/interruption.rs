//! SQS and EventBridge reads of the observer for `InterruptionHandlingReady`: the interruption
//! queue by name (GetQueueUrl, GetQueueAttributes: its ARN and policy) and the default bus's
//! rules that target it (ListRuleNamesByTarget, then DescribeRule each), cached by queue name.
//! Does IO (through the SQS and EventBridge ports).

use super::AwsObserver;
use super::shared::{Paged, because};
use crate::cache::Read;
use crate::ports::Service;
use karpenter_health_checks::facts::{EventRuleFacts, Observed, QueueFacts};

impl AwsObserver {
    pub(super) async fn interruption_queue(&self, name: &str) -> Read<QueueFacts> {
        let this = self.clone();
        let name = name.to_owned();
        self.inner
            .queues
            .get(name.clone(), move || async move {
                let sqs = &this.inner.sqs;
                let Some(url) = this
                    .load(Service::Sqs, "GetQueueUrl", &name, sqs.get_queue_url(&name))
                    .await?
                else {
                    return Ok(None);
                };
                let Some(attributes) = this
                    .load(
                        Service::Sqs,
                        "GetQueueAttributes",
                        &name,
                        sqs.get_queue_attributes(&url),
                    )
                    .await?
                else {
                    return Ok(None);
                };
                let rules = this.rules_targeting(&attributes.arn).await;
                Ok(Some(QueueFacts {
                    name: name.clone(),
                    url,
                    arn: attributes.arn,
                    policy: attributes.policy,
                    rules,
                }))
            })
            .await
    }

    async fn rules_targeting(&self, arn: &str) -> Observed<Vec<EventRuleFacts>> {
        let events = &self.inner.events;
        let mut names = Vec::new();
        let listed = self
            .pages(
                Service::Events,
                "ListRuleNamesByTarget",
                arn,
                |token| events.list_rule_names_by_target(arn, token),
                |page| names.extend(page),
            )
            .await;
        match listed {
            Ok(Paged::Complete) => {}
            Ok(Paged::Absent) => return Observed::Found(Vec::new()),
            Err(u) => return Observed::Unknown(because("EventBridge rules not read", &u)),
        }
        let mut rules = Vec::new();
        for name in names {
            match self
                .load(
                    Service::Events,
                    "DescribeRule",
                    &name,
                    events.describe_rule(&name),
                )
                .await
            {
                Ok(Some(rule)) => rules.push(rule),
                // Deleted since the listing.
                Ok(None) => {}
                Err(u) => return Observed::Unknown(u),
            }
        }
        rules.sort_by(|a, b| a.name.cmp(&b.name));
        Observed::Found(rules)
    }
}
