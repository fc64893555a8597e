//! [`Handover`]: what a connection's earlier stage (the compact hold, the relay) passes on
//! to the full HTTP path with the connection.

/// What a compactly held first request (or a connection's first stage) brings to the full
/// path.
#[derive(Debug, Default)]
pub(crate) struct Handover {
    /// Its per-IP rate limit was counted already.
    pub(crate) rate_checked: bool,
    /// Its place in the sandbox's release semaphore, kept until its upstream dial.
    pub(crate) release: Option<crate::route::Place>,
    /// The first request head has not arrived whole yet: it must by then
    /// (`limits.header_read_timeout` from accept), however long the earlier stage took.
    pub(crate) head_by: Option<tokio::time::Instant>,
}
