//! The facts whose provider is a file of `providers/`: each file reads the `AwsFacts` field of
//! its own name, from the request and the answers of the earlier stages, and owns its cache. The
//! crate's build script lists the files, so such a fact is one file here and its field in
//! `AwsFacts`: its cache, its read, its place in the last stage of `observe.rs`, its current,
//! last good and stale answers and its revalidation all follow from the file. No IO of its own.
//!
//! A provider file declares:
//! - `pub(super) type Cached`: where its answers are kept (a [`crate::cache::Cache`]);
//! - `pub(super) fn cache(families: &Families, changes: &Arc<Changes>) -> Cached`: its family;
//! - `pub(super) type Answer`: what it read, a [`FactRead`] whose `Field` is the field's type;
//! - `pub(super) async fn read(observer, request, earlier, cache) -> Answer`.

use super::controller::EarlierAnswers;
use super::fact_read::FactRead;
use super::{AwsObserver, AwsRequest, Families, StaleFact};
use crate::cache::{Changes, Revalidate};
use karpenter_health_checks::facts::AwsFacts;
use std::sync::Arc;

automod::dir!(pub(super) "src/observer/providers");

/// Declares the caches and the reads of the listed providers.
macro_rules! providers {
    ($($provider:ident,)*) => {
        /// Every provider's cache, one member each.
        pub(super) struct Caches {
            $($provider: $provider::Cached,)*
        }

        impl Caches {
            pub(super) fn new(families: &Families, changes: &Arc<Changes>) -> Self {
                Self { $($provider: $provider::cache(families, changes),)* }
            }

            /// The caches, for revalidation on evidence.
            pub(super) fn all(&self) -> Vec<&dyn Revalidate> {
                vec![$(&self.$provider,)*]
            }
        }

        /// What every provider read for one EC2NodeClass, one member each.
        pub(super) struct Reads {
            $($provider: $provider::Answer,)*
        }

        impl Reads {
            /// The `AwsFacts` fields these providers fill.
            #[cfg(test)]
            pub(super) const FIELDS: &'static [&'static str] = &[$(stringify!($provider)),*];

            /// Every provider's read, at once.
            pub(super) async fn read(
                observer: &AwsObserver,
                request: &AwsRequest,
                earlier: EarlierAnswers<'_>,
                caches: &Caches,
            ) -> Self {
                let ($($provider,)*) = futures::join!(
                    $($provider::read(observer, request, earlier, &caches.$provider),)*
                );
                Self { $($provider,)* }
            }

            /// Fills the current answers into `facts`.
            pub(super) fn current_into(&self, facts: &mut AwsFacts) {
                $(facts.$provider = self.$provider.current();)*
            }

            /// Fills the last good answers into `facts`.
            pub(super) fn last_good_into(&self, facts: &mut AwsFacts) {
                $(facts.$provider = self.$provider.last_good();)*
            }

            /// Adds the stale notes of these providers.
            pub(super) fn note_stale(&self, stale: &mut Vec<StaleFact>) {
                $(self.$provider.note_stale(stringify!($provider), stale);)*
            }
        }
    };
}

include!(concat!(env!("OUT_DIR"), "/registered_providers.rs"));
