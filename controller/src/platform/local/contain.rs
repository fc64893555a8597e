//! What keeps one workload's processes together, so that the end of each run (an exit, a
//! restart, a stop for delete, suspend or shutdown) kills every process the run started.
//!
//! Where the host offers cgroups ([`super::cgroup`]) each workload gets one: the `rouse
//! __cgroup-exec` trampoline joins it before it execs the workload, so nothing the workload
//! starts can leave it. Elsewhere every workload process carries two environment marks,
//! [`OWNER_ENV`] (the data directory) and [`WORKLOAD_ENV`] (this workload), and the end of a
//! run kills every process marked as this workload's: only a process that both left the
//! process group and cleared its environment escapes that, until the next start of `rouse up`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};

use rouse_shared::store::ObjectKey;
use tokio::process::{Child, Command};

use super::cgroup::{CGROUP_EXEC_COMMAND, Cgroup, Cgroups};
use super::launch::{Launch, OWNER_ENV, WORKLOAD_ENV, open_log, rotate_log};
use super::pidfile;

/// Numbers the workloads of this process, so two workloads of one sandbox name (a delete and a
/// create racing) never share a cgroup or a mark.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// One workload's boundary: its identity, and its cgroup where there is one.
#[derive(Debug)]
pub struct Boundary {
    id: String,
    owner: PathBuf,
    cgroup: Option<Cgroup>,
    exec: Option<PathBuf>,
}

impl Boundary {
    /// Starts `launch` in a new process group inside this boundary (its cgroup, or its
    /// environment marks: [`OWNER_ENV`] and the workload's own, set before it runs, so a crash
    /// at any moment of the start leaves no process the next start cannot find), with stdout
    /// and stderr appended to `log`.
    pub fn spawn(&self, launch: &Launch, log: &Path) -> std::io::Result<Child> {
        rotate_log(log);
        let out = open_log(log)?;
        let err = out.try_clone()?;
        let (program, args) = self.command(launch)?;
        let mut command = Command::new(program);
        command
            .args(args)
            .env_clear()
            .envs(launch.env.iter().map(|(k, v)| (k, v)))
            .envs(self.env())
            .current_dir(&launch.cwd)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own group: a stop signals every process the workload started.
            .process_group(0);
        let child = command.spawn()?;
        if let Some(pid) = child.id() {
            self.started(pid);
        }
        Ok(child)
    }

    /// A new workload's boundary under `cgroups` (its cgroup is made now), or by marks alone
    /// when there are none or its cgroup cannot be made (logged and counted).
    pub fn new(data: &Path, key: &ObjectKey, cgroups: Option<&Cgroups>) -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = rouse_shared::datadir::file_name(
            &format!("{}_{}", key.namespace, key.name),
            &n.to_string(),
        );
        let cgroup = cgroups.and_then(|cgroups| match cgroups.create(&id) {
            Ok(cgroup) => Some(cgroup),
            Err(error) => {
                metrics::counter!("rouse_controller_workload_cgroup_errors_total", "op" => "create")
                    .increment(1);
                tracing::warn!(sandbox.key = %key, %error, "the workload runs without a cgroup; its stops kill the processes marked as its own");
                None
            }
        });
        Self {
            id,
            owner: data.to_path_buf(),
            exec: cgroups.and_then(|c| c.exec().map(Path::to_path_buf)),
            cgroup,
        }
    }

    /// The marks every process of the workload carries in its environment.
    pub fn env(&self) -> [(&'static str, OsString); 2] {
        [
            (OWNER_ENV, self.owner.clone().into_os_string()),
            (WORKLOAD_ENV, OsString::from(&self.id)),
        ]
    }

    /// The program and arguments that run `launch` inside the boundary: through the
    /// trampoline, which joins the cgroup first, when there are both. A program that cannot be
    /// found is an error here, as a direct spawn's would be, not an exit of the trampoline.
    pub fn command(&self, launch: &Launch) -> std::io::Result<(PathBuf, Vec<OsString>)> {
        let args = launch.args.iter().map(OsString::from);
        match (&self.cgroup, &self.exec) {
            (Some(cgroup), Some(exec)) => {
                let mut wrapped = vec![
                    OsString::from(CGROUP_EXEC_COMMAND),
                    cgroup.procs_file().into_os_string(),
                    OsString::from("--"),
                    find_program(launch)?.into_os_string(),
                ];
                wrapped.extend(args);
                Ok((exec.clone(), wrapped))
            }
            _ => Ok((launch.program.clone(), args.collect())),
        }
    }

    /// Right after a spawn: without the trampoline the process is moved into the cgroup now
    /// (a child it forked in the instant before stays outside, marked).
    pub fn started(&self, pid: u32) {
        if let (Some(cgroup), None) = (&self.cgroup, &self.exec)
            && let Err(error) = cgroup.adopt(pid)
        {
            tracing::warn!(workload.pid = pid, %error, "moving the workload into its cgroup failed");
        }
    }

    /// Kills whatever of the workload still runs (called once its run's leader is gone);
    /// returns how many processes that was.
    pub async fn clear(&self) -> usize {
        if let Some(cgroup) = &self.cgroup {
            match cgroup.kill_all().await {
                Ok(killed) => return counted(killed, "cgroup"),
                Err(error) => {
                    tracing::warn!(%error, "emptying the workload's cgroup failed; killing its marked processes")
                }
            }
        }
        let (owner, id) = (self.owner.clone(), self.id.clone());
        let killed = tokio::task::spawn_blocking(move || pidfile::kill_marked(&owner, Some(&id)))
            .await
            .unwrap_or(0);
        counted(killed, "mark")
    }

    /// Ends the boundary once the workload stopped for good: [`Boundary::clear`], then its
    /// cgroup goes.
    pub async fn close(&self) {
        self.clear().await;
        if let Some(cgroup) = &self.cgroup {
            cgroup.remove();
        }
    }
}

impl Drop for Boundary {
    fn drop(&mut self) {
        // Dropped without `close` (the async runtime ended under a running workload): nothing
        // of the workload outlives its supervisor, and the platform, likely gone already,
        // left the parent cgroup to the last workload.
        if let Some(cgroup) = &self.cgroup
            && cgroup.dir().exists()
        {
            if let Err(error) = cgroup.kill_all_blocking() {
                tracing::warn!(%error, "emptying a dropped workload's cgroup failed");
            }
            cgroup.remove();
            if let Some(parent) = cgroup.dir().parent() {
                // Fails while other workloads have cgroups there; the last one removes it.
                let _ = std::fs::remove_dir(parent);
            }
        }
    }
}

/// The program of `launch` as the kernel will run it: a path as given (relative ones are taken
/// in the working directory, as `execvp` does), a bare name looked up on the launch's `PATH`
/// (else this process's).
fn find_program(launch: &Launch) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if launch.program.components().count() > 1 {
        return Ok(launch.program.clone());
    }
    let path = launch
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| OsString::from(v))
        .or_else(|| std::env::var_os("PATH"))
        .unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(&launch.program))
        .find(|candidate| {
            candidate
                .metadata()
                .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
        .ok_or_else(|| {
            std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such program on the workload's PATH",
            )
        })
}

/// Counts the processes a run left behind that a clear killed.
fn counted(killed: usize, via: &'static str) -> usize {
    if killed > 0 {
        metrics::counter!("rouse_controller_workload_leftovers_killed_total", "via" => via)
            .increment(killed as u64);
    }
    killed
}
