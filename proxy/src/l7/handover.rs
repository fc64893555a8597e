//! [`Handover`]: what a connection's earlier stage (the compact hold, the relay) passes on
//! to the full HTTP path with the connection.

/// What a compactly held first request brings to the full path.
#[derive(Debug, Default)]
pub(crate) struct Handover {
    /// Its per-IP rate limit was counted already.
    pub(crate) rate_checked: bool,
    /// Its place in the sandbox's release semaphore, kept until its upstream dial.
    pub(crate) release: Option<crate::route::Place>,
}
