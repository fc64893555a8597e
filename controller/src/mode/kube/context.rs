//! The kube-runtime reconciler of Sandboxes: `reconcile`, `error_policy` and their `Context`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use jiff::Timestamp;
use kube::runtime::controller::Action;
use kube::runtime::events::{Event, EventType, Recorder};
use kube::{Resource, ResourceExt};
use metrics::{counter, histogram};
use rouse_shared::api::Sandbox;
use rouse_shared::store::{ObjectKey, Store};
use tracing::{Instrument, debug, info_span, warn};

use crate::drive::{KeyedBackoff, RetryBackoff};
use crate::platform::PlatformError;
use crate::platform::kube::KubePlatform;
use crate::sandbox::{EventKind, LifecycleEvent, ReconcileError, reconcile_sandbox};

/// The first retry delay after a failed reconcile; doubled per consecutive failure.
const BACKOFF_BASE: Duration = Duration::from_millis(200);
/// The longest retry delay.
const BACKOFF_MAX: Duration = Duration::from_secs(60);

/// What every reconcile shares.
pub struct Context<S> {
    /// The Sandbox store (status and spec writes).
    pub store: S,
    /// Pods, PVCs and Services.
    pub platform: KubePlatform,
    /// Publishes Events; `None` turns Events off.
    pub recorder: Option<Recorder>,
    /// Reconcile again after this long when nothing else asks for it (drift safety net).
    pub resync: Duration,
    /// Consecutive failures per sandbox, for the backoff; entries go on success, so it holds
    /// at most one entry per failing sandbox.
    failures: KeyedBackoff<ObjectKey>,
}

impl<S> Context<S> {
    /// A context; `recorder` is `None` to publish no Events.
    pub fn new(
        store: S,
        platform: KubePlatform,
        recorder: Option<Recorder>,
        resync: Duration,
    ) -> Self {
        Self {
            store,
            platform,
            recorder,
            resync,
            failures: KeyedBackoff::new(RetryBackoff {
                min: BACKOFF_BASE,
                max: BACKOFF_MAX,
            }),
        }
    }
}

/// Reconciles one Sandbox (kube-runtime entry point).
pub async fn reconcile<S: Store<Sandbox>>(
    obj: Arc<Sandbox>,
    ctx: Arc<Context<S>>,
) -> Result<Action, ReconcileError> {
    let key = ObjectKey::of(obj.as_ref());
    let span = info_span!("reconcile", sandbox.key = %key);
    async move {
        let started = Instant::now();
        let result = reconcile_sandbox(&ctx.store, &ctx.platform, &obj, Timestamp::now()).await;
        histogram!("rouse_controller_reconcile_duration_seconds")
            .record(started.elapsed().as_secs_f64());
        let outcome = match result {
            Ok(outcome) => outcome,
            Err(e) => {
                counter!("rouse_controller_reconciles_total", "result" => e.metric_label())
                    .increment(1);
                if let (Some(recorder), Some(event)) = (&ctx.recorder, e.event()) {
                    publish(recorder, &obj, &event).await;
                }
                return Err(e);
            }
        };
        counter!("rouse_controller_reconciles_total", "result" => "ok").increment(1);
        ctx.failures.succeeded(&key);
        if let Some(recorder) = &ctx.recorder {
            for event in &outcome.events {
                publish(recorder, &obj, event).await;
            }
        }
        debug!(
            actions = outcome.actions,
            deleted = outcome.deleted,
            "reconciled"
        );
        if outcome.deleted {
            return Ok(Action::await_change());
        }
        let after = outcome
            .requeue_after
            .map_or(ctx.resync, |d| d.min(ctx.resync));
        Ok(Action::requeue(after))
    }
    .instrument(span)
    .await
}

/// Retries a failed reconcile with a per-sandbox exponential backoff.
pub fn error_policy<S>(obj: Arc<Sandbox>, error: &ReconcileError, ctx: Arc<Context<S>>) -> Action {
    let key = ObjectKey::of(obj.as_ref());
    let conflict = matches!(
        error,
        ReconcileError::Apply {
            source: PlatformError::Conflict { .. },
            ..
        }
    ) || matches!(
        error,
        ReconcileError::Suspend { source, .. } | ReconcileError::PatchStatus { source, .. }
            if matches!(source, rouse_shared::store::StoreError::Conflict { .. })
    );
    let (before, backoff) = ctx.failures.failed(&key);
    let delay = if conflict && before == 0 {
        // A conflict means a newer version exists: retry at once with a fresh read.
        Duration::from_millis(10)
    } else {
        backoff
    };
    warn!(sandbox.key = %key, error = %error, retry.after_ms = delay.as_millis() as u64, "reconcile failed");
    Action::requeue(delay)
}

/// Publishes one lifecycle Event; failures are logged, never fatal.
async fn publish(recorder: &Recorder, sandbox: &Sandbox, event: &LifecycleEvent) {
    let event = Event {
        type_: match event.kind {
            EventKind::Normal => EventType::Normal,
            EventKind::Warning => EventType::Warning,
        },
        reason: event.reason.to_owned(),
        note: Some(event.note.clone()),
        action: "Reconciling".to_owned(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&event, &sandbox.object_ref(&())).await {
        counter!("rouse_controller_event_errors_total").increment(1);
        debug!(sandbox.name = %sandbox.name_any(), error = %e, "could not publish an event");
    }
}
