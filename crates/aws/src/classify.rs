//! Classifies AWS SDK errors into proven-absent or unknown-with-cause ([`CallError`]). No IO.
//!
//! The rule that matters: only an answer that names the thing as missing is `Absent`. Anything
//! else (a 404 without an AWS error code, e.g. an emulator's HTML page for an operation it lacks;
//! an unparseable body; a transport failure) is unknown, so the engine can never turn an outage or
//! a gap in an emulator into "not found".

use crate::ports::{CallError, ErrorKind, Service};
use aws_smithy_runtime_api::client::orchestrator::HttpResponse;
use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;

/// Codes that prove the named object does not exist.
const ABSENT: &[&str] = &[
    "NoSuchEntity",
    "NoSuchEntityException",
    "InvalidGroup.NotFound",
    "InvalidGroupId.Malformed",
    "InvalidGroupId.NotFound",
    "ResourceNotFoundException",
    // Service Quotas GetServiceQuota: no value for this quota in the account.
    "NoSuchResourceException",
    // SSM GetParameter: no parameter of this name (AWS has not published it).
    "ParameterNotFound",
    // SQS GetQueueUrl: the query-protocol code, and the awsJson shape's `__type`.
    "AWS.SimpleQueueService.NonExistentQueue",
    "QueueDoesNotExist",
];

const ACCESS_DENIED: &[&str] = &[
    "AccessDenied",
    "AccessDeniedException",
    "UnauthorizedOperation",
    "UnauthorizedAccess",
    "AuthFailure",
    "InvalidClientTokenId",
    "UnrecognizedClientException",
    "ExpiredToken",
    "ExpiredTokenException",
    "SignatureDoesNotMatch",
    "MissingAuthenticationToken",
    "InvalidAccessKeyId",
    "OptInRequired",
];

const THROTTLED: &[&str] = &[
    "Throttling",
    "ThrottlingException",
    "ThrottledException",
    "RequestThrottled",
    "RequestThrottledException",
    "TooManyRequestsException",
    "RequestLimitExceeded",
    "BandwidthLimitExceeded",
    "SlowDown",
    "PriorRequestNotComplete",
    "EC2ThrottledException",
];

const UNAVAILABLE: &[&str] = &[
    "InternalError",
    "InternalFailure",
    "InternalServerError",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "ServerException",
    "ServiceFailure",
    "Unavailable",
    "RequestTimeout",
    "RequestTimeoutException",
];

const UNSUPPORTED: &[&str] = &[
    "InvalidAction",
    "UnknownOperationException",
    "NotImplemented",
    "UnsupportedOperation",
    "UnsupportedOperationException",
];

/// Classifies one SDK error of a call to `service`. Every IAM call the adapter makes names an
/// entity, so IAM's `ValidationError` (a name IAM rejects) is a proof that it does not exist.
pub fn classify<E>(service: Service, err: &SdkError<E, HttpResponse>) -> CallError
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    match err {
        SdkError::ServiceError(service_err) => {
            let e = service_err.err();
            let status = service_err.raw().status().as_u16();
            let message = e.message().unwrap_or_default().to_owned();
            match e.code() {
                Some(code) => by_code(service, code, status, message),
                None => {
                    // No AWS error code: not an AWS answer about the object (e.g. an HTML 404).
                    let message = if message.is_empty() {
                        "response without an AWS error code".to_owned()
                    } else {
                        message
                    };
                    CallError::new(by_status(status), message).with_status(status)
                }
            }
        }
        SdkError::ResponseError(response_err) => {
            let status = response_err.raw().status().as_u16();
            CallError::new(
                by_status(status),
                format!("unreadable response: {}", context(err)),
            )
            .with_status(status)
        }
        SdkError::TimeoutError(_) => CallError::new(
            ErrorKind::Unavailable,
            format!("timed out: {}", context(err)),
        ),
        SdkError::DispatchFailure(dispatch) => {
            let what = if dispatch.is_timeout() {
                "timed out"
            } else {
                "connection failed"
            };
            CallError::new(ErrorKind::Unavailable, format!("{what}: {}", context(err)))
        }
        // Construction failures and future variants: the request was never answered.
        _ => CallError::new(ErrorKind::Unavailable, context(err)),
    }
}

/// Classifies a known AWS error code, falling back on the HTTP status for unknown codes.
pub fn by_code(service: Service, code: &str, status: u16, message: String) -> CallError {
    // KMS says `NotFoundException` for a key (or alias) that does not exist, and nothing else
    // proves absence there.
    let kind = if ABSENT.contains(&code)
        || (service == Service::Iam && code == "ValidationError")
        || (service == Service::Kms && code == "NotFoundException")
    {
        ErrorKind::Absent
    } else if ACCESS_DENIED.contains(&code) {
        ErrorKind::AccessDenied
    } else if THROTTLED.contains(&code) {
        ErrorKind::Throttled
    } else if UNAVAILABLE.contains(&code) {
        ErrorKind::Unavailable
    } else if UNSUPPORTED.contains(&code) {
        ErrorKind::Unsupported
    } else {
        match by_status(status) {
            // An unrecognised client error: AWS refused this request (e.g. EKS
            // `InvalidRequestException` for access entries on a CONFIG_MAP cluster).
            ErrorKind::Unavailable if (400..500).contains(&status) => ErrorKind::Unsupported,
            kind => kind,
        }
    };
    CallError::new(kind, message)
        .with_code(code)
        .with_status(status)
}

