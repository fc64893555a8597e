//! [`DirectWaker`]: the wake-on-connect of `rouse up` without the store on its critical path.
//!
//! The proxy's wake through the store waits for two store writes and two watch hops: its own
//! `operatingMode: Running`, then the reconciler's status with the endpoint. A direct wake
//! instead reads the sandbox, claims it on the local platform, queues the same
//! `operatingMode: Running` write (with the sandbox's uid as a precondition), starts the
//! workload, waits until it accepts connections and hands the endpoint to the proxy. The
//! store write is answered behind it; its answer ends the claim (never before the workload
//! accepts connections or the accept window passed, so the driver's status write does not
//! publish the endpoint of a workload still starting), and the driver reconciles the
//! sandbox from the written state, finding the workload already running (see
//! `crate::platform::local::direct` for the rules that keep the two paths from fighting).
//!
//! The store stays the source of truth: the write is queued before the workload starts, so a
//! suspend or delete sent after the wake was served (or any write queued after it) commits
//! after it and wins; a wake the store refuses (the sandbox was deleted or replaced) stops the
//! workload again. A sandbox the platform cannot start directly (a checkpoint restore, a fork,
//! one still stopping) is woken through the store as before.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rouse_shared::api::{Endpoint, OperatingMode, Sandbox};
use rouse_shared::store::{ObjectKey, Patch, Store, StoreError};
use serde_json::json;
use tokio::sync::oneshot;
use tokio_util::task::TaskTracker;

use crate::platform::local::{LocalPlatform, accepting};
use crate::store::EmbeddedStore;

/// How long a direct wake waits for the started workload to accept connections before it
/// hands the endpoint over anyway (the proxy's dial retry covers slower starts).
const ACCEPT_WINDOW: Duration = Duration::from_millis(250);

/// What a direct wake did.
#[derive(Debug)]
pub enum DirectWake {
    /// The workload runs and accepts connections (or is still starting after
    /// [`ACCEPT_WINDOW`]): dial `endpoint`.
    Started {
        /// Where to dial it.
        endpoint: Endpoint,
        /// The sandbox's `metadata.generation` as read suspended.
        generation: i64,
        /// Its `metadata.uid`.
        uid: String,
        /// Resolves once the store answered the wake's write: true when the sandbox was woken
        /// in the store too, false when the store refused (the workload was stopped again).
        written: oneshot::Receiver<bool>,
    },
    /// Not woken directly (the label says why); wake it through the store.
    NotDirect(&'static str),
}

/// Wakes sandboxes of an embedded store on the local platform directly; cheap to clone.
#[derive(Debug, Clone)]
pub struct DirectWaker {
    store: EmbeddedStore,
    platform: LocalPlatform,
    tasks: TaskTracker,
}

impl DirectWaker {
    /// A waker over the store and platform `rouse up` runs its driver on.
    pub fn new(store: EmbeddedStore, platform: LocalPlatform) -> Self {
        Self {
            store,
            platform,
            tasks: TaskTracker::new(),
        }
    }

    /// Wakes the suspended sandbox `key` directly if the platform can; see the module
    /// documentation.
    pub async fn wake(&self, key: &ObjectKey) -> DirectWake {
        let began = Instant::now();
        let outcome = self.try_wake(key, began).await;
        let result = match &outcome {
            DirectWake::Started { .. } => "started",
            DirectWake::NotDirect(why) => why,
        };
        metrics::counter!("rouse_controller_direct_wakes_total", "result" => result).increment(1);
        if matches!(outcome, DirectWake::Started { .. }) {
            phase("total", began);
        }
        outcome
    }

