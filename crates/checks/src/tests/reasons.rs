//! Sentences of the shared and older reasons (`sentences!`, in `tests/mod.rs`): given these facts,
//! this condition has this status and reason.
//! A new condition's sentences go in its own test file; `every_reason_is_proven_by_a_sentence`
//! reads them all and fails when a reason has no row. Pure.

use crate::evaluate;
use crate::facts::{Facts, Observed, Setting, Settings, UnknownCause};
use crate::testing::*;
use karpenter_health_api::{
    ConditionStatus, ConditionType, KarpenterHealthStatus, Reason, Severity,
};

/// Evaluates `facts` at the fixture's `now` with default settings.
pub(crate) fn status(facts: &Facts) -> KarpenterHealthStatus {
    evaluate(facts, &Settings::default(), None, now())
}

/// One condition of `facts`' evaluation: its status, reason and message, and the codes of the
/// warnings its check reported.
pub(crate) fn condition_of(
    facts: &Facts,
    ty: ConditionType,
) -> (String, String, String, Vec<String>) {
    let s = status(facts);
    let c = s.condition(ty).expect("every condition is present");
    let warnings = s
        .findings
        .iter()
        .filter(|f| f.condition_type == ty && f.severity == Severity::Warning)
        .map(|f| f.reason.clone())
        .collect();
    (
        c.status.clone(),
        c.reason.clone(),
        c.message.clone(),
        warnings,
    )
}

/// Asserts the condition's status and reason, that a False reason comes with an Error finding,
/// and that `Ready` agrees.
pub(crate) fn expect(facts: Facts, ty: ConditionType, want: ConditionStatus, reason: Reason) {
    let status = status(&facts);
    let c = status.condition(ty).expect("every condition is present");
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        (want.as_str(), reason.as_str()),
        "{ty}: {}",
        c.message
    );
    assert!(!c.message.is_empty(), "{ty} has an empty message");
    if want == ConditionStatus::False && ty != ConditionType::Ready {
        assert!(
            status.findings.iter().any(|f| f.condition_type == ty
                && f.severity == Severity::Error
                && f.reason == reason.as_str()),
            "{ty} False without an Error finding: {:#?}",
            status.findings
        );
        let ready = status.condition(ConditionType::Ready).expect("Ready");
        assert_eq!(ready.status, "False");
    }
}

fn break_aws(f: &mut Facts, cause: UnknownCause) {
    f.aws.node_role = Some(unknown(cause));
}

