//! The controller scenarios against a real API server: the local control plane of
//! `rouse_testsupport::cluster` (etcd, kube-apiserver, kube-controller-manager, and the fake
//! kubelet writing pod status through the API server), or any cluster whose kubeconfig
//! `ROUSE_E2E_KUBECONFIG` names (e.g. a kind cluster, with real pods). See docs/testing.md.
//!
//! The CRDs and RBAC of `deploy/` are applied server-side as a user would, and the controller
//! runs as its ServiceAccount `rouse-system/rouse-controller` (impersonated): it can do exactly
//! what `deploy/kubernetes/controller-rbac.yaml` grants, so a missing verb fails here. Each
//! test makes its own namespace and deletes it afterwards.
//!
//! Without `ROUSE_E2E_KUBECONFIG` and the control plane's binaries the tests skip, except under
//! CI (`CI=true`), where they fail.

mod scenarios;

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::Api;
use kube::api::DeleteParams;
use rouse_testsupport::cluster::{self, ClusterKubelet, SYSTEM_NAMESPACE};
use rouse_testsupport::kube::KubeletOptions;
use scenarios::{Env, lifecycle, ownership, snapshots};

/// A scenario environment on a real API server, and the kubelet of its namespace (none on a
/// cluster with real nodes).
struct Target {
    env: Env,
    _kubelet: Option<ClusterKubelet>,
}

/// The environment, or `None` (with a message) when no API server is available.
async fn target(test: &str) -> Option<Target> {
    let (client, controller_client, kubelet, image, timeout) = if let Some(path) =
        std::env::var_os("ROUSE_E2E_KUBECONFIG")
    {
        let path = std::path::PathBuf::from(path);
        let client = cluster::client_from(&path, None)
            .await
            .expect("ROUSE_E2E_KUBECONFIG");
        let (user, groups) =
            cluster::service_account_identity(SYSTEM_NAMESPACE, "rouse-controller");
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        let controller_client = cluster::client_from(&path, Some((&user, &groups)))
            .await
            .expect("impersonating client");
        let image = std::env::var("ROUSE_E2E_IMAGE").unwrap_or_else(|_| "busybox:1.36".to_owned());
        (
            client,
            controller_client,
            false,
            image,
            Duration::from_secs(180),
        )
    } else {
        let plane = cluster::shared_or_skip(test)?;
        let client = plane.client().await.expect("admin client");
        let controller_client = plane
            .service_account_client(SYSTEM_NAMESPACE, "rouse-controller")
            .await
            .expect("impersonating client");
        // Pods never run: any image name does.
        (
            client,
            controller_client,
            true,
            "busybox:1.36".to_owned(),
            Duration::from_secs(120),
        )
    };
    cluster::install(&client)
        .await
        .expect("install CRDs and RBAC");
    let namespace = cluster::test_namespace(&client, test)
        .await
        .expect("test namespace");
    let kubelet = kubelet
        .then(|| ClusterKubelet::start(client.clone(), &namespace, KubeletOptions::default()));
    Some(Target {
        env: Env {
            client,
            controller_client,
            namespace,
            lease_namespace: SYSTEM_NAMESPACE.to_owned(),
            image,
            timeout,
        },
        _kubelet: kubelet,
    })
}

async fn cleanup(env: &Env) {
    let _ = Api::<Namespace>::all(env.client.clone())
        .delete(&env.namespace, &DeleteParams::default())
        .await;
}

/// The `kube-csi` scenario, with a stand-in of the snapshotter's CRD installed.
async fn csi_snapshots(env: &Env) {
    cluster::install_volume_snapshots(&env.client)
        .await
        .expect("install the VolumeSnapshot CRD");
    snapshots::csi_snapshot_and_fork(env).await;
}

async fn restart_five(env: &Env) {
    lifecycle::restart_converges(env, 5).await;
}

macro_rules! e2e {
    ($name:ident, $scenario:expr) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        async fn $name() {
            let Some(target) = target(stringify!($name)).await else {
                return;
            };
            $scenario(&target.env).await;
            cleanup(&target.env).await;
        }
    };
}

e2e!(e2e_create_ready, lifecycle::create_ready);
e2e!(e2e_suspend_resume, lifecycle::suspend_resume);
e2e!(e2e_expiry, lifecycle::expiry);
e2e!(e2e_idle_suspend, lifecycle::idle_suspend);
e2e!(e2e_restart_converges, restart_five);
e2e!(e2e_leader_election, lifecycle::leader_election);
e2e!(e2e_csi_snapshot_and_fork, csi_snapshots);
e2e!(
    e2e_owned_objects_collected,
    lifecycle::owned_objects_collected
);
e2e!(
    e2e_unowned_pod_left_alone,
    ownership::unowned_pod_left_alone
);
