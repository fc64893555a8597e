//! The store-watch driver's work queue: each item at most once (an item added while it runs
//! runs once more afterwards, never twice at a time), delayed requeues keeping only the
//! earliest due time, and per-item failure counts for the retry backoff ([`super::backoff`]).
//!
//! Bounded by the number of objects: every structure holds each item once.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

use super::backoff::{Failures, RetryBackoff};

/// How one run of an item ended, as the queue needs to know it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Done; again after this long if set.
    Done(Option<Duration>),
    /// Failed; retry with backoff.
    Retry,
    /// Failed; wait for a change of the object (or the resync) instead of retrying.
    Wait,
    /// The object is gone: forget the item.
    Gone,
}

impl Outcome {
    /// A failure: retried with backoff when `retry`, else waiting for a change.
    pub(crate) fn failed(retry: bool) -> Self {
        if retry { Outcome::Retry } else { Outcome::Wait }
    }
}

/// Pending, running and delayed items.
#[derive(Debug)]
pub(crate) struct Queue<T> {
    ready: VecDeque<T>,
    queued: HashSet<T>,
    running: HashSet<T>,
    dirty: HashSet<T>,
    delayed: HashMap<T, Instant>,
    due: BTreeSet<(Instant, T)>,
    failures: Failures<T>,
}

impl<T> Default for Queue<T> {
    fn default() -> Self {
        Self {
            ready: VecDeque::new(),
            queued: HashSet::new(),
            running: HashSet::new(),
            dirty: HashSet::new(),
            delayed: HashMap::new(),
            due: BTreeSet::new(),
            failures: Failures::default(),
        }
    }
}

impl<T: Clone + Eq + Hash + Ord> Queue<T> {
    /// Asks for `item` as soon as possible.
    pub(crate) fn add(&mut self, item: T) {
        if let Some(at) = self.delayed.remove(&item) {
            self.due.remove(&(at, item.clone()));
        }
        if self.running.contains(&item) {
            self.dirty.insert(item);
        } else if self.queued.insert(item.clone()) {
            self.ready.push_back(item);
        }
    }

    /// Asks for `item` after `delay`; an earlier request wins.
    pub(crate) fn add_after(&mut self, item: T, delay: Duration, now: Instant) {
        if self.queued.contains(&item) || self.dirty.contains(&item) {
            return;
        }
        let at = now + delay;
        match self.delayed.get(&item) {
            Some(existing) if *existing <= at => return,
            Some(existing) => {
                self.due.remove(&(*existing, item.clone()));
            }
            None => {}
        }
        self.delayed.insert(item.clone(), at);
        self.due.insert((at, item));
    }

    /// The next item; it counts as running until [`Queue::done`].
    pub(crate) fn pop(&mut self) -> Option<T> {
        let item = self.ready.pop_front()?;
        self.queued.remove(&item);
        self.running.insert(item.clone());
        Some(item)
    }

    /// Up to `max` of the ready items that `wanted` picks, in queue order (the others keep
    /// their places); each counts as running until [`Queue::done`].
    pub(crate) fn pop_matching(&mut self, max: usize, wanted: impl Fn(&T) -> bool) -> Vec<T> {
        let mut picked = Vec::new();
        let mut kept = VecDeque::with_capacity(self.ready.len());
        for item in self.ready.drain(..) {
            if picked.len() < max && wanted(&item) {
                picked.push(item);
            } else {
                kept.push_back(item);
            }
        }
        self.ready = kept;
        for item in &picked {
            self.queued.remove(item);
            self.running.insert(item.clone());
        }
        picked
    }

    /// Marks `item` finished; if it was added meanwhile, it is ready again.
    pub(crate) fn done(&mut self, item: &T) {
        self.running.remove(item);
        if self.dirty.remove(item) {
            self.add(item.clone());
        }
    }

    /// Marks `item` finished with `outcome`: requeues, retries with `backoff`, or forgets it.
    pub(crate) fn finish(
        &mut self,
        item: T,
        outcome: Outcome,
        backoff: RetryBackoff,
        now: Instant,
    ) {
        self.done(&item);
        match outcome {
            Outcome::Done(requeue) => {
                self.succeeded(&item);
                if let Some(after) = requeue {
                    self.add_after(item, after, now);
                }
            }
            Outcome::Retry => {
                let after = self.failed(&item, backoff);
                self.add_after(item, after, now);
            }
            Outcome::Wait => {}
            Outcome::Gone => self.forget(&item),
        }
    }

    /// Records a success: the next failure starts the backoff afresh.
    pub(crate) fn succeeded(&mut self, item: &T) {
        self.failures.clear(item);
    }

    /// Records a failure and returns the delay before the retry.
    pub(crate) fn failed(&mut self, item: &T, backoff: RetryBackoff) -> Duration {
        self.failures.retry_after(item, backoff)
    }

