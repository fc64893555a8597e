//! A cgroup per workload, so that a stop ends everything the workload started: a process that
//! left the workload's process group (`setsid`, a daemon's double fork) and cleared its
//! environment is still a member of its cgroup, as in a pod.
//!
//! The cgroups of one data directory live under a parent of their own,
//! `{hierarchy}/{cgroup of rouse up}/rouse-{hash of the data directory}/`, one child per
//! workload. The hierarchy is cgroup v1's `pids` controller where it is mounted (`pids.max = 0`
//! stops forks, then every member gets SIGKILL; on hybrid hosts the unified hierarchy stays
//! systemd's), else cgroup v2 (`cgroup.kill`). Where neither can be written (not root,
//! read-only `/sys/fs/cgroup`, v2 without delegation) [`Cgroups::open`] says why and the
//! platform falls back to the environment marks (see `super::contain`).

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

mod locate;

pub use locate::locate;

/// The hidden `rouse` subcommand that moves itself into a workload's cgroup and execs the
/// workload in its place: `rouse __cgroup-exec CGROUP_PROCS_FILE -- PROGRAM ARGS...`.
pub const CGROUP_EXEC_COMMAND: &str = "__cgroup-exec";

/// How long a kill waits for the members of a cgroup to be gone.
const EMPTY_DEADLINE: Duration = Duration::from_secs(10);
/// The first pause between two looks at a cgroup being emptied; it doubles up to
/// [`EMPTY_POLL_MAX`].
const EMPTY_POLL: Duration = Duration::from_millis(1);
/// The longest pause between two looks.
const EMPTY_POLL_MAX: Duration = Duration::from_millis(50);
/// Bounds the members read from one `cgroup.procs`, so a fork bomb cannot make a read unbounded.
const MAX_MEMBERS: usize = 1 << 16;
/// The name of the cgroup [`Cgroups::open`] checks the hierarchy with (workload cgroups are
/// named `{namespace}_{name}.{n}`, never this).
const PROBE: &str = "probe";

/// Which cgroup hierarchy holds the workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hierarchy {
    /// cgroup v1's `pids` controller: `pids.max = 0` stops forks, then each member is killed.
    V1Pids,
    /// cgroup v2: `cgroup.kill` kills every member at once (Linux 5.14 and later; before it,
    /// each member is killed until none is left).
    V2,
}

impl Hierarchy {
    /// For logs and docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Hierarchy::V1Pids => "cgroup v1 pids",
            Hierarchy::V2 => "cgroup v2",
        }
    }
}

/// The parent cgroup of one data directory's workloads.
#[derive(Debug, Clone)]
pub struct Cgroups {
    hierarchy: Hierarchy,
    parent: PathBuf,
    /// The program that joins a cgroup before it execs the workload (the `rouse` binary, run as
    /// `rouse __cgroup-exec ...`); without it a workload is moved right after it started.
    exec: Option<PathBuf>,
}

