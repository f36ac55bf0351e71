//! One DescribeInstanceTypes entry as the checks' instance type facts. Pure: translation only.

use karpenter_health_checks::facts::InstanceTypeFacts;

/// The facts of one instance type EC2 described; `None` for an entry without a name.
pub(super) fn facts_of(t: &aws_sdk_ec2::types::InstanceTypeInfo) -> Option<InstanceTypeFacts> {
    Some(InstanceTypeFacts {
        name: t.instance_type()?.as_str().to_owned(),
        vcpus: t
            .v_cpu_info()
            .and_then(|v| v.default_v_cpus())
            .and_then(|n| u32::try_from(n).ok()),
        memory_mib: t
            .memory_info()
            .and_then(|m| m.size_in_mib())
            .and_then(|n| u64::try_from(n).ok()),
        architectures: t
            .processor_info()
            .map(|p| {
                p.supported_architectures()
                    .iter()
                    .map(|a| a.as_str().to_owned())
                    .collect()
            })
            .unwrap_or_default(),
        usage_classes: t
            .supported_usage_classes()
            .iter()
            .map(|u| u.as_str().to_owned())
            .collect(),
        network_interfaces: t.network_info().and_then(default_card_interfaces),
        ipv4_per_interface: t
            .network_info()
            .and_then(|n| n.ipv4_addresses_per_interface())
            .and_then(|n| u32::try_from(n).ok()),
    })
}

/// The ENIs of the default network card, where Pods get their addresses (Karpenter's
/// `ENILimitedPods`, aws/karpenter-provider-aws `pkg/providers/instancetype/types.go`); EC2's
/// instance-wide count when it lists no cards.
fn default_card_interfaces(network: &aws_sdk_ec2::types::NetworkInfo) -> Option<u32> {
    let index = network.default_network_card_index();
    let on_card = network
        .network_cards()
        .iter()
        .find(|card| card.network_card_index() == index.or(Some(0)))
        .and_then(|card| card.maximum_network_interfaces());
    on_card
        .or(network.maximum_network_interfaces())
        .and_then(|n| u32::try_from(n).ok())
}
