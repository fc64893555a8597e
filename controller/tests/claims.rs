//! Warm pools and claims end to end through the pool and claim driver, in both modes: on the
//! embedded store, and through the real kube client against the fake API server with a
//! lagging watch. A stand-in for the Sandbox reconciler marks sandboxes Ready (pool members
//! only while allowed), so every count below is deterministic.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Debug;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use rouse_controller::extensions::{ExtensionsConfig, ExtensionsStore, run_standalone};
use rouse_controller::store::{EmbeddedStore, STORE_FILE_NAME};
use rouse_shared::api::keys::{LAUNCH_TYPE, SANDBOX_NAME, WARM_POOL_SANDBOX};
use rouse_shared::api::{
    ClaimEnvVar, ClaimLifecycle, ClaimShutdownPolicy, LocalObjectReference, PodTemplate, Sandbox,
    SandboxClaim, SandboxClaimSpec, SandboxTemplate, SandboxTemplateSpec, SandboxWarmPool,
    SandboxWarmPoolSpec, WarmPoolUpdateStrategy, WarmPoolUpdateStrategyType,
};
use rouse_shared::store::KubeStore;
use rouse_shared::store::{
    DeleteParams, ListParams, ObjectKey, Patch, Store, StoreObject, WatchEvent,
};
use rouse_testsupport::kube::FakeApiServer;
use serde_json::json;
use tokio::task::JoinHandle;
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
    let mut pause = Duration::from_millis(5);
    loop {
        match probe().await {
            Ok(v) => return v,
            Err(last) if tokio::time::Instant::now() >= end => {
                panic!("timed out waiting for {what}; last seen: {last:?}")
            }
            Err(_) => {}
        }
        // A poll with a deadline, not a sleep that hopes.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

fn template(name: &str) -> SandboxTemplate {
    let mut t = SandboxTemplate::new(
        name,
        SandboxTemplateSpec {
            pod_template: PodTemplate {
                spec: PodSpec {
                    containers: vec![Container {
                        name: "main".into(),
                        command: Some(vec!["python3".into(), "-m".into(), "http.server".into()]),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                },
                ..PodTemplate::default()
            },
            ..SandboxTemplateSpec::default()
        },
    );
    t.metadata.namespace = Some(NS.into());
    t
}

fn pool(name: &str, template: &str, replicas: i32) -> SandboxWarmPool {
    let mut p = SandboxWarmPool::new(
        name,
        SandboxWarmPoolSpec {
            replicas,
            sandbox_template_ref: LocalObjectReference {
                name: template.into(),
            },
            update_strategy: None,
            readiness_grace_period_seconds: None,
        },
    );
    p.metadata.namespace = Some(NS.into());
    p
}

fn claim(name: &str, pool: &str) -> SandboxClaim {
    let mut c = SandboxClaim::new(
        name,
        SandboxClaimSpec {
            warm_pool_ref: LocalObjectReference { name: pool.into() },
            ..SandboxClaimSpec::default()
        },
    );
    c.metadata.namespace = Some(NS.into());
    c
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new(NS, name)
}

fn is_ready(conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]) -> bool {
    conditions
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True")
}

fn ready_reason(claim: &SandboxClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Ready"))
        .map(|c| c.reason.clone())
        .unwrap_or_default()
}

/// Stands in for the Sandbox reconciler: marks sandboxes Ready as they appear; pool members
/// only while `members` is set.
struct Kubelet {
    members: Arc<AtomicBool>,
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Kubelet {
    fn start<S: Store<Sandbox> + Clone + 'static>(store: S) -> Self {
        let members = Arc::new(AtomicBool::new(true));
        let stop = CancellationToken::new();
        let task = tokio::spawn(kubelet(store, members.clone(), stop.clone()));
        Self {
            members,
            stop,
            task,
        }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.expect("kubelet task");
    }
}

async fn kubelet<S: Store<Sandbox>>(store: S, members: Arc<AtomicBool>, stop: CancellationToken) {
    let params = ListParams::namespace(NS);
    let mut tick = tokio::time::interval(Duration::from_millis(20));
    // A watch would do; a short poll also covers the member gate flipping back on.
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        let Ok(list) = store.list(&params).await else {
            continue;
        };
        for s in list.items {
            // A finished sandbox stays finished, as a real one would.
            let ready = s.status.as_ref().is_some_and(|st| {
                is_ready(&st.conditions) || st.conditions.iter().any(|c| c.type_ == "Finished")
            });
            let member = s.labels().contains_key(WARM_POOL_SANDBOX);
            if ready
                || s.metadata.deletion_timestamp.is_some()
                || (member && !members.load(Ordering::SeqCst))
            {
                continue;
            }
            let now = jiff::Timestamp::now().to_string();
            let patch = Patch::merge(json!({"status": {
                "podIPs": ["127.0.0.1"],
                "conditions": [{"type": "Ready", "status": "True", "reason": "DependenciesReady",
                    "message": "", "lastTransitionTime": now}],
            }}))
            .expect("object");
            let _ = store.patch_status(&ObjectKey::of(&s), &patch).await;
        }
    }
}

/// The driver on `store`, stopped through its token.
struct Driver {
    stop: CancellationToken,
    task: JoinHandle<()>,
}

impl Driver {
    fn start<S: ExtensionsStore>(store: S, config: ExtensionsConfig) -> Self {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run_standalone(store, config, stop.clone()));
        Self { stop, task }
    }

    async fn stop(self) {
        self.stop.cancel();
        self.task.await.expect("driver task");
    }
}

