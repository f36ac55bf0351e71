//! IO adapter for Kubernetes: watches the objects the checks read and snapshots them as facts. Does IO.
#![forbid(unsafe_code)]
