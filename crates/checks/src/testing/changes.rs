//! Ways to break the healthy facts one fact at a time (and the whole healthy [`Facts`]). Pure
//! data, no IO.

use super::aws::healthy_aws;
use super::*;

impl Facts {
    /// A Karpenter 1.8.6 setup in us-west-2 where every check passes.
    pub fn healthy() -> Self {
        let mut f = Facts {
            cluster: healthy_cluster(),
            aws: healthy_aws(),
        };
        // Asked as the adapter asks: with the alias's parameter for the cluster's minor.
        reask_simulator(&mut f);
        f
    }

    /// Applies any change; the escape hatch for facts without a dedicated builder.
    pub fn with(mut self, change: impl FnOnce(&mut Facts)) -> Self {
        change(&mut self);
        self
    }

    /// Uses `spec.instanceProfile` (Karpenter then copies it into status unchanged); when IAM
    /// has a profile of that name, pass it in `found`.
    pub fn with_instance_profile_spec(self, profile: &str, found: bool) -> Self {
        self.with(|f| {
            let spec = &mut f.cluster.node_class.spec;
            spec.role = None;
            spec.instance_profile = Some(profile.into());
            if let Some(status) = f.cluster.node_class.status.as_mut() {
                status.instance_profile = Some(profile.into());
            }
            f.aws.instance_profile = if profile.starts_with("arn:") {
                None
            } else if found {
                Some(Observed::Found(InstanceProfileFacts {
                    name: profile.into(),
                    arn: format!("arn:aws:iam::{ACCOUNT}:instance-profile/{profile}"),
                    path: "/".into(),
                    roles: vec![RoleRef {
                        name: NODE_ROLE.into(),
                        arn: role_arn(NODE_ROLE),
                        path: "/".into(),
                    }],
                }))
            } else {
                Some(Observed::Absent)
            };
        })
    }

    /// The EC2NodeClass's `spec.kubelet.maxPods`.
    pub fn with_max_pods(self, max_pods: i32) -> Self {
        self.with(|f| {
            f.cluster
                .node_class
                .spec
                .kubelet
                .get_or_insert_with(Default::default)
                .max_pods = Some(max_pods);
        })
    }

    /// The VPC CNI's `aws-node` DaemonSet with `key=value` in its env.
    pub fn with_vpc_cni_env(self, key: &str, value: &str) -> Self {
        self.with(|f| {
            if let Some(cni) = f.cluster.vpc_cni.found_mut() {
                cni.env.insert(key.into(), value.into());
            }
        })
    }

    /// The first NodePool's node template labelled `key: value`.
    pub fn with_node_pool_label(self, key: &str, value: &str) -> Self {
        self.with(|f| {
            f.cluster.node_pools.found_mut().expect("listed NodePools")[0]
                .spec
                .template
                .metadata
                .labels
                .insert(key.into(), value.into());
        })
    }

    /// The EC2NodeClass annotated `accept.karpenter-health.io/<what>: <value>`.
    pub fn with_acceptance(self, what: &str, value: &str) -> Self {
        self.with(|f| {
            f.cluster
                .node_class
                .metadata
                .annotations
                .get_or_insert_default()
                .insert(
                    format!("{}{what}", crate::acceptance::ANNOTATION_PREFIX),
                    value.into(),
                );
        })
    }

    pub fn with_region(self, region: &str) -> Self {
        self.with(|f| f.aws.region = Some(region.into()))
    }

