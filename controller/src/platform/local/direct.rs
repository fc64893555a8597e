//! Direct wake: the local platform starts a suspended sandbox's workload at once, for a
//! wake-on-connect in the same process, before the store has recorded the wake.
//!
//! The standalone wake path through the store is: the proxy writes `operatingMode: Running`,
//! the driver reconciles and starts the workload, writes the status with the endpoint, and the
//! proxy dials. A direct wake lets the proxy ask the platform instead; the store write follows
//! behind (see `crate::mode::local::direct`). Three rules keep the two paths from fighting:
//!
//! - **One start.** A direct wake claims the sandbox ([`LocalPlatform::claim_direct_wake`])
//!   only when it has no workload and the reconciler is not starting one; the reconciler's
//!   create finds a claimed sandbox and leaves the start to the wake.
//! - **No reconcile in between.** While a claim is held (until the wake's store write is
//!   answered and the workload accepts connections), the driver does not reconcile the
//!   sandbox; the claim's end notifies it.
//! - **No stale stop.** A reconcile that read the sandbox suspended *before* the wake (at the
//!   woken generation or older) does not stop the woken workload: only a suspend written
//!   after the wake (a newer generation) does.

use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use rouse_shared::api::{Endpoint, OperatingMode, Sandbox};
use rouse_shared::store::ObjectKey;
use tokio::sync::watch;

use super::platform::{
    Entry, LocalPlatform, Woken, checkpoints, endpoint_ports, lock, running_name,
};
use super::supervisor::{WorkloadPhase, WorkloadStatus};
use super::sweep::{self, Claim};
use crate::sandbox;

/// Pause between two connects while waiting for a woken workload to listen: finer than the
/// proxy's dial backoff, so the wake is not late by a backoff step.
const ACCEPT_POLL: Duration = Duration::from_micros(100);
/// One connect attempt of that wait.
const ACCEPT_CONNECT: Duration = Duration::from_millis(50);

/// Why a sandbox is not woken directly (it is woken through the store instead).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotDirect {
    /// Its desired mode is not Suspended (already woken, or being resumed through the API).
    NotSuspended,
    /// It is being deleted.
    Deleting,
    /// Its `shutdownTime` passed.
    Expired,
    /// It starts from a snapshot (`spec.restoreFrom`).
    Fork,
    /// It suspends by checkpoint: its start is a restore.
    Checkpoint,
    /// Its pod spec cannot run here (the reconciler reports why).
    Invalid,
    /// It still has a workload (stopping), or one is being started.
    Busy,
    /// Its directories belong to a deleted sandbox of the same name (the reconciler cleans up).
    Stale,
    /// Starting the workload failed (the reconciler retries and reports why).
    Start,
}

impl NotDirect {
    /// A fixed label for metrics.
    pub fn metric_label(self) -> &'static str {
        match self {
            NotDirect::NotSuspended => "not_suspended",
            NotDirect::Deleting => "deleting",
            NotDirect::Expired => "expired",
            NotDirect::Fork => "fork",
            NotDirect::Checkpoint => "checkpoint",
            NotDirect::Invalid => "invalid",
            NotDirect::Busy => "busy",
            NotDirect::Stale => "stale",
            NotDirect::Start => "start",
        }
    }
}

/// A workload a direct wake started: where it is dialled, and its state.
#[derive(Debug)]
pub struct DirectStart {
    /// The endpoint, as the status will publish it.
    pub endpoint: Endpoint,
    /// The workload's state.
    pub status: watch::Receiver<WorkloadStatus>,
}

impl LocalPlatform {
    /// Claims `sandbox` for a direct wake if it can be woken so: suspended, not being
    /// deleted or expired, not a fork or a checkpointed sandbox, a pod spec that runs here, no
    /// workload and no start under way. Until [`LocalPlatform::end_direct_wake`], the driver
    /// leaves it alone and the reconciler's create leaves its start to the wake.
    pub fn claim_direct_wake(&self, sandbox: &Sandbox, now: Timestamp) -> Result<(), NotDirect> {
        if sandbox.metadata.deletion_timestamp.is_some() {
            return Err(NotDirect::Deleting);
        }
        if sandbox.spec.effective_operating_mode() != OperatingMode::Suspended {
            return Err(NotDirect::NotSuspended);
        }
        if sandbox
            .spec
            .shutdown_time
            .as_ref()
            .is_some_and(|t| t.0 <= now)
        {
            return Err(NotDirect::Expired);
        }
        if sandbox.spec.restore_from.is_some() {
            return Err(NotDirect::Fork);
        }
        if checkpoints(sandbox) {
            return Err(NotDirect::Checkpoint);
        }
        let Some(uid) = sandbox.metadata.uid.clone() else {
            return Err(NotDirect::Invalid);
        };
        let key = ObjectKey::of(sandbox);
        if sweep::claim(&self.inner.layout, &key, &uid) == Claim::Stale {
            return Err(NotDirect::Stale);
        }
        let mut state = lock(&self.inner.state);
        // A stopped entry does not count; the start replaces it.
        if running_name(&state, &key).is_some()
            || state.starting.contains(&key)
            || state.direct.contains_key(&key)
        {
            return Err(NotDirect::Busy);
        }
        let generation = sandbox.metadata.generation.unwrap_or(0);
        state.direct.insert(key, Woken { uid, generation });
        Ok(())
    }

