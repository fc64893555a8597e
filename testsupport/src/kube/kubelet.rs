//! A fake kubelet (and scheduler): binds new Pods to one fake node and turns them Running and
//! Ready with a configurable IP, and finishes graceful pod deletion by removing the pod.
//!
//! It works on the fake server's storage directly, so its writes are watch events like any
//! other but do not show up in [`FakeApiServer::requests`](super::FakeApiServer::requests).
//! [`ClusterKubelet`](crate::cluster::ClusterKubelet) does the same through a real API server,
//! with the same [`KubeletOptions`].

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::task::{JoinHandle, JoinSet};

use super::delete::DeleteOptions;
use super::registry::{self, ResourceType};
use super::server::FakeApiServer;
use super::storage::{EventType, Storage, meta_str, timestamp_in};

/// What the kubelet makes of one pod.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodOutcome {
    /// Running, every container ready, `Ready=True` (the default).
    Ready,
    /// Running, but never ready (`Ready=False`, reason `ContainersNotReady`).
    NeverReady,
    /// Containers exit with code 1: phase `Failed`.
    Fail,
    /// Containers exit with code 0: phase `Succeeded`.
    Succeed,
    /// Left alone: stays `Pending` and unscheduled.
    Ignore,
}

/// How the kubelet finishes the deletion of a pod marked with a `deletionTimestamp`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodDeletion {
    /// Removes it at once (containers that stop instantly).
    Immediate,
    /// Removes it after this long (containers that take time to stop).
    Graceful(Duration),
}

type PodFn<T> = Arc<dyn Fn(&Value) -> T + Send + Sync>;

/// How the fake kubelet behaves.
#[derive(Clone)]
pub struct KubeletOptions {
    pub(crate) node_name: String,
    pub(crate) start_delay: Duration,
    pub(crate) deletion: PodDeletion,
    pub(crate) pod_ip: PodFn<String>,
    pub(crate) outcome: PodFn<PodOutcome>,
}

impl Default for KubeletOptions {
    fn default() -> Self {
        Self {
            node_name: "fake-node".to_owned(),
            start_delay: Duration::ZERO,
            deletion: PodDeletion::Immediate,
            pod_ip: Arc::new(|_| "127.0.0.1".to_owned()),
            outcome: Arc::new(|_| PodOutcome::Ready),
        }
    }
}

impl KubeletOptions {
    /// The node pods are bound to (default `fake-node`).
    pub fn node_name(mut self, name: impl Into<String>) -> Self {
        self.node_name = name.into();
        self
    }

    /// How long after a pod appears it is bound and started (default none).
    pub fn start_delay(mut self, delay: Duration) -> Self {
        self.start_delay = delay;
        self
    }

    /// How deletion of a pod is finished (default immediate).
    pub fn deletion(mut self, deletion: PodDeletion) -> Self {
        self.deletion = deletion;
        self
    }

    /// The `podIP` of a pod (default `127.0.0.1` for all).
    pub fn pod_ip(mut self, ip: impl Fn(&Value) -> String + Send + Sync + 'static) -> Self {
        self.pod_ip = Arc::new(ip);
        self
    }

    /// What happens to a pod (default [`PodOutcome::Ready`] for all).
    pub fn outcome(
        mut self,
        outcome: impl Fn(&Value) -> PodOutcome + Send + Sync + 'static,
    ) -> Self {
        self.outcome = Arc::new(outcome);
        self
    }
}

/// A running fake kubelet; stops when dropped.
///
/// # Example
/// ```no_run
/// # async fn example() -> anyhow::Result<()> {
/// use std::time::Duration;
/// use rouse_testsupport::kube::{FakeApiServer, FakeKubelet, KubeletOptions, PodOutcome};
///
/// let server = FakeApiServer::start().await?;
/// let options = KubeletOptions::default()
///     .start_delay(Duration::from_millis(50))
///     .outcome(|pod| match pod["metadata"]["name"].as_str() {
///         Some("broken") => PodOutcome::Fail,
///         _ => PodOutcome::Ready,
///     });
/// let _kubelet = FakeKubelet::start(&server, options);
/// # Ok(())
/// # }
/// ```
pub struct FakeKubelet {
    task: JoinHandle<()>,
}

impl Drop for FakeKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeKubelet {
    /// Starts a kubelet for the pods of `server` (on the current tokio runtime).
    pub fn start(server: &FakeApiServer, options: KubeletOptions) -> Self {
        let task = tokio::spawn(run(server.storage(), options));
        Self { task }
    }
}

fn pods() -> &'static ResourceType {
    // "pods" is in the registry table; the fallback only keeps this free of a panic path.
    registry::by_name("pods").unwrap_or(&registry::RESOURCES[0])
}

struct Kubelet {
    storage: Arc<Storage>,
    options: KubeletOptions,
    started: HashSet<String>,
    terminating: HashSet<String>,
    tasks: JoinSet<()>,
}

