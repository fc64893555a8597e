//! Wake-on-connect through the cluster against the bare pod start of the same image.
//!
//! Each cycle suspends a Sandbox of the Python runtime (`operatingMode: Suspended`, then its
//! pod gone), measures the baseline — a plain Pod of the same spec created, its IP read from a
//! watch, `GET /` retried from inside the node's network namespace until the first byte — and
//! deletes that pod, then times `GET /` through the installed proxy's NodePort from the host:
//! connect → first response byte while the proxy holds the request, patches the Sandbox, the
//! controller creates its pod and publishes its address. Baseline and wake alternate, so both
//! see the machine's load of the same moment.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use rouse_shared::api::Sandbox;

use super::objects::{
    self, DEADLINE, Runtime, create, delete_pod, runtime_pod_spec, set_mode, wait_condition,
    wait_pod_gone,
};
use super::probe::{self, NetnsProber};
use super::release::Release;
use super::seen::Seen;
use crate::wake::Latencies;

/// Time given to both proxy replicas to see the suspension the API server already shows, so
/// a wake starts from a route they know to be suspended (they follow the store by a watch).
const SETTLE: Duration = Duration::from_millis(300);
/// The sandbox that is suspended and woken.
const NAME: &str = "woken";

/// One runtime class's measurements.
#[derive(Debug, Clone)]
pub struct WakeSide {
    /// The runtime class.
    pub runtime: Runtime,
    /// Plain Pod create → first byte from its IP, one right before each wake.
    pub bare: Latencies,
    /// Connect → first byte through the proxy, the sandbox suspended.
    pub wake: Latencies,
    /// Plain Pod create → its IP seen by a watch (the kubelet's status write).
    pub bare_ip: Latencies,
    /// Connect through the proxy → the woken pod's IP seen by a watch.
    pub wake_ip: Latencies,
}

impl WakeSide {
    /// Per cycle, the wake minus the bare start measured right before it, in ms, sorted.
    pub fn paired_overhead_ms(&self) -> Vec<f64> {
        crate::wake::paired_ms(&self.wake, &self.bare)
    }
}

/// Runs up to `cycles` cycles (stopping after `max_time`) under `runtime` in namespace `ns`.
pub async fn run(
    release: &Release,
    prober: &NetnsProber,
    runtime: Runtime,
    ns: &str,
    cycles: usize,
    max_time: Duration,
) -> Result<WakeSide> {
    let client = release.client().await?;
    let sandboxes: Api<Sandbox> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    let pod_ips: Seen<IpAddr> = Seen::start(pods.clone(), |pod: &Pod| {
        pod.status.as_ref()?.pod_ip.as_ref()?.parse().ok()
    });
    let spec = runtime_pod_spec(runtime);
    create(&sandboxes, &objects::sandbox(ns, NAME, &spec)?).await?;
    wait_condition(&sandboxes, NAME, "Ready", "True").await?;
    let host = Release::host(ns, NAME);
    // One request to the running sandbox: every proxy replica has its route.
    through_proxy(release.proxy, &host).await?;
    let (mut bare, mut wake) = (Vec::new(), Vec::new());
    let (mut bare_ip, mut wake_ip) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for cycle in 0..cycles {
        if cycle > 0 && started.elapsed() >= max_time {
            break;
        }
        set_mode(&sandboxes, NAME, "Suspended").await?;
        wait_condition(&sandboxes, NAME, "Suspended", "True").await?;
        wait_pod_gone(&pods, NAME).await?;
        tokio::time::sleep(SETTLE).await;

        let name = format!("bare-{cycle}");
        let t = Instant::now();
        create(&pods, &objects::pod(ns, &name, &spec)?).await?;
        let (seen, ip) = pod_ips.wait(&name, "given an IP", DEADLINE).await?;
        bare_ip.push(seen - t);
        let addr = SocketAddr::new(ip, objects::RUNTIME_PORT);
        let at = prober.first_byte(addr, t + DEADLINE).await?;
        bare.push(at - t);
        delete_pod(&pods, &name).await?;

        let t = Instant::now();
        let at = through_proxy(release.proxy, &host).await?;
        wake.push(at - t);
        // The woken pod is a new object under the old name: found by its uid.
        let uid = pods.get(NAME).await?.metadata.uid.context("a pod uid")?;
        let (seen, _) = pod_ips.wait(&uid, "given an IP", DEADLINE).await?;
        wake_ip.push(seen.saturating_duration_since(t));
        wait_condition(&sandboxes, NAME, "Ready", "True").await?;
    }
    Ok(WakeSide {
        runtime,
        bare: Latencies {
            name: "bare pod start (create → first byte)",
            samples: bare,
        },
        wake: Latencies {
            name: "wake (connect → first byte, proxy)",
            samples: wake,
        },
        bare_ip: Latencies {
            name: "of which: bare pod create → its IP seen",
            samples: bare_ip,
        },
        wake_ip: Latencies {
            name: "of which: wake connect → the pod's IP seen",
            samples: wake_ip,
        },
    })
}

/// `GET /` through the proxy's NodePort from the host: the instant of the first byte.
async fn through_proxy(proxy: SocketAddr, host: &str) -> Result<Instant> {
    let host = host.to_owned();
    tokio::task::spawn_blocking(move || {
        probe::first_byte(proxy, &host, Duration::from_secs(5), DEADLINE)
    })
    .await
    .context("the request thread")?
}