async fn get<K: StoreObject, S: Store<K>>(store: &S, name: &str) -> Option<K> {
    store.get(&key(name)).await.ok()
}

async fn members<S: Store<Sandbox>>(store: &S) -> Vec<Sandbox> {
    let list = store
        .list(&ListParams::namespace(NS))
        .await
        .expect("list sandboxes");
    list.items
        .into_iter()
        .filter(|s| {
            s.labels().contains_key(WARM_POOL_SANDBOX) && s.metadata.deletion_timestamp.is_none()
        })
        .collect()
}

async fn pool_ready<S: ExtensionsStore>(store: &S, name: &str, n: i32) {
    wait_for(&format!("pool {name} with {n} ready members"), || async {
        let p: Option<SandboxWarmPool> = get(store, name).await;
        let status = p.and_then(|p| p.status);
        match &status {
            Some(s) if s.ready_replicas == n && s.replicas == n => Ok(()),
            _ => Err(status),
        }
    })
    .await;
}

/// Counts the most pool members that ever existed at once, from a watch of Sandboxes.
fn track_members<S: Store<Sandbox> + Clone + 'static>(
    store: S,
    stop: CancellationToken,
) -> (Arc<AtomicUsize>, JoinHandle<()>) {
    let max = Arc::new(AtomicUsize::new(0));
    let seen = max.clone();
    let task = tokio::spawn(async move {
        let params = ListParams::namespace(NS);
        let Ok(list) = store.list(&params).await else {
            return;
        };
        let mut live: BTreeSet<String> = list
            .items
            .iter()
            .filter(|s| s.labels().contains_key(WARM_POOL_SANDBOX))
            .map(ResourceExt::name_any)
            .collect();
        let Ok(mut stream) = store.watch(&params, &list.resource_version).await else {
            return;
        };
        loop {
            let event = tokio::select! {
                () = stop.cancelled() => return,
                e = stream.next() => e,
            };
            match event {
                Some(Ok(WatchEvent::Added(s) | WatchEvent::Modified(s))) => {
                    if s.labels().contains_key(WARM_POOL_SANDBOX)
                        && s.metadata.deletion_timestamp.is_none()
                    {
                        live.insert(s.name_any());
                    } else {
                        live.remove(&s.name_any());
                    }
                }
                Some(Ok(WatchEvent::Deleted(s))) => {
                    live.remove(&s.name_any());
                }
                Some(Ok(WatchEvent::Bookmark { .. })) => {}
                _ => return,
            }
            seen.fetch_max(live.len(), Ordering::SeqCst);
        }
    });
    (max, task)
}

