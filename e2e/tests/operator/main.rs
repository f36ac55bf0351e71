//! The operator's and `check`'s end-to-end tests on the shared test bed (`make e2e`, one test
//! at a time: they share cluster singletons), one module per condition or operator concern, all
//! in one test binary so that the suite links once. Karpenter's state is written by the tests.
//! Does IO (API server, moto).

mod acceptance;
mod amis;
mod bed;
mod check_command;
mod controller_wiring;
mod copied_labels;
mod daemonset_pods;
mod drain;
mod failures;
mod first_run;
mod foundation;
mod gitops;
mod iam_policy;
mod instance_types;
mod leader_election;
mod node_network;
mod pod_identity;
mod pod_namespaces;
mod probes;
mod rbac;
mod reservations;
mod resilience;
mod scale;
mod shutdown;
mod status_writer;
mod trust;
mod volumes_and_versions;
