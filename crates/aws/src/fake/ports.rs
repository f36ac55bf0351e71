//! The fake's answers to each port but EC2's (IAM, SQS, EventBridge, KMS, EKS, STS, Service
//! Quotas, SSM; EC2 is in `ec2.rs`), and a fixed
//! [`AwsFactsSource`]. No IO.

use super::*;

impl IamApi for FakeAws {
    fn get_instance_profile<'a>(
        &'a self,
        name: &'a str,
    ) -> BoxFuture<'a, PortResult<InstanceProfileFacts>> {
        let name = name.to_owned();
        self.answer("GetInstanceProfile", move |s| {
            named(&s.instance_profiles, &name, "NoSuchEntity")
        })
    }

    fn get_role<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<RoleData>> {
        let name = name.to_owned();
        self.answer("GetRole", move |s| named(&s.roles, &name, "NoSuchEntity"))
    }

    fn list_attached_role_policies<'a>(
        &'a self,
        role_name: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let name = role_name.to_owned();
        self.answer("ListAttachedRolePolicies", move |s| {
            if !s.roles.contains_key(&name) {
                return Err(absent("NoSuchEntity"));
            }
            let arns = s.attached_policies.get(&name).cloned().unwrap_or_default();
            page(arns, s.iam_page_size, marker)
        })
    }

    fn simulate_principal_policy<'a>(
        &'a self,
        simulation: &'a Simulation,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<SimulatedDecision>>> {
        let simulation = simulation.clone();
        self.answer("SimulatePrincipalPolicy", move |s| {
            let role = simulation
                .policy_source_arn
                .rsplit('/')
                .next()
                .unwrap_or_default();
            if !s.roles.contains_key(role) {
                return Err(absent("NoSuchEntity"));
            }
            let mut all = Vec::new();
            for action in &simulation.actions {
                for resource in &simulation.resources {
                    all.push(SimulatedDecision {
                        action: action.clone(),
                        resource: resource.clone(),
                        decision: s
                            .simulated
                            .get(&format!("{action} {resource}"))
                            .or_else(|| s.simulated.get(action))
                            .cloned()
                            .unwrap_or_else(|| "allowed".into()),
                        denied_by_boundary: false,
                        denied_by_organizations: false,
                        missing_context: Vec::new(),
                        matched: Vec::new(),
                    });
                }
            }
            page(all, 1000, marker)
        })
    }

    fn list_role_policies<'a>(
        &'a self,
        role_name: &'a str,
        marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let name = role_name.to_owned();
        self.answer("ListRolePolicies", move |s| {
            if !s.roles.contains_key(&name) {
                return Err(absent("NoSuchEntity"));
            }
            let names = s
                .role_policies
                .get(&name)
                .map(|ps| ps.iter().map(|(n, _)| n.clone()).collect())
                .unwrap_or_default();
            page(names, s.iam_page_size, marker)
        })
    }

    fn get_role_policy<'a>(
        &'a self,
        role_name: &'a str,
        policy_name: &'a str,
    ) -> BoxFuture<'a, PortResult<String>> {
        let (role, policy) = (role_name.to_owned(), policy_name.to_owned());
        self.answer("GetRolePolicy", move |s| {
            s.role_policies
                .get(&role)
                .and_then(|ps| ps.iter().find(|(n, _)| *n == policy))
                .map(|(_, d)| d.clone())
                .ok_or_else(|| absent("NoSuchEntity"))
        })
    }

    fn get_policy<'a>(&'a self, arn: &'a str) -> BoxFuture<'a, PortResult<String>> {
        let arn = arn.to_owned();
        self.answer("GetPolicy", move |s| {
            named(&s.managed_policies, &arn, "NoSuchEntity").map(|_| "v1".to_owned())
        })
    }

    fn get_policy_version<'a>(
        &'a self,
        arn: &'a str,
        _version: &'a str,
    ) -> BoxFuture<'a, PortResult<String>> {
        let arn = arn.to_owned();
        self.answer("GetPolicyVersion", move |s| {
            named(&s.managed_policies, &arn, "NoSuchEntity")
        })
    }

    fn list_open_id_connect_providers(&self) -> BoxFuture<'_, PortResult<Vec<String>>> {
        self.answer("ListOpenIDConnectProviders", |s| {
            Ok(s.oidc_providers.clone())
        })
    }
}

