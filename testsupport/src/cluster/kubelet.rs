//! A fake kubelet (and scheduler) for a real API server: binds the new pods of one namespace
//! to the fake node with a `Binding`, writes their status (Running and Ready with a `podIP`
//! on 127.0.0.1 by default) through the `status` subresource, and finishes graceful deletion.
//! Pods never run: the tests point their IPs at backends they start themselves.

use std::collections::HashSet;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use serde_json::{Value, json};
use tokio::task::{JoinHandle, JoinSet};

use crate::kube::{KubeletOptions, PodDeletion, PodOutcome, pod_status};

/// A running kubelet for one namespace of a real API server; stops when dropped.
pub struct ClusterKubelet {
    task: JoinHandle<()>,
}

impl Drop for ClusterKubelet {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl ClusterKubelet {
    /// Starts a kubelet for the pods of `namespace` (on the current tokio runtime). `client`
    /// needs to watch pods and create `pods/binding`, patch `pods/status` and delete pods.
    pub fn start(client: Client, namespace: &str, options: KubeletOptions) -> Self {
        let pods: Api<Pod> = Api::namespaced(client, namespace);
        Self {
            task: tokio::spawn(run(pods, options)),
        }
    }
}

async fn run(pods: Api<Pod>, options: KubeletOptions) {
    let mut started = HashSet::new();
    let mut terminating = HashSet::new();
    let mut tasks = JoinSet::new();
    let mut events = watcher(pods.clone(), watcher::Config::default())
        .default_backoff()
        .boxed();
    loop {
        let event = tokio::select! {
            event = events.next() => event,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
        };
        let pod = match event {
            None => return,
            // The watcher retries with its default backoff; keep following it.
            Some(Err(_)) => continue,
            Some(Ok(watcher::Event::Delete(pod))) => {
                let uid = pod.uid().unwrap_or_default();
                started.remove(&uid);
                terminating.remove(&uid);
                continue;
            }
            Some(Ok(watcher::Event::Apply(pod) | watcher::Event::InitApply(pod))) => pod,
            Some(Ok(_)) => continue,
        };
        let (Some(uid), name) = (pod.uid(), pod.name_any()) else {
            continue;
        };
        let node = pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default();
        if !node.is_empty() && node != options.node_name {
            continue;
        }
        if pod.metadata.deletion_timestamp.is_some() {
            if terminating.insert(uid.clone()) {
                let wait = match options.deletion {
                    PodDeletion::Immediate => Duration::ZERO,
                    PodDeletion::Graceful(wait) => wait,
                };
                tasks.spawn(finish_deletion(pods.clone(), name, uid, wait));
            }
            continue;
        }
        let phase = pod
            .status
            .as_ref()
            .and_then(|s| s.phase.clone())
            .unwrap_or_else(|| "Pending".to_owned());
        if !started.insert(uid.clone()) || (!node.is_empty() && phase != "Pending") {
            continue;
        }
        let Ok(value) = serde_json::to_value(&pod) else {
            continue;
        };
        let outcome = (options.outcome)(&value);
        if outcome == PodOutcome::Ignore {
            continue;
        }
        let ip = (options.pod_ip)(&value);
        let mut status = pod_status(&value, &ip, outcome);
        // The API server sets the QoS class at creation and refuses to change it.
        if let Some(status) = status.as_object_mut() {
            status.remove("qosClass");
        }
        tasks.spawn(start_pod(
            pods.clone(),
            name,
            node.is_empty().then(|| options.node_name.clone()),
            status,
            options.start_delay,
        ));
    }
}

/// Binds the pod (when `bind_to` is set), then writes its status.
async fn start_pod(
    pods: Api<Pod>,
    name: String,
    bind_to: Option<String>,
    status: Value,
    delay: Duration,
) {
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    if let Some(node) = bind_to {
        let binding = json!({
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": name},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node},
        });
        // A pod deleted or bound meanwhile refuses the binding: nothing left to do.
        if pods
            .create_subresource::<Value, Value>("binding", &name, &PostParams::default(), &binding)
            .await
            .is_err()
        {
            return;
        }
    }
    // A pod deleted meanwhile has no status to write.
    let _ = pods
        .patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await;
}

/// Removes a terminating pod (after `wait`), as a kubelet does once its containers stopped.
async fn finish_deletion(pods: Api<Pod>, name: String, uid: String, wait: Duration) {
    if !wait.is_zero() {
        tokio::time::sleep(wait).await;
    }
    let params = DeleteParams {
        grace_period_seconds: Some(0),
        preconditions: Some(Preconditions {
            uid: Some(uid),
            resource_version: None,
        }),
        ..DeleteParams::default()
    };
    // Gone already (deleted by someone else) is fine.
    let _ = pods.delete(&name, &params).await;
}
