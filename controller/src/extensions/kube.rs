//! Kubernetes mode for the extension kinds: three kube-runtime `Controller`s around the same
//! generic reconciles standalone mode runs, writing through a [`KubeStore`].
//!
//! - Claims: triggered by the claim, by the Sandboxes it controls, and by its pool appearing.
//! - Pools: triggered by the pool, by its members (including a member a claim just adopted,
//!   which no longer names the pool but keeps its template label), and by its template
//!   changing.
//! - Templates: keep the managed NetworkPolicy `<template>-network-policy` (or delete it
//!   under `Unmanaged`).
//!
//! A pool reconcile lists its members from the API server (a consistent list), so a lagging
//! watch can delay it but never make it act on stale members; its expectations cover its own
//! writes in flight all the same. A claim reads the members from a watch-fed cache of every
//! warm pool member instead ([`MemberCache`]): a burst of claims would otherwise make one
//! consistent list of the whole pool each, and the cache's lag is covered there (a version
//! seen taken is skipped; no Ready member in the cache → a list before a cold start).

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use jiff::Timestamp;
use k8s_openapi::api::networking::v1::NetworkPolicy;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use rouse_shared::api::keys::template_ref;
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use rouse_shared::store::{KubeStore, ObjectKey};
use tokio_util::sync::CancellationToken;
use tracing::{Instrument, warn};

use super::ExtensionsConfig;
use super::cached::CachedStore;
use super::router::sandbox_controller;
use crate::claim::{MemberCache, Reservations, reconcile_claim};
use crate::drive::cached_watch::cached_watch;
use crate::drive::{KeyedBackoff, RetryBackoff};
use crate::pool::{Expectations, reconcile_pool};
use crate::template::{NETWORK_POLICY_SUFFIX, network_policy};

/// Why an extension reconcile failed (kube-runtime needs one error type per controller).
#[derive(Debug, thiserror::Error)]
pub enum ExtensionError {
    /// A claim reconcile failed.
    #[error(transparent)]
    Claim(#[from] crate::claim::ClaimError),
    /// A pool reconcile failed.
    #[error(transparent)]
    Pool(#[from] crate::pool::PoolError),
    /// Writing a template's NetworkPolicy failed.
    #[error("network policy of template {template}: {source}")]
    NetworkPolicy {
        /// The template.
        template: String,
        /// What failed.
        #[source]
        source: kube::Error,
    },
}

impl ExtensionError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ExtensionError::Claim(e) => e.metric_label(),
            ExtensionError::Pool(e) => e.metric_label(),
            ExtensionError::NetworkPolicy { .. } => "network_policy",
        }
    }
}

