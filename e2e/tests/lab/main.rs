//! The lab's verdict-against-behaviour scenarios: the real Karpenter controller of one release
//! on a bed of its own (`e2e/lab.sh`, `make e2e-lab`), one module per family of reasons, all in
//! one test binary so that the suite links once. Does IO (API server, moto, Karpenter).

mod agent_taint;
mod classic_failures;
mod daemonset_room;
mod metadata_reach;
mod node_initialization;
mod pod_density;
mod quotas;
mod reasons;
mod reservations;
