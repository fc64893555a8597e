//! [`LocalPlatform`]: the controller's [`Platform`] port on one machine. Workloads are
//! supervised processes (see [`super::Workload`]), volumes are directories, and a sandbox's
//! headless Service is a record only (there is no cluster DNS; the proxy dials the endpoint).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use rouse_shared::api::{EndpointPort, MemorySharing, OperatingMode, Sandbox, SuspensionStrategy};
use rouse_shared::store::ObjectKey;
use tokio::sync::mpsc;

use super::activity::ActivityView;
use super::cgroup::Cgroups;
use super::error::Error;
use super::gvisor::{GvisorConfig, Runsc};
use super::ksm::{Ksm, KsmConfig};
use super::layout::{Layout, ensure_dir};
use super::netns::Netns;
use super::pidfile;
use super::sharing;
use super::spec::{LaunchSpec, PortSpec};
use super::supervisor::{LiveSnapshots, Notify, Workload, WorkloadPhase, WorkloadStatus};
use super::sweep::{self, Claim};
use crate::platform::{Platform, PlatformError, Result};
use crate::sandbox::{self, Action, Observed, ObservedService, ObservedVolume};
use crate::snapshot::{Capabilities, CheckpointOutcome, Quiesce, Snapshotter};

/// How many change notifications may wait for the driver; past that they are dropped and
/// counted, and the driver's periodic resync catches up.
pub const CHANGES_CAPACITY: usize = 1024;
/// The address every local workload listens on.
pub const LOOPBACK: &str = "127.0.0.1";
/// The node name local workloads report.
pub const NODE_NAME: &str = "localhost";

/// Settings of the local platform.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    /// The standalone data directory (volumes, logs, scratch and runtime state live under it).
    pub data_dir: PathBuf,
    /// The `runsc` binary: a path, or a name searched on `PATH`. Default `runsc`.
    pub runsc: PathBuf,
    /// How the gvisor runtime runs sandboxes (platform, restore options).
    pub gvisor: GvisorConfig,
    /// The DNS suffix in `status.serviceFQDN`. Default `cluster.local` (nothing resolves it
    /// in standalone mode).
    pub cluster_domain: String,
    /// How KSM is driven for sandboxes with `spec.memorySharing: Merge`.
    pub ksm: KsmConfig,
    /// The program that marks a Merge workload mergeable and execs it (the `rouse` binary,
    /// run as `rouse __merge-exec -- ...`); `None` runs Merge workloads unmarked, with a
    /// `MemorySharing=False/NotMarked` condition. Default `None`.
    pub merge_exec: Option<PathBuf>,
    /// The program that moves a workload into its cgroup and execs it (the `rouse` binary, run
    /// as `rouse __cgroup-exec PROCS -- ...`); `None` moves each workload right after it
    /// started. Default `None`.
    pub cgroup_exec: Option<PathBuf>,
    /// Put each workload in a cgroup of its own where the host allows (see `super::cgroup`);
    /// false keeps to process groups and environment marks. Default true.
    pub cgroups: bool,
}

impl LocalConfig {
    /// Defaults for a data directory.
    pub fn new(data_dir: impl Into<PathBuf>) -> Self {
        Self {
            data_dir: data_dir.into(),
            runsc: PathBuf::from("runsc"),
            gvisor: GvisorConfig::default(),
            cluster_domain: "cluster.local".to_owned(),
            ksm: KsmConfig::default(),
            merge_exec: None,
            cgroup_exec: None,
            cgroups: true,
        }
    }
}

/// The local platform; cheap to clone (all clones share the same workloads).
#[derive(Clone)]
pub struct LocalPlatform {
    pub(super) inner: Arc<Inner>,
}

pub(super) struct Inner {
    config: LocalConfig,
    pub(super) layout: Layout,
    pub(super) state: Mutex<State>,
    changes_tx: mpsc::Sender<ObjectKey>,
    changes_rx: Mutex<Option<mpsc::Receiver<ObjectKey>>>,
    activity: OnceLock<Arc<dyn ActivityView>>,
    quiesce: OnceLock<Arc<dyn Quiesce>>,
    ksm: Ksm,
    /// The workloads' cgroups, where the host offers them.
    cgroups: Option<Cgroups>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        // The last clone is gone: the parent cgroup goes too once its workloads' cgroups did
        // (a workload still stopping keeps it; the next start reuses it).
        if let Some(cgroups) = &self.cgroups {
            cgroups.remove();
        }
    }
}

