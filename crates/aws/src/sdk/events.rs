//! The EventBridge port over the AWS SDK client. Does IO (every method is one EventBridge request).

use super::{SdkPorts, next_page, text};
use crate::classify::classify;
use crate::ports::{EventBus, EventsApi, Page, PortResult, Service};
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::EventRuleFacts;

impl EventsApi for SdkPorts {
    fn list_event_buses<'a>(
        &'a self,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<EventBus>>> {
        async move {
            let out = self
                .events
                .list_event_buses()
                .limit(100)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Events, &e))?;
            Ok(Page {
                items: out
                    .event_buses()
                    .iter()
                    .map(|b| EventBus {
                        name: text(b.name()),
                        arn: text(b.arn()),
                    })
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn list_rule_names_by_target<'a>(
        &'a self,
        target_arn: &'a str,
        bus: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        async move {
            let out = self
                .events
                .list_rule_names_by_target()
                .target_arn(target_arn)
                .event_bus_name(bus)
                .limit(100)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Events, &e))?;
            Ok(Page {
                items: out.rule_names().to_vec(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_rule<'a>(
        &'a self,
        name: &'a str,
        bus: &'a str,
    ) -> BoxFuture<'a, PortResult<EventRuleFacts>> {
        async move {
            let out = self
                .events
                .describe_rule()
                .name(name)
                .event_bus_name(bus)
                .send()
                .await
                .map_err(|e| classify(Service::Events, &e))?;
            Ok(EventRuleFacts {
                name: out.name().unwrap_or(name).to_owned(),
                arn: text(out.arn()),
                state: out
                    .state()
                    .map(|s| s.as_str().to_owned())
                    .unwrap_or_default(),
                event_pattern: out.event_pattern().map(str::to_owned),
                event_bus: out.event_bus_name().unwrap_or(bus).to_owned(),
            })
        }
        .boxed()
    }
}
