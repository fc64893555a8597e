//! Kubernetes mode's composition root (`rouse controller`): the Sandbox controller —
//! kube-runtime's applier fed by watches of Sandboxes
//! and of the Pods, Services and PVCs they own (and of the `SandboxSnapshot`s forks start
//! from), behind leader election on a Lease, with Events, metrics and health probes; beside
//! it the extension controllers and the `SandboxSnapshot` controller (which runs on the same
//! watch of snapshots).
//!
//! # Example
//! ```no_run
//! # async fn example(client: kube::Client, store: impl rouse_shared::store::Store<rouse_shared::api::Sandbox> + Clone + 'static) {
//! use rouse_controller::mode::kube::{ControllerConfig, Probes, run};
//! let shutdown = tokio_util::sync::CancellationToken::new();
//! run(client, store, ControllerConfig::default(), Probes::default(), shutdown).await.ok();
//! # }
//! ```

pub(crate) mod context;
mod http;
mod lease;

use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use kube::ResourceExt;
use kube::runtime::controller::{self, trigger_owners, trigger_self, trigger_with};
use kube::runtime::events::{Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::reflector::{self, reflector};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use rouse_shared::api::keys::SANDBOX_NAME_HASH;
use rouse_shared::api::{Sandbox, SandboxSnapshot};
use rouse_shared::store::Store;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

pub use context::{Context, error_policy, reconcile};
pub use http::{Probes, install_metrics, serve_probes};
pub use lease::{LeaderElector, LeaseConfig, LeaseError};

use crate::drive::cached_watch::cached_watch;
use crate::platform::kube::{KubeCache, KubePlatform, PodIndex};
use crate::snapshot::kube::SnapshotFeed;

/// Settings of `rouse controller`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerConfig {
    /// Watch one namespace, or all when `None`.
    pub namespace: Option<String>,
    /// Sandboxes reconciled at once.
    pub concurrency: u16,
    /// DNS suffix of Services, for `status.serviceFQDN`.
    pub cluster_domain: String,
    /// Publish the lifecycle Events of sandboxes (docs/controller.md, "Events").
    pub events: bool,
    /// Reconcile every sandbox at least this often.
    pub resync: Duration,
    /// Leader election; `None` reconciles unconditionally (one replica only!).
    pub leader_election: Option<LeaseConfig>,
    /// The SandboxWarmPool, SandboxClaim and SandboxTemplate controllers.
    pub extensions: crate::extensions::ExtensionsConfig,
    /// The SandboxSnapshot controller (provider, VolumeSnapshotClass).
    pub snapshots: crate::snapshot::kube::KubeSnapshotConfig,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        Self {
            namespace: None,
            concurrency: 16,
            cluster_domain: "cluster.local".to_owned(),
            events: true,
            resync: Duration::from_secs(300),
            leader_election: None,
            extensions: crate::extensions::ExtensionsConfig::default(),
            snapshots: crate::snapshot::kube::KubeSnapshotConfig::default(),
        }
    }
}

/// Why the controller stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A watch's store writer went away (a bug, or shutdown mid-start).
    #[error("watch cache closed before it synced")]
    CacheClosed,
}

