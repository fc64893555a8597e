//! The standalone driver's claim batches: a batch of claim keys through
//! [`reconcile_claims`], each result recorded in the same metrics as a single reconcile.

use std::time::Duration;

use jiff::Timestamp;
use rouse_shared::store::ObjectKey;

use super::router::Work;
use super::{ExtensionsConfig, ExtensionsStore};
use crate::claim::{Reservations, reconcile_claims};

/// Reconciles a batch of claims ([`reconcile_claims`]); one result per claim, recorded in
/// the same metrics as single reconciles.
pub(super) async fn claim_batch<S: ExtensionsStore>(
    store: &S,
    reservations: &Reservations,
    config: &ExtensionsConfig,
    claims: Vec<Work>,
) -> Vec<(Work, Result<Option<Duration>, bool>)> {
    let started = std::time::Instant::now();
    let keys: Vec<ObjectKey> = claims
        .into_iter()
        .filter_map(|w| match w {
            Work::Claim(key) => Some(key),
            Work::Pool(_) => None,
        })
        .collect();
    metrics::histogram!("rouse_controller_claim_batch_size").record(keys.len() as f64);
    let results = reconcile_claims(
        store,
        reservations,
        keys,
        config.concurrency,
        Timestamp::now(),
    )
    .await;
    let elapsed = started.elapsed().as_secs_f64();
    results
        .into_iter()
        .map(|(key, result)| {
            let label = match &result {
                Ok(_) => "ok",
                Err(e) => {
                    tracing::warn!(error = %e, "reconcile failed");
                    e.metric_label()
                }
            };
            metrics::histogram!("rouse_controller_extension_reconcile_duration_seconds", "kind" => "sandboxclaim")
                .record(elapsed);
            metrics::counter!("rouse_controller_extension_reconciles_total", "kind" => "sandboxclaim", "result" => label)
                .increment(1);
            let result = match result {
                Ok(outcome) => Ok(outcome.and_then(|o| o.requeue_after)),
                Err(e) => Err(e.is_retryable()),
            };
            (Work::Claim(key), result)
        })
        .collect()
}
