//! The one retry backoff of every reconciler, in both modes: per key, from `min`, doubling per
//! consecutive failure, up to `max`; a success starts it afresh.
//!
//! [`Failures`] counts the consecutive failures per key; the standalone queue keeps one, the
//! kube-runtime error policies a [`KeyedBackoff`] each (the same behind a mutex, as an
//! error policy gets only a shared context).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::Duration;

/// Keys whose consecutive failures are tracked at most: the entries of objects deleted while
/// failing are never removed by a success, so the map is cleared when it reaches this size
/// (losing counts only shortens some backoffs).
const MAX_TRACKED: usize = 10_000;

/// The retry delays of one reconciler: from `min`, doubling per failure, up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RetryBackoff {
    /// The first retry's delay.
    pub min: Duration,
    /// The longest delay.
    pub max: Duration,
}

impl RetryBackoff {
    /// The delay before the retry that follows `failures` earlier consecutive failures.
    pub fn delay(&self, failures: u32) -> Duration {
        self.min
            .saturating_mul(2u32.saturating_pow(failures))
            .min(self.max.max(self.min))
    }
}

/// Consecutive failures per key, bounded (see [`MAX_TRACKED`]).
#[derive(Debug)]
pub struct Failures<K> {
    counts: HashMap<K, u32>,
}

impl<K> Default for Failures<K> {
    fn default() -> Self {
        Self {
            counts: HashMap::new(),
        }
    }
}

impl<K: Clone + Eq + Hash> Failures<K> {
    /// Records one more failure of `key`; returns how many failed before it.
    pub fn record(&mut self, key: &K) -> u32 {
        if self.counts.len() >= MAX_TRACKED && !self.counts.contains_key(key) {
            self.counts.clear();
        }
        let n = self.counts.entry(key.clone()).or_insert(0);
        let before = *n;
        *n = n.saturating_add(1);
        before
    }

    /// Records a failure of `key` and returns the delay before its retry.
    pub fn retry_after(&mut self, key: &K, backoff: RetryBackoff) -> Duration {
        backoff.delay(self.record(key))
    }

    /// Forgets `key`'s failures (it succeeded, or its object is gone).
    pub fn clear(&mut self, key: &K) {
        self.counts.remove(key);
    }

    /// Keys with failures tracked.
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// No key has failures tracked.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

/// A [`RetryBackoff`] with its per-key [`Failures`], shared by the reconciles of one
/// kube-runtime controller.
#[derive(Debug)]
pub struct KeyedBackoff<K> {
    backoff: RetryBackoff,
    failures: Mutex<Failures<K>>,
}

impl<K: Clone + Eq + Hash> KeyedBackoff<K> {
    /// Delays from `backoff`, no failures yet.
    pub fn new(backoff: RetryBackoff) -> Self {
        Self {
            backoff,
            failures: Mutex::new(Failures::default()),
        }
    }

    /// Records a failure of `key`; returns how many failed before it and the delay before
    /// its retry.
    pub fn failed(&self, key: &K) -> (u32, Duration) {
        let before = self.lock().record(key);
        (before, self.backoff.delay(before))
    }

    /// Records a success of `key`: its next failure starts the backoff afresh.
    pub fn succeeded(&self, key: &K) {
        self.lock().clear(key);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Failures<K>> {
        // A poisoned map only holds retry counters; keep using it.
        self.failures.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_double_from_min_to_max_and_reset_on_clear() {
        let ms = Duration::from_millis;
        let backoff = RetryBackoff {
            min: ms(500),
            max: ms(4000),
        };
        let mut failures = Failures::default();
        let got: Vec<u128> = (0..6)
            .map(|_| failures.retry_after(&"a", backoff).as_millis())
            .collect();
        assert_eq!(got, [500, 1000, 2000, 4000, 4000, 4000]);
        failures.clear(&"a");
        assert_eq!(failures.retry_after(&"a", backoff), ms(500));
        assert_eq!(backoff.delay(u32::MAX), ms(4000), "no overflow");
    }

    #[test]
    fn the_map_is_bounded() {
        let mut failures = Failures::default();
        for n in 0..MAX_TRACKED {
            failures.record(&n);
        }
        assert_eq!(failures.len(), MAX_TRACKED);
        failures.record(&MAX_TRACKED);
        assert_eq!(failures.len(), 1, "cleared at the bound, then counted");
        assert_eq!(failures.record(&0), 0, "the cleared counts start afresh");
    }

    #[test]
    fn keyed_backoff_counts_per_key_and_resets_on_success() {
        let ms = Duration::from_millis;
        let keyed = KeyedBackoff::new(RetryBackoff {
            min: ms(200),
            max: ms(1000),
        });
        assert_eq!(keyed.failed(&"a"), (0, ms(200)));
        assert_eq!(keyed.failed(&"a"), (1, ms(400)));
        assert_eq!(keyed.failed(&"b"), (0, ms(200)), "each key its own count");
        keyed.succeeded(&"a");
        assert_eq!(keyed.failed(&"a"), (0, ms(200)));
    }
}
