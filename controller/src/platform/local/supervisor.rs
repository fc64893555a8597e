//! One task per workload: starts the run, probes readiness, restarts by the pod's
//! `restartPolicy` with a bounded backoff, and stops it on request with SIGTERM and the
//! grace period. Its state is published on a `watch` channel owned by that task alone, so
//! nothing is locked across an await and sandboxes never wait on each other.

use std::path::PathBuf;
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rouse_shared::store::ObjectKey;
use tokio::process::Child;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::backoff::{self, BACKOFF_RESET, BACKOFF_START, BackOff};
use super::cgroup::Cgroups;
use super::checkpoint;
use super::contain::Boundary;
use super::error::Result;
use super::gvisor::Runsc;
use super::launch::{Launch, describe, log_line, signal_group, terminate_group};
use super::layout::{Layout, ensure_dir};
use super::live::{self, LiveSnapshot, Paused, SnapshotRequest};
use super::netns::Netns;
use super::pidfile;
use super::ports::{PortLease, PortMap};
use super::process;
use super::spec::{LaunchSpec, RuntimeKind};
use crate::snapshot::Quiesce;

/// How long a live snapshot may take, from the request to the restored workload's readiness.
const LIVE_SNAPSHOT_DEADLINE: Duration = Duration::from_secs(120);

/// Called with the sandbox's key whenever its workload's state changes.
pub type Notify = Arc<dyn Fn(&ObjectKey) + Send + Sync>;

/// Where a workload is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkloadPhase {
    /// Started, not yet running (or waiting to be restarted after an exit).
    Pending,
    /// The process runs.
    Running,
    /// It exited successfully and its restart policy does not restart it.
    Succeeded,
    /// It exited with a failure (or could not start) and is not restarted.
    Failed,
    /// It was stopped on request.
    Stopped,
}

/// The observable state of one workload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadStatus {
    /// The phase.
    pub phase: WorkloadPhase,
    /// Whether readiness passed (and the process still runs).
    pub ready: bool,
    /// Where it listens.
    pub ports: PortMap,
    /// How often it was restarted.
    pub restarts: u32,
    /// The process group id of the current run.
    pub pgid: Option<u32>,
    /// Why it is not running or ready, for conditions and logs.
    pub message: Option<String>,
    /// While it waits to be started again after an exit: how long and until when.
    pub back_off: Option<BackOff>,
}

/// A running workload: its state and the handle that stops it.
#[derive(Debug)]
pub struct Workload {
    status: watch::Receiver<WorkloadStatus>,
    stop: CancellationToken,
    /// Set before `stop` when the stop is a checkpoint suspend.
    checkpoint: Arc<AtomicBool>,
    /// Live snapshot requests to the supervisor.
    snapshots: mpsc::Sender<SnapshotRequest>,
    /// Whether the workload can be checkpointed (gVisor).
    checkpointable: bool,
    task: JoinHandle<()>,
}

/// Asks a running workload's supervisor for live memory snapshots.
#[derive(Debug, Clone)]
pub struct LiveSnapshots {
    requests: mpsc::Sender<SnapshotRequest>,
}

impl LiveSnapshots {
    /// Takes a memory snapshot of the running workload into `dir` (see [`super::live`]):
    /// answers once the workload, restored from it, is ready again.
    pub async fn take(&self, dir: PathBuf) -> std::result::Result<LiveSnapshot, String> {
        let (reply, answer) = oneshot::channel();
        self.requests
            .send(SnapshotRequest { dir, reply })
            .await
            .map_err(|_| "the workload stopped".to_owned())?;
        match tokio::time::timeout(LIVE_SNAPSHOT_DEADLINE, answer).await {
            Ok(Ok(result)) => result,
            Ok(Err(_)) => Err("the workload stopped before the snapshot was taken".to_owned()),
            Err(_) => Err(format!(
                "no snapshot within {}s",
                LIVE_SNAPSHOT_DEADLINE.as_secs()
            )),
        }
    }
}

/// What runs a workload's launches.
#[derive(Debug, Clone)]
enum Runner {
    Process,
    Gvisor(Runsc),
}

impl Runner {
    fn prepare(
        &self,
        layout: &Layout,
        key: &ObjectKey,
        spec: &LaunchSpec,
        ports: &PortMap,
    ) -> Result<Launch> {
        match self {
            Runner::Process => process::prepare(layout, key, spec, ports),
            Runner::Gvisor(runsc) => runsc.prepare(layout, key, spec, ports),
        }
    }
}