/// Creates `n` claims `<prefix>-<i>` of pool "runners" at once and waits until every one is
/// Ready with its sandbox named; the claims as stored then.
async fn claims_at_once<S: ExtensionsStore>(
    store: &S,
    prefix: &str,
    n: usize,
) -> Vec<SandboxClaim> {
    let creates = (0..n).map(|i| {
        let store = store.clone();
        let name = format!("{prefix}-{i}");
        async move { Store::<SandboxClaim>::create(&store, &claim(&name, "runners")).await }
    });
    for created in futures::future::join_all(creates).await {
        created.expect("create claim");
    }
    wait_for(&format!("{n} claims Ready with a sandbox"), || async {
        let list = Store::<SandboxClaim>::list(store, &ListParams::namespace(NS))
            .await
            .map_err(|e| e.to_string())?;
        let ready = list
            .items
            .iter()
            .filter(|c| {
                c.status
                    .as_ref()
                    .is_some_and(|s| s.sandbox.is_some() && is_ready(&s.conditions))
            })
            .count();
        if ready == n {
            Ok(list.items)
        } else {
            Err(format!("{ready} of {n} ready"))
        }
    })
    .await
}

/// 50 claims at once against a pool of 20 Ready members: exactly 20 adopted warm, 30 cold,
/// every claim Ready with its sandbox named, no sandbox bound twice, the pool never above 20,
/// and deleting a claim deletes its sandbox while the pool refills.
async fn fifty_claims_on_twenty<S: ExtensionsStore>(store: S, config: ExtensionsConfig) {
    let kubelet = Kubelet::start(store.clone());
    let driver = Driver::start(store.clone(), config);
    let stop_tracking = CancellationToken::new();
    let (max_members, tracker) = track_members(store.clone(), stop_tracking.clone());
    Store::<SandboxTemplate>::create(&store, &template("python"))
        .await
        .expect("template");
    Store::<SandboxWarmPool>::create(&store, &pool("runners", "python", 20))
        .await
        .expect("pool");
    pool_ready(&store, "runners", 20).await;

    // Refills stay not-Ready from here, so only the 20 members can be adopted.
    kubelet.members.store(false, Ordering::SeqCst);
    let claims = claims_at_once(&store, "task", 50).await;

    let mut by_sandbox: BTreeMap<String, String> = BTreeMap::new();
    let mut launch: BTreeMap<String, usize> = BTreeMap::new();
    let mut warm_pairs: Vec<(String, String)> = Vec::new();
    for c in &claims {
        let name = c
            .status
            .as_ref()
            .and_then(|s| s.sandbox.as_ref())
            .map(|s| s.name.clone())
            .expect("bound");
        if let Some(other) = by_sandbox.insert(name.clone(), c.name_any()) {
            panic!("sandbox {name} bound to {other} and {}", c.name_any());
        }
        let sandbox: Sandbox = get(&store, &name).await.expect("bound sandbox exists");
        let owner = sandbox
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .expect("controller");
        assert_eq!(
            owner.uid,
            c.uid().unwrap_or_default(),
            "{name} is controlled by its claim"
        );
        assert!(
            !sandbox.labels().contains_key(WARM_POOL_SANDBOX),
            "{name} left the pool"
        );
        let kind = sandbox
            .labels()
            .get(LAUNCH_TYPE)
            .cloned()
            .unwrap_or_default();
        if kind == "warm" {
            assert_eq!(
                c.annotations().get(SANDBOX_NAME),
                Some(&name),
                "the claim names its member"
            );
            warm_pairs.push((c.name_any(), name.clone()));
        }
        *launch.entry(kind).or_default() += 1;
    }
    assert_eq!(launch.get("warm"), Some(&20), "{launch:?}");
    assert_eq!(launch.get("cold"), Some(&30), "{launch:?}");

    // The pool refilled to 20 (not Ready yet) and never held more.
    wait_for("the pool refilled", || async {
        let n = members(&store).await.len();
        if n == 20 { Ok(()) } else { Err(n) }
    })
    .await;
    kubelet.members.store(true, Ordering::SeqCst);
    pool_ready(&store, "runners", 20).await;

    // Deleting a warm claim deletes its sandbox; the pool stays full.
    let warm = warm_pairs.first().cloned().expect("a warm claim");
    Store::<SandboxClaim>::delete(&store, &key(&warm.0), &DeleteParams::default())
        .await
        .expect("delete claim");
    wait_for("the claim's sandbox deleted", || async {
        let s: Option<Sandbox> = get(&store, &warm.1).await;
        if s.is_none() {
            Ok(())
        } else {
            Err(warm.1.clone())
        }
    })
    .await;
    pool_ready(&store, "runners", 20).await;
    stop_tracking.cancel();
    tracker.await.expect("tracker");
    assert!(
        max_members.load(Ordering::SeqCst) <= 20,
        "the pool held {} members",
        max_members.load(Ordering::SeqCst)
    );
    driver.stop().await;
    kubelet.stop().await;
}

