//! Tearing a real node down, touching only what its run made: a shell script written into
//! the run directory at start, with the run's exact names, run by [`RealNode::stop`], by the
//! watchdog when the test process exits without stopping it, and by the next run when a
//! crash left it behind (its owner process is gone).
//!
//! Why a script and not Rust: the watchdog must work after the test process died, and one
//! procedure for all three paths cannot drift apart.
//!
//! [`RealNode::stop`]: super::RealNode::stop

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result};

/// The parent of every run directory (on disk: containerd's image snapshots live there).
pub const RUNS: &str = "/var/tmp/rouse-node";
/// The script's name in the run directory.
pub const SCRIPT: &str = "teardown.sh";
/// The file listing the PIDs the run started, one `PID START_TIME` per line.
pub const PIDS: &str = "pids";
/// The file naming the process that owns the run (`PID START_TIME`).
pub const OWNER: &str = "owner";

/// What the script must remove.
pub struct Names<'a> {
    /// The run directory.
    pub run: &'a Path,
    /// The network namespace.
    pub netns: &'a str,
    /// The cgroup name under every v1 hierarchy's root.
    pub cgroup: &'a str,
}

/// The tear-down script of a run.
pub fn script(names: &Names<'_>) -> String {
    let run = names.run.display();
    let (netns, cgroup) = (names.netns, names.cgroup);
    format!(
        r#"#!/bin/sh
# Tears down the real node of {run} (written by rouse_testsupport::node): only what this run
# made, by PID, cgroup, mount point under the run directory and namespace name.
R='{run}'
CG='{cgroup}'
NS='{netns}'
[ -d "$R" ] || exit 0
# One tear-down at a time (the watchdog of a killed run and the next run's sweep can meet):
# the second waits, then finds the directory gone.
exec 9<"$R" && flock 9
[ -f "$R/{SCRIPT}" ] || exit 0
# A PID is this run's only while its start time is the one recorded.
ours() {{ [ "$(sed 's/.*) //' /proc/"$1"/stat 2>/dev/null | cut -d' ' -f20)" = "$2" ]; }}
# 1. The node's own processes: TERM, then KILL after 10 s.
if [ -f "$R/{PIDS}" ]; then
  while read -r p t; do ours "$p" "$t" && kill -TERM "$p" 2>/dev/null; done < "$R/{PIDS}"
  i=0
  while [ $i -lt 50 ]; do
    alive=""
    while read -r p t; do ours "$p" "$t" && alive="$alive $p"; done < "$R/{PIDS}"
    [ -z "$alive" ] && break
    sleep 0.2; i=$((i + 1))
  done
  while read -r p t; do ours "$p" "$t" && kill -KILL "$p" 2>/dev/null; done < "$R/{PIDS}"
fi
# 2. Whatever is left in the run's cgroups: pods, shims, gVisor sandboxes.
i=0
while [ $i -lt 50 ]; do
  pids=$(find /sys/fs/cgroup/*/"$CG" -name cgroup.procs -exec cat {{}} + 2>/dev/null | sort -u)
  [ -z "$pids" ] && break
  kill -KILL $pids 2>/dev/null
  sleep 0.2; i=$((i + 1))
done
# 3. Mounts under the run directory, deepest first (pod volumes, overlay snapshots, pod
#    network namespaces).
awk -v r="$R/" 'index($2, r) == 1 {{ print $2 }}' /proc/mounts | sort -r | while read -r m; do
  umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
done
# 4. The cgroups, deepest first.
for c in /sys/fs/cgroup/*/"$CG"; do
  [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {{}} \; 2>/dev/null
done
# 5. The namespace (the veth pair, the pod bridge and kube-proxy's rules go with it).
ip netns delete "$NS" 2>/dev/null
# 6. The files.
rm -rf "$R"
"#
    )
}

/// Runs a run's script and waits for it (in a session of its own: a signal to the caller's
/// process group must not cut a tear-down short).
pub fn run(dir: &Path) -> Result<()> {
    let status = Command::new("setsid")
        .arg("--wait")
        .arg("sh")
        .arg(dir.join(SCRIPT))
        .stdin(Stdio::null())
        .status()
        .with_context(|| format!("run {}/{SCRIPT}", dir.display()))?;
    if !status.success() {
        anyhow::bail!("{}/{SCRIPT} failed with {status}", dir.display());
    }
    Ok(())
}

/// Starts a watchdog that runs the script once `owner` (this process) exits. Its own session,
/// so a signal to the test's process group does not take it along.
pub fn watchdog(dir: &Path, owner: u32) -> Result<()> {
    Command::new("setsid")
        .arg("sh")
        .arg("-c")
        // The run's own stop may have torn down (and removed the script) already.
        .arg("tail --pid=\"$1\" -f /dev/null; [ -f \"$2\" ] && exec sh \"$2\"")
        .arg("rouse-node-watchdog")
        .arg(owner.to_string())
        .arg(dir.join(SCRIPT))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .context("start the node watchdog (setsid, util-linux)")?;
    Ok(())
}

/// The owner record of this process: its PID and start time (a reused PID is not the owner).
pub fn owner_record() -> String {
    let pid = std::process::id();
    format!("{pid} {}", start_time(pid).unwrap_or_default())
}

/// Runs the script of every run whose owner is gone (a crashed or killed test); returns the
/// directories torn down.
pub fn sweep_stale() -> Vec<PathBuf> {
    let mut swept = Vec::new();
    let Ok(entries) = std::fs::read_dir(RUNS) else {
        return swept;
    };
    for entry in entries.flatten() {
        let dir = entry.path();
        let owner = std::fs::read_to_string(dir.join(OWNER)).unwrap_or_default();
        let mut fields = owner.split_whitespace();
        let alive = match (
            fields.next().and_then(|p| p.parse::<u32>().ok()),
            fields.next(),
        ) {
            (Some(pid), Some(started)) => start_time(pid).as_deref() == Some(started),
            // No record yet: a run starting right now, or one that died before writing it;
            // only a script proves the directory is a run.
            _ => !dir.join(SCRIPT).is_file(),
        };
        if !alive && dir.join(SCRIPT).is_file() {
            eprintln!(
                "tearing down a real node left by a crashed run: {}",
                dir.display()
            );
            if run(&dir).is_ok() {
                swept.push(dir);
            }
        }
    }
    swept
}

/// A process's start time (field 22 of `/proc/PID/stat`), if it runs.
pub(crate) fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_names_only_the_runs_own_things() {
        let text = script(&Names {
            run: Path::new("/var/tmp/rouse-node/abc123"),
            netns: "rouse-node-abc123",
            cgroup: "rouse-node-abc123",
        });
        assert!(text.contains("R='/var/tmp/rouse-node/abc123'"));
        assert!(text.contains("ip netns delete \"$NS\""));
        assert!(
            !text.contains("/run/netns/*"),
            "never a glob over namespaces"
        );
        assert!(!text.contains("pkill"), "never a pattern over processes");
        assert!(text.contains("flock 9"), "one tear-down at a time");
        assert!(
            start_time(std::process::id()).is_some(),
            "this process's start time is readable"
        );
    }
}