#[derive(Default)]
pub(super) struct State {
    pub(super) workloads: HashMap<ObjectKey, Entry>,
    services: HashMap<ObjectKey, String>,
    /// Sandboxes whose workload the reconciler is starting (outside the lock).
    pub(super) starting: HashSet<ObjectKey>,
    /// Sandboxes being woken directly whose store write is not answered yet (see
    /// [`super::direct`]): the driver leaves them alone meanwhile.
    pub(super) direct: HashMap<ObjectKey, Woken>,
}

/// The suspended sandbox a direct wake started a workload for: a `Suspended` view of it at
/// this generation or before is older than the wake.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Woken {
    /// `metadata.uid`.
    pub(super) uid: String,
    /// `metadata.generation` as read suspended.
    pub(super) generation: i64,
}

impl Woken {
    /// Whether `sandbox` is a view of the woken sandbox from before the wake (suspended, at
    /// the woken generation or older).
    pub(super) fn predates(&self, sandbox: &Sandbox) -> bool {
        sandbox.metadata.uid.as_deref() == Some(self.uid.as_str())
            && sandbox.metadata.generation.unwrap_or(0) <= self.generation
            && sandbox.spec.effective_operating_mode() == OperatingMode::Suspended
    }
}

/// A workload and what the platform knows about it beyond its supervisor.
pub(super) struct Entry {
    pub(super) name: String,
    pub(super) workload: Workload,
    pub(super) started: Timestamp,
    pub(super) stopping: bool,
    /// The declared ports, for their names.
    pub(super) ports: Vec<PortSpec>,
    /// The pod template hash it was started from.
    pub(super) template_hash: String,
    /// Set when a direct wake started it.
    pub(super) woken: Option<Woken>,
}

impl Entry {
    /// A workload started now from `spec`.
    pub(super) fn started(
        spec: &sandbox::WorkloadSpec,
        workload: Workload,
        ports: Vec<PortSpec>,
        woken: Option<Woken>,
    ) -> Entry {
        Entry {
            name: spec.name.clone(),
            workload,
            started: Timestamp::now(),
            stopping: false,
            ports,
            template_hash: spec.template_hash.clone(),
            woken,
        }
    }
}

impl std::fmt::Debug for LocalPlatform {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalPlatform")
            .field("config", &self.inner.config)
            .finish_non_exhaustive()
    }
}

impl LocalPlatform {
    /// A platform over `config.data_dir`. Process groups a crashed previous run left behind
    /// (recorded in pid files) are killed here, so create it only once this process owns the
    /// data directory (after opening the embedded store, whose file lock says so); the
    /// driver calls [`LocalPlatform::recover`] for leftover gVisor containers.
    pub fn new(config: LocalConfig) -> Result<Self, Error> {
        ensure_dir(&config.data_dir)?;
        // Absolute, so the owner mark of workloads names this directory however it was given.
        let data = std::fs::canonicalize(&config.data_dir)
            .map_err(|e| Error::data_dir(&config.data_dir, e))?;
        let layout = Layout::new(data);
        let killed =
            pidfile::kill_leftovers(&layout.pid_dir()) + pidfile::kill_marked(layout.data(), None);
        if killed > 0 {
            tracing::warn!(
                workloads = killed,
                "killed workloads left by a previous run"
            );
        }
        let cgroups = config
            .cgroups
            .then(|| Cgroups::open_or_fall_back(layout.data(), config.cgroup_exec.clone()))
            .flatten();
        let (changes_tx, changes_rx) = mpsc::channel(CHANGES_CAPACITY);
        Ok(Self {
            inner: Arc::new(Inner {
                cgroups,
                ksm: Ksm::new(config.ksm.clone()),
                config,
                layout,
                state: Mutex::new(State::default()),
                changes_tx,
                changes_rx: Mutex::new(Some(changes_rx)),
                activity: OnceLock::new(),
                quiesce: OnceLock::new(),
            }),
        })
    }

