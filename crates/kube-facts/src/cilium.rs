//! What Cilium's settings say of the taint its operator puts on new nodes: read from the
//! `kube-system/cilium-config` ConfigMap, trimmed to the two keys that decide it. Pure.
//!
//! Cilium's operator taints a node where a Cilium agent Pod is scheduled but not yet running when
//! `set-cilium-node-taints` is true, unless the node already carries a taint of that key, and
//! removes the taint once the agent runs (cilium/cilium `operator/watchers/node_taint.go`
//! `checkAndMarkNode`). The key is `agent-not-ready-taint-key`, `node.cilium.io/agent-not-ready`
//! unless set (`pkg/defaults` `AgentNotReadyNodeTaint`). The operator's own flag defaults to
//! false (`operator/cmd/flags.go`); Cilium's Helm chart writes true.

use k8s_openapi::api::core::v1::ConfigMap;
#[cfg(test)]
use karpenter_health_checks::pod_template::CILIUM_DEFAULT_TAINT_KEY as DEFAULT_TAINT_KEY;
use karpenter_health_checks::pod_template::{
    CILIUM_CONFIG, CILIUM_SET_NODE_TAINTS as SET_NODE_TAINTS, CILIUM_TAINT_KEY as TAINT_KEY,
    cilium_node_taint_key,
};

/// The ConfigMap Cilium's agent and operator read their settings from (Helm's name).
pub const CONFIG_MAP: &str = CILIUM_CONFIG.1;

/// Keeps of `cilium-config` only the two keys that decide the node taint: the ConfigMap holds
/// a hundred settings or more.
pub fn trim(config_map: &mut ConfigMap) {
    crate::trim::metadata(config_map);
    config_map.binary_data = None;
    if let Some(data) = config_map.data.as_mut() {
        data.retain(|key, _| key == SET_NODE_TAINTS || key == TAINT_KEY);
    }
}

/// The key of the taint Cilium's operator puts on new nodes, or `None` when these settings do
/// not let it taint ([`cilium_node_taint_key`]).
pub fn node_taint_key(config_map: &ConfigMap) -> Option<String> {
    cilium_node_taint_key(config_map.data.as_ref()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn config(pairs: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                pairs
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect::<BTreeMap<_, _>>(),
            ),
            ..ConfigMap::default()
        }
    }

    #[test]
    fn the_operator_taints_only_when_the_setting_is_true() {
        assert_eq!(
            node_taint_key(&config(&[(SET_NODE_TAINTS, "true")])).as_deref(),
            Some(DEFAULT_TAINT_KEY)
        );
        assert_eq!(
            node_taint_key(&config(&[(SET_NODE_TAINTS, "1")])).as_deref(),
            Some(DEFAULT_TAINT_KEY)
        );
        // The operator's own default is false: no setting, no taint.
        assert_eq!(node_taint_key(&config(&[])), None);
        assert_eq!(node_taint_key(&config(&[(SET_NODE_TAINTS, "false")])), None);
        // What strconv.ParseBool refuses reads as false.
        assert_eq!(node_taint_key(&config(&[(SET_NODE_TAINTS, "yes")])), None);
        assert_eq!(node_taint_key(&ConfigMap::default()), None);
    }

    #[test]
    fn the_taint_key_is_the_setting_or_ciliums_default() {
        let custom = config(&[(SET_NODE_TAINTS, "True"), (TAINT_KEY, "example.com/cni")]);
        assert_eq!(node_taint_key(&custom).as_deref(), Some("example.com/cni"));
        let empty = config(&[(SET_NODE_TAINTS, "true"), (TAINT_KEY, "")]);
        assert_eq!(node_taint_key(&empty).as_deref(), Some(DEFAULT_TAINT_KEY));
    }

    #[test]
    fn the_trimmed_config_map_keeps_only_what_decides_the_taint() {
        let mut full = config(&[
            (SET_NODE_TAINTS, "true"),
            (TAINT_KEY, "example.com/cni"),
            ("enable-ipv4", "true"),
            ("cluster-name", "demo"),
        ]);
        let before = node_taint_key(&full);
        trim(&mut full);
        assert_eq!(full.data.as_ref().map(BTreeMap::len), Some(2));
        assert_eq!(node_taint_key(&full), before);
    }
}
