//! [`DirectDirectory`]: a [`Directory`] whose wakes go straight to a runtime in the same
//! process ([`DirectWake`], standalone mode's local platform) before the store has them.
//!
//! A direct wake returns the endpoint of a workload it started; the directory puts it in
//! force at once (`Starting` with that endpoint, which held connections dial) while the
//! store's own updates catch up behind it. [`Overrides`] decides, per update, which wins: the
//! store's state once it is past the wake (an endpoint, Ready, a newer suspension, deleted,
//! failed), the woken endpoint while the store still shows the sandbox as it was before the
//! wake (suspended at the woken generation) or woken without an endpoint yet. When the store
//! refuses the wake, the override is dropped and the store's state is back in force. A wake
//! the runtime cannot do directly goes to the inner directory (the store) as before.

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use futures::future::{BoxFuture, FutureExt};
use futures::stream::{BoxStream, Stream, StreamExt};
use tokio::sync::mpsc;

use super::contract::{
    ActivityReport, Directory, Endpoint, Result, RouteState, RouteUpdate, SandboxKey,
};
use crate::metrics as m;

/// Direct-wake events buffered for the update task.
const EVENT_BUFFER: usize = 1024;

/// What a direct wake did.
pub enum DirectStart {
    /// The runtime started the sandbox: dial `endpoint`.
    Started {
        /// Where to dial it.
        endpoint: Endpoint,
        /// The sandbox's `metadata.generation` as it was suspended.
        generation: u64,
        /// Its `metadata.uid`.
        uid: String,
        /// Resolves once the store answered the wake: true when the store has it woken too,
        /// false when the store refused it (the runtime stopped the workload again).
        written: BoxFuture<'static, bool>,
    },
    /// The runtime cannot wake it directly: wake it through the directory.
    NotDirect,
}

/// A runtime in this process that can start a suspended sandbox itself.
pub trait DirectWake: Send + Sync + 'static {
    /// Starts `key`'s workload if the runtime can, returning where to dial it.
    fn wake(&self, key: &SandboxKey) -> BoxFuture<'static, DirectStart>;
}

/// A woken sandbox whose endpoint is in force ahead of the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Woken {
    /// The endpoint of the started workload.
    pub endpoint: Endpoint,
    /// The generation it was suspended at.
    pub generation: u64,
    /// Its uid.
    pub uid: String,
}

impl Woken {
    /// Whether the store's `state` is still behind this wake: the same suspension, or woken
    /// without an endpoint yet.
    fn ahead_of(&self, state: &RouteState) -> bool {
        match state {
            RouteState::Suspended {
                generation, uid, ..
            } => *generation == self.generation && *uid == self.uid,
            RouteState::Starting { endpoint: None } => true,
            _ => false,
        }
    }

    fn state(&self) -> RouteState {
        RouteState::Starting {
            endpoint: Some(self.endpoint.clone()),
        }
    }
}

/// The pure part: the store's last state per sandbox and the direct wakes in force; each
/// input returns the state to put in force, if any.
#[derive(Debug, Default)]
pub struct Overrides {
    store: HashMap<SandboxKey, RouteState>,
    woken: HashMap<SandboxKey, Woken>,
}

impl Overrides {
    /// The store says `key` is `state` now.
    pub fn store(&mut self, key: &SandboxKey, state: RouteState) -> RouteState {
        if state == RouteState::Missing {
            self.store.remove(key);
        } else {
            self.store.insert(key.clone(), state.clone());
        }
        match self.woken.get(key) {
            Some(woken) if woken.ahead_of(&state) => woken.state(),
            Some(_) => {
                self.woken.remove(key);
                state
            }
            None => state,
        }
    }

    /// A direct wake started `key`: its endpoint goes in force unless the store is already
    /// past the wake (or does not know the sandbox).
    pub fn woken(&mut self, key: &SandboxKey, woken: Woken) -> Option<RouteState> {
        let current = self.store.get(key)?;
        if !woken.ahead_of(current) {
            return None;
        }
        let state = woken.state();
        self.woken.insert(key.clone(), woken);
        Some(state)
    }

    /// The store refused the wake of `key` at `generation`/`uid`: its own state is back in
    /// force.
    pub fn refused(&mut self, key: &SandboxKey, generation: u64, uid: &str) -> Option<RouteState> {
        let woken = self.woken.get(key)?;
        if woken.generation != generation || woken.uid != uid {
            return None;
        }
        self.woken.remove(key);
        Some(self.store.get(key).cloned().unwrap_or(RouteState::Missing))
    }
}

