//! The `rouse_controller_sandboxes{state}` gauge, recomputed from the Sandbox cache.

use std::time::Duration;

use kube::runtime::reflector::Store;
use rouse_shared::api::Sandbox;
use rouse_shared::api::keys::{condition, reason};
use tokio_util::sync::CancellationToken;

/// How often the gauge is recomputed; a scan of the cache per period, never per reconcile.
const PERIOD: Duration = Duration::from_secs(5);

/// Every state the gauge reports (a fixed, bounded label set).
const STATES: [&str; 5] = ["ready", "pending", "suspended", "expired", "finished"];

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

/// Sets the gauge every period until `stop`.
pub(crate) async fn report_states(sandboxes: Store<Sandbox>, stop: CancellationToken) {
    loop {
        let mut counts = [0usize; STATES.len()];
        for sandbox in sandboxes.state() {
            let state = state_of(&sandbox);
            if let Some(i) = STATES.iter().position(|s| *s == state) {
                counts[i] += 1;
            }
        }
        for (state, count) in STATES.iter().zip(counts) {
            metrics::gauge!("rouse_controller_sandboxes", "state" => *state).set(count as f64);
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(PERIOD) => {}
        }
    }
}