impl Cgroups {
    /// Finds a writable hierarchy, makes the data directory's parent cgroup in it and checks
    /// that a process can be moved in; why not otherwise (the caller falls back to marks).
    pub fn open(data: &Path, exec: Option<PathBuf>) -> Result<Self, String> {
        let read = |path: &str| {
            std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))
        };
        let (hierarchy, base) =
            locate(&read("/proc/self/mountinfo")?, &read("/proc/self/cgroup")?)?;
        Self::at(hierarchy, base.join(parent_name(data)), exec)
    }

    /// [`Cgroups::open`], then kills what a crashed run left in the parent; `None` with the
    /// reason logged where cgroups cannot be used (stops then kill by process group and marks).
    pub fn open_or_fall_back(data: &Path, exec: Option<PathBuf>) -> Option<Self> {
        match Self::open(data, exec) {
            Ok(cgroups) => {
                let killed = cgroups.sweep();
                if killed > 0 {
                    tracing::warn!(
                        processes = killed,
                        "killed workload processes a previous run left in its cgroups"
                    );
                }
                tracing::info!(cgroups.hierarchy = cgroups.hierarchy.as_str(), cgroups.parent = %cgroups.parent.display(), "each workload runs in a cgroup of its own");
                Some(cgroups)
            }
            Err(why) => {
                tracing::info!(%why, "workloads run without cgroups: a stop kills the workload's process group and every process marked as its own (docs/standalone-runtimes.md)");
                None
            }
        }
    }

    /// [`Cgroups::open`] with the parent cgroup given (tests).
    pub fn at(
        hierarchy: Hierarchy,
        parent: PathBuf,
        exec: Option<PathBuf>,
    ) -> Result<Self, String> {
        match std::fs::create_dir(&parent) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(format!(
                    "cannot create the cgroup {}: {e}",
                    parent.display()
                ));
            }
        }
        let cgroups = Self {
            hierarchy,
            parent,
            exec,
        };
        if let Err(why) = cgroups.probe() {
            cgroups.remove();
            return Err(why);
        }
        Ok(cgroups)
    }

    /// The hierarchy in use.
    pub fn hierarchy(&self) -> Hierarchy {
        self.hierarchy
    }

    /// The parent cgroup's directory.
    pub fn parent(&self) -> &Path {
        &self.parent
    }

    /// The trampoline program, if any.
    pub fn exec(&self) -> Option<&Path> {
        self.exec.as_deref()
    }

    /// Makes the cgroup `name` under the parent (empty, or emptied when a crashed run left it).
    pub fn create(&self, name: &str) -> Result<Cgroup, String> {
        let cgroup = Cgroup {
            dir: self.parent.join(name),
            hierarchy: self.hierarchy,
        };
        match std::fs::create_dir(&cgroup.dir) {
            Ok(()) => Ok(cgroup),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                cgroup.kill_all_blocking()?;
                Ok(cgroup)
            }
            Err(e) => Err(format!(
                "cannot create the cgroup {}: {e}",
                cgroup.dir.display()
            )),
        }
    }

    /// Kills every process in the cgroups a previous run left under the parent and removes
    /// them; returns how many processes there were.
    pub fn sweep(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(&self.parent) else {
            return 0;
        };
        let mut killed = 0;
        for entry in entries.flatten() {
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            let cgroup = Cgroup {
                dir: entry.path(),
                hierarchy: self.hierarchy,
            };
            match cgroup.kill_all_blocking() {
                Ok(n) => killed += n,
                Err(error) => {
                    tracing::warn!(%error, "emptying a workload cgroup left by a previous run failed")
                }
            }
            cgroup.remove();
        }
        killed
    }

    /// Removes the parent cgroup once no workload cgroup is left in it (at shutdown).
    pub fn remove(&self) {
        if let Err(error) = std::fs::remove_dir(&self.parent)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            tracing::debug!(path = %self.parent.display(), %error, "the workloads' parent cgroup stays");
        }
    }

    /// Moves a short-lived child into a cgroup of its own: mkdir alone does not prove that
    /// processes may be moved (a v2 hierarchy without delegation).
    fn probe(&self) -> Result<(), String> {
        let probe = self.create(PROBE)?;
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| format!("cannot start `sleep` to check the cgroup hierarchy: {e}"))?;
        let joined = probe.adopt(child.id());
        let _ = child.kill();
        let _ = child.wait();
        let emptied = probe.kill_all_blocking();
        probe.remove();
        joined.map_err(|e| format!("cannot move a process into {}: {e}", probe.dir.display()))?;
        emptied.map(drop)
    }
}

/// The parent cgroup's name for a data directory: `rouse-` and a hash of its absolute path.
pub fn parent_name(data: &Path) -> String {
    format!(
        "rouse-{:08x}",
        rouse_shared::names::fnv1a_32(data.as_os_str().as_bytes())
    )
}

/// One workload's cgroup.
#[derive(Debug)]
pub struct Cgroup {
    dir: PathBuf,
    hierarchy: Hierarchy,
}

impl Cgroup {
    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file a process writes `0` to in order to join it.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// Moves process `pid` (with all its threads) into the cgroup.
    pub fn adopt(&self, pid: u32) -> std::io::Result<()> {
        std::fs::write(self.procs_file(), pid.to_string())
    }

