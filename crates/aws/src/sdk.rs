//! The ports implemented over the AWS SDK clients, with timeouts and bounded standard retries.
//! Does IO (every method is one AWS request).
//!
//! Endpoints, credentials and region come from the `SdkConfig` the caller loaded with the
//! standard chain; `aws_sdk_*::config::Builder::from(&SdkConfig)` also applies the per-service
//! `AWS_ENDPOINT_URL_<SERVICE>` overrides of the environment.

use crate::classify::classify;
use crate::ports::{
    CallError, Ec2Api, EksApi, ErrorKind, EventsApi, Filter, IamApi, Page, PortResult,
    QueueAttributes, RoleData, Service, ServiceAccountRef, Simulation, SqsApi, StsApi,
};
use aws_config::SdkConfig;
use aws_smithy_types::retry::RetryConfig;
use aws_smithy_types::timeout::TimeoutConfig;
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::{
    AccessEntryFacts, AccountFacts, EksClusterFacts, EventRuleFacts, InstanceFacts,
    InstanceProfileFacts, RoleRef, SecurityGroupFacts, SimulatedDecision,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Time limits of one SDK operation. aws-sdk-rust sets none by default but the connect timeout,
/// so a hung endpoint would block a reconcile forever without these.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Duration,
    /// One HTTP attempt.
    pub attempt: Duration,
    /// The whole operation, retries and backoff included.
    pub operation: Duration,
}

impl Timeouts {
    fn config(&self) -> TimeoutConfig {
        TimeoutConfig::builder()
            .connect_timeout(self.connect)
            .operation_attempt_timeout(self.attempt)
            .operation_timeout(self.operation)
            .build()
    }
}

/// How the SDK clients are built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SdkOptions {
    /// Every call but DescribeInstances.
    pub timeouts: Timeouts,
    /// DescribeInstances pages: 1,000 instances are megabytes of XML and take seconds.
    pub sweep_timeouts: Timeouts,
    /// Standard retry mode attempts, the first included.
    pub max_attempts: u32,
    /// First retry backoff (the SDK doubles it, with jitter, up to 20 s).
    pub initial_backoff: Duration,
}

impl Default for SdkOptions {
    fn default() -> Self {
        Self {
            timeouts: Timeouts {
                connect: Duration::from_millis(3100),
                attempt: Duration::from_secs(3),
                operation: Duration::from_secs(10),
            },
            sweep_timeouts: Timeouts {
                connect: Duration::from_millis(3100),
                attempt: Duration::from_secs(20),
                operation: Duration::from_secs(45),
            },
            max_attempts: 3,
            initial_backoff: Duration::from_secs(1),
        }
    }
}

/// The service clients behind the ports.
#[derive(Clone, Debug)]
pub struct SdkPorts {
    iam: aws_sdk_iam::Client,
    ec2: aws_sdk_ec2::Client,
    eks: aws_sdk_eks::Client,
    sts: aws_sdk_sts::Client,
    sqs: aws_sdk_sqs::Client,
    events: aws_sdk_eventbridge::Client,
    sweep_timeouts: TimeoutConfig,
}

/// Distinguishes the retry partitions of observers in one process (tests build many): the
/// standard retry quota is shared per partition name, and one observer's outage must not drain
/// another's.
static NEXT_PARTITION: AtomicU64 = AtomicU64::new(0);

impl SdkPorts {
    pub fn new(config: &SdkConfig, options: &SdkOptions) -> Self {
        let id = NEXT_PARTITION.fetch_add(1, Ordering::Relaxed);
        let partition = |service: &str| {
            aws_smithy_runtime::client::retries::RetryPartition::new(format!(
                "karpenter-health-{service}-{id}"
            ))
        };
        let retry = RetryConfig::standard()
            .with_max_attempts(options.max_attempts.max(1))
            .with_initial_backoff(options.initial_backoff);
        let timeouts = options.timeouts.config();
        macro_rules! client {
            ($sdk:ident, $name:literal) => {
                $sdk::Client::from_conf(
                    $sdk::config::Builder::from(config)
                        .retry_config(retry.clone())
                        .timeout_config(timeouts.clone())
                        .retry_partition(partition($name))
                        .build(),
                )
            };
        }
        Self {
            iam: client!(aws_sdk_iam, "iam"),
            ec2: client!(aws_sdk_ec2, "ec2"),
            eks: client!(aws_sdk_eks, "eks"),
            sts: client!(aws_sdk_sts, "sts"),
            sqs: client!(aws_sdk_sqs, "sqs"),
            events: client!(aws_sdk_eventbridge, "events"),
            sweep_timeouts: options.sweep_timeouts.config(),
        }
    }
}