impl Workload {
    /// Prepares the volumes, ports and command line, then starts the supervisor task. Errors
    /// are those of the preparation (a bad spec was rejected earlier by
    /// [`LaunchSpec::from_sandbox`]); run failures show in the status instead.
    pub fn start(
        layout: &Layout,
        runsc: Option<&Runsc>,
        key: ObjectKey,
        spec: LaunchSpec,
        notify: Notify,
    ) -> Result<Self> {
        Self::start_with(layout, runsc, None, key, spec, notify, None)
    }

    /// [`Workload::start`] in a cgroup of its own under `cgroups` (see [`super::contain`]),
    /// with the data plane's quiesce hook, which a checkpoint suspend calls before saving the
    /// sandbox.
    pub fn start_with(
        layout: &Layout,
        runsc: Option<&Runsc>,
        cgroups: Option<&Cgroups>,
        key: ObjectKey,
        spec: LaunchSpec,
        notify: Notify,
        quiesce: Option<Arc<dyn Quiesce>>,
    ) -> Result<Self> {
        for volume in &spec.volumes {
            ensure_dir(&layout.volume_dir(&key, &volume.name))?;
        }
        let (mut ports, mut lease) = PortMap::allocate(&spec.ports)?;
        let runner = match spec.runtime {
            RuntimeKind::Process => Runner::Process,
            RuntimeKind::Gvisor => {
                let runsc = match runsc {
                    Some(runsc) => runsc.clone(),
                    None => Runsc::locate(
                        std::path::Path::new("runsc"),
                        layout,
                        &super::gvisor::GvisorConfig::default(),
                    )?,
                };
                // Its own network namespace, dialled at its address on its container ports,
                // as a pod is.
                let netns = Netns::ensure(layout, &key)?;
                ports = PortMap::own(netns.sandbox_ip(), &spec.ports);
                lease = PortLease::none();
                Runner::Gvisor(runsc.for_sandbox(netns.path()))
            }
        };
        let launch = runner.prepare(layout, &key, &spec, &ports)?;
        let checkpointable = matches!(&runner, Runner::Gvisor(_));
        let (snapshots, requests) = mpsc::channel(1);
        let (status_tx, status) = watch::channel(WorkloadStatus {
            phase: WorkloadPhase::Pending,
            ready: false,
            ports: ports.clone(),
            restarts: 0,
            pgid: None,
            message: None,
            back_off: None,
        });
        let stop = CancellationToken::new();
        let checkpoint = Arc::new(AtomicBool::new(false));
        let span =
            tracing::info_span!("workload", sandbox.key = %key, runtime = spec.runtime.as_str());
        let boundary = Boundary::new(layout.data(), &key, cgroups);
        let supervisor = Supervisor {
            layout: layout.clone(),
            boundary,
            lease,
            log: layout.log_file(&key),
            pid_file: layout.pid_file(&key),
            key,
            spec,
            ports,
            launch,
            runner,
            status: status_tx,
            stop: stop.clone(),
            checkpoint: Arc::clone(&checkpoint),
            quiesce,
            notify,
            requests: tokio::sync::Mutex::new(requests),
            paused: Mutex::new(None),
        };
        let task = tokio::spawn(supervisor.run().instrument(span));
        Ok(Self {
            status,
            stop,
            checkpoint,
            snapshots,
            checkpointable,
            task,
        })
    }

    /// The handle for live memory snapshots, if this workload can be checkpointed.
    pub fn live_snapshots(&self) -> Option<LiveSnapshots> {
        self.checkpointable.then(|| LiveSnapshots {
            requests: self.snapshots.clone(),
        })
    }

    /// The current state.
    pub fn status(&self) -> WorkloadStatus {
        self.status.borrow().clone()
    }

    /// A receiver of state changes.
    pub fn subscribe(&self) -> watch::Receiver<WorkloadStatus> {
        self.status.clone()
    }

    /// Starts stopping the workload (SIGTERM, SIGKILL after the grace period) without waiting;
    /// the status turns [`WorkloadPhase::Stopped`] when it is gone.
    pub fn begin_stop(&self) {
        self.stop.cancel();
    }

    /// Starts stopping the workload by checkpoint where its runtime can (a gVisor sandbox in
    /// its own network namespace), else the plain way; either way the outcome is recorded for
    /// the `Checkpointed` condition.
    pub fn begin_checkpoint(&self) {
        self.checkpoint.store(true, Ordering::Release);
        self.stop.cancel();
    }

