//! The data plane's live view of a sandbox's traffic, as the local platform reports it to
//! idle suspend.
//!
//! In standalone mode the proxy runs in the same process as the reconciler, so idle suspend
//! need not rely on the proxy's coalesced `lastActivityTime` reports alone (they come at most
//! once per report interval, which may be longer than a sandbox's idle timeout): it asks the
//! proxy directly. The controller does not depend on the proxy; `rouse up` joins the two
//! through this trait.

use jiff::Timestamp;
use rouse_shared::store::ObjectKey;

/// Answers when a sandbox last had traffic.
pub trait ActivityView: Send + Sync + 'static {
    /// Now while a connection to the sandbox is open, else when its last connection closed;
    /// `None` when none was seen.
    fn last_activity(&self, key: &ObjectKey) -> Option<Timestamp>;
}