async fn run(storage: Arc<Storage>, options: KubeletOptions) {
    let rt = pods();
    let mut changed = storage.subscribe();
    let mut kubelet = Kubelet {
        storage: storage.clone(),
        options,
        started: HashSet::new(),
        terminating: HashSet::new(),
        tasks: JoinSet::new(),
    };
    let mut cursor = kubelet.relist();
    loop {
        changed.borrow_and_update();
        match storage.events_after(rt, cursor, 512) {
            Ok((events, current)) => {
                let more = events.len() == 512;
                for event in &events {
                    if event.kind == EventType::Deleted {
                        kubelet.forget(&event.object);
                    } else {
                        kubelet.consider(&event.object);
                    }
                    cursor = event.rv;
                }
                if more {
                    continue;
                }
                cursor = cursor.max(current);
            }
            Err(_) => cursor = kubelet.relist(),
        }
        while kubelet.tasks.try_join_next().is_some() {}
        tokio::select! {
            changed = changed.changed() => if changed.is_err() { return },
            Some(_) = kubelet.tasks.join_next(), if !kubelet.tasks.is_empty() => {}
        }
    }
}

impl Kubelet {
    /// Considers every pod; returns the version to follow changes from.
    fn relist(&mut self) -> u64 {
        let (items, rv) = self.storage.list(pods(), None, |_| true);
        for pod in &items {
            self.consider(pod);
        }
        rv
    }

    fn forget(&mut self, pod: &Value) {
        if let Some(uid) = meta_str(pod, "uid") {
            self.started.remove(uid);
            self.terminating.remove(uid);
        }
    }

    fn consider(&mut self, pod: &Value) {
        let (Some(uid), Some(ns), Some(name)) = (
            meta_str(pod, "uid"),
            meta_str(pod, "namespace"),
            meta_str(pod, "name"),
        ) else {
            return;
        };
        let node = pod
            .pointer("/spec/nodeName")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !node.is_empty() && node != self.options.node_name {
            return;
        }
        let (uid, ns, name) = (uid.to_owned(), ns.to_owned(), name.to_owned());
        let storage = self.storage.clone();
        if pod.pointer("/metadata/deletionTimestamp").is_some() {
            if !self.terminating.insert(uid.clone()) {
                return;
            }
            let wait = match self.options.deletion {
                PodDeletion::Immediate => Duration::ZERO,
                PodDeletion::Graceful(wait) => wait,
            };
            self.tasks.spawn(async move {
                if !wait.is_zero() {
                    tokio::time::sleep(wait).await;
                }
                let options = DeleteOptions {
                    grace_period_seconds: Some(0),
                    uid: Some(uid),
                    ..DeleteOptions::default()
                };
                // Gone already (deleted by someone else) is fine.
                let _ = storage.delete(pods(), &ns, &name, &options);
            });
            return;
        }
        let phase = pod
            .pointer("/status/phase")
            .and_then(Value::as_str)
            .unwrap_or("Pending");
        if !self.started.insert(uid.clone()) || (!node.is_empty() && phase != "Pending") {
            return;
        }
        let outcome = (self.options.outcome)(pod);
        if outcome == PodOutcome::Ignore {
            return;
        }
        let ip = (self.options.pod_ip)(pod);
        let node = self.options.node_name.clone();
        let delay = self.options.start_delay;
        self.tasks.spawn(async move {
            if !delay.is_zero() {
                tokio::time::sleep(delay).await;
            }
            storage.modify(pods(), &ns, &name, &uid, |pod| {
                if pod.pointer("/metadata/deletionTimestamp").is_some() {
                    return;
                }
                pod["spec"]["nodeName"] = json!(node);
                pod["status"] = pod_status(pod, &ip, outcome);
            });
        });
    }
}

/// The status a kubelet reports for a pod with the given outcome (also written through a real
/// API server by [`ClusterKubelet`](crate::cluster::ClusterKubelet)).
pub(crate) fn pod_status(pod: &Value, ip: &str, outcome: PodOutcome) -> Value {
    let now = timestamp_in(Duration::ZERO);
    let uid = meta_str(pod, "uid").unwrap_or_default();
    let (phase, ready, reason) = match outcome {
        PodOutcome::Ready | PodOutcome::Ignore => ("Running", true, None),
        PodOutcome::NeverReady => ("Running", false, Some("ContainersNotReady")),
        PodOutcome::Fail => ("Failed", false, Some("PodFailed")),
        PodOutcome::Succeed => ("Succeeded", false, Some("PodCompleted")),
    };
    let state = match outcome {
        PodOutcome::Fail => {
            json!({"terminated": {"exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now}})
        }
        PodOutcome::Succeed => {
            json!({"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now, "finishedAt": now}})
        }
        _ => json!({"running": {"startedAt": now}}),
    };
    let containers: Vec<Value> = pod
        .pointer("/spec/containers")
        .and_then(Value::as_array)
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    let name = c.get("name").and_then(Value::as_str).unwrap_or_default();
                    json!({
                        "name": name,
                        "image": c.get("image").cloned().unwrap_or(json!("")),
                        "imageID": "",
                        "containerID": format!("fake://{uid}/{name}"),
                        "ready": ready,
                        "started": phase == "Running",
                        "restartCount": 0,
                        "state": state,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    let condition = |kind: &str, ok: bool| {
        let mut c = json!({"type": kind, "status": if ok { "True" } else { "False" }, "lastTransitionTime": now});
        if !ok && let Some(reason) = reason {
            c["reason"] = json!(reason);
        }
        c
    };
    json!({
        "phase": phase,
        "conditions": [
            condition("PodScheduled", true),
            condition("Initialized", true),
            condition("ContainersReady", ready),
            condition("Ready", ready),
        ],
        "hostIP": "127.0.0.1",
        "hostIPs": [{"ip": "127.0.0.1"}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": now,
        "qosClass": "BestEffort",
        "containerStatuses": containers,
    })
}
