//! Provider of `open_capacity_reservations`: the account's active open capacity reservations in
//! the region, read when a NodePool of the class may launch on demand. One key shared by every
//! class, in the account family (a reservation bought shows within the hour, or at once on
//! evidence). Whether Karpenter's launches still fall into them is the check's question. Does IO
//! (EC2 DescribeCapacityReservations, through its cache).

use super::super::controller::EarlierAnswers;
use super::super::{AwsObserver, AwsRequest, Families};
use crate::cache::{Cache, Changes, Read};
use crate::ports::Service;
use karpenter_health_checks::facts::CapacityReservationFacts;
use std::sync::Arc;

pub(super) type Cached = Cache<(), Vec<CapacityReservationFacts>>;

pub(super) fn cache(families: &Families, changes: &Arc<Changes>) -> Cached {
    Cache::with_changes(families.account, changes.clone())
}

pub(super) type Answer = Option<Read<Vec<CapacityReservationFacts>>>;

pub(super) async fn read(
    observer: &AwsObserver,
    request: &AwsRequest,
    _earlier: EarlierAnswers<'_>,
    cache: &Cached,
) -> Answer {
    if !request.instance_types {
        return None;
    }
    let this = observer.clone();
    let read = cache.get((), move || async move {
        let ec2 = &this.inner.ec2;
        this.all_pages(Service::Ec2, "DescribeCapacityReservations", "", |token| {
            ec2.describe_open_capacity_reservations(token)
        })
        .await
    });
    Some(read.await)
}
