//! EC2 reads of the observer for `InstanceTypesAvailable`: the region's instance types
//! (DescribeInstanceTypes) and the zones each is offered in (DescribeInstanceTypeOfferings by
//! availability zone). Both are region-wide: one cache key each, shared by every class, refreshed
//! on the catalog family's period (hours: AWS adds instance types a few times a year). Does IO
//! (through the EC2 port).
//!
//! Provides the fact `instance_types`.

use super::{AwsObserver, AwsRequest};
use crate::cache::Read;
use crate::ports::Service;
use futures::join;
use karpenter_health_checks::facts::{InstanceTypeCatalog, InstanceTypeFacts, Memo, Observed};
use karpenter_health_checks::plan::instance_types::Judged;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The region's instance types, sorted by name.
pub(super) type Types = Arc<Vec<InstanceTypeFacts>>;

/// Instance type name to the zones it is offered in.
pub(super) type Offerings = Arc<BTreeMap<String, BTreeSet<String>>>;

/// The memo of NodePool verdicts and the two answers it belongs to.
pub(super) type JudgedMemo = (Arc<Vec<InstanceTypeFacts>>, Offerings, Memo<Judged>);

impl AwsObserver {
    /// Provider of `instance_types`, read when a NodePool uses the class.
    pub(super) async fn instance_types_fact(
        &self,
        request: &AwsRequest,
    ) -> Option<Read<InstanceTypeCatalog>> {
        if request.instance_types {
            Some(self.instance_catalog().await)
        } else {
            None
        }
    }

    /// The region's catalog: unknown if either read is.
    async fn instance_catalog(&self) -> Read<InstanceTypeCatalog> {
        let (types, zones) = join!(self.instance_types(), self.instance_type_zones());
        let compose =
            |t: &Observed<Arc<Vec<InstanceTypeFacts>>>, z: &Observed<Offerings>| match (t, z) {
                (Observed::Unknown(u), _) | (_, Observed::Unknown(u)) => {
                    Observed::Unknown(u.clone())
                }
                (t, z) => {
                    let types = t.found().cloned().unwrap_or_default();
                    let zones = z.found().cloned().unwrap_or_default();
                    let judged = self.judged_memo(&types, &zones);
                    Observed::Found(InstanceTypeCatalog {
                        types,
                        zones,
                        judged,
                    })
                }
            };
        Read {
            current: compose(&types.current, &zones.current),
            last_good: match (&types.last_good, &zones.last_good) {
                (Some((t, ta)), Some((z, za))) => Some((compose(t, z), (*ta).max(*za))),
                _ => None,
            },
        }
    }

    /// The memo of NodePool verdicts for these two answers: the same as long as both are the
    /// answers in the cache (the same `Arc`s), a new one once either is read again (every few
    /// hours), so a verdict never outlives the catalog it was judged on.
    fn judged_memo(&self, types: &Arc<Vec<InstanceTypeFacts>>, zones: &Offerings) -> Memo<Judged> {
        let mut current = self
            .inner
            .judged_memo
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        match &*current {
            Some((t, z, memo)) if Arc::ptr_eq(t, types) && Arc::ptr_eq(z, zones) => memo.clone(),
            _ => {
                let memo = Memo::default();
                *current = Some((types.clone(), zones.clone(), memo.clone()));
                memo
            }
        }
    }

    async fn instance_types(&self) -> Read<Arc<Vec<InstanceTypeFacts>>> {
        let this = self.clone();
        self.inner
            .instance_types
            .get((), move || async move {
                let ec2 = &this.inner.ec2;
                let mut all = Vec::new();
                this.pages(
                    Service::Ec2,
                    "DescribeInstanceTypes",
                    "",
                    |token| ec2.describe_instance_types(token),
                    |page| all.extend(page),
                )
                .await?;
                all.sort_by(|a, b| a.name.cmp(&b.name));
                Ok(Some(Arc::new(all)))
            })
            .await
    }

    async fn instance_type_zones(&self) -> Read<Offerings> {
        let this = self.clone();
        self.inner
            .instance_type_zones
            .get((), move || async move {
                let ec2 = &this.inner.ec2;
                let mut zones: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
                this.pages(
                    Service::Ec2,
                    "DescribeInstanceTypeOfferings",
                    "",
                    |token| ec2.describe_instance_type_offerings(token),
                    |page| {
                        for (instance_type, zone) in page {
                            zones.entry(instance_type).or_default().insert(zone);
                        }
                    },
                )
                .await?;
                Ok(Some(Arc::new(zones)))
            })
            .await
    }
}
