//! Starting and stopping one run of a workload: the child process in its own process group,
//! output appended to the sandbox's log file, SIGTERM then SIGKILL to the whole group.

use std::fs::OpenOptions;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;

use super::error::Error;
use super::layout::ensure_parent;

/// The environment variable that marks every workload process with the data directory of the
/// `rouse up` that started it (inherited by everything the workload starts).
pub const OWNER_ENV: &str = "ROUSE_OWNER";

/// The environment variable naming the workload a process belongs to
/// (`{namespace}_{name}.{n}`, also the name of its cgroup).
pub const WORKLOAD_ENV: &str = "ROUSE_WORKLOAD";

/// How long a stop waits for the group leader after SIGKILL before giving up on it.
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(10);

/// A prepared command line: what to execute, with which environment, where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Launch {
    /// The program (searched on the inherited `PATH` when not a path).
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<String>,
    /// Its whole environment.
    pub env: Vec<(String, String)>,
    /// Its working directory.
    pub cwd: PathBuf,
}

/// A log file larger than this at a (re)start is moved to `<name>.log.1` (replacing an older
/// one), so a sandbox's logs take at most about twice this much disk between restarts.
pub const MAX_LOG_BYTES: u64 = 64 * 1024 * 1024;

/// Moves a log that outgrew [`MAX_LOG_BYTES`] aside; called before each start.
pub(crate) fn rotate_log(log: &Path) {
    if std::fs::metadata(log).is_ok_and(|m| m.len() > MAX_LOG_BYTES) {
        let mut rotated = log.as_os_str().to_owned();
        rotated.push(".1");
        if let Err(error) = std::fs::rename(log, &rotated) {
            tracing::warn!(path = %log.display(), %error, "rotating a workload log failed");
        }
    }
}

/// Opens a log file for appending, creating it and its directory.
pub(crate) fn open_log(log: &Path) -> std::io::Result<std::fs::File> {
    ensure_parent(log).map_err(|e| match e {
        Error::DataDir { source, .. } => source,
        other => std::io::Error::other(other.to_string()),
    })?;
    OpenOptions::new().create(true).append(true).open(log)
}

/// Appends one `rouse:` line to the log, so `rouse logs` shows starts and exits; a failure
/// to write it is not worth failing the workload for.
pub(crate) fn log_line(log: &Path, line: &str) {
    if let Ok(mut file) = open_log(log) {
        let _ = writeln!(file, "rouse: {line}");
    }
}

/// Signals a whole process group; a group that is already gone is not an error.
pub(crate) fn signal_group(pgid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(pgid) else { return };
    if let Err(errno) = killpg(Pid::from_raw(raw), signal)
        && errno != nix::errno::Errno::ESRCH
    {
        tracing::warn!(workload.pgid = pgid, error = %errno, "signalling a workload group failed");
    }
}

/// SIGTERM to the group, SIGKILL after `grace`, then reaps the leader and kills whatever of
/// the group is left, so no member outlives a stop.
pub(crate) async fn terminate_group(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    let Some(pgid) = child.id() else {
        return child.wait().await.ok();
    };
    signal_group(pgid, Signal::SIGTERM);
    let status = match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => status.ok(),
        Err(_) => {
            signal_group(pgid, Signal::SIGKILL);
            tokio::time::timeout(KILL_WAIT, child.wait())
                .await
                .ok()
                .and_then(|s| s.ok())
        }
    };
    signal_group(pgid, Signal::SIGKILL);
    status
}

/// A human-readable exit description.
pub(crate) fn describe(status: &ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit code {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "unknown exit".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{MAX_LOG_BYTES, rotate_log};

    #[test]
    fn an_oversized_log_is_moved_aside_and_a_small_one_stays() {
        let dir = tempfile::tempdir().expect("tempdir");
        let log = dir.path().join("box.log");
        std::fs::write(&log, "small").expect("write");
        rotate_log(&log);
        assert!(log.exists());
        // A sparse file: big by length, cheap on disk.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .open(&log)
            .expect("open");
        file.set_len(MAX_LOG_BYTES + 1).expect("grow");
        rotate_log(&log);
        assert!(!log.exists());
        assert!(dir.path().join("box.log.1").exists());
    }
}
