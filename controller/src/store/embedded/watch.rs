//! Watch fan-out: a bounded history of committed changes for replay, and one bounded channel
//! per watcher for live events.
//!
//! The history is bounded in entries and in bytes. Its entries are compact: the objects as
//! JSON bytes, decoded again only for a replay (a `Value` tree takes several times the
//! memory of its JSON), and evicted entries free their memory at once.
//!
//! The writer publishes each committed batch here in resourceVersion order, under one lock,
//! and a watcher registers under the same lock, so between replay and live events there is
//! no gap and no duplicate. A watcher whose channel is full is dropped and its stream ends
//! with `Expired` (it must list again), so a stalled consumer never grows memory.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use futures::StreamExt;
use rouse_shared::store::{ListParams, StoreError, StoreObject, WatchEvent, WatchStream};
use serde_json::Value;
use tokio::sync::mpsc;

use super::select::{ChangeType, RawEvent, event_for};

/// One committed change to one object.
#[derive(Debug)]
pub(crate) struct Change {
    /// The resourceVersion the change got.
    pub rv: u64,
    /// Kind of the object.
    pub kind: String,
    /// What happened.
    pub ty: ChangeType,
    /// The object after the change (for a deletion, its last state).
    pub object: Arc<Value>,
    /// The object before a modification, to tell selector transitions.
    pub previous: Option<Arc<Value>>,
}

/// One change as the history keeps it.
#[derive(Debug)]
struct Entry {
    rv: u64,
    kind: String,
    ty: ChangeType,
    object: Box<[u8]>,
    previous: Option<Box<[u8]>>,
}

impl Entry {
    fn of(change: &Change) -> Self {
        let bytes = |v: &Value| serde_json::to_vec(v).unwrap_or_default().into_boxed_slice();
        Self {
            rv: change.rv,
            kind: change.kind.clone(),
            ty: change.ty,
            object: bytes(&change.object),
            previous: change.previous.as_deref().map(bytes),
        }
    }

    /// What the entry costs in memory, roughly: its bytes and a fixed overhead.
    fn size(&self) -> usize {
        const OVERHEAD: usize = 128;
        OVERHEAD
            + self.kind.len()
            + self.object.len()
            + self.previous.as_ref().map_or(0, |p| p.len())
    }

    /// The event a watcher with `params` sees for this entry, if any.
    fn event(&self, params: &ListParams) -> Option<RawEvent> {
        let decode = |b: &[u8]| serde_json::from_slice::<Value>(b).ok().map(Arc::new);
        let object = decode(&self.object)?;
        let previous = self.previous.as_deref().and_then(decode);
        event_for(params, self.ty, &object, previous.as_ref(), self.rv)
    }
}

/// Bounds of the watch machinery.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HubLimits {
    /// Changes kept for replay.
    pub history: usize,
    /// Bytes of changes kept for replay (their JSON plus a small overhead each).
    pub history_bytes: usize,
    /// Events buffered per watcher before it is dropped as too slow.
    pub buffer: usize,
    /// Watchers at once.
    pub max_watchers: usize,
}

/// History and watchers, shared by the writer and the store handles.
pub(crate) struct Hub {
    state: Mutex<HubState>,
    limits: HubLimits,
}

struct HubState {
    history: VecDeque<Entry>,
    /// The sum of the history's entry sizes.
    history_bytes: usize,
    /// Changes at or below this version are no longer in `history`.
    horizon: u64,
    /// The last version published.
    published: u64,
    watchers: Vec<Watcher>,
    closed: bool,
}

struct Watcher {
    kind: String,
    params: ListParams,
    /// Changes at or below this version are already known to the watcher.
    after: u64,
    tx: mpsc::Sender<RawEvent>,
    overflow: Arc<AtomicBool>,
}

/// A registered watcher: events to replay first, then the live channel.
pub(crate) struct Subscription {
    replay: Vec<RawEvent>,
    rx: mpsc::Receiver<RawEvent>,
    overflow: Arc<AtomicBool>,
    from: u64,
}

impl Hub {
    /// An empty hub for a store whose last version is `current`.
    pub(crate) fn new(current: u64, limits: HubLimits) -> Self {
        Self {
            state: Mutex::new(HubState {
                history: VecDeque::with_capacity(limits.history.min(1024)),
                history_bytes: 0,
                horizon: current,
                published: current,
                watchers: Vec::new(),
                closed: false,
            }),
            limits,
        }
    }