    /// Removes gVisor containers a previous run left under the runsc root (a no-op when runsc
    /// is not installed), and the network namespaces of sandboxes that neither run nor wait
    /// for a restore; returns how many containers there were.
    pub async fn recover(&self) -> usize {
        let removed = match Runsc::locate(
            &self.inner.config.runsc,
            &self.inner.layout,
            &self.inner.config.gvisor,
        ) {
            Ok(runsc) if self.inner.layout.runsc_root().exists() => runsc.delete_all().await,
            _ => 0,
        };
        let layout = &self.inner.layout;
        for key in Netns::recorded_keys(layout) {
            let busy = {
                let state = lock(&self.inner.state);
                running_name(&state, &key).is_some()
                    || state.starting.contains(&key)
                    || state.direct.contains_key(&key)
            };
            // A pending checkpoint restores into the same namespace and address.
            if !busy && super::checkpoint::pending_image(layout, &key).is_none() {
                Netns::remove(layout, &key);
            }
        }
        removed
    }

    /// Lets idle suspend consult the data plane's live view of each sandbox's traffic (see
    /// [`ActivityView`]); set once, later calls are ignored.
    pub fn set_activity_view(&self, view: Arc<dyn ActivityView>) {
        let _ = self.inner.activity.set(view);
    }

    /// Lets a checkpoint suspend quiesce the data plane's connections to the sandbox first
    /// (see [`Quiesce`]); set once, later calls are ignored.
    pub fn set_quiesce(&self, quiesce: Arc<dyn Quiesce>) {
        let _ = self.inner.quiesce.set(quiesce);
    }

    /// The paths under the data directory.
    pub fn layout(&self) -> &Layout {
        &self.inner.layout
    }

    /// The keys of sandboxes whose workload changed (exited, became ready or unready,
    /// stopped). There is one receiver; later calls return `None`.
    pub fn take_changes(&self) -> Option<mpsc::Receiver<ObjectKey>> {
        lock(&self.inner.changes_rx).take()
    }

    /// The sandboxes the platform holds a workload or Service record for.
    pub fn keys(&self) -> Vec<ObjectKey> {
        let state = lock(&self.inner.state);
        let mut keys: Vec<ObjectKey> = state.workloads.keys().cloned().collect();
        keys.extend(
            state
                .services
                .keys()
                .filter(|k| !state.workloads.contains_key(*k))
                .cloned(),
        );
        keys
    }

    /// The state of a sandbox's workload, if it has one.
    pub fn workload_status(&self, key: &ObjectKey) -> Option<WorkloadStatus> {
        lock(&self.inner.state)
            .workloads
            .get(key)
            .map(|e| e.workload.status())
    }

    /// A sandbox's workload now: its status, whether it is being stopped, and the handle
    /// for live memory snapshots where it can take them.
    pub(super) fn current(
        &self,
        key: &ObjectKey,
    ) -> Option<(WorkloadStatus, bool, Option<LiveSnapshots>)> {
        lock(&self.inner.state)
            .workloads
            .get(key)
            .map(|e| (e.workload.status(), e.stopping, e.workload.live_snapshots()))
    }

    /// Forgets a deleted sandbox: stops its workload, drops its Service record and deletes its
    /// volume and scratch directories (as Kubernetes' garbage collector deletes the owned
    /// PVCs). The log file stays for `rouse logs`.
    pub async fn remove(&self, key: &ObjectKey) {
        let workload = {
            let mut state = lock(&self.inner.state);
            state.services.remove(key);
            state.workloads.remove(key)
        };
        if let Some(entry) = workload {
            entry.workload.stop().await;
        }
        sweep::remove_dirs(&self.inner.layout, key);
    }

    /// Removes what sandboxes missing from `existing` left: their workloads and directories
    /// (see [`super::sweep`]). The driver calls it on its first list, before any reconcile;
    /// returns how many sandbox names were swept.
    pub async fn sweep(&self, existing: &std::collections::HashSet<ObjectKey>) -> usize {
        let stale = sweep::stale_keys(&self.inner.layout, existing);
        for key in &stale {
            tracing::info!(sandbox.key = %key, "removing the directories of a sandbox that no longer exists");
            self.remove(key).await;
        }
        stale.len()
    }

    /// The directories under a sandbox's name belonged to a deleted sandbox of that name: its
    /// workload goes first, then its data, so the new sandbox never sees it.
    fn reclaim(&self, key: &ObjectKey) {
        let running = lock(&self.inner.state)
            .workloads
            .get(key)
            .is_some_and(|e| e.workload.status().phase != WorkloadPhase::Stopped);
        if running {
            // Wiped on a later pass, once the old workload is gone (its stop notifies).
            self.stop_workload(key);
            return;
        }
        tracing::warn!(sandbox.key = %key, "removing the directories a deleted sandbox of the same name left");
        sweep::remove_dirs(&self.inner.layout, key);
    }

