//! STS reads of the observer: the account and partition of the operator's own credentials
//! (GetCallerIdentity), cached for `account_ttl`. Does IO (through the STS port).
//!
//! Provides the fact `account`.

use super::AwsObserver;
use crate::cache::Read;
use crate::ports::Service;
use karpenter_health_checks::facts::AccountFacts;

impl AwsObserver {
    /// Provider of `account`.
    pub(super) async fn account(&self) -> Read<AccountFacts> {
        let this = self.clone();
        self.inner
            .account
            .get((), move || async move {
                let sts = &this.inner.sts;
                this.load(
                    Service::Sts,
                    "GetCallerIdentity",
                    "",
                    sts.get_caller_identity(),
                )
                .await
            })
            .await
    }
}