/// Runs the controller until `shutdown`; with leader election, only while holding the lease.
pub async fn run<S>(
    client: Client,
    store: S,
    config: ControllerConfig,
    probes: Probes,
    shutdown: CancellationToken,
) -> Result<(), RunError>
where
    S: Store<Sandbox> + Clone + 'static,
{
    let Some(lease) = config.leader_election.clone() else {
        probes.set_leader(true);
        return run_leader(client, store, &config, &probes, shutdown).await;
    };
    let mut elector = LeaderElector::new(client.clone(), lease.clone());
    // A standby replica is healthy and ready: it serves its purpose by waiting.
    probes.set_ready(true);
    while !shutdown.is_cancelled() {
        match elector.try_acquire().await {
            Ok(true) => {}
            Ok(false) => {
                wait(&shutdown, lease.retry_period).await;
                continue;
            }
            Err(e) => {
                warn!(error = %e, "leader election failed");
                wait(&shutdown, lease.retry_period).await;
                continue;
            }
        }
        info!(lease.identity = %lease.identity, "became leader");
        probes.set_leader(true);
        let term = shutdown.child_token();
        let renew = renew_until_lost(&mut elector, &term);
        let work = run_leader(
            client.clone(),
            store.clone(),
            &config,
            &probes,
            term.clone(),
        );
        let (_, result) = tokio::join!(renew, work);
        probes.set_leader(false);
        probes.set_ready(true);
        result?;
        if shutdown.is_cancelled() {
            if let Err(e) = elector.release().await {
                warn!(error = %e, "could not release the lease");
            }
        } else {
            warn!(lease.identity = %lease.identity, "lost the lease; standing by");
        }
    }
    Ok(())
}

/// Renews the lease every retry period; cancels `term` when renewal fails for longer than
/// the lease lasts (another replica may then take over) or when `term` is cancelled.
async fn renew_until_lost(elector: &mut LeaderElector, term: &CancellationToken) {
    let period = elector.config().retry_period;
    let duration = elector.config().duration;
    let mut last_renewed = tokio::time::Instant::now();
    loop {
        wait(term, period).await;
        if term.is_cancelled() {
            return;
        }
        match elector.try_acquire().await {
            Ok(true) => last_renewed = tokio::time::Instant::now(),
            Ok(false) => break,
            Err(e) => {
                warn!(error = %e, "lease renewal failed");
                // Stop well before the lease can expire so two leaders never overlap.
                if last_renewed.elapsed() >= duration.saturating_sub(period) {
                    break;
                }
            }
        }
    }
    term.cancel();
}

async fn wait(token: &CancellationToken, period: Duration) {
    tokio::select! {
        () = token.cancelled() => {}
        () = tokio::time::sleep(period) => {}
    }
}

fn scoped<K>(client: Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client, ns),
        None => Api::all(client),
    }
}

