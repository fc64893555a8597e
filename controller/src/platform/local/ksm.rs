//! Kernel same-page merging (KSM) for sandboxes with `spec.memorySharing: Merge`: turning the
//! kernel's `ksmd` on with the configured scan rate when the first such workload starts, and
//! reading how much of a workload's memory is merged. The workload's processes are marked
//! mergeable by the `rouse __merge-exec` trampoline (see docs/memory-sharing.md); KSM only
//! merges memory of marked processes, so turning it on costs nothing for the others beyond
//! `ksmd`'s wake-ups.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The hidden `rouse` subcommand that marks itself mergeable (`prctl(PR_SET_MEMORY_MERGE)`)
/// and execs the workload: `rouse __merge-exec -- PROGRAM ARGS...`.
pub const MERGE_EXEC_COMMAND: &str = "__merge-exec";
/// Where the kernel exposes KSM's controls.
pub const KSM_SYSFS: &str = "/sys/kernel/mm/ksm";
/// Default pages `ksmd` scans per wake-up: 1000 pages (4 MiB) every 20 ms is 200 MB/s, so
/// 8 × 64 MiB of new sandbox memory merges within a few seconds (docs/memory-sharing.md).
pub const DEFAULT_PAGES_TO_SCAN: u32 = 1000;
/// Default milliseconds `ksmd` sleeps between scans (the kernel's own default).
pub const DEFAULT_SLEEP_MILLISECS: u32 = 20;
/// Bounds the entries one walk of `/proc` reads, so reading a process group is bounded.
const MAX_PROCESSES: usize = 1 << 16;

/// How the platform drives KSM (`[runtime.ksm]` of `rouse up`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KsmConfig {
    /// Turn KSM on (`run = 1`) with the scan rate below when a Merge sandbox starts; false
    /// leaves the machine's KSM settings to the operator.
    pub manage: bool,
    /// `pages_to_scan`: pages `ksmd` scans per wake-up.
    pub pages_to_scan: u32,
    /// `sleep_millisecs`: how long `ksmd` sleeps between wake-ups.
    pub sleep_millisecs: u32,
    /// The KSM sysfs directory ([`KSM_SYSFS`]; tests point it elsewhere).
    pub sysfs: PathBuf,
}

impl Default for KsmConfig {
    fn default() -> Self {
        Self {
            manage: true,
            pages_to_scan: DEFAULT_PAGES_TO_SCAN,
            sleep_millisecs: DEFAULT_SLEEP_MILLISECS,
            sysfs: PathBuf::from(KSM_SYSFS),
        }
    }
}

/// Whether KSM merges marked processes right now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KsmState {
    /// `ksmd` runs.
    Running,
    /// It does not, and why (for the sandbox's condition).
    Unavailable(String),
}

/// The machine's KSM as the platform sees it.
#[derive(Debug)]
pub struct Ksm {
    config: KsmConfig,
    /// Why the last attempt to turn KSM on failed, if it did.
    failure: Mutex<Option<String>>,
}

impl Ksm {
    /// KSM under `config`; nothing is touched until a Merge workload starts.
    pub fn new(config: KsmConfig) -> Self {
        Self {
            config,
            failure: Mutex::new(None),
        }
    }

    /// The scan rate, for messages.
    pub fn rate(&self) -> String {
        format!(
            "pages_to_scan {} every {} ms",
            self.config.pages_to_scan, self.config.sleep_millisecs
        )
    }

    /// Makes sure KSM runs (when managed): writes the scan rate and `run = 1` where they
    /// differ. Called before each Merge workload starts; a failure is kept for [`Ksm::state`]
    /// and never fails the start.
    pub fn ensure(&self) -> KsmState {
        let run = self.config.sysfs.join("run");
        if !run.exists() {
            return self.state();
        }
        if self.config.manage {
            let wanted = [
                ("pages_to_scan", self.config.pages_to_scan.to_string()),
                ("sleep_millisecs", self.config.sleep_millisecs.to_string()),
                ("run", "1".to_owned()),
            ];
            let mut failure = None;
            for (file, value) in wanted {
                let path = self.config.sysfs.join(file);
                if read_trimmed(&path).as_deref() == Some(value.as_str()) {
                    continue;
                }
                match std::fs::write(&path, &value) {
                    Ok(()) => {
                        tracing::info!(ksm.file = %path.display(), ksm.value = %value, "KSM setting written")
                    }
                    Err(error) => {
                        failure = Some(format!(
                            "cannot write {value} to {}: {error} (run `rouse up` as root, or turn \
                             KSM on by hand: echo 1 > {})",
                            path.display(),
                            run.display()
                        ));
                        break;
                    }
                }
            }
            if let Some(message) = &failure {
                tracing::warn!(%message, "KSM could not be set up");
            }
            *lock(&self.failure) = failure;
        }
        self.state()
    }