    fn lock(&self) -> MutexGuard<'_, HubState> {
        // The state stays consistent even if a holder panicked: every update is one push or
        // retain, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Records committed changes (in version order) and sends them to the watchers.
    pub(crate) fn publish(&self, changes: Vec<Change>) {
        // Encoded before the lock: watchers and writers never wait on it.
        let entries: Vec<Entry> = if self.limits.history > 0 {
            changes.iter().map(Entry::of).collect()
        } else {
            Vec::new()
        };
        let mut entries = entries.into_iter();
        let mut state = self.lock();
        if state.closed {
            return;
        }
        for change in changes {
            state.published = change.rv;
            for w in &mut state.watchers {
                if w.kind != change.kind
                    || change.rv <= w.after
                    || w.tx.is_closed()
                    || w.overflow.load(Ordering::Acquire)
                {
                    continue;
                }
                let Some(event) = event_for(
                    &w.params,
                    change.ty,
                    &change.object,
                    change.previous.as_ref(),
                    change.rv,
                ) else {
                    continue;
                };
                if let Err(mpsc::error::TrySendError::Full(_)) = w.tx.try_send(event) {
                    w.overflow.store(true, Ordering::Release);
                    metrics::counter!("rouse_store_watch_dropped_total", "reason" => "slow")
                        .increment(1);
                }
            }
            self.remember(&mut state, change.rv, entries.next());
        }
        Self::prune(&mut state);
    }

    /// Adds a change to the history, evicting the oldest entries past either bound; a change
    /// larger than the byte bound alone is not kept (a watch from before it gets `Expired`).
    fn remember(&self, state: &mut HubState, rv: u64, entry: Option<Entry>) {
        let size = entry.as_ref().map_or(usize::MAX, Entry::size);
        let keep = entry.filter(|_| size <= self.limits.history_bytes);
        let Some(entry) = keep else {
            state.history.clear();
            state.history_bytes = 0;
            state.horizon = rv;
            metrics::gauge!("rouse_store_watch_history_bytes").set(0.0);
            return;
        };
        {
            while state.history.len() >= self.limits.history
                || state.history_bytes + size > self.limits.history_bytes
            {
                let Some(old) = state.history.pop_front() else {
                    break;
                };
                state.history_bytes -= old.size();
                state.horizon = old.rv;
            }
            state.history_bytes += size;
            state.history.push_back(entry);
        }
        // Give back the ring's spare room after a burst shrank it.
        if state.history.capacity() > 4096 && state.history.len() < state.history.capacity() / 4 {
            state.history.shrink_to(state.history.len() * 2);
        }
        metrics::gauge!("rouse_store_watch_history_bytes").set(state.history_bytes as f64);
    }

    /// Drops watchers whose stream is gone or who fell behind.
    fn prune(state: &mut HubState) {
        state
            .watchers
            .retain(|w| !w.tx.is_closed() && !w.overflow.load(Ordering::Acquire));
        metrics::gauge!("rouse_store_watchers").set(state.watchers.len() as f64);
    }

    /// Registers a watcher of `kind` for changes after version `from`.
    pub(crate) fn subscribe(
        &self,
        kind: &str,
        params: &ListParams,
        from: u64,
    ) -> Result<Subscription, StoreError> {
        let mut state = self.lock();
        if from < state.horizon {
            return Err(StoreError::Expired {
                resource_version: from.to_string(),
            });
        }
        if from > state.published {
            return Err(StoreError::TooLargeResourceVersion {
                resource_version: from.to_string(),
                current: state.published.to_string(),
            });
        }
        let replay = state
            .history
            .iter()
            .filter(|c| c.rv > from && c.kind == kind)
            .filter_map(|c| c.event(params))
            .collect();
        let after = from.max(state.published);
        self.register(&mut state, kind, params, after, replay, from)
    }

    /// Registers a watcher that first gets the current objects as `Added` events;
    /// `snapshot` reads them (and their version) while publishing is held off.
    pub(crate) fn subscribe_current(
        &self,
        kind: &str,
        params: &ListParams,
        snapshot: impl FnOnce() -> Result<(u64, Vec<Value>), StoreError>,
    ) -> Result<Subscription, StoreError> {
        let mut state = self.lock();
        // Everything published is committed, so the snapshot is at least as new as
        // `published`; later commits arrive live with higher versions.
        let (rv, objects) = snapshot()?;
        let replay = objects
            .into_iter()
            .map(Arc::new)
            .filter_map(|o| event_for(params, ChangeType::Added, &o, None, rv))
            .collect();
        self.register(&mut state, kind, params, rv, replay, rv)
    }

    fn register(
        &self,
        state: &mut HubState,
        kind: &str,
        params: &ListParams,
        after: u64,
        replay: Vec<RawEvent>,
        from: u64,
    ) -> Result<Subscription, StoreError> {
        Self::prune(state);
        if state.closed {
            return Err(StoreError::Unavailable {
                message: "the store is closed".into(),
                source: None,
            });
        }
        if state.watchers.len() >= self.limits.max_watchers {
            return Err(StoreError::Unavailable {
                message: format!(
                    "too many watchers ({} open, limit {})",
                    state.watchers.len(),
                    self.limits.max_watchers
                ),
                source: None,
            });
        }
        let (tx, rx) = mpsc::channel(self.limits.buffer.max(1));
        let overflow = Arc::new(AtomicBool::new(false));
        state.watchers.push(Watcher {
            kind: kind.to_owned(),
            params: params.clone(),
            after,
            tx,
            overflow: overflow.clone(),
        });
        metrics::gauge!("rouse_store_watchers").set(state.watchers.len() as f64);
        Ok(Subscription {
            replay,
            rx,
            overflow,
            from,
        })
    }

