//! Memory of the release's controller and proxy pods with N sandboxes.
//!
//! Each pod of the release is read twice, before any sandbox exists and once N Sandboxes of the
//! pause program (runc: the smallest workload, so N pods fit the node) are Ready and the
//! release has taken them in — every proxy replica's `rouse_proxy_routes` and the leader's
//! `rouse_controller_sandboxes{state="ready"}` count them. Per pod: the working set of its
//! memory cgroup (usage less inactive file pages, what the kubelet reports) under the node's
//! cgroup, and the RSS of its `rouse` process from /proc.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use futures::StreamExt;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::Pod;
use kube::api::ListParams;
use kube::{Api, Client};
use rouse_shared::api::Sandbox;

use super::objects::{self, create, pause_pod_spec, pod_metric, wait_for};
use super::release::{RELEASE_NAMESPACE, Release};

/// Sandboxes created at once.
const CONCURRENCY: usize = 8;

/// One pod's memory, in bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Memory {
    /// The pod cgroup's usage less its inactive file pages.
    pub working_set: u64,
    /// The `rouse` process's resident set.
    pub rss: u64,
}

/// One pod of the release, before and after.
#[derive(Debug, Clone)]
pub struct PodMemory {
    /// `controller (leader)`, `controller (standby)` or `proxy`.
    pub role: &'static str,
    /// The pod's name.
    pub pod: String,
    /// Before any sandbox.
    pub before: Memory,
    /// With the sandboxes.
    pub after: Memory,
}

/// The memory measurement.
#[derive(Debug, Clone)]
pub struct MemorySide {
    /// Sandboxes created.
    pub sandboxes: usize,
    /// From the first create to the release counting them all.
    pub fill: Duration,
    /// Every controller and proxy pod.
    pub pods: Vec<PodMemory>,
}

/// Creates `n` pause sandboxes in namespace `ns` and reads every release pod before and after.
pub async fn run(release: &Release, ns: &str, n: usize) -> Result<MemorySide> {
    let client = release.client().await?;
    let cgroup = Path::new("/sys/fs/cgroup/memory").join(release.node.cgroup());
    let pods = release_pods(&client).await?;
    let mut before = Vec::new();
    for (_, pod) in &pods {
        before.push(read(&cgroup, pod)?);
    }
    let sandboxes: Api<Sandbox> = Api::namespaced(client.clone(), ns);
    let spec = pause_pod_spec();
    let started = Instant::now();
    let created = futures::stream::iter(0..n)
        .map(|i| {
            let (sandboxes, spec) = (&sandboxes, &spec);
            async move {
                create(
                    sandboxes,
                    &objects::sandbox(ns, &format!("idle-{i}"), spec)?,
                )
                .await
            }
        })
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
    created.into_iter().collect::<Result<Vec<()>>>()?;
    // At least n: the release may count more than these sandboxes, never fewer.
    let counted = |value: f64| value >= n as f64;
    wait_for(
        &format!("{n} sandboxes Ready and counted by the release"),
        || async {
            let ready = sandboxes
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter(|s| objects::condition(s, "Ready") == Some("True"))
                .count();
            // Errors, not `None`: the last one names what fell short when the wait times out.
            if ready < n {
                bail!("{ready} of {n} sandboxes Ready");
            }
            for (role, pod) in &pods {
                let name = pod.metadata.name.as_deref().unwrap_or_default();
                let seen = match *role {
                    "proxy" => pod_metric(&client, name, 9090, "rouse_proxy_routes", &[]).await?,
                    "controller (leader)" => {
                        let metric = "rouse_controller_sandboxes";
                        pod_metric(&client, name, 8081, metric, &[("state", "ready")]).await?
                    }
                    _ => n as f64,
                };
                if !counted(seen) {
                    bail!("{role} {name} counts {seen} of {n}");
                }
            }
            Ok(Some(()))
        },
    )
    .await?;
    let fill = started.elapsed();
    let mut measured = Vec::new();
    for ((role, pod), before) in pods.iter().zip(before) {
        measured.push(PodMemory {
            role,
            pod: pod.metadata.name.clone().unwrap_or_default(),
            before,
            after: read(&cgroup, pod)?,
        });
    }
    Ok(MemorySide {
        sandboxes: n,
        fill,
        pods: measured,
    })
}