    /// Drops everything known about `item` (its object is gone).
    pub(crate) fn forget(&mut self, item: &T) {
        self.failures.clear(item);
        if let Some(at) = self.delayed.remove(item) {
            self.due.remove(&(at, item.clone()));
        }
    }

    /// When the earliest delayed item is due.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.due.first().map(|(at, _)| *at)
    }

    /// Moves every delayed item due by `now` to the ready queue.
    pub(crate) fn promote(&mut self, now: Instant) {
        while let Some((at, _)) = self.due.first() {
            if *at > now {
                break;
            }
            let Some((_, item)) = self.due.pop_first() else {
                break;
            };
            self.delayed.remove(&item);
            self.add(item);
        }
    }

    /// Items waiting to run.
    pub(crate) fn len(&self) -> usize {
        self.ready.len()
    }
}

#[cfg(test)]
mod tests {
    use rouse_shared::store::ObjectKey;

    use super::*;

    fn key(name: &str) -> ObjectKey {
        ObjectKey::new("default", name)
    }

    #[test]
    fn pop_matching_takes_the_picked_items_in_order_and_keeps_the_others() {
        let mut queue = Queue::<ObjectKey>::default();
        for name in ["a1", "b1", "a2", "a3", "b2"] {
            queue.add(key(name));
        }
        let picked = queue.pop_matching(2, |k| k.name.starts_with('a'));
        assert_eq!(picked, [key("a1"), key("a2")]);
        queue.add(key("a1"));
        assert_eq!(queue.pop(), Some(key("b1")), "the others keep their order");
        assert_eq!(queue.pop(), Some(key("a3")));
        assert_eq!(queue.pop(), Some(key("b2")));
        assert_eq!(
            queue.pop(),
            None,
            "a1 runs; added again, it waits for its run to end"
        );
        queue.done(&key("a1"));
        assert_eq!(queue.pop(), Some(key("a1")));
    }

    #[test]
    fn a_key_is_queued_once_and_never_runs_twice_at_a_time() {
        let mut queue = Queue::<ObjectKey>::default();
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
        let mut queue = Queue::<ObjectKey>::default();
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
        let mut queue = Queue::<ObjectKey>::default();
        queue.add(key("a"));
        assert_eq!(queue.pop(), Some(key("a")));
        queue.add_after(key("a"), Duration::from_secs(1), now);
        queue.promote(now + Duration::from_secs(1));
        assert_eq!(queue.pop(), None);
        queue.done(&key("a"));
        assert_eq!(queue.pop(), Some(key("a")));
    }

    #[test]
    fn finish_requeues_retries_waits_or_forgets() {
        let now = Instant::now();
        let backoff = RetryBackoff {
            min: Duration::from_millis(500),
            max: Duration::from_secs(4),
        };
        let mut queue = Queue::<ObjectKey>::default();
        let run = |queue: &mut Queue<ObjectKey>, outcome| {
            queue.add(key("a"));
            assert_eq!(queue.pop(), Some(key("a")));
            queue.finish(key("a"), outcome, backoff, now);
            queue.next_due().map(|at| at - now)
        };
        assert_eq!(run(&mut queue, Outcome::Done(None)), None);
        assert_eq!(
            run(&mut queue, Outcome::Done(Some(Duration::from_secs(2)))),
            Some(Duration::from_secs(2))
        );
        assert_eq!(
            run(&mut queue, Outcome::Retry),
            Some(Duration::from_millis(500))
        );
        assert_eq!(
            run(&mut queue, Outcome::Retry),
            Some(Duration::from_secs(1)),
            "the backoff doubles"
        );
        assert_eq!(run(&mut queue, Outcome::Wait), None, "no retry");
        assert_eq!(
            run(&mut queue, Outcome::Retry),
            Some(Duration::from_secs(2)),
            "a wait keeps the failure count"
        );
        assert_eq!(run(&mut queue, Outcome::Gone), None);
        assert_eq!(
            run(&mut queue, Outcome::Retry),
            Some(Duration::from_millis(500)),
            "gone: the backoff starts afresh"
        );
        assert_eq!(Outcome::failed(true), Outcome::Retry);
        assert_eq!(Outcome::failed(false), Outcome::Wait);
    }

    #[test]
    fn failure_backoff_doubles_up_to_the_bound_and_resets() {
        let mut queue = Queue::<ObjectKey>::default();
        let (min, max) = (Duration::from_millis(500), Duration::from_secs(4));
        let backoff = RetryBackoff { min, max };
        let got: Vec<_> = (0..6).map(|_| queue.failed(&key("a"), backoff)).collect();
        let ms: Vec<u128> = got.iter().map(Duration::as_millis).collect();
        assert_eq!(ms, [500, 1000, 2000, 4000, 4000, 4000]);
        queue.succeeded(&key("a"));
        assert_eq!(queue.failed(&key("a"), backoff), min);
    }
}