sentences! {
    // Shared Unknown causes.
    an_iam_access_denied_makes_node_role_ready_unknown_with_aws_access_denied:
        Facts::healthy().with(|f| break_aws(f, UnknownCause::AccessDenied))
        => NodeRoleReady is Unknown because AwsAccessDenied;
    a_throttled_security_group_lookup_makes_security_groups_ready_unknown_with_aws_throttled:
        Facts::healthy().with(|f| f.aws.security_groups = unknown(UnknownCause::Throttled))
        => SecurityGroupsReady is Unknown because AwsThrottled;
    an_unreachable_iam_makes_instance_profile_ready_unknown_with_aws_unavailable:
        Facts::healthy().with(|f| f.aws.instance_profile = Some(unknown(UnknownCause::Unavailable)))
        => InstanceProfileReady is Unknown because AwsUnavailable;
    an_endpoint_without_access_entries_in_api_mode_makes_node_role_mapped_unknown_with_aws_unsupported:
        Facts::healthy().with_authentication_mode(Some("API"))
            .with(|f| f.aws.node_role_access_entries = unknown(UnknownCause::Unsupported))
        => NodeRoleMapped is Unknown because AwsUnsupported;
    an_unsynced_aws_auth_watch_makes_node_role_mapped_unknown_with_not_observed:
        Facts::healthy().with_authentication_mode(None)
            .with(|f| f.cluster.aws_auth = unknown(UnknownCause::NotObserved))
        => NodeRoleMapped is Unknown because NotObserved;
    an_unreadable_karpenter_image_tag_in_an_isolated_region_is_karpenter_version_unknown:
        Facts::healthy().with_region("us-iso-east-1").with_karpenter_version("latest")
        => MetadataOptionsSupported is Unknown because KarpenterVersionUnknown;
    karpenter_settings_without_a_cluster_name_make_cluster_identity_unknown_with_cluster_name_unknown:
        Facts::healthy().with(|f| if let Observed::Found(k) = &mut f.cluster.karpenter { k.cluster_name = None })
        => ClusterIdentityUnique is Unknown because ClusterNameUnknown;
    an_operator_without_a_region_cannot_judge_metadata_options_and_says_region_unknown:
        Facts::healthy().with(|f| f.aws.region = None)
        => MetadataOptionsSupported is Unknown because RegionUnknown;

    an_unevaluable_condition_in_the_queue_policy_is_policy_undecided:
        Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(crate::facts::QueueFacts {
            policy: Some(r#"{"Statement":[{"Effect":"Allow","Principal":{"Service":"events.amazonaws.com"},"Action":"sqs:SendMessage","Resource":"*","Condition":{"IpAddress":{"aws:SourceIp":"10.0.0.0/8"}}}]}"#.into()),
            ..healthy_queue()
        })))
        => InterruptionHandlingReady is Unknown because PolicyUndecided;

    // ControllerCanLaunch.
    a_controller_role_trusting_its_service_account_and_allowed_everything_is_controller_permissions_verified:
        Facts::healthy() => ControllerCanLaunch is True because ControllerPermissionsVerified;
    a_service_account_without_irsa_or_pod_identity_is_controller_identity_not_found:
        Facts::healthy().with(|f| if let Observed::Found(k) = &mut f.cluster.karpenter { k.controller_role_arn = None })
        => ControllerCanLaunch is Unknown because ControllerIdentityNotFound;
    an_irsa_annotation_naming_a_missing_role_is_controller_role_not_found:
        Facts::healthy().with(|f| f.aws.controller_role = Some(Observed::Absent))
        => ControllerCanLaunch is False because ControllerRoleNotFound;
    a_cluster_without_its_iam_oidc_provider_is_oidc_provider_missing:
        Facts::healthy().with(|f| f.aws.oidc_providers = Observed::Found(Vec::new()))
        => ControllerCanLaunch is False because OidcProviderMissing;
    a_controller_role_of_another_account_is_aws_other_account_never_not_found:
        Facts::healthy().with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter {
                k.controller_role_arn = Some("arn:aws:iam::999988887777:role/KarpenterController".into());
            }
            // IAM's GetRole looked the name up in the operator's own account.
            f.aws.controller_role = Some(Observed::Absent);
        })
        => ControllerCanLaunch is Unknown because AwsOtherAccount;
    an_irsa_trust_naming_another_service_account_is_controller_trust_mismatch:
        Facts::healthy().with(|f| if let Some(Observed::Found(r)) = &mut f.aws.controller_role {
            r.assume_role_policy_document = Some(irsa_trust_policy("karpenter/karpenter"));
        })
        => ControllerCanLaunch is False because ControllerTrustMismatch;
    a_pod_identity_role_trusting_only_ec2_is_pod_identity_trust_missing:
        Facts::healthy().with(|f| {
            if let Observed::Found(k) = &mut f.cluster.karpenter { k.controller_role_arn = None }
            f.aws.pod_identity_roles.insert(KARPENTER_SERVICE_ACCOUNT.into(), Observed::Found(Some(role_arn(CONTROLLER_ROLE))));
            if let Some(Observed::Found(r)) = &mut f.aws.controller_role {
                r.assume_role_policy_document = Some(trust_policy_for("ec2.amazonaws.com"));
            }
        })
        => ControllerCanLaunch is False because PodIdentityTrustMissing;
    a_simulated_implicit_deny_of_pass_role_is_controller_cannot_pass_node_role:
        Facts::healthy().with_simulated("iam:PassRole", |d| d.decision = "implicitDeny".into())
        => ControllerCanLaunch is False because ControllerCannotPassNodeRole;
    an_scp_denying_create_instance_profile_is_controller_cannot_manage_instance_profiles:
        Facts::healthy().with_simulated("iam:CreateInstanceProfile", |d| { d.decision = "explicitDeny".into(); d.denied_by_organizations = true; })
        => ControllerCanLaunch is False because ControllerCannotManageInstanceProfiles;
    a_boundary_denying_run_instances_is_controller_cannot_launch_instances:
        Facts::healthy().with_simulated("ec2:RunInstances", |d| { d.decision = "implicitDeny".into(); d.denied_by_boundary = true; })
        => ControllerCanLaunch is False because ControllerCannotLaunchInstances;
    a_controller_denied_the_alias_parameter_is_controller_cannot_read_ami_parameters:
        Facts::healthy().with_simulated("ssm:GetParameter", |d| d.decision = "implicitDeny".into()).with_no_images_resolved()
        => ControllerCanLaunch is False because ControllerCannotReadAmiParameters;
    an_scp_denying_describe_images_is_controller_cannot_describe_images:
        Facts::healthy().with_simulated("ec2:DescribeImages", |d| { d.decision = "explicitDeny".into(); d.denied_by_organizations = true; }).with_no_images_resolved()
        => ControllerCanLaunch is False because ControllerCannotDescribeImages;

    // InterruptionHandlingReady.
    a_queue_with_its_policy_and_every_rule_is_interruption_handling_configured:
        Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(healthy_queue())))
        => InterruptionHandlingReady is True because InterruptionHandlingConfigured;
    no_queue_is_interruption_handling_disabled:
        Facts::healthy() => InterruptionHandlingReady is True because InterruptionHandlingDisabled;
    a_queue_given_as_an_arn_is_interruption_queue_not_a_name:
        Facts::healthy().with_interruption_queue("arn:aws:sqs:us-west-2:111122223333:demo-interruptions", None)
        => InterruptionHandlingReady is False because InterruptionQueueNotAName;
    a_queue_sqs_does_not_have_is_interruption_queue_not_found:
        Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Absent))
        => InterruptionHandlingReady is False because InterruptionQueueNotFound;
    a_queue_without_a_policy_is_interruption_queue_policy_missing:
        Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(crate::facts::QueueFacts { policy: None, ..healthy_queue() })))
        => InterruptionHandlingReady is False because InterruptionQueuePolicyMissing;
    a_queue_encrypted_with_the_aws_managed_sqs_key_is_interruption_queue_key_unusable:
        Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(crate::facts::QueueFacts { kms_master_key_id: Some("alias/aws/sqs".into()), ..healthy_queue() })))
        => InterruptionHandlingReady is False because InterruptionQueueKeyUnusable;
    a_queue_without_rules_is_interruption_rules_missing:
        Facts::healthy().with_interruption_queue(QUEUE, Some(Observed::Found(crate::facts::QueueFacts { rules: Observed::Found(Vec::new()), ..healthy_queue() })))
        => InterruptionHandlingReady is False because InterruptionRulesMissing;

    // SubnetsReady.
    subnets_in_the_cluster_vpc_with_room_are_subnets_valid:
        Facts::healthy() => SubnetsReady is True because SubnetsValid;
    selector_terms_matching_no_subnet_are_subnets_not_found:
        Facts::healthy().with_network(NetworkChange::NoSubnets)
        => SubnetsReady is False because SubnetsNotFound;
    a_subnet_in_another_vpc_is_subnet_in_other_vpc:
        Facts::healthy().with_network(NetworkChange::OtherVpc)
        => SubnetsReady is False because SubnetInOtherVpc;
    every_zone_below_a_node_worth_of_addresses_is_subnets_out_of_addresses:
        Facts::healthy().with_network(NetworkChange::AllZonesFull)
        => SubnetsReady is False because SubnetsOutOfAddresses;

    // NodeNetworkReady.
    subnets_behind_an_available_nat_gateway_are_node_network_valid:
        Facts::healthy() => NodeNetworkReady is True because NodeNetworkValid;
    a_default_route_to_a_transit_gateway_is_node_egress_not_inspected:
        Facts::healthy().with_network(NetworkChange::TransitGateway)
        => NodeNetworkReady is True because NodeEgressNotInspected;
    a_private_subnet_without_nat_or_endpoints_is_subnet_no_egress_route:
        Facts::healthy().with_network(NetworkChange::NoEgress)
        => NodeNetworkReady is False because SubnetNoEgressRoute;
    a_route_to_a_failed_nat_gateway_is_subnet_egress_blackholed:
        Facts::healthy().with_network(NetworkChange::NatFailed)
        => NodeNetworkReady is False because SubnetEgressBlackholed;
    an_internet_gateway_route_without_public_addresses_is_internet_gateway_without_public_ip:
        Facts::healthy().with_network(NetworkChange::IgwWithoutPublicIp)
        => NodeNetworkReady is False because InternetGatewayWithoutPublicIp;
    a_private_subnet_lacking_the_ssm_endpoint_is_vpc_endpoints_missing:
        Facts::healthy().with_network(NetworkChange::SomeEndpoints)
        => NodeNetworkReady is False because VpcEndpointsMissing;
    dns_host_names_off_is_vpc_dns_disabled:
        Facts::healthy().with_network(NetworkChange::DnsHostnamesOff)
        => NodeNetworkReady is False because VpcDnsDisabled;

    // SpotReady.
    on_demand_node_pools_are_spot_not_used:
        Facts::healthy() => SpotReady is True because SpotNotUsed;
    a_spot_node_pool_with_the_service_linked_role_is_spot_service_linked_role_exists:
        Facts::healthy().with_spot(Some(Observed::Found("arn:aws:iam::111122223333:role/aws-service-role/spot.amazonaws.com/AWSServiceRoleForEC2Spot".into())))
        => SpotReady is True because SpotServiceLinkedRoleExists;
    a_spot_node_pool_without_the_service_linked_role_is_spot_service_linked_role_missing:
        Facts::healthy().with_spot(Some(Observed::Absent))
        => SpotReady is False because SpotServiceLinkedRoleMissing;

    // VolumeEncryptionReady.
    volumes_encrypted_by_nothing_are_volume_encryption_not_used:
        Facts::healthy().with(|f| {
            f.cluster.node_class.spec.block_device_mappings = vec![karpenter_health_api::karpenter::BlockDeviceMapping {
                device_name: Some("/dev/xvda".into()),
                ebs: Some(karpenter_health_api::karpenter::BlockDevice { encrypted: Some(false), kms_key_id: None }),
            }];
        })
        => VolumeEncryptionReady is True because VolumeEncryptionNotUsed;
    the_aws_managed_default_key_is_volume_encryption_keys_usable:
        Facts::healthy() => VolumeEncryptionReady is True because VolumeEncryptionKeysUsable;
    a_named_key_absent_from_kms_is_kms_key_not_found:
        Facts::healthy().with_volume_key("alias/gone", Observed::Absent)
        => VolumeEncryptionReady is False because KmsKeyNotFound;
    a_disabled_key_is_kms_key_disabled:
        Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "Disabled", &default_key_policy())))
        => VolumeEncryptionReady is False because KmsKeyDisabled;
    a_key_scheduled_for_deletion_is_kms_key_pending_deletion:
        Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "PendingDeletion", &default_key_policy())))
        => VolumeEncryptionReady is False because KmsKeyPendingDeletion;
    a_key_without_material_is_kms_key_pending_import:
        Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "PendingImport", &default_key_policy())))
        => VolumeEncryptionReady is False because KmsKeyPendingImport;
    a_key_being_created_is_kms_key_state_transient:
        Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "Creating", &default_key_policy())))
        => VolumeEncryptionReady is Unknown because KmsKeyStateTransient;
    a_key_left_to_iam_policies_that_do_not_allow_the_controller_is_kms_key_not_allowed_for_controller:
        Facts::healthy().with_volume_key(KMS_KEY, Observed::Found({
            let mut key = kms_key(KMS_KEY, "Enabled", &default_key_policy());
            if let Observed::Found(decisions) = &mut key.controller_iam {
                for d in decisions.iter_mut().filter(|d| d.action == "kms:CreateGrant") {
                    d.decision = "implicitDeny".into();
                }
            }
            key
        }))
        => VolumeEncryptionReady is False because KmsKeyNotAllowedForController;
    a_key_policy_for_lambda_only_is_kms_key_policy_denies_ec2:
        Facts::healthy().with_volume_key(KMS_KEY, Observed::Found(kms_key(KMS_KEY, "Enabled", LAMBDA_ONLY_KEY_POLICY)))
        => VolumeEncryptionReady is False because KmsKeyPolicyDeniesEc2;

    // InstanceTypesAvailable.
    node_pools_allowing_offered_types_are_instance_types_offered:
        Facts::healthy() => InstanceTypesAvailable is True because InstanceTypesOffered;
    a_family_no_zone_offers_is_no_instance_type_matches_requirements:
        Facts::healthy().with_pool_requirement("karpenter.k8s.aws/instance-family", "In", &["m9"])
        => InstanceTypesAvailable is False because NoInstanceTypeMatchesRequirements;
    a_zone_without_a_subnet_of_the_class_is_required_zones_without_subnets:
        Facts::healthy().with_pool_requirement("topology.kubernetes.io/zone", "In", &["us-west-2c"])
        => InstanceTypesAvailable is False because RequiredZonesWithoutSubnets;
    amd64_types_for_arm64_amis_are_no_instance_type_for_ami_architecture:
        Facts::healthy().with_ami_architectures(&["arm64"])
        => InstanceTypesAvailable is False because NoInstanceTypeForAmiArchitecture;

    // LimitsLeaveRoom.
    a_node_pool_under_its_limits_is_node_pools_have_room:
        Facts::healthy().with_pool_usage(&[("cpu", "1000"), ("memory", "1000Gi")], &[("cpu", "8"), ("memory", "32Gi")], true)
        => LimitsLeaveRoom is True because NodePoolsHaveRoom;
    cpu_used_up_while_a_pod_waits_is_node_pool_limits_reached:
        Facts::healthy().with_pool_usage(&[("cpu", "16")], &[("cpu", "16")], true)
        => LimitsLeaveRoom is False because NodePoolLimitsReached;
    a_quota_the_running_m5_large_fills_is_vcpu_quota_exhausted:
        Facts::healthy().with_vcpu_quotas(Observed::Found(2.0), Observed::Found(64.0))
        => LimitsLeaveRoom is False because VcpuQuotaExhausted;
    one_cpu_left_below_two_vcpu_types_is_node_pool_limits_below_smallest_instance:
        Facts::healthy().with_pool_usage(&[("cpu", "1")], &[], true)
        => LimitsLeaveRoom is False because NodePoolLimitsBelowSmallestInstance;

    // DriftCanBeReplaced.
    nothing_drifted_is_drift_replaceable:
        Facts::healthy() => DriftCanBeReplaced is True because DriftReplaceable;

    // AmisResolvable.
    a_published_alias_is_amis_resolved:
        Facts::healthy() => AmisResolvable is True because AmisResolved;
    a_pinned_alias_never_built_for_the_cluster_version_is_ami_alias_not_published:
        Facts::healthy()
            .with_ami_alias("al2023@v20230101", "1.29", |_| Observed::Absent)
            .with_no_images_resolved()
        => AmisResolvable is False because AmiAliasNotPublished;
    an_al2_alias_at_kubernetes_1_33_is_ami_alias_unsupported:
        Facts::healthy().with_ami_alias("al2@latest", "1.33", |_| Observed::Found("ami-0al2".into()))
        => AmisResolvable is False because AmiAliasUnsupported;
    al2023_user_data_on_bottlerocket_images_is_ami_family_mismatch:
        Facts::healthy().with_ami_family("AL2023", &["bottlerocket-aws-k8s-1.29-x86_64-v1.20.0-abcdef12"])
        => AmisResolvable is False because AmiFamilyMismatch;
    every_image_named_by_id_deregistered_is_ami_unavailable:
        Facts::healthy().with_image_ids(&["ami-0gone"], Vec::new())
        => AmisResolvable is False because AmiUnavailable;

    // CapacityReservationsUsable.
    no_selector_terms_is_no_capacity_reservations_selected:
        Facts::healthy() => CapacityReservationsUsable is True because NoCapacityReservationsSelected;
    an_active_reservation_in_a_subnet_zone_is_capacity_reservations_selected:
        Facts::healthy().with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], &["reserved"])
        => CapacityReservationsUsable is True because CapacityReservationsSelected;
    the_gate_off_with_reserved_only_pools_is_reserved_capacity_disabled:
        Facts::healthy()
            .with_capacity_reservations(&[("cr-0a", "us-west-2a", "active")], &["reserved"])
            .with_feature_gates(Setting::Value("ReservedCapacity=false".into()))
        => CapacityReservationsUsable is False because ReservedCapacityDisabled;
    a_selector_matching_nothing_for_reserved_only_pools_is_capacity_reservations_not_found:
        Facts::healthy().with_capacity_reservations(&[], &["reserved"])
        => CapacityReservationsUsable is False because CapacityReservationsNotFound;
    reservations_only_where_the_class_has_no_subnet_is_capacity_reservations_only_in_zones_without_subnets:
        Facts::healthy().with_capacity_reservations(&[("cr-0c", "us-west-2c", "active")], &["reserved"])
        => CapacityReservationsUsable is False because CapacityReservationsOnlyInZonesWithoutSubnets;

    // KarpenterVersionCompatible.
    karpenter_1_8_on_kubernetes_1_29_is_karpenter_version_supported:
        Facts::healthy() => KarpenterVersionCompatible is True because KarpenterVersionSupported;
    karpenter_1_0_1_on_kubernetes_1_31_is_kubernetes_version_unsupported:
        Facts::healthy().with_karpenter_version("1.0.1").with(|f| if let Observed::Found(e) = &mut f.aws.eks_cluster { e.version = Some("1.31".into()) })
        => KarpenterVersionCompatible is False because KubernetesVersionUnsupported;
    kubernetes_newer_than_the_matrix_is_kubernetes_version_not_in_matrix:
        Facts::healthy().with(|f| if let Observed::Found(e) = &mut f.aws.eks_cluster { e.version = Some("1.99".into()) })
        => KarpenterVersionCompatible is Unknown because KubernetesVersionNotInMatrix;
    a_nodepool_crd_without_status_nodes_under_1_8_6_is_crds_older_than_controller:
        Facts::healthy().with_crd("nodepools.karpenter.sh", |c| { c.fields.remove("status.nodes"); })
        => KarpenterVersionCompatible is False because CrdsOlderThanController;
    a_stored_v1beta1_on_1_8_is_stored_versions_stale:
        Facts::healthy().with_crd("nodeclaims.karpenter.sh", |c| c.stored_versions.push("v1beta1".into()))
        => KarpenterVersionCompatible is False because StoredVersionsStale;
    a_conversion_webhook_of_a_crd_serving_two_versions_to_a_missing_service_is_webhook_service_missing:
        Facts::healthy().with_crd("nodepools.karpenter.sh", |c| { c.conversion_service = Some("kube-system/karpenter".into()); c.served_versions.push("v1beta1".into()); })
            .with(|f| { f.cluster.service_endpoints.insert("kube-system/karpenter".into(), Observed::Absent); })
        => KarpenterVersionCompatible is False because WebhookServiceMissing;

    // InstanceProfileReady.
    a_generated_profile_holding_spec_role_is_instance_profile_valid:
        Facts::healthy() => InstanceProfileReady is True because InstanceProfileValid;
    spec_role_before_karpenter_wrote_status_instance_profile_is_instance_profile_not_resolved:
        Facts::healthy().with(|f| { if let Some(s) = f.cluster.node_class.status.as_mut() { s.instance_profile = None } f.aws.instance_profile = None })
        => InstanceProfileReady is Unknown because InstanceProfileNotResolved;
    spec_instance_profile_given_as_an_arn_is_instance_profile_is_arn:
        Facts::healthy().with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/KarpenterNodeInstanceProfile", false)
        => InstanceProfileReady is False because InstanceProfileIsArn;
    spec_instance_profile_with_a_space_is_instance_profile_name_invalid:
        Facts::healthy().with_instance_profile_spec("my profile", false)
        => InstanceProfileReady is False because InstanceProfileNameInvalid;
    spec_instance_profile_absent_from_iam_is_instance_profile_not_found:
        Facts::healthy().with_instance_profile_spec("KarpenterNodeInstanceProfile", false)
        => InstanceProfileReady is False because InstanceProfileNotFound;
    a_profile_without_a_role_is_instance_profile_has_no_role:
        Facts::healthy().with(|f| if let Some(Observed::Found(p)) = &mut f.aws.instance_profile { p.roles.clear() })
        => InstanceProfileReady is False because InstanceProfileHasNoRole;
    a_profile_holding_another_role_than_spec_role_is_instance_profile_role_mismatch:
        Facts::healthy().with(|f| if let Some(Observed::Found(p)) = &mut f.aws.instance_profile { p.roles[0].name = "SomeoneElsesRole".into() })
        => InstanceProfileReady is False because InstanceProfileRoleMismatch;

    // NodeRoleReady.
    a_role_trusting_ec2_with_all_policies_is_node_role_valid:
        Facts::healthy() => NodeRoleReady is True because NodeRoleValid;
    a_profile_without_a_role_leaves_the_node_role_not_resolved:
        Facts::healthy().with_instance_profile_spec("KarpenterNodeInstanceProfile", true)
            .with(|f| { f.aws.node_role = None; if let Some(Observed::Found(p)) = &mut f.aws.instance_profile { p.roles.clear() } })
        => NodeRoleReady is Unknown because NodeRoleNotResolved;
    a_role_absent_from_iam_is_node_role_not_found:
        Facts::healthy().with(|f| f.aws.node_role = Some(Observed::Absent))
        => NodeRoleReady is False because NodeRoleNotFound;
    a_role_given_as_an_arn_is_node_role_is_arn:
        Facts::healthy().with(|f| f.cluster.node_class.spec.role = Some(role_arn(NODE_ROLE)))
        => NodeRoleReady is False because NodeRoleIsArn;
    a_role_name_of_65_characters_is_node_role_name_too_long:
        Facts::healthy().with(|f| { f.cluster.node_class.spec.role = Some(format!("KarpenterNodeRole-{}", "c".repeat(47))); f.aws.node_role = Some(Observed::Absent) })
        => NodeRoleReady is False because NodeRoleNameTooLong;
    a_role_trusting_only_lambda_is_node_role_trust_policy_invalid:
        Facts::healthy().with(|f| if let Some(Observed::Found(r)) = &mut f.aws.node_role { r.assume_role_policy_document = Some(trust_policy_for("lambda.amazonaws.com")) })
        => NodeRoleReady is False because NodeRoleTrustPolicyInvalid;
    a_role_with_an_unreadable_trust_policy_is_node_role_trust_policy_invalid:
        Facts::healthy().with(|f| if let Some(Observed::Found(r)) = &mut f.aws.node_role { r.assume_role_policy_document = Some("%7B%7D".into()) })
        => NodeRoleReady is False because NodeRoleTrustPolicyInvalid;
    a_role_without_the_worker_node_policy_is_node_role_missing_policies:
        Facts::healthy().with(|f| if let Some(Observed::Found(r)) = &mut f.aws.node_role {
            r.attached_policy_arns = Observed::Found(vec![managed_policy_arn("AmazonEKS_CNI_Policy"), managed_policy_arn("AmazonEC2ContainerRegistryReadOnly")]) })
        => NodeRoleReady is False because NodeRoleMissingPolicies;

    // NodeRoleMapped.
    an_aws_auth_entry_with_node_username_and_groups_is_node_role_mapped_in_aws_auth:
        Facts::healthy() => NodeRoleMapped is True because NodeRoleMappedInAwsAuth;
    an_ec2_linux_access_entry_in_api_mode_is_node_role_has_access_entry:
        Facts::healthy().with_authentication_mode(Some("API")).with_access_entry("EC2_LINUX")
        => NodeRoleMapped is True because NodeRoleHasAccessEntry;
    a_config_map_cluster_without_aws_auth_is_aws_auth_missing:
        Facts::healthy().with_authentication_mode(None).with(|f| f.cluster.aws_auth = Observed::Absent)
        => NodeRoleMapped is False because AwsAuthMissing;
    an_aws_auth_with_broken_yaml_is_aws_auth_malformed:
        Facts::healthy().with_authentication_mode(Some("CONFIG_MAP")).with_map_roles("- rolearn: [unclosed\n")
        => NodeRoleMapped is False because AwsAuthMalformed;
    an_aws_auth_mapping_only_other_roles_is_node_role_not_mapped:
        Facts::healthy().with_map_roles(&node_mapping(&role_arn("SomeOtherRole")))
        => NodeRoleMapped is False because NodeRoleNotMapped;
    api_mode_ignores_a_correct_aws_auth_and_is_node_role_not_mapped:
        Facts::healthy().with_authentication_mode(Some("API"))
        => NodeRoleMapped is False because NodeRoleNotMapped;
    the_controller_role_mapped_as_a_node_is_controller_role_mapped_instead:
        Facts::healthy().with_map_roles(&node_mapping(&role_arn(CONTROLLER_ROLE)))
        => NodeRoleMapped is False because ControllerRoleMappedInstead;
    the_node_role_mapped_with_its_iam_path_is_node_role_mapped_with_path:
        Facts::healthy().with_map_roles(&node_mapping(&format!("arn:aws:iam::{ACCOUNT}:role/karpenter/{NODE_ROLE}")))
        => NodeRoleMapped is False because NodeRoleMappedWithPath;
    a_node_mapping_without_system_bootstrappers_is_node_role_mapping_missing_groups:
        Facts::healthy().with_map_roles(&format!("- rolearn: {}\n  username: {NODE_USERNAME}\n  groups: [system:nodes]\n", role_arn(NODE_ROLE)))
        => NodeRoleMapped is False because NodeRoleMappingMissingGroups;
    a_node_mapping_with_a_fixed_username_is_node_role_mapping_wrong_username:
        Facts::healthy().with_map_roles(&format!("- rolearn: {}\n  username: karpenter-node\n  groups: [system:bootstrappers, system:nodes]\n", role_arn(NODE_ROLE)))
        => NodeRoleMapped is False because NodeRoleMappingWrongUsername;
    a_standard_access_entry_for_the_node_role_is_access_entry_wrong_type:
        Facts::healthy().with_access_entry("STANDARD")
        => NodeRoleMapped is False because AccessEntryWrongType;

    // SecurityGroupsReady.
    selectors_resolving_to_one_cluster_tagged_group_are_security_groups_valid:
        Facts::healthy() => SecurityGroupsReady is True because SecurityGroupsValid;
    selectors_matching_nothing_are_security_groups_not_found:
        Facts::healthy().with(|f| f.aws.security_groups = Observed::Found(vec![security_group("sg-0unrelated", &[("team", "x")])]))
        => SecurityGroupsReady is False because SecurityGroupsNotFound;
    a_selected_group_tagged_only_for_another_cluster_is_security_group_tagged_for_other_cluster:
        Facts::healthy().with(|f| f.aws.security_groups = Observed::Found(vec![
            security_group(SECURITY_GROUP, &[("karpenter.sh/discovery", CLUSTER), ("kubernetes.io/cluster/demo", "owned")]),
            security_group("sg-0prod", &[("karpenter.sh/discovery", CLUSTER), ("kubernetes.io/cluster/prod", "owned")]),
        ]))
        => SecurityGroupsReady is False because SecurityGroupTaggedForOtherCluster;
    a_selected_group_in_another_vpc_is_security_group_in_other_vpc:
        Facts::healthy().with(|f| if let Observed::Found(groups) = &mut f.aws.security_groups { groups[0].vpc_id = Some("vpc-0elsewhere".into()) })
        => SecurityGroupsReady is False because SecurityGroupInOtherVpc;

    // ClusterIdentityUnique.
    a_matching_name_and_only_claimed_instances_are_cluster_identity_verified:
        Facts::healthy() => ClusterIdentityUnique is True because ClusterIdentityVerified;
    no_eks_cluster_with_karpenters_cluster_name_is_karpenter_cluster_name_mismatch:
        Facts::healthy().with(|f| f.aws.eks_cluster = Observed::Absent)
        => ClusterIdentityUnique is False because KarpenterClusterNameMismatch;
    an_operator_told_another_cluster_name_than_karpenter_is_karpenter_cluster_name_mismatch:
        Facts::healthy().with(|f| f.cluster.configured_cluster_name = Some("demo-prod".into()))
        => ClusterIdentityUnique is False because KarpenterClusterNameMismatch;
    an_unclaimed_instance_with_this_name_in_another_vpc_is_cluster_name_shared_with_other_cluster:
        Facts::healthy().with_cluster_instance(instance("i-0foreign", CLUSTER, "vpc-0other", 3))
        => ClusterIdentityUnique is False because ClusterNameSharedWithOtherCluster;
    an_unclaimed_instance_older_than_garbage_collection_is_cluster_name_shared_with_other_cluster:
        Facts::healthy().with_cluster_instance(instance("i-0survivor", CLUSTER, VPC, 90))
        => ClusterIdentityUnique is False because ClusterNameSharedWithOtherCluster;

    // MetadataOptionsSupported.
    a_commercial_region_is_metadata_options_accepted:
        Facts::healthy() => MetadataOptionsSupported is True because MetadataOptionsAccepted;
    karpenter_1_6_in_us_isob_east_1_is_http_protocol_ipv6_unsupported_in_region:
        Facts::healthy().with_region("us-isob-east-1").with_karpenter_version("v1.6.2")
        => MetadataOptionsSupported is False because HttpProtocolIPv6UnsupportedInRegion;

    // LabelsAllowed.
    well_known_labels_only_are_no_restricted_labels:
        Facts::healthy() => LabelsAllowed is True because NoRestrictedLabels;
    a_nodepool_label_in_karpenter_sh_is_restricted_label_domain:
        Facts::healthy().with(|f| { f.cluster.node_pools.found_mut().unwrap()[0].spec.template.metadata.labels.insert("karpenter.sh/team".into(), "a".into()); })
        => LabelsAllowed is False because RestrictedLabelDomain;

    // KarpenterStatusConsistent.
    a_reconciled_consistent_karpenter_status_is_karpenter_status_current:
        Facts::healthy() => KarpenterStatusConsistent is True because KarpenterStatusCurrent;
    validation_unknown_for_an_hour_under_instance_profile_ready_true_is_validation_stuck:
        Facts::healthy().with_karpenter_condition(karpenter_condition("ValidationSucceeded", "Unknown", mins_ago(60)))
        => KarpenterStatusConsistent is False because ValidationStuck;
    ready_true_beside_subnets_ready_false_is_ready_contradicts_dependents:
        Facts::healthy().with_karpenter_condition(karpenter_condition("SubnetsReady", "False", mins_ago(5)))
        => KarpenterStatusConsistent is False because ReadyContradictsDependents;
    a_status_two_generations_behind_for_an_hour_is_status_stale:
        Facts::healthy().with(|f| { f.cluster.node_class.metadata.generation = Some(3); f.cluster.node_class_generation_seen_at = Some(mins_ago(60)); })
        => KarpenterStatusConsistent is False because StatusStale;

    // NodeClaimsRegistered.
    a_registered_nodeclaim_is_nodeclaims_registering:
        Facts::healthy() => NodeClaimsRegistered is True because NodeClaimsRegistering;
    a_nodeclaim_launched_an_hour_ago_and_still_unregistered_is_nodeclaims_not_registering:
        Facts::healthy().with_node_claim(node_claim("default-stuck", "i-0stuck", 60, false))
        => NodeClaimsRegistered is False because NodeClaimsNotRegistering;

    // Ready.
    all_sub_conditions_true_is_all_checks_passed:
        Facts::healthy() => Ready is True because AllChecksPassed;
    one_false_sub_condition_names_its_reason_on_ready:
        Facts::healthy().with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/p", false)
        => Ready is False because InstanceProfileIsArn;
    false_sub_conditions_with_different_reasons_are_multiple_checks_failed:
        Facts::healthy()
            .with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/p", false)
            .with(|f| f.aws.security_groups = Observed::Found(vec![security_group("sg-0unrelated", &[("team", "x")])]))
        => Ready is False because MultipleChecksFailed;
    one_unknown_and_no_false_sub_condition_names_its_cause_on_ready:
        Facts::healthy().with(|f| f.aws.security_groups = unknown(UnknownCause::Throttled))
        => Ready is Unknown because AwsThrottled;
    unknown_sub_conditions_with_different_causes_are_multiple_checks_unknown:
        Facts::healthy().with(|f| {
            f.aws.security_groups = unknown(UnknownCause::Throttled);
            f.aws.node_role = Some(unknown(UnknownCause::AccessDenied));
        })
        => Ready is Unknown because MultipleChecksUnknown;
}