/// The release's controller and proxy pods with their roles (the leader from its Lease).
async fn release_pods(client: &Client) -> Result<Vec<(&'static str, Pod)>> {
    let pods: Api<Pod> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    let leases: Api<Lease> = Api::namespaced(client.clone(), RELEASE_NAMESPACE);
    let leader = leases
        .get("rouse-controller")
        .await
        .context("the controller's Lease")?
        .spec
        .and_then(|s| s.holder_identity)
        .context("no controller leads")?;
    let mut out = Vec::new();
    for (component, label) in [
        ("controller", "app.kubernetes.io/name=rouse-controller"),
        ("proxy", "app.kubernetes.io/name=rouse-proxy"),
    ] {
        for pod in pods.list(&ListParams::default().labels(label)).await?.items {
            let name = pod.metadata.name.as_deref().unwrap_or_default();
            let role = match component {
                "controller" if name == leader => "controller (leader)",
                "controller" => "controller (standby)",
                _ => "proxy",
            };
            out.push((role, pod));
        }
    }
    if out.is_empty() {
        bail!("no controller or proxy pods in {RELEASE_NAMESPACE}");
    }
    Ok(out)
}

/// Reads `pod`'s memory under the node's memory cgroup `node`.
fn read(node: &Path, pod: &Pod) -> Result<Memory> {
    let uid = pod.metadata.uid.as_deref().context("a pod without a uid")?;
    let dir = find_dir(node, &format!("pod{uid}"), 3)
        .with_context(|| format!("no cgroup pod{uid} under {}", node.display()))?;
    let number = |file: &str| -> Result<u64> {
        let path = dir.join(file);
        let text =
            std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
        text.trim()
            .parse()
            .with_context(|| format!("{}: {text:?}", path.display()))
    };
    let usage = number("memory.usage_in_bytes")?;
    let stat = std::fs::read_to_string(dir.join("memory.stat")).context("read memory.stat")?;
    let inactive = stat_value(&stat, "total_inactive_file").unwrap_or(0);
    let mut rss = 0;
    for pid in procs(&dir)? {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if comm.trim() == "rouse" {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            rss += status_kib(&status, "VmRSS:").unwrap_or(0) * 1024;
        }
    }
    if rss == 0 {
        bail!("no rouse process in {}", dir.display());
    }
    Ok(Memory {
        working_set: usage.saturating_sub(inactive),
        rss,
    })
}

/// The directory named `name` at most `depth` levels below `dir`.
fn find_dir(dir: &Path, name: &str, depth: usize) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let subdirs: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    if let Some(found) = subdirs
        .iter()
        .find(|p| p.file_name().is_some_and(|n| n == name))
    {
        return Some(found.clone());
    }
    if depth == 0 {
        return None;
    }
    subdirs.iter().find_map(|d| find_dir(d, name, depth - 1))
}

/// Every process in cgroup `dir` and below.
fn procs(dir: &Path) -> Result<Vec<u32>> {
    let mut pids: Vec<u32> = std::fs::read_to_string(dir.join("cgroup.procs"))
        .with_context(|| format!("read {}/cgroup.procs", dir.display()))?
        .lines()
        .filter_map(|l| l.trim().parse().ok())
        .collect();
    for entry in std::fs::read_dir(dir)?.flatten() {
        if entry.path().is_dir() {
            pids.extend(procs(&entry.path())?);
        }
    }
    Ok(pids)
}

/// A `memory.stat` value.
pub fn stat_value(stat: &str, key: &str) -> Option<u64> {
    stat.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix(' ')?.trim().parse().ok())
}

/// A `/proc/PID/status` value in KiB (`VmRSS:   1234 kB`).
pub fn status_kib(status: &str, key: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key)?.split_whitespace().next()?.parse().ok())
}
