//! The IAM port over the AWS SDK client. Does IO (every method is one IAM request).

use super::{SdkPorts, missing, next_page, text};
use crate::classify::classify;
use crate::ports::{IamApi, Page, PortResult, RoleData, Service, Simulation};
use futures::FutureExt;
use futures::future::BoxFuture;
use karpenter_health_checks::facts::{InstanceProfileFacts, RoleRef, SimulatedDecision};

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
