//! Kubernetes mode in one process: the fake API server and kubelet, the real Sandbox
//! controller, and the proxy on a `StoreDirectory` over `KubeStore`. Routes, a wake storm with
//! exactly one wake, the refusals, activity in `status.lastActivityTime` and idle suspend.

mod kube_common;

use std::net::SocketAddr;

use kube::Api;
use kube::api::{Patch, PatchParams, PostParams};
use kube_common::{backend, get, sandbox, wait_for};
use rouse_controller::run::{self, ControllerConfig, Probes};
use rouse_proxy::{Config, Proxy, RouteState, SandboxKey, StoreDirectory};
use rouse_shared::api::{OperatingMode, Sandbox};
use rouse_shared::store::KubeStore;
use rouse_testsupport::kube::{FakeApiServer, FakeKubelet, KubeletOptions};
use serde_json::{Value, json};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const NAMESPACE: &str = "team-a";
/// Concurrent requests to one suspended sandbox.
const STORM: usize = 50;

/// The fake cluster, the controller and the proxy.
struct Cluster {
    server: FakeApiServer,
    _kubelet: FakeKubelet,
    sandboxes: Api<Sandbox>,
    controller: (CancellationToken, JoinHandle<()>),
    proxy: Proxy,
    addr: SocketAddr,
}

impl Cluster {
    async fn start() -> Self {
        let server = FakeApiServer::start().await.expect("fake API server");
        let kubelet = FakeKubelet::start(&server, KubeletOptions::default());
        let client = server.client().expect("client");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn({
            let (client, shutdown) = (client.clone(), shutdown.clone());
            let config = ControllerConfig {
                namespace: Some(NAMESPACE.to_owned()),
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
        let directory = StoreDirectory::new(KubeStore::new(client.clone()));
        let proxy = Proxy::start(config, directory).await.expect("start proxy");
        let addr = proxy.addrs().http.expect("http listener");
        Self {
            server,
            _kubelet: kubelet,
            sandboxes: Api::namespaced(client, NAMESPACE),
            controller: (shutdown, task),
            proxy,
            addr,
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
            match self.pod_uid(name) {
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
            .route_state(&SandboxKey::new(NAMESPACE, name))
    }

    fn pod_uid(&self, name: &str) -> Option<String> {
        let pod = self.server.get("pods", NAMESPACE, name)?;
        pod["metadata"]["uid"].as_str().map(str::to_owned)
    }

    fn host(name: &str) -> String {
        format!("{name}.{NAMESPACE}.sandbox.localhost")
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_storm_on_a_suspended_sandbox_wakes_it_once() {
    let cluster = Cluster::start().await;
    let web = backend("web").await;
    cluster
        .create(&sandbox(NAMESPACE, "web", web.port(), json!({})))
        .await;
    cluster.wait_ready("web").await;
    assert_eq!(
        get(cluster.addr, &Cluster::host("web")).await,
        (200, "backend web".to_owned())
    );
    let (code, _) = get(cluster.addr, &Cluster::host("nobody")).await;
    assert_eq!(code, 404, "unknown host");

    // Suspended without wake-on-connect: refused, never woken.
    cluster
        .create(&sandbox(
            NAMESPACE,
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
    let (code, _) = get(cluster.addr, &Cluster::host("cold")).await;
    assert_eq!(code, 503, "wakeOnConnect: false");

    let first_pod = cluster.pod_uid("web").expect("web has a pod");
    cluster
        .patch_spec("web", json!({"operatingMode": "Suspended"}))
        .await;
    cluster.wait_suspended("web").await;

    cluster.server.reset_requests();
    let requests: Vec<_> = (0..STORM)
        .map(|_| {
            let addr = cluster.addr;
            tokio::spawn(async move { get(addr, &Cluster::host("web")).await })
        })
        .collect();
    for request in requests {
        let response = request.await.expect("request task");
        assert_eq!(response, (200, "backend web".to_owned()));
    }
    let counts = cluster.server.requests();
    assert_eq!(
        counts.count("patch", "sandboxes"),
        1,
        "exactly one wake: {counts:?}"
    );
    let woken = cluster.wait_ready("web").await;
    assert_eq!(woken.spec.operating_mode, Some(OperatingMode::Running));
    let second_pod = cluster.pod_uid("web").expect("web has a pod again");
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn activity_is_recorded_and_an_idle_sandbox_suspends_and_wakes_again() {
    let cluster = Cluster::start().await;
    let idle = backend("idle").await;
    cluster
        .create(&sandbox(NAMESPACE, "idle", idle.port(), json!({})))
        .await;
    let ready = cluster.wait_ready("idle").await;
    assert_eq!(last_activity(&ready), None, "no traffic yet");

    assert_eq!(
        get(cluster.addr, &Cluster::host("idle")).await,
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
    cluster.server.reset_requests();
    assert_eq!(
        get(cluster.addr, &Cluster::host("idle")).await,
        (200, "backend idle".to_owned())
    );
    assert_eq!(
        cluster.server.requests().count("patch", "sandboxes"),
        1,
        "one wake"
    );
    let woken = cluster.wait_ready("idle").await;
    assert!(cluster.pod_uid("idle").is_some(), "a new pod");
    assert_eq!(woken.spec.operating_mode, Some(OperatingMode::Running));
    cluster
        .wait_sandbox("idle", "a newer lastActivityTime", |s| {
            last_activity(s).is_some_and(|t| t > first)
        })
        .await;
    cluster.stop().await;
}
