//! EC2 reads of the observer for `InstanceTypesAvailable`: the region's instance types
//! (DescribeInstanceTypes) and the zones each is offered in (DescribeInstanceTypeOfferings by
//! availability zone). Both are region-wide: one cache key each, shared by every class, refreshed
//! on the catalog family's period (hours: AWS adds instance types a few times a year). Does IO
//! (through the EC2 port).

use super::AwsObserver;
use crate::cache::Read;
use crate::ports::Service;
use futures::join;
use karpenter_health_checks::facts::{InstanceTypeCatalog, InstanceTypeFacts, Observed};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// Instance type name to the zones it is offered in.
pub(super) type Offerings = Arc<BTreeMap<String, BTreeSet<String>>>;

impl AwsObserver {
    /// The region's catalog: unknown if either read is.
    pub(super) async fn instance_catalog(&self) -> Read<InstanceTypeCatalog> {
        let (types, zones) = join!(self.instance_types(), self.instance_type_zones());
        let compose =
            |t: &Observed<Arc<Vec<InstanceTypeFacts>>>, z: &Observed<Offerings>| match (t, z) {
                (Observed::Unknown(u), _) | (_, Observed::Unknown(u)) => {
                    Observed::Unknown(u.clone())
                }
                (t, z) => Observed::Found(InstanceTypeCatalog {
                    types: t.found().cloned().unwrap_or_default(),
                    zones: z.found().cloned().unwrap_or_default(),
                }),
            };
        Read {
            current: compose(&types.current, &zones.current),
            last_good: match (&types.last_good, &zones.last_good) {
                (Some((t, ta)), Some((z, za))) => Some((compose(t, z), (*ta).max(*za))),
                _ => None,
            },
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
