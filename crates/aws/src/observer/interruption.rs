//! SQS, EventBridge and KMS reads of the observer for `InterruptionHandlingReady`: the
//! interruption queue by name (GetQueueUrl, GetQueueAttributes: its ARN, policy and SSE-KMS key),
//! the key (DescribeKey, GetKeyPolicy), the rules of every event bus that target the queue
//! (ListEventBuses, ListRuleNamesByTarget per bus, DescribeRule each), and for a custom bus with
//! such rules the default bus's rules that forward to it; cached by queue name. Does IO (through
//! the SQS, EventBridge and KMS ports).
//!
//! Provides the fact `interruption_queue`.

use super::shared::{Paged, because};
use super::{AwsObserver, AwsRequest};
use crate::cache::Read;
use crate::ports::{EventBus, Service};
use karpenter_health_checks::facts::{EventRuleFacts, Observed, QueueFacts, Unobserved};
use std::collections::BTreeMap;

/// The account's default event bus, where AWS services put their events.
const DEFAULT_BUS: &str = "default";

/// What targets one queue: the rules of every bus, and what feeds each custom bus among them.
type Targeting = (
    Observed<Vec<EventRuleFacts>>,
    BTreeMap<String, Observed<Vec<EventRuleFacts>>>,
);

impl AwsObserver {
    /// Provider of `interruption_queue`, read when Karpenter is given a queue name.
    pub(super) async fn interruption_queue_fact(
        &self,
        request: &AwsRequest,
    ) -> Option<Read<QueueFacts>> {
        match request
            .interruption_queue
            .as_deref()
            .filter(|q| !q.is_empty())
        {
            Some(name) => Some(self.interruption_queue(name).await),
            None => None,
        }
    }

    async fn interruption_queue(&self, name: &str) -> Read<QueueFacts> {
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
                let (rules, bus_forwarders) = this.rules_targeting(&attributes.arn).await;
                // The AWS managed key for SQS is judged by its name alone (EventBridge can never
                // use it); any other key is read with its policy.
                let kms_key = match attributes.kms_master_key_id.as_deref() {
                    Some(key) if !key.trim().ends_with("alias/aws/sqs") => {
                        Some(this.kms_key_and_policy(key).await.current)
                    }
                    _ => None,
                };
                Ok(Some(QueueFacts {
                    name: name.clone(),
                    url,
                    arn: attributes.arn,
                    policy: attributes.policy,
                    kms_master_key_id: attributes.kms_master_key_id,
                    kms_key,
                    rules,
                    bus_forwarders,
                }))
            })
            .await
    }

    /// The rules of every event bus that target `queue_arn`, and for each custom bus among them
    /// the default bus's rules that target that bus.
    async fn rules_targeting(&self, queue_arn: &str) -> Targeting {
        let events = &self.inner.events;
        let mut buses: Vec<EventBus> = Vec::new();
        let listed = self
            .pages(
                Service::Events,
                "ListEventBuses",
                "",
                |token| events.list_event_buses(token),
                |page| buses.extend(page),
            )
            .await;
        if let Err(u) = listed {
            let u = because("EventBridge event buses not listed", &u);
            return (Observed::Unknown(u), BTreeMap::new());
        }
        if !buses.iter().any(|b| b.name == DEFAULT_BUS) {
            buses.push(EventBus {
                name: DEFAULT_BUS.into(),
                arn: String::new(),
            });
        }
        let mut rules = Vec::new();
        let mut forwarders = BTreeMap::new();
        for bus in buses {
            match self.rules_on_bus(queue_arn, &bus.name).await {
                Ok(found) => {
                    if !found.is_empty() && bus.name != DEFAULT_BUS && !bus.arn.is_empty() {
                        let feeding = match self.rules_on_bus(&bus.arn, DEFAULT_BUS).await {
                            Ok(feeding) => Observed::Found(feeding),
                            Err(u) => Observed::Unknown(u),
                        };
                        forwarders.insert(bus.name.clone(), feeding);
                    }
                    rules.extend(found);
                }
                Err(u) => return (Observed::Unknown(u), BTreeMap::new()),
            }
        }
        rules.sort_by(|a, b| (&a.event_bus, &a.name).cmp(&(&b.event_bus, &b.name)));
        (Observed::Found(rules), forwarders)
    }

    /// The rules of event bus `bus` that target `target_arn`.
    async fn rules_on_bus(
        &self,
        target_arn: &str,
        bus: &str,
    ) -> Result<Vec<EventRuleFacts>, Unobserved> {
        let events = &self.inner.events;
        let mut names = Vec::new();
        let listed = self
            .pages(
                Service::Events,
                "ListRuleNamesByTarget",
                target_arn,
                |token| events.list_rule_names_by_target(target_arn, bus, token),
                |page| names.extend(page),
            )
            .await;
        match listed {
            Ok(Paged::Complete) => {}
            Ok(Paged::Absent) => return Ok(Vec::new()),
            Err(u) => return Err(because("EventBridge rules not read", &u)),
        }
        let mut rules = Vec::new();
        for name in names {
            match self
                .load(
                    Service::Events,
                    "DescribeRule",
                    &name,
                    events.describe_rule(&name, bus),
                )
                .await
            {
                Ok(Some(rule)) => rules.push(rule),
                // Deleted since the listing.
                Ok(None) => {}
                Err(u) => return Err(u),
            }
        }
        Ok(rules)
    }
}
