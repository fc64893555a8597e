//! The `Platform` port as the sandbox core uses it: observe a sandbox's workload, volumes and
//! Service, apply one [`Action`]. The implementations live in `crate::platform` (Kubernetes
//! and local) and depend on this core, never the other way.

use std::future::Future;

use rouse_shared::api::Sandbox;

use super::{Action, Observed};

/// Result of a platform call.
pub type Result<T, E = PlatformError> = std::result::Result<T, E>;

/// Where sandboxes run: observe one sandbox's objects, apply one action to them.
///
/// Both calls take the Sandbox as stored (with its uid and namespace), so owner references
/// and per-sandbox paths can be derived from it. Every action must be idempotent: the
/// reconciler may apply it again after a lagging observation.
pub trait Platform: Send + Sync + 'static {
    /// Reads the state of the sandbox's workloads, volumes and Service.
    fn observe(&self, sandbox: &Sandbox) -> impl Future<Output = Result<Observed>> + Send;

    /// Makes one change.
    fn apply(&self, sandbox: &Sandbox, action: &Action) -> impl Future<Output = Result<()>> + Send;
}

/// Why a platform call failed.
#[derive(Debug, thiserror::Error)]
pub enum PlatformError {
    /// The backend (API server, runtime, file system) failed or could not be reached; a retry
    /// after a backoff may succeed.
    #[error("{what} failed: {message}")]
    Unavailable {
        /// What was being done, e.g. `create pod team-a/alice`.
        what: String,
        /// What went wrong.
        message: String,
        /// The underlying error, if any.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
    /// An object changed or appeared concurrently; observing again will sort it out.
    #[error("{what} conflicted: {message}")]
    Conflict {
        /// What was being done.
        what: String,
        /// What the backend said.
        message: String,
    },
    /// The sandbox asks for something invalid (bad spec, unknown runtime class); a retry
    /// without a spec change fails the same way.
    #[error("{what} is invalid: {message}")]
    Invalid {
        /// What was being done.
        what: String,
        /// Which field is wrong and why.
        message: String,
    },
    /// The platform cannot do this (e.g. checkpoint on a runtime without it).
    #[error("{what} is not supported: {message}")]
    Unsupported {
        /// What was asked.
        what: String,
        /// Why it cannot be done.
        message: String,
    },
}

impl PlatformError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            PlatformError::Unavailable { .. } => "unavailable",
            PlatformError::Conflict { .. } => "conflict",
            PlatformError::Invalid { .. } => "invalid",
            PlatformError::Unsupported { .. } => "unsupported",
        }
    }

    /// True when the same call may succeed later unchanged.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            PlatformError::Unavailable { .. } | PlatformError::Conflict { .. }
        )
    }
}