    /// Starts the workload of a sandbox claimed by [`LocalPlatform::claim_direct_wake`]. On an
    /// error the claim stays: end it once the wake's store write is answered.
    pub async fn start_direct(&self, sandbox: &Sandbox) -> Result<DirectStart, NotDirect> {
        let key = ObjectKey::of(sandbox);
        let woken = lock(&self.inner.state).direct.get(&key).cloned();
        let Some(woken) = woken else {
            return Err(NotDirect::Busy);
        };
        let spec = sandbox::workload_spec(sandbox);
        let (launch, runsc) = match self.launch_for(sandbox, &spec).await {
            Ok(launch) => launch,
            Err(error) => {
                tracing::debug!(sandbox.key = %key, %error, "no direct wake: the launch failed");
                return Err(NotDirect::Start);
            }
        };
        let ports = launch.ports.clone();
        let workload = match self.start_workload(&key, launch, runsc.as_ref()) {
            Ok(workload) => workload,
            Err(error) => {
                tracing::warn!(sandbox.key = %key, %error, "a direct wake could not start the workload");
                return Err(NotDirect::Start);
            }
        };
        let status = workload.subscribe();
        let current = status.borrow().clone();
        let endpoint = Endpoint {
            address: current.ports.host.to_string(),
            ports: endpoint_ports(&current, &ports),
        };
        tracing::info!(sandbox.key = %key, "workload started by a direct wake");
        lock(&self.inner.state)
            .workloads
            .insert(key, Entry::started(&spec, workload, ports, Some(woken)));
        Ok(DirectStart { endpoint, status })
    }

    /// Whether a direct wake of `key` holds its claim (its store write is not answered yet).
    pub fn direct_wake_pending(&self, key: &ObjectKey) -> bool {
        lock(&self.inner.state).direct.contains_key(key)
    }

    /// Ends the direct wake of `key` once its store write is answered and tells the driver.
    /// `kept` false (the store refused the wake: the sandbox is gone or was replaced) stops
    /// the workload it started.
    pub fn end_direct_wake(&self, key: &ObjectKey, kept: bool) {
        let ours = {
            let mut state = lock(&self.inner.state);
            let woken = state.direct.remove(key);
            woken.is_some_and(|woken| {
                state
                    .workloads
                    .get(key)
                    .is_some_and(|e| e.woken.as_ref() == Some(&woken))
            })
        };
        if !kept && ours {
            tracing::info!(sandbox.key = %key, "stopping a directly woken workload: the store refused the wake");
            self.stop_workload(key);
        }
        (self.notifier())(key);
    }

    /// Whether `key`'s workload was started by a direct wake that `sandbox` (a view read by a
    /// reconcile) predates.
    pub(super) fn woken_after(&self, key: &ObjectKey, sandbox: &Sandbox) -> bool {
        lock(&self.inner.state)
            .workloads
            .get(key)
            .and_then(|e| e.woken.as_ref())
            .is_some_and(|w| w.predates(sandbox))
    }
}

/// Waits until the workload accepts TCP connections at `addr`, it stops running, or `window`
/// passed; true unless it stopped. Connects every [`ACCEPT_POLL`] on the blocking pool: a
/// freshly started server listens within milliseconds, and the proxy's own retry (1 ms
/// doubling) would overshoot by its last step.
pub async fn accepting(
    addr: SocketAddr,
    status: watch::Receiver<WorkloadStatus>,
    window: Duration,
) -> bool {
    let probe = tokio::task::spawn_blocking(move || {
        let until = Instant::now() + window;
        loop {
            if TcpStream::connect_timeout(&addr, ACCEPT_CONNECT).is_ok() {
                return true;
            }
            let phase = status.borrow().phase;
            if matches!(
                phase,
                WorkloadPhase::Failed | WorkloadPhase::Succeeded | WorkloadPhase::Stopped
            ) {
                return false;
            }
            if Instant::now() >= until {
                // Slow to listen: the proxy's dial retry takes over.
                return true;
            }
            std::thread::sleep(ACCEPT_POLL);
        }
    });
    probe.await.unwrap_or(true)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, TcpListener};

    use super::*;
    use crate::platform::local::PortMap;

    fn status(phase: WorkloadPhase) -> WorkloadStatus {
        WorkloadStatus {
            phase,
            ready: false,
            ports: PortMap {
                host: Ipv4Addr::LOCALHOST,
                default_port: 1,
                mapped: Vec::new(),
            },
            restarts: 0,
            pgid: None,
            message: None,
            back_off: None,
        }
    }

    #[tokio::test]
    async fn accepting_waits_for_a_listener_and_gives_up_on_an_exit() {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().expect("address");
        let (_tx, rx) = watch::channel(status(WorkloadPhase::Running));
        assert!(
            accepting(addr, rx, Duration::from_secs(5)).await,
            "listening"
        );
        drop(listener);
        let (_tx, rx) = watch::channel(status(WorkloadPhase::Failed));
        assert!(
            !accepting(addr, rx, Duration::from_secs(5)).await,
            "the workload failed"
        );
        let (_tx, rx) = watch::channel(status(WorkloadPhase::Running));
        assert!(
            accepting(addr, rx, Duration::from_millis(20)).await,
            "still starting after the window: handed over anyway"
        );
    }
}