    /// Stops the workload and waits until it is gone.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Err(error) = (&mut self.task).await {
            tracing::error!(%error, "workload supervisor task failed");
        }
    }
}

impl Drop for Workload {
    fn drop(&mut self) {
        // A workload dropped without `stop` is still stopped, in the background.
        self.stop.cancel();
    }
}

struct Supervisor {
    layout: Layout,
    /// What keeps the workload's processes together for its stops.
    boundary: Boundary,
    /// Keeps `ports` reserved while this supervisor lives.
    lease: PortLease,
    key: ObjectKey,
    spec: LaunchSpec,
    ports: PortMap,
    launch: Launch,
    runner: Runner,
    log: PathBuf,
    pid_file: PathBuf,
    status: watch::Sender<WorkloadStatus>,
    stop: CancellationToken,
    checkpoint: Arc<AtomicBool>,
    quiesce: Option<Arc<dyn Quiesce>>,
    notify: Notify,
    /// Live snapshot requests (locked by `run_once` only, one run at a time).
    requests: tokio::sync::Mutex<mpsc::Receiver<SnapshotRequest>>,
    /// A live snapshot waiting for the restored workload.
    paused: Mutex<Option<Paused>>,
}

/// How one run ended.
enum RunEnd {
    Exited {
        succeeded: bool,
        message: String,
    },
    Stopped,
    /// Saved by a live snapshot: start again at once (a restore).
    Snapshotted,
}

