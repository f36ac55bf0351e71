//! Revalidation on evidence: every answer one EC2NodeClass read made due at once, across all
//! of the observer's caches. No IO of its own (the refreshes run on the next reads).

use super::AwsObserver;
use crate::cache::Revalidate;
use std::time::Duration;

/// Evidence revalidates only answers at least this old: a burst of status changes (Karpenter
/// writes several conditions in a row) costs one refresh, not one per change.
pub const REVALIDATE_MIN_AGE: Duration = Duration::from_secs(30);

impl AwsObserver {
    /// Makes every answer `reader` (an EC2NodeClass) read due for a refresh at once, on evidence
    /// that something it depends on broke (its spec or Karpenter's status of it changed): the
    /// next reconcile still gets the answers at once, and a refresh that answers something else
    /// re-evaluates it. Answers read in the last [`REVALIDATE_MIN_AGE`] are left alone.
    pub fn revalidate(&self, reader: &str) -> usize {
        let i = &self.inner;
        let listed: [&dyn Revalidate; 27] = [
            &i.account,
            &i.profiles,
            &i.roles,
            &i.attached,
            &i.clusters,
            &i.access,
            &i.pod_identity,
            &i.security_groups,
            &i.instances,
            &i.oidc_providers,
            &i.simulations,
            &i.inline_policies,
            &i.managed_policies,
            &i.queues,
            &i.subnets,
            &i.route_tables,
            &i.nat_gateways,
            &i.vpc_endpoints,
            &i.vpc_attributes,
            &i.ebs_by_default,
            &i.ebs_default_key,
            &i.kms_keys,
            &i.kms_grants,
            // Region-wide and kept for hours: evidence on any class is the way a type AWS added
            // since the last read gets seen before its period ends.
            &i.instance_types,
            &i.instance_type_zones,
            &i.service_quotas,
            // An alias's parameters: Karpenter's AMIsReady changing is evidence about them.
            &i.ssm_parameters,
        ];
        // The caches of the providers of `providers/` (the open reservations; a class's images,
        // on which its spec or Karpenter's AMIsReady changing is evidence).
        listed
            .into_iter()
            .chain(i.providers.all())
            .map(|c| c.revalidate(reader, REVALIDATE_MIN_AGE))
            .sum()
    }
}
