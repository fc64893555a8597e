//! The delay before a workload that exited is started again, and how a workload waiting out
//! that delay is described (as kubelet describes a container in `CrashLoopBackOff`).

use std::time::Duration;

use jiff::Timestamp;

/// The first restart delay.
pub const BACKOFF_START: Duration = Duration::from_millis(250);
/// The longest restart delay.
pub const BACKOFF_MAX: Duration = Duration::from_secs(10);
/// A run that lasted this long resets the backoff.
pub const BACKOFF_RESET: Duration = Duration::from_secs(10);

/// A workload waiting to be started again after its run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackOff {
    /// How long it waits.
    pub delay: Duration,
    /// When it starts again.
    pub until: Timestamp,
    /// How the last run ended (`exit code 1`).
    pub last_exit: String,
}

impl BackOff {
    /// A wait of `delay` from now after a run that ended as `last_exit` says.
    pub fn starting_now(delay: Duration, last_exit: String) -> Self {
        let until = jiff::SignedDuration::try_from(delay)
            .ok()
            .and_then(|d| Timestamp::now().checked_add(d).ok())
            .unwrap_or_else(Timestamp::now);
        Self {
            delay,
            until,
            last_exit,
        }
    }

    /// The workload's waiting state in kubelet's terms, with the restart count:
    /// `CrashLoopBackOff: back-off 2s restarting the exited workload (restarts: 3, last exit
    /// code 1); next start at 2026-01-01T10:00:02.250Z`.
    pub fn describe(&self, restarts: u32) -> String {
        format!(
            "CrashLoopBackOff: back-off {} restarting the exited workload (restarts: {restarts}, last {}); next start at {:.3}",
            humantime::format_duration(self.delay),
            self.last_exit,
            self.until
        )
    }
}

/// The delay after `current`: doubled, at most [`BACKOFF_MAX`].
pub fn next(current: Duration) -> Duration {
    (current * 2).min(BACKOFF_MAX)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{BACKOFF_MAX, BACKOFF_START, BackOff, next};

    #[test]
    fn the_delay_doubles_up_to_its_bound() {
        let mut delay = BACKOFF_START;
        let mut seen = vec![delay];
        for _ in 0..8 {
            delay = next(delay);
            seen.push(delay);
        }
        assert_eq!(seen[1], Duration::from_millis(500));
        assert_eq!(*seen.last().expect("delays"), BACKOFF_MAX);
    }

    #[test]
    fn a_waiting_workload_is_described_as_kubelet_does() {
        let back_off = BackOff {
            delay: Duration::from_secs(4),
            until: "2026-01-01T10:00:02.25Z".parse().expect("timestamp"),
            last_exit: "exit code 3".to_owned(),
        };
        assert_eq!(
            back_off.describe(5),
            "CrashLoopBackOff: back-off 4s restarting the exited workload (restarts: 5, last exit code 3); next start at 2026-01-01T10:00:02.250Z"
        );
    }
}