impl Supervisor {
    async fn run(mut self) {
        let runtime = self.spec.runtime.as_str();
        metrics::gauge!("rouse_controller_workloads", "runtime" => runtime).increment(1.0);
        let mut backoff = BACKOFF_START;
        loop {
            let started = Instant::now();
            let (succeeded, message) = match self.run_once().await {
                RunEnd::Stopped => break,
                RunEnd::Snapshotted if self.stop.is_cancelled() => {
                    // Stopped meanwhile: the image stays pending, the next start restores it.
                    self.finish_paused(false);
                    break;
                }
                RunEnd::Snapshotted => continue,
                RunEnd::Exited { succeeded, message } => (succeeded, message),
            };
            let result = if succeeded { "succeeded" } else { "failed" };
            metrics::counter!("rouse_controller_workload_exits_total", "runtime" => runtime, "result" => result)
                .increment(1);
            if !self.spec.restart_policy.restarts(succeeded) {
                tracing::info!(workload.exit = %message, "workload finished");
                let phase = if succeeded {
                    WorkloadPhase::Succeeded
                } else {
                    WorkloadPhase::Failed
                };
                self.publish(|s| {
                    s.phase = phase;
                    s.message = Some(message);
                });
                self.stop.cancelled().await;
                break;
            }
            if started.elapsed() >= BACKOFF_RESET {
                backoff = BACKOFF_START;
            }
            // Only loopback ports can be taken by other programs.
            if !succeeded && self.ports.host.is_loopback() && !self.ports.all_free() {
                self.move_ports();
            }
            tracing::info!(workload.exit = %message, workload.backoff_ms = backoff.as_millis() as u64, "workload exited; restarting");
            let waiting = BackOff::starting_now(backoff, message.clone());
            self.publish(|s| {
                s.phase = WorkloadPhase::Pending;
                s.restarts = s.restarts.saturating_add(1);
                s.message = Some(format!("restarting after {message}"));
                s.back_off = Some(waiting);
            });
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.stop.cancelled() => break,
            }
            backoff = backoff::next(backoff);
        }
        if matches!(self.runner, Runner::Gvisor(_))
            && checkpoint::pending_image(&self.layout, &self.key).is_none()
        {
            // Nothing to restore into it: the next start makes a namespace again. (A pending
            // checkpoint keeps it: the restored network stack keeps its address.)
            Netns::remove(&self.layout, &self.key);
        }
        // The cgroup goes before the stop is published: a new workload of the same sandbox
        // may start as soon as this one is seen stopped.
        self.boundary.close().await;
        self.publish(|s| {
            s.phase = WorkloadPhase::Stopped;
            s.ready = false;
            s.pgid = None;
            s.back_off = None;
        });
        metrics::gauge!("rouse_controller_workloads", "runtime" => runtime).decrement(1.0);
    }

    /// Starts the workload once and waits for its exit or a stop.
    async fn run_once(&self) -> RunEnd {
        let mut launch = None;
        let preparing = Instant::now();
        if let Runner::Gvisor(runsc) = &self.runner {
            // A container of the same id may be left from a crash or an earlier run.
            runsc.delete_if_present(&self.key).await;
            // runsc took the address into gVisor's stack last time: put it back.
            if let Err(error) = Netns::ensure(&self.layout, &self.key) {
                let message = error.to_string();
                log_line(&self.log, &message);
                return RunEnd::Exited {
                    succeeded: false,
                    message,
                };
            }
            launch = checkpoint::pending_image(&self.layout, &self.key)
                .map(|image| runsc.launch(&self.layout, &self.key, Some(&image)));
        }
        let restoring = AtomicBool::new(launch.is_some());
        let launch = launch.as_ref().unwrap_or(&self.launch);
        metrics::counter!("rouse_controller_workload_starts_total", "runtime" => self.spec.runtime.as_str())
            .increment(1);
        let mut child = match self.boundary.spawn(launch, &self.log) {
            Ok(child) => child,
            Err(error) => {
                let message = format!("starting {}: {error}", launch.program.display());
                log_line(&self.log, &message);
                tracing::warn!(%error, "workload could not start");
                return RunEnd::Exited {
                    succeeded: false,
                    message,
                };
            }
        };
        let pgid = child.id();
        if let Some(pgid) = pgid {
            pidfile::write(&self.pid_file, pgid);
        }
        let verb = if restoring.load(Ordering::Acquire) {
            "restoring from checkpoint"
        } else {
            "started"
        };
        log_line(
            &self.log,
            &format!("{verb} pid {}", pgid.unwrap_or_default()),
        );
        // How long the runsc delete and the address re-add took before the spawn.
        let prepared_ms = u64::try_from(preparing.elapsed().as_millis()).unwrap_or(u64::MAX);
        tracing::info!(
            workload.pgid = pgid,
            workload.prepare_ms = prepared_ms,
            "workload started"
        );
        let spawned = Instant::now();
        self.publish(|s| {
            s.phase = WorkloadPhase::Running;
            s.ready = false;
            s.pgid = pgid;
            s.message = None;
            s.back_off = None;
        });
        let readiness = self.spec.readiness.run(&self.ports, |ready| {
            tracing::debug!(
                workload.ready = ready,
                workload.since_spawn_ms = spawned.elapsed().as_millis() as u64,
                "readiness changed"
            );
            if ready && restoring.swap(false, Ordering::AcqRel) {
                checkpoint::restored(&self.layout, &self.key);
            }
            self.publish(|s| s.ready = ready);
            if ready {
                self.finish_paused(true);
            }
        });
        tokio::pin!(readiness);
        let end = loop {
            tokio::select! {
                status = child.wait() => {
                    let status = status.ok();
                    self.after_exit(pgid).await;
                    let message = status.as_ref().map_or_else(|| "lost track of the process".to_owned(), describe);
                    if restoring.load(Ordering::Acquire) {
                        checkpoint::restore_failed(&self.layout, &self.key, &message);
                    }
                    self.finish_paused(false);
                    break RunEnd::Exited { succeeded: status.is_some_and(|s: ExitStatus| s.success()), message };
                }
                never = &mut readiness => match never {},
                () = self.stop.cancelled() => {
                    self.finish_paused(false);
                    let status = self.terminate(&mut child).await;
                    let message = status.as_ref().map_or_else(|| "stop did not finish".to_owned(), describe);
                    log_line(&self.log, &format!("stopped ({message})"));
                    break RunEnd::Stopped;
                }
                Some(request) = next_request(&self.requests) => {
                    match self.snapshot_live(&mut child, request).await {
                        Some(end) => break end,
                        None => continue,
                    }
                }
            }
        };
        // Whatever of the run is left (a detached descendant) goes with it, as in a pod.
        let left = self.boundary.clear().await;
        if left > 0 {
            tracing::info!(
                workload.leftovers = left,
                "killed processes the run left behind"
            );
            log_line(
                &self.log,
                &format!("killed {left} processes the run left behind"),
            );
        }
        pidfile::remove(&self.pid_file);
        if let RunEnd::Exited { message, .. } = &end {
            log_line(&self.log, &format!("exited with {message}"));
        }
        self.publish(|s| {
            s.ready = false;
            s.pgid = None;
        });
        end
    }

    /// Another program took one of the ports (the workload could not bind it): restarting on
    /// the same ports would fail forever, so the next run gets new ones.
    fn move_ports(&mut self) {
        let moved = PortMap::allocate(&self.spec.ports).and_then(|(mut ports, lease)| {
            ports.host = self.ports.host;
            let launch = self
                .runner
                .prepare(&self.layout, &self.key, &self.spec, &ports)?;
            Ok((ports, lease, launch))
        });
        match moved {
            Ok((ports, lease, launch)) => {
                tracing::warn!(
                    workload.old_port = self.ports.default_port,
                    workload.port = ports.default_port,
                    "a port of the workload was taken by another program; moving to new ports"
                );
                log_line(
                    &self.log,
                    &format!(
                        "port {} was taken by another program; moving to port {}",
                        self.ports.default_port, ports.default_port
                    ),
                );
                metrics::counter!("rouse_controller_workload_port_moves_total").increment(1);
                self.ports = ports.clone();
                self.lease = lease;
                self.launch = launch;
                self.publish(|s| s.ports = ports);
            }
            Err(error) => tracing::warn!(%error, "choosing new ports failed; keeping the old ones"),
        }
    }

    /// After the leader exited: nothing of the run may outlive it.
    async fn after_exit(&self, pgid: Option<u32>) {
        match &self.runner {
            Runner::Process => {
                if let Some(pgid) = pgid {
                    signal_group(pgid, nix::sys::signal::Signal::SIGKILL);
                }
            }
            Runner::Gvisor(runsc) => runsc.delete(&self.key).await,
        }
    }

    async fn terminate(&self, child: &mut Child) -> Option<ExitStatus> {
        if self.checkpoint.load(Ordering::Acquire) {
            match &self.runner {
                Runner::Gvisor(runsc) => {
                    if let Ok(status) = checkpoint::suspend(
                        runsc,
                        &self.layout,
                        &self.key,
                        self.quiesce.as_ref(),
                        child,
                    )
                    .await
                    {
                        return status;
                    }
                }
                Runner::Process => checkpoint::unsupported(
                    &self.layout,
                    &self.key,
                    "the process runtime cannot keep memory",
                ),
            }
        }
        match &self.runner {
            Runner::Process => terminate_group(child, self.spec.grace).await,
            Runner::Gvisor(runsc) => runsc.terminate(&self.key, child, self.spec.grace).await,
        }
    }

    /// Takes a live snapshot (see [`live`]); `None` when this workload cannot be checkpointed
    /// (the request is refused and the run goes on).
    async fn snapshot_live(&self, child: &mut Child, request: SnapshotRequest) -> Option<RunEnd> {
        let runsc = match &self.runner {
            Runner::Gvisor(runsc) => runsc,
            Runner::Process => {
                let _ = request.reply.send(Err(
                    "the workload cannot be checkpointed (only gVisor sandboxes can)".to_owned(),
                ));
                return None;
            }
        };
        let volumes: Vec<String> = self.spec.volumes.iter().map(|v| v.name.clone()).collect();
        log_line(&self.log, "checkpointing for a snapshot");
        match live::take(
            runsc,
            &self.layout,
            &self.key,
            &volumes,
            self.quiesce.as_ref(),
            child,
            request,
        )
        .await
        {
            Ok(paused) => {
                *lock(&self.paused) = Some(paused);
                pidfile::remove(&self.pid_file);
                Some(RunEnd::Snapshotted)
            }
            Err(message) => {
                // A failed checkpoint may have killed the sandbox: make sure it is gone, and
                // let the restart policy start it again.
                let _ = runsc.terminate(&self.key, child, self.spec.grace).await;
                Some(RunEnd::Exited {
                    succeeded: false,
                    message,
                })
            }
        }
    }

    /// Ends a live snapshot waiting for this run, if any.
    fn finish_paused(&self, ready: bool) {
        if let Some(paused) = lock(&self.paused).take() {
            paused.finish(ready);
        }
    }

    fn publish(&self, change: impl FnOnce(&mut WorkloadStatus)) {
        self.status.send_modify(change);
        (self.notify)(&self.key);
    }
}

/// The next live snapshot request; `None` once every sender is gone (which disables the
/// branch that waits for it).
async fn next_request(
    requests: &tokio::sync::Mutex<mpsc::Receiver<SnapshotRequest>>,
) -> Option<SnapshotRequest> {
    requests.lock().await.recv().await
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data that is still consistent.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