/// What the wake side tells the update task.
enum Event {
    Woken(SandboxKey, Woken),
    Refused(SandboxKey, u64, String),
}

/// A directory that wakes through a [`DirectWake`] first and `inner` when it cannot; see the
/// module documentation.
pub struct DirectDirectory<D> {
    inner: D,
    direct: Arc<dyn DirectWake>,
    events: mpsc::Sender<Event>,
    /// Taken by the first [`Directory::updates`] call (the proxy calls it once).
    receiver: Mutex<Option<mpsc::Receiver<Event>>>,
}

impl<D: Directory> DirectDirectory<D> {
    /// Wraps `inner`, waking through `direct` first.
    pub fn new(inner: D, direct: Arc<dyn DirectWake>) -> Self {
        let (events, receiver) = mpsc::channel(EVENT_BUFFER);
        Self {
            inner,
            direct,
            events,
            receiver: Mutex::new(Some(receiver)),
        }
    }
}

impl<D: Directory> Directory for DirectDirectory<D> {
    fn updates(&self) -> BoxStream<'static, RouteUpdate> {
        let store = self.inner.updates();
        let receiver = self
            .receiver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        let Some(events) = receiver else {
            // A second subscriber gets the store's updates alone.
            return store;
        };
        Merged {
            store,
            events,
            overrides: Overrides::default(),
        }
        .boxed()
    }

    fn wake(&self, key: &SandboxKey) -> BoxFuture<'static, Result<()>> {
        let started = self.direct.wake(key);
        let fallback = self.inner.wake(key);
        let events = self.events.clone();
        let key = key.clone();
        async move {
            match started.await {
                DirectStart::Started {
                    endpoint,
                    generation,
                    uid,
                    written,
                } => {
                    metrics::counter!(m::DIRECT_WAKES_TOTAL, "result" => "started").increment(1);
                    let woken = Woken {
                        endpoint,
                        generation,
                        uid: uid.clone(),
                    };
                    if events.send(Event::Woken(key.clone(), woken)).await.is_err() {
                        return fallback.await;
                    }
                    if !written.await {
                        metrics::counter!(m::DIRECT_WAKES_TOTAL, "result" => "refused")
                            .increment(1);
                        let _ = events.send(Event::Refused(key, generation, uid)).await;
                    }
                    Ok(())
                }
                DirectStart::NotDirect => {
                    metrics::counter!(m::DIRECT_WAKES_TOTAL, "result" => "fallback").increment(1);
                    fallback.await
                }
            }
        }
        .boxed()
    }

    fn report_activity(
        &self,
        key: &SandboxKey,
        report: ActivityReport,
    ) -> BoxFuture<'static, Result<()>> {
        self.inner.report_activity(key, report)
    }
}

/// The store's updates and the direct wakes, merged through [`Overrides`] as the router polls
/// them: no task in between, so a woken endpoint reaches the routing table in the same poll
/// that receives it (a task and a channel here cost a cross-thread hand-off per wake).
struct Merged {
    store: BoxStream<'static, RouteUpdate>,
    events: mpsc::Receiver<Event>,
    overrides: Overrides,
}

impl Merged {
    fn event(&mut self, event: Event) -> Option<RouteUpdate> {
        match event {
            Event::Woken(key, woken) => self
                .overrides
                .woken(&key, woken)
                .map(|state| RouteUpdate::Set { key, state }),
            Event::Refused(key, generation, uid) => self
                .overrides
                .refused(&key, generation, &uid)
                .map(|state| RouteUpdate::Set { key, state }),
        }
    }
}

impl Stream for Merged {
    type Item = RouteUpdate;

    /// Ends when the store's stream ends. Direct wakes first: held connections wait for the
    /// woken endpoint, and the store's next update is taken on the next poll.
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<RouteUpdate>> {
        let this = &mut *self;
        // Bounded: every round takes one event off the bounded channel.
        while let Poll::Ready(Some(event)) = this.events.poll_recv(cx) {
            if let Some(update) = this.event(event) {
                return Poll::Ready(Some(update));
            }
        }
        match ready!(this.store.poll_next_unpin(cx)) {
            None => Poll::Ready(None),
            Some(RouteUpdate::Set { key, state }) => {
                let state = this.overrides.store(&key, state);
                Poll::Ready(Some(RouteUpdate::Set { key, state }))
            }
            Some(update) => Poll::Ready(Some(update)),
        }
    }
}

#[cfg(test)]
mod tests;
