//! The process's open-file limit: every client connection is a file descriptor and a proxied
//! one a second, so a process that proxies raises its soft limit to the hard one (raising the
//! hard limit is the operator's: `ulimit -Hn`, systemd's `LimitNOFILE=`, `--ulimit`).

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Where `/proc` states the most descriptors any process may have.
const NR_OPEN: &str = "/proc/sys/fs/nr_open";

/// Descriptors kept for everything besides connections: listeners, the store, logs, pipes,
/// the runtime's own.
const RESERVE: u64 = 256;

/// The open-file limit before and after [`raise`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenFiles {
    /// The soft limit the process started with.
    pub before: u64,
    /// The soft limit in force now.
    pub now: u64,
    /// The hard limit.
    pub hard: u64,
}

/// Raises the soft open-file limit to the hard one (capped at `fs.nr_open`, which an
/// unlimited hard limit would exceed).
pub fn raise() -> nix::Result<OpenFiles> {
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE)?;
    let target = target(soft, hard, nr_open());
    if target > soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
    }
    Ok(OpenFiles {
        before: soft,
        now: target,
        hard,
    })
}

/// `fs.nr_open`, when `/proc` tells it.
pub fn nr_open() -> Option<u64> {
    std::fs::read_to_string(NR_OPEN)
        .ok()
        .and_then(|text| text.trim().parse().ok())
}

/// The soft limit to set: the hard one, at most `nr_open`, never below `soft`.
fn target(soft: u64, hard: u64, nr_open: Option<u64>) -> u64 {
    hard.min(nr_open.unwrap_or(u64::MAX)).max(soft)
}

/// The descriptors `max_connections` proxied client connections need (`None` for 0, no
/// limit).
pub fn needed(max_connections: usize) -> Option<u64> {
    let max = u64::try_from(max_connections).ok().filter(|&max| max > 0)?;
    Some(max.saturating_mul(2).saturating_add(RESERVE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_the_hard_limit_within_nr_open_and_never_lower() {
        assert_eq!(target(1024, 524_288, Some(1_048_576)), 524_288);
        // An unlimited hard limit: as high as the kernel lets any process go.
        assert_eq!(target(1024, u64::MAX, Some(1_048_576)), 1_048_576);
        assert_eq!(target(1024, 4096, None), 4096);
        // Already at or above: unchanged.
        assert_eq!(target(8192, 8192, Some(1_048_576)), 8192);
        assert_eq!(target(2_000_000, u64::MAX, Some(1_048_576)), 2_000_000);
    }

    #[test]
    fn two_descriptors_per_connection_and_a_reserve() {
        assert_eq!(needed(10_000), Some(20_256));
        assert_eq!(needed(0), None);
        assert_eq!(needed(usize::MAX), Some(u64::MAX));
    }

    #[test]
    fn raising_leaves_the_soft_limit_at_the_hard_one() {
        let limit = raise().expect("raise");
        let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
        assert_eq!((soft, hard), (limit.now, limit.hard));
        assert!(limit.now >= limit.before, "{limit:?}");
        let nr_open = nr_open().expect("/proc/sys/fs/nr_open");
        assert_eq!(soft, hard.min(nr_open).max(limit.before), "{limit:?}");
    }
}
