//! Seeds the interruption path in moto: SQS queues (with a policy, SSE attributes), EventBridge
//! event buses and rules targeting them, as Karpenter's getting-started template and the setups
//! around it make them. Does IO (moto, through the AWS SDK).

use super::AwsSeeder;
use anyhow::{Context, Result};
use aws_sdk_sqs::types::QueueAttributeName;
use serde_json::json;

impl AwsSeeder {
    /// An SQS queue with `policy` (none when `None`); returns its ARN.
    pub async fn queue(&self, name: &str, policy: Option<&str>) -> Result<String> {
        let mut create = self.sqs.create_queue().queue_name(name);
        if let Some(policy) = policy {
            create = create.attributes(QueueAttributeName::Policy, policy);
        }
        let url = create
            .send()
            .await
            .with_context(|| format!("creating queue {name}"))?
            .queue_url()
            .context("queue url")?
            .to_owned();
        let attributes = self
            .sqs
            .get_queue_attributes()
            .queue_url(&url)
            .attribute_names(QueueAttributeName::QueueArn)
            .send()
            .await?;
        attributes
            .attributes()
            .and_then(|a| a.get(&QueueAttributeName::QueueArn))
            .cloned()
            .context("queue arn")
    }

    /// Replaces the policy of queue `name`.
    pub async fn set_queue_policy(&self, name: &str, policy: &str) -> Result<()> {
        let url = self.sqs.get_queue_url().queue_name(name).send().await?;
        self.sqs
            .set_queue_attributes()
            .queue_url(url.queue_url().context("queue url")?)
            .attributes(QueueAttributeName::Policy, policy)
            .send()
            .await
            .with_context(|| format!("setting the policy of queue {name}"))?;
        Ok(())
    }

    pub async fn delete_queue(&self, name: &str) -> Result<()> {
        let url = self.sqs.get_queue_url().queue_name(name).send().await?;
        self.sqs
            .delete_queue()
            .queue_url(url.queue_url().context("queue url")?)
            .send()
            .await?;
        Ok(())
    }

    /// An EventBridge rule on the default bus matching `source`/`detail_type`, targeting
    /// `target_arn`.
    pub async fn rule(
        &self,
        name: &str,
        source: &str,
        detail_type: &str,
        target_arn: &str,
    ) -> Result<()> {
        let pattern = json!({"source": [source], "detail-type": [detail_type]}).to_string();
        self.events
            .put_rule()
            .name(name)
            .event_pattern(pattern)
            .send()
            .await
            .with_context(|| format!("putting rule {name}"))?;
        self.events
            .put_targets()
            .rule(name)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("KarpenterInterruptionQueueTarget")
                    .arn(target_arn)
                    .build()?,
            )
            .send()
            .await
            .with_context(|| format!("targeting rule {name}"))?;
        Ok(())
    }

    /// Removes the rule's target and the rule.
    pub async fn delete_rule(&self, name: &str) -> Result<()> {
        self.events
            .remove_targets()
            .rule(name)
            .ids("KarpenterInterruptionQueueTarget")
            .send()
            .await?;
        self.events.delete_rule().name(name).send().await?;
        Ok(())
    }
    /// Karpenter's interruption queue as its getting-started template makes it: queue `name`
    /// with a policy admitting EventBridge and SQS, and the EventBridge rules `<name>-<kind>`
    /// for the events Karpenter handles. Returns the queue's ARN.
    pub async fn interruption_queue(&self, name: &str) -> Result<String> {
        let arn = self.queue(name, None).await?;
        self.set_queue_policy(name, &interruption_queue_policy(&arn))
            .await?;
        for (rule, source, detail) in INTERRUPTION_RULES {
            self.rule(&format!("{name}-{rule}"), source, detail, &arn)
                .await?;
        }
        Ok(arn)
    }

    /// Sets attributes of queue `name` in one call (`KmsMasterKeyId`, `Policy`, ...). moto
    /// forgets a queue's policy when `KmsMasterKeyId` is set without it (SQS keeps it), so a
    /// test that changes the key sends the policy beside it.
    pub async fn set_queue_attributes(
        &self,
        name: &str,
        attributes: &[(QueueAttributeName, &str)],
    ) -> Result<()> {
        let url = self.sqs.get_queue_url().queue_name(name).send().await?;
        let mut set = self
            .sqs
            .set_queue_attributes()
            .queue_url(url.queue_url().context("queue url")?);
        for (attribute, value) in attributes {
            set = set.attributes(attribute.clone(), *value);
        }
        set.send()
            .await
            .with_context(|| format!("setting attributes of queue {name}"))?;
        Ok(())
    }

    /// A custom EventBridge event bus; returns its ARN.
    pub async fn event_bus(&self, name: &str) -> Result<String> {
        let out = self
            .events
            .create_event_bus()
            .name(name)
            .send()
            .await
            .with_context(|| format!("creating event bus {name}"))?;
        out.event_bus_arn()
            .map(str::to_owned)
            .context("event bus arn")
    }

    /// A rule on event bus `bus` with event pattern `pattern`, targeting `target_arn` (a queue,
    /// or another bus).
    pub async fn rule_on_bus(
        &self,
        bus: &str,
        name: &str,
        pattern: &serde_json::Value,
        target_arn: &str,
    ) -> Result<()> {
        self.events
            .put_rule()
            .name(name)
            .event_bus_name(bus)
            .event_pattern(pattern.to_string())
            .send()
            .await
            .with_context(|| format!("putting rule {name} on {bus}"))?;
        self.events
            .put_targets()
            .rule(name)
            .event_bus_name(bus)
            .targets(
                aws_sdk_eventbridge::types::Target::builder()
                    .id("Target")
                    .arn(target_arn)
                    .build()?,
            )
            .send()
            .await
            .with_context(|| format!("targeting rule {name} on {bus}"))?;
        Ok(())
    }
}

/// The EventBridge rules of Karpenter's getting-started template: name suffix, source and
/// detail type.
pub const INTERRUPTION_RULES: [(&str, &str, &str); 4] = [
    ("spot", "aws.ec2", "EC2 Spot Instance Interruption Warning"),
    (
        "rebalance",
        "aws.ec2",
        "EC2 Instance Rebalance Recommendation",
    ),
    ("state", "aws.ec2", "EC2 Instance State-change Notification"),
    ("health", "aws.health", "AWS Health Event"),
];

/// The queue policy of Karpenter's getting-started template for the queue `arn`.
pub fn interruption_queue_policy(arn: &str) -> String {
    json!({"Id": "EC2InterruptionPolicy", "Statement": [
        {"Effect": "Allow", "Principal": {"Service": ["events.amazonaws.com", "sqs.amazonaws.com"]},
         "Action": "sqs:SendMessage", "Resource": arn},
        {"Sid": "DenyHTTP", "Effect": "Deny", "Action": "sqs:*", "Resource": arn,
         "Condition": {"Bool": {"aws:SecureTransport": false}}, "Principal": "*"},
    ]})
    .to_string()
}