    /// The processes in it now (at most [`MAX_MEMBERS`]).
    pub fn members(&self) -> Vec<u32> {
        std::fs::read_to_string(self.procs_file())
            .unwrap_or_default()
            .lines()
            .take(MAX_MEMBERS)
            .filter_map(|l| l.trim().parse().ok())
            .collect()
    }

    /// Kills every process in it and waits until none is left (within [`EMPTY_DEADLINE`]);
    /// returns how many there were. The cgroup can take processes again afterwards.
    pub async fn kill_all(&self) -> Result<usize, String> {
        let Some(found) = self.start_kill() else {
            return Ok(0);
        };
        let until = Instant::now() + EMPTY_DEADLINE;
        let mut pause = EMPTY_POLL;
        while !self.finish_step(until)? {
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(EMPTY_POLL_MAX);
        }
        Ok(found)
    }

    /// [`Cgroup::kill_all`] for callers outside the async runtime (start-up).
    pub fn kill_all_blocking(&self) -> Result<usize, String> {
        let Some(found) = self.start_kill() else {
            return Ok(0);
        };
        let until = Instant::now() + EMPTY_DEADLINE;
        let mut pause = EMPTY_POLL;
        while !self.finish_step(until)? {
            std::thread::sleep(pause);
            pause = (pause * 2).min(EMPTY_POLL_MAX);
        }
        Ok(found)
    }

    /// Removes the (empty) cgroup; a failure is logged, and the next start's sweep retries.
    pub fn remove(&self) {
        if let Err(error) = std::fs::remove_dir(&self.dir)
            && error.kind() != std::io::ErrorKind::NotFound
        {
            metrics::counter!("rouse_controller_workload_cgroup_errors_total", "op" => "remove")
                .increment(1);
            tracing::warn!(path = %self.dir.display(), %error, "removing a workload cgroup failed");
        }
    }

    /// Stops forks and signals every member; `None` when it is empty already (the usual case:
    /// nothing outlived the run).
    fn start_kill(&self) -> Option<usize> {
        let members = self.members();
        if members.is_empty() {
            return None;
        }
        match self.hierarchy {
            Hierarchy::V2 => {
                if std::fs::write(self.dir.join("cgroup.kill"), "1").is_err() {
                    // Older than Linux 5.14: one by one, again on each look until none is left.
                    signal_all(&members);
                }
            }
            Hierarchy::V1Pids => {
                // No member can fork once the limit is 0, so one pass reaches them all.
                let _ = std::fs::write(self.dir.join("pids.max"), "0");
                signal_all(&members);
            }
        }
        Some(members.len())
    }

    /// One look at a cgroup being emptied: true once it is empty (and can fork again), an
    /// error at the deadline naming what is left.
    fn finish_step(&self, until: Instant) -> Result<bool, String> {
        let left = self.members();
        if left.is_empty() {
            if self.hierarchy == Hierarchy::V1Pids {
                let _ = std::fs::write(self.dir.join("pids.max"), "max");
            }
            return Ok(true);
        }
        if Instant::now() >= until {
            metrics::counter!("rouse_controller_workload_cgroup_errors_total", "op" => "kill")
                .increment(1);
            return Err(format!(
                "{} processes still in {} after {}s of SIGKILL",
                left.len(),
                self.dir.display(),
                EMPTY_DEADLINE.as_secs()
            ));
        }
        // Forked between the first pass and now (v2 without cgroup.kill), or not yet gone.
        if self.hierarchy == Hierarchy::V2 && !self.dir.join("cgroup.kill").exists() {
            signal_all(&left);
        }
        Ok(false)
    }
}

/// SIGKILL to each process; one that is gone already is no error.
fn signal_all(pids: &[u32]) {
    for pid in pids {
        if let Ok(raw) = i32::try_from(*pid)
            && raw > 1
        {
            let _ = kill(Pid::from_raw(raw), Signal::SIGKILL);
        }
    }
}

#[cfg(test)]
mod tests;