    async fn try_wake(&self, key: &ObjectKey, began: Instant) -> DirectWake {
        let sandbox: Sandbox = match self.store.get_now(key) {
            Ok(sandbox) => sandbox,
            Err(error) if error.is_not_found() => return DirectWake::NotDirect("not_found"),
            Err(error) => {
                tracing::warn!(sandbox.key = %key, %error, "no direct wake: reading the sandbox failed");
                return DirectWake::NotDirect("read");
            }
        };
        phase("read", began);
        let claimed = Instant::now();
        if let Err(why) = self.platform.claim_direct_wake(&sandbox, Timestamp::now()) {
            return DirectWake::NotDirect(why.metric_label());
        }
        let uid = sandbox.metadata.uid.clone().unwrap_or_default();
        let generation = sandbox.metadata.generation.unwrap_or(0);
        // The uid makes the write a precondition: a sandbox deleted and created again under
        // the same name is not woken by a wake meant for the old one.
        let patch = Patch::merge(json!({
            "metadata": {"uid": uid},
            "spec": {"operatingMode": "Running"},
        }));
        let queued = match patch {
            Some(patch) => self.store.queue_patch::<Sandbox>(key, &patch).await,
            None => Err(StoreError::Unavailable {
                message: "the wake patch is not an object".to_owned(),
                source: None,
            }),
        };
        let answer = match queued {
            Ok(answer) => answer,
            Err(error) => {
                tracing::warn!(sandbox.key = %key, %error, "no direct wake: the store did not take the write");
                self.platform.end_direct_wake(key, true);
                return DirectWake::NotDirect("store");
            }
        };
        // From here the write's answer ends the claim, whatever happens to the start, but
        // never before the start is over: ended earlier, an accepted wake would let the driver
        // start a second workload, a refused one would miss the workload still being started.
        // The start is over once the workload accepts connections (or the accept window
        // passed): ended at the spawn, the driver's status write (fsync ~2 ms) would publish
        // the endpoint while the workload still starts, the proxy would dial it too early, be
        // refused and land in its dial backoff (1 ms doubling) instead of dialling when this
        // wake hands the endpoint over. `started` resolves when the start ends, or when this
        // wake is dropped mid-way.
        let (tx, written) = oneshot::channel();
        let (start_over, started) = oneshot::channel::<()>();
        let finisher = Finisher {
            store: self.store.clone(),
            platform: self.platform.clone(),
            key: key.clone(),
            uid: uid.clone(),
        };
        self.tasks.spawn(async move {
            let queued = Instant::now();
            let answer = answer.await;
            phase("write", queued);
            let _ = started.await;
            let kept = finisher.finish(answer).await;
            let _ = tx.send(kept);
        });
        let start = self.platform.start_direct(&sandbox).await;
        let start = match start {
            Ok(start) => start,
            Err(why) => return DirectWake::NotDirect(why.metric_label()),
        };
        phase("start", claimed);
        let listening = Instant::now();
        let port = start.status.borrow().ports.default_port;
        let addr = start
            .endpoint
            .address
            .parse::<IpAddr>()
            .map(|ip| SocketAddr::new(ip, port));
        if let Ok(addr) = addr
            && !accepting(addr, start.status, ACCEPT_WINDOW).await
        {
            return DirectWake::NotDirect("exited");
        }
        phase("accept", listening);
        // The start is over (an early return above drops it too).
        drop(start_over);
        DirectWake::Started {
            endpoint: start.endpoint,
            generation,
            uid,
            written,
        }
    }

    /// Waits for the store writes of direct wakes still under way (at shutdown; each is
    /// bounded by the store's write timeout).
    pub async fn close(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }
}

/// Ends a direct wake once its write is answered.
struct Finisher {
    store: EmbeddedStore,
    platform: LocalPlatform,
    key: ObjectKey,
    uid: String,
}

impl Finisher {
    /// Ends the claim; true when the store has the sandbox woken (the workload stays).
    async fn finish(self, answer: Result<Sandbox, StoreError>) -> bool {
        let kept = match answer {
            Ok(_) => true,
            Err(error) if error.is_not_found() || matches!(error, StoreError::Invalid { .. }) => {
                tracing::info!(sandbox.key = %self.key, %error, "the store refused a direct wake: the sandbox is gone or was replaced");
                false
            }
            Err(error) => {
                // Unknown whether it was written: what the store holds now decides.
                tracing::warn!(sandbox.key = %self.key, %error, "the write of a direct wake failed; reading the sandbox");
                match Store::<Sandbox>::get(&self.store, &self.key).await {
                    Ok(now) => {
                        now.metadata.uid.as_deref() == Some(self.uid.as_str())
                            && now.spec.effective_operating_mode() == OperatingMode::Running
                    }
                    Err(_) => false,
                }
            }
        };
        self.platform.end_direct_wake(&self.key, kept);
        kept
    }
}

/// Records how long a phase of a direct wake took.
fn phase(name: &'static str, since: Instant) {
    metrics::histogram!("rouse_controller_direct_wake_duration_seconds", "phase" => name)
        .record(since.elapsed().as_secs_f64());
}

#[cfg(test)]
mod tests;
