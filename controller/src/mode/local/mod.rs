//! Standalone mode's composition root: what `rouse up` runs besides the proxy, on the
//! embedded store and the local platform — the sandboxes ([`sandboxes`]), the snapshots
//! ([`snapshots`]), the warm pools and claims (`crate::extensions`), each on the one
//! store-watch driver, and the REST API. The binary keeps only process wiring: config,
//! signals, the proxy and the hooks that join it to the platform.
//!
//! Also here, for that wiring: the direct wake ([`DirectWaker`]: the proxy starts a workload
//! on the platform first, the store's write follows) and [`mark_not_ready`] (what the last run
//! left Ready, before the proxy serves).

mod direct;
mod restore;
pub mod sandboxes;
pub mod snapshots;
mod stale;

use tokio::net::TcpListener;
use tokio::task::JoinError;
use tokio_util::sync::CancellationToken;

pub use direct::{DirectWake, DirectWaker};
pub use sandboxes::{DriverConfig, DriverError};
pub use stale::mark_not_ready;

use crate::api::{self, ApiState};
use crate::extensions::ExtensionsConfig;
use crate::platform::local::LocalPlatform;
use crate::store::EmbeddedStore;

/// What standalone mode runs on, and with which settings.
pub struct LocalMode {
    /// The objects.
    pub store: EmbeddedStore,
    /// Where the workloads run.
    pub platform: LocalPlatform,
    /// The REST API: its bound listener and its state.
    pub api: (TcpListener, ApiState<EmbeddedStore>),
    /// The sandbox driver's settings.
    pub sandboxes: DriverConfig,
    /// The pool and claim driver's settings.
    pub extensions: ExtensionsConfig,
}

/// Why standalone mode stopped before it was asked to.
#[derive(Debug, thiserror::Error)]
pub enum LocalError {
    /// The sandbox driver returned on its own.
    #[error("the sandbox reconciler stopped unexpectedly")]
    Stopped,
    /// The sandbox driver could not run.
    #[error("the sandbox reconciler failed")]
    Driver(#[source] DriverError),
    /// The sandbox driver's task panicked.
    #[error("the sandbox reconciler panicked")]
    Panicked(#[source] JoinError),
}

impl LocalError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            LocalError::Stopped => "stopped",
            LocalError::Driver(e) => e.metric_label(),
            LocalError::Panicked(_) => "panicked",
        }
    }
}

/// Runs the drivers and the REST API until `shutdown`, then drains them all (the sandbox
/// driver stops every workload last); returns early, after stopping the others, when the
/// sandbox driver ends on its own.
///
/// # Example
/// ```no_run
/// # async fn demo(mode: rouse_controller::mode::local::LocalMode) {
/// let shutdown = tokio_util::sync::CancellationToken::new();
/// if let Err(error) = rouse_controller::mode::local::run(mode, shutdown).await {
///     eprintln!("{error}");
/// }
/// # }
/// ```
pub async fn run(mode: LocalMode, shutdown: CancellationToken) -> Result<(), LocalError> {
    let LocalMode {
        store,
        platform,
        api: (listener, state),
        sandboxes: sandbox_config,
        extensions: extension_config,
    } = mode;
    let stop = shutdown.child_token();
    // Snapshots are taken on the same platform the sandbox driver runs.
    let snapshots = tokio::spawn(snapshots::run(
        store.clone(),
        platform.clone(),
        stop.clone(),
    ));
    let mut sandboxes = tokio::spawn(sandboxes::run_with(
        store.clone(),
        platform,
        sandbox_config,
        stop.clone(),
    ));
    // Warm pools and claims: their members and sandboxes are run by the sandbox driver.
    let extensions = tokio::spawn(crate::extensions::run_standalone(
        store,
        extension_config,
        stop.clone(),
    ));
    let api = tokio::spawn(api::serve(listener, state, stop.clone()));

    let failure = tokio::select! {
        () = shutdown.cancelled() => None,
        // The sandbox driver ending on its own is a failure: stop everything else.
        result = &mut sandboxes => Some(match result {
            Ok(Ok(())) => LocalError::Stopped,
            Ok(Err(error)) => LocalError::Driver(error),
            Err(error) => LocalError::Panicked(error),
        }),
    };
    stop.cancel();
    match api.await {
        Ok(Ok(())) => {}
        Ok(Err(error)) => tracing::error!(%error, "the api stopped with an error"),
        Err(error) => tracing::error!(%error, "the api task failed"),
    }
    if let Err(error) = snapshots.await {
        tracing::error!(%error, "the snapshot driver task failed");
    }
    if let Err(error) = extensions.await {
        tracing::error!(%error, "the pool and claim driver task failed");
    }
    if failure.is_none() {
        match sandboxes.await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => tracing::error!(%error, "stopping sandboxes failed"),
            Err(error) => tracing::error!(%error, "the reconciler task failed"),
        }
    }
    failure.map_or(Ok(()), Err)
}
