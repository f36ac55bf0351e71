//! The staleness bound of each family of AWS facts, in paused time, with the production
//! settings: an answer is served from memory until its TTL, served as is for up to `stale` more
//! while one refresh runs behind the reader, and the refresh's new answer names its readers on
//! the changes feed; no reader is ever handed an answer older than the family's bound.

use crate::common::{observer, options, request, wiring_request, world};
use futures::StreamExt;
use karpenter_health_aws::cache::Changed;
use karpenter_health_aws::fake::FakeAws;
use karpenter_health_aws::{AwsObserver, AwsRequest, ObserverOptions, read_as};
use karpenter_health_checks::facts::AwsFacts;
use karpenter_health_checks::plan::volume_keys::{DefaultKeyUse, VolumeKeys};
use std::collections::BTreeSet;
use std::time::Duration;

/// One family: the request that reads it, the call that answers it, a change of that answer,
/// and the fact it shows in.
struct Family {
    request: AwsRequest,
    operation: &'static str,
    ttl: Duration,
    change: fn(&FakeAws),
    fact: fn(&AwsFacts) -> String,
}

const READER: &str = "class-a";

async fn observe(obs: &AwsObserver, request: &AwsRequest) -> AwsFacts {
    read_as(READER, obs.observe(request)).await
}

/// The production settings, less the client-side rate limits (the fake is not IAM's budget).
fn production() -> ObserverOptions {
    ObserverOptions {
        rate_limits: options().rate_limits,
        ..ObserverOptions::default()
    }
}

async fn holds_its_bound(family: Family) {
    let defaults = production();
    let fake = FakeAws::new(world());
    let obs = observer(&fake, defaults.clone());
    let mut changes = obs.changes();
    let before = (family.fact)(&observe(&obs, &family.request).await);

    (family.change)(&fake);
    fake.reset_calls();
    // Before the jittered TTL (at most a tenth early): memory, no call.
    tokio::time::advance(family.ttl.mul_f64(0.89)).await;
    let fresh = (family.fact)(&observe(&obs, &family.request).await);
    assert_eq!(fresh, before, "{}: served from memory", family.operation);
    assert_eq!(fake.calls(family.operation), 0, "{}", family.operation);

    // Past the TTL: the answer it had, at once, and one refresh behind it.
    tokio::time::advance(family.ttl.mul_f64(0.12)).await;
    let due = (family.fact)(&observe(&obs, &family.request).await);
    assert_eq!(
        due, before,
        "{}: a due answer is served, not waited for",
        family.operation
    );
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(
        fake.calls(family.operation) >= 1,
        "{}: refreshed",
        family.operation
    );
    let named = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            match changes.next().await {
                Some(Changed::Readers(readers)) if readers.iter().any(|r| &**r == READER) => {
                    break true;
                }
                Some(Changed::Everyone) => break true,
                Some(_) => {}
                None => break false,
            }
        }
    })
    .await;
    assert_eq!(
        named,
        Ok(true),
        "{}: its reader is re-evaluated",
        family.operation
    );
    let after = (family.fact)(&observe(&obs, &family.request).await);
    assert_ne!(after, before, "{}: the refreshed answer", family.operation);

    // Nobody reads for the whole bound: the next reader waits for a refresh rather than being
    // handed an answer older than the bound.
    let bound = defaults
        .families()
        .general
        .staleness_bound()
        .max(family.ttl + defaults.stale);
    (family.change)(&fake);
    tokio::time::advance(bound).await;
    let late = (family.fact)(&observe(&obs, &family.request).await);
    assert_eq!(
        late, before,
        "{}: read afresh past the bound",
        family.operation
    );
}

#[tokio::test(start_paused = true)]
async fn general_facts_are_at_most_twenty_minutes_old() {
    let defaults = production();
    assert_eq!(
        defaults.families().general.staleness_bound(),
        Duration::from_secs(1_200)
    );
    holds_its_bound(Family {
        request: request(),
        operation: "GetInstanceProfile",
        ttl: defaults.ttl,
        change: |fake| {
            fake.with(|s| {
                let profile = s.instance_profiles.get_mut("demo_profile").unwrap();
                if profile.path == "/" {
                    profile.path = "/changed/".into();
                } else {
                    profile.path = "/".into();
                }
            })
        },
        fact: |facts| format!("{:?}", facts.instance_profile),
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn permission_answers_are_at_most_thirty_five_minutes_old() {
    let defaults = production();
    assert_eq!(
        defaults.families().permissions.staleness_bound(),
        Duration::from_secs(2_100)
    );
    holds_its_bound(Family {
        request: wiring_request(),
        operation: "SimulatePrincipalPolicy",
        ttl: defaults.permissions_ttl,
        change: |fake| {
            fake.with(|s| {
                if s.simulated.remove("iam:PassRole").is_none() {
                    s.simulated
                        .insert("iam:PassRole".into(), "implicitDeny".into());
                }
            })
        },
        fact: |facts| {
            let decisions = facts
                .controller_permissions
                .as_ref()
                .and_then(|p| p.simulated.found().cloned())
                .unwrap_or_default();
            format!(
                "{:?}",
                decisions
                    .iter()
                    .filter(|d| d.action == "iam:PassRole")
                    .map(|d| d.decision.as_str())
                    .collect::<BTreeSet<_>>()
            )
        },
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn account_facts_are_at_most_sixty_five_minutes_old() {
    let defaults = production();
    assert_eq!(
        defaults.families().account.staleness_bound(),
        Duration::from_secs(3_900)
    );
    holds_its_bound(Family {
        request: AwsRequest {
            volume_keys: Some(VolumeKeys {
                named: BTreeSet::new(),
                default: DefaultKeyUse::Always,
            }),
            ..request()
        },
        operation: "GetEbsEncryptionByDefault",
        ttl: defaults.account_ttl,
        change: |fake| fake.with(|s| s.ebs_encryption_by_default = !s.ebs_encryption_by_default),
        fact: |facts| format!("{:?}", facts.ebs_encryption),
    })
    .await;
}

#[tokio::test(start_paused = true)]
async fn instance_type_catalogs_are_at_most_six_hours_and_five_minutes_old() {
    let defaults = production();
    assert_eq!(
        defaults.families().catalog.staleness_bound(),
        Duration::from_secs(6 * 3_600 + 300)
    );
    holds_its_bound(Family {
        request: AwsRequest {
            instance_types: true,
            ..request()
        },
        operation: "DescribeInstanceTypeOfferings",
        ttl: defaults.catalog_ttl,
        // A type offered, then withdrawn: two states, like the other families' toggles.
        change: |fake| {
            fake.with(|s| {
                let offering = ("m9.large".to_owned(), "us-west-2a".to_owned());
                if s.instance_type_offerings.contains(&offering) {
                    s.instance_type_offerings.retain(|o| *o != offering);
                } else {
                    s.instance_type_offerings.push(offering);
                }
            })
        },
        fact: |facts| {
            format!(
                "{:?}",
                facts
                    .instance_types
                    .as_ref()
                    .and_then(|c| c.found())
                    .map(|c| c.zones.len())
            )
        },
    })
    .await;
}
