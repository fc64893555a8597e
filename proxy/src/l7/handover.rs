//! [`Handover`]: what a connection's earlier stage (the compact hold, the relay) passes on
//! to the next codec with the connection.

use super::exchange::Routed;

/// What a connection brings to the codec that takes it over.
#[derive(Debug, Default)]
pub(crate) struct Handover {
    /// Its first request, routed already (and held, and dialled, when its sandbox had to be
    /// woken): the codec forwards it without routing it again.
    pub(crate) first: Option<Routed>,
    /// The first request head has not arrived whole yet: it must by then
    /// (`limits.header_read_timeout` from accept), however long the earlier stage took.
    pub(crate) head_by: Option<tokio::time::Instant>,
}
