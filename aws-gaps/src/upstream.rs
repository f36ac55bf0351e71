//! Forwarding a request to moto, the proxy's upstream, and the SDK configuration the proxy reads
//! moto with. Does IO (HTTP to moto).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Request;
use hyper::header::CONTENT_LENGTH;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;

/// The HTTP client to moto.
pub(super) type Upstream = Client<HttpConnector, Full<Bytes>>;

/// Sends `body` to moto with the request's method, path and headers; its answer's parts and body.
pub(super) async fn forward(
    client: &Upstream,
    upstream: &str,
    asked: &hyper::http::request::Parts,
    body: Bytes,
) -> Result<(hyper::http::response::Parts, Bytes), std::io::Error> {
    let path = asked
        .uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/");
    let mut forward = Request::builder()
        .method(asked.method.clone())
        .uri(format!("{upstream}{path}"));
    for (k, v) in asked.headers.iter().filter(|(k, _)| *k != CONTENT_LENGTH) {
        forward = forward.header(k, v);
    }
    let forward = forward
        .header(CONTENT_LENGTH, body.len())
        .body(Full::new(body))
        .map_err(std::io::Error::other)?;
    let answer = client
        .request(forward)
        .await
        .map_err(std::io::Error::other)?;
    let (parts, body) = answer.into_parts();
    let body = body
        .collect()
        .await
        .map(|b| b.to_bytes())
        .map_err(std::io::Error::other)?;
    Ok((parts, body))
}

/// The AWS SDK's configuration for reading moto itself in `region` (the proxy's own reads:
/// launch templates, instance types, roles), with moto's test credentials.
pub(super) async fn moto_config(upstream: &str, region: &str) -> aws_config::SdkConfig {
    aws_config::defaults(aws_config::BehaviorVersion::latest())
        .region(aws_config::Region::new(region.to_owned()))
        .endpoint_url(upstream)
        .credentials_provider(aws_credential_types::Credentials::new(
            "testing", "testing", None, None, "proxy",
        ))
        .load()
        .await
}
