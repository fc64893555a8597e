//! Behaviour upstream agent-sandbox's own end-to-end suite checks, through the pool and claim
//! driver in both modes (the embedded store, and the real kube client against the fake API
//! server): a claim is stamped `controller-first-observed-at` once, with nanoseconds; a
//! `Recreate` pool switched to another template with an identical spec replaces its members;
//! a cold sandbox the API server refuses as invalid ends the claim `Ready=False` with
//! `InvalidConfiguration` instead of a retry loop.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use kube::ResourceExt;
use rouse_controller::extensions::{ExtensionsConfig, ExtensionsStore, run_standalone};
use rouse_controller::store::{EmbeddedStore, STORE_FILE_NAME};
use rouse_shared::api::keys::{CONTROLLER_FIRST_OBSERVED_AT, SANDBOX_TEMPLATE_REF};
use rouse_shared::api::{
    LocalObjectReference, PodTemplate, Sandbox, SandboxClaim, SandboxClaimSpec, SandboxTemplate,
    SandboxTemplateSpec, SandboxWarmPool, SandboxWarmPoolSpec, WarmPoolUpdateStrategy,
    WarmPoolUpdateStrategyType,
};
use rouse_shared::store::{KubeStore, ListParams, ObjectKey, Patch, Store};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;
use tokio_util::sync::CancellationToken;

const NS: &str = "default";
const DEADLINE: Duration = Duration::from_secs(60);

/// Polls `probe` until it returns `Ok`, failing after [`DEADLINE`] with `what` and the last
/// value seen.
async fn wait_for<T, E: Debug, F, Fut>(what: &str, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let end = tokio::time::Instant::now() + DEADLINE;
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(last) if tokio::time::Instant::now() >= end => {
                panic!("timed out waiting for {what}; last seen: {last:?}")
            }
            // A poll with a deadline, not a sleep that hopes.
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

fn template(name: &str) -> SandboxTemplate {
    let spec = SandboxTemplateSpec {
        pod_template: PodTemplate {
            spec: PodSpec {
                containers: vec![Container {
                    name: "pause".into(),
                    image: Some("registry.k8s.io/pause:3.10".into()),
                    ..Container::default()
                }],
                ..PodSpec::default()
            },
            ..PodTemplate::default()
        },
        ..SandboxTemplateSpec::default()
    };
    let mut t = SandboxTemplate::new(name, spec);
    t.metadata.namespace = Some(NS.into());
    t
}

fn pool(name: &str, template: &str, replicas: i32, recreate: bool) -> SandboxWarmPool {
    let mut p = SandboxWarmPool::new(
        name,
        SandboxWarmPoolSpec {
            replicas,
            sandbox_template_ref: LocalObjectReference {
                name: template.into(),
            },
            update_strategy: recreate.then_some(WarmPoolUpdateStrategy {
                type_: WarmPoolUpdateStrategyType::Recreate,
            }),
            readiness_grace_period_seconds: None,
        },
    );
    p.metadata.namespace = Some(NS.into());
    p
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(NS, name)
}

/// The pool and claim driver on `store`; stops when the token is cancelled.
fn driver<S: ExtensionsStore>(store: &S) -> (CancellationToken, tokio::task::JoinHandle<()>) {
    let stop = CancellationToken::new();
    let task = tokio::spawn(run_standalone(
        store.clone(),
        ExtensionsConfig::default(),
        stop.clone(),
    ));
    (stop, task)
}

/// The live members of pool `name`.
async fn members<S: Store<Sandbox>>(store: &S, pool: &str) -> Vec<Sandbox> {
    let list = store
        .list(&ListParams::namespace(NS))
        .await
        .expect("list sandboxes");
    list.items
        .into_iter()
        .filter(|s| s.metadata.deletion_timestamp.is_none())
        .filter(|s| s.owner_references().iter().any(|o| o.name == pool))
        .collect()
}

async fn first_observed<S: ExtensionsStore>(store: S) {
    let (stop, task) = driver(&store);
    Store::<SandboxTemplate>::create(&store, &template("obs-anno-template"))
        .await
        .expect("template");
    Store::<SandboxWarmPool>::create(
        &store,
        &pool("obs-anno-warmpool", "obs-anno-template", 0, false),
    )
    .await
    .expect("pool");
    let started = jiff::Timestamp::now();
    let mut claim = SandboxClaim::new(
        "obs-anno-claim",
        SandboxClaimSpec {
            warm_pool_ref: LocalObjectReference {
                name: "obs-anno-warmpool".into(),
            },
            ..SandboxClaimSpec::default()
        },
    );
    claim.metadata.namespace = Some(NS.into());
    Store::<SandboxClaim>::create(&store, &claim)
        .await
        .expect("claim");
    let stamp: String = wait_for("the first-observed annotation", || async {
        let c = Store::<SandboxClaim>::get(&store, &key("obs-anno-claim"))
            .await
            .expect("claim");
        c.annotations()
            .get(CONTROLLER_FIRST_OBSERVED_AT)
            .cloned()
            .ok_or(c.metadata.annotations)
    })
    .await;
    let at: jiff::Timestamp = stamp.parse().expect("RFC 3339");
    assert!(stamp.ends_with('Z'), "UTC: {stamp}");
    assert_ne!(at.subsec_nanosecond(), 0, "sub-second precision: {stamp}");
    assert!(at >= started, "{stamp} is after the claim was made");

    // Written once: a later pass (the one that binds the cold sandbox) keeps it.
    let bound = wait_for("the claim bound to its sandbox", || async {
        let c = Store::<SandboxClaim>::get(&store, &key("obs-anno-claim"))
            .await
            .expect("claim");
        match c.status.as_ref().and_then(|s| s.sandbox.as_ref()) {
            Some(_) => Ok(c),
            None => Err(c.status),
        }
    })
    .await;
    assert_eq!(
        bound.annotations().get(CONTROLLER_FIRST_OBSERVED_AT),
        Some(&stamp)
    );
    stop.cancel();
    task.await.expect("driver");
}

async fn switch_template<S: ExtensionsStore>(store: S) {
    let (stop, task) = driver(&store);
    for name in ["template-a", "template-b"] {
        Store::<SandboxTemplate>::create(&store, &template(name))
            .await
            .expect("template");
    }
    Store::<SandboxWarmPool>::create(&store, &pool("runners", "template-a", 1, true))
        .await
        .expect("pool");
    let first = wait_for("one member", || async {
        let m = members(&store, "runners").await;
        match m.as_slice() {
            [one] => Ok(one.name_any()),
            _ => Err(m.len()),
        }
    })
    .await;
    let patch = Patch::merge(json!({"spec": {"sandboxTemplateRef": {"name": "template-b"}}}))
        .expect("object");
    Store::<SandboxWarmPool>::patch(&store, &key("runners"), &patch)
        .await
        .expect("switch the template");
    let replaced = wait_for("the member replaced from template-b", || async {
        let m = members(&store, "runners").await;
        match m.as_slice() {
            [one] if one.name_any() != first => Ok(one.clone()),
            _ => Err(m.iter().map(ResourceExt::name_any).collect::<Vec<_>>()),
        }
    })
    .await;
    assert_eq!(
        replaced.annotations().get(SANDBOX_TEMPLATE_REF),
        Some(&"template-b".to_owned())
    );
    stop.cancel();
    task.await.expect("driver");
}

fn embedded() -> (tempfile::TempDir, EmbeddedStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&dir.path().join(STORE_FILE_NAME)).expect("store");
    (dir, store)
}

