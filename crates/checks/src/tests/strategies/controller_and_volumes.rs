//! The generators of the controller's wiring (issue 11) and of what a node needs to boot and
//! this Karpenter to run (issue 12), and how each mutation bends the facts. Pure.

use super::*;

/// Mutations of what a launched node needs to boot and what this Karpenter needs to run.
#[derive(Clone, Debug)]
pub(crate) enum Beyond {
    /// The one volume names this key; KMS answers with this state and policy, or absent.
    VolumeKey(String, String, String, bool),
    /// The volume's key delegates to IAM (the account root), and IAM's simulator answers this
    /// decision for the controller's role.
    KeyDelegated(String),
    /// No volume is encrypted and the account does not encrypt by default.
    Unencrypted,
    /// The EKS cluster's Kubernetes version.
    KubernetesVersion(String),
    /// A CRD (by index) loses a table field (by index).
    CrdField(usize, usize),
    /// A CRD (by index) still stores v1beta1.
    StoredV1beta1(usize),
    /// A CRD (by index) converts through this Service, whose endpoints are: absent (0), none
    /// ready (1), ready (2), unknown (3).
    Conversion(usize, u8),
    /// A NodePool asks for this architecture (or none) and the class's AMIs are built for these.
    PoolArch(Option<String>, Vec<String>),
    /// A NodePool with this requirement on a modelled instance-type key.
    PoolRequirement(String, String, Vec<String>),
    /// The NodePool's cpu limit and cpu used, and whether its pending Pod can only go here.
    PoolUsage(String, Option<String>, bool),
    /// Service Quotas' on-demand value (absent when `None`).
    Quota(Option<u8>),
    /// The NodePool's one budget (nodes, reasons, scheduled) and how long its NodeClaim has been
    /// drifted.
    Drift(String, Vec<String>, bool, Option<i64>),
    /// The class's alias, and which of its SSM parameters answer (by index: found, absent or
    /// denied).
    /// An alias, the cluster's minor, and the answer to each parameter it reads.
    AmiAlias(String, String, Vec<u8>),
    /// The class's amiFamily and the names of the images Karpenter resolved.
    AmiFamily(String, Vec<String>),
    /// Image ids the class names, and per id EC2's answer: 0 available, 1 gone, 2 disabled,
    /// 3 deprecated within days.
    ImageIds(Vec<u8>),
    /// The reservations Karpenter found (zone, state), the capacity types the NodePool allows,
    /// and FEATURE_GATES.
    Reservations(Vec<(String, String)>, Vec<String>, Option<String>),
}

/// Mutations of the controller's wiring: its identity, trust, permissions, queue and spot role.
#[derive(Clone, Debug)]
pub(crate) enum Wiring {
    /// The interruption queue setting and what AWS says about the queue (0..=7).
    Queue(String, u8),
    /// Spot allowed, with the service-linked role found (0), absent (1) or unknown (2).
    Spot(u8),
    /// Where nodes land (issue 12): subnets and their network path.
    Network(NetworkChange),
    /// The controller role's trust policy.
    Trust(String),
    /// IAM's simulator's answer for one action: decision, boundary, organizations, missing keys.
    Simulated(String, String, bool, bool, bool),
    NoOidcProviders,
    ControllerRoleAbsent,
    NoIdentity,
    /// The role comes from Pod Identity, with this trust policy.
    PodIdentity(String),
    /// The simulator denied; the role's own policy is this document.
    Local(String),
    DryRun,
}

