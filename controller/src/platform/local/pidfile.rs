//! Pid files of running workloads, so that after a crash of the controller the next start
//! can stop the process groups the previous run left behind.
//!
//! A file holds the group id and the leader's start time (field 22 of `/proc/<pid>/stat`); a
//! group is only killed when both still match, so a reused pid is never signalled.

use std::path::Path;

use nix::sys::signal::Signal;

use super::launch::signal_group;
use super::layout::ensure_parent;

/// Records a running workload's process group (its leader's pid).
pub fn write(path: &Path, pgid: u32) {
    let Some(start) = start_time(pgid) else {
        return;
    };
    let written = ensure_parent(path)
        .map_err(|e| std::io::Error::other(e.to_string()))
        .and_then(|()| std::fs::write(path, format!("{pgid} {start}\n")));
    if let Err(error) = written {
        tracing::warn!(path = %path.display(), %error, "writing a workload pid file failed");
    }
}

/// Forgets a workload's pid file.
pub fn remove(path: &Path) {
    let _ = std::fs::remove_file(path);
}

/// Kills every process group recorded under `dir` whose leader is still the same process,
/// and removes the files; returns how many groups were killed.
pub fn kill_leftovers(dir: &Path) -> usize {
    let mut killed = 0;
    let Ok(namespaces) = std::fs::read_dir(dir) else {
        return 0;
    };
    for namespace in namespaces.flatten() {
        let Ok(files) = std::fs::read_dir(namespace.path()) else {
            continue;
        };
        for file in files.flatten() {
            let path = file.path();
            if let Some(pgid) = std::fs::read_to_string(&path)
                .ok()
                .and_then(|s| live_group(&s))
            {
                tracing::info!(workload.pgid = pgid, path = %path.display(), "killing a workload left by a previous run");
                signal_group(pgid, Signal::SIGKILL);
                killed += 1;
            }
            remove(&path);
        }
    }
    killed
}

/// The group id of a pid file's content if its leader is still the process it was.
fn live_group(content: &str) -> Option<u32> {
    let mut parts = content.split_whitespace();
    let pgid: u32 = parts.next()?.parse().ok()?;
    let start: u64 = parts.next()?.parse().ok()?;
    (pgid > 1 && start_time(pgid) == Some(start)).then_some(pgid)
}

/// The start time of a process in clock ticks since boot.
fn start_time(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may contain spaces; fields follow the last ')'.
    let after = &stat[stat.rfind(')')? + 1..];
    // After ')' come field 3 (state) onwards; start time is field 22.
    after.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::{live_group, start_time};

    #[test]
    fn own_process_is_live_and_a_changed_start_time_is_not() {
        let me = std::process::id();
        let start = start_time(me).expect("own start time");
        // Our pid is not a group leader we would kill, but the identity check is what matters.
        assert_eq!(live_group(&format!("{me} {start}")), Some(me));
        assert_eq!(live_group(&format!("{me} {}", start + 1)), None);
        assert_eq!(live_group("garbage"), None);
        assert_eq!(live_group("1 5"), None);
    }
}
