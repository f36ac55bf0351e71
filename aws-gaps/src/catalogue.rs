//! The instance-type catalogue as EC2 serves it: DescribeInstanceTypes and
//! DescribeInstanceTypeOfferings a page at a time (`paging.rs`) from one full answer per listing,
//! moto's or, for regions moto ships no offerings for, the emulated one (`offerings.rs`). Does
//! IO (reads moto).

use super::upstream::{Upstream, forward};
use super::{State, aws_wire, lock, offerings, paging};
use bytes::Bytes;
use http_body_util::Full;
use hyper::{Response, StatusCode};
use std::sync::{Arc, Mutex};

/// One page of a paged instance-type listing, as EC2 pages it, from the listing's full answer:
/// moto's, kept for the proxy's life, or for a region moto has no offerings for, the emulated
/// one, rebuilt at each first page since the region's subnets may have changed.
pub(super) async fn serve_page(
    state: &Arc<Mutex<State>>,
    client: &Upstream,
    upstream: &str,
    asked: &hyper::http::request::Parts,
    paged: paging::Paged,
    region: &str,
    body: &[u8],
) -> Response<Full<Bytes>> {
    let request = match paging::page_request(paged, &String::from_utf8_lossy(body)) {
        Ok(request) => request,
        Err(refusal) => return aws_wire::ec2_error(400, refusal.code, &refusal.message),
    };
    let kept = lock(state).listings.get(region, &request.listing);
    let listing = match kept {
        Some(listing) if !(listing.follows_subnets && request.offset == 0) => listing,
        _ => {
            // Fetched and kept by a task of its own: moto takes about 3 s to list every instance
            // type, as long as the AWS SDK's attempt timeout, and a client that gives up must not
            // cancel the fetch its retry will find kept.
            let (state, client) = (state.clone(), client.clone());
            let (upstream, region, wanted) =
                (upstream.to_owned(), region.to_owned(), request.clone());
            let asked = copy_of(asked);
            let fetch = tokio::spawn(async move {
                let listing =
                    full_listing(&state, &client, &upstream, &asked, paged, &region, &wanted)
                        .await
                        .map(Arc::new)?;
                lock(&state)
                    .listings
                    .keep(&region, &wanted.listing, listing.clone());
                Ok::<_, Response<Full<Bytes>>>(listing)
            });
            match fetch.await {
                Ok(Ok(listing)) => listing,
                Ok(Err(answer)) => return answer,
                Err(e) => {
                    return aws_wire::ec2_error(
                        500,
                        "InternalError",
                        &format!("aws-gap-proxy's listing fetch failed: {e}"),
                    );
                }
            }
        }
    };
    aws_wire::query_xml(200, listing.page(&request))
}

/// A request's method, URI, version and headers, for a task that outlives it.
fn copy_of(asked: &hyper::http::request::Parts) -> hyper::http::request::Parts {
    let mut copy = hyper::Request::new(());
    *copy.method_mut() = asked.method.clone();
    *copy.uri_mut() = asked.uri.clone();
    *copy.version_mut() = asked.version;
    *copy.headers_mut() = asked.headers.clone();
    copy.into_parts().0
}

/// The whole listing `request` asks for; moto's own error answer when it refuses.
async fn full_listing(
    state: &Mutex<State>,
    client: &Upstream,
    upstream: &str,
    asked: &hyper::http::request::Parts,
    paged: paging::Paged,
    region: &str,
    request: &paging::PageRequest,
) -> Result<paging::Listing, Response<Full<Bytes>>> {
    let internal = |what: String| aws_wire::ec2_error(500, "InternalError", &what);
    let (parts, answer) = forward(
        client,
        upstream,
        asked,
        Bytes::from(request.listing.clone()),
    )
    .await
    .map_err(|e| internal(format!("aws-gap-proxy could not reach moto: {e}")))?;
    if parts.status != StatusCode::OK {
        return Err(Response::from_parts(parts, Full::new(answer)));
    }
    let listing =
        paging::Listing::parse(paged, &String::from_utf8_lossy(&answer)).ok_or_else(|| {
            internal(format!(
                "aws-gap-proxy could not read moto's {}",
                paged.action
            ))
        })?;
    if paged != paging::OFFERINGS || !offerings::by_zone(&request.listing) || listing.len() > 0 {
        return Ok(listing);
    }
    let cached = lock(state).catalogue_names.get(region).cloned();
    let names = match cached {
        Some(names) => names,
        None => {
            let names = offerings::instance_type_names(upstream, region)
                .await
                .map(Arc::new)
                .map_err(|e| {
                    internal(format!(
                        "aws-gap-proxy could not list moto's instance types: {e}"
                    ))
                })?;
            lock(state)
                .catalogue_names
                .insert(region.to_owned(), names.clone());
            names
        }
    };
    let zones = offerings::subnet_zones(upstream, region)
        .await
        .map_err(|e| internal(format!("aws-gap-proxy could not list subnets: {e}")))?;
    Ok(
        paging::Listing::of_items(paging::OFFERINGS, offerings::items(&names, &zones))
            .following_subnets(),
    )
}