pub(crate) fn beyond() -> impl Strategy<Value = Beyond> {
    // The volume key has four dimensions to hit (key, state, policy, found): it gets more draws,
    // or the generator rarely reaches KmsKeyPolicyDeniesEc2 once the other mutations dilute it.
    prop_oneof![
        2 => (
            text(&[KMS_KEY, "alias/ebs", "alias/aws/ebs"]),
            text(&[
                "Enabled",
                "Disabled",
                "PendingDeletion",
                "PendingImport",
                "Creating"
            ]),
            text(&[&default_key_policy(), LAMBDA_ONLY_KEY_POLICY, "{"]),
            any::<bool>()
        )
            .prop_map(|(k, st, p, a)| Beyond::VolumeKey(k, st, p, a)),
        1 => Just(Beyond::Unencrypted),
        1 => text(&["allowed", "implicitDeny", "explicitDeny"]).prop_map(Beyond::KeyDelegated),
        1 => text(&["1.29", "1.31", "1.36", "1.99", "v1.30.2-eks-1"])
            .prop_map(Beyond::KubernetesVersion),
        1 => (0usize..3, 0usize..8).prop_map(|(c, f)| Beyond::CrdField(c, f)),
        1 => (0usize..3).prop_map(Beyond::StoredV1beta1),
        1 => (0usize..3, 0u8..4).prop_map(|(c, s)| Beyond::Conversion(c, s)),
        1 => (
            prop::option::of(text(&["amd64", "arm64"])),
            prop::collection::vec(text(&["amd64", "arm64"]), 0..3)
        )
            .prop_map(|(pool, amis)| Beyond::PoolArch(pool, amis)),
        1 => (
            text(&[
                "karpenter.k8s.aws/instance-family",
                "karpenter.k8s.aws/instance-category",
                "karpenter.k8s.aws/instance-generation",
                "karpenter.k8s.aws/instance-size",
                "karpenter.k8s.aws/instance-cpu",
                "karpenter.k8s.aws/instance-memory",
                "topology.kubernetes.io/zone",
                "karpenter.sh/capacity-type",
            ]),
            text(&["In", "NotIn", "Gt", "Lt", "Exists", "DoesNotExist"]),
            prop::collection::vec(text(&["m5", "c", "6", "large", "4", "8192", "us-west-2a", "us-west-2d", "spot"]), 0..3)
        )
            .prop_map(|(k, op, values)| Beyond::PoolRequirement(k, op, values)),
        1 => (
            text(&["1", "16", "1000", "500m", "lots"]),
            prop::option::of(text(&["0", "16", "1000", "15500m"])),
            any::<bool>()
        )
            .prop_map(|(limit, used, waiting)| Beyond::PoolUsage(limit, used, waiting)),
        1 => prop::option::of(0u8..8).prop_map(Beyond::Quota),
        1 => (
            text(&["0", "0%", "10%", "1"]),
            prop::collection::vec(text(&["Drifted", "Underutilized", "Empty"]), 0..2),
            any::<bool>(),
            prop::option::of(0i64..120)
        )
            .prop_map(|(nodes, reasons, scheduled, mins)| Beyond::Drift(nodes, reasons, scheduled, mins)),
        1 => (
            text(&["al2023@latest", "al2023@v20240807", "al2@v20240807", "bottlerocket@v1.20.0", "windows2022@latest", "windows2025@latest"]),
            text(&["1.29", "1.32", "1.33"]),
            prop::collection::vec(0u8..3, 0..16)
        )
            .prop_map(|(alias, minor, answers)| Beyond::AmiAlias(alias, minor, answers)),
        1 => (
            text(&["AL2", "AL2023", "Bottlerocket", "Custom", "Windows2022"]),
            prop::collection::vec(text(&[
                "amazon-eks-node-al2023-x86_64-standard-1.29-v20240807",
                "amazon-eks-node-1.29-v20240807",
                "bottlerocket-aws-k8s-1.29-x86_64-v1.20.0-abcdef12",
                "Windows_Server-2022-English-Core-EKS_Optimized-1.29-2024.10.08",
                "golden-image-2024",
            ]), 0..3)
        )
            .prop_map(|(family, names)| Beyond::AmiFamily(family, names)),
        1 => prop::collection::vec(0u8..4, 1..3).prop_map(Beyond::ImageIds),
        1 => (
            prop::collection::vec(
                (text(&["us-west-2a", "us-west-2c"]), text(&["active", "expiring"])),
                0..3
            ),
            prop::collection::vec(text(&["reserved", "on-demand", "spot"]), 1..3),
            prop::option::of(text(&["ReservedCapacity=false", "ReservedCapacity=true", "NodeRepair=true"]))
        )
            .prop_map(|(found, types, gates)| Beyond::Reservations(found, types, gates)),
    ]
}

