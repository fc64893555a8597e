//! Pid files of running workloads, so that after a crash of the controller the next start
//! can stop the process groups the previous run left behind.
//!
//! A file holds the group id and the leader's start time (field 22 of `/proc/<pid>/stat`); a
//! group is only killed when both still match, so a reused pid is never signalled.
//!
//! A pid file can only be written once the process exists, so a crash between the two would
//! leave a process no file names. Every workload process therefore also carries
//! [`OWNER_ENV`]`=<data dir>` in its environment from before it runs; [`kill_marked`] finds
//! those by their environment.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::sys::signal::Signal;

use super::launch::{OWNER_ENV, WORKLOAD_ENV, signal_group};
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

/// Kills every process (other than this one) whose environment says it is a workload of the
/// data directory `owner` (and, given `workload`, that workload's: [`WORKLOAD_ENV`]); returns
/// how many there were.
pub fn kill_marked(owner: &Path, workload: Option<&str>) -> usize {
    let mark = |name: &str, value: &[u8]| {
        let mut mark = name.as_bytes().to_vec();
        mark.push(b'=');
        mark.extend_from_slice(value);
        mark
    };
    let mut marks = vec![mark(OWNER_ENV, owner.as_os_str().as_bytes())];
    if let Some(workload) = workload {
        marks.push(mark(WORKLOAD_ENV, workload.as_bytes()));
    }
    let me = std::process::id();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut killed = 0;
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if marks
            .iter()
            .all(|mark| environ.split(|b| *b == 0).any(|var| var == mark.as_slice()))
        {
            tracing::info!(workload.pid = pid, owner = %owner.display(), "killing a workload process left by a previous run");
            if let Ok(raw) = i32::try_from(pid) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), Signal::SIGKILL);
                killed += 1;
            }
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
    use std::os::unix::process::ExitStatusExt;

    use super::{OWNER_ENV, WORKLOAD_ENV, kill_marked, live_group, start_time};

    #[test]
    fn marked_processes_of_the_data_dir_are_killed_and_others_kept() {
        let ours = tempfile::tempdir().expect("tempdir");
        let theirs = tempfile::tempdir().expect("tempdir");
        let spawn = |owner: &std::path::Path| {
            std::process::Command::new("sleep")
                .arg("60")
                .env(OWNER_ENV, owner)
                .spawn()
                .expect("spawn sleep")
        };
        // As if the previous run was killed right after the spawn, before any pid file.
        let mut orphan = spawn(ours.path());
        let mut other = spawn(theirs.path());
        assert_eq!(kill_marked(ours.path(), None), 1);
        let status = orphan.wait().expect("wait");
        assert_eq!(status.signal(), Some(9), "the orphan is killed");
        assert!(
            other.try_wait().expect("try_wait").is_none(),
            "another data dir's workload runs on"
        );
        let _ = other.kill();
        let _ = other.wait();
    }

    #[test]
    fn a_workloads_marked_processes_are_killed_and_its_neighbours_kept() {
        let data = tempfile::tempdir().expect("tempdir");
        let spawn = |workload: &str| {
            std::process::Command::new("sleep")
                .arg("60")
                .env(OWNER_ENV, data.path())
                .env(WORKLOAD_ENV, workload)
                .spawn()
                .expect("spawn sleep")
        };
        // A detached descendant of a stopped workload, and a neighbour still running.
        let mut left = spawn("default_box.1");
        let mut neighbour = spawn("default_box.2");
        assert_eq!(kill_marked(data.path(), Some("default_box.1")), 1);
        assert_eq!(left.wait().expect("wait").signal(), Some(9));
        assert!(
            neighbour.try_wait().expect("try_wait").is_none(),
            "the other workload of the data dir runs on"
        );
        let _ = neighbour.kill();
        let _ = neighbour.wait();
    }

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
