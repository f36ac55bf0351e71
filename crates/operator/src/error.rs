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

/// How the error policy retries a failed reconcile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// May pass on its own soon (API server busy or restarting, a write conflict, a timeout):
    /// retried with a growing backoff.
    Transient,
    /// Will fail the same way until someone changes the cluster (RBAC forbids the write, the
    /// KarpenterHealth CRD is missing or refuses the object): retried slowly, not hot-looped.
    Permanent,
}

impl Error {
    /// Whether retrying soon can help.
    pub fn retry(&self) -> Retry {
        match self {
            Error::ApplyHealth { source, .. }
            | Error::PatchStatus { source, .. }
            | Error::InstallCrd(source) => retry_of(source),
            Error::CrdNotEstablished(_) => Retry::Transient,
            // The API server assigns a uid on create; a cached object without one is caught up
            // by the next watch event.
            Error::MissingUid { .. } => Retry::Transient,
        }
    }

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

/// Kubernetes API answers that will not change by retrying: 4xx other than a conflict (409) or
/// too many requests (429). Everything else (5xx, timeouts, transport errors) is transient.
fn retry_of(error: &kube::Error) -> Retry {
    match error {
        kube::Error::Api(status) if status.code == 409 || status.code == 429 => Retry::Transient,
        kube::Error::Api(status) if (400..500).contains(&status.code) => Retry::Permanent,
        _ => Retry::Transient,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api_error(code: u16) -> kube::Error {
        kube::Error::Api(Box::new(
            kube::core::Status::failure("test", "Test").with_code(code),
        ))
    }

    fn patch(code: u16) -> Error {
        Error::PatchStatus {
            name: "default".into(),
            source: api_error(code),
        }
    }

    #[test]
    fn forbidden_missing_and_invalid_are_permanent() {
        for code in [400, 403, 404, 422] {
            assert_eq!(patch(code).retry(), Retry::Permanent, "HTTP {code}");
        }
    }

    #[test]
    fn conflicts_throttling_and_server_errors_are_transient() {
        for code in [409, 429, 500, 503, 504] {
            assert_eq!(patch(code).retry(), Retry::Transient, "HTTP {code}");
        }
        assert_eq!(
            Error::CrdNotEstablished(std::time::Duration::from_secs(30)).retry(),
            Retry::Transient
        );
    }
}
