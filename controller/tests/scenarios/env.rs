//! The environment a scenario runs in, and helpers to build sandboxes and wait on them.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    Container, ContainerPort, PersistentVolumeClaimSpec, Pod, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};
use rouse_controller::mode::kube::{self as run, ControllerConfig, LeaseConfig, Probes};
use rouse_shared::api::{
    EmbeddedObjectMetadata, PersistentVolumeClaimTemplate, Sandbox, SandboxSpec,
};
use rouse_shared::store::KubeStore;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Where a scenario runs.
#[derive(Clone)]
pub struct Env {
    /// A client of the API server (the test's own actions).
    pub client: Client,
    /// The client controllers run with: `client`, or one limited to the controller's RBAC.
    pub controller_client: Client,
    /// The scenario's own namespace.
    pub namespace: String,
    /// Where leader election leases go (the controller's own namespace on a cluster with RBAC).
    pub lease_namespace: String,
    /// The image and command of test pods (a real cluster needs a real image).
    pub image: String,
    /// How long waits may take before they fail.
    pub timeout: Duration,
}

/// A controller running in process; stopped (and its lease released) on [`RunningController::stop`]
/// or when dropped.
pub struct RunningController {
    pub probes: Probes,
    shutdown: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl RunningController {
    /// Stops the controller and waits for it to finish.
    pub async fn stop(mut self) {
        self.shutdown.cancel();
        if let Some(task) = self.task.take() {
            task.await.expect("controller task");
        }
    }
}

impl Drop for RunningController {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

impl Env {
    /// The Sandbox API of the scenario's namespace.
    pub fn sandboxes(&self) -> Api<Sandbox> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// The Pod API of the scenario's namespace.
    pub fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// A controller config scoped to the scenario's namespace.
    pub fn config(&self) -> ControllerConfig {
        ControllerConfig {
            namespace: Some(self.namespace.clone()),
            concurrency: 8,
            ..ControllerConfig::default()
        }
    }

    /// A leader election config for replica `identity`, with short periods; the lease is
    /// named after the scenario's namespace, so scenarios sharing a lease namespace never meet.
    pub fn lease(&self, identity: &str) -> LeaseConfig {
        LeaseConfig {
            name: format!("rouse-controller-{}", self.namespace),
            namespace: self.lease_namespace.clone(),
            identity: identity.to_owned(),
            duration: Duration::from_secs(3),
            retry_period: Duration::from_millis(300),
        }
    }

    /// Starts a controller with `config`.
    pub fn start(&self, config: ControllerConfig) -> RunningController {
        let shutdown = CancellationToken::new();
        let probes = Probes::default();
        let store = KubeStore::new(self.controller_client.clone());
        let task = tokio::spawn({
            let (client, probes, shutdown) = (
                self.controller_client.clone(),
                probes.clone(),
                shutdown.clone(),
            );
            async move {
                run::run(client, store, config, probes, shutdown)
                    .await
                    .expect("controller runs");
            }
        });
        RunningController {
            probes,
            shutdown,
            task: Some(task),
        }
    }

    /// Creates a sandbox.
    pub async fn create(&self, sandbox: &Sandbox) -> Sandbox {
        self.sandboxes()
            .create(&PostParams::default(), sandbox)
            .await
            .expect("create sandbox")
    }

