//! The `node` scenario: Kubernetes mode on a real node (`rouse_testsupport::node`: kubelet,
//! containerd with runc and gVisor, kube-proxy, inside a network namespace the run makes) with
//! the Helm chart installed from a Rouse image packed from the given `rouse` binary, each
//! measurement against a baseline in the same run:
//!
//! - [`memory`]: the controller and proxy pods before and with N sandboxes (first, so that
//!   "before" is the release at rest);
//! - [`wake`]: wake-on-connect through the proxy's NodePort against the bare pod start of the
//!   same image, per runtime class;
//! - [`claims`]: warm claim → Ready against a cold Sandbox create → Ready, under gVisor.
//!
//! Needs root and the binaries of the real node (testsupport/cluster/build.sh,
//! testsupport/gvisor/build.sh, Debian's containerd, runc and CNI plugins). Every part is
//! bounded in count and time, and the node is torn down at the end, failed or not.

pub mod claims;
pub mod memory;
pub mod objects;
pub mod probe;
pub mod release;
pub mod report;
pub mod seen;
pub mod wake;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result};
use rouse_testsupport::cluster;

pub use objects::Runtime;
use release::Release;
pub use report::{print, render};

/// What to run.
#[derive(Debug, Clone)]
pub struct NodeOptions {
    /// The `rouse` binary the image is packed from.
    pub rouse: PathBuf,
    /// Wake cycles per runtime class, and claim cycles (each one warm claim and one cold
    /// create).
    pub cycles: usize,
    /// Sandboxes of the memory measurement (the node takes 110 pods; the release has 4).
    pub sandboxes: usize,
    /// Warm pool members of the claim measurement.
    pub pool: usize,
    /// Runtime classes of the wake measurement.
    pub runtimes: Vec<Runtime>,
    /// Stop starting cycles of a part after this long.
    pub max_time: Duration,
}

/// Everything measured.
#[derive(Debug, Clone)]
pub struct NodeReport {
    /// Start of the node to Ready.
    pub node_start: Duration,
    /// `helm install --wait`.
    pub install: Duration,
    /// The 1-minute load average before the node started and at the end.
    pub load: (f64, f64),
    /// The memory of the release's pods.
    pub memory: memory::MemorySide,
    /// One per runtime class.
    pub wake: Vec<wake::WakeSide>,
    /// Warm claims and cold creates.
    pub claims: claims::ClaimSides,
}

/// Starts the node, installs the release, measures, tears the node down.
pub fn run(options: &NodeOptions) -> Result<NodeReport> {
    let load_before = load_average();
    let release = Release::start(&options.rouse)?;
    eprintln!(
        "node Ready in {:.1} s, release installed in {:.1} s; proxy at {}",
        release.node_start.as_secs_f64(),
        release.install.as_secs_f64(),
        release.proxy
    );
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let measured = runtime.block_on(measure(&release, options));
    drop(runtime);
    let (memory, wake, claims) = measured.with_context(|| {
        format!(
            "on the real node (logs in {}/logs)",
            release.node.dir().display()
        )
    })?;
    let report = NodeReport {
        node_start: release.node_start,
        install: release.install,
        load: (load_before, load_average()),
        memory,
        wake,
        claims,
    };
    drop(release);
    Ok(report)
}

/// The three parts in order, each in a namespace of its own that is deleted afterwards (the
/// node runs at most 110 pods).
async fn measure(
    release: &Release,
    options: &NodeOptions,
) -> Result<(memory::MemorySide, Vec<wake::WakeSide>, claims::ClaimSides)> {
    let client = release.client().await?;
    let ns = "bench-memory";
    cluster::create_namespace(&client, ns).await?;
    eprintln!("memory: {} sandboxes", options.sandboxes);
    let memory = memory::run(release, ns, options.sandboxes).await?;
    objects::delete_namespace(&client, ns).await?;

    let prober = probe::NetnsProber::start(&release.node.netns_path())?;
    let mut wakes = Vec::new();
    for &runtime in &options.runtimes {
        let ns = format!("bench-wake-{}", runtime.name());
        cluster::create_namespace(&client, &ns).await?;
        eprintln!("wake under {}: {} cycles", runtime.name(), options.cycles);
        let side = wake::run(
            release,
            &prober,
            runtime,
            &ns,
            options.cycles,
            options.max_time,
        )
        .await?;
        wakes.push(side);
        objects::delete_namespace(&client, &ns).await?;
    }
    drop(prober);

    let ns = "bench-claims";
    cluster::create_namespace(&client, ns).await?;
    eprintln!(
        "claims: {} cycles, pool of {}",
        options.cycles, options.pool
    );
    let claims = claims::run(release, ns, options.pool, options.cycles, options.max_time).await?;
    objects::delete_namespace(&client, ns).await?;
    Ok((memory, wakes, claims))
}

/// The 1-minute load average (0 when unreadable).
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|t| t.split_whitespace().next()?.parse().ok())
        .unwrap_or(0.0)
}

#[cfg(test)]
mod tests;