pub(crate) fn apply_beyond(f: &mut Facts, b: &Beyond) {
    use crate::karpenter_versions::CRD_FIELDS;
    use karpenter_health_api::karpenter::{BlockDevice, BlockDeviceMapping};
    let crd_name = |i: usize| current_crds()[i % 3].name.clone();
    match b {
        Beyond::PoolArch(pool_arch, ami_archs) => {
            let amis: Vec<&str> = ami_archs.iter().map(String::as_str).collect();
            let mut changed = f.clone().with_ami_architectures(&amis);
            if let Some(arch) = pool_arch {
                changed = changed.with_pool_requirement("kubernetes.io/arch", "In", &[arch]);
            }
            *f = changed;
        }
        Beyond::PoolUsage(limit, used, waiting) => {
            let used: Vec<(&str, &str)> = used.iter().map(|u| ("cpu", u.as_str())).collect();
            *f = f
                .clone()
                .with_pool_usage(&[("cpu", limit.as_str())], &used, *waiting);
        }
        Beyond::Drift(nodes, reasons, scheduled, mins) => {
            let reasons: Vec<&str> = reasons.iter().map(String::as_str).collect();
            let budget = budget(nodes, &reasons, scheduled.then_some("0 22 * * *"));
            *f = f.clone().with_drift(vec![budget], *mins);
        }
        Beyond::AmiAlias(alias, minor, answers) => {
            let names = crate::plan::ami_alias::Alias::parse(alias)
                .map(|a| a.parameters_to_read(minor))
                .unwrap_or_default();
            let answer = |name: &str| {
                let i = names.iter().position(|n| n == name).unwrap_or(0);
                match answers.get(i).copied().unwrap_or(1) {
                    0 => Observed::Found("ami-0generated".to_owned()),
                    1 => Observed::Absent,
                    _ => Observed::unknown(UnknownCause::AccessDenied, "ssm:GetParameter denied"),
                }
            };
            *f = f.clone().with_ami_alias(alias, minor, answer);
        }
        Beyond::Reservations(found, types, gates) => {
            let found: Vec<(String, &str, &str)> = found
                .iter()
                .enumerate()
                .map(|(i, (zone, state))| (format!("cr-0{i}"), zone.as_str(), state.as_str()))
                .collect();
            let found: Vec<(&str, &str, &str)> = found
                .iter()
                .map(|(id, z, s)| (id.as_str(), *z, *s))
                .collect();
            let types: Vec<&str> = types.iter().map(String::as_str).collect();
            let gates = gates
                .clone()
                .map_or(crate::facts::Setting::Unset, crate::facts::Setting::Value);
            *f = f
                .clone()
                .with_capacity_reservations(&found, &types)
                .with_feature_gates(gates);
        }
        Beyond::AmiFamily(family, names) => {
            let names: Vec<&str> = names.iter().map(String::as_str).collect();
            *f = f.clone().with_ami_family(family, &names);
        }
        Beyond::ImageIds(answers) => {
            let ids: Vec<String> = (0..answers.len()).map(|i| format!("ami-0{i}")).collect();
            let answered = ids
                .iter()
                .zip(answers)
                .filter_map(|(id, answer)| match answer {
                    0 => Some(crate::testing::image(id, "available", None)),
                    2 => Some(crate::testing::image(id, "disabled", None)),
                    3 => Some(crate::testing::image(
                        id,
                        "available",
                        Some(crate::testing::now() + jiff::SignedDuration::from_hours(48)),
                    )),
                    _ => None,
                })
                .collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            *f = f.clone().with_image_ids(&ids, answered);
        }
        Beyond::Quota(on_demand) => {
            let on_demand = on_demand.map_or(Observed::Absent, |q| Observed::Found(f64::from(q)));
            *f = f.clone().with_vcpu_quotas(on_demand, Observed::Found(64.0));
        }
        Beyond::PoolRequirement(key, op, values) => {
            let values: Vec<&str> = values.iter().map(String::as_str).collect();
            *f = f.clone().with_pool_requirement(key, op, &values);
        }
        Beyond::VolumeKey(key, state, policy, absent) => {
            let found = if *absent {
                Observed::Absent
            } else {
                Observed::Found(kms_key(key, state, policy))
            };
            *f = f.clone().with_volume_key(key, found);
        }
        Beyond::KeyDelegated(decision) => {
            let mut key = kms_key(KMS_KEY, "Enabled", &default_key_policy());
            if let Observed::Found(decisions) = &mut key.controller_iam {
                for d in decisions {
                    d.decision = decision.clone();
                }
            }
            *f = f.clone().with_volume_key(KMS_KEY, Observed::Found(key));
        }
        Beyond::Unencrypted => {
            f.cluster.node_class.spec.block_device_mappings = vec![BlockDeviceMapping {
                device_name: Some("/dev/xvda".into()),
                ebs: Some(BlockDevice::default()),
            }];
        }
        Beyond::KubernetesVersion(v) => {
            if let Observed::Found(e) = &mut f.aws.eks_cluster {
                e.version = Some(v.clone());
            }
        }
        Beyond::CrdField(c, i) => {
            let path = CRD_FIELDS[i % CRD_FIELDS.len()].path;
            *f = f.clone().with_crd(&crd_name(*c), |crd| {
                crd.fields.remove(path);
            });
        }
        Beyond::StoredV1beta1(c) => {
            *f = f.clone().with_crd(&crd_name(*c), |crd| {
                crd.stored_versions.push("v1beta1".into())
            });
        }
        Beyond::Conversion(c, state) => {
            let svc = "kube-system/karpenter".to_owned();
            *f = f.clone().with_crd(&crd_name(*c), |crd| {
                crd.conversion_service = Some(svc.clone());
                // Odd states also serve v1beta1, so the webhook is called.
                if state % 2 == 1 {
                    crd.served_versions.push("v1beta1".into());
                }
            });
            let endpoints = match state {
                0 => Observed::Absent,
                1 => Observed::Found(0),
                2 => Observed::Found(2),
                _ => unknown(UnknownCause::AccessDenied),
            };
            f.cluster.service_endpoints.insert(svc, endpoints);
        }
    }
}