    /// Merge-patches a sandbox's spec.
    pub async fn patch_spec(&self, name: &str, spec: serde_json::Value) {
        self.sandboxes()
            .patch(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "spec": spec })),
            )
            .await
            .expect("patch sandbox");
    }

    /// Waits until the sandbox satisfies `check`, returning it.
    pub async fn wait_sandbox(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Sandbox) -> bool,
    ) -> Sandbox {
        let api = self.sandboxes();
        wait_for(self.timeout, what, || async {
            let sandbox = api.get_opt(name).await.ok().flatten();
            match sandbox {
                Some(s) if check(&s) => Ok(s),
                other => Err(other.map(|s| s.status)),
            }
        })
        .await
    }

    /// Waits until `Ready` has this status and reason.
    pub async fn wait_ready(&self, name: &str, status: &str, reason: &str) -> Sandbox {
        self.wait_sandbox(name, &format!("{name} Ready={status}/{reason}"), |s| {
            condition(s, "Ready") == Some((status.to_owned(), reason.to_owned()))
        })
        .await
    }

    /// Waits until the sandbox is gone.
    pub async fn wait_gone(&self, name: &str) {
        let api = self.sandboxes();
        wait_for(self.timeout, &format!("sandbox {name} deleted"), || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                other => Err(format!("{other:?}").chars().take(200).collect::<String>()),
            }
        })
        .await
    }

    /// Waits until the pod is gone.
    pub async fn wait_pod_gone(&self, name: &str) {
        let api = self.pods();
        wait_for(self.timeout, &format!("pod {name} deleted"), || async {
            match api.get_opt(name).await {
                Ok(None) => Ok(()),
                Ok(Some(p)) => Err(format!("{:?}", p.status.and_then(|s| s.phase))),
                Err(e) => Err(e.to_string()),
            }
        })
        .await
    }
}

/// Status and reason of a condition.
pub fn condition(sandbox: &Sandbox, type_: &str) -> Option<(String, String)> {
    let status = sandbox.status.as_ref()?;
    let c = status.conditions.iter().find(|c| c.type_ == type_)?;
    Some((c.status.clone(), c.reason.clone()))
}

/// An instant `timeout` from now.
pub fn deadline(timeout: Duration) -> Instant {
    Instant::now() + timeout
}

/// Polls `probe` until it returns `Ok` or `timeout` passes; the failure names `what` and the
/// last value seen.
pub async fn wait_for<T, E, F, Fut>(timeout: Duration, what: &str, mut probe: F) -> T
where
    E: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, E>>,
{
    let end = deadline(timeout);
    let mut pause = Duration::from_millis(5);
    loop {
        match probe().await {
            Ok(value) => return value,
            Err(last) if Instant::now() >= end => {
                panic!("timed out after {timeout:?} waiting for {what}; last seen: {last:?}")
            }
            Err(_) => {}
        }
        // Re-check with a short, growing pause: this is a poll with a deadline, not a sleep
        // that hopes something happened.
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(100));
    }
}

/// A sandbox `name` running `env.image` on port 8080 with one volume claim template `data`.
pub fn sandbox(env: &Env, name: &str) -> Sandbox {
    let container = Container {
        name: "main".to_owned(),
        image: Some(env.image.clone()),
        command: Some(vec![
            "sh".into(),
            "-c".into(),
            "httpd -f -p 8080 || sleep 3600".into(),
        ]),
        ports: Some(vec![ContainerPort {
            container_port: 8080,
            name: Some("http".to_owned()),
            ..ContainerPort::default()
        }]),
        ..Container::default()
    };
    let mut sandbox = Sandbox::new(
        name,
        SandboxSpec {
            volume_claim_templates: vec![PersistentVolumeClaimTemplate {
                metadata: EmbeddedObjectMetadata {
                    name: "data".to_owned(),
                    ..EmbeddedObjectMetadata::default()
                },
                spec: PersistentVolumeClaimSpec {
                    access_modes: Some(vec!["ReadWriteOnce".to_owned()]),
                    resources: Some(VolumeResourceRequirements {
                        requests: Some(
                            [("storage".to_owned(), Quantity("16Mi".to_owned()))].into(),
                        ),
                        ..VolumeResourceRequirements::default()
                    }),
                    ..PersistentVolumeClaimSpec::default()
                },
            }],
            ..SandboxSpec::running(container)
        },
    );
    sandbox.metadata.namespace = Some(env.namespace.clone());
    sandbox
}
