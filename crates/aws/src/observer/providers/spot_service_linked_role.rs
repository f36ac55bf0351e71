//! Provider of `spot_service_linked_role`: the ARN of the account's `AWSServiceRoleForEC2Spot`,
//! read when a NodePool of the class allows spot. Through the role cache it shares with the node
//! and controller roles (`controller/identity.rs`), so it owns no cache. Does IO (IAM GetRole,
//! through that cache).

use super::super::controller::EarlierAnswers;
use super::super::fact_read::{Unlisted, mapped};
use super::super::{AwsObserver, AwsRequest, Families};
use crate::cache::{Changes, Read};
use karpenter_health_checks::plan::request::SPOT_SERVICE_LINKED_ROLE;
use std::sync::Arc;

pub(super) type Cached = ();

pub(super) fn cache(_families: &Families, _changes: &Arc<Changes>) -> Cached {}

pub(super) type Answer = Unlisted<Option<Read<String>>>;

pub(super) async fn read(
    observer: &AwsObserver,
    request: &AwsRequest,
    _earlier: EarlierAnswers<'_>,
    _cache: &Cached,
) -> Answer {
    let read = if request.spot_service_linked_role {
        Some(observer.role(SPOT_SERVICE_LINKED_ROLE).await)
    } else {
        None
    };
    Unlisted(read.map(|role| mapped(role, |role| role.arn)))
}
