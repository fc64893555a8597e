//! The work queue of the extensions driver: each item at most once (an item added while it
//! runs runs once more afterwards, never twice at a time), delayed requeues keeping only the
//! earliest due time, and per-item failure counts for the retry backoff.
//!
//! Bounded by the number of objects: every structure holds each item once.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::hash::Hash;
use std::time::Duration;

use tokio::time::Instant;

/// Pending, running and delayed items.
#[derive(Debug)]
pub(crate) struct Queue<T> {
    ready: VecDeque<T>,
    queued: HashSet<T>,
    running: HashSet<T>,
    dirty: HashSet<T>,
    delayed: HashMap<T, Instant>,
    due: BTreeSet<(Instant, T)>,
    failures: HashMap<T, u32>,
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
            failures: HashMap::new(),
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

    /// Marks `item` finished; if it was added meanwhile, it is ready again.
    pub(crate) fn done(&mut self, item: &T) {
        self.running.remove(item);
        if self.dirty.remove(item) {
            self.add(item.clone());
        }
    }

    /// Records a success: the next failure starts the backoff afresh.
    pub(crate) fn succeeded(&mut self, item: &T) {
        self.failures.remove(item);
    }

    /// Records a failure and returns the delay before the retry.
    pub(crate) fn failed(&mut self, item: &T, min: Duration, max: Duration) -> Duration {
        let n = self.failures.entry(item.clone()).or_insert(0);
        let delay = min.saturating_mul(2u32.saturating_pow(*n)).min(max);
        *n = n.saturating_add(1);
        delay
    }

    /// Drops everything known about `item` (its object is gone).
    pub(crate) fn forget(&mut self, item: &T) {
        self.failures.remove(item);
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
