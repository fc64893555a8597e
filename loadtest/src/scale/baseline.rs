//! The bare-write baseline, with no controller running: the writes a sandbox and a claim
//! need at the least, issued directly against the same API server in the same run, so that
//! where the API server is the bound shows. A sandbox: create it, create its Pod (owned by it,
//! scheduled and played by kwok like every other), write its status Ready. A warm claim:
//! create it, re-own a sandbox to it, write its status.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::{StreamExt, TryStreamExt, stream};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DynamicObject, Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;

use super::measure::{PhaseReport, Probe};
use super::objects::{self, Apis};

/// Runs both baselines in `namespace`: `n` sandboxes and `claims` claims (at most `n`), each
/// all at once with `concurrency` requests in flight; then deletes what they made.
pub async fn run(
    client: &Client,
    namespace: &str,
    n: usize,
    claims: usize,
    concurrency: usize,
    deadline: Duration,
) -> Result<Vec<PhaseReport>> {
    let apis = Apis::new(client, namespace);
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let probe = Probe::start(client, None).await?;
    let start = Instant::now();
    let uids: Vec<(String, String)> = stream::iter(0..n)
        .map(|i| {
            let (apis, pods) = (apis.clone(), pods.clone());
            async move { bare_sandbox(&apis, &pods, &format!("bare-{i}")).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect()
        .await?;
    let elapsed = start.elapsed();
    let (requests, _) = probe.finish(client, None).await?;
    let sandboxes = PhaseReport {
        phase: "baseline",
        items: n,
        elapsed,
        requests,
        ..PhaseReport::default()
    };

    let claims = claims.min(uids.len());
    let probe = Probe::start(client, None).await?;
    let start = Instant::now();
    stream::iter(uids.iter().take(claims).enumerate())
        .map(|(i, (sandbox, _))| {
            let apis = apis.clone();
            async move { bare_claim(&apis, &format!("bare-claim-{i}"), sandbox).await }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    let elapsed = start.elapsed();
    let (requests, _) = probe.finish(client, None).await?;
    let claims = PhaseReport {
        phase: "baseline-claims",
        items: claims,
        elapsed,
        requests,
        ..PhaseReport::default()
    };
    let names = uids.into_iter().map(|(name, _)| name);
    let claim_names = (0..claims.items).map(|i| format!("bare-claim-{i}"));
    clean(&apis, &pods, claim_names, names, concurrency, deadline).await?;
    Ok(vec![sandboxes, claims])
}

/// The three writes of a sandbox; its name and uid.
async fn bare_sandbox(apis: &Apis, pods: &Api<Pod>, name: &str) -> Result<(String, String)> {
    let created = apis
        .sandboxes
        .create(&PostParams::default(), &objects::sandbox(name))
        .await
        .with_context(|| format!("create sandbox {name}"))?;
    let uid = created.uid().unwrap_or_default();
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": name, "ownerReferences": [{
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox", "name": name,
            "uid": uid, "controller": true,
        }]},
        "spec": created.data["spec"]["podTemplate"]["spec"],
    }))?;
    pods.create(&PostParams::default(), &pod)
        .await
        .with_context(|| format!("create pod {name}"))?;
    let status = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]}});
    apis.sandboxes
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| format!("patch status of {name}"))?;
    Ok((name.to_owned(), uid))
}

/// The three writes of a warm claim of `sandbox`.
async fn bare_claim(apis: &Apis, name: &str, sandbox: &str) -> Result<()> {
    let claim: DynamicObject = apis
        .claims
        .create(&PostParams::default(), &objects::claim(name))
        .await
        .with_context(|| format!("create claim {name}"))?;
    let owner = json!({"metadata": {"ownerReferences": [{
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
        "name": name, "uid": claim.uid().unwrap_or_default(), "controller": true,
    }]}});
    apis.sandboxes
        .patch(sandbox, &PatchParams::default(), &Patch::Merge(&owner))
        .await
        .with_context(|| format!("re-own {sandbox}"))?;
    let status = json!({"status": {"sandbox": {"name": sandbox}, "conditions": [{
        "type": "Ready", "status": "True", "reason": "Ready", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 1}]}});
    apis.claims
        .patch_status(name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .with_context(|| format!("patch status of {name}"))?;
    Ok(())
}

/// Deletes the baseline's claims and sandboxes (their pods go with them), `concurrency` at a
/// time, and waits until nothing is left, so the controllers' runs start on a quiet cluster.
/// One by one rather than one delete-collection: the API server deletes a collection's items
/// one after another within the request, which at thousands outlasts a client's timeout.
async fn clean(
    apis: &Apis,
    pods: &Api<Pod>,
    claims: impl Iterator<Item = String>,
    sandboxes: impl Iterator<Item = String>,
    concurrency: usize,
    deadline: Duration,
) -> Result<()> {
    let all = kube::api::ListParams::default();
    let deletes = claims
        .map(|n| (apis.claims.clone(), n))
        .chain(sandboxes.map(|n| (apis.sandboxes.clone(), n)));
    objects::delete_each(deletes, concurrency).await?;
    let end = Instant::now() + deadline;
    loop {
        let left =
            apis.sandboxes.list(&all).await?.items.len() + pods.list(&all).await?.items.len();
        if left == 0 {
            return Ok(());
        }
        anyhow::ensure!(
            Instant::now() < end,
            "the baseline's {left} sandboxes and pods not gone within {deadline:?}"
        );
        // A poll with a deadline: the garbage collector and kwok remove the pods.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
