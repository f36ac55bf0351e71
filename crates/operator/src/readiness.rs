//! What `/readyz` answers: not ready with the reason while the CRDs are missing, then whether
//! this replica's caches (the leader's, or the standby's own) have synced. No IO.

use std::sync::{Arc, Mutex};

type SyncedCheck = Box<dyn Fn() -> bool + Send + Sync>;

#[derive(Default)]
struct State {
    /// Why this replica cannot work at all (a CRD not served), if it cannot.
    blocked: Option<String>,
    /// Whether the caches this replica currently runs have synced; none before they start.
    synced: Option<SyncedCheck>,
}

/// Shared by the HTTP endpoint and the parts of the process that start and stop caches.
#[derive(Clone, Default)]
pub struct Readiness(Arc<Mutex<State>>);

impl std::fmt::Debug for Readiness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Readiness").finish_non_exhaustive()
    }
}

impl Readiness {
    /// `Ok` when ready, else why not, in a line.
    pub fn check(&self) -> Result<(), String> {
        let Ok(state) = self.0.lock() else {
            return Err("readiness state poisoned".into());
        };
        if let Some(why) = &state.blocked {
            return Err(why.clone());
        }
        match &state.synced {
            Some(synced) if synced() => Ok(()),
            Some(_) => Err("caches not synced".into()),
            None => Err("caches not started".into()),
        }
    }

    /// Marks the replica unable to work, or able again (`None`).
    pub fn set_blocked(&self, why: Option<String>) {
        if let Ok(mut state) = self.0.lock() {
            state.blocked = why;
        }
    }

    /// Reports the caches now running: the standby's, then the leader's.
    pub fn set_caches(&self, synced: impl Fn() -> bool + Send + Sync + 'static) {
        if let Ok(mut state) = self.0.lock() {
            state.synced = Some(Box::new(synced));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_crd_outranks_the_caches_and_the_caches_decide_after() {
        let readiness = Readiness::default();
        assert_eq!(readiness.check(), Err("caches not started".into()));
        readiness.set_blocked(Some("the KarpenterHealth CRD is not installed".into()));
        readiness.set_caches(|| true);
        assert_eq!(
            readiness.check(),
            Err("the KarpenterHealth CRD is not installed".into())
        );
        readiness.set_blocked(None);
        assert_eq!(readiness.check(), Ok(()));
        readiness.set_caches(|| false);
        assert_eq!(readiness.check(), Err("caches not synced".into()));
    }
}