impl SqsApi for FakeAws {
    fn get_queue_url<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<String>> {
        let name = name.to_owned();
        self.answer("GetQueueUrl", move |s| {
            s.queues
                .get(&name)
                .map(|(url, _)| url.clone())
                .ok_or_else(|| absent("AWS.SimpleQueueService.NonExistentQueue"))
        })
    }

    fn get_queue_attributes<'a>(
        &'a self,
        url: &'a str,
    ) -> BoxFuture<'a, PortResult<QueueAttributes>> {
        let url = url.to_owned();
        self.answer("GetQueueAttributes", move |s| {
            s.queues
                .values()
                .find(|(u, _)| *u == url)
                .map(|(_, a)| a.clone())
                .ok_or_else(|| absent("AWS.SimpleQueueService.NonExistentQueue"))
        })
    }
}

/// The ARN EventBridge gives event bus `name` in the fake's account and region.
pub fn event_bus_arn(name: &str) -> String {
    format!("arn:aws:events:us-west-2:111122223333:event-bus/{name}")
}

impl EventsApi for FakeAws {
    fn list_event_buses<'a>(
        &'a self,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<EventBus>>> {
        self.answer("ListEventBuses", move |s| {
            let mut names: Vec<String> = s.rules.iter().map(|(r, _)| r.event_bus.clone()).collect();
            names.push("default".into());
            names.sort();
            names.dedup();
            let buses = names
                .into_iter()
                .map(|name| EventBus {
                    arn: event_bus_arn(&name),
                    name,
                })
                .collect();
            page(buses, 100, next_token)
        })
    }

    fn list_rule_names_by_target<'a>(
        &'a self,
        target_arn: &'a str,
        bus: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let (target, bus) = (target_arn.to_owned(), bus.to_owned());
        self.answer("ListRuleNamesByTarget", move |s| {
            let names = s
                .rules
                .iter()
                .filter(|(r, targets)| r.event_bus == bus && targets.contains(&target))
                .map(|(r, _)| r.name.clone())
                .collect();
            page(names, 100, next_token)
        })
    }

    fn describe_rule<'a>(
        &'a self,
        name: &'a str,
        bus: &'a str,
    ) -> BoxFuture<'a, PortResult<EventRuleFacts>> {
        let (name, bus) = (name.to_owned(), bus.to_owned());
        self.answer("DescribeRule", move |s| {
            s.rules
                .iter()
                .find(|(r, _)| r.name == name && r.event_bus == bus)
                .map(|(r, _)| r.clone())
                .ok_or_else(|| absent("ResourceNotFoundException"))
        })
    }
}

impl FakeState {
    /// The key a KMS reference names: key id, key ARN, alias name or alias ARN.
    fn kms_key(&self, reference: &str) -> PortResult<(KmsKeyData, String)> {
        let tail = reference
            .rsplit_once(':')
            .map_or(reference, |(_, tail)| tail);
        let id = if tail.starts_with("alias/") {
            self.kms_aliases
                .get(tail)
                .cloned()
                .ok_or_else(|| absent("NotFoundException"))?
        } else {
            tail.strip_prefix("key/").unwrap_or(tail).to_owned()
        };
        self.kms_keys
            .get(&id)
            .cloned()
            .ok_or_else(|| absent("NotFoundException"))
    }
}

impl KmsApi for FakeAws {
    fn describe_key<'a>(&'a self, key: &'a str) -> BoxFuture<'a, PortResult<KmsKeyData>> {
        let key = key.to_owned();
        self.answer("DescribeKey", move |s| s.kms_key(&key).map(|(k, _)| k))
    }

    fn get_key_policy<'a>(&'a self, key: &'a str) -> BoxFuture<'a, PortResult<String>> {
        let key = key.to_owned();
        self.answer("GetKeyPolicy", move |s| s.kms_key(&key).map(|(_, p)| p))
    }