fn text(s: Option<&str>) -> String {
    s.unwrap_or_default().to_owned()
}

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

/// The token of the next page. An empty one counts as none: it names no page, and sending it
/// back could only repeat the listing.
fn next_page(token: Option<&str>) -> Option<String> {
    token.filter(|t| !t.is_empty()).map(str::to_owned)
}

fn missing(service: Service, what: &str) -> CallError {
    // A success without the object is a malformed answer, not a proof of absence.
    CallError::new(
        ErrorKind::Unavailable,
        format!("{} answer without {what}", service.display()),
    )
}

fn role_ref(role: &aws_sdk_iam::types::Role) -> RoleRef {
    RoleRef {
        name: role.role_name().to_owned(),
        arn: role.arn().to_owned(),
        path: role.path().to_owned(),
    }
}

impl IamApi for SdkPorts {
    fn get_instance_profile<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, PortResult<InstanceProfileFacts>> {
        async move {
            let out = self
                .iam
                .get_instance_profile()
                .instance_profile_name(name)
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            let p = out
                .instance_profile()
                .ok_or_else(|| missing(Service::Iam, "InstanceProfile"))?;
            Ok(InstanceProfileFacts {
                name: p.instance_profile_name().to_owned(),
                arn: p.arn().to_owned(),
                path: p.path().to_owned(),
                roles: p.roles().iter().map(role_ref).collect(),
            })
        }
        .boxed()
    }

    fn get_role<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<RoleData>> {
        async move {
            let out = self
                .iam
                .get_role()
                .role_name(name)
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            let r = out.role().ok_or_else(|| missing(Service::Iam, "Role"))?;
            Ok(RoleData {
                name: r.role_name().to_owned(),
                arn: r.arn().to_owned(),
                path: r.path().to_owned(),
                assume_role_policy_document: r.assume_role_policy_document().map(str::to_owned),
                permissions_boundary_arn: r
                    .permissions_boundary()
                    .and_then(|b| b.permissions_boundary_arn())
                    .map(str::to_owned),
            })
        }
        .boxed()
    }