    pub fn with_karpenter_version(self, version: &str) -> Self {
        self.with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.version = Some(version.into());
            }
        })
    }

    pub fn with_map_roles(self, map_roles: &str) -> Self {
        self.with(|f| {
            f.cluster.aws_auth = Observed::Found(AwsAuthData::new(Some(map_roles.into()), None))
        })
    }

    pub fn with_authentication_mode(self, mode: Option<&str>) -> Self {
        self.with(|f| {
            if let Observed::Found(eks) = &mut f.aws.eks_cluster {
                eks.authentication_mode = mode.map(Into::into);
            }
        })
    }

    pub fn with_access_entry(self, type_: &str) -> Self {
        self.with(|f| {
            f.aws.node_role_access_entries = Observed::Found(vec![AccessEntryFacts {
                principal_arn: role_arn(NODE_ROLE),
                type_: type_.into(),
                username: None,
            }])
        })
    }

    pub fn with_pending_pod(self, pod: PodScheduling) -> Self {
        self.with(|f| {
            if let Some(pods) = f.cluster.pending_pods.found_mut() {
                pods.push(Arc::new(pod));
            }
        })
    }

    pub fn with_node_claim(self, claim: NodeClaimFacts) -> Self {
        self.with(|f| {
            if let Some(claims) = f.cluster.node_claims.found_mut() {
                claims.push(claim);
            }
        })
    }

    /// Sets one of Karpenter's own EC2NodeClass conditions.
    pub fn with_karpenter_condition(self, condition: KarpenterCondition) -> Self {
        self.with(|f| {
            if let Some(status) = f.cluster.node_class.status.as_mut() {
                status.conditions.retain(|c| c.type_ != condition.type_);
                status.conditions.push(condition);
            }
        })
    }

    /// Configures the interruption queue `setting` and what AWS says about it.
    pub fn with_interruption_queue(
        self,
        setting: &str,
        queue: Option<Observed<QueueFacts>>,
    ) -> Self {
        self.with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.interruption_queue = Setting::Value(setting.into());
            }
            f.aws.interruption_queue = queue;
        })
    }

    /// Lets the NodePool of the fixture allow spot, with the spot service-linked role `role`.
    pub fn with_spot(self, role: Option<Observed<String>>) -> Self {
        self.with(|f| {
            if let Some(pools) = f.cluster.node_pools.found_mut() {
                for pool in pools {
                    for r in &mut pool.spec.template.spec.requirements {
                        if r.key == "karpenter.sh/capacity-type" {
                            r.values = vec!["spot".into(), "on-demand".into()];
                        }
                    }
                }
            }
            f.aws.spot_service_linked_role = role;
            // A spot NodePool adds the question of the spot service-linked role.
            reask_simulator(f);
        })
    }

    /// Adds `key operator values` to the fixture's NodePool's requirements.
    pub fn with_pool_requirement(self, key: &str, operator: &str, values: &[&str]) -> Self {
        self.with(|f| {
            if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
                pool.spec
                    .template
                    .spec
                    .requirements
                    .push(requirement(key, operator, values));
            }
        })
    }

    /// The fixture's NodePool has `limits` and its nodes provide `used` (`status.resources`),
    /// and its pending Pod can go to this EC2NodeClass only (`waiting`) or to others too.
    pub fn with_pool_usage(
        self,
        limits: &[(&str, &str)],
        used: &[(&str, &str)],
        waiting: bool,
    ) -> Self {
        self.with(|f| {
            if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
                pool.spec.limits = limits
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
                    .collect();
                pool.status.get_or_insert_with(Default::default).resources = used
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), serde_json::json!(v)))
                    .collect();
            }
            if let Observed::Found(pods) = &mut f.cluster.pending_pods {
                for pod in pods.iter_mut() {
                    std::sync::Arc::make_mut(pod).only_this_class = waiting;
                }
            }
        })
    }

    /// The fixture's NodePool has these disruption budgets (see [`budget`]), and its NodeClaim has been drifted
    /// for `drifted_mins` (not drifted when `None`).
    pub fn with_drift(
        self,
        budgets: Vec<karpenter_health_api::karpenter::Budget>,
        drifted_mins: Option<i64>,
    ) -> Self {
        self.with(|f| {
            if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
                pool.spec.disruption = Some(karpenter_health_api::karpenter::Disruption {
                    budgets: Some(budgets),
                });
            }
            if let Observed::Found(claims) = &mut f.cluster.node_claims {
                for claim in claims.iter_mut() {
                    claim.drifted = drifted_mins.map(|m| crate::facts::ClaimCondition {
                        status: karpenter_health_api::ConditionStatus::True,
                        last_transition: Some(mins_ago(m)),
                    });
                    // What NodeClaimFacts::of keeps of a drifted NodeClaim made by the pool.
                    claim.drift = drifted_mins.map(|_| crate::facts::DriftFacts {
                        node_pool: Some(NODE_POOL.into()),
                        expire_after: Some("720h".into()),
                    });
                }
            }
        })
    }

    /// Karpenter said `mins` ago, in a DisruptionBlocked Event on every NodeClaim, what blocks it.
    pub fn with_disruption_blocked(self, message: &str, mins: i64) -> Self {
        self.with(|f| {
            let names: Vec<String> = f
                .cluster
                .node_claims
                .found()
                .map(|claims| claims.iter().map(|c| c.name.clone()).collect())
                .unwrap_or_default();
            f.cluster.disruption_blocked = Observed::Found(
                names
                    .into_iter()
                    .map(|name| {
                        (
                            name,
                            crate::facts::DisruptionBlocked {
                                message: message.into(),
                                last_seen: Some(mins_ago(mins)),
                            },
                        )
                    })
                    .collect(),
            );
        })
    }

    /// Service Quotas answers `on_demand` and `spot` vCPUs for the standard instance quotas.
    pub fn with_vcpu_quotas(self, on_demand: Observed<f64>, spot: Observed<f64>) -> Self {
        self.with(|f| {
            f.aws.vcpu_quotas = Some(crate::facts::VcpuQuotas { on_demand, spot });
        })
    }

    /// The class selects capacity reservations by tag and Karpenter, reporting
    /// CapacityReservationsReady=True, found `found` (id, zone, state); the NodePool allows the
    /// capacity types `capacity_types` only.
    pub fn with_capacity_reservations(
        self,
        found: &[(&str, &str, &str)],
        capacity_types: &[&str],
    ) -> Self {
        self.with(|f| {
            let class = &mut f.cluster.node_class;
            class.spec.capacity_reservation_selector_terms =
                vec![serde_json::json!({"tags": {"team": "ml"}})];
            if let Some(status) = class.status.as_mut() {
                status.capacity_reservations = found
                    .iter()
                    .map(|(id, zone, state)| {
                        karpenter_health_api::karpenter::ResolvedCapacityReservation {
                            id: (*id).into(),
                            availability_zone: (*zone).into(),
                            instance_type: "m5.large".into(),
                            instance_match_criteria: Some("targeted".into()),
                            reservation_type: Some("default".into()),
                            state: Some((*state).into()),
                            end_time: None,
                            interruptible: None,
                        }
                    })
                    .collect();
                status.conditions.push(karpenter_condition(
                    "CapacityReservationsReady",
                    "True",
                    mins_ago(60),
                ));
            }
            if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
                let requirements = &mut pool.spec.template.spec.requirements;
                requirements.retain(|r| r.key != "karpenter.sh/capacity-type");
                requirements.push(requirement(
                    "karpenter.sh/capacity-type",
                    "In",
                    capacity_types,
                ));
            }
        })
    }

    /// The fixture's NodePool gets the template label `key`=`value`, and every pending Pod selects
    /// it (so only that NodePool may take them).
    pub fn with_pods_selecting_template_label(self, key: &str, value: &str) -> Self {
        self.with(|f| {
            if let Some(pool) = f.cluster.node_pools.found_mut().and_then(|p| p.first_mut()) {
                let labels = &mut pool.spec.template.metadata.labels;
                labels.insert(key.into(), value.into());
            }
            if let Observed::Found(pods) = &mut f.cluster.pending_pods {
                for pod in pods.iter_mut() {
                    let selector = &mut std::sync::Arc::make_mut(pod).node_selector;
                    selector.insert(key.into(), value.into());
                }
            }
        })
    }

    /// `pool` is a NodePool of the class too, beside the fixture's.
    pub fn with_node_pool_beside(self, pool: NodePool) -> Self {
        self.with(|f| {
            if let Some(pools) = f.cluster.node_pools.found_mut() {
                pools.push(pool.clone());
            }
        })
    }

    /// The account holds these active open capacity reservations: (id, instance type, zone).
    pub fn with_open_reservations(self, open: &[(&str, &str, &str)]) -> Self {
        self.with(|f| {
            f.aws.open_capacity_reservations = Some(Observed::Found(
                open.iter()
                    .map(
                        |(id, instance_type, zone)| crate::facts::CapacityReservationFacts {
                            id: (*id).into(),
                            instance_type: (*instance_type).into(),
                            zone: (*zone).into(),
                            available: Some(2),
                            platform: Some("Linux/UNIX".into()),
                            tenancy: Some("default".into()),
                        },
                    )
                    .collect(),
            ));
        })
    }

    /// The Karpenter controller's FEATURE_GATES.
    pub fn with_feature_gates(self, gates: Setting) -> Self {
        self.with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.feature_gates = gates;
            }
        })
    }

    /// Answers `decision` for `action` from IAM's simulator, `allowed` for the rest.
    pub fn with_simulated(self, action: &str, change: impl Fn(&mut SimulatedDecision)) -> Self {
        self.with(|f| {
            if let Some(PermissionFacts {
                simulated: Observed::Found(list),
                ..
            }) = &mut f.aws.controller_permissions
            {
                for d in list.iter_mut().filter(|d| d.action == action) {
                    change(d);
                }
            }
        })
    }

    /// Adds an instance of the cluster-name collision kind.
    pub fn with_cluster_instance(self, instance: InstanceFacts) -> Self {
        self.with(|f| {
            if let Observed::Found(list) = &mut f.aws.cluster_instances {
                list.push(instance);
            }
        })
    }
}