/// Classifies by HTTP status alone, for responses that carry no AWS error code. Never `Absent`.
pub fn by_status(status: u16) -> ErrorKind {
    match status {
        403 => ErrorKind::AccessDenied,
        429 => ErrorKind::Throttled,
        404 | 405 | 501 => ErrorKind::Unsupported,
        _ => ErrorKind::Unavailable,
    }
}

/// The error's source chain, `: `-joined, without the Debug dump `DisplayErrorContext` adds
/// (condition messages should read well and stay the same from one failure to the next).
fn context<E: std::error::Error + 'static>(err: &SdkError<E, HttpResponse>) -> String {
    let mut parts: Vec<String> = vec![err.to_string()];
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        let text = s.to_string();
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    parts.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use aws_sdk_iam::operation::get_role::GetRoleError;
    use aws_smithy_runtime_api::client::result::ConnectorError;
    use aws_smithy_runtime_api::http::StatusCode;
    use aws_smithy_types::body::SdkBody;
    use aws_smithy_types::error::ErrorMetadata;

    fn response(status: u16) -> HttpResponse {
        HttpResponse::new(
            StatusCode::try_from(status).unwrap(),
            SdkBody::from("<html>404</html>"),
        )
    }

    fn service_error(code: Option<&str>, status: u16) -> SdkError<GetRoleError, HttpResponse> {
        let mut meta = ErrorMetadata::builder().message("msg");
        if let Some(code) = code {
            meta = meta.code(code);
        }
        SdkError::service_error(GetRoleError::generic(meta.build()), response(status))
    }

    fn kind(service: Service, code: Option<&str>, status: u16) -> ErrorKind {
        classify(service, &service_error(code, status)).kind
    }

    #[test]
    fn named_missing_objects_are_absent() {
        assert_eq!(
            kind(Service::Iam, Some("NoSuchEntity"), 404),
            ErrorKind::Absent
        );
        assert_eq!(
            kind(Service::Ec2, Some("InvalidGroup.NotFound"), 400),
            ErrorKind::Absent
        );
        assert_eq!(
            kind(Service::Ec2, Some("InvalidGroupId.Malformed"), 400),
            ErrorKind::Absent
        );
        assert_eq!(
            kind(Service::Eks, Some("ResourceNotFoundException"), 404),
            ErrorKind::Absent
        );
        assert_eq!(
            kind(Service::Iam, Some("ValidationError"), 400),
            ErrorKind::Absent
        );
    }

    #[test]
    fn validation_error_outside_iam_is_not_a_proof() {
        assert_eq!(
            kind(Service::Sts, Some("ValidationError"), 400),
            ErrorKind::Unsupported
        );
    }

    #[test]
    fn denials_throttles_and_server_errors_are_unknown_with_cause() {
        assert_eq!(
            kind(Service::Iam, Some("AccessDenied"), 403),
            ErrorKind::AccessDenied
        );
        assert_eq!(
            kind(Service::Ec2, Some("UnauthorizedOperation"), 403),
            ErrorKind::AccessDenied
        );
        assert_eq!(
            kind(Service::Iam, Some("Throttling"), 400),
            ErrorKind::Throttled
        );
        assert_eq!(
            kind(Service::Ec2, Some("RequestLimitExceeded"), 503),
            ErrorKind::Throttled
        );
        assert_eq!(
            kind(Service::Eks, Some("TooManyRequestsException"), 429),
            ErrorKind::Throttled
        );
        assert_eq!(
            kind(Service::Eks, Some("SomethingNew"), 429),
            ErrorKind::Throttled
        );
        assert_eq!(
            kind(Service::Ec2, Some("InternalError"), 500),
            ErrorKind::Unavailable
        );
        assert_eq!(
            kind(Service::Eks, Some("SomethingNew"), 503),
            ErrorKind::Unavailable
        );
    }

    #[test]
    fn a_404_without_an_aws_code_is_unsupported_never_absent() {
        let err = classify(Service::Eks, &service_error(None, 404));
        assert_eq!(err.kind, ErrorKind::Unsupported);
        assert_eq!(err.status, Some(404));
    }

    #[test]
    fn codeless_statuses_map_to_causes() {
        assert_eq!(kind(Service::Eks, None, 429), ErrorKind::Throttled);
        assert_eq!(kind(Service::Eks, None, 403), ErrorKind::AccessDenied);
        assert_eq!(kind(Service::Eks, None, 502), ErrorKind::Unavailable);
    }

    #[test]
    fn transport_failures_are_unavailable() {
        let timeout: SdkError<GetRoleError, HttpResponse> = SdkError::timeout_error("deadline");
        assert_eq!(
            classify(Service::Iam, &timeout).kind,
            ErrorKind::Unavailable
        );
        let reset: SdkError<GetRoleError, HttpResponse> =
            SdkError::dispatch_failure(ConnectorError::io("connection reset by peer".into()));
        let err = classify(Service::Iam, &reset);
        assert_eq!(err.kind, ErrorKind::Unavailable);
        assert!(err.message.contains("connection reset"), "{}", err.message);
        let unreadable: SdkError<GetRoleError, HttpResponse> =
            SdkError::response_error("bad xml", response(404));
        assert_eq!(
            classify(Service::Iam, &unreadable).kind,
            ErrorKind::Unsupported
        );
    }

    #[test]
    fn display_names_code_message_and_status() {
        let err = classify(Service::Iam, &service_error(Some("Throttling"), 400));
        assert_eq!(err.to_string(), "Throttling: msg (HTTP 400)");
    }
}
