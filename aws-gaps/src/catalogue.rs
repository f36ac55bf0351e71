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
    state: &Mutex<State>,
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
        _ => match full_listing(state, client, upstream, asked, paged, region, &request).await {
            Ok(listing) => {
                let listing = Arc::new(listing);
                lock(state)
                    .listings
                    .keep(region, &request.listing, listing.clone());
                listing
            }
            Err(answer) => return answer,
        },
    };
    aws_wire::query_xml(200, listing.page(&request))
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