    /// Stops every workload (SIGTERM, the grace period, SIGKILL), all at once, and waits.
    pub async fn shutdown(&self) {
        let entries: Vec<Entry> = {
            let mut state = lock(&self.inner.state);
            state.workloads.drain().map(|(_, e)| e).collect()
        };
        tracing::info!(workloads = entries.len(), "stopping all workloads");
        futures::future::join_all(entries.into_iter().map(|e| e.workload.stop())).await;
        if let Some(cgroups) = &self.inner.cgroups {
            cgroups.remove();
        }
    }

    pub(super) fn notifier(&self) -> Notify {
        let tx = self.inner.changes_tx.clone();
        Arc::new(move |key: &ObjectKey| {
            if let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(key.clone()) {
                metrics::counter!("rouse_controller_local_changes_dropped_total").increment(1);
            }
        })
    }

    fn observe_sandbox(&self, sandbox: &Sandbox) -> Observed {
        let key = ObjectKey::of(sandbox);
        if let Some(uid) = sandbox.metadata.uid.as_deref()
            && sweep::claim(&self.inner.layout, &key, uid) == Claim::Stale
        {
            self.reclaim(&key);
        }
        let mut state = lock(&self.inner.state);
        // A supervisor that finished stopping is gone: drop its entry now.
        if state
            .workloads
            .get(&key)
            .is_some_and(|e| e.workload.status().phase == WorkloadPhase::Stopped)
        {
            state.workloads.remove(&key);
        }
        let workloads = state
            .workloads
            .get(&key)
            .map(observed_workload)
            .into_iter()
            .collect();
        let pgid = state
            .workloads
            .get(&key)
            .and_then(|e| e.workload.status().pgid);
        let service = state.services.get(&key).map(|name| ObservedService {
            name: name.clone(),
            owned: true,
        });
        drop(state);
        let volumes = sandbox::volume_specs(sandbox)
            .into_iter()
            .filter(|v| self.inner.layout.volume_dir(&key, &v.volume_name).is_dir())
            .map(|v| ObservedVolume {
                claim_name: v.claim_name,
            })
            .collect();
        Observed {
            workloads,
            volumes,
            service,
            cluster_domain: self.inner.config.cluster_domain.clone(),
            activity: self
                .inner
                .activity
                .get()
                .and_then(|view| view.last_activity(&key)),
            checkpoint: checkpoints(sandbox)
                .then(|| CheckpointOutcome::read(&self.inner.layout.checkpoint_dir(&key)))
                .flatten()
                .map(|outcome| outcome.condition()),
            memory_sharing: sharing::observe(
                &self.inner.ksm,
                sandbox,
                pgid,
                self.inner.config.merge_exec.is_some(),
            ),
            // The standalone driver adds where a `restoreFrom` snapshot stands.
            restore: None,
        }
    }

    /// The launch of a sandbox's workload and the runsc to run it with (gVisor): the spec,
    /// KSM for Merge, a fork's seeding.
    pub(super) async fn launch_for(
        &self,
        sandbox: &Sandbox,
        spec: &sandbox::WorkloadSpec,
    ) -> Result<(LaunchSpec, Option<Runsc>), Error> {
        let mut launch = LaunchSpec::from_pod(&spec.spec)?;
        if launch.runtime == super::RuntimeKind::Process
            && sandbox.spec.effective_memory_sharing() == MemorySharing::Merge
            && let Some(trampoline) = &self.inner.config.merge_exec
        {
            // KSM is turned on the first time it is needed; if it cannot be, the sandbox
            // still starts and its condition says why.
            self.inner.ksm.ensure();
            launch.merge_exec = Some(trampoline.clone());
        }
        // A fork starts from its snapshot: volumes copied, memory image pending.
        self.seed_fork(sandbox, &mut launch).await?;
        let runsc = match launch.runtime {
            super::RuntimeKind::Gvisor => Some(Runsc::locate(
                &self.inner.config.runsc,
                &self.inner.layout,
                &self.inner.config.gvisor,
            )?),
            super::RuntimeKind::Process => None,
        };
        Ok((launch, runsc))
    }