const OWN_POLICY: &str = r#"{"Statement":[{"Effect":"Allow","Action":["iam:PassRole","ec2:*","iam:*InstanceProfile"],"Resource":"*"}]}"#;
const DENY_PASS: &str = r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*"},{"Effect":"Deny","Action":"iam:PassRole","Resource":"*"}]}"#;
const VPC_ONLY: &str = r#"{"Statement":[{"Effect":"Allow","Action":"*","Resource":"*","Condition":{"StringEquals":{"aws:SourceVpc":"vpc-1"}}}]}"#;

pub(crate) fn wiring() -> impl Strategy<Value = Wiring> {
    prop_oneof![
        (
            text(&[
                QUEUE,
                "arn:aws:sqs:us-west-2:111122223333:q",
                "https://sqs.us-west-2.amazonaws.com/1/q"
            ]),
            0u8..8
        )
            .prop_map(|(q, shape)| Wiring::Queue(q, shape)),
        (0u8..3).prop_map(Wiring::Spot),
        (0..NetworkChange::ALL.len()).prop_map(|i| Wiring::Network(NetworkChange::ALL[i])),
        text(&[
            &irsa_trust_policy(KARPENTER_SERVICE_ACCOUNT),
            &irsa_trust_policy("other/sa"),
            &trust_policy_for("pods.eks.amazonaws.com"),
            "garbage"
        ])
        .prop_map(Wiring::Trust),
        (
            text(&[
                "iam:PassRole",
                "ec2:RunInstances",
                "iam:CreateInstanceProfile",
                "ec2:DescribeImages"
            ]),
            text(&["allowed", "implicitDeny", "explicitDeny"]),
            any::<bool>(),
            any::<bool>(),
            any::<bool>()
        )
            .prop_map(|(a, d, b, o, m)| Wiring::Simulated(a, d, b, o, m)),
        Just(Wiring::NoOidcProviders),
        Just(Wiring::ControllerRoleAbsent),
        Just(Wiring::NoIdentity),
        text(&[
            &pod_identity_trust_policy(),
            &trust_policy_for("ec2.amazonaws.com")
        ])
        .prop_map(Wiring::PodIdentity),
        text(&[OWN_POLICY, DENY_PASS, VPC_ONLY, "{"]).prop_map(Wiring::Local),
        Just(Wiring::DryRun),
    ]
}