    /// Starts over at `current` after the file was reopened: every watch stream ends with
    /// `Expired` (its watcher may have seen changes the file no longer has, and lists again),
    /// and the history is dropped.
    pub(crate) fn reset(&self, current: u64) {
        let mut state = self.lock();
        for watcher in state.watchers.drain(..) {
            watcher.overflow.store(true, Ordering::Release);
        }
        state.history.clear();
        state.history_bytes = 0;
        state.horizon = current;
        state.published = current;
        metrics::gauge!("rouse_store_watchers").set(0.0);
        metrics::gauge!("rouse_store_watch_history_bytes").set(0.0);
    }

    /// Ends every watch stream; later publishes are dropped.
    pub(crate) fn close(&self) {
        let mut state = self.lock();
        state.closed = true;
        state.watchers.clear();
        state.history.clear();
        state.history_bytes = 0;
        metrics::gauge!("rouse_store_watchers").set(0.0);
    }
}

/// Decodes a raw event into the watcher's kind.
fn decode<K: StoreObject>(event: RawEvent) -> Result<WatchEvent<K>, StoreError> {
    let object: K =
        serde_json::from_value((*event.object).clone()).map_err(|e| StoreError::Unavailable {
            message: format!("stored object does not decode as {}: {e}", K::kind(&())),
            source: Some(Box::new(e)),
        })?;
    Ok(match event.ty {
        ChangeType::Added => WatchEvent::Added(object),
        ChangeType::Modified => WatchEvent::Modified(object),
        ChangeType::Deleted => WatchEvent::Deleted(object),
    })
}

/// The typed stream of a subscription: replay, live events, then `Expired` if the watcher
/// fell behind, or the end when the store closes.
pub(crate) fn into_stream<K: StoreObject>(sub: Subscription) -> WatchStream<K> {
    let Subscription {
        replay,
        rx,
        overflow,
        from,
    } = sub;
    let last = replay.last().map_or(from, |e| e.rv);
    let replay = futures::stream::iter(replay.into_iter().map(decode::<K>));
    let live = futures::stream::unfold(Some((rx, overflow, last)), |state| async move {
        let (mut rx, overflow, last) = state?;
        match rx.recv().await {
            Some(event) => {
                let rv = event.rv;
                Some((decode::<K>(event), Some((rx, overflow, rv))))
            }
            None if overflow.load(Ordering::Acquire) => Some((
                Err(StoreError::Expired {
                    resource_version: last.to_string(),
                }),
                None,
            )),
            None => None,
        }
    });
    replay.chain(live).boxed()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use rouse_shared::store::{ListParams, StoreError};
    use serde_json::json;

    use super::{Change, ChangeType, Hub, HubLimits};

    #[test]
    fn the_history_is_bounded_in_bytes_and_still_replays_recent_changes() {
        const BOUND: usize = 4 * 1024 * 1024;
        let hub = Hub::new(
            0,
            HubLimits {
                history: 10_000,
                history_bytes: BOUND,
                buffer: 16,
                max_watchers: 16,
            },
        );
        let big = "x".repeat(200 * 1024);
        let object = |rv: u64| {
            Arc::new(json!({
                "metadata": {"name": "big", "namespace": "default", "resourceVersion": rv.to_string()},
                "spec": {"blob": big, "rv": rv},
            }))
        };
        // 2,000 patches of a 200 KB object: 800 MB of history if bounded by count alone.
        for rv in 1..=2_000_u64 {
            hub.publish(vec![Change {
                rv,
                kind: "Sandbox".to_owned(),
                ty: ChangeType::Modified,
                object: object(rv),
                previous: Some(object(rv - 1)),
            }]);
        }
        let state = hub.lock();
        assert!(
            state.history_bytes <= BOUND,
            "{} bytes kept",
            state.history_bytes
        );
        assert!(!state.history.is_empty(), "recent changes are kept");
        drop(state);
        let params = ListParams::default();
        assert!(matches!(
            hub.subscribe("Sandbox", &params, 1),
            Err(StoreError::Expired { .. })
        ));
        let sub = hub
            .subscribe("Sandbox", &params, 1_999)
            .expect("a recent version is in the history");
        assert_eq!(sub.replay.len(), 1);
        assert_eq!(sub.replay[0].rv, 2_000);
        assert_eq!(sub.replay[0].object["spec"]["rv"], 2_000);

        // A change larger than the whole bound is not kept: older watches must list again.
        let huge =
            Arc::new(json!({"metadata": {"name": "huge"}, "spec": {"blob": "y".repeat(BOUND)}}));
        hub.publish(vec![Change {
            rv: 2_001,
            kind: "Sandbox".to_owned(),
            ty: ChangeType::Added,
            object: huge,
            previous: None,
        }]);
        assert_eq!(hub.lock().history_bytes, 0);
        assert!(hub.subscribe("Sandbox", &params, 1_999).is_err());
        assert!(hub.subscribe("Sandbox", &params, 2_001).is_ok());
    }
}
