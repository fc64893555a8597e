//! Warm claim → Ready against cold create → Ready, under gVisor, on the real node.
//!
//! A SandboxTemplate of the Python runtime (`runtimeClassName: gvisor`) and a SandboxWarmPool of
//! `pool` members. Each cycle waits until the pool is full and no other pod of the namespace is
//! starting, then measures a cold start — a Sandbox created → `Ready=True` — and deletes it,
//! then a warm claim — a SandboxClaim created → `Ready=True` with `status.sandbox.name`, which
//! must have adopted a member (`launch-type: warm`) — and deletes it. Both latencies are as a
//! client watching the objects sees them (a watch records the first matching event), which is
//! what the SDK waits for. The two alternate, and neither overlaps the pool's refill.

use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use kube::{Api, Client};
use rouse_shared::api::keys::{LAUNCH_TYPE, LAUNCH_TYPE_WARM};
use rouse_shared::api::{Sandbox, SandboxClaim, SandboxTemplate, SandboxWarmPool};
use serde_json::json;

use super::objects::{self, DEADLINE, Runtime, create, runtime_pod_spec, wait_for};
use super::release::Release;
use super::seen::Seen;
use crate::wake::Latencies;

/// The measurements.
#[derive(Debug, Clone)]
pub struct ClaimSides {
    /// Warm pool members.
    pub pool: usize,
    /// SandboxClaim created → Ready with its sandbox, adopted from the pool.
    pub warm: Latencies,
    /// Sandbox created → Ready, a pod started for it.
    pub cold: Latencies,
}

/// Runs up to `cycles` cycles (stopping after `max_time`) in namespace `ns`.
pub async fn run(
    release: &Release,
    ns: &str,
    pool: usize,
    cycles: usize,
    max_time: Duration,
) -> Result<ClaimSides> {
    let client = release.client().await?;
    let sandboxes: Api<Sandbox> = Api::namespaced(client.clone(), ns);
    let claims: Api<SandboxClaim> = Api::namespaced(client.clone(), ns);
    let claims_ready: Seen<String> = Seen::start(claims.clone(), |claim: &SandboxClaim| {
        let status = claim.status.as_ref()?;
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        ready.then(|| status.sandbox.as_ref().map(|s| s.name.clone()))?
    });
    let sandboxes_ready: Seen<()> = Seen::start(sandboxes.clone(), |sandbox: &Sandbox| {
        (objects::condition(sandbox, "Ready") == Some("True")).then_some(())
    });
    let spec = runtime_pod_spec(Runtime::Gvisor);
    let template: SandboxTemplate = serde_json::from_value(json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
        "kind": "SandboxTemplate",
        "metadata": {"name": "runtime", "namespace": ns},
        "spec": {"podTemplate": {"spec": spec}},
    }))?;
    create(&Api::namespaced(client.clone(), ns), &template).await?;
    let warm_pool: SandboxWarmPool = serde_json::from_value(json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
        "kind": "SandboxWarmPool",
        "metadata": {"name": "pool", "namespace": ns},
        "spec": {"replicas": pool, "sandboxTemplateRef": {"name": "runtime"}},
    }))?;
    create(&Api::namespaced(client.clone(), ns), &warm_pool).await?;

    let (mut warm, mut cold) = (Vec::new(), Vec::new());
    let started = Instant::now();
    for cycle in 0..cycles {
        if cycle > 0 && started.elapsed() >= max_time {
            break;
        }
        settled(&client, ns, pool).await?;
        let name = format!("cold-{cycle}");
        let t = Instant::now();
        create(&sandboxes, &objects::sandbox(ns, &name, &spec)?).await?;
        let (at, ()) = sandboxes_ready.wait(&name, "Ready", DEADLINE).await?;
        cold.push(at - t);
        delete_sandbox(&client, ns, &name).await?;

        settled(&client, ns, pool).await?;
        let name = format!("claim-{cycle}");
        let claim: SandboxClaim = serde_json::from_value(json!({
            "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
            "kind": "SandboxClaim",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"warmPoolRef": {"name": "pool"}},
        }))?;
        let t = Instant::now();
        create(&claims, &claim).await?;
        let (at, adopted) = claims_ready.wait(&name, "Ready", DEADLINE).await?;
        warm.push(at - t);
        let sandbox = sandboxes
            .get(&adopted)
            .await
            .context("the claimed sandbox")?;
        let launch = sandbox
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(LAUNCH_TYPE));
        if launch.map(String::as_str) != Some(LAUNCH_TYPE_WARM) {
            bail!("claim {name} got {adopted} launched {launch:?}, not from the warm pool");
        }
        claims
            .delete(&name, &DeleteParams::default())
            .await
            .with_context(|| format!("delete claim {name}"))?;
        // Its sandbox too, whether or not the garbage collector got there first.
        delete_sandbox(&client, ns, &adopted).await?;
    }
    Ok(ClaimSides {
        pool,
        warm: Latencies {
            name: "warm claim → Ready (gVisor pool)",
            samples: warm,
        },
        cold: Latencies {
            name: "cold Sandbox create → Ready (gVisor)",
            samples: cold,
        },
    })
}

/// Deletes sandbox `name` and waits until it and its pod are gone.
async fn delete_sandbox(client: &Client, ns: &str, name: &str) -> Result<()> {
    let sandboxes: Api<Sandbox> = Api::namespaced(client.clone(), ns);
    match sandboxes.delete(name, &DeleteParams::default()).await {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_not_found() => {}
        Err(e) => return Err(e).with_context(|| format!("delete sandbox {name}")),
    }
    wait_for(&format!("sandbox {name} gone"), || async {
        Ok(sandboxes.get_opt(name).await?.is_none().then_some(()))
    })
    .await?;
    objects::wait_pod_gone(&Api::namespaced(client.clone(), ns), name).await
}

/// Waits until the pool reports `pool` ready members and every pod of the namespace is Ready
/// (no refill still starting).
async fn settled(client: &Client, ns: &str, pool: usize) -> Result<()> {
    let pools: Api<SandboxWarmPool> = Api::namespaced(client.clone(), ns);
    let pods: Api<Pod> = Api::namespaced(client.clone(), ns);
    wait_for("the pool full and every pod Ready", || async {
        let ready = pools
            .get("pool")
            .await?
            .status
            .is_some_and(|s| usize::try_from(s.ready_replicas).ok() == Some(pool));
        let pods = pods.list(&ListParams::default()).await?.items;
        let all_ready = pods.len() == pool
            && pods.iter().all(|p| {
                p.metadata.deletion_timestamp.is_none()
                    && p.status
                        .as_ref()
                        .and_then(|s| s.conditions.as_ref())
                        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            });
        Ok((ready && all_ready).then_some(()))
    })
    .await
}