    /// Starts a workload (its supervisor) for `key`; the caller reserved the key.
    pub(super) fn start_workload(
        &self,
        key: &ObjectKey,
        launch: LaunchSpec,
        runsc: Option<&Runsc>,
    ) -> Result<Workload, Error> {
        Workload::start_with(
            &self.inner.layout,
            runsc,
            self.inner.cgroups.as_ref(),
            key.clone(),
            launch,
            self.notifier(),
            self.inner.quiesce.get().cloned(),
        )
    }

    async fn create_workload(&self, sandbox: &Sandbox, spec: &sandbox::WorkloadSpec) -> Result<()> {
        let key = ObjectKey::of(sandbox);
        let what = || format!("create workload {key}");
        let (launch, runsc) = self
            .launch_for(sandbox, spec)
            .await
            .map_err(|e| platform_error(what(), e))?;
        let ports = launch.ports.clone();
        {
            let mut state = lock(&self.inner.state);
            if let Some(name) = running_name(&state, &key) {
                return Err(PlatformError::Conflict {
                    what: what(),
                    message: format!("workload {name} exists"),
                });
            }
            if state.direct.contains_key(&key) {
                // A direct wake is starting it: that workload is the sandbox's (the next
                // reconcile, once the wake's write is answered, observes it).
                tracing::debug!(sandbox.key = %key, "a direct wake starts the workload");
                return Ok(());
            }
            if !state.starting.insert(key.clone()) {
                return Err(PlatformError::Conflict {
                    what: what(),
                    message: "the workload is being created".to_owned(),
                });
            }
        }
        // Started outside the lock (it touches the file system); the reservation above keeps
        // a direct wake from starting another meanwhile.
        let started = self.start_workload(&key, launch, runsc.as_ref());
        let mut state = lock(&self.inner.state);
        state.starting.remove(&key);
        let workload = started.map_err(|e| platform_error(what(), e))?;
        tracing::info!(sandbox.key = %key, "workload created");
        state
            .workloads
            .insert(key, Entry::started(spec, workload, ports, None));
        Ok(())
    }

    /// Starts stopping a sandbox's workload, if it runs; the driver uses this for a sandbox
    /// being deleted.
    pub fn stop_workload(&self, key: &ObjectKey) {
        self.stop_workload_by(key, false);
    }

    /// Starts stopping a sandbox's workload, by checkpoint when `checkpoint` (a suspend with
    /// `strategy: Checkpoint`).
    fn stop_workload_by(&self, key: &ObjectKey, checkpoint: bool) {
        let mut state = lock(&self.inner.state);
        if let Some(entry) = state.workloads.get_mut(key)
            && !entry.stopping
        {
            // The supervisor stops it in the background and notifies when it is gone, so a
            // long grace period never holds a reconcile.
            entry.stopping = true;
            if checkpoint {
                entry.workload.begin_checkpoint();
                tracing::info!(sandbox.key = %key, "workload suspending by checkpoint");
            } else {
                entry.workload.begin_stop();
                tracing::info!(sandbox.key = %key, "workload stopping");
            }
        }
    }
}

impl Platform for LocalPlatform {
    async fn observe(&self, sandbox: &Sandbox) -> Result<Observed> {
        Ok(self.observe_sandbox(sandbox))
    }

    async fn apply(&self, sandbox: &Sandbox, action: &Action) -> Result<()> {
        let key = ObjectKey::of(sandbox);
        match action {
            Action::EnsureVolume(volume) => {
                let dir = self.inner.layout.volume_dir(&key, &volume.volume_name);
                ensure_dir(&dir)
                    .map_err(|e| platform_error(format!("ensure volume {}", volume.claim_name), e))
            }
            Action::CreateWorkload(spec) => self.create_workload(sandbox, spec).await,
            Action::DeleteWorkload { .. } => {
                if self.woken_after(&key, sandbox) {
                    // A reconcile that read the sandbox before its direct wake was written:
                    // the workload is wanted.
                    tracing::debug!(sandbox.key = %key, "keeping a directly woken workload");
                    return Ok(());
                }
                let suspending =
                    sandbox.spec.effective_operating_mode() == OperatingMode::Suspended;
                self.stop_workload_by(&key, suspending && checkpoints(sandbox));
                Ok(())
            }
            Action::AdoptWorkload { name } => Err(PlatformError::Unsupported {
                what: format!("adopt workload {name} for {key}"),
                message: "local workloads are never adoptable".to_owned(),
            }),
            Action::EnsureService(service) => {
                lock(&self.inner.state)
                    .services
                    .insert(key, service.name.clone());
                Ok(())
            }
            Action::DeleteService { .. } => {
                lock(&self.inner.state).services.remove(&key);
                Ok(())
            }
        }
    }
}

