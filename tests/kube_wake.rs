//! Kubernetes mode in one process: the real Sandbox controller and the proxy on a
//! `StoreDirectory` over `KubeStore`, against the fake API server and kubelet, and against the
//! real control plane of `rouse_testsupport::cluster` (controller and proxy each as its
//! ServiceAccount, with exactly the RBAC of `deploy/kubernetes`; skipped when its binaries are
//! missing, outside CI). Routes, a wake storm with exactly one wake, the refusals, activity in
//! `status.lastActivityTime` and idle suspend.

mod kube_common;

use std::net::SocketAddr;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use kube_common::{backend, get, sandbox, wait_for};
use rouse_controller::mode::kube::{self as run, ControllerConfig, Probes};
use rouse_proxy::{Config, Proxy, RouteState, SandboxKey, StoreDirectory};
use rouse_shared::api::{OperatingMode, Sandbox};
use rouse_shared::store::KubeStore;
use rouse_testsupport::cluster::{self, ClusterKubelet, SYSTEM_NAMESPACE};
use rouse_testsupport::kube::{FakeApiServer, FakeKubelet, KubeletOptions};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Concurrent requests to one suspended sandbox.
const STORM: usize = 50;

/// Where the pods' status comes from; held only to keep it running.
enum Kubelet {
    Fake(#[allow(dead_code)] FakeKubelet),
    Real(#[allow(dead_code)] ClusterKubelet),
}

/// The cluster (the fake API server, or the real control plane), the controller and the
/// proxy.
struct Cluster {
    /// The fake API server, which also counts requests; `None` on the real one.
    server: Option<FakeApiServer>,
    _kubelet: Kubelet,
    namespace: String,
    sandboxes: Api<Sandbox>,
    pods: Api<Pod>,
    controller: (CancellationToken, JoinHandle<()>),
    proxy: Proxy,
    addr: SocketAddr,
}

impl Cluster {
    /// On the fake API server, with one client for everything.
    async fn fake() -> Self {
        let server = FakeApiServer::start().await.expect("fake API server");
        let kubelet = Kubelet::Fake(FakeKubelet::start(&server, KubeletOptions::default()));
        let client = server.client().expect("client");
        let mut cluster =
            Self::start(client.clone(), client.clone(), client, "team-a", kubelet).await;
        cluster.server = Some(server);
        cluster
    }

    /// On the real control plane (`None` when it is unavailable outside CI), with the
    /// controller and the proxy each limited to the RBAC of its ServiceAccount.
    async fn real(test: &str) -> Option<Self> {
        let plane = cluster::shared_or_skip(test)?;
        let admin = plane.client().await.expect("admin client");
        cluster::install(&admin)
            .await
            .expect("install CRDs and RBAC");
        let namespace = cluster::test_namespace(&admin, test)
            .await
            .expect("namespace");
        let kubelet = Kubelet::Real(ClusterKubelet::start(
            admin.clone(),
            &namespace,
            KubeletOptions::default(),
        ));
        let controller = plane
            .service_account_client(SYSTEM_NAMESPACE, "rouse-controller")
            .await
            .expect("controller client");
        let proxy = plane
            .service_account_client(SYSTEM_NAMESPACE, "rouse-proxy")
            .await
            .expect("proxy client");
        Some(Self::start(admin, controller, proxy, &namespace, kubelet).await)
    }

    async fn start(
        admin: Client,
        controller: Client,
        proxy: Client,
        namespace: &str,
        kubelet: Kubelet,
    ) -> Self {
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let (client, shutdown) = (controller, shutdown.clone());
            let config = ControllerConfig {
                namespace: Some(namespace.to_owned()),
                concurrency: 8,
                ..ControllerConfig::default()
            };
            async move {
                let store = KubeStore::new(client.clone());
                run::run(client, store, config, Probes::default(), shutdown)
                    .await
                    .expect("controller runs");
            }
        });
        let config = Config::from_toml(
            "[http]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"off\"\n\
             [wake]\ndeadline = \"30s\"\n[activity]\nreport_interval = \"100ms\"\n",
        )
        .expect("proxy config");
        let directory = StoreDirectory::new(KubeStore::new(proxy));
        let proxy = Proxy::start(config, directory).await.expect("start proxy");
        let addr = proxy.addrs().http.expect("http listener");
        Self {
            server: None,
            _kubelet: kubelet,
            namespace: namespace.to_owned(),
            sandboxes: Api::namespaced(admin.clone(), namespace),
            pods: Api::namespaced(admin, namespace),
            controller: (shutdown, task),
            proxy,
            addr,
        }
    }

