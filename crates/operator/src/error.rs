//! Errors of the operator shell: only "could not observe or write", never a finding. No IO.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("failed to apply KarpenterHealth {name}: {source}")]
    ApplyHealth {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to patch the status of KarpenterHealth {name}: {source}")]
    PatchStatus {
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("failed to install the KarpenterHealth CRD: {0}")]
    InstallCrd(#[source] kube::Error),
    #[error("the KarpenterHealth CRD did not become established within {0:?}")]
    CrdNotEstablished(Duration),
    #[error("EC2NodeClass {name} has no uid yet")]
    MissingUid { name: String },
}

impl Error {
    /// A short, bounded label for the `reconcile_errors_total{error}` metric.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Error::ApplyHealth { .. } => "apply_health",
            Error::PatchStatus { .. } => "patch_status",
            Error::InstallCrd(_) => "install_crd",
            Error::CrdNotEstablished(_) => "crd_not_established",
            Error::MissingUid { .. } => "missing_uid",
        }
    }
}