impl Snapshotter for LocalPlatform {
    fn provider(&self, sandbox: &Sandbox) -> &'static str {
        match LaunchSpec::from_sandbox(sandbox).map(|l| l.runtime) {
            Ok(super::RuntimeKind::Gvisor) => "local-gvisor",
            _ => "local-process",
        }
    }

    fn capabilities(&self, sandbox: &Sandbox) -> Capabilities {
        Capabilities {
            memory: self.provider(sandbox) == "local-gvisor",
            volumes: true,
        }
    }
}

/// Whether the sandbox suspends by checkpoint.
pub(super) fn checkpoints(sandbox: &Sandbox) -> bool {
    sandbox
        .spec
        .suspension
        .as_ref()
        .is_some_and(|s| s.strategy == SuspensionStrategy::Checkpoint)
}

fn observed_workload(entry: &Entry) -> sandbox::Workload {
    let status = entry.workload.status();
    let phase = match status.phase {
        WorkloadPhase::Pending => sandbox::WorkloadPhase::Pending,
        WorkloadPhase::Running => sandbox::WorkloadPhase::Running,
        WorkloadPhase::Succeeded => sandbox::WorkloadPhase::Succeeded,
        WorkloadPhase::Failed => sandbox::WorkloadPhase::Failed,
        // Still listed while its entry lives; it is terminating.
        WorkloadPhase::Stopped => sandbox::WorkloadPhase::Running,
    };
    let running = status.phase == WorkloadPhase::Running;
    sandbox::Workload {
        name: entry.name.clone(),
        ownership: sandbox::Ownership::Owned,
        owner: None,
        phase,
        ready: status.ready && running && !entry.stopping,
        ips: if running {
            vec![status.ports.host.to_string()]
        } else {
            Vec::new()
        },
        node_name: Some(NODE_NAME.to_owned()),
        ports: endpoint_ports(&status, &entry.ports),
        terminating: entry.stopping || status.phase == WorkloadPhase::Stopped,
        scheduled: Some(Condition {
            type_: "PodScheduled".to_owned(),
            status: "True".to_owned(),
            reason: "Scheduled".to_owned(),
            message: format!("started on {NODE_NAME}"),
            last_transition_time: Time(entry.started),
            observed_generation: None,
        }),
        template_hash: Some(entry.template_hash.clone()),
        back_off: status
            .back_off
            .as_ref()
            .map(|b| b.describe(status.restarts)),
    }
}

/// A local error as a platform error: a spec standalone cannot run is invalid, a missing or
/// unusable runtime unsupported, the rest unavailable (a retry may succeed).
fn platform_error(what: String, error: Error) -> PlatformError {
    match error {
        Error::Unsupported(message) => PlatformError::Invalid { what, message },
        missing @ (Error::RuntimeMissing { .. } | Error::RuntimeUnusable { .. }) => {
            PlatformError::Unsupported {
                what,
                message: missing.to_string(),
            }
        }
        other => PlatformError::Unavailable {
            what,
            message: other.to_string(),
            source: Some(Box::new(other)),
        },
    }
}

/// The endpoint's ports of a workload: each mapped port, named as declared.
pub(super) fn endpoint_ports(status: &WorkloadStatus, declared: &[PortSpec]) -> Vec<EndpointPort> {
    status
        .ports
        .mapped
        .iter()
        .map(|(container_port, port)| EndpointPort {
            name: declared
                .iter()
                .find(|p| p.container_port == *container_port)
                .and_then(|p| p.name.clone()),
            container_port: i32::from(*container_port),
            port: i32::from(*port),
        })
        .collect()
}

/// The name of `key`'s workload unless it has none or it stopped.
pub(super) fn running_name(state: &State, key: &ObjectKey) -> Option<String> {
    state
        .workloads
        .get(key)
        .filter(|e| e.workload.status().phase != WorkloadPhase::Stopped)
        .map(|e| e.name.clone())
}

pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data that is still consistent per field.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