    /// Every grant of the key, whatever `grantee` asks for: like moto, which ignores the
    /// `GranteePrincipal` filter, so the observer's own filtering is what the tests see.
    fn list_grants<'a>(
        &'a self,
        key: &'a str,
        _grantee: &'a str,
        _marker: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<KmsGrantData>>> {
        let key = key.to_owned();
        self.answer("ListGrants", move |s| {
            let (data, _) = s.kms_key(&key)?;
            let items = s.kms_grants.get(&data.key_id).cloned().unwrap_or_default();
            Ok(Page { items, next: None })
        })
    }
}

pub(super) fn unsupported() -> CallError {
    CallError::new(ErrorKind::Unsupported, "response without an AWS error code").with_status(404)
}

impl EksApi for FakeAws {
    fn describe_cluster<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<EksClusterFacts>> {
        let name = name.to_owned();
        self.answer("DescribeCluster", move |s| {
            named(&s.clusters, &name, "ResourceNotFoundException")
        })
    }

    fn list_access_entries<'a>(
        &'a self,
        cluster: &'a str,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let cluster = cluster.to_owned();
        self.answer("ListAccessEntries", move |s| {
            s.newer_eks_api(Some(&cluster))?;
            let arns = s
                .access_entries
                .get(&cluster)
                .map(|es| es.iter().map(|e| e.principal_arn.clone()).collect())
                .unwrap_or_default();
            page(arns, s.eks_page_size, next_token)
        })
    }

    fn describe_access_entry<'a>(
        &'a self,
        cluster: &'a str,
        principal_arn: &'a str,
    ) -> BoxFuture<'a, PortResult<AccessEntryFacts>> {
        let (cluster, arn) = (cluster.to_owned(), principal_arn.to_owned());
        self.answer("DescribeAccessEntry", move |s| {
            s.newer_eks_api(None)?;
            s.access_entries
                .get(&cluster)
                .and_then(|es| es.iter().find(|e| e.principal_arn == arn))
                .cloned()
                .ok_or_else(|| absent("ResourceNotFoundException"))
        })
    }

    fn list_pod_identity_associations<'a>(
        &'a self,
        cluster: &'a str,
        service_account: &'a ServiceAccountRef,
        next_token: Option<String>,
    ) -> BoxFuture<'a, PortResult<Page<String>>> {
        let (cluster, service_account) = (cluster.to_owned(), service_account.clone());
        self.answer("ListPodIdentityAssociations", move |s| {
            s.newer_eks_api(Some(&cluster))?;
            let ids = s
                .pod_identity
                .get(&cluster)
                .into_iter()
                .flatten()
                .filter(|(sa, _, _)| *sa == service_account)
                .map(|(_, id, _)| id.clone())
                .collect();
            page(ids, s.eks_page_size, next_token)
        })
    }

    fn describe_pod_identity_association<'a>(
        &'a self,
        cluster: &'a str,
        association_id: &'a str,
    ) -> BoxFuture<'a, PortResult<PodIdentityRoles>> {
        let (cluster, id) = (cluster.to_owned(), association_id.to_owned());
        self.answer("DescribePodIdentityAssociation", move |s| {
            s.newer_eks_api(None)?;
            s.pod_identity
                .get(&cluster)
                .and_then(|all| all.iter().find(|(_, i, _)| *i == id))
                .map(|(_, _, role)| role.clone())
                .ok_or_else(|| absent("ResourceNotFoundException"))
        })
    }
}

impl StsApi for FakeAws {
    fn get_caller_identity(&self) -> BoxFuture<'_, PortResult<AccountFacts>> {
        self.answer("GetCallerIdentity", |s| Ok(s.account.clone()))
    }
}

impl QuotasApi for FakeAws {
    fn get_service_quota<'a>(
        &'a self,
        service_code: &'a str,
        quota_code: &'a str,
    ) -> BoxFuture<'a, PortResult<f64>> {
        let key = (service_code.to_owned(), quota_code.to_owned());
        self.answer("GetServiceQuota", move |s| {
            s.service_quotas
                .get(&key)
                .copied()
                .ok_or_else(|| absent("NoSuchResourceException"))
        })
    }
}

impl SsmApi for FakeAws {
    fn get_parameter<'a>(&'a self, name: &'a str) -> BoxFuture<'a, PortResult<String>> {
        let name = name.to_owned();
        self.answer("GetParameter", move |s| {
            s.ssm_parameters
                .get(&name)
                .cloned()
                .ok_or_else(|| absent("ParameterNotFound"))
        })
    }
}
