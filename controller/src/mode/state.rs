//! The `rouse_controller_sandboxes{state, operating_mode}` gauge, recomputed periodically from
//! the Sandbox cache (Kubernetes mode) or the store (standalone mode). `operating_mode` is
//! upstream's label of the same name (its `agent_sandboxes` gauge, v1.0.11): `Running` or
//! `Suspended`, from the spec.

use std::time::Duration;

use kube::runtime::reflector::Store;
use rouse_shared::api::keys::{condition, reason};
use rouse_shared::api::{OperatingMode, Sandbox};
use rouse_shared::store::{ListParams, Store as SandboxStore};
use tokio_util::sync::CancellationToken;

/// How often the gauge is recomputed; a scan per period, never per reconcile.
const PERIOD: Duration = Duration::from_secs(5);

/// Every state the gauge reports (a fixed, bounded label set).
const STATES: [&str; 5] = ["ready", "pending", "suspended", "expired", "finished"];

/// Every operating mode the gauge reports.
const MODES: [&str; 2] = ["Running", "Suspended"];

/// The state of one sandbox for the gauge.
pub(crate) fn state_of(sandbox: &Sandbox) -> &'static str {
    let ready = sandbox
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == condition::READY));
    match ready.map(|c| (c.status.as_str(), c.reason.as_str())) {
        Some(("True", _)) => "ready",
        Some((_, reason::SANDBOX_SUSPENDED)) => "suspended",
        Some((_, reason::SANDBOX_EXPIRED)) => "expired",
        Some((_, reason::POD_SUCCEEDED | reason::POD_FAILED)) => "finished",
        _ => "pending",
    }
}

/// The operating mode of one sandbox for the gauge.
fn mode_of(sandbox: &Sandbox) -> &'static str {
    match sandbox.spec.effective_operating_mode() {
        OperatingMode::Running => MODES[0],
        OperatingMode::Suspended => MODES[1],
    }
}

/// Counts the sandboxes per (state, mode) and sets every series, zeros included (so a series
/// that emptied reads 0 rather than its last value).
fn report<'a>(sandboxes: impl Iterator<Item = &'a Sandbox>) {
    let mut counts = [[0usize; MODES.len()]; STATES.len()];
    for sandbox in sandboxes {
        let state = STATES.iter().position(|s| *s == state_of(sandbox));
        let mode = MODES.iter().position(|m| *m == mode_of(sandbox));
        if let (Some(s), Some(m)) = (state, mode) {
            counts[s][m] += 1;
        }
    }
    for (state, per_mode) in STATES.iter().zip(counts) {
        for (mode, count) in MODES.iter().zip(per_mode) {
            metrics::gauge!("rouse_controller_sandboxes", "state" => *state, "operating_mode" => *mode)
                .set(count as f64);
        }
    }
}

/// Sets the gauge from the Sandbox cache every period until `stop` (Kubernetes mode).
pub(crate) async fn report_states(sandboxes: Store<Sandbox>, stop: CancellationToken) {
    loop {
        let all = sandboxes.state();
        report(all.iter().map(AsRef::as_ref));
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PERIOD) => {}
        }
    }
}

/// Sets the gauge from a list of `store` every period until `stop` (standalone mode). A failed
/// list leaves the last values and is tried again next period.
pub(crate) async fn report_states_from<S: SandboxStore<Sandbox>>(
    store: S,
    stop: CancellationToken,
) {
    loop {
        match store.list(&ListParams::default()).await {
            Ok(list) => report(list.items.iter()),
            Err(error) => tracing::debug!(%error, "listing sandboxes for the gauge failed"),
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PERIOD) => {}
        }
    }
}