pub(crate) fn apply_wiring(f: &mut Facts, w: &Wiring) {
    use crate::facts::{PermissionFacts, PolicyDocument, QueueFacts, RolePolicies, Setting};
    match w {
        Wiring::Queue(setting, shape) => {
            let queue = match shape {
                0 => Observed::Found(healthy_queue()),
                1 => Observed::Absent,
                2 => Observed::Found(QueueFacts {
                    policy: None,
                    ..healthy_queue()
                }),
                3 => Observed::Found(QueueFacts {
                    rules: Observed::Found(Vec::new()),
                    ..healthy_queue()
                }),
                4 => Observed::Found(QueueFacts {
                    policy: Some(VPC_ONLY.replace(
                        "\"*\",\"Resource\"",
                        "\"*\",\"Principal\":\"*\",\"Resource\"",
                    )),
                    ..healthy_queue()
                }),
                5 => Observed::Found(QueueFacts {
                    kms_master_key_id: Some("alias/aws/sqs".into()),
                    ..healthy_queue()
                }),
                6 => Observed::Found(QueueFacts {
                    kms_master_key_id: Some("q-key".into()),
                    // The account root only: a service principal is never admitted by IAM.
                    kms_key: Some(Observed::Found(crate::testing::kms_key(
                        "q-key",
                        "Enabled",
                        &crate::testing::default_key_policy(),
                    ))),
                    ..healthy_queue()
                }),
                _ => unknown(UnknownCause::AccessDenied),
            };
            *f = f.clone().with_interruption_queue(setting, Some(queue));
        }
        Wiring::Spot(n) => {
            let role = match n {
                0 => Observed::Found("arn:aws:iam::111122223333:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot".into()),
                1 => Observed::Absent,
                _ => unknown(UnknownCause::Throttled),
            };
            *f = f.clone().with_spot(Some(role));
        }
        Wiring::Network(change) => *f = f.clone().with_network(*change),
        Wiring::Trust(doc) => {
            if let Some(Observed::Found(r)) = &mut f.aws.controller_role {
                r.assume_role_policy_document = Some(doc.clone());
            }
        }
        Wiring::Simulated(action, decision, boundary, orgs, missing) => {
            *f = f.clone().with_simulated(action, |d| {
                d.decision = decision.clone();
                d.denied_by_boundary = *boundary && decision != "allowed";
                d.denied_by_organizations = *orgs && decision != "allowed";
                if *missing {
                    d.missing_context = vec!["aws:SourceVpc".into()];
                }
            })
        }
        Wiring::NoOidcProviders => f.aws.oidc_providers = Observed::Found(Vec::new()),
        Wiring::ControllerRoleAbsent => f.aws.controller_role = Some(Observed::Absent),
        Wiring::NoIdentity => {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.controller_role_arn = None;
            }
        }
        Wiring::PodIdentity(doc) => {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.controller_role_arn = None;
            }
            f.aws.pod_identity_roles.insert(
                KARPENTER_SERVICE_ACCOUNT.into(),
                Observed::Found(Some(role_arn(CONTROLLER_ROLE))),
            );
            if let Some(Observed::Found(r)) = &mut f.aws.controller_role {
                r.assume_role_policy_document = Some(doc.clone());
            }
        }
        Wiring::Local(doc) => {
            f.aws.controller_permissions = Some(PermissionFacts {
                simulated: unknown(UnknownCause::AccessDenied),
                policies: Some(Observed::Found(RolePolicies {
                    identity: vec![PolicyDocument {
                        name: "inline policy p".into(),
                        document: doc.clone(),
                    }],
                    boundary: None,
                })),
            })
        }
        Wiring::DryRun => {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.dry_run_disabled = true;
                k.interruption_queue = Setting::Unset;
            }
        }
    }
}
