//! The closed list of warning findings: problems worth reporting that never change a condition.
//! Pure data, no IO; docs/checks.md lists them from this table.

use karpenter_health_api::ConditionType;

macro_rules! warnings {
    ($($name:ident => $condition:ident, $meaning:literal, $remediation:literal;)+) => {
        /// A warning finding's code (its `reason` field). Warnings never change a condition.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum Warning { $($name,)+ }

        impl Warning {
            pub const ALL: &'static [Warning] = &[$(Warning::$name,)+];

            pub fn as_str(self) -> &'static str {
                match self { $(Warning::$name => stringify!($name),)+ }
            }

            /// The condition whose check reports it.
            pub fn condition(self) -> ConditionType {
                match self { $(Warning::$name => ConditionType::$condition,)+ }
            }

            pub fn meaning(self) -> &'static str {
                match self { $(Warning::$name => $meaning,)+ }
            }

            pub fn remediation(self) -> &'static str {
                match self { $(Warning::$name => $remediation,)+ }
            }
        }
    };
}

warnings! {
    NodeRoleMissingSsmPolicy => NodeRoleReady,
        "The node role lacks AmazonSSMManagedInstanceCore, so nodes cannot be reached through SSM Session Manager.",
        "Attach AmazonSSMManagedInstanceCore to the node role if you use SSM to debug nodes.";
    NoSecurityGroupTaggedForCluster => SecurityGroupsReady,
        "No selected security group carries kubernetes.io/cluster/<cluster>, which the AWS Load Balancer Controller looks for.",
        "Tag exactly one selected group with kubernetes.io/cluster/<cluster> (value owned or shared).";
    MultipleSecurityGroupsTaggedForCluster => SecurityGroupsReady,
        "More than one selected security group carries kubernetes.io/cluster/<cluster>; the AWS Load Balancer Controller needs exactly one.",
        "Remove the cluster tag from all but one of the selected groups.";
    SecurityGroupStatusStale => SecurityGroupsReady,
        "Karpenter's status.securityGroups differs from what the selector terms resolve to now, so new nodes and drift use an outdated set.",
        "Wait for Karpenter's next security-group refresh (at most 5 minutes); if it persists, check Karpenter's logs.";
    RestrictedLabelOnSharedPod => LabelsAllowed,
        "A pending Pod that NodePools of several EC2NodeClasses could take has a label key the installed Karpenter rejects in some of its required affinity terms or preferences only: if Karpenter uses that term, whichever class it picks cannot create the NodeClaim. (A rejected key in its node selector or in every required term fails every candidate class.)",
        "Remove the key from the Pod's node selector and affinity (for kubernetes.io keys, Karpenter 1.9 and later accept them).";
    SpotWithoutInterruptionHandling => InterruptionHandlingReady,
        "A NodePool of this EC2NodeClass allows spot, but Karpenter has no interruption queue: spot interruption warnings, rebalance recommendations and scheduled maintenance are not handled, so spot nodes vanish without being drained first.",
        "Create the interruption queue and its EventBridge rules (Karpenter's CloudFormation template) and set Karpenter's settings.interruptionQueue to the queue's name.";
    InterruptionRuleNotYetNeeded => InterruptionHandlingReady,
        "No enabled EventBridge rule sends a kind of event to the interruption queue that this EC2NodeClass's nodes cannot get yet (spot interruption and rebalance without spot NodePools; capacity-reservation interruption without interruptible capacity reservations): nothing is lost now, but it will be once they can.",
        "Add the rule (Karpenter's CloudFormation template) before a NodePool of the class allows spot or the class selects an interruptible capacity reservation.";
    InterruptionQueuePolicyWithoutSqs => InterruptionHandlingReady,
        "The interruption queue's policy lets EventBridge send, but not sqs.amazonaws.com, which Karpenter's template also allows.",
        "Add sqs.amazonaws.com to the queue policy's Allow sqs:SendMessage statement, as Karpenter's CloudFormation template does.";
    DryRunDisabled => ControllerCanLaunch,
        "DISABLE_DRY_RUN is set on the Karpenter controller: Karpenter then reports ValidationSucceeded=True without its dry-run launch calls, so its own status no longer proves it can launch.",
        "Remove DISABLE_DRY_RUN (or --disable-dry-run) from the controller unless your environment cannot answer dry-run calls; rely on ControllerCanLaunch meanwhile.";
    ControllerImageReadsDeniedWhileImagesKept => ControllerCanLaunch,
        "The controller may not read the public parameter this EC2NodeClass's alias resolves through (ssm:GetParameter) or describe its images (ec2:DescribeImages), but Karpenter holds images it resolved for the class's current generation: when resolving fails it keeps status.amis and AMIsReady and launches from them (aws/karpenter-provider-aws pkg/controllers/nodeclass/ami.go). Launches go on; the next edit of the class, or a new class, resolves nothing.",
        "Allow ssm:GetParameter on arn:<partition>:ssm:<region>::parameter/aws/service/* and ec2:DescribeImages as Karpenter's IAM policy does (AllowSSMReadActions, AllowRegionalReadActions) before the class is edited; if the message names a permissions boundary or SCP, lift the denial there.";
    ZoneSubnetsLowOnAddresses => SubnetsReady,
        "In a zone the EC2NodeClass can launch into, no selected subnet has the free IP addresses a node needs: either not even what a launch needs for certain (Karpenter then launches into the other zones only, so pods that need this zone stay pending), or not the VPC CNI's warm pool (nodes launch, but Pods beyond the free addresses wait for one).",
        "Free addresses in the zone's subnets, add a larger subnet there and tag it for the selector, or lower the VPC CNI's warm targets.";
    UnusedConversionWebhookUnreachable => KarpenterVersionCompatible,
        "A Karpenter CRD still names a conversion webhook whose Service is missing or has no ready endpoints (left over from Karpenter 1.0), but it serves and stores a single version, so the API server never calls it today. Serving or storing a second version again would make every conversion fail.",
        "Remove the leftover: kubectl patch crd <name> --type=merge -p '{\"spec\":{\"conversion\":{\"strategy\":\"None\",\"webhook\":null}}}' (Karpenter 1.1 and later ship their CRDs without one).";
    NodePoolAtLimits => LimitsLeaveRoom,
        "A NodePool of this EC2NodeClass has used up a limit of its spec.limits (or the cpu left is smaller than every instance type it allows), so it launches nothing more; no pending Pod that only stopped NodePools of this class may take (its taints tolerated, its requirements and template labels met) has waited for them long enough to count.",
        "Raise the NodePool's spec.limits before workloads need it, or leave it if the cap is intended.";
    NodePoolAllowsNoInstanceType => InstanceTypesAvailable,
        "A NodePool of this EC2NodeClass allows no instance type EC2 offers in the class's zones for its AMIs, so Karpenter launches nothing from it; other NodePools of the class allow some, and no pending Pod that only this NodePool may take (its taints tolerated, its requirements and template labels met) waits. A Pod that needs it waits for ever, and Karpenter says so only in a NoCompatibleInstanceTypes Event.",
        "Widen or correct the requirement the message names, or delete the NodePool if the others serve its Pods.";
    VcpuQuotaNearlyUsed => LimitsLeaveRoom,
        "This cluster's own standard on-demand (or spot) instances already run 90 % or more of the account's vCPU quota for them in this region; other workloads of the account count too, so launches may soon fail with VcpuLimitExceeded.",
        "Request a quota increase in Service Quotas (EC2, L-1216C47A on-demand or L-34B43A08 spot) before the next scale-up.";
    DriftHeldByBudget => DriftCanBeReplaced,
        "Drifted NodeClaims of this EC2NodeClass have been drifted for 30 minutes or more, and the NodePool that made each has a disruption budget always in force (without a schedule, or with one whose windows each last until the next fire, such as @daily for 24h) that allows 0 nodes for drift. That is how Karpenter's docs switch drift off (kubernetes-sigs/karpenter #1576, #1776), so it is taken as a decision: the NodeClaims keep the old AMI, subnets or security groups until they expire (spec.expireAfter, 720h by default, which budgets do not hold) or are deleted. The message names each one, how long it has been drifted, the budget and when it expires.",
        "Nothing, if drift is off on purpose. To let drift roll the nodes: raise that budget's nodes above 0, limit it to other reasons, or give it a schedule and a duration shorter than the time between two fires.";
    DriftedNodeClaimBlocked => DriftCanBeReplaced,
        "NodeClaims of this EC2NodeClass have been drifted for 30 minutes or more and no budget stops them, but Karpenter's own DisruptionBlocked Events say what keeps it from replacing them: a PodDisruptionBudget that allows no eviction, a Pod annotated karpenter.sh/do-not-disrupt, or another reason it names (kubernetes-sigs/karpenter #1392, #2169).",
        "Deal with what the message names: let the PodDisruptionBudget allow an eviction, remove the annotation once the Pod may move, or set terminationGracePeriod on the NodePool so drift ends within a bound.";
    NodeClaimTerminatingLong => DriftCanBeReplaced,
        "A NodeClaim of this EC2NodeClass has been terminating for an hour or more (KH_TERMINATING_LONG_AFTER) without a spec.terminationGracePeriod of its own (copied from its NodePool when it was made), so Karpenter waits for every Pod on it to be evicted (kubernetes-sigs/karpenter #1392, #2169). The warning names what holds each one, read from the Pods on its Node and the PodDisruptionBudgets of their namespaces as Karpenter's drain and the eviction API judge them: a PodDisruptionBudget that allows no eviction (or one the disruption controller has not processed), a Pod selected by more than one PodDisruptionBudget (the eviction API refuses those), a Pod annotated karpenter.sh/do-not-disrupt (Karpenter 1.x does not evict it; a duration such as 30m, from 1.12, until the Pod has run that long), a Pod still in its grace period; Pods nothing read refuses are named as waiting, and an empty Node is said so.",
        "Let the named PodDisruptionBudget allow an eviction (or give the Pod one budget), or remove the karpenter.sh/do-not-disrupt annotation or the Pod; set terminationGracePeriod on the NodePool so the NodeClaims it makes next have a deadline.";
    AmiAliasNotPublishedForNextMinor => AmisResolvable,
        "The EC2NodeClass's pinned alias is published for the cluster's Kubernetes version but not for the next one, while AWS publishes images for the next one: once the cluster is upgraded, Karpenter resolves no image for the class and every launch fails (aws/karpenter-provider-aws #9159).",
        "Before upgrading the cluster, pin a release published for both versions (or use @latest).";
    AmiAliasRefusedAfterUpgrade => AmisResolvable,
        "The EC2NodeClass's alias serves the cluster's Kubernetes version, but Karpenter refuses its family from the next minor (al2 aliases from 1.33, AWS builds no Amazon Linux 2 image for it; aws/karpenter-provider-aws pkg/providers/amifamily/ami.go): once the cluster is upgraded, AMIsReady goes False UnsupportedAlias and no node launches for the class.",
        "Before upgrading the cluster, move the class to al2023@latest or bottlerocket@latest (and any userData to that family's format).";
    AmiAliasNoLongerResolves => AmisResolvable,
        "The EC2NodeClass's alias resolves through SSM parameters AWS has not published for the cluster's Kubernetes version, but Karpenter keeps the images it resolved before in its status (AMIsReady stays True) and goes on launching from them; the next edit of the class, and any new class with this alias, resolves nothing (aws/karpenter-provider-aws pkg/controllers/nodeclass/ami.go).",
        "Pin a release published for the cluster's version (or use @latest) before the class is next edited.";
    AmiDeprecated => AmisResolvable,
        "EC2 has deprecated images Karpenter resolved for this EC2NodeClass. Launches still work, and Karpenter uses a deprecated image only when nothing newer matches, but AWS no longer patches it and may deregister it, and then nothing resolves.",
        "Select a current image (a newer pinned release, @latest, or new selector terms).";
    AmiDeprecationAhead => AmisResolvable,
        "EC2 deprecates an image this EC2NodeClass uses within the next 30 days. Launches keep working after that, but AWS stops patching it, hides it from searches and may later deregister it.",
        "Move to a current image before the date (a newer pinned release, @latest, or new selector terms).";
    AmiSomeUnavailable => AmisResolvable,
        "An image this EC2NodeClass names by id, or one Karpenter still lists as resolved, is deregistered, no longer shared with this account, or disabled. Other images remain, so launches go on; Karpenter drops the image when it next resolves.",
        "Remove the image's id from amiSelectorTerms, or share or re-enable the image.";
    AmiFamilyPartlyMismatched => AmisResolvable,
        "Some images Karpenter resolved for this EC2NodeClass are official EKS builds of another family than spec.amiFamily: a node launched from one of them boots with user data it cannot read and never joins.",
        "Narrow amiSelectorTerms to images of amiFamily's family.";
    CapacityReservationsIgnored => CapacityReservationsUsable,
        "The EC2NodeClass selects capacity reservations, but the Karpenter controller runs with its ReservedCapacity feature gate off (off by default before 1.6): it ignores the selector and launches on-demand or spot instances instead, so the reservations stay unused.",
        "Turn the gate on (the chart's settings.featureGates.reservedCapacity), or remove the selector terms.";
    CapacityReservationSelectorMatchesNothing => CapacityReservationsUsable,
        "capacityReservationSelectorTerms match no active capacity reservation (Karpenter's CapacityReservationsReady is True all the same), or the EC2NodeClass has none while a NodePool of it allows only reserved capacity. Karpenter launches on-demand or spot from the class's other NodePools instead of the reserved capacity, and nothing from a reserved-only NodePool.",
        "Fix the selector terms to match an active reservation, or remove them.";
    CapacityReservationInZoneWithoutSubnet => CapacityReservationsUsable,
        "A capacity reservation the EC2NodeClass selects is in an availability zone the class has no subnet in, so Karpenter cannot launch into it from this class.",
        "Select a subnet in the reservation's zone, or leave the reservation to a class that has one.";
    CapacityReservationExpiring => CapacityReservationsUsable,
        "A capacity block the EC2NodeClass selects is expiring: EC2 reclaims its instances at the end of the block and Karpenter launches no more into it.",
        "Extend or replace the capacity block, or let the NodePools fall back to on-demand.";
    OpenCapacityReservationsSkipped => CapacityReservationsUsable,
        "The account holds open On-Demand Capacity Reservations in this EC2NodeClass's zones, of instance types its NodePools launch on demand and of the platform and shared tenancy its nodes run with, that the class does not select. With the ReservedCapacity feature gate on (the default from 1.6) Karpenter launches every instance with CapacityReservationPreference none, so its nodes no longer fall into open reservations: they run as on-demand while the reservations stay idle and billed (aws/karpenter-provider-aws #8176, #9001).",
        "Select the reservations in capacityReservationSelectorTerms and allow the reserved capacity type, or turn the gate off where open matching is wanted (settings.featureGates.reservedCapacity).";
    AwsAuthUnparsable => NodeRoleMapped,
        "Part of kube-system/aws-auth cannot be read: the authenticator skips what is named (a mapRoles or mapUsers value that is not a YAML list, an entry of the wrong shape, a field of the wrong type) and keeps the rest. The node role's own mapping is judged by NodeRoleMapped; this warning is about the other identities.",
        "Fix the entries named in the message (each is named by its key and position), or migrate the identities to access entries.";
}

impl Warning {
    /// The anchor of this warning in docs/checks.md.
    pub fn docs_anchor(self) -> String {
        format!("docs/checks.md#{}", self.as_str().to_ascii_lowercase())
    }
}
