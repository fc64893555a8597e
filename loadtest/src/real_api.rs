//! The controller benchmark's real API server: the test control plane of
//! `rouse_testsupport::cluster` (etcd, kube-apiserver, kube-controller-manager) with the CRDs
//! applied and a cluster kubelet, and the API requests it served, read from its own
//! `apiserver_request_total`.

use anyhow::{Context, Result};
use kube::Client;
use rouse_testsupport::cluster::{self, ClusterKubelet, ControlPlane};
use rouse_testsupport::kube::KubeletOptions;

/// A started control plane with namespace `namespace` and a kubelet for it.
pub struct RealApi {
    /// Stops the processes when dropped.
    pub plane: ControlPlane,
    /// A cluster admin client.
    pub client: Client,
    _kubelet: ClusterKubelet,
}

impl RealApi {
    /// Starts the control plane (the binaries must be built: testsupport/cluster/build.sh),
    /// installs the CRDs and makes `namespaces`; the kubelet serves the first.
    pub async fn start(namespaces: &[&str]) -> Result<Self> {
        let plane = tokio::task::spawn_blocking(ControlPlane::start)
            .await
            .context("start thread")??;
        let client = plane.client().await?;
        cluster::install(&client).await?;
        for namespace in namespaces {
            cluster::create_namespace(&client, namespace).await?;
        }
        let kubelet = ClusterKubelet::start(
            client.clone(),
            namespaces.first().copied().unwrap_or("default"),
            KubeletOptions::default(),
        );
        Ok(Self {
            plane,
            client,
            _kubelet: kubelet,
        })
    }

    /// Requests served so far for the resources a Sandbox involves, without what the kubelet
    /// does (`pods/binding`, `pods/status`), comparable to the fake server's counts.
    pub async fn requests(&self) -> Result<u64> {
        let request = http::Request::get("/metrics").body(Vec::new())?;
        let text = self.client.request_text(request).await?;
        Ok(count_requests(&text))
    }
}

/// Sums `apiserver_request_total` over the Sandbox's resources, less the kubelet's subresources.
fn count_requests(metrics: &str) -> u64 {
    const RESOURCES: [&str; 6] = [
        "sandboxes",
        "pods",
        "services",
        "persistentvolumeclaims",
        "events",
        "leases",
    ];
    metrics
        .lines()
        .filter_map(|line| line.strip_prefix("apiserver_request_total{"))
        .filter_map(|rest| rest.split_once("} "))
        .filter(|(labels, _)| {
            let label = |name: &str| {
                labels
                    .split(',')
                    .find_map(|kv| kv.strip_prefix(&format!("{name}=\"")))
                    .map(|v| v.trim_end_matches('"'))
                    .unwrap_or_default()
            };
            RESOURCES.contains(&label("resource"))
                && !(label("resource") == "pods"
                    && matches!(label("subresource"), "binding" | "status"))
        })
        .filter_map(|(_, value)| value.trim().parse::<f64>().ok())
        .map(|v| v as u64)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::count_requests;

    #[test]
    fn counts_the_sandbox_resources_without_the_kubelet() {
        let text = "\
apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"agents.x-k8s.io\",resource=\"sandboxes\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1beta1\"} 10
apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"binding\",verb=\"POST\",version=\"v1\"} 10
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"status\",verb=\"PATCH\",version=\"v1\"} 10
apiserver_request_total{code=\"201\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"pods\",scope=\"resource\",subresource=\"\",verb=\"POST\",version=\"v1\"} 10
apiserver_request_total{code=\"200\",component=\"apiserver\",dry_run=\"\",group=\"\",resource=\"nodes\",scope=\"resource\",subresource=\"\",verb=\"GET\",version=\"v1\"} 7
# HELP other
";
        assert_eq!(count_requests(text), 20);
    }
}