    /// Whether KSM runs now, read from sysfs (an operator may turn it off at any time).
    pub fn state(&self) -> KsmState {
        let run = self.config.sysfs.join("run");
        match read_trimmed(&run).as_deref() {
            None => KsmState::Unavailable(format!(
                "this kernel has no KSM ({} is missing: CONFIG_KSM is off)",
                run.display()
            )),
            Some("1") => KsmState::Running,
            Some(other) => KsmState::Unavailable(match lock(&self.failure).clone() {
                Some(failure) => format!("KSM is off: {failure}"),
                None if !self.config.manage => format!(
                    "KSM is off ({} is {other}) and runtime.ksm.manage is false",
                    run.display()
                ),
                None => format!("KSM is off ({} is {other})", run.display()),
            }),
        }
    }
}

/// What KSM did for one workload's processes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// The group leader is marked mergeable (`ksm_merge_any: yes` in its `ksm_stat`).
    pub marked: bool,
    /// Bytes of the group's memory that are merged: `ksm_merging_pages` × the page size,
    /// summed over its processes.
    pub merged_bytes: u64,
}

/// Reads the KSM usage of the processes of group `pgid`; `None` when the leader is gone.
pub fn usage(pgid: u32) -> Option<Usage> {
    let stat = std::fs::read_to_string(format!("/proc/{pgid}/ksm_stat")).ok()?;
    let marked = stat
        .lines()
        .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["ksm_merge_any:", "yes"]);
    let pages: u64 = group_members(pgid)
        .into_iter()
        .filter_map(|pid| read_trimmed(Path::new(&format!("/proc/{pid}/ksm_merging_pages"))))
        .filter_map(|text| text.parse::<u64>().ok())
        .sum();
    Some(Usage {
        marked,
        merged_bytes: pages.saturating_mul(page_size()),
    })
}

/// The processes whose process group is `pgid` (the workload and everything it started that
/// did not leave the group).
pub fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .take(MAX_PROCESSES)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| process_group(*pid) == Some(pgid))
        .collect()
}

/// The process group of `pid`, from `/proc/PID/stat` (the fields after the command name,
/// which may itself hold spaces and parentheses: state, ppid, pgrp).
fn process_group(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// The system's page size; 4096 if it cannot be read.
fn page_size() -> u64 {
    nix::unistd::sysconf(nix::unistd::SysconfVar::PAGE_SIZE)
        .ok()
        .flatten()
        .and_then(|n| u64::try_from(n).ok())
        .unwrap_or(4096)
}

fn read_trimmed(path: &Path) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_owned())
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // The guarded value is a plain message; a panic elsewhere leaves it usable.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sysfs(run: &str) -> (tempfile::TempDir, KsmConfig) {
        let dir = tempfile::tempdir().expect("tempdir");
        for (file, value) in [
            ("run", run),
            ("pages_to_scan", "100"),
            ("sleep_millisecs", "20"),
        ] {
            std::fs::write(dir.path().join(file), value).expect("write");
        }
        let config = KsmConfig {
            sysfs: dir.path().to_owned(),
            ..KsmConfig::default()
        };
        (dir, config)
    }

    #[test]
    fn ensure_turns_ksm_on_with_the_configured_rate() {
        let (dir, config) = sysfs("0\n");
        let ksm = Ksm::new(config);
        assert!(matches!(ksm.state(), KsmState::Unavailable(_)));
        assert_eq!(ksm.ensure(), KsmState::Running);
        let read = |f: &str| std::fs::read_to_string(dir.path().join(f)).expect("read");
        assert_eq!(read("run"), "1");
        assert_eq!(read("pages_to_scan"), DEFAULT_PAGES_TO_SCAN.to_string());
        assert_eq!(read("sleep_millisecs"), DEFAULT_SLEEP_MILLISECS.to_string());
    }

    #[test]
    fn unmanaged_ksm_is_left_alone_and_says_why() {
        let (dir, mut config) = sysfs("0");
        config.manage = false;
        let ksm = Ksm::new(config);
        let KsmState::Unavailable(message) = ksm.ensure() else {
            panic!("KSM must stay off");
        };
        assert!(message.contains("manage is false"), "{message}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("run")).expect("read"),
            "0"
        );
    }

    #[test]
    fn a_failed_write_leaves_ksm_off_and_names_the_file() {
        let (dir, config) = sysfs("0");
        // A file that cannot be written, as sysfs is for a non-root user.
        std::fs::remove_file(dir.path().join("sleep_millisecs")).expect("remove");
        std::fs::create_dir(dir.path().join("sleep_millisecs")).expect("mkdir");
        let ksm = Ksm::new(config);
        let KsmState::Unavailable(message) = ksm.ensure() else {
            panic!("KSM must stay off");
        };
        assert!(message.contains("sleep_millisecs"), "{message}");
        assert!(message.contains("as root"), "{message}");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("run")).expect("read"),
            "0",
            "run is written last, after the rate"
        );
    }

    #[test]
    fn a_kernel_without_ksm_is_unavailable_not_an_error() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ksm = Ksm::new(KsmConfig {
            sysfs: dir.path().join("missing"),
            ..KsmConfig::default()
        });
        let KsmState::Unavailable(message) = ksm.ensure() else {
            panic!("no KSM");
        };
        assert!(message.contains("no KSM"), "{message}");
    }

    #[test]
    fn the_own_process_group_is_found() {
        let me = std::process::id();
        let group = process_group(me).expect("own stat");
        assert!(group_members(group).contains(&me));
    }
}