/// Runs the watches and the applier until `stop`.
async fn run_leader<S>(
    client: Client,
    store: S,
    config: &ControllerConfig,
    probes: &Probes,
    stop: CancellationToken,
) -> Result<(), RunError>
where
    S: Store<Sandbox> + Clone + 'static,
{
    let ns = config.namespace.as_deref();
    // Only objects carrying the hash label: the controller never caches unrelated Pods.
    let owned = watcher::Config::default().labels(SANDBOX_NAME_HASH);
    let (sandboxes, sandbox_writer) = reflector::store::<Sandbox>();
    let (pods, pod_writer) = reflector::store::<Pod>();
    let (services, service_writer) = reflector::store::<Service>();
    let (claims, claim_writer) = reflector::store::<PersistentVolumeClaim>();
    let (snapshots, snapshot_writer) = reflector::store::<SandboxSnapshot>();

    let sandbox_events = reflector(
        sandbox_writer,
        cached_watch(
            scoped::<Sandbox>(client.clone(), ns),
            watcher::Config::default(),
        ),
    )
    .default_backoff()
    .touched_objects();
    let pod_index = PodIndex::default();
    let pod_events = reflector(
        pod_writer,
        cached_watch(scoped::<Pod>(client.clone(), ns), owned.clone()),
    )
    .default_backoff()
    .inspect_ok({
        let pod_index = pod_index.clone();
        move |event| pod_index.apply(event)
    })
    .touched_objects();
    let service_events = reflector(
        service_writer,
        cached_watch(scoped::<Service>(client.clone(), ns), owned.clone()),
    )
    .default_backoff()
    .touched_objects();
    let claim_events = reflector(
        claim_writer,
        cached_watch(scoped::<PersistentVolumeClaim>(client.clone(), ns), owned),
    )
    .default_backoff()
    .touched_objects();
    // The one watch of snapshots: forks read its cache, and it feeds the snapshot controller.
    let (snapshot_feed, snapshot_events) = SnapshotFeed::share(
        snapshots.clone(),
        reflector(
            snapshot_writer,
            cached_watch(
                scoped::<SandboxSnapshot>(client.clone(), ns),
                watcher::Config::default(),
            ),
        )
        .default_backoff()
        .touched_objects(),
    );
    // A fork waiting for its snapshot starts as soon as the snapshot changes.
    let forks = {
        let sandboxes = sandboxes.clone();
        move |snapshot: SandboxSnapshot| {
            let name = snapshot.name_any();
            let namespace = snapshot.namespace();
            sandboxes
                .state()
                .into_iter()
                .filter(|s| s.namespace() == namespace)
                .filter(|s| {
                    s.spec
                        .restore_from
                        .as_ref()
                        .is_some_and(|r| r.snapshot_name == name)
                })
                .map(|s| ObjectRef::from_obj(s.as_ref()))
                .collect::<Vec<_>>()
        }
    };
    let queue = stream::select_all([
        trigger_self(sandbox_events, ()).boxed(),
        trigger_owners::<Sandbox, _>(pod_events, (), ()).boxed(),
        trigger_owners::<Sandbox, _>(service_events, (), ()).boxed(),
        trigger_owners::<Sandbox, _>(claim_events, (), ()).boxed(),
        trigger_with(snapshot_events, forks).boxed(),
    ])
    .take_until(stop.clone().cancelled_owned());

    let cache = KubeCache {
        pods: pods.clone(),
        services: services.clone(),
        claims: claims.clone(),
        pod_index,
        snapshots: snapshots.clone(),
    };
    let platform = KubePlatform::new(client.clone(), cache, config.cluster_domain.clone());
    let recorder = config.events.then(|| {
        Recorder::new(
            client.clone(),
            Reporter {
                controller: "rouse-controller".to_owned(),
                instance: config.leader_election.as_ref().map(|l| l.identity.clone()),
            },
        )
    });
    let ctx = Arc::new(Context::new(store, platform, recorder, config.resync));

    // Reconciles wait for every cache: an empty Pod cache would make every sandbox look new.
    let synced = {
        let (sandboxes, pods, services, claims, snapshots) = (
            sandboxes.clone(),
            pods.clone(),
            services.clone(),
            claims.clone(),
            snapshots.clone(),
        );
        let probes = probes.clone();
        async move {
            let ok = sandboxes.wait_until_ready().await.is_ok()
                && pods.wait_until_ready().await.is_ok()
                && services.wait_until_ready().await.is_ok()
                && claims.wait_until_ready().await.is_ok()
                && snapshots.wait_until_ready().await.is_ok();
            if ok {
                probes.set_ready(true);
            }
            ok
        }
        .shared()
    };
    let gauges = crate::mode::state::report_states(sandboxes.clone(), stop.clone());
    let reconcile_ctx = ctx.clone();
    let applier = controller::applier(
        move |obj, ctx| {
            let synced = synced.clone();
            async move {
                synced.await;
                reconcile(obj, ctx).await
            }
            .boxed()
        },
        error_policy,
        reconcile_ctx,
        sandboxes,
        queue,
        controller::Config::default().concurrency(config.concurrency),
    )
    .for_each(|result| async move {
        if let Err(e) = result {
            match e {
                controller::Error::ObjectNotFound(_) => {}
                e => tracing::debug!(error = %e, "controller event"),
            }
        }
    });
    // Pools, claims and templates run beside the Sandbox applier, under the same lease.
    let extensions = crate::extensions::kube::run(
        client.clone(),
        config.namespace.clone(),
        config.extensions.clone(),
        stop.clone(),
    );
    let snapshot_controller = crate::snapshot::kube::run(
        client.clone(),
        config.namespace.clone(),
        config.snapshots.clone(),
        snapshot_feed,
        stop.clone(),
    );
    tokio::join!(applier, gauges, extensions, snapshot_controller);
    drop(ctx);
    Ok(())
}
