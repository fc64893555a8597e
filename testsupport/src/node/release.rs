//! Rouse's Helm release on a real node, installed one way for the end-to-end suite and the
//! node benchmark: `helm install` of `deploy/helm/rouse` with the locally packed image
//! (`registry.local/rouse:dev`, never pulled), the RuntimeClass `gvisor` and the proxy's
//! Service on a NodePort, waiting for every Deployment.

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Service;
use kube::Api;

use super::RealNode;
use crate::cluster;

/// The release's namespace (the chart's documented one).
pub const RELEASE_NAMESPACE: &str = "rouse-system";
/// The proxy's sandbox domain in the chart's default config.
pub const DOMAIN: &str = "sandbox.example.com";

/// Installs the chart on `node`; on failure the error carries helm's output.
pub fn helm_install(node: &RealNode) -> Result<()> {
    let helm = cluster::helm_binary()?;
    let out = std::process::Command::new(&helm)
        .args(["install", "rouse"])
        .arg(cluster::deploy_dir().join("helm/rouse"))
        .args(["--namespace", RELEASE_NAMESPACE, "--create-namespace"])
        .args(["--set", "image.repository=registry.local/rouse"])
        .args(["--set", "image.tag=dev"])
        .args(["--set", "image.pullPolicy=Never"])
        .args(["--set", "runtimeClasses.gvisor=true"])
        .args(["--set", "proxy.service.type=NodePort"])
        .args(["--wait", "--timeout", "180s"])
        .env("KUBECONFIG", node.kubeconfig())
        .output()
        .context("run helm")?;
    if !out.status.success() {
        bail!(
            "helm install failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(())
}

/// The NodePort of the release's proxy Service.
pub async fn proxy_node_port(node: &RealNode) -> Result<u16> {
    let services: Api<Service> = Api::namespaced(node.client().await?, RELEASE_NAMESPACE);
    let port = services
        .get("rouse-proxy")
        .await?
        .spec
        .and_then(|s| s.ports)
        .and_then(|p| p.first().and_then(|p| p.node_port))
        .context("the proxy Service has no NodePort")?;
    u16::try_from(port).context("NodePort out of range")
}