    /// Forgets the requests counted so far (fake API server only).
    fn reset_requests(&self) {
        if let Some(server) = &self.server {
            server.reset_requests();
        }
    }

    /// Checks that sandbox `name` was woken exactly once since [`Self::reset_requests`]: its
    /// spec changed once (`generation` went up by one from `generation`) and, on the fake API
    /// server, exactly one PATCH of a sandbox was made.
    async fn assert_one_wake(&self, name: &str, generation: i64) {
        let now = self.sandboxes.get(name).await.expect("sandbox");
        assert_eq!(
            now.metadata.generation,
            Some(generation + 1),
            "one spec change"
        );
        if let Some(server) = &self.server {
            let counts = server.requests();
            assert_eq!(
                counts.count("patch", "sandboxes"),
                1,
                "exactly one wake: {counts:?}"
            );
        }
    }

    async fn stop(self) {
        self.proxy.shutdown().await;
        let (shutdown, task) = self.controller;
        shutdown.cancel();
        task.await.expect("controller task");
    }

    async fn create(&self, sandbox: &Sandbox) {
        self.sandboxes
            .create(&PostParams::default(), sandbox)
            .await
            .expect("create sandbox");
    }

    async fn patch_spec(&self, name: &str, spec: Value) {
        self.sandboxes
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .expect("patch sandbox spec");
    }

