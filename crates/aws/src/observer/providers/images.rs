//! Provider of `images`: EC2 DescribeImages on the class's images (its id terms and the images
//! Karpenter lists in its status), read when it has any. One call per set of ids, shared by every
//! class with the same images (in calls of 200 ids, EC2's limit per filter), in the account
//! family: a deprecation is set days ahead, and an image deregistered or re-enabled changes
//! Karpenter's AMIsReady, which revalidates at once. Does IO (EC2, through its cache).

use super::super::controller::EarlierAnswers;
use super::super::{AwsObserver, AwsRequest, Families};
use crate::cache::{Cache, Changes, Read};
use crate::ports::Service;
use karpenter_health_checks::facts::ImageFacts;
use std::sync::Arc;

/// The most values EC2 takes in one filter (DescribeImages `image-id`).
const IMAGE_IDS_PER_CALL: usize = 200;

pub(super) type Cached = Cache<Vec<String>, Vec<ImageFacts>>;

pub(super) fn cache(families: &Families, changes: &Arc<Changes>) -> Cached {
    Cache::with_changes(families.account, changes.clone())
}

pub(super) type Answer = Option<Read<Vec<ImageFacts>>>;

pub(super) async fn read(
    observer: &AwsObserver,
    request: &AwsRequest,
    _earlier: EarlierAnswers<'_>,
    cache: &Cached,
) -> Answer {
    if request.image_ids.is_empty() {
        return None;
    }
    let this = observer.clone();
    let key = request.image_ids.clone();
    let read = cache.get(key.clone(), move || async move {
        let ec2 = &this.inner.ec2;
        // EC2 takes at most 200 values per filter: more ids are asked in several calls.
        let mut all = Vec::new();
        for chunk in key.chunks(IMAGE_IDS_PER_CALL) {
            let read = this
                .all_pages(Service::Ec2, "DescribeImages", &chunk.join(","), |token| {
                    ec2.describe_images(chunk, token)
                })
                .await?;
            match read {
                Some(images) => all.extend(images),
                None => return Ok(None),
            }
        }
        Ok(Some(all))
    });
    Some(read.await)
}
