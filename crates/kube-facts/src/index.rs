//! What a watch feeds instead of an object store: an index of compact facts ([`WatchIndex`]),
//! shared with the reconciles ([`SharedIndex`]), that swaps in a relist only once it is complete.
//! Pure: the watch that drives it lives in `watches`.

use std::fmt::Debug;
use std::sync::{Arc, RwLock, RwLockWriteGuard};

/// An index a watch keeps current, object by object.
pub trait WatchIndex: Default + Debug + Send + Sync + 'static {
    /// The watched object.
    type Object;
    /// What a change affects, for the triggers.
    type Touched: Send + 'static;

    /// Adds or replaces `object`; `None` when that changes nothing a check reads.
    fn apply(&mut self, object: &Self::Object) -> Option<Self::Touched>;
    /// Removes `object`; `None` when it was not held.
    fn delete(&mut self, object: &Self::Object) -> Option<Self::Touched>;
    /// What a complete relist affects: anything may have changed.
    fn relisted() -> Self::Touched;
}

/// An index readable while a watch updates it; during a relist the new list is gathered aside and
/// replaces the served index only once complete, so a reader never sees a half-listed cluster.
#[derive(Debug)]
pub struct SharedIndex<I> {
    state: Arc<RwLock<Relisted<I>>>,
}

impl<I> Clone for SharedIndex<I> {
    fn clone(&self) -> Self {
        Self {
            state: self.state.clone(),
        }
    }
}

impl<I: WatchIndex> Default for SharedIndex<I> {
    fn default() -> Self {
        Self::listed(I::default())
    }
}

#[derive(Debug)]
struct Relisted<I> {
    live: I,
    relisting: Option<I>,
}

impl<I: WatchIndex> SharedIndex<I> {
    /// Serves `index` (built from a complete list) as it is.
    pub fn listed(index: I) -> Self {
        Self {
            state: Arc::new(RwLock::new(Relisted {
                live: index,
                relisting: None,
            })),
        }
    }

    fn write(&self) -> RwLockWriteGuard<'_, Relisted<I>> {
        // Updates are single map operations: a panic elsewhere while the lock was held leaves the
        // index usable, so a poisoned lock is taken as it is.
        self.state.write().unwrap_or_else(|e| e.into_inner())
    }

    /// Reads the served index.
    pub fn read<T>(&self, f: impl FnOnce(&I) -> T) -> T {
        let state = self.state.read().unwrap_or_else(|e| e.into_inner());
        f(&state.live)
    }

    /// A watch event outside a relist: an object applied.
    pub fn apply(&self, object: &I::Object) -> Option<I::Touched> {
        self.write().live.apply(object)
    }

    /// A watch event outside a relist: an object deleted.
    pub fn delete(&self, object: &I::Object) -> Option<I::Touched> {
        self.write().live.delete(object)
    }

    /// A (re)list begins: objects now go aside until [`Self::relist_done`].
    pub fn relist_started(&self) {
        self.write().relisting = Some(I::default());
    }

    /// One object of a (re)list.
    pub fn relist_apply(&self, object: &I::Object) {
        let mut state = self.write();
        let target = match state.relisting.as_mut() {
            Some(index) => index,
            None => &mut state.live,
        };
        target.apply(object);
    }

    /// The list is complete: it replaces the served index.
    pub fn relist_done(&self) -> I::Touched {
        let mut state = self.write();
        if let Some(index) = state.relisting.take() {
            state.live = index;
        }
        I::relisted()
    }
}
