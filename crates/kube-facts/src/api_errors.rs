//! Which `Unknown` cause a failed Kubernetes API call or watch is: 401/403 a permission problem,
//! 404 a kind the server lacks, 429 throttling, anything else unavailable. Pure, no IO.

use karpenter_health_checks::facts::UnknownCause;
use kube::runtime::watcher;

/// Classifies a watch failure by the API error inside it.
pub(crate) fn cause_of_watch_error(error: &watcher::Error) -> UnknownCause {
    match error {
        watcher::Error::InitialListFailed(error)
        | watcher::Error::WatchStartFailed(error)
        | watcher::Error::WatchFailed(error) => cause_of_api_error(error),
        watcher::Error::WatchError(status) => cause_of_status_code(status.code),
        _ => UnknownCause::Unavailable,
    }
}

/// Classifies a failed API call.
pub(crate) fn cause_of_api_error(error: &kube::Error) -> UnknownCause {
    match error {
        kube::Error::Api(status) => cause_of_status_code(status.code),
        _ => UnknownCause::Unavailable,
    }
}

fn cause_of_status_code(code: u16) -> UnknownCause {
    match code {
        403 | 401 => UnknownCause::AccessDenied,
        404 => UnknownCause::Unsupported,
        429 => UnknownCause::Throttled,
        _ => UnknownCause::Unavailable,
    }
}