    /// Waits until sandbox `name` satisfies `check` (described by `what`), and returns it.
    async fn wait_sandbox(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Sandbox) -> bool,
    ) -> Sandbox {
        wait_for(what, || async {
            let sandbox = self.sandboxes.get(name).await;
            match sandbox {
                Ok(s) if check(&s) => Ok(s),
                Ok(s) => Err(format!("{:?} {:?}", s.spec.operating_mode, s.status)),
                Err(err) => Err(err.to_string()),
            }
        })
        .await
    }

    async fn wait_ready(&self, name: &str) -> Sandbox {
        let sandbox = self
            .wait_sandbox(name, "ready", |s| {
                condition(s, "Ready").as_deref() == Some("True")
            })
            .await;
        wait_for(&format!("{name} routed"), || async {
            match self.route(name) {
                Some(RouteState::Running { .. }) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
        sandbox
    }

    /// Waits until the sandbox is suspended, its pod gone and the proxy knows it.
    async fn wait_suspended(&self, name: &str) {
        self.wait_sandbox(name, "suspended", |s| {
            s.spec.operating_mode == Some(OperatingMode::Suspended)
                && condition(s, "Suspended").as_deref() == Some("True")
        })
        .await;
        wait_for(&format!("{name} pod gone"), || async {
            match self.pod_uid(name).await {
                None => Ok(()),
                Some(uid) => Err(format!("pod {uid} still there")),
            }
        })
        .await;
        wait_for(&format!("{name} suspended in the proxy"), || async {
            match self.route(name) {
                Some(RouteState::Suspended { .. }) => Ok(()),
                other => Err(format!("{other:?}")),
            }
        })
        .await;
    }

    fn route(&self, name: &str) -> Option<RouteState> {
        self.proxy
            .router()
            .route_state(&SandboxKey::new(&self.namespace, name))
    }

    async fn pod_uid(&self, name: &str) -> Option<String> {
        let pod = self.pods.get_opt(name).await.expect("get pod")?;
        pod.metadata.uid
    }

    fn host(&self, name: &str) -> String {
        format!("{name}.{}.sandbox.localhost", self.namespace)
    }
}

/// The status of condition `type_`.
fn condition(sandbox: &Sandbox, type_: &str) -> Option<String> {
    let status = sandbox.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == type_)?;
    Some(c.status.clone())
}

fn last_activity(sandbox: &Sandbox) -> Option<jiff::Timestamp> {
    sandbox
        .status
        .as_ref()?
        .last_activity_time
        .as_ref()
        .map(|t| t.0)
}

/// Routes; a storm of requests to a suspended sandbox wakes it exactly once; a sandbox
/// without wake-on-connect is refused and never woken.
async fn storm_wakes_once(cluster: Cluster) {
    let web = backend("web").await;
    cluster
        .create(&sandbox(&cluster.namespace, "web", web.port(), json!({})))
        .await;
    cluster.wait_ready("web").await;
    assert_eq!(
        get(cluster.addr, &cluster.host("web")).await,
        (200, "backend web".to_owned())
    );
    let (code, _) = get(cluster.addr, &cluster.host("nobody")).await;
    assert_eq!(code, 404, "unknown host");

    // Suspended without wake-on-connect: refused, never woken.
    cluster
        .create(&sandbox(
            &cluster.namespace,
            "cold",
            web.port(),
            json!({"operatingMode": "Suspended", "suspension": {"wakeOnConnect": false}}),
        ))
        .await;
    wait_for("cold known to the proxy", || async {
        match cluster.route("cold") {
            Some(RouteState::Suspended {
                wake_on_connect: false,
                ..
            }) => Ok(()),
            other => Err(format!("{other:?}")),
        }
    })
    .await;
    let (code, _) = get(cluster.addr, &cluster.host("cold")).await;
    assert_eq!(code, 503, "wakeOnConnect: false");

    let first_pod = cluster.pod_uid("web").await.expect("web has a pod");
    cluster
        .patch_spec("web", json!({"operatingMode": "Suspended"}))
        .await;
    cluster.wait_suspended("web").await;

    let generation = cluster
        .sandboxes
        .get("web")
        .await
        .expect("web")
        .metadata
        .generation
        .expect("generation");
    cluster.reset_requests();
    let requests: Vec<_> = (0..STORM)
        .map(|_| {
            let (addr, host) = (cluster.addr, cluster.host("web"));
            tokio::spawn(async move { get(addr, &host).await })
        })
        .collect();
    for request in requests {
        let response = request.await.expect("request task");
        assert_eq!(response, (200, "backend web".to_owned()));
    }
    cluster.assert_one_wake("web", generation).await;
    let woken = cluster.wait_ready("web").await;
    assert_eq!(woken.spec.operating_mode, Some(OperatingMode::Running));
    let second_pod = cluster.pod_uid("web").await.expect("web has a pod again");
    assert_ne!(first_pod, second_pod, "a new pod");
    assert_eq!(
        cluster
            .sandboxes
            .get("cold")
            .await
            .expect("cold")
            .spec
            .operating_mode,
        Some(OperatingMode::Suspended),
        "cold was never woken"
    );
    cluster.stop().await;
}

/// Traffic is recorded in `lastActivityTime`; an idle sandbox is suspended and the next
/// request wakes it again.
async fn activity_and_idle_suspend(cluster: Cluster) {
    let idle = backend("idle").await;
    cluster
        .create(&sandbox(&cluster.namespace, "idle", idle.port(), json!({})))
        .await;
    let ready = cluster.wait_ready("idle").await;
    assert_eq!(last_activity(&ready), None, "no traffic yet");

    assert_eq!(
        get(cluster.addr, &cluster.host("idle")).await,
        (200, "backend idle".to_owned())
    );
    let first = last_activity(
        &cluster
            .wait_sandbox("idle", "lastActivityTime set", |s| {
                last_activity(s).is_some()
            })
            .await,
    )
    .expect("lastActivityTime");

    // No more traffic: the controller suspends it once the timeout has passed.
    cluster
        .patch_spec("idle", json!({"suspension": {"idleTimeoutSeconds": 2}}))
        .await;
    cluster.wait_suspended("idle").await;

    // A new request wakes it again and counts as new activity. The proxy's pooled connection
    // to the backend from the first request must not carry it past the wake.
    let generation = cluster
        .sandboxes
        .get("idle")
        .await
        .expect("idle")
        .metadata
        .generation
        .expect("generation");
    cluster.reset_requests();
    assert_eq!(
        get(cluster.addr, &cluster.host("idle")).await,
        (200, "backend idle".to_owned())
    );
    cluster.assert_one_wake("idle", generation).await;
    let woken = cluster.wait_ready("idle").await;
    assert!(cluster.pod_uid("idle").await.is_some(), "a new pod");
    assert_eq!(woken.spec.operating_mode, Some(OperatingMode::Running));
    cluster
        .wait_sandbox("idle", "a newer lastActivityTime", |s| {
            last_activity(s).is_some_and(|t| t > first)
        })
        .await;
    cluster.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_storm_on_a_suspended_sandbox_wakes_it_once() {
    storm_wakes_once(Cluster::fake().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn activity_is_recorded_and_an_idle_sandbox_suspends_and_wakes_again() {
    activity_and_idle_suspend(Cluster::fake().await).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_api_server_storm_wakes_once() {
    if let Some(cluster) = Cluster::real("real_api_server_storm_wakes_once").await {
        storm_wakes_once(cluster).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn real_api_server_activity_and_idle_suspend() {
    if let Some(cluster) = Cluster::real("real_api_server_activity_and_idle_suspend").await {
        activity_and_idle_suspend(cluster).await;
    }
}
