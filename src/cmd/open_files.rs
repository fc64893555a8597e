//! The open-file limit of the serving commands (`rouse up`, `rouse proxy`).
//!
//! Every client connection is a file descriptor, and a proxied one a second for its upstream,
//! so the usual soft limit of 1024 stops a proxy long before its own `limits.max_connections`.
//! As servers do, both commands raise the soft limit to the hard one at start; raising the
//! hard limit is the operator's (`ulimit -Hn`, systemd's `LimitNOFILE=`, a container runtime's
//! `--ulimit`), and a start below what the config allows is logged as a warning.

use nix::sys::resource::{Resource, getrlimit, setrlimit};

/// Descriptors kept for everything besides connections: listeners, the store, logs, pipes,
/// the runtime's own.
const RESERVE: u64 = 256;

/// Where `/proc` states the most descriptors any process may have.
const NR_OPEN: &str = "/proc/sys/fs/nr_open";

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
    let nr_open = std::fs::read_to_string(NR_OPEN)
        .ok()
        .and_then(|text| text.trim().parse().ok());
    let target = target(soft, hard, nr_open);
    if target > soft {
        setrlimit(Resource::RLIMIT_NOFILE, target, hard)?;
    }
    Ok(OpenFiles {
        before: soft,
        now: target,
        hard,
    })
}

/// The soft limit to set: the hard one, at most `nr_open`, never below `soft`.
fn target(soft: u64, hard: u64, nr_open: Option<u64>) -> u64 {
    hard.min(nr_open.unwrap_or(u64::MAX)).max(soft)
}

/// The descriptors `max_connections` proxied client connections need (0: no limit, no
/// figure).
pub fn needed(max_connections: usize) -> Option<u64> {
    let max = u64::try_from(max_connections).ok().filter(|&max| max > 0)?;
    Some(max.saturating_mul(2).saturating_add(RESERVE))
}

/// Raises the limit and logs it, warning when it is below what `max_connections` needs.
pub fn raise_and_report(max_connections: usize) {
    match raise() {
        Ok(limit) => {
            tracing::info!(
                open_files.limit = limit.now,
                open_files.started_with = limit.before,
                open_files.hard = limit.hard,
                "open-file limit"
            );
            if let Some(needed) = needed(max_connections).filter(|&needed| limit.now < needed) {
                tracing::warn!(
                    open_files.limit = limit.now,
                    open_files.needed = needed,
                    limits.max_connections = max_connections,
                    "the open-file limit is below what limits.max_connections needs (two per \
                     proxied connection); raise the hard limit (ulimit -Hn, LimitNOFILE=) or \
                     lower limits.max_connections"
                );
            }
        }
        Err(error) => {
            tracing::warn!(%error, "cannot raise the open-file limit; keeping it");
        }
    }
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
        let nr_open: u64 = std::fs::read_to_string(NR_OPEN)
            .expect("nr_open")
            .trim()
            .parse()
            .expect("a number");
        assert_eq!(soft, hard.min(nr_open).max(limit.before), "{limit:?}");
    }
}