fn embedded() -> (tempfile::TempDir, EmbeddedStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let store = EmbeddedStore::open(&dir.path().join(STORE_FILE_NAME)).expect("store");
    (dir, store)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_claims_on_a_pool_of_twenty_standalone() {
    let (_dir, store) = embedded();
    fifty_claims_on_twenty(store, ExtensionsConfig::default()).await;
}

/// The same with the claims reconciled one by one instead of in batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_claims_on_a_pool_of_twenty_standalone_one_by_one() {
    let (_dir, store) = embedded();
    let config = ExtensionsConfig {
        claim_batch: 1,
        ..ExtensionsConfig::default()
    };
    fifty_claims_on_twenty(store, config).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_claims_on_a_pool_of_twenty_kubernetes_lagging_watch() {
    let server = FakeApiServer::start().await.expect("fake api server");
    server.set_watch_delay(Duration::from_millis(200));
    let store = KubeStore::new(server.client().expect("client"));
    fifty_claims_on_twenty(store, ExtensionsConfig::default()).await;
}

/// Members that never become Ready are replaced after the grace period.
async fn stuck_members_replaced<S: ExtensionsStore>(store: S) {
    let config = ExtensionsConfig {
        stuck_after: Duration::from_millis(300),
        ..ExtensionsConfig::default()
    };
    let driver = Driver::start(store.clone(), config);
    Store::<SandboxTemplate>::create(&store, &template("python"))
        .await
        .expect("template");
    Store::<SandboxWarmPool>::create(&store, &pool("runners", "python", 2))
        .await
        .expect("pool");
    let first: BTreeSet<String> = wait_for("two members", || async {
        let m = members(&store).await;
        if m.len() == 2 {
            Ok(m.iter().map(ResourceExt::name_any).collect())
        } else {
            Err(m.len())
        }
    })
    .await;
    wait_for("both stuck members replaced", || async {
        let now: BTreeSet<String> = members(&store)
            .await
            .iter()
            .map(ResourceExt::name_any)
            .collect();
        if now.len() == 2 && now.is_disjoint(&first) {
            Ok(())
        } else {
            Err(now)
        }
    })
    .await;
    driver.stop().await;
}

/// `Recreate` replaces members made from an older template; `OnReplenish` keeps them.
async fn update_strategies<S: ExtensionsStore>(store: S) {
    let kubelet = Kubelet::start(store.clone());
    let driver = Driver::start(store.clone(), ExtensionsConfig::default());
    Store::<SandboxTemplate>::create(&store, &template("python"))
        .await
        .expect("template");
    let mut recreate = pool("recreate", "python", 2);
    recreate.spec.update_strategy = Some(WarmPoolUpdateStrategy {
        type_: WarmPoolUpdateStrategyType::Recreate,
    });
    Store::<SandboxWarmPool>::create(&store, &recreate)
        .await
        .expect("pool");
    Store::<SandboxWarmPool>::create(&store, &pool("replenish", "python", 2))
        .await
        .expect("pool");
    pool_ready(&store, "recreate", 2).await;
    pool_ready(&store, "replenish", 2).await;
    let of = |all: &[Sandbox], pool: &str| -> BTreeSet<String> {
        all.iter()
            .filter(|s| s.name_any().starts_with(&format!("{pool}-")))
            .map(ResourceExt::name_any)
            .collect()
    };
    let before = members(&store).await;
    let (old_recreate, old_replenish) = (of(&before, "recreate"), of(&before, "replenish"));

    let patch = Patch::merge(json!({"spec": {"podTemplate": {"spec": {"containers": [
        {"name": "main", "command": ["python3", "-m", "http.server", "9000"]}]}}}}))
    .expect("object");
    Store::<SandboxTemplate>::patch(&store, &key("python"), &patch)
        .await
        .expect("change template");
    wait_for("Recreate replaced its stale members", || async {
        let now = of(&members(&store).await, "recreate");
        if now.len() == 2 && now.is_disjoint(&old_recreate) {
            Ok(())
        } else {
            Err(now)
        }
    })
    .await;
    pool_ready(&store, "recreate", 2).await;
    assert_eq!(
        of(&members(&store).await, "replenish"),
        old_replenish,
        "OnReplenish keeps stale members"
    );
    driver.stop().await;
    kubelet.stop().await;
}

fn with_lifecycle(mut c: SandboxClaim, policy: ClaimShutdownPolicy) -> SandboxClaim {
    c.spec.lifecycle = Some(ClaimLifecycle {
        shutdown_time: Some(Time(
            jiff::Timestamp::now() + jiff::SignedDuration::from_millis(500),
        )),
        ttl_seconds_after_finished: None,
        shutdown_policy: Some(policy),
    });
    c
}

/// Every shutdown policy at `shutdownTime`, a TTL after the sandbox finished, and env refused
/// by a template that disallows it.
async fn lifecycle_and_policies<S: ExtensionsStore>(store: S) {
    let kubelet = Kubelet::start(store.clone());
    let driver = Driver::start(store.clone(), ExtensionsConfig::default());
    Store::<SandboxTemplate>::create(&store, &template("python"))
        .await
        .expect("template");
    Store::<SandboxWarmPool>::create(&store, &pool("runners", "python", 1))
        .await
        .expect("pool");
    for (name, policy) in [
        ("delete", ClaimShutdownPolicy::Delete),
        ("foreground", ClaimShutdownPolicy::DeleteForeground),
        ("retain", ClaimShutdownPolicy::Retain),
    ] {
        Store::<SandboxClaim>::create(&store, &with_lifecycle(claim(name, "runners"), policy))
            .await
            .expect("claim");
    }
    let mut ttl = claim("ttl", "runners");
    ttl.spec.lifecycle = Some(ClaimLifecycle {
        shutdown_time: None,
        ttl_seconds_after_finished: Some(0),
        shutdown_policy: Some(ClaimShutdownPolicy::Delete),
    });
    Store::<SandboxClaim>::create(&store, &ttl)
        .await
        .expect("claim");
    let mut env = claim("env", "runners");
    env.spec.env.push(ClaimEnvVar {
        name: "TASK".into(),
        value: "1".into(),
        container_name: None,
    });
    Store::<SandboxClaim>::create(&store, &env)
        .await
        .expect("claim");

    let refused: SandboxClaim = wait_for("env refused", || async {
        match get::<SandboxClaim, _>(&store, "env").await {
            Some(c) if ready_reason(&c) == "EnvVarsInjectionRejected" => Ok(c),
            other => Err(other.map(|c| ready_reason(&c))),
        }
    })
    .await;
    assert!(
        refused.status.as_ref().is_some_and(|s| s.sandbox.is_none()),
        "no sandbox for a refused claim"
    );

    // The TTL claim's sandbox finishes: the claim goes 0 s later.
    let ttl_sandbox = wait_for("ttl claim bound", || async {
        match get::<SandboxClaim, _>(&store, "ttl")
            .await
            .and_then(|c| c.status)
            .and_then(|s| s.sandbox)
        {
            Some(s) => Ok(s.name),
            None => Err(()),
        }
    })
    .await;
    // Finish it only once the stand-in kubelet has marked it Ready: a Ready patch from a list
    // the kubelet took before would otherwise replace the Finished condition.
    wait_for("the ttl claim's sandbox Ready", || async {
        match get::<Sandbox, _>(&store, &ttl_sandbox).await {
            Some(s) if s.status.as_ref().is_some_and(|st| is_ready(&st.conditions)) => Ok(()),
            other => Err(other.and_then(|s| s.status)),
        }
    })
    .await;
    let finished = Patch::merge(json!({"status": {"conditions": [
        {"type": "Ready", "status": "False", "reason": "PodSucceeded", "message": "", "lastTransitionTime": jiff::Timestamp::now().to_string()},
        {"type": "Finished", "status": "True", "reason": "PodSucceeded", "message": "", "lastTransitionTime": jiff::Timestamp::now().to_string()},
    ]}}))
    .expect("object");
    Store::<Sandbox>::patch_status(&store, &key(&ttl_sandbox), &finished)
        .await
        .expect("finish");

    for gone in ["delete", "foreground", "ttl"] {
        wait_for(&format!("claim {gone} deleted"), || async {
            match get::<SandboxClaim, _>(&store, gone).await {
                None => Ok(()),
                Some(c) => Err(ready_reason(&c)),
            }
        })
        .await;
    }
    wait_for("the ttl claim's sandbox deleted", || async {
        match get::<Sandbox, _>(&store, &ttl_sandbox).await {
            None => Ok(()),
            Some(s) => Err(s.name_any()),
        }
    })
    .await;
    let retained: SandboxClaim = wait_for("retain claim expired", || async {
        match get::<SandboxClaim, _>(&store, "retain").await {
            Some(c)
                if ready_reason(&c) == "ClaimExpired"
                    && c.status.as_ref().is_some_and(|s| s.sandbox.is_none()) =>
            {
                Ok(c)
            }
            other => Err(other.map(|c| (ready_reason(&c), c.status))),
        }
    })
    .await;
    let expired = retained
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "ClaimExpired"));
    assert_eq!(expired.map(|c| c.status.as_str()), Some("True"));
    let sandboxes = Store::<Sandbox>::list(&store, &ListParams::namespace(NS))
        .await
        .expect("list");
    let owned_by_claims = sandboxes
        .items
        .iter()
        .filter(|s| {
            s.owner_references()
                .iter()
                .any(|o| o.kind == "SandboxClaim")
        })
        .count();
    assert_eq!(owned_by_claims, 0, "every expired claim's sandbox is gone");
    driver.stop().await;
    kubelet.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stuck_members_are_replaced_standalone() {
    let (_dir, store) = embedded();
    stuck_members_replaced(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_strategies_standalone() {
    let (_dir, store) = embedded();
    update_strategies(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_strategies_kubernetes() {
    let server = FakeApiServer::start().await.expect("fake api server");
    server.set_watch_delay(Duration::from_millis(100));
    update_strategies(KubeStore::new(server.client().expect("client"))).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_and_policies_standalone() {
    let (_dir, store) = embedded();
    lifecycle_and_policies(store).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lifecycle_and_policies_kubernetes() {
    let server = FakeApiServer::start().await.expect("fake api server");
    lifecycle_and_policies(KubeStore::new(server.client().expect("client"))).await;
}

/// A driver stopped in the middle of binding (one claim named a member but never took it,
/// another took its member but never wrote its status) resumes on restart: every claim ends
/// bound exactly once and no member is lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restart_in_the_middle_of_binding() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join(STORE_FILE_NAME);
    let store = EmbeddedStore::open(&path).expect("store");
    let kubelet = Kubelet::start(store.clone());
    let driver = Driver::start(store.clone(), ExtensionsConfig::default());
    Store::<SandboxTemplate>::create(&store, &template("python"))
        .await
        .expect("template");
    Store::<SandboxWarmPool>::create(&store, &pool("runners", "python", 3))
        .await
        .expect("pool");
    pool_ready(&store, "runners", 3).await;
    driver.stop().await;
    kubelet.stop().await;

    // What a cut-short reconcile leaves: "half" names member 0 (annotation) only; "taken"
    // owns member 1 (re-owned) with no status.
    let m = members(&store).await;
    let (m0, m1) = (m[0].name_any(), m[1].name_any());
    let mut half = claim("half", "runners");
    half.metadata.annotations = Some([(SANDBOX_NAME.to_owned(), m0.clone())].into());
    Store::<SandboxClaim>::create(&store, &half)
        .await
        .expect("claim");
    let mut taken = claim("taken", "runners");
    taken.metadata.annotations = Some([(SANDBOX_NAME.to_owned(), m1.clone())].into());
    let taken = Store::<SandboxClaim>::create(&store, &taken)
        .await
        .expect("claim");
    let reown = rouse_controller::claim::adoption_patch(&taken, None, &m[1]);
    Store::<Sandbox>::patch(&store, &key(&m1), &reown)
        .await
        .expect("re-own");
    drop(store);

    let store = EmbeddedStore::open(&path).expect("store reopened");
    let kubelet = Kubelet::start(store.clone());
    let driver = Driver::start(store.clone(), ExtensionsConfig::default());
    for (name, want) in [("half", &m0), ("taken", &m1)] {
        wait_for(&format!("claim {name} bound to {want}"), || async {
            let c: Option<SandboxClaim> = get(&store, name).await;
            let status = c.and_then(|c| c.status);
            match status.as_ref().and_then(|s| s.sandbox.as_ref()) {
                Some(s)
                    if &s.name == want
                        && is_ready(
                            &status
                                .as_ref()
                                .map(|s| s.conditions.clone())
                                .unwrap_or_default(),
                        ) =>
                {
                    Ok(())
                }
                _ => Err(status),
            }
        })
        .await;
    }
    // The pool's status can still show the 3 members it had before the restart while it
    // replaces the two that were claimed: wait for the sandboxes themselves, not the status.
    wait_for(
        "3 ready members and the 2 claimed, nothing more",
        || async {
            let all = Store::<Sandbox>::list(&store, &ListParams::namespace(NS))
                .await
                .expect("list");
            let live: Vec<&Sandbox> = all
                .items
                .iter()
                .filter(|s| s.metadata.deletion_timestamp.is_none())
                .collect();
            let ready_members = live
                .iter()
                .filter(|s| s.labels().contains_key(WARM_POOL_SANDBOX))
                .filter(|s| {
                    is_ready(
                        &s.status
                            .as_ref()
                            .map(|st| st.conditions.clone())
                            .unwrap_or_default(),
                    )
                })
                .count();
            if ready_members == 3 && live.len() == 5 {
                Ok(())
            } else {
                Err((ready_members, live.len()))
            }
        },
    )
    .await;
    pool_ready(&store, "runners", 3).await;
    let all = Store::<Sandbox>::list(&store, &ListParams::namespace(NS))
        .await
        .expect("list");
    assert_eq!(
        all.items.len(),
        5,
        "3 members and the 2 claimed, nothing more"
    );
    driver.stop().await;
    kubelet.stop().await;
}

/// `rouse controller` end to end on the fake API server and kubelet: the kube-runtime
/// controllers bind claims to Ready sandboxes (the Sandbox controller running their pods),
/// and the template gets its managed NetworkPolicy, removed again under `Unmanaged`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_controllers_bind_claims_and_manage_the_network_policy() {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    use rouse_controller::mode::kube::{self as run, ControllerConfig, Probes};
    use rouse_testsupport::kube::{FakeKubelet, KubeletOptions};

    let server = FakeApiServer::start().await.expect("fake api server");
    server.set_watch_delay(Duration::from_millis(50));
    let _kubelet = FakeKubelet::start(&server, KubeletOptions::default());
    let client = server.client().expect("client");
    let store = KubeStore::new(client.clone());
    let shutdown = CancellationToken::new();
    let config = ControllerConfig {
        namespace: Some(NS.into()),
        ..ControllerConfig::default()
    };
    let controller = tokio::spawn(run::run(
        client.clone(),
        store.clone(),
        config,
        Probes::default(),
        shutdown.clone(),
    ));
    Store::<SandboxTemplate>::create(&store, &template("python"))
        .await
        .expect("template");
    Store::<SandboxWarmPool>::create(&store, &pool("runners", "python", 3))
        .await
        .expect("pool");
    pool_ready(&store, "runners", 3).await;
    let claims = claims_at_once(&store, "task", 5).await;
    let names: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.sandbox.as_ref())
                .map(|s| s.name.clone())
        })
        .collect();
    assert_eq!(names.len(), 5, "five distinct sandboxes");
    let mut warm = 0;
    for name in &names {
        let s: Sandbox = get(&store, name).await.expect("sandbox");
        if s.labels().get(LAUNCH_TYPE).map(String::as_str) == Some("warm") {
            warm += 1;
        }
    }
    assert!(
        warm >= 3,
        "the 3 Ready members were adopted first: {warm} warm"
    );

    let policies: kube::Api<NetworkPolicy> = kube::Api::namespaced(client.clone(), NS);
    wait_for("the managed NetworkPolicy", || async {
        policies
            .get_opt("python-network-policy")
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "absent".to_owned())
    })
    .await;
    let unmanaged =
        Patch::merge(json!({"spec": {"networkPolicyManagement": "Unmanaged"}})).expect("object");
    Store::<SandboxTemplate>::patch(&store, &key("python"), &unmanaged)
        .await
        .expect("opt out");
    wait_for("the NetworkPolicy removed", || async {
        match policies.get_opt("python-network-policy").await {
            Ok(None) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    shutdown.cancel();
    controller
        .await
        .expect("controller task")
        .expect("controller");
}

/// A burst of claims on the Kubernetes controllers, through a lagging watch: every claim
/// adopts a distinct Ready member, and the members are read from the member cache rather
/// than listed once per claim, so concurrent claims do not race each other for members a
/// moment-old list still shows (each lost race is a refused re-own and another list).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubernetes_claim_burst_adopts_without_a_conflict_storm() {
    use rouse_controller::mode::kube::{self as run, ControllerConfig, Probes};
    use rouse_testsupport::kube::{FakeKubelet, KubeletOptions};
    const N: usize = 40;

    let server = FakeApiServer::start().await.expect("fake api server");
    server.set_watch_delay(Duration::from_millis(100));
    let _kubelet = FakeKubelet::start(&server, KubeletOptions::default());
    let client = server.client().expect("client");
    let store = KubeStore::new(client.clone());
    let shutdown = CancellationToken::new();
    let config = ControllerConfig {
        namespace: Some(NS.into()),
        ..ControllerConfig::default()
    };
    let controller = tokio::spawn(run::run(
        client,
        store.clone(),
        config,
        Probes::default(),
        shutdown.clone(),
    ));
    Store::<SandboxTemplate>::create(&store, &template("python"))
        .await
        .expect("template");
    Store::<SandboxWarmPool>::create(&store, &pool("runners", "python", N as i32))
        .await
        .expect("pool");
    pool_ready(&store, "runners", N as i32).await;
    let stop_tracking = CancellationToken::new();
    let (max_members, tracker) = track_members(store.clone(), stop_tracking.clone());

    server.reset_requests();
    let claims = claims_at_once(&store, "burst", N).await;
    let requests = server.requests();
    let bound: BTreeSet<String> = claims
        .iter()
        .filter_map(|c| c.status.as_ref()?.sandbox.as_ref().map(|s| s.name.clone()))
        .collect();
    assert_eq!(bound.len(), N, "every claim has its own sandbox");
    let sandboxes = Store::<Sandbox>::list(&store, &ListParams::namespace(NS))
        .await
        .expect("sandboxes");
    let mut controlled: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for s in &sandboxes.items {
        if let Some(owner) = s
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true) && o.kind == "SandboxClaim")
        {
            controlled
                .entry(owner.name.clone())
                .or_default()
                .push(s.name_any());
        }
    }
    for (claim, sandboxes) in &controlled {
        assert_eq!(sandboxes.len(), 1, "{claim} controls {sandboxes:?}");
    }
    for name in &bound {
        let s: Sandbox = get(&store, name).await.expect("bound sandbox");
        assert_eq!(
            s.labels().get(LAUNCH_TYPE).map(String::as_str),
            Some("warm"),
            "{name} was adopted from the pool"
        );
    }
    // One re-own per claim, give or take a member whose version moved under a lagging
    // watch; a storm of refused re-owns (each with another list) is what this guards against.
    let all: Vec<String> = requests
        .all()
        .map(|(v, r, n)| format!("{v} {r} {n}"))
        .collect();
    let reowns = requests.count("patch", "sandboxes");
    assert!(
        reowns <= (N + N / 10) as u64,
        "{reowns} member patches for {N} claims: {all:?}"
    );
    // One claim patch per binding: the first-observed stamp rides in the adoption's
    // annotation, and a claim read stale is not annotated from the stale read.
    let claim_patches = requests.count("patch", "sandboxclaims");
    assert!(
        claim_patches <= (N + N / 10) as u64,
        "{claim_patches} claim patches for {N} claims: {all:?}"
    );
    // One status write per binding: a reconcile handed a claim version this process wrote
    // over waits for the newer one instead of writing from it.
    let status_patches = requests.count("patch", "sandboxclaims/status");
    assert!(
        status_patches <= (N + N / 10) as u64,
        "{status_patches} claim status patches for {N} claims: {all:?}"
    );
    // The pool refills one member per adoption, never more.
    assert!(
        requests.count("create", "sandboxes") <= N as u64,
        "sandboxes created beyond the adoptions: {all:?}"
    );
    pool_ready(&store, "runners", N as i32).await;
    stop_tracking.cancel();
    tracker.await.expect("tracker");
    let most = max_members.load(Ordering::SeqCst);
    assert!(most <= N, "the pool held {most} members for {N} replicas");
    shutdown.cancel();
    controller
        .await
        .expect("controller task")
        .expect("controller");
}