    fn list_attached_role_policies<'a>(
        &'a self,
        role_name: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        async move {
            let out = self
                .iam
                .list_attached_role_policies()
                .role_name(role_name)
                .set_marker(marker)
                .max_items(100)
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            Ok(Page {
                items: out
                    .attached_policies()
                    .iter()
                    .filter_map(|p| p.policy_arn().map(str::to_owned))
                    .collect(),
                next: if out.is_truncated() {
                    out.marker().map(str::to_owned)
                } else {
                    None
                },
            })
        }
        .boxed()
    }

    fn simulate_principal_policy<'a>(
        &'a self,
        simulation: &'a Simulation,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SimulatedDecision>>> {
        use aws_sdk_iam::types::{ContextEntry, ContextKeyTypeEnum};
        async move {
            let context = simulation
                .context
                .iter()
                .map(|(key, values)| {
                    ContextEntry::builder()
                        .context_key_name(key)
                        .set_context_key_values(Some(values.clone()))
                        .context_key_type(if values.len() == 1 {
                            ContextKeyTypeEnum::String
                        } else {
                            ContextKeyTypeEnum::StringList
                        })
                        .build()
                })
                .collect();
            let out = self
                .iam
                .simulate_principal_policy()
                .policy_source_arn(&simulation.policy_source_arn)
                .set_action_names(Some(simulation.actions.clone()))
                .set_resource_arns(Some(simulation.resources.clone()))
                .set_context_entries(Some(context))
                .set_marker(marker)
                .max_items(1000)
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            let mut items = Vec::new();
            for r in out.evaluation_results() {
                let action = r.eval_action_name().to_owned();
                let boundary =
                    |d: Option<&aws_sdk_iam::types::PermissionsBoundaryDecisionDetail>| {
                        d.is_some_and(|d| !d.allowed_by_permissions_boundary())
                    };
                let organizations = r
                    .organizations_decision_detail()
                    .is_some_and(|d| !d.allowed_by_organizations());
                let matched = |statements: &[aws_sdk_iam::types::Statement]| {
                    statements
                        .iter()
                        .filter_map(|s| s.source_policy_id().map(str::to_owned))
                        .collect::<Vec<_>>()
                };
                if r.resource_specific_results().is_empty() {
                    items.push(SimulatedDecision {
                        action,
                        resource: text(r.eval_resource_name()),
                        decision: r.eval_decision().as_str().to_owned(),
                        denied_by_boundary: boundary(r.permissions_boundary_decision_detail()),
                        denied_by_organizations: organizations,
                        missing_context: r.missing_context_values().to_vec(),
                        matched: matched(r.matched_statements()),
                    });
                } else {
                    for rr in r.resource_specific_results() {
                        items.push(SimulatedDecision {
                            action: action.clone(),
                            resource: rr.eval_resource_name().to_owned(),
                            decision: rr.eval_resource_decision().as_str().to_owned(),
                            denied_by_boundary: boundary(rr.permissions_boundary_decision_detail()),
                            denied_by_organizations: organizations,
                            missing_context: rr.missing_context_values().to_vec(),
                            matched: matched(rr.matched_statements()),
                        });
                    }
                }
            }
            Ok(Page {
                items,
                next: if out.is_truncated() {
                    next_page(out.marker())
                } else {
                    None
                },
            })
        }
        .boxed()
    }

    fn list_role_policies<'a>(
        &'a self,
        role_name: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        async move {
            let out = self
                .iam
                .list_role_policies()
                .role_name(role_name)
                .set_marker(marker)
                .max_items(100)
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            Ok(Page {
                items: out.policy_names().to_vec(),
                next: if out.is_truncated() {
                    next_page(out.marker())
                } else {
                    None
                },
            })
        }
        .boxed()
    }

    fn get_role_policy<'a>(
        &'a self,
        role_name: &'a str,
        policy_name: &'a str,
    ) -> BoxFuture<'a, PortResult<String>> {
        async move {
            let out = self
                .iam
                .get_role_policy()
                .role_name(role_name)
                .policy_name(policy_name)
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            Ok(out.policy_document().to_owned())
        }
        .boxed()
    }

    fn get_policy<'a>(&'a self, arn: &'a str) -> BoxFuture<'a, PortResult<String>> {
        async move {
            let out = self
                .iam
                .get_policy()
                .policy_arn(arn)
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            out.policy()
                .and_then(|p| p.default_version_id())
                .map(str::to_owned)
                .ok_or_else(|| missing(Service::Iam, "Policy.DefaultVersionId"))
        }
        .boxed()
    }

    fn get_policy_version<'a>(
        &'a self,
        arn: &'a str,
        version: &'a str,
    ) -> BoxFuture<'a, PortResult<String>> {
        async move {
            let out = self
                .iam
                .get_policy_version()
                .policy_arn(arn)
                .version_id(version)
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            out.policy_version()
                .and_then(|v| v.document())
                .map(str::to_owned)
                .ok_or_else(|| missing(Service::Iam, "PolicyVersion.Document"))
        }
        .boxed()
    }

    fn list_open_id_connect_providers(&self) -> BoxFuture<'_, PortResult<Vec<String>>> {
        async move {
            let out = self
                .iam
                .list_open_id_connect_providers()
                .send()
                .await
                .map_err(|e| classify(Service::Iam, &e))?;
            Ok(out
                .open_id_connect_provider_list()
                .iter()
                .filter_map(|p| p.arn().map(str::to_owned))
                .collect())
        }
        .boxed()
    }
}

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
                .send()
                .await
                .map_err(|e| classify(Service::Sqs, &e))?;
            let attributes = out.attributes();
            let get = |name: QueueAttributeName| attributes.and_then(|a| a.get(&name)).cloned();
            Ok(QueueAttributes {
                arn: get(QueueAttributeName::QueueArn)
                    .ok_or_else(|| missing(Service::Sqs, "QueueArn"))?,
                policy: get(QueueAttributeName::Policy).filter(|p| !p.is_empty()),
            })
        }
        .boxed()
    }
}

