//! `SandboxSnapshot`s in Kubernetes mode: a kube-runtime `Controller` of the snapshots, also
//! triggered by the objects each one owns, running the pure plan of the configured provider
//! (each provider a folder: `plan.rs`, pure, and `reconcile.rs`, its reads and writes —
//! [`csi`], [`gke`]; what both share: [`plan`], [`ownership`], `context`) and writing through
//! the [`KubeStore`](rouse_shared::store::KubeStore).
//!
//! The controller runs beside the Sandbox controller under the same lease, on that
//! controller's watch of the snapshots ([`SnapshotFeed`]); it watches the kind of object its
//! provider makes (labelled ones only) and reads them from that watch's cache
//! ([`owned`]). Its other reads go to the API server (the sandbox, its PVCs, a `PodSnapshot`):
//! a few GETs per snapshot in progress; a settled snapshot (`Ready`, `Failed`) costs nothing.

mod context;
pub mod csi;
mod feed;
pub mod gke;
mod owned;
pub mod ownership;
pub mod plan;

pub use context::{KubeSnapshotConfig, KubeSnapshotProvider, SnapshotError};
pub use feed::SnapshotFeed;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::DynamicObject;
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use rouse_shared::api::SandboxSnapshot;
use rouse_shared::store::{KubeStore, ObjectKey};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use crate::drive::cached_watch::cached_watch;
use crate::drive::{KeyedBackoff, RetryBackoff};
use context::{Context, RETRY_MAX};
use ownership::SNAPSHOT_UID_LABEL;
use plan::in_progress;

/// Runs the snapshot controller on `feed` until `stop`.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    config: KubeSnapshotConfig,
    feed: SnapshotFeed,
    stop: CancellationToken,
) {
    let controller_config =
        kube::runtime::controller::Config::default().concurrency(config.concurrency.max(1));
    let owned = match config.provider {
        KubeSnapshotProvider::Csi => csi::plan::api_resource(),
        KubeSnapshotProvider::Gke => gke::plan::trigger_resource(),
    };
    let owned_api: Api<DynamicObject> = match namespace.as_deref() {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &owned),
        None => Api::all_with(client.clone(), &owned),
    };
    let (snapshots, triggers) = feed.into_parts();
    let mut controller = Controller::for_stream(triggers, snapshots).with_config(controller_config);
    // A kind the cluster does not serve is not watched: its watch would fail forever, and
    // kube-runtime backs off the whole trigger stream on each failure, starving the
    // snapshots' own triggers. Creating one then fails the snapshot with a clear message.
    let mut owned_cache = None;
    if served(&owned_api).await {
        let writer = reflector::store::Writer::new(owned.clone());
        owned_cache = Some(writer.as_reader());
        // Only objects this controller labelled are watched.
        let wc = watcher::Config::default().labels(SNAPSHOT_UID_LABEL);
        let watch = reflector::reflector(writer, cached_watch(owned_api, wc))
            .default_backoff()
            .touched_objects();
        controller = controller.owns_stream_with(watch, owned);
    } else {
        warn!(
            kind = %owned.kind,
            group = %owned.group,
            "the cluster does not serve the kind this snapshot provider makes; snapshots will fail"
        );
    }
    let failures = KeyedBackoff::new(RetryBackoff {
        min: config.retry_min,
        max: RETRY_MAX,
    });
    let ctx = Arc::new(Context {
        store: KubeStore::new(client.clone()),
        client,
        config,
        owned: owned_cache,
        failures,
    });
    let running = controller
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .instrument(tracing::info_span!("snapshot_controller"));
    tokio::pin!(running);
    tokio::select! {
        () = &mut running => {}
        () = stop.cancelled() => {
            // kube-runtime's graceful shutdown waits for the snapshot cache to sync even when
            // the stop came first, which may then never happen: bound the wait.
            if tokio::time::timeout(SHUTDOWN_DRAIN, running).await.is_err() {
                warn!("the snapshot controller did not stop in time; dropped");
            }
        }
    }
}

/// How long shutdown waits for running snapshot reconciles.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(5);

/// Whether the API server serves the resource of `api` (a 404 on a list means it does not;
/// any other answer, including other errors, counts as served).
async fn served(api: &Api<DynamicObject>) -> bool {
    let probe = kube::api::ListParams::default().limit(1);
    !matches!(
        api.list_metadata(&probe).await,
        Err(kube::Error::Api(status)) if status.code == 404
    )
}

fn error_policy(
    snapshot: Arc<SandboxSnapshot>,
    error: &SnapshotError,
    ctx: Arc<Context>,
) -> Action {
    let key = ObjectKey::of(snapshot.as_ref());
    let (_, delay) = ctx.failures.failed(&key);
    warn!(snapshot.key = %key, %error, retry.after_ms = delay.as_millis() as u64, "snapshot reconcile failed");
    metrics::counter!("rouse_controller_snapshot_reconciles_total", "result" => error.metric_label())
        .increment(1);
    Action::requeue(delay)
}

async fn reconcile(
    snapshot: Arc<SandboxSnapshot>,
    ctx: Arc<Context>,
) -> Result<Action, SnapshotError> {
    let key = ObjectKey::of(snapshot.as_ref());
    let span = tracing::info_span!("reconcile_snapshot", snapshot.key = %key);
    let result = async {
        if !in_progress(&snapshot) {
            return Ok(Action::await_change());
        }
        match ctx.config.provider {
            KubeSnapshotProvider::Csi => csi::reconcile::reconcile(&snapshot, &ctx).await,
            KubeSnapshotProvider::Gke => gke::reconcile::reconcile(&snapshot, &ctx).await,
        }
    }
    .instrument(span)
    .await;
    if result.is_ok() {
        ctx.failures.succeeded(&key);
        metrics::counter!("rouse_controller_snapshot_reconciles_total", "result" => "ok")
            .increment(1);
    }
    result
}
