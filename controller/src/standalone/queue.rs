//! The driver's work queue: each sandbox key at most once (a key added while it is being
//! reconciled runs once more afterwards, never twice at a time), delayed requeues that keep
//! only the earliest due time, and a per-key failure count for retry backoff.
//!
//! Its size is bounded by the number of sandboxes: every structure holds each key once.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::time::Duration;

use rouse_shared::store::ObjectKey;
use tokio::time::Instant;

/// Pending, running and delayed keys.
#[derive(Debug, Default)]
pub(crate) struct WorkQueue {
    ready: VecDeque<ObjectKey>,
    queued: HashSet<ObjectKey>,
    running: HashSet<ObjectKey>,
    dirty: HashSet<ObjectKey>,
    delayed: HashMap<ObjectKey, Instant>,
    due: BTreeSet<(Instant, ObjectKey)>,
    failures: HashMap<ObjectKey, u32>,
}

impl WorkQueue {
    /// Asks for a reconcile of `key` as soon as possible.
    pub(crate) fn add(&mut self, key: ObjectKey) {
        self.cancel_delay(&key);
        if self.running.contains(&key) {
            self.dirty.insert(key);
        } else if self.queued.insert(key.clone()) {
            self.ready.push_back(key);
        }
    }

    /// Asks for a reconcile of `key` after `delay`; an earlier request wins.
    pub(crate) fn add_after(&mut self, key: ObjectKey, delay: Duration, now: Instant) {
        if self.queued.contains(&key) || self.dirty.contains(&key) {
            return;
        }
        let at = now + delay;
        if self
            .delayed
            .get(&key)
            .is_some_and(|existing| *existing <= at)
        {
            return;
        }
        self.cancel_delay(&key);
        self.delayed.insert(key.clone(), at);
        self.due.insert((at, key));
    }

    /// The next key to reconcile; it counts as running until [`WorkQueue::done`].
    pub(crate) fn pop(&mut self) -> Option<ObjectKey> {
        let key = self.ready.pop_front()?;
        self.queued.remove(&key);
        self.running.insert(key.clone());
        Some(key)
    }

    /// Marks a reconcile finished; a key added meanwhile is queued again.
    pub(crate) fn done(&mut self, key: &ObjectKey) {
        self.running.remove(key);
        if self.dirty.remove(key) {
            self.add(key.clone());
        }
    }

    /// When the earliest delayed key is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Queues every delayed key that is due at `now`.
    pub(crate) fn promote(&mut self, now: Instant) {
        while let Some((at, key)) = self.due.first().cloned() {
            if at > now {
                break;
            }
            self.add(key);
        }
    }

    /// Counts a failure of `key` and returns its backoff: `min` doubled per consecutive
    /// failure, at most `max`.
    pub(crate) fn failed(&mut self, key: &ObjectKey, min: Duration, max: Duration) -> Duration {
        let count = self.failures.entry(key.clone()).or_insert(0);
        *count = count.saturating_add(1);
        let shift = (*count - 1).min(16);
        min.saturating_mul(1 << shift).min(max)
    }

    /// Forgets the failures of `key` (it succeeded, or is gone).
    pub(crate) fn succeeded(&mut self, key: &ObjectKey) {
        self.failures.remove(key);
    }

    /// Forgets a deleted key's delayed requeue and failures.
    pub(crate) fn forget(&mut self, key: &ObjectKey) {
        self.cancel_delay(key);
        self.failures.remove(key);
    }

    /// Keys waiting to run now.
    pub(crate) fn len(&self) -> usize {
        self.ready.len()
    }

    fn cancel_delay(&mut self, key: &ObjectKey) {
        if let Some(at) = self.delayed.remove(key) {
            self.due.remove(&(at, key.clone()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("default", name)
    }

    #[test]
    fn a_key_is_queued_once_and_never_runs_twice_at_a_time() {
        let mut queue = WorkQueue::default();
        queue.add(key("a"));
        queue.add(key("a"));
        queue.add(key("b"));
        assert_eq!(queue.len(), 2);
        assert_eq!(queue.pop(), Some(key("a")));
        queue.add(key("a"));
        assert_eq!(queue.pop(), Some(key("b")));
        assert_eq!(queue.pop(), None, "a runs; its re-add waits");
        queue.done(&key("a"));
        assert_eq!(
            queue.pop(),
            Some(key("a")),
            "re-added while running: once more"
        );
        queue.done(&key("a"));
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn delays_keep_the_earliest_and_an_immediate_add_cancels_them() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add_after(key("a"), Duration::from_secs(10), now);
        queue.add_after(key("a"), Duration::from_secs(5), now);
        queue.add_after(key("a"), Duration::from_secs(20), now);
        assert_eq!(queue.next_due(), Some(now + Duration::from_secs(5)));
        queue.promote(now + Duration::from_secs(4));
        assert_eq!(queue.pop(), None);
        queue.promote(now + Duration::from_secs(5));
        assert_eq!(queue.pop(), Some(key("a")));
        assert_eq!(queue.next_due(), None);
        queue.done(&key("a"));

        queue.add_after(key("b"), Duration::from_secs(5), now);
        queue.add(key("b"));
        assert_eq!(
            queue.next_due(),
            None,
            "the immediate add replaced the delay"
        );
        assert_eq!(queue.pop(), Some(key("b")));
    }

    #[test]
    fn a_delay_due_while_running_runs_after_it() {
        let now = Instant::now();
        let mut queue = WorkQueue::default();
        queue.add(key("a"));
        assert_eq!(queue.pop(), Some(key("a")));
        queue.add_after(key("a"), Duration::from_secs(1), now);
        queue.promote(now + Duration::from_secs(1));
        assert_eq!(queue.pop(), None);
        queue.done(&key("a"));
        assert_eq!(queue.pop(), Some(key("a")));
    }

    #[test]
    fn failure_backoff_doubles_up_to_the_bound_and_resets() {
        let mut queue = WorkQueue::default();
        let (min, max) = (Duration::from_millis(500), Duration::from_secs(4));
        let got: Vec<_> = (0..6).map(|_| queue.failed(&key("a"), min, max)).collect();
        let ms: Vec<u128> = got.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [500, 1000, 2000, 4000, 4000, 4000]);
        queue.succeeded(&key("a"));
        assert_eq!(queue.failed(&key("a"), min, max), min);
    }
}