impl EventsApi for SdkPorts {
    fn list_rule_names_by_target<'a>(
        &'a self,
        target_arn: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        async move {
            let out = self
                .events
                .list_rule_names_by_target()
                .target_arn(target_arn)
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

    fn describe_rule<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<EventRuleFacts>> {
        async move {
            let out = self
                .events
                .describe_rule()
                .name(name)
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
            })
        }
        .boxed()
    }
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
}

impl EksApi for SdkPorts {
    fn describe_cluster<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<EksClusterFacts>> {
        async move {
            let out = self
                .eks
                .describe_cluster()
                .name(name)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            let c = out
                .cluster()
                .ok_or_else(|| missing(Service::Eks, "cluster"))?;
            Ok(EksClusterFacts {
                name: c.name().unwrap_or(name).to_owned(),
                vpc_id: c
                    .resources_vpc_config()
                    .and_then(|v| v.vpc_id())
                    .map(str::to_owned),
                authentication_mode: c
                    .access_config()
                    .and_then(|a| a.authentication_mode())
                    .map(|m| m.as_str().to_owned()),
                oidc_issuer: c
                    .identity()
                    .and_then(|i| i.oidc())
                    .and_then(|o| o.issuer())
                    .map(str::to_owned),
            })
        }
        .boxed()
    }

    fn list_access_entries<'a>(
        &'a self,
        cluster: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        async move {
            let out = self
                .eks
                .list_access_entries()
                .cluster_name(cluster)
                .max_results(100)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            Ok(Page {
                items: out.access_entries().to_vec(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_access_entry<'a>(
        &'a self,
        cluster: &'a str,
        principal_arn: &'a str,
    ) -> BoxFuture<'a, PortResult<AccessEntryFacts>> {
        async move {
            let out = self
                .eks
                .describe_access_entry()
                .cluster_name(cluster)
                .principal_arn(principal_arn)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            let e = out
                .access_entry()
                .ok_or_else(|| missing(Service::Eks, "accessEntry"))?;
            Ok(AccessEntryFacts {
                principal_arn: e.principal_arn().unwrap_or(principal_arn).to_owned(),
                type_: text(e.r#type()),
                username: e.username().map(str::to_owned),
            })
        }
        .boxed()
    }

    fn list_pod_identity_associations<'a>(
        &'a self,
        cluster: &'a str,
        service_account: &'a ServiceAccountRef,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        async move {
            let out = self
                .eks
                .list_pod_identity_associations()
                .cluster_name(cluster)
                .namespace(&service_account.namespace)
                .service_account(&service_account.name)
                .max_results(100)
                .set_next_token(next_token)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            Ok(Page {
                items: out
                    .associations()
                    .iter()
                    .filter_map(|a| a.association_id().map(str::to_owned))
                    .collect(),
                next: next_page(out.next_token()),
            })
        }
        .boxed()
    }

    fn describe_pod_identity_association<'a>(
        &'a self,
        cluster: &'a str,
        association_id: &'a str,
    ) -> BoxFuture<'a, PortResult<String>> {
        async move {
            let out = self
                .eks
                .describe_pod_identity_association()
                .cluster_name(cluster)
                .association_id(association_id)
                .send()
                .await
                .map_err(|e| classify(Service::Eks, &e))?;
            out.association()
                .and_then(|a| a.role_arn())
                .map(str::to_owned)
                .ok_or_else(|| missing(Service::Eks, "association.roleArn"))
        }
        .boxed()
    }
}

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
