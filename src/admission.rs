//! Bounded concurrency: at most N hook requests are being read, decoded and
//! answered at once; the next one is refused with 429 and `Retry-After`.
//!
//! Queueing without limit would let a burst (a Metacontroller restart resyncs
//! every parent at once) grow memory by one request body per waiting call and push
//! every answer past Metacontroller's webhook timeout. A 429 is cheap for both
//! sides: Metacontroller reads `Retry-After` as integer seconds and requeues the
//! parent for then, without an Event and without its error backoff.
//!
//! A [`Permit`] is taken before the body is read and released when its last clone
//! drops. The core runs on a blocking thread that keeps a clone, so a call that
//! timed out still counts until the thread is really done: the limit bounds the
//! work actually running, not just the answers still owed.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

/// The counter shared by every worker.
#[derive(Debug)]
pub struct Admission {
    limit: usize,
    in_use: Arc<AtomicUsize>,
}

/// One admitted request. Cloning shares the slot; dropping the last clone frees it.
#[derive(Debug, Clone)]
pub struct Permit(#[allow(dead_code)] Arc<Slot>);

#[derive(Debug)]
struct Slot(Arc<AtomicUsize>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl Admission {
    /// At most `limit` permits at once; `0` means no limit.
    #[must_use]
    pub fn new(limit: usize) -> Self {
        Self { limit, in_use: Arc::new(AtomicUsize::new(0)) }
    }

    /// A permit, or `None` when `limit` requests are already in flight.
    #[must_use]
    pub fn try_acquire(&self) -> Option<Permit> {
        let acquired = self.in_use.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (self.limit == 0 || n < self.limit).then_some(n + 1)
        });
        acquired.ok().map(|_| Permit(Arc::new(Slot(Arc::clone(&self.in_use)))))
    }

    /// Requests holding a permit now.
    #[must_use]
    pub fn in_use(&self) -> usize {
        self.in_use.load(Ordering::Acquire)
    }

    /// The configured limit (`0`: none).
    #[must_use]
    pub fn limit(&self) -> usize {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_past_the_limit_and_frees_on_the_last_drop() {
        let a = Admission::new(2);
        let p1 = a.try_acquire();
        let p2 = a.try_acquire();
        assert!(p1.is_some() && p2.is_some());
        assert!(a.try_acquire().is_none());
        let clone = p1.clone();
        drop(p1);
        assert!(a.try_acquire().is_none(), "a clone still holds the slot");
        drop(clone);
        assert_eq!(a.in_use(), 1);
        assert!(a.try_acquire().is_some());
    }

    #[test]
    fn zero_means_unlimited() {
        let a = Admission::new(0);
        let permits: Vec<_> = (0..100).filter_map(|_| a.try_acquire()).collect();
        assert_eq!(permits.len(), 100);
    }
}
