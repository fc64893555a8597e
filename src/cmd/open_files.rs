//! The open-file limit of the serving commands (`rouse up`, `rouse proxy`): raised to the hard
//! limit at start (`rouse_proxy::open_files`), logged, and a warning when it is below what
//! `limits.max_connections` needs.

use rouse_proxy::open_files::{needed, raise};

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
