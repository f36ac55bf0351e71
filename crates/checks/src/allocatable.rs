//! What a node of one instance type can give Pods, as Karpenter models it before launching:
//! capacity less kube-reserved, system-reserved and the eviction threshold
//! (aws/karpenter-provider-aws `pkg/providers/instancetype/types.go` `NewInstanceType`,
//! `kubeReservedResources`, `evictionThreshold`, `memory`). CPU is Karpenter's own figure; for
//! memory this gives an upper bound, because Karpenter also subtracts the VM's overhead
//! (`VM_MEMORY_OVERHEAD_PERCENT`) or, once it has seen a node of the type, that node's smaller
//! capacity, and reserves 11 MiB per Pod. A verdict that needs more than this bound is therefore
//! never stricter than Karpenter. Pure: no IO.

use crate::facts::InstanceTypeFacts;
use crate::quantity::quantity;
use karpenter_health_api::karpenter::KubeletConfiguration;
use std::collections::BTreeMap;

/// The memory the kubelet keeps for its hard eviction threshold unless `evictionHard` sets
/// `memory.available` (Karpenter's `evictionThreshold`).
const EVICTION_MEMORY_MIB: u64 = 100;
/// The part of kube-reserved memory that does not grow with Pods (`11 × pods + 255` MiB).
const KUBE_RESERVED_MEMORY_BASE_MIB: u64 = 255;
/// Graviton types lose this much memory to the kernel's CMA reservation (Karpenter's `memory`).
const ARM64_CMA_MIB: u64 = 64;
const MIB: u64 = 1024 * 1024;

/// What a node of one type can give Pods: CPU in millicores as Karpenter computes it, and an
/// upper bound of its memory in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Allocatable {
    pub cpu_millis: u64,
    pub memory_bytes_at_most: u64,
}

/// Karpenter's kube-reserved CPU for `cpu_millis` of capacity: 6% of the first core, 1% of the
/// second, 0.5% of the third and fourth, 0.25% of every core beyond (the ranges Karpenter takes
/// from Bottlerocket), each range's share truncated to whole millicores as Karpenter does.
pub fn kube_reserved_cpu_millis(cpu_millis: u64) -> u64 {
    const RANGES: [(u64, u64, f64); 4] = [
        (0, 1000, 0.06),
        (1000, 2000, 0.01),
        (2000, 4000, 0.005),
        (4000, 1 << 31, 0.0025),
    ];
    RANGES
        .iter()
        .filter(|(start, _, _)| cpu_millis >= *start)
        .map(|(start, end, share)| {
            let span = cpu_millis.min(*end) - start;
            (span as f64 * share) as u64
        })
        .sum()
}

/// A reservation the class sets for `resource`, in the resource's units (cores, bytes); `Some(0)`
/// when it is set but not a quantity this model reads (the bound then assumes none).
fn reserved(map: Option<&BTreeMap<String, serde_json::Value>>, resource: &str) -> Option<f64> {
    map?.get(resource).map(|v| quantity(v).unwrap_or(0.0))
}

/// What a node of `instance_type` can give Pods under the class's `kubelet` settings; `None`
/// when EC2 did not say its vCPUs or memory.
pub fn of(
    instance_type: &InstanceTypeFacts,
    kubelet: Option<&KubeletConfiguration>,
) -> Option<Allocatable> {
    let capacity_cpu = u64::from(instance_type.vcpus?) * 1000;
    let kube_reserved = kubelet.and_then(|k| k.kube_reserved.as_ref());
    let system_reserved = kubelet.and_then(|k| k.system_reserved.as_ref());
    let kube_cpu = reserved(kube_reserved, "cpu").map_or_else(
        || kube_reserved_cpu_millis(capacity_cpu),
        |cores| (cores * 1000.0) as u64,
    );
    let system_cpu = reserved(system_reserved, "cpu").map_or(0, |cores| (cores * 1000.0) as u64);
    let cpu_millis = capacity_cpu.saturating_sub(kube_cpu + system_cpu);

    let arm64 = instance_type
        .architectures
        .first()
        .is_some_and(|a| a == "arm64");
    let memory_mib =
        instance_type
            .memory_mib?
            .saturating_sub(if arm64 { ARM64_CMA_MIB } else { 0 });
    let kube_memory = reserved(kube_reserved, "memory")
        .map_or(KUBE_RESERVED_MEMORY_BASE_MIB * MIB, |bytes| bytes as u64);
    let system_memory = reserved(system_reserved, "memory").map_or(0, |bytes| bytes as u64);
    // A percentage or an unread value leaves no threshold in the bound.
    let eviction = match kubelet
        .and_then(|k| k.eviction_hard.as_ref())
        .and_then(|e| e.get("memory.available"))
    {
        Some(v) => quantity(v).map_or(0, |bytes| bytes as u64),
        None => EVICTION_MEMORY_MIB * MIB,
    };
    let memory_bytes_at_most =
        (memory_mib * MIB).saturating_sub(kube_memory + system_memory + eviction);
    Some(Allocatable {
        cpu_millis,
        memory_bytes_at_most,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m5(vcpus: u32, memory_mib: u64) -> InstanceTypeFacts {
        InstanceTypeFacts {
            name: format!("m5.{vcpus}"),
            vcpus: Some(vcpus),
            memory_mib: Some(memory_mib),
            architectures: vec!["x86_64".into()],
            ..InstanceTypeFacts::default()
        }
    }

    #[test]
    fn kube_reserved_cpu_follows_karpenters_ranges() {
        // 60 + 10 for two cores; + 5 + 5 for four; + 2.5 per core beyond, truncated per range.
        assert_eq!(kube_reserved_cpu_millis(1000), 60);
        assert_eq!(kube_reserved_cpu_millis(2000), 70);
        assert_eq!(kube_reserved_cpu_millis(4000), 80);
        assert_eq!(kube_reserved_cpu_millis(8000), 90);
        assert_eq!(kube_reserved_cpu_millis(96_000), 310);
    }

    #[test]
    fn an_m5_large_gives_pods_1930_millicores() {
        let a = of(&m5(2, 8192), None).unwrap();
        assert_eq!(a.cpu_millis, 1930);
        // 8192 MiB less 255 MiB kube-reserved and the 100 MiB eviction threshold, at most.
        assert_eq!(a.memory_bytes_at_most, (8192 - 355) * MIB);
    }

    #[test]
    fn the_class_reservations_replace_karpenters() {
        let kubelet = KubeletConfiguration {
            kube_reserved: Some(BTreeMap::from([("cpu".into(), json!("200m"))])),
            system_reserved: Some(BTreeMap::from([
                ("cpu".into(), json!("100m")),
                ("memory".into(), json!("1Gi")),
            ])),
            eviction_hard: Some(BTreeMap::from([("memory.available".into(), json!("5%"))])),
            ..KubeletConfiguration::default()
        };
        let a = of(&m5(2, 8192), Some(&kubelet)).unwrap();
        assert_eq!(a.cpu_millis, 1700);
        // A percentage is not read: no eviction threshold in the bound.
        assert_eq!(a.memory_bytes_at_most, (8192 - 255 - 1024) * MIB);
    }

    #[test]
    fn graviton_loses_its_cma_memory_and_unknown_sizes_give_nothing() {
        let mut c7g = m5(2, 4096);
        c7g.architectures = vec!["arm64".into()];
        assert_eq!(
            of(&c7g, None).unwrap().memory_bytes_at_most,
            (4096 - 64 - 355) * MIB
        );
        let mut unknown = m5(2, 4096);
        unknown.vcpus = None;
        assert_eq!(of(&unknown, None), None);
    }
}
