//! The Kubernetes client the cluster commands (`rouse controller`, `rouse proxy`) share.

use anyhow::Context as _;

/// A client from `KUBECONFIG` (or `~/.kube/config`), else from the pod's service account.
pub async fn client() -> anyhow::Result<kube::Client> {
    let config = kube::Config::infer().await.context(
        "no Kubernetes cluster config found: set KUBECONFIG to a kubeconfig file, or run in a pod \
         with a service account (in-cluster config)",
    )?;
    kube::Client::try_from(config)
        .context("cannot build a Kubernetes client from the cluster config")
}