async fn fake_kube() -> (FakeApiServer, KubeStore) {
    let server = FakeApiServer::start().await.expect("fake api server");
    server.set_watch_delay(Duration::from_millis(50));
    let store = KubeStore::new(server.client().expect("client"));
    (server, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_stamped_when_first_observed_standalone() {
    let (_dir, store) = embedded();
    first_observed(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_is_stamped_when_first_observed_kubernetes() {
    let (_server, store) = fake_kube().await;
    first_observed(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_replaces_members_when_the_template_is_switched_standalone() {
    let (_dir, store) = embedded();
    switch_template(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recreate_replaces_members_when_the_template_is_switched_kubernetes() {
    let (_server, store) = fake_kube().await;
    switch_template(store).await;
}

/// Upstream v1.0.4: a sandbox the API server refuses (422, e.g. a name too long for its
/// Service) is a configuration error of the claim, reported in its status (before, the
/// reconcile failed and was retried with a backoff, the status saying nothing).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_cold_sandbox_is_reported() {
    let (server, store) = fake_kube().await;
    // Every create is refused, as a real API server refuses an invalid object every time.
    server.fail_requests("create", "sandboxes", 422, usize::MAX);
    let (stop, task) = driver(&store);
    Store::<SandboxTemplate>::create(&store, &template("python"))
        .await
        .expect("template");
    Store::<SandboxWarmPool>::create(&store, &pool("runners", "python", 0, false))
        .await
        .expect("pool");
    let mut claim = SandboxClaim::new(
        "task",
        SandboxClaimSpec {
            warm_pool_ref: LocalObjectReference {
                name: "runners".into(),
            },
            ..SandboxClaimSpec::default()
        },
    );
    claim.metadata.namespace = Some(NS.into());
    Store::<SandboxClaim>::create(&store, &claim)
        .await
        .expect("claim");
    let ready = wait_for("Ready=False/InvalidConfiguration", || async {
        let c = Store::<SandboxClaim>::get(&store, &key("task"))
            .await
            .expect("claim");
        let ready = c
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
            .cloned();
        match ready {
            Some(r) if r.reason == "InvalidConfiguration" => Ok(r),
            other => Err(other),
        }
    })
    .await;
    assert!(ready.message.contains("invalid"), "{}", ready.message);
    stop.cancel();
    task.await.expect("driver");
}
