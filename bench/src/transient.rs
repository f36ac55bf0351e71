//! Retrying a bench request that the API server failed for a passing reason (429, a 5xx, a
//! dropped connection): at 50,000 NodeClaims one hiccup must not end a 30-minute run. Does IO
//! (the request, sleeps).

use backon::{ExponentialBuilder, Retryable};
use std::future::Future;
use std::time::Duration;

/// Whether an API request may succeed if sent again unchanged.
pub fn is_transient(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code == 429 || status.code >= 500,
        kube::Error::HyperError(_) | kube::Error::Service(_) => true,
        _ => false,
    }
}

/// `request`, sent again after 0.2, 0.4, 0.8, 1.6 and 3.2 s (with jitter) while it fails
/// transiently.
pub async fn retried<T, F, Fut>(request: F) -> kube::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = kube::Result<T>>,
{
    request
        .retry(
            ExponentialBuilder::default()
                .with_min_delay(Duration::from_millis(200))
                .with_max_times(5)
                .with_jitter(),
        )
        .when(is_transient)
        .notify(|error, after| println!("bench: retrying in {after:?}: {error}"))
        .await
}

/// A create whose object exists already succeeded (a retried create may have landed the first
/// time).
pub fn created<T>(result: kube::Result<T>) -> kube::Result<()> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        other => other.map(drop),
    }
}

/// A delete or finalizer removal whose object is gone already succeeded.
pub fn gone<T>(result: kube::Result<T>) -> kube::Result<()> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other.map(drop),
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

    #[test]
    fn throttling_and_server_errors_are_transient_conflicts_are_not() {
        assert!(is_transient(&api_error(429)));
        assert!(is_transient(&api_error(503)));
        assert!(!is_transient(&api_error(409)));
        assert!(!is_transient(&api_error(404)));
    }

    #[test]
    fn an_existing_object_is_created_a_missing_one_gone() {
        assert!(created::<()>(Err(api_error(409))).is_ok());
        assert!(created::<()>(Err(api_error(422))).is_err());
        assert!(gone::<()>(Err(api_error(404))).is_ok());
        assert!(gone::<()>(Err(api_error(409))).is_err());
    }
}
