//! The one vocabulary table of KarpenterHealth: per condition, its printer column, where its facts
//! come from, the reasons it may carry, the warnings its check reports and what the check cannot
//! see. Pure data, no IO.
//!
//! Everything that names conditions is generated from this table: the enums and their texts (the
//! macros in `vocabulary/macros.rs`), the CRD's printer columns (`health.rs`), and by `make
//! generate` docs/checks.md and the Helm chart's condition lists, alerts' unit tests and values
//! schema (`karpenter_health_checks::generated`, whose test fails when a committed one is stale).

#[macro_use]
mod macros;
mod lab;

pub use lab::Lab;
use lab::*;

vocabulary! {
    // Causes of Unknown shared by every sub-condition: each may be the reason of any of them.
    shared_reasons {
        Pending => Unknown,
            "The check has not been evaluated yet.",
            "Wait for the first evaluation; if it stays Pending, read the operator's logs.";
        NotObserved => Unknown,
            "A fact the check needs has not been observed yet (watch not synced or object not readable).",
            "Check the operator's RBAC and logs; the condition resolves once the fact is observed.";
        AwsAccessDenied => Unknown,
            "An AWS call the check needs was denied, so the check could not run.",
            "Grant the operator's IAM role the policy `karpenter-health iam-policy` prints for this cluster (template: deploy/iam-policy.json).";
        AwsThrottled => Unknown,
            "AWS throttled a call the check needs, or the operator's own rate limit for that API held it back; the class is evaluated again within a minute.",
            "Nothing to fix if brief; if persistent, raise the refresh interval or find the account's noisy client.";
        AwsUnavailable => Unknown,
            "AWS could not be reached or failed (timeout, connection error, 5xx).",
            "Check the operator's network path to the AWS endpoints (VPC endpoints, proxies, DNS).";
        AwsUnsupported => Unknown,
            "The AWS endpoint does not support a call the check needs.",
            "Use an endpoint that implements the API, or accept that this check cannot run here.";
        AwsOtherAccount => Unknown,
            "What the check needs lives in another AWS account than the operator's credentials (a controller role, or an EKS Pod Identity target role, of another account), and IAM does not let this account read it, so the check is not made rather than guessed.",
            "Nothing is wrong by itself: check that account's role by hand, or run karpenter-health check with credentials of that account.";
        KarpenterVersionUnknown => Unknown,
            "The Karpenter version could not be determined, and the check depends on it.",
            "Run the operator where it can read the Karpenter Deployment, or set --karpenter-version.";
        ClusterNameUnknown => Unknown,
            "The cluster name could not be determined, and the check depends on it.",
            "Let the operator read Karpenter's settings, or set --cluster-name.";
        PolicyUndecided => Unknown,
            "A policy the check evaluates uses conditions or variables that cannot be decided outside AWS (or IAM's simulator lacked context it needs), so neither allowed nor denied is proven.",
            "Grant the operator iam:SimulatePrincipalPolicy so IAM decides, or check the statements named in the message by hand.";
        RegionUnknown => Unknown,
            "The AWS region could not be determined, and the check depends on it.",
            "Set AWS_REGION (or --region) for the operator.";
        FindingAccepted => True,
            "The check found a problem, and someone accepted it until a date, with a reason: it stays listed in status.accepted (what, why, until when, accepted by which annotation or fleet rule) but does not count against Ready, fires no alert, and counts again when the acceptance expires.",
            "Nothing until the date; fix what status.accepted names before then, or extend the acceptance with a new date and reason.";
    }

    /// The instance profile nodes launch with exists, is named correctly and holds the node role.
    InstanceProfileReady {
        column: "Profile",
        facts_from {
            cluster: "EC2NodeClass `spec.instanceProfile` / `status.instanceProfile`",
            aws: "IAM `GetInstanceProfile`",
        }
        reasons {
            InstanceProfileValid => True,
                "The instance profile exists and holds the node role.",
                "Nothing to do.";
            InstanceProfileNotResolved => Unknown,
                "spec.role is set but Karpenter has not yet written status.instanceProfile.",
                "Wait for Karpenter to reconcile the EC2NodeClass; if it never does, read Karpenter's logs.";
            InstanceProfileIsArn => False,
                "spec.instanceProfile is an ARN; Karpenter passes it as a name, so every launch fails while Karpenter shows InstanceProfileReady=True.",
                "Set spec.instanceProfile to the profile name (the last segment of the ARN).";
            InstanceProfileNameInvalid => False,
                "spec.instanceProfile is not a valid IAM instance profile name.",
                "Use a name of 1 to 128 characters from letters, digits and +=,.@_-.";
            InstanceProfileNotFound => False,
                "IAM has no instance profile of that name.",
                "Create the instance profile, or point spec.instanceProfile at an existing one.";
            InstanceProfileHasNoRole => False,
                "The instance profile holds no role, so nodes get no credentials.",
                "Add the node role to the profile (aws iam add-role-to-instance-profile).";
            InstanceProfileRoleMismatch => False,
                "The instance profile holds a different role than the EC2NodeClass asks for.",
                "Put spec.role's role into the profile, or fix spec.role.";
        }
        lab {
            InstanceProfileIsArn => Lab::Proven("lab_classic_failures::an_instance_profile_arn_leaves_validation_unknown_and_karpenter_launches_nothing");
            InstanceProfileNameInvalid => Lab::NotProven("the CRD's own rules refuse most such names before Karpenter sees them; the ARN case is proven (InstanceProfileIsArn).");
            InstanceProfileNotFound => Lab::NotProven("EC2's refusal of a profile that does not exist is not emulated (only a name that is no IAM name is); Karpenter from 1.x does not ask IAM for a named profile.");
            InstanceProfileHasNoRole => Lab::NotProven(KUBELET);
            InstanceProfileRoleMismatch => Lab::NotProven(KUBELET);
        }
    }

    /// The node IAM role exists, trusts EC2 and has the policies a node needs.
    NodeRoleReady {
        column: "Role",
        facts_from {
            cluster: "EC2NodeClass `spec.role` (else the profile's role), `aws-node` ServiceAccount (IRSA)",
            aws: "IAM `GetRole`, `ListAttachedRolePolicies`; EKS Pod Identity of `aws-node`",
        }
        reasons {
            NodeRoleValid => True,
                "The node role exists, trusts ec2.amazonaws.com and has the required policies.",
                "Nothing to do.";
            NodeRoleNotResolved => Unknown,
                "The node role is not known yet (it comes from spec.role or from the instance profile).",
                "Resolve InstanceProfileReady first.";
            NodeRoleNotFound => False,
                "IAM has no role of that name.",
                "Create the node role, or fix spec.role.";
            NodeRoleIsArn => False,
                "spec.role is an IAM role ARN; Karpenter uses it as a role name when it creates the instance profile, which IAM refuses.",
                "Set spec.role to the role's name: the part after role/ and any path.";
            NodeRoleNameTooLong => False,
                "The role name is longer than IAM's 64-character limit.",
                "Use a shorter role name (the default KarpenterNodeRole-<cluster> overflows with long cluster names).";
            NodeRoleTrustPolicyInvalid => False,
                "The role's trust policy does not let ec2.amazonaws.com assume it, so instances get no credentials.",
                "Allow sts:AssumeRole for the service principal ec2.amazonaws.com in the trust policy.";
            NodeRoleMissingPolicies => False,
                "The role lacks managed policies every node needs.",
                "Attach AmazonEKSWorkerNodePolicy, AmazonEKS_CNI_Policy (unless aws-node has its own role) and AmazonEC2ContainerRegistryPullOnly.";
        }
        warnings {
            NodeRoleMissingSsmPolicy =>
                "The node role lacks AmazonSSMManagedInstanceCore, so nodes cannot be reached through SSM Session Manager.",
                "Attach AmazonSSMManagedInstanceCore to the node role if you use SSM to debug nodes.";
        }
        lab {
            NodeRoleNotFound => Lab::NotProven(NO_IAM);
            NodeRoleIsArn => Lab::NotProven("the CRD's own rules refuse an ARN in spec.role on the releases the lab runs.");
            NodeRoleNameTooLong => Lab::NotProven(NO_IAM);
            NodeRoleTrustPolicyInvalid => Lab::NotProven(KUBELET);
            NodeRoleMissingPolicies => Lab::NotProven(KUBELET);
        }
    }

    /// Nodes using the node role are allowed to join the cluster (aws-auth or access entry).
    NodeRoleMapped {
        column: "Mapped",
        facts_from {
            cluster: "`kube-system/aws-auth` (read as the authenticator does), Karpenter ServiceAccount (IRSA role)",
            aws: "EKS `DescribeCluster` (authentication mode), `ListAccessEntries`/`DescribeAccessEntry`, Pod Identity of the controller; STS `GetCallerIdentity`",
        }
        reasons {
            NodeRoleMappedInAwsAuth => True,
                "aws-auth maps the node role with the node username and groups.",
                "Nothing to do.";
            NodeRoleHasAccessEntry => True,
                "An EC2_LINUX or EC2_WINDOWS access entry exists for the node role.",
                "Nothing to do.";
            AwsAuthMissing => False,
                "The cluster authenticates through aws-auth, but kube-system/aws-auth does not exist.",
                "Create kube-system/aws-auth with a mapRoles entry for the node role, or create an access entry.";
            AwsAuthMalformed => False,
                "The node role's own mapping in kube-system/aws-auth cannot be read: mapRoles is not a YAML list, or the node role's entry has a field of the wrong type, so the authenticator does not map the node role as written.",
                "Fix mapRoles or the entry at the position named in the message (groups must be a list of strings).";
            NodeRoleNotMapped => False,
                "Neither aws-auth nor an access entry maps the node role, so nodes launch but never join.",
                "Map the node role: an EC2_LINUX access entry, or a mapRoles entry with the node username and groups.";
            ControllerRoleMappedInstead => False,
                "aws-auth maps the Karpenter controller's role as a node role instead of the node role itself.",
                "Change the entry's rolearn to the node role's ARN.";
            NodeRoleMappedWithPath => False,
                "aws-auth maps the node role by an ARN with an IAM path, which the authenticator never matches.",
                "Write the role ARN without its path, as the message shows.";
            NodeRoleMappingMissingGroups => False,
                "The node role's mapping lacks system:bootstrappers or system:nodes.",
                "Add both groups to the mapRoles entry.";
            NodeRoleMappingWrongUsername => False,
                "The node role's mapping does not use the username system:node:{{EC2PrivateDNSName}}.",
                "Set the entry's username to system:node:{{EC2PrivateDNSName}}.";
            AccessEntryWrongType => False,
                "The node role's access entry is not of type EC2_LINUX or EC2_WINDOWS, so nodes lack node permissions.",
                "Recreate the access entry with type EC2_LINUX (or EC2_WINDOWS).";
        }
        warnings {
            AwsAuthUnparsable =>
                "Part of kube-system/aws-auth cannot be read: the authenticator skips what is named (a mapRoles or mapUsers value that is not a YAML list, an entry of the wrong shape, a field of the wrong type) and keeps the rest. The node role's own mapping is judged by NodeRoleMapped; this warning is about the other identities.",
                "Fix the entries named in the message (each is named by its key and position), or migrate the identities to access entries.";
        }
        cannot_see: "Access entries created for a role that was re-created later (bound to the old role's id) look valid from the API.",
        lab {
            ControllerRoleMappedInstead => Lab::Proven("lab_classic_failures::aws_auth_mapping_the_controller_role_leaves_launched_nodes_unregistered");
            AwsAuthMissing => Lab::NotProven(KUBELET);
            AwsAuthMalformed => Lab::NotProven(KUBELET);
            NodeRoleNotMapped => Lab::NotProven(KUBELET);
            NodeRoleMappedWithPath => Lab::NotProven(KUBELET);
            NodeRoleMappingMissingGroups => Lab::NotProven(KUBELET);
            NodeRoleMappingWrongUsername => Lab::NotProven(KUBELET);
            AccessEntryWrongType => Lab::NotProven(KUBELET);
        }
    }

    /// The security-group selectors resolve to groups that belong to this cluster.
    SecurityGroupsReady {
        column: "SGs",
        facts_from {
            cluster: "EC2NodeClass `securityGroupSelectorTerms`",
            aws: "EC2 `DescribeSecurityGroups` (one call per distinct term); EKS `DescribeCluster` (VPC)",
        }
        reasons {
            SecurityGroupsValid => True,
                "The selectors resolve to security groups of this cluster.",
                "Nothing to do.";
            SecurityGroupsNotFound => False,
                "The security-group selector terms match no security group.",
                "Fix spec.securityGroupSelectorTerms or tag the intended groups.";
            SecurityGroupInOtherVpc => False,
                "A selected security group is in another VPC than the cluster's, so every launch with it fails.",
                "Select security groups of the cluster's VPC (fix spec.securityGroupSelectorTerms or the groups' tags).";
            SecurityGroupTaggedForOtherCluster => False,
                "A selected security group is tagged for another cluster and not for this one.",
                "Narrow the selector so it only matches this cluster's groups.";
        }
        warnings {
            NoSecurityGroupTaggedForCluster =>
                "No selected security group carries kubernetes.io/cluster/<cluster>, which the AWS Load Balancer Controller looks for.",
                "Tag exactly one selected group with kubernetes.io/cluster/<cluster> (value owned or shared).";
            MultipleSecurityGroupsTaggedForCluster =>
                "More than one selected security group carries kubernetes.io/cluster/<cluster>; the AWS Load Balancer Controller needs exactly one.",
                "Remove the cluster tag from all but one of the selected groups.";
            SecurityGroupStatusStale =>
                "Karpenter's status.securityGroups differs from what the selector terms resolve to now, so new nodes and drift use an outdated set.",
                "Wait for Karpenter's next security-group refresh (at most 5 minutes); if it persists, check Karpenter's logs.";
        }
        lab {
            SecurityGroupsNotFound => Lab::Proven("lab_reasons::a_security_group_selector_matching_nothing_launches_nothing");
            SecurityGroupInOtherVpc => Lab::NotProven("EC2 refuses a launch with a security group of another VPC; moto does not, and the gap proxy does not emulate it yet.");
            SecurityGroupTaggedForOtherCluster => Lab::NotProven("a claim about the other cluster's controller, which the lab does not run.");
        }
    }

    /// No other cluster shares this cluster's name, and Karpenter is configured with the real name.
    ClusterIdentityUnique {
        column: "Identity",
        facts_from {
            cluster: "Karpenter Deployment `CLUSTER_NAME`, `--cluster-name`, every NodeClaim's `providerID`",
            aws: "EKS `DescribeCluster` (VPC); EC2 `DescribeInstances` by cluster tag",
        }
        reasons {
            ClusterIdentityVerified => True,
                "Karpenter uses the real cluster name and no foreign instance carries it.",
                "Nothing to do.";
            KarpenterClusterNameMismatch => False,
                "Karpenter is configured with a cluster name that differs from the EKS cluster's name.",
                "Set Karpenter's settings.clusterName to the EKS cluster's name.";
            ClusterNameSharedWithOtherCluster => False,
                "Instances of another cluster carry this cluster's name; the two Karpenters will drift and terminate each other's nodes.",
                "Give one of the clusters a different name (Karpenter's settings.clusterName and the EKS cluster).";
        }
        lab {
            ClusterNameSharedWithOtherCluster => Lab::Proven("lab_classic_failures::another_clusters_instances_under_the_same_name_are_terminated_by_karpenter");
            KarpenterClusterNameMismatch => Lab::NotProven("a mismatch with the operator's own setting, not a claim about Karpenter's behaviour.");
        }
    }

    /// The instance metadata options Karpenter sends are accepted by EC2 in this region.
    MetadataOptionsSupported {
        column: "Metadata",
        facts_from {
            cluster: "EC2NodeClass `metadataOptions`, Karpenter version (image tag or `--karpenter-version`)",
            aws: "region of the AWS configuration",
        }
        reasons {
            MetadataOptionsAccepted => True,
                "EC2 in this region accepts the metadata options Karpenter sends.",
                "Nothing to do.";
            HttpProtocolIPv6UnsupportedInRegion => False,
                "This isolated region rejects httpProtocolIPv6, which this Karpenter version always sends; no node launches.",
                "Upgrade Karpenter to 1.7.0 or later, or remove the httpProtocolIPv6 default from the EC2NodeClass CRD.";
        }
        lab {
            HttpProtocolIPv6UnsupportedInRegion => Lab::NotProven("only its True side: lab_classic_failures::in_an_isolated_region_karpenter_1_7_and_later_launches_and_the_check_agrees shows 1.7 and later launching there while the bed refuses the option as EC2 does. The False side needs Karpenter before 1.7, which the Go module proxy does not serve.");
        }
    }

    /// No NodePool or pending workload uses a label the installed Karpenter rejects.
    LabelsAllowed {
        column: "Labels",
        facts_from {
            cluster: "NodePools (labels, requirements), pending Pods Karpenter provisions for (node selectors, affinity; none of the namespaces `--exclude-pod-namespaces` names), the NodePool CRD's validation rules, else the Karpenter version",
            aws: "—",
        }
        reasons {
            NoRestrictedLabels => True,
                "No NodePool or pending workload uses a label domain Karpenter rejects.",
                "Nothing to do.";
            RestrictedLabelDomain => False,
                "A NodePool or pending workload uses a label key in a domain this Karpenter version rejects, so NodeClaims cannot be created.",
                "Use a label outside the restricted domain, or upgrade Karpenter to 1.9.0 or later for kubernetes.io labels.";
        }
        warnings {
            RestrictedLabelOnSharedPod =>
                "A pending Pod that NodePools of several EC2NodeClasses could take has a label key the installed Karpenter rejects in some of its required affinity terms or preferences only: if Karpenter uses that term, whichever class it picks cannot create the NodeClaim. (A rejected key in its node selector or in every required term fails every candidate class.)",
                "Remove the key from the Pod's node selector and affinity (for kubernetes.io keys, Karpenter 1.9 and later accept them).";
        }
        lab {
            RestrictedLabelDomain => Lab::Proven("lab_classic_failures::a_node_role_label_is_refused_where_karpenter_restricts_it_and_launched_where_not (refused on v1.8.6, launched on v1.14.1)");
        }
    }

    /// Karpenter's own EC2NodeClass status is current and does not contradict itself.
    KarpenterStatusConsistent {
        column: "KarpStatus",
        facts_from {
            cluster: "EC2NodeClass status conditions and generation",
            aws: "—",
        }
        reasons {
            KarpenterStatusCurrent => True,
                "Karpenter's EC2NodeClass status is current and self-consistent.",
                "Nothing to do.";
            ValidationStuck => False,
                "Karpenter shows InstanceProfileReady=True while ValidationSucceeded has stayed Unknown too long.",
                "Look for an ARN or missing instance profile; after an IAM fix, add an annotation to refresh Karpenter's cache.";
            ReadyContradictsDependents => False,
                "Karpenter shows Ready=True while one of its own dependent conditions is False.",
                "Restart or upgrade Karpenter; its status is not being recomputed.";
            StatusStale => False,
                "Karpenter has not reconciled the latest generation of the EC2NodeClass for too long.",
                "Check that the Karpenter controller is running and its logs.";
        }
        lab {
            ValidationStuck => Lab::Proven("lab_classic_failures::an_instance_profile_arn_leaves_validation_unknown_and_karpenter_launches_nothing");
            ReadyContradictsDependents => Lab::NotProven(STATUS_TIMING);
            StatusStale => Lab::NotProven(STATUS_TIMING);
        }
    }

    /// Launched NodeClaims of this EC2NodeClass register as nodes in time.
    NodeClaimsRegistered {
        column: "Registered",
        facts_from {
            cluster: "NodeClaims of this class (`Launched`, `Registered`), NodePool `NodeRegistrationHealthy`",
            aws: "—",
        }
        reasons {
            NodeClaimsRegistering => True,
                "Every launched NodeClaim registered within the threshold (or none is waiting).",
                "Nothing to do.";
            NodeClaimsNotRegistering => False,
                "NodeClaims launched instances that did not register as nodes within the threshold.",
                "Fix the cause named in the message (often NodeRoleMapped or the security groups), then delete the stuck NodeClaims.";
        }
        lab {
            NodeClaimsNotRegistering => Lab::Proven("lab_classic_failures::aws_auth_mapping_the_controller_role_leaves_launched_nodes_unregistered");
        }
    }

    /// The Karpenter controller has working credentials and may pass the node role, manage
    /// instance profiles (with spec.role) and launch instances for this EC2NodeClass: run
    /// instances and fleets on what a launch creates and uses (instances, volumes, network
    /// interfaces, launch templates, subnets, security groups, images), with Karpenter's tags and
    /// the class's metadata options, and tag them on create.
    ControllerCanLaunch {
        column: "Controller",
        facts_from {
            cluster: "Karpenter ServiceAccount (IRSA annotation, `eks.amazonaws.com/audience`), Deployment (`DISABLE_DRY_RUN`), NodePools (a launch tag), EC2NodeClass `spec.role`/`spec.tags`/`spec.metadataOptions`/`amiSelectorTerms[].alias`",
            aws: "IAM `GetRole` (controller; not for a role of another account), `ListOpenIDConnectProviders`, `SimulatePrincipalPolicy` (every resource a launch touches, in the context Karpenter's calls carry, and `ssm:GetParameter` on the public parameter an alias resolves through for the cluster's minor; `crates/checks/src/karpenter_permissions.rs`; shared among classes that differ only by name), `ListRolePolicies`/`GetRolePolicy`, `ListAttachedRolePolicies`, `GetPolicy`/`GetPolicyVersion` (whether classes may share a simulation; evaluated by `crates/checks/src/iam_policy.rs` when the simulator cannot be asked); EKS `DescribeCluster` (OIDC issuer), Pod Identity of the controller (its role and target role)",
        }
        reasons {
            ControllerPermissionsVerified => True,
                "The controller's role exists, trusts the controller's ServiceAccount and may pass the node role, manage instance profiles and launch instances.",
                "Nothing to do.";
            ControllerIdentityNotFound => Unknown,
                "Neither an IRSA annotation nor an EKS Pod Identity association gives the Karpenter ServiceAccount a role; the controller then uses whatever credentials its node has, which this check cannot see.",
                "Annotate the Karpenter ServiceAccount with eks.amazonaws.com/role-arn, or create a Pod Identity association for it.";
            ControllerRoleNotFound => False,
                "The IAM role the controller's ServiceAccount names (IRSA annotation or Pod Identity association) does not exist, so the controller gets no credentials.",
                "Create the controller role, or point the annotation or association at the existing role.";
            OidcProviderMissing => False,
                "IAM has no OpenID Connect provider for the cluster's issuer, so IRSA credentials never work.",
                "Create the IAM OIDC provider for the cluster (eksctl utils associate-iam-oidc-provider --approve, or aws iam create-open-id-connect-provider).";
            ControllerTrustMismatch => False,
                "The controller role's trust policy does not let the Karpenter ServiceAccount assume it through the cluster's OIDC provider (another ServiceAccount, audience or provider in its conditions).",
                "Let the cluster's OIDC provider call sts:AssumeRoleWithWebIdentity with sub system:serviceaccount:<namespace>:<name> and aud sts.amazonaws.com, as the message shows.";
            PodIdentityTrustMissing => False,
                "The controller role comes from EKS Pod Identity, but its trust policy does not let pods.eks.amazonaws.com call sts:AssumeRole and sts:TagSession.",
                "Allow the service principal pods.eks.amazonaws.com the actions sts:AssumeRole and sts:TagSession in the role's trust policy.";
            ControllerCannotPassNodeRole => False,
                "The controller may not iam:PassRole the node role to EC2, so every launch fails (Karpenter shows it only after a launch attempt).",
                "Allow iam:PassRole on the node role's exact ARN (path included) with iam:PassedToService ec2.amazonaws.com; if the message names a permissions boundary or SCP, lift the denial there.";
            ControllerCannotManageInstanceProfiles => False,
                "spec.role is used, but the controller may not create, tag or fill the instance profile Karpenter makes for it.",
                "Allow iam:CreateInstanceProfile, iam:TagInstanceProfile and iam:AddRoleToInstanceProfile as Karpenter's IAM policy does; if the message names a permissions boundary or SCP, lift the denial there.";
            ControllerCannotLaunchInstances => False,
                "The controller may not run instances, create fleets or create launch templates with the tags Karpenter sends.",
                "Allow ec2:RunInstances, ec2:CreateFleet and ec2:CreateLaunchTemplate as Karpenter's IAM policy does (check its cluster-name tag conditions); if the message names a permissions boundary or SCP, lift the denial there.";
            ControllerCannotReadAmiParameters => False,
                "The class selects its images by alias, but the controller may not ssm:GetParameter the public parameter the alias resolves through, and Karpenter holds no image resolved for the class's current generation, so it resolves none and launches nothing; its EC2NodeClass status does not say why (the error is only in its log). While it holds images from before, this is the warning ControllerImageReadsDeniedWhileImagesKept.",
                "Allow ssm:GetParameter on arn:<partition>:ssm:<region>::parameter/aws/service/* as Karpenter's IAM policy does (AllowSSMReadActions); if the message names a permissions boundary or SCP, lift the denial there.";
            ControllerCannotDescribeImages => False,
                "The controller may not ec2:DescribeImages, which Karpenter calls to resolve every image of a class (an alias's image id too), and Karpenter holds no image resolved for the class's current generation, so it resolves none and launches nothing; its EC2NodeClass status does not say why (the error is only in its log). While it holds images from before, this is the warning ControllerImageReadsDeniedWhileImagesKept.",
                "Allow ec2:DescribeImages in the cluster's region as Karpenter's IAM policy does (AllowRegionalReadActions); if the message names a permissions boundary or SCP, lift the denial there.";
        }
        warnings {
            DryRunDisabled =>
                "DISABLE_DRY_RUN is set on the Karpenter controller: Karpenter then reports ValidationSucceeded=True without its dry-run launch calls, so its own status no longer proves it can launch.",
                "Remove DISABLE_DRY_RUN (or --disable-dry-run) from the controller unless your environment cannot answer dry-run calls; rely on ControllerCanLaunch meanwhile.";
            ControllerImageReadsDeniedWhileImagesKept =>
                "The controller may not read the public parameter this EC2NodeClass's alias resolves through (ssm:GetParameter) or describe its images (ec2:DescribeImages), but Karpenter holds images it resolved for the class's current generation: when resolving fails it keeps status.amis and AMIsReady and launches from them (aws/karpenter-provider-aws pkg/controllers/nodeclass/ami.go). Launches go on; the next edit of the class, or a new class, resolves nothing.",
                "Allow ssm:GetParameter on arn:<partition>:ssm:<region>::parameter/aws/service/* and ec2:DescribeImages as Karpenter's IAM policy does (AllowSSMReadActions, AllowRegionalReadActions) before the class is edited; if the message names a permissions boundary or SCP, lift the denial there.";
        }
        cannot_see: "Request keys only Karpenter's real call carries (instance types, the image's owner): a decision that needed one is Unknown. Of Karpenter's regional reads only ec2:DescribeImages is asked: a denial of its other Describe calls (subnets, security groups, instance types) is not seen. Roles in other accounts (an IRSA role or a Pod Identity target role elsewhere) are not read (Unknown `AwsOtherAccount`). Without IAM's simulator, service control policies are not visible. Classes whose questions differ only in the names Karpenter tags with (EC2NodeClass, NodePool, the instance profile it makes) share IAM's answer when the controller's own policies cannot tell those names apart and IAM allowed every question the check reads: a service control policy that treats EC2NodeClasses or NodePools differently by name alone is missed for the second class (a denial the check reads is never shared). The alias's parameter is asked for one architecture and variant (x86_64 standard for AL2023): a policy granting only some of Karpenter's paths may deny others; it is not asked while the cluster's Kubernetes version is unknown.",
        lab {
            ControllerRoleNotFound => Lab::NotProven(NO_IAM);
            OidcProviderMissing => Lab::NotProven(NO_IAM);
            ControllerTrustMismatch => Lab::NotProven(NO_IAM);
            PodIdentityTrustMissing => Lab::NotProven(NO_IAM);
            ControllerCannotPassNodeRole => Lab::NotProven(NO_IAM);
            ControllerCannotManageInstanceProfiles => Lab::NotProven(NO_IAM);
            ControllerCannotLaunchInstances => Lab::NotProven(NO_IAM);
            ControllerCannotReadAmiParameters => Lab::NotProven(NO_IAM);
            ControllerCannotDescribeImages => Lab::NotProven(NO_IAM);
        }
    }

    /// Karpenter's interruption queue, when configured, exists, accepts EventBridge's messages
    /// (its policy, and its SSE-KMS key), and is fed by enabled rules for every kind of event this
    /// class's nodes can get.
    InterruptionHandlingReady {
        column: "Interruption",
        facts_from {
            cluster: "Karpenter Deployment `INTERRUPTION_QUEUE` / `--interruption-queue`, NodePools (spot, reserved), EC2NodeClass `capacityReservationSelectorTerms`",
            aws: "SQS `GetQueueUrl`, `GetQueueAttributes` (ARN, policy, `KmsMasterKeyId`); KMS `DescribeKey`, `GetKeyPolicy` of the queue's key; EventBridge `ListEventBuses`, `ListRuleNamesByTarget` per bus (and to each custom bus from the default one), `DescribeRule`",
        }
        reasons {
            InterruptionHandlingConfigured => True,
                "The interruption queue exists, accepts EventBridge's messages and is fed by enabled rules for every kind of event this class's nodes can get (kinds they cannot get yet are warnings).",
                "Nothing to do.";
            InterruptionHandlingDisabled => True,
                "Karpenter has no interruption queue configured, so there is nothing to check (spot NodePools get a warning).",
                "Nothing to do, unless you use spot: then set Karpenter's settings.interruptionQueue.";
            InterruptionQueueNotAName => False,
                "Karpenter's interruption queue setting is an ARN or URL; Karpenter looks it up as a queue name, so interruption handling never starts.",
                "Set settings.interruptionQueue (INTERRUPTION_QUEUE) to the queue's name, the last part of the ARN or URL.";
            InterruptionQueueNotFound => False,
                "SQS has no queue of the configured name in this region, so Karpenter handles no interruption.",
                "Create the queue (Karpenter's CloudFormation template does), or fix settings.interruptionQueue.";
            InterruptionQueuePolicyMissing => False,
                "The interruption queue's policy does not let events.amazonaws.com and sqs.amazonaws.com send messages to it, so EventBridge's events never arrive.",
                "Add the queue policy statement of Karpenter's CloudFormation template (Allow sqs:SendMessage to the services events.amazonaws.com and sqs.amazonaws.com).";
            InterruptionRulesMissing => False,
                "No enabled EventBridge rule sends some of the events this EC2NodeClass's nodes can get (instance state change and scheduled change always; spot interruption and rebalance when a NodePool allows spot; capacity-reservation interruption, Karpenter 1.10+, when the class selects an interruptible capacity reservation or a NodePool asks for one) to the queue.",
                "Create the missing rules of Karpenter's CloudFormation template on the default event bus with the queue as their target.";
            InterruptionQueueKeyUnusable => False,
                "The interruption queue is encrypted with a KMS key EventBridge cannot use (the AWS managed key alias/aws/sqs, a key that is missing or disabled, or one whose key policy does not let events.amazonaws.com call kms:GenerateDataKey and kms:Decrypt), so EventBridge drops every event it sends.",
                "Encrypt the queue with SSE-SQS (SqsManagedSseEnabled), or with a customer managed key whose key policy allows the service principal events.amazonaws.com kms:GenerateDataKey and kms:Decrypt.";
        }
        warnings {
            SpotWithoutInterruptionHandling =>
                "A NodePool of this EC2NodeClass allows spot, but Karpenter has no interruption queue: spot interruption warnings, rebalance recommendations and scheduled maintenance are not handled, so spot nodes vanish without being drained first.",
                "Create the interruption queue and its EventBridge rules (Karpenter's CloudFormation template) and set Karpenter's settings.interruptionQueue to the queue's name.";
            InterruptionRuleNotYetNeeded =>
                "No enabled EventBridge rule sends a kind of event to the interruption queue that this EC2NodeClass's nodes cannot get yet (spot interruption and rebalance without spot NodePools; capacity-reservation interruption without interruptible capacity reservations): nothing is lost now, but it will be once they can.",
                "Add the rule (Karpenter's CloudFormation template) before a NodePool of the class allows spot or the class selects an interruptible capacity reservation.";
            InterruptionQueuePolicyWithoutSqs =>
                "The interruption queue's policy lets EventBridge send, but not sqs.amazonaws.com, which Karpenter's template also allows.",
                "Add sqs.amazonaws.com to the queue policy's Allow sqs:SendMessage statement, as Karpenter's CloudFormation template does.";
        }
        cannot_see: "Rules in other accounts that forward AWS's events to a custom bus here; EventBridge rule content filters beyond source and detail-type. Kinds of events the class's nodes cannot get yet (spot without spot NodePools, capacity reservations without reservations) are warnings.",
        lab {
            InterruptionQueueNotFound => Lab::Proven("lab_reasons::an_interruption_queue_sqs_does_not_have_is_never_read");
            InterruptionQueueNotAName => Lab::NotProven(INTERRUPTION);
            InterruptionQueuePolicyMissing => Lab::NotProven(INTERRUPTION);
            InterruptionRulesMissing => Lab::NotProven(INTERRUPTION);
            InterruptionQueueKeyUnusable => Lab::NotProven(INTERRUPTION);
        }
    }

    /// Spot capacity a NodePool of this EC2NodeClass allows can launch (the EC2 Spot service-linked role exists).
    SpotReady {
        column: "Spot",
        facts_from {
            cluster: "NodePools of the class (`karpenter.sh/capacity-type`)",
            aws: "IAM `GetRole AWSServiceRoleForEC2Spot`",
        }
        reasons {
            SpotNotUsed => True,
                "No NodePool of this EC2NodeClass allows spot capacity.",
                "Nothing to do.";
            SpotServiceLinkedRoleExists => True,
                "A NodePool allows spot and the AWSServiceRoleForEC2Spot service-linked role exists.",
                "Nothing to do.";
            SpotServiceLinkedRoleMissing => False,
                "A NodePool allows spot, but the account has no AWSServiceRoleForEC2Spot service-linked role, so spot launches fail and Karpenter silently falls back to on-demand.",
                "Create it once per account: aws iam create-service-linked-role --aws-service-name spot.amazonaws.com.";
        }
        lab {
            SpotServiceLinkedRoleMissing => Lab::NotProven(SPOT);
        }
    }

    /// The subnets this EC2NodeClass selects exist, are in the cluster's VPC, and some zone it can
    /// launch into has a subnet with the free addresses a node needs for certain.
    SubnetsReady {
        column: "Subnets",
        facts_from {
            cluster: "EC2NodeClass `status.subnets` (else `subnetSelectorTerms`), NodePools (`topology.kubernetes.io/zone`), `kube-system/aws-node` DaemonSet env (custom networking, IPv6, warm targets, prefix delegation)",
            aws: "EC2 `DescribeSubnets` (one call per id set or distinct term); EKS `DescribeCluster` (VPC, else its subnets' VPC)",
        }
        reasons {
            SubnetsValid => True,
                "The selected subnets exist, are in the cluster's VPC, and a zone the class launches into has one with room for a node (zones without, or short of the VPC CNI's warm pool, are warnings).",
                "Nothing to do.";
            SubnetsNotFound => False,
                "The subnet selector terms match no subnet, or a subnet in Karpenter's status.subnets no longer exists.",
                "Fix spec.subnetSelectorTerms or tag the intended subnets; recreate or deselect a deleted subnet.";
            SubnetInOtherVpc => False,
                "A selected subnet is in another VPC than the cluster's, so nodes launched there cannot join (Karpenter reports SecurityGroupSubnetVPCMismatch only after a failed launch).",
                "Select subnets of the cluster's VPC only (fix spec.subnetSelectorTerms or the subnets' tags).";
            SubnetsOutOfAddresses => False,
                "In every zone the class can launch into, no selected subnet has what a node needs for certain: one free address for the launch (else InsufficientFreeAddressesInSubnet), and one more for a Pod where the VPC CNI gives Pods addresses from the node's subnet (not with custom networking, IPv6 or another CNI).",
                "Free addresses (delete unused ENIs), add larger subnets (or a secondary CIDR) and tag them for the selector, or move Pod addresses off the node subnets (VPC CNI custom networking).";
        }
        warnings {
            ZoneSubnetsLowOnAddresses =>
                "In a zone the EC2NodeClass can launch into, no selected subnet has the free IP addresses a node needs: either not even what a launch needs for certain (Karpenter then launches into the other zones only, so pods that need this zone stay pending), or not the VPC CNI's warm pool (nodes launch, but Pods beyond the free addresses wait for one).",
                "Free addresses in the zone's subnets, add a larger subnet there and tag it for the selector, or lower the VPC CNI's warm targets.";
        }
        cannot_see: "Which instance types Karpenter will pick (the warm pool of the VPC CNI's default mode depends on them; 16 addresses are assumed); Cilium's ENI mode, which takes Pod addresses from VPC subnets. Only what a node needs for certain (one address, two where Pods take theirs from the node's subnet) makes it False.",
        lab {
            SubnetsNotFound => Lab::Proven("lab_reasons::a_subnet_selector_matching_nothing_launches_nothing");
            SubnetInOtherVpc => Lab::NotProven(NETWORK);
            SubnetsOutOfAddresses => Lab::NotProven(NETWORK);
        }
    }

    /// From every selected subnet a node can reach the control plane and AWS (a NAT or internet
    /// gateway route, or the VPC endpoints a private cluster needs), and the VPC resolves DNS.
    NodeNetworkReady {
        column: "Network",
        facts_from {
            cluster: "EC2NodeClass `associatePublicIPAddress`, `userData` (a proxy)",
            aws: "EC2 `DescribeSubnets` (`OwnerId`: a VPC shared by another account), `DescribeRouteTables`, `DescribeNatGateways`, `DescribeVpcEndpoints`, `DescribeVpcAttribute` (each once per VPC, whatever the number of classes); EKS `DescribeCluster` (IP family)",
        }
        reasons {
            NodeNetworkValid => True,
                "Every selected subnet routes to a NAT or internet gateway, or the VPC has the endpoints a private cluster needs, and the VPC resolves DNS.",
                "Nothing to do.";
            NodeEgressNotInspected => True,
                "A selected subnet's default route leads to a target this check cannot see through (transit gateway, peering, virtual private gateway, network interface, core network, private NAT, a Gateway Load Balancer or Network Firewall endpoint), or the subnet is in a VPC another account shares through AWS RAM, whose NAT gateways and endpoints this account cannot list; the rest is healthy.",
                "Nothing to do if that path reaches the EKS endpoint and the AWS APIs; the message names what was not checked.";
            SubnetNoEgressRoute => False,
                "A selected subnet's route table has no default route and the VPC has none of the endpoints a private cluster needs, so nodes cannot reach the control plane or AWS and never join.",
                "Add a default route to a NAT gateway (or an internet gateway for public subnets), or create the VPC endpoints ec2, ecr.api, ecr.dkr, sts, ssm and the s3 gateway endpoint.";
            SubnetEgressBlackholed => False,
                "A selected subnet's default route points at a NAT or internet gateway that is deleted, failed or blackholed, and the VPC endpoints do not make up for it.",
                "Point the default route at a working NAT gateway (or internet gateway), or create the missing VPC endpoints.";
            InternetGatewayWithoutPublicIp => False,
                "A selected subnet routes to an internet gateway, but nodes get no public IPv4 address there (the subnet does not map one and spec.associatePublicIPAddress is not true), so they cannot reach anything beyond the VPC.",
                "Set spec.associatePublicIPAddress: true, enable MapPublicIpOnLaunch on the subnet, or route it through a NAT gateway.";
            VpcEndpointsMissing => False,
                "A selected subnet has no default route to a gateway and the VPC lacks some of the endpoints a private cluster needs (or an interface endpoint has private DNS off).",
                "Create the endpoints the message names (interface endpoints with private DNS on; the s3 gateway endpoint associated with the subnet's route table).";
            VpcDnsDisabled => False,
                "The VPC has enableDnsSupport or enableDnsHostnames off, so nodes cannot resolve the cluster endpoint or register with their DNS names.",
                "Turn on both attributes: aws ec2 modify-vpc-attribute --enable-dns-support and --enable-dns-hostnames.";
        }
        cannot_see: "Anything past a route's target: transit gateways, peering, appliances and inspection endpoints (Gateway Load Balancer, Network Firewall) are not followed; security groups and network ACLs on the path; NAT gateways and endpoints that the owner of a shared (RAM) VPC holds.",
        lab {
            SubnetNoEgressRoute => Lab::NotProven(NETWORK);
            SubnetEgressBlackholed => Lab::NotProven(NETWORK);
            InternetGatewayWithoutPublicIp => Lab::NotProven(NETWORK);
            VpcEndpointsMissing => Lab::NotProven(NETWORK);
            VpcDnsDisabled => Lab::NotProven(NETWORK);
        }
    }

    /// The KMS keys that encrypt this EC2NodeClass's EBS volumes (named in its block devices, or
    /// the account's default) exist, are enabled and let EC2 use them on the controller's behalf
    /// (by the key policy, a grant, or the controller role's IAM policies where the key policy
    /// leaves it to them).
    VolumeEncryptionReady {
        column: "Volumes",
        facts_from {
            cluster: "EC2NodeClass `spec.blockDeviceMappings[].ebs` (`encrypted`, `kmsKeyID`)",
            aws: "EC2 `GetEbsEncryptionByDefault`, `GetEbsDefaultKmsKeyId` (once per account and region); KMS `DescribeKey`, `GetKeyPolicy` (once per key), `ListGrants` to the controller's role and IAM `SimulatePrincipalPolicy` of the controller's role on the key through EC2 (once per customer-managed key)",
        }
        reasons {
            VolumeEncryptionNotUsed => True,
                "No volume of this EC2NodeClass is encrypted with a KMS key (no key named, no encrypted volume, default encryption off), so there is nothing to check.",
                "Nothing to do.";
            VolumeEncryptionKeysUsable => True,
                "Every KMS key the volumes are encrypted with exists, is enabled and lets EC2 use it (or is the AWS-managed aws/ebs key).",
                "Nothing to do.";
            KmsKeyNotFound => False,
                "KMS has no key of the id, ARN or alias the volumes are encrypted with, so every launch fails and the node terminates at once (Client.InternalError).",
                "Point blockDeviceMappings[].ebs.kmsKeyID (or the account's default EBS key) at an existing key.";
            KmsKeyDisabled => False,
                "The KMS key the volumes are encrypted with is disabled, so EC2 cannot create the volumes and the node terminates seconds after launch.",
                "Enable the key (aws kms enable-key), or use another key.";
            KmsKeyPendingDeletion => False,
                "The KMS key the volumes are encrypted with is scheduled for deletion, so EC2 cannot use it and nodes terminate seconds after launch.",
                "Cancel the deletion (aws kms cancel-key-deletion, then enable the key), or use another key.";
            KmsKeyPendingImport => False,
                "The KMS key the volumes are encrypted with has no key material imported yet, so EC2 cannot use it.",
                "Import the key material (aws kms import-key-material), or use another key.";
            KmsKeyStateTransient => Unknown,
                "The KMS key is in a state other than Enabled, Disabled, PendingDeletion or PendingImport (Creating, Updating, Unavailable), so whether EC2 can use it is not decided.",
                "Wait for the key to settle; if it stays Unavailable, reconnect its custom key store.";
            KmsKeyPolicyDeniesEc2 => False,
                "Neither the key policy nor a grant to the Karpenter controller's role lets EC2 use the key: the policy does not delegate to the account (its root), and the actions EC2 needs (kms:CreateGrant, kms:Decrypt, kms:GenerateDataKeyWithoutPlaintext, kms:ReEncrypt*, kms:DescribeKey) are allowed neither to the controller's role nor through ec2.<region>.amazonaws.com, so nodes terminate seconds after launch.",
                "Add a key policy statement allowing those actions to the Karpenter controller's role (or to the account root, and then in the role's IAM policies), or with kms:ViaService ec2.<region>.amazonaws.com and kms:CallerAccount of the account.";
            KmsKeyNotAllowedForController => False,
                "The key's policy leaves its use to the account's IAM policies (it allows the account root), and the Karpenter controller role's own policies (or a boundary or SCP) do not allow EC2 to use it on the controller's behalf (kms:CreateGrant, kms:Decrypt, kms:GenerateDataKeyWithoutPlaintext, kms:ReEncrypt*, kms:DescribeKey through ec2.<region>.amazonaws.com), so every node terminates seconds after launch (aws/karpenter-provider-aws #3767).",
                "Allow the controller role those actions on the key's ARN with the condition kms:ViaService ec2.<region>.amazonaws.com, or name the role in the key policy; if the message names a boundary or SCP, lift the denial there.";
        }
        cannot_see: "Key policies of keys in other accounts (GetKeyPolicy is denied across accounts); the controller role's IAM permissions on a key without IAM's simulator; encryption-context constraints of grants.",
        lab {
            KmsKeyNotFound => Lab::NotProven(KMS);
            KmsKeyDisabled => Lab::NotProven(KMS);
            KmsKeyPendingDeletion => Lab::NotProven(KMS);
            KmsKeyPendingImport => Lab::NotProven(KMS);
            KmsKeyPolicyDeniesEc2 => Lab::NotProven(KMS);
            KmsKeyNotAllowedForController => Lab::NotProven(KMS);
        }
    }

    /// The installed Karpenter supports the cluster's Kubernetes version, its CRDs are not older
    /// than the controller, no v1beta1 is left stored, and its webhooks reach a Service.
    KarpenterVersionCompatible {
        column: "Version",
        facts_from {
            cluster: "Karpenter Deployment (its version), the Karpenter CRDs (`storedVersions`, schema fields, conversion webhook), validating and mutating webhook configurations, Endpoints in Karpenter's namespace, the API server's `/version` (only where EKS cannot be read)",
            aws: "EKS `DescribeCluster` (`version`)",
        }
        reasons {
            KarpenterVersionSupported => True,
                "Karpenter supports the cluster's Kubernetes version, its CRDs match the controller, no v1beta1 is stored and every webhook reaches a ready Service.",
                "Nothing to do.";
            KubernetesVersionUnsupported => False,
                "The installed Karpenter is older than the first release that supports the cluster's Kubernetes version (karpenter.sh compatibility matrix).",
                "Upgrade Karpenter (controller and CRDs) to at least the version the message names, before or with the cluster upgrade.";
            KubernetesVersionNotInMatrix => Unknown,
                "The cluster's Kubernetes version is newer (or older) than the compatibility matrix this karpenter-health knows, so it cannot say whether Karpenter supports it.",
                "Look the version up on the karpenter.sh compatibility page and give the row at run time (--kubernetes-compatibility 1.<minor>=<first Karpenter release>, chart settings.kubernetesCompatibility), or upgrade karpenter-health.";
            CrdsOlderThanController => False,
                "The installed Karpenter CRDs lack schema fields the controller's release writes or reads, so the API server prunes them: the CRDs were not upgraded with the controller.",
                "Apply the CRDs of the controller's release (the karpenter-crd chart, or the chart's crds/ directory: helm does not upgrade CRDs).";
            StoredVersionsStale => False,
                "A Karpenter CRD still lists v1beta1 in status.storedVersions on Karpenter 1.1 or later, which dropped v1beta1 and its conversion webhook, so applying the new CRDs fails.",
                "Migrate stored objects to v1 (re-write them), then remove v1beta1 from status.storedVersions of the CRD named.";
            WebhookServiceMissing => False,
                "A Karpenter webhook (admission, or the conversion webhook of a CRD that serves or stores more than one version) points at a Service that does not exist or has no ready endpoints, so the API server fails the requests it sends there.",
                "Delete the leftover webhook configuration (or the CRD's spec.conversion webhook), or restore the Service the message names.";
        }
        warnings {
            UnusedConversionWebhookUnreachable =>
                "A Karpenter CRD still names a conversion webhook whose Service is missing or has no ready endpoints (left over from Karpenter 1.0), but it serves and stores a single version, so the API server never calls it today. Serving or storing a second version again would make every conversion fail.",
                "Remove the leftover: kubectl patch crd <name> --type=merge -p '{\"spec\":{\"conversion\":{\"strategy\":\"None\",\"webhook\":null}}}' (Karpenter 1.1 and later ship their CRDs without one).";
        }
        lab {
            KubernetesVersionUnsupported => Lab::NotProven("the lab runs one Kubernetes version (1.34), which both releases it builds support.");
            CrdsOlderThanController => Lab::NotProven(VERSIONS);
            StoredVersionsStale => Lab::NotProven(VERSIONS);
            WebhookServiceMissing => Lab::NotProven(VERSIONS);
        }
    }

    /// Every NodePool of this EC2NodeClass allows some instance type that EC2 offers in a zone
    /// of the class's subnets, with an architecture of the class's AMIs.
    InstanceTypesAvailable {
        column: "Types",
        facts_from {
            cluster: "NodePools of the class (template labels, `requirements`), EC2NodeClass `status.amis[].requirements` (architectures), the class's subnets' zones, pending Pods only one NodePool may take (outside the namespaces `--exclude-pod-namespaces` names)",
            aws: "EC2 `DescribeInstanceTypes`, `DescribeInstanceTypeOfferings` by availability zone (each once per region, whatever the number of classes, kept 6 h in the catalog family and revalidated on evidence)",
        }
        reasons {
            InstanceTypesOffered => True,
                "Every NodePool of this EC2NodeClass allows instance types EC2 offers in the zones of the class's subnets (or no NodePool uses the class).",
                "Nothing to do.";
            NoInstanceTypeMatchesRequirements => False,
                "A NodePool's requirements (instance type, family, category, generation, size, vCPUs, memory, architecture, capacity type) leave no instance type that EC2 offers in the zones of the class's subnets (reserved capacity only where the class has a reservation), or fewer distinct values of a key than its minValues under Karpenter's Strict policy, so Karpenter can launch nothing for it and only emits a NoCompatibleInstanceTypes Event per Pod (aws/karpenter-provider-aws #6884, #7713, #8535).",
                "Widen or correct the requirement the message names (a family or size that does not exist in this region, bounds that exclude every type, a capacity type no allowed type has, a minValues above what is left).";
            RequiredZonesWithoutSubnets => False,
                "A NodePool requires zones (topology.kubernetes.io/zone) in which the EC2NodeClass selects no subnet, so no node of it can launch.",
                "Tag a subnet in a required zone for the class's subnetSelectorTerms, or require a zone the class's subnets are in.";
            NoInstanceTypeForAmiArchitecture => False,
                "Every instance type a NodePool allows has an architecture none of the class's AMIs (status.amis) is built for, so Karpenter cannot pair an image with any of them.",
                "Allow the AMIs' architecture in the NodePool (kubernetes.io/arch), or select AMIs of the architecture the NodePool asks for.";
        }
        warnings {
            NodePoolAllowsNoInstanceType =>
                "A NodePool of this EC2NodeClass allows no instance type EC2 offers in the class's zones for its AMIs, so Karpenter launches nothing from it; other NodePools of the class allow some, and no pending Pod that only this NodePool may take (its taints tolerated, its requirements and template labels met) waits. A Pod that needs it waits for ever, and Karpenter says so only in a NoCompatibleInstanceTypes Event.",
                "Widen or correct the requirement the message names, or delete the NodePool if the others serve its Pods.";
        }
        cannot_see: "Requirements on keys it does not derive (GPU, accelerator, network, EBS bandwidth, hypervisor, zone id, OS), and unknown operators: they never remove a type, so a NodePool emptied only by them stays True; minValues is counted on the modelled keys only, under the Strict policy (a BestEffort or unread MIN_VALUES_POLICY never fails it). Reserved capacity is taken as offered only for the instance types and zones of the class's capacity reservations that are not expiring, once Karpenter's status lists them for the current generation with its ReservedCapacity gate on; otherwise (no usable reservation at all, which CapacityReservationsUsable judges, or not known) it is assumed available, and a reservation's available count is not read. Which types Karpenter would also drop (price, pods per node, kubelet reservations, insufficient capacity). An instance type AWS added since the catalog was read (at most 6 h ago, sooner on evidence about the class). Which NodePool a pending Pod may go to is judged from its node selector, required affinity and tolerations against each NodePool's taints, labels and requirements, never stricter than Karpenter (labels under Kubernetes, Karpenter and AWS-provider domains are taken as well-known, Gt and Lt admit everything); topology spread, Pod affinity, volumes and resources are not weighed, so a Pod another NodePool could not really take may leave an empty NodePool a warning.",
        lab {
            NoInstanceTypeMatchesRequirements => Lab::Proven("lab_reasons::requirements_no_instance_type_meets_launch_nothing");
            RequiredZonesWithoutSubnets => Lab::Proven("lab_reasons::a_required_zone_without_a_subnet_launches_nothing");
            NoInstanceTypeForAmiArchitecture => Lab::Proven("lab_reasons::an_architecture_the_images_are_not_built_for_launches_nothing");
        }
    }

    /// No Pod that only this EC2NodeClass can take waits while every NodePool of the class is
    /// at its `spec.limits`, has limits smaller than any instance type it allows, or allows only
    /// standard instances the account's vCPU quota no longer has room for.
    LimitsLeaveRoom {
        column: "Limits",
        facts_from {
            cluster: "NodePools of the class (`spec.limits`, `status.resources`), pending Pods only this class can take (outside the namespaces `--exclude-pod-namespaces` names)",
            aws: "the instance-type catalog above (the smallest type a NodePool allows), the instance sweep (this cluster's running standard instances and their lifecycle); Service Quotas `GetServiceQuota` for EC2's `L-1216C47A` and `L-34B43A08` (each once per account, in the account family)",
        }
        reasons {
            NodePoolsHaveRoom => True,
                "Some NodePool of this EC2NodeClass can still launch an instance type it allows under its spec.limits, or no Pod waits for one (a NodePool at its limits is a warning then).",
                "Nothing to do.";
            NodePoolLimitsReached => False,
                "Pods that only this EC2NodeClass can take wait, and every NodePool of the class has used up a limit of its spec.limits (cpu or memory, in status.resources), so Karpenter launches nothing for them.",
                "Raise the NodePool's spec.limits, add a NodePool with room, or free capacity (consolidation, fewer replicas).";
            NodePoolLimitsBelowSmallestInstance => False,
                "Pods that only this EC2NodeClass can take wait, and the cpu left under each NodePool's spec.limits is smaller than every instance type the NodePool allows, so no launch fits.",
                "Raise limits.cpu to at least the vCPUs of the smallest instance type the NodePool allows, or allow smaller instance types.";
            VcpuQuotaExhausted => False,
                "Pods that only this EC2NodeClass can take wait, and every NodePool of the class allows only standard (A, C, D, H, I, M, R, T, Z) instances, none of which fits under the account's vCPU quota for its capacity types in this region (Service Quotas L-1216C47A on-demand, L-34B43A08 spot) given what this cluster's own instances already run, so EC2 refuses every launch (VcpuLimitExceeded, MaxSpotInstanceCountExceeded).",
                "Request a quota increase in Service Quotas (EC2, the quota the message names), free vCPUs, or allow instance types of another quota or capacity type.";
        }
        warnings {
            NodePoolAtLimits =>
                "A NodePool of this EC2NodeClass has used up a limit of its spec.limits (or the cpu left is smaller than every instance type it allows), so it launches nothing more; no pending Pod that only stopped NodePools of this class may take (its taints tolerated, its requirements and template labels met) has waited for them long enough to count.",
                "Raise the NodePool's spec.limits before workloads need it, or leave it if the cap is intended.";
            VcpuQuotaNearlyUsed =>
                "This cluster's own standard on-demand (or spot) instances already run 90 % or more of the account's vCPU quota for them in this region; other workloads of the account count too, so launches may soon fail with VcpuLimitExceeded.",
                "Request a quota increase in Service Quotas (EC2, L-1216C47A on-demand or L-34B43A08 spot) before the next scale-up.";
        }
        cannot_see: "Memory left below the smallest type (Karpenter's memory capacity is below the nominal size by an overhead not read), and resources other than cpu, memory and nodes (limits.nodes stops a NodePool at its count from Karpenter 1.11; with an older or unknown version only once the count is past it); vCPUs the account runs outside this cluster (the count is a lower bound); quotas of non-standard families (G, P, X, U, Inf, Trn, DL, HPC, Mac) and of reserved capacity. Which NodePools a waiting Pod may go to is judged from its node selector, required affinity and tolerations against each NodePool's taints, labels and requirements, never stricter than Karpenter; topology spread, Pod affinity, volumes and what fits beside other Pods are not weighed. Karpenter's Nominated Events are not read: a Pod counts once it has been unschedulable for KH_WAITING_ON_LIMITS_AFTER with no NodeClaim of the class registering, so a blocked Pod is False that much later, and not while another NodeClaim of the class registers.",
        lab {
            NodePoolLimitsReached => Lab::Proven("lab_reasons::pods_beyond_the_node_pools_limit_wait_and_the_scale_up_to_it_is_never_false");
            NodePoolLimitsBelowSmallestInstance => Lab::NotProven("not scripted yet: the same refusal as NodePoolLimitsReached with a limit below one node.");
            VcpuQuotaExhausted => Lab::NotProven("moto keeps no vCPU quota and never answers VcpuLimitExceeded.");
        }
    }

    /// Drifted NodeClaims of this EC2NodeClass are replaced as their NodePools' disruption
    /// budgets allow. Its findings are warnings (a budget that switches drift off is a decision;
    /// what holds a drifted or terminating NodeClaim may go at any time), so it is never False.
    DriftCanBeReplaced {
        column: "Drift",
        facts_from {
            cluster: "NodeClaims of the class (`Drifted`, `deletionTimestamp`, `terminationGracePeriod`), NodePools (`spec.disruption.budgets` with their schedules), Karpenter's `DisruptionBlocked` Events on NodeClaims (a watch with a field selector, the newest Event per NodeClaim); for NodeClaims terminating longer than `KH_TERMINATING_LONG_AFTER`, the Pods on their Node and the PodDisruptionBudgets of those Pods' namespaces (listed, not watched: `kube-facts/src/drain.rs`)",
            aws: "—",
        }
        reasons {
            DriftReplaceable => True,
                "No NodeClaim of this EC2NodeClass is drifted, or Karpenter replaces drifted NodeClaims as their NodePools' budgets allow; NodeClaims held by a budget that switches drift off (a decision) are the warning DriftHeldByBudget, never False.",
                "Nothing to do.";
        }
        warnings {
            DriftHeldByBudget =>
                "Drifted NodeClaims of this EC2NodeClass have been drifted for 30 minutes or more, and the NodePool that made each has a disruption budget always in force (without a schedule, or with one whose windows each last until the next fire, such as @daily for 24h) that allows 0 nodes for drift. That is how Karpenter's docs switch drift off (kubernetes-sigs/karpenter #1576, #1776), so it is taken as a decision: the NodeClaims keep the old AMI, subnets or security groups until they expire (spec.expireAfter, 720h by default, which budgets do not hold) or are deleted. The message names each one, how long it has been drifted, the budget and when it expires.",
                "Nothing, if drift is off on purpose. To let drift roll the nodes: raise that budget's nodes above 0, limit it to other reasons, or give it a schedule and a duration shorter than the time between two fires.";
            DriftedNodeClaimBlocked =>
                "NodeClaims of this EC2NodeClass have been drifted for 30 minutes or more and no budget stops them, but Karpenter's own DisruptionBlocked Events say what keeps it from replacing them: a PodDisruptionBudget that allows no eviction, a Pod annotated karpenter.sh/do-not-disrupt, or another reason it names (kubernetes-sigs/karpenter #1392, #2169).",
                "Deal with what the message names: let the PodDisruptionBudget allow an eviction, remove the annotation once the Pod may move, or set terminationGracePeriod on the NodePool so drift ends within a bound.";
            NodeClaimTerminatingLong =>
                "A NodeClaim of this EC2NodeClass has been terminating for an hour or more (KH_TERMINATING_LONG_AFTER) without a spec.terminationGracePeriod of its own (copied from its NodePool when it was made), so Karpenter waits for every Pod on it to be evicted (kubernetes-sigs/karpenter #1392, #2169). The warning names what holds each one, read from the Pods on its Node and the PodDisruptionBudgets of their namespaces as Karpenter's drain and the eviction API judge them: a PodDisruptionBudget that allows no eviction (or one the disruption controller has not processed), a Pod selected by more than one PodDisruptionBudget (the eviction API refuses those), a Pod annotated karpenter.sh/do-not-disrupt (Karpenter 1.x does not evict it; a duration such as 30m, from 1.12, until the Pod has run that long), a Pod still in its grace period; Pods nothing read refuses are named as waiting, and an empty Node is said so.",
                "Let the named PodDisruptionBudget allow an eviction (or give the Pod one budget), or remove the karpenter.sh/do-not-disrupt annotation or the Pod; set terminationGracePeriod on the NodePool so the NodeClaims it makes next have a deadline.";
        }
        cannot_see: "Budgets whose schedule has lists, ranges, steps or month names (when they open is not computed: they are assumed to open), percentages above 0 that round to 0 on small NodePools, Pods annotated karpenter.sh/do-not-disrupt and PodDisruptionBudgets that block drift unless Karpenter's own DisruptionBlocked Events name them (Pods on nodes are not watched); what holds a terminating NodeClaim is read only once it has been terminating for KH_TERMINATING_LONG_AFTER, for at most 20 Nodes, and is up to a refresh interval old; a Pod whose fate depends on the Karpenter version is not judged while the version is unknown; eviction failures other than PodDisruptionBudgets (admission webhooks refusing the eviction, Pods a kubelet no longer reports) show only as Pods waiting. A drifted NodeClaim without the karpenter.sh/nodepool label, or whose NodePool is gone, is never said to be held by a budget.",
        retired {
            DriftBlockedByBudget => "Was `False` when every NodePool of the class had a budget always in force of 0 nodes for drift. Such a budget is how Karpenter's docs switch drift off, and the NodeClaims still expire, so it is now the warning `DriftHeldByBudget`, judged per NodePool, and the condition stays `True`.";
        }
    }

    /// The images of this EC2NodeClass resolve and boot nodes that join: an `alias` term is
    /// published for the cluster's Kubernetes version, and `amiFamily` matches the images.
    AmisResolvable {
        column: "AMIs",
        facts_from {
            cluster: "EC2NodeClass `spec.amiSelectorTerms[].alias` and `[].id`, `spec.amiFamily`, `status.amis` (names, `deprecated`), the API server's `/version` (only where EKS has no such cluster)",
            aws: "EKS `DescribeCluster` (`version`); SSM `GetParameter` on the public parameters the alias resolves through for the cluster's minor and, pinned, the next (up to 15 per alias, each once whatever the number of classes, kept 6 h in the catalog family and revalidated on evidence); EC2 `DescribeImages` on the id terms' images and `status.amis` (filter `image-id`, deprecated and disabled included; one call per set of ids, shared by classes with the same images, kept 1 h in the account family and revalidated on evidence)",
        }
        reasons {
            AmisResolved => True,
                "The EC2NodeClass's alias is published for the cluster's Kubernetes version, or the images Karpenter resolved are of the family amiFamily writes user data for (or not official EKS builds, which are not judged).",
                "Nothing to do.";
            AmiAliasNotPublished => False,
                "The EC2NodeClass's alias (amiSelectorTerms[].alias, family@version) resolves through SSM parameters AWS has not published for the cluster's Kubernetes version (for a pinned release: it was never built for that version), so Karpenter resolves no image and launches no node for the class (aws/karpenter-provider-aws #7457, #8564).",
                "Pin a release AWS published for the cluster's Kubernetes version (aws ssm get-parameters-by-path --path /aws/service/eks/optimized-ami/<version>/ lists them), or use @latest.";
            AmiAliasUnsupported => False,
                "Karpenter refuses the EC2NodeClass's alias at the cluster's Kubernetes version before resolving anything: al2 aliases from 1.33 (Karpenter 1.6 and later; AWS builds no Amazon Linux 2 image for 1.33), windows2025 aliases before 1.35 (Karpenter 1.9 and later). It sets AMIsReady=False UnsupportedAlias and launches no node for the class (aws/karpenter-provider-aws pkg/providers/amifamily/ami.go).",
                "Move an al2 class to al2023@latest or bottlerocket@latest (and its userData to that family's format); use windows2022@latest until the cluster runs 1.35.";
            AmiUnavailable => False,
                "The selector terms name images by id only, and EC2 has none of them that can launch: each is deregistered, no longer shared with this account, or disabled, so Karpenter resolves no image and launches nothing.",
                "Select images that exist (a current id, an alias, or tags and names); or share the image with this account again, or re-enable it (aws ec2 enable-image).";
            AmiFamilyMismatch => False,
                "spec.amiFamily makes Karpenter write user data for one family (nodeadm for AL2023, bootstrap.sh for AL2, TOML for Bottlerocket, PowerShell for Windows), but every image the selector terms resolve is an official EKS build of another family, so nodes boot, cannot read their user data, and never join (aws/karpenter-provider-aws #5940).",
                "Set amiFamily to the images' family, or change amiSelectorTerms to select images of amiFamily's family (an alias selects both at once).";
        }
        warnings {
            AmiAliasNotPublishedForNextMinor =>
                "The EC2NodeClass's pinned alias is published for the cluster's Kubernetes version but not for the next one, while AWS publishes images for the next one: once the cluster is upgraded, Karpenter resolves no image for the class and every launch fails (aws/karpenter-provider-aws #9159).",
                "Before upgrading the cluster, pin a release published for both versions (or use @latest).";
            AmiAliasRefusedAfterUpgrade =>
                "The EC2NodeClass's alias serves the cluster's Kubernetes version, but Karpenter refuses its family from the next minor (al2 aliases from 1.33, AWS builds no Amazon Linux 2 image for it; aws/karpenter-provider-aws pkg/providers/amifamily/ami.go): once the cluster is upgraded, AMIsReady goes False UnsupportedAlias and no node launches for the class.",
                "Before upgrading the cluster, move the class to al2023@latest or bottlerocket@latest (and any userData to that family's format).";
            AmiAliasNoLongerResolves =>
                "The EC2NodeClass's alias resolves through SSM parameters AWS has not published for the cluster's Kubernetes version, but Karpenter keeps the images it resolved before in its status (AMIsReady stays True) and goes on launching from them; the next edit of the class, and any new class with this alias, resolves nothing (aws/karpenter-provider-aws pkg/controllers/nodeclass/ami.go).",
                "Pin a release published for the cluster's version (or use @latest) before the class is next edited.";
            AmiDeprecated =>
                "EC2 has deprecated images Karpenter resolved for this EC2NodeClass. Launches still work, and Karpenter uses a deprecated image only when nothing newer matches, but AWS no longer patches it and may deregister it, and then nothing resolves.",
                "Select a current image (a newer pinned release, @latest, or new selector terms).";
            AmiDeprecationAhead =>
                "EC2 deprecates an image this EC2NodeClass uses within the next 30 days. Launches keep working after that, but AWS stops patching it, hides it from searches and may later deregister it.",
                "Move to a current image before the date (a newer pinned release, @latest, or new selector terms).";
            AmiSomeUnavailable =>
                "An image this EC2NodeClass names by id, or one Karpenter still lists as resolved, is deregistered, no longer shared with this account, or disabled. Other images remain, so launches go on; Karpenter drops the image when it next resolves.",
                "Remove the image's id from amiSelectorTerms, or share or re-enable the image.";
            AmiFamilyPartlyMismatched =>
                "Some images Karpenter resolved for this EC2NodeClass are official EKS builds of another family than spec.amiFamily: a node launched from one of them boots with user data it cannot read and never joins.",
                "Narrow amiSelectorTerms to images of amiFamily's family.";
        }
        cannot_see: "Selector terms by ssmParameter (the parameter is not read); images whose name is not an official EKS build's (a build of one's own is never judged against amiFamily); when a deprecated image will be deregistered. EC2's answer about the images is up to an hour old (the account family), sooner on evidence (an edit of the class, a change of Karpenter's AMIsReady); images behind name and tag terms that EC2 drops are Karpenter's to replace, so they are only a warning. The controller's permissions to read the alias's parameter and to describe images are asked under ControllerCanLaunch. An alias Karpenter refuses at the cluster's version (al2 from 1.33, windows2025 before 1.35) is False only when the installed Karpenter refuses it (1.6, 1.9 and later) or its AMIsReady says UnsupportedAlias; with an older or unknown version it is judged by what its parameters resolve.",
        lab {
            AmiUnavailable => Lab::Proven("lab_reasons::an_image_ec2_no_longer_has_launches_nothing");
            AmiAliasNotPublished => Lab::NotProven(AMI_CATALOGUE);
            AmiAliasUnsupported => Lab::Proven("lab_reasons::an_al2_alias_is_refused_from_kubernetes_1_33_and_launches_nothing");
            AmiFamilyMismatch => Lab::NotProven(AMI_CATALOGUE);
        }
    }

    /// The capacity reservations this EC2NodeClass selects can take its launches: Karpenter uses
    /// them (its ReservedCapacity feature gate is on), the selector matches an active
    /// reservation, and one is in a zone the class has a subnet in.
    CapacityReservationsUsable {
        column: "Reserved",
        facts_from {
            cluster: "EC2NodeClass `spec.capacityReservationSelectorTerms`, `status.capacityReservations` and Karpenter's `CapacityReservationsReady`; NodePools of the class (`karpenter.sh/capacity-type`); the Karpenter Deployment (`FEATURE_GATES`, `--feature-gates`, its version for the default)",
            aws: "the class's subnets (EC2 `DescribeSubnets`, already read for `SubnetsReady`); EC2 `DescribeCapacityReservations` (the account's active open reservations, once per account whatever the number of classes, in the account family), the instance-type catalog (which types a NodePool launches on demand)",
        }
        reasons {
            NoCapacityReservationsSelected => True,
                "The EC2NodeClass selects no capacity reservation (capacityReservationSelectorTerms is empty).",
                "Nothing to do.";
            CapacityReservationsSelected => True,
                "The EC2NodeClass selects active capacity reservations in zones it has subnets in, or no NodePool of it needs reserved capacity (see the warnings).",
                "Nothing to do.";
            ReservedCapacityDisabled => False,
                "The EC2NodeClass selects capacity reservations and every NodePool of it allows only reserved capacity (karpenter.sh/capacity-type In [reserved]), but the Karpenter controller runs with its ReservedCapacity feature gate off (off by default before 1.6), so it offers no reserved capacity and launches nothing for the class.",
                "Turn the gate on (the chart's settings.featureGates.reservedCapacity, FEATURE_GATES=ReservedCapacity=true), or allow on-demand capacity in the NodePools.";
            CapacityReservationsNotFound => False,
                "The EC2NodeClass selects no capacity reservation Karpenter can launch into: it has no capacityReservationSelectorTerms, its terms match no active reservation (Karpenter's status.capacityReservations is empty while its CapacityReservationsReady is True, which it is even when nothing matches), or every match is an expiring capacity block. Every NodePool of the class allows only reserved capacity, which Karpenter offers only for the class's reservations that are not expiring (aws/karpenter-provider-aws pkg/providers/instancetype/offering/reserved_capacity_resolver.go), so it launches nothing (#8514).",
                "Select an active reservation that is not ending (fix the selector terms: id, tags, ownerID, instanceMatchCriteria), renew it, or allow on-demand capacity in the NodePools.";
            CapacityReservationsOnlyInZonesWithoutSubnets => False,
                "Every capacity reservation the EC2NodeClass selects is in an availability zone the class has no subnet in, and every NodePool of the class allows only reserved capacity, so Karpenter can launch into none of them and launches nothing.",
                "Select a subnet in the reservations' zones, or reservations in the subnets' zones.";
        }
        warnings {
            CapacityReservationsIgnored =>
                "The EC2NodeClass selects capacity reservations, but the Karpenter controller runs with its ReservedCapacity feature gate off (off by default before 1.6): it ignores the selector and launches on-demand or spot instances instead, so the reservations stay unused.",
                "Turn the gate on (the chart's settings.featureGates.reservedCapacity), or remove the selector terms.";
            CapacityReservationSelectorMatchesNothing =>
                "capacityReservationSelectorTerms match no active capacity reservation (Karpenter's CapacityReservationsReady is True all the same), or the EC2NodeClass has none while a NodePool of it allows only reserved capacity. Karpenter launches on-demand or spot from the class's other NodePools instead of the reserved capacity, and nothing from a reserved-only NodePool.",
                "Fix the selector terms to match an active reservation, or remove them.";
            CapacityReservationInZoneWithoutSubnet =>
                "A capacity reservation the EC2NodeClass selects is in an availability zone the class has no subnet in, so Karpenter cannot launch into it from this class.",
                "Select a subnet in the reservation's zone, or leave the reservation to a class that has one.";
            CapacityReservationExpiring =>
                "A capacity block the EC2NodeClass selects is expiring: EC2 reclaims its instances at the end of the block and Karpenter launches no more into it.",
                "Extend or replace the capacity block, or let the NodePools fall back to on-demand.";
            OpenCapacityReservationsSkipped =>
                "The account holds open On-Demand Capacity Reservations in this EC2NodeClass's zones, of instance types its NodePools launch on demand and of the platform and shared tenancy its nodes run with, that the class does not select. With the ReservedCapacity feature gate on (the default from 1.6) Karpenter launches every instance with CapacityReservationPreference none, so its nodes no longer fall into open reservations: they run as on-demand while the reservations stay idle and billed (aws/karpenter-provider-aws #8176, #9001).",
                "Select the reservations in capacityReservationSelectorTerms and allow the reserved capacity type, or turn the gate off where open matching is wanted (settings.featureGates.reservedCapacity).";
        }
        cannot_see: "The selected reservations come from Karpenter's answer (status.capacityReservations), not EC2: a reservation that ended since Karpenter's last resolution (within a minute) is not seen. Whether a selected reservation's instance type is one a NodePool allows is InstanceTypesAvailable's to say; the selected reservations' available count is not read. Open reservations of other accounts shared with this one, open reservations bought within the hour (the account family's period), and open reservations another EC2NodeClass selects (their status is not read with this class's).",
        lab {
            ReservedCapacityDisabled => Lab::NotProven(RESERVATIONS);
            CapacityReservationsNotFound => Lab::NotProven(RESERVATIONS);
            CapacityReservationsOnlyInZonesWithoutSubnets => Lab::NotProven(RESERVATIONS);
        }
    }

    /// The nodes Karpenter launches for this EC2NodeClass can run the Pods it launches them for.
    /// Judged per NodePool of the class: the DaemonSets leave room for Pods, the nodes finish
    /// initializing, and the Pods a node is promised fit the Pod addresses the VPC CNI can give it.
    NodesFitWorkloads {
        column: "Fit",
        facts_from {
            cluster: "every DaemonSet (its Pod template's requests, node selector, required node affinity and tolerations), NodeClaims of the class (`Registered`, and `Initialized` with Karpenter's reason and message, label `karpenter.sh/nodepool`), EC2NodeClass `spec.kubelet` (`maxPods`, `podsPerCore`, `kubeReserved`, `systemReserved`, `evictionHard`) and AMI family, NodePools of the class (requirements), the Karpenter Deployment's `RESERVED_ENIS`, the `kube-system/aws-node` DaemonSet's env (`ENABLE_IPv6`, `ENABLE_PREFIX_DELEGATION`, `AWS_VPC_K8S_CNI_CUSTOM_NETWORK_CFG`, `MAX_ENI`), NodePools' `startupTaints`, the `kube-system/cilium-config` ConfigMap (`set-cilium-node-taints`, `agent-not-ready-taint-key`)",
            aws: "the instance-type catalog above (each type's vCPUs, memory, ENIs and IPv4 addresses per ENI, `DescribeInstanceTypes`)",
        }
        reasons {
            NodesFitTheirPods => True,
                "No NodePool of this EC2NodeClass was found to launch nodes that cannot run their Pods (what is judged: the DaemonSets' requests against the roomiest type a NodePool allows, that registered nodes finish initializing, that Cilium's node taint is a startup taint, and the Pods each node is promised against the Pod addresses the VPC CNI can give it), or no NodePool uses the class.",
                "Nothing to do.";
            DaemonSetsFillNodes => False,
                "The DaemonSets whose Pods run on a NodePool's nodes request more CPU or memory than the roomiest instance type the NodePool allows can give Pods (its capacity less kube-reserved, system-reserved and the eviction threshold). Karpenter adds them to every Pod it schedules there and picks no type they leave no room on, so the NodePool launches nothing and its Pods stay pending with \"no instance type has enough resources\" (aws/karpenter-provider-aws #9269, kubernetes-sigs/karpenter #2838).",
                "Allow larger instance types in the NodePool, lower the named DaemonSets' requests, or keep the largest ones off this NodePool (a node selector or affinity the NodePool does not meet, or a taint they do not tolerate).";
            NodesNotInitializing => False,
                "A NodePool of this EC2NodeClass has nodes that registered but did not initialize within the threshold, and none of its nodes initialized: Karpenter's Initialized condition names what each waits for (a startup taint nobody removes, a node never Ready, a resource such as a GPU that no device plugin registers). Karpenter sets no deadline on initialization (its liveness check ends at registration), counts the node as capacity for the Pods it launched it for, and those Pods wait.",
                "Fix what the message names: start the agent that removes the startup taint (or remove the taint from the NodePool's startupTaints), make the node Ready (its CNI, its kubelet), or install the device plugin of the requested resource; then delete the stuck NodeClaims.";
        }
        warnings {
            AgentTaintNotStartupTaint =>
                "Cilium's operator puts a taint on each new node of a NodePool of this EC2NodeClass until the Cilium agent runs there (`set-cilium-node-taints` in kube-system/cilium-config, true in Cilium's Helm chart), and the NodePool does not declare that taint in startupTaints. Until a node initializes Karpenter hides only its startup taints and the well-known ephemeral ones (kubernetes-sigs/karpenter `pkg/controllers/state/statenode.go`), so it counts each new node as unable to take the Pods it launched it for and launches more nodes for them while the agent starts (Karpenter's FAQ, \"Why do I see extra nodes get launched\"); the extra nodes are consolidated later.",
                "Add the taint, with the key the message names and effect NoExecute, to the NodePool's spec.template.spec.startupTaints (Cilium's operator then adds none and removes it once its agent runs).";
            NodeNotInitializing =>
                "NodeClaims of a NodePool of this EC2NodeClass registered but did not initialize within the threshold, while other nodes of the same NodePool did: those nodes are stuck, the NodePool is not. Karpenter does not replace a node for not initializing.",
                "Look at the named NodeClaims' Nodes (what Karpenter's Initialized condition says they wait for), fix it or delete those NodeClaims.";
            MaxPodsAboveAddresses =>
                "Every instance type a NodePool of this EC2NodeClass allows is promised more Pods (the kubelet's maxPods, as Karpenter computes or the class sets it) than the VPC CNI can give addresses on its node (ENIs × (IPv4 addresses per ENI − 1), less the primary ENI under custom networking, ×16 with prefix delegation, plus the two host-network Pods every node runs). Once a node holds more Pods than that, the rest stay ContainerCreating with \"failed to assign an IP address to container\" (aws/karpenter-provider-aws #6353, #7318, #5317); whether any node fills up that far depends on the Pods' requests.",
                "Remove spec.kubelet.maxPods (Karpenter then computes the ENI-limited count), set it no higher than the smallest type's addresses, enable prefix delegation (ENABLE_PREFIX_DELEGATION=true on aws-node), or with custom networking set Karpenter's RESERVED_ENIS=1.";
        }
        cannot_see: "DaemonSet room: requests that an admission webhook (such as the Vertical Pod Autoscaler) gives a DaemonSet's running Pods instead of its template's (Karpenter counts a running Pod's), init containers (only a lower bound is counted), DaemonSets with a constraint the model does not judge exactly (`Gt`, `Lt`): not counted; Karpenter's memory model is only bounded (its VM overhead and the sizes of nodes it has seen are not), so memory is judged against an upper bound. Initialization: nodes deleted before the threshold. Agent taints: only Cilium's, and only as its Helm chart installs it (ConfigMap `kube-system/cilium-config`, agent DaemonSet `kube-system/cilium`); other agents that taint new nodes (a device plugin, another CNI) are not known, nor is a taint a NodePool's userData or an admission webhook adds. Pod density: Pods that take no VPC address beyond the two host-network Pods every node runs (other host-network DaemonSets), security groups for Pods (branch ENIs), Windows nodes (their addresses come from the VPC resource controller), a CNI other than the VPC CNI (no aws-node DaemonSet: not judged), IPv6 clusters (a node's prefix holds every Pod), and whether a node ever holds that many Pods: that warning is never a False.",
        lab {
            DaemonSetsFillNodes => Lab::Proven("lab_daemonset_room::daemonsets_larger_than_every_allowed_type_leave_the_node_pool_launching_nothing");
            NodesNotInitializing => Lab::Proven("lab_node_initialization::a_startup_taint_nobody_removes_leaves_the_node_uninitialized_and_its_pods_pending");
        }
    }

    /// Summary: every other condition is True.
    Ready {
        column: "Ready",
        facts_from {
            cluster: "summary of the above",
            aws: "—",
        }
        reasons {
            AllChecksPassed => True,
                "Every sub-condition is True.",
                "Nothing to do.";
            PassedWithAcceptedFindings => True,
                "Every sub-condition is True, some only because a finding of theirs was accepted (`FindingAccepted`; status.accepted lists them).",
                "Fix what status.accepted lists before its acceptances expire.";
            MultipleChecksFailed => False,
                "Sub-conditions are False for more than one reason (one reason alone is named instead).",
                "Fix the False conditions listed in the message and in `notReady`.";
            MultipleChecksUnknown => Unknown,
                "No sub-condition is False, and the Unknown ones have more than one reason.",
                "See the Unknown conditions listed in the message and in `notReady`.";
        }
        warnings {
            AcceptanceInvalid =>
                "An acceptance cannot be read, so it accepts nothing: an annotation `accept.karpenter-health.io/<Reason>` whose name is no reason or warning, whose value is not `<until>: <why>` (a date such as 2027-01-31 or an RFC 3339 time, then a reason), or that the operator's settings forbid (--accept-annotations=false); or a fleet rule with such a fault.",
                "Fix the annotation or rule named in the message: `accept.karpenter-health.io/ZoneSubnetsLowOnAddresses: \"2027-01-31: the subnets grow in January\"`.";
            AcceptanceExpired =>
                "An acceptance's date has passed, so the finding it accepted counts again (the condition and Ready say so, and alerts fire again).",
                "Fix the finding, or accept it again with a new date and reason.";
            AcceptanceUnused =>
                "An acceptance names a reason or warning its check did not find on this EC2NodeClass (the check ran and saw no such problem): it accepts nothing and may be stale.",
                "Remove the acceptance, or correct the reason it names.";
        }
        lab {
            MultipleChecksFailed => Lab::NotProven(SUMMARY);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conditions::ConditionStatus;

    #[test]
    fn every_reason_that_can_be_false_says_whether_the_lab_proves_it() {
        for &reason in Reason::ALL {
            if reason.meta().status == ConditionStatus::False {
                assert!(
                    reason.lab().is_some(),
                    "{reason} has no `lab` entry in its condition of vocabulary.rs"
                );
            }
        }
        let proven = Reason::ALL
            .iter()
            .filter(|r| matches!(r.lab(), Some(Lab::Proven(_))))
            .count();
        assert!(
            proven >= 13,
            "the five classic failures and at least eight more: {proven}"
        );
    }

    #[test]
    fn a_lab_entry_is_a_reason_of_its_own_condition() {
        for &reason in Reason::ALL {
            if let Some(condition) = reason.lab_entry_of() {
                assert!(
                    reason.applies_to(condition),
                    "{reason}'s lab entry is under {condition}, not its own condition"
                );
            }
        }
    }
}