#[test]
fn not_ready_names_the_false_then_the_unknown_sub_conditions_and_is_absent_when_ready() {
    assert_eq!(status(&Facts::healthy()).not_ready, None);
    let broken = Facts::healthy()
        .with_instance_profile_spec("arn:aws:iam::111122223333:instance-profile/p", false)
        .with(|f| f.aws.security_groups = unknown(UnknownCause::Throttled));
    assert_eq!(status(&broken).not_ready.as_deref(), Some("Profile,SGs?"));
}

#[test]
fn the_pending_status_before_the_first_evaluation_is_pending() {
    let outcomes = [];
    let status = crate::render::render(&Facts::healthy(), &outcomes, None, now());
    for &ty in ConditionType::sub_conditions() {
        assert_eq!(
            status.condition(ty).map(|c| c.reason.as_str()),
            Some("Pending")
        );
    }
}

/// The reasons the `sentences!` of every test file prove: what follows `because` in them.
fn proven_reasons() -> Vec<String> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tests");
    let mut proven = Vec::new();
    for entry in std::fs::read_dir(&dir).expect("src/tests is readable") {
        let path = entry.expect("a directory entry").path();
        let Ok(source) = std::fs::read_to_string(&path) else {
            continue;
        };
        let Some((_, sentences)) = source.split_once("sentences! {") else {
            continue;
        };
        proven.extend(sentences.split(" because ").skip(1).filter_map(|rest| {
            let (reason, _) = rest.split_once(';')?;
            Some(reason.trim().to_owned())
        }));
    }
    proven
}

#[test]
fn every_reason_is_proven_by_a_sentence() {
    let proven = proven_reasons();
    assert!(proven.contains(&"InstanceProfileIsArn".to_owned()), "{proven:?}");
    let mut missing: Vec<Reason> = Reason::ALL
        .iter()
        .copied()
        .filter(|r| !proven.iter().any(|p| p == r.as_str()) && *r != Reason::Pending)
        .collect();
    missing.sort();
    assert!(
        missing.is_empty(),
        "reasons without a sentence test (a `sentences!` row in the condition's test file): {missing:?}"
    );
}
