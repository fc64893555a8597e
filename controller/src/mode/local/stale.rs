//! The status a previous run of `rouse up` left behind. When `rouse up` starts, none of its
//! workloads runs yet (a clean stop stopped them, a crash's leftovers are killed), but the
//! store still says what the last run wrote: `Ready=True` with an endpoint nothing listens on.
//! The proxy would dial that endpoint, find the port closed, and — the sandbox being ready —
//! answer 502 at once. So before the proxy serves, every sandbox that claims to be ready is
//! marked not ready without an endpoint: connections to it are held until its reconcile
//! starts the workload again and publishes the new endpoint.

use jiff::Timestamp;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{ListParams, ObjectKey, Patch, Store, StoreError};
use serde_json::json;

/// The `Ready` reason and message written: upstream's reason for a pod that is not ready.
const REASON: &str = "DependenciesNotReady";
const MESSAGE: &str = "rouse up restarted: the workload is starting again";

/// Marks every sandbox whose status says `Ready=True` not ready, without an endpoint or pod
/// IPs; returns how many. A sandbox changed meanwhile (a conflict) is left to its reconcile.
pub async fn mark_not_ready<S: Store<Sandbox>>(store: &S) -> Result<usize, StoreError> {
    let list = store.list(&ListParams::default()).await?;
    let now = Time(Timestamp::now());
    let mut marked = 0;
    for sandbox in list.items {
        let Some(status) = &sandbox.status else {
            continue;
        };
        let ready = status
            .conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        if !ready {
            continue;
        }
        let conditions: Vec<_> = status
            .conditions
            .iter()
            .map(|c| {
                let mut c = c.clone();
                if c.type_ == "Ready" {
                    c.status = "False".to_owned();
                    c.reason = REASON.to_owned();
                    c.message = MESSAGE.to_owned();
                    c.last_transition_time = now.clone();
                }
                c
            })
            .collect();
        let Some(patch) = Patch::merge(json!({
            "status": {"conditions": conditions, "endpoint": null, "podIPs": null}
        })) else {
            continue;
        };
        let key = ObjectKey::of(&sandbox);
        let patch = match sandbox.metadata.resource_version.as_deref() {
            Some(version) => patch.with_resource_version(version),
            None => patch,
        };
        match store.patch_status(&key, &patch).await {
            Ok(_) => marked += 1,
            Err(StoreError::Conflict { .. } | StoreError::NotFound { .. }) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(marked)
}