/// State shared by the three controllers.
pub struct Context {
    /// Pools read everything from the API server (a template change must not be missed).
    store: KubeStore,
    /// Claims read pools and templates from caches.
    claim_store: CachedStore,
    client: Client,
    expectations: Expectations,
    reservations: Reservations,
    config: ExtensionsConfig,
    /// Consecutive failures per object, for the retry backoff (`retry_min` doubling up to
    /// `retry_max`, as in standalone mode); cleared on success.
    failures: KeyedBackoff<(&'static str, ObjectKey)>,
}

fn api<K>(client: &Client, namespace: Option<&str>) -> Api<K>
where
    K: kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>,
{
    match namespace {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

/// The `kind` label of a reconciled object.
trait Named {
    const KIND: &'static str;
}

impl Named for SandboxClaim {
    const KIND: &'static str = "sandboxclaim";
}

impl Named for SandboxWarmPool {
    const KIND: &'static str = "sandboxwarmpool";
}

impl Named for SandboxTemplate {
    const KIND: &'static str = "sandboxtemplate";
}

/// Counts a successful reconcile of `obj`, starts its backoff afresh, and turns its requeue
/// into an [`Action`].
fn done<K: Named + Resource>(obj: &K, ctx: &Context, requeue: Option<Duration>) -> Action {
    ctx.failures.succeeded(&(K::KIND, ObjectKey::of(obj)));
    metrics::counter!("rouse_controller_extension_reconciles_total", "kind" => K::KIND, "result" => "ok")
        .increment(1);
    requeue.map_or_else(Action::await_change, Action::requeue)
}

/// Retries a failed reconcile with the per-object backoff.
fn error_policy<K: Named + Resource>(
    obj: Arc<K>,
    error: &ExtensionError,
    ctx: Arc<Context>,
) -> Action {
    let (_, delay) = ctx.failures.failed(&(K::KIND, ObjectKey::of(obj.as_ref())));
    warn!(%error, retry.after_ms = delay.as_millis() as u64, "reconcile failed");
    metrics::counter!("rouse_controller_extension_reconciles_total", "kind" => K::KIND, "result" => error.metric_label())
        .increment(1);
    Action::requeue(delay)
}

async fn reconcile_claim_object(
    claim: Arc<SandboxClaim>,
    ctx: Arc<Context>,
) -> Result<Action, ExtensionError> {
    let outcome = reconcile_claim(
        &ctx.claim_store,
        &ctx.reservations,
        &claim,
        Timestamp::now(),
    )
    .await?;
    Ok(done(claim.as_ref(), &ctx, outcome.requeue_after))
}

async fn reconcile_pool_object(
    pool: Arc<SandboxWarmPool>,
    ctx: Arc<Context>,
) -> Result<Action, ExtensionError> {
    let outcome = reconcile_pool(
        &ctx.store,
        &ctx.expectations,
        &pool,
        ctx.config.stuck_after,
        Timestamp::now(),
    )
    .await?;
    Ok(done(pool.as_ref(), &ctx, outcome.requeue_after))
}

/// Creates, updates or (under `Unmanaged`) deletes the template's NetworkPolicy.
async fn reconcile_template_object(
    template: Arc<SandboxTemplate>,
    ctx: Arc<Context>,
) -> Result<Action, ExtensionError> {
    let name = template.name_any();
    let ns = template.namespace().unwrap_or_else(|| "default".to_owned());
    let policies: Api<NetworkPolicy> = Api::namespaced(ctx.client.clone(), &ns);
    let fail = |source| ExtensionError::NetworkPolicy {
        template: format!("{ns}/{name}"),
        source,
    };
    let policy_name = format!("{name}{NETWORK_POLICY_SUFFIX}");
    let existing = policies.get_opt(&policy_name).await.map_err(fail)?;
    let owned = |p: &NetworkPolicy| {
        p.owner_references()
            .iter()
            .any(|o| Some(&o.uid) == template.metadata.uid.as_ref())
    };
    match (network_policy(&template), existing) {
        (None, Some(p)) if owned(&p) => {
            policies
                .delete(&policy_name, &DeleteParams::default())
                .await
                .map_err(fail)?;
        }
        (None, _) => {}
        (Some(want), None) => {
            policies
                .create(&PostParams::default(), &want)
                .await
                .map_err(fail)?;
        }
        (Some(want), Some(have)) if owned(&have) && have.spec != want.spec => {
            let patch = serde_json::json!({"spec": want.spec});
            policies
                .patch(&policy_name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map_err(fail)?;
        }
        (Some(_), Some(_)) => {}
    }
    Ok(done(template.as_ref(), &ctx, None))
}

/// A controller of `api`'s objects, as `Controller::new` makes it, whose cache holds them
/// without their managed fields.
fn cached_controller<K>(api: Api<K>, wc: watcher::Config) -> Controller<K>
where
    K: Resource<DynamicType = ()> + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    K: Send + Sync + 'static,
{
    let (reader, writer) = reflector::store();
    let objects = reflector::reflector(writer, cached_watch(api, wc)).applied_objects();
    Controller::for_stream(objects, reader)
}

/// Runs the claim, pool and template controllers until `stop`.
pub async fn run(
    client: Client,
    namespace: Option<String>,
    config: ExtensionsConfig,
    stop: CancellationToken,
) {
    let ns = namespace.as_deref();
    let concurrency = u16::try_from(config.concurrency.max(1)).unwrap_or(u16::MAX);
    // Claims read the pools' members from this cache, not a list per reconcile.
    let (member_reader, member_writer) = reflector::store();
    let member_watch = reflector::reflector(
        member_writer,
        cached_watch(api::<Sandbox>(&client, ns), MemberCache::watch_config()).default_backoff(),
    )
    .for_each(|_| async {});
    let wc = watcher::Config::default();
    let controller_config = kube::runtime::controller::Config::default().concurrency(concurrency);
    let claims = cached_controller(api::<SandboxClaim>(&client, ns), wc.clone())
        .with_config(controller_config.clone());
    let pools = cached_controller(api::<SandboxWarmPool>(&client, ns), wc.clone())
        .with_config(controller_config.clone());
    let templates = cached_controller(api::<SandboxTemplate>(&client, ns), wc.clone())
        .with_config(controller_config);
    // Claims read pools and templates from the caches of their own controllers.
    let store = KubeStore::new(client.clone());
    let claim_store = CachedStore::new(store.clone(), pools.store(), templates.store());
    let ctx = Arc::new(Context {
        store,
        claim_store,
        client: client.clone(),
        expectations: Expectations::default(),
        reservations: Reservations::reading_from(MemberCache::new(member_reader)),
        failures: KeyedBackoff::new(RetryBackoff {
            min: config.retry_min,
            max: config.retry_max,
        }),
        config,
    });

    let claim_cache = claims.store();
    let claims = claims
        .owns(api::<Sandbox>(&client, ns), wc.clone())
        .watches(
            api::<SandboxWarmPool>(&client, ns),
            wc.clone(),
            move |pool| {
                // A claim waiting for its pool starts once the pool exists.
                let name = pool.name_any();
                let pool_ns = pool.namespace();
                claim_cache
                    .state()
                    .into_iter()
                    .filter(|c| c.spec.warm_pool_ref.name == name && c.namespace() == pool_ns)
                    .filter(|c| c.status.as_ref().is_none_or(|s| s.sandbox.is_none()))
                    .map(|c| ObjectRef::from_obj(c.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(reconcile_claim_object, error_policy, ctx.clone())
        .for_each(|_| async {});

    let pool_cache = pools.store();
    let member_pools = pool_cache.clone();
    let expectations = ctx.expectations.clone();
    let pools = pools
        .watches(api::<Sandbox>(&client, ns), wc.clone(), move |sandbox| {
            let sandbox_ns = sandbox.namespace().unwrap_or_default();
            expectations.seen(&sandbox_ns, &sandbox.name_any());
            // A member names its pool; one a claim just adopted no longer does, but keeps its
            // template annotation, so the pools of that template look again (stateless, unlike a
            // map of former members, which a watch without delete events could not prune).
            let owner = sandbox_controller(&sandbox, "SandboxWarmPool");
            let template = template_ref(sandbox.meta()).map(str::to_owned);
            member_pools
                .state()
                .into_iter()
                .filter(|p| p.namespace().as_deref() == Some(sandbox_ns.as_str()))
                .filter(|p| {
                    owner.as_deref() == Some(p.name_any().as_str())
                        || template.as_deref() == Some(p.spec.sandbox_template_ref.name.as_str())
                })
                .map(|p| ObjectRef::from_obj(p.as_ref()))
                .collect::<Vec<_>>()
        })
        .watches(
            api::<SandboxTemplate>(&client, ns),
            wc.clone(),
            move |template| {
                let name = template.name_any();
                let template_ns = template.namespace();
                pool_cache
                    .state()
                    .into_iter()
                    .filter(|p| {
                        p.spec.sandbox_template_ref.name == name && p.namespace() == template_ns
                    })
                    .map(|p| ObjectRef::from_obj(p.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .graceful_shutdown_on(stop.clone().cancelled_owned())
        .run(reconcile_pool_object, error_policy, ctx.clone())
        .for_each(|_| async {});

    let templates = templates
        .owns(api::<NetworkPolicy>(&client, ns), wc)
        .graceful_shutdown_on(stop.cancelled_owned())
        .run(reconcile_template_object, error_policy, ctx)
        .for_each(|_| async {});

    // The member watch runs until the controllers have stopped.
    let controllers = async {
        tokio::join!(
            claims.instrument(tracing::info_span!("claim_controller")),
            pools.instrument(tracing::info_span!("pool_controller")),
            templates.instrument(tracing::info_span!("template_controller")),
        );
    };
    tokio::select! {
        () = controllers => {}
        () = member_watch => warn!("the warm pool member watch ended"),
    }
}
