//! What the benchmark sees of one namespace, from one watch of Sandboxes and one of
//! SandboxClaims (events arrive in the API server's commit order): when each sandbox and claim
//! first turned Ready, which sandbox each claim was bound to, and the warm pool's members —
//! how many there were at most at once and how many were ever created. Objects are read as
//! untyped JSON, so both controllers' objects decode alike.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

use futures::StreamExt;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
use kube::runtime::watcher;
use kube::{Api, Client};
use serde_json::Value;
use tokio::task::JoinHandle;

/// The Sandbox resource.
pub fn sandboxes() -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "agents.x-k8s.io",
        "v1beta1",
        "Sandbox",
    ))
}

/// An extensions resource (`SandboxClaim`, `SandboxWarmPool`, `SandboxTemplate`).
pub fn extension(kind: &str) -> ApiResource {
    ApiResource::from_gvk(&GroupVersionKind::gvk(
        "extensions.agents.x-k8s.io",
        "v1beta1",
        kind,
    ))
}

/// What the watches saw.
#[derive(Debug, Default)]
pub struct Seen {
    /// When each sandbox first reported `Ready=True`.
    pub sandbox_ready: HashMap<String, Instant>,
    /// Each sandbox's `agents.x-k8s.io/launch-type` label, as last seen.
    pub launch: HashMap<String, String>,
    /// When each claim first reported `Ready=True` with its sandbox named.
    pub claim_ready: HashMap<String, Instant>,
    /// The claims each sandbox was ever named by (status or controller owner).
    pub bound_to: BTreeMap<String, BTreeSet<String>>,
    /// The sandboxes each claim controls now (controller owner, not deleted).
    pub controlled: BTreeMap<String, BTreeSet<String>>,
    /// Claims seen controlling more than one sandbox at once, with those sandboxes.
    pub doubled: BTreeMap<String, BTreeSet<String>>,
    /// The sandbox each claim names in its status, as last seen.
    pub claim_sandbox: HashMap<String, String>,
    /// Current pool members (controlled by a SandboxWarmPool, not being deleted), and which of
    /// them are Ready.
    pub members: HashSet<String>,
    /// The most members seen at once.
    pub max_members: usize,
    /// Every sandbox that was ever a pool member.
    pub ever_members: HashSet<String>,
    /// Members Ready now.
    pub ready_members: HashSet<String>,
}

impl Seen {
    /// Sandboxes named by more than one claim (`sandbox: claims`), and claims that controlled
    /// more than one sandbox at once (`claim controls sandboxes`).
    pub fn double_bindings(&self) -> Vec<String> {
        let shared = self
            .bound_to
            .iter()
            .filter(|(_, claims)| claims.len() > 1)
            .map(|(s, claims)| format!("{s}: {claims:?}"));
        let doubled = self
            .doubled
            .iter()
            .map(|(c, sandboxes)| format!("{c} controls {sandboxes:?}"));
        shared.chain(doubled).collect()
    }
}

/// Watches one namespace until dropped.
pub struct Tracker {
    seen: Arc<Mutex<Seen>>,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for Tracker {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

fn ready(object: &Value) -> bool {
    object["status"]["conditions"].as_array().is_some_and(|cs| {
        cs.iter()
            .any(|c| c["type"] == "Ready" && c["status"] == "True")
    })
}

fn controller_kind(object: &DynamicObject) -> Option<(&str, &str)> {
    object
        .metadata
        .owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| (o.kind.as_str(), o.name.as_str()))
}

impl Tracker {
    /// Starts watching `namespace`.
    pub fn start(client: &Client, namespace: &str) -> Self {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let sandboxes =
            Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &sandboxes());
        let claims = Api::<DynamicObject>::namespaced_with(
            client.clone(),
            namespace,
            &extension("SandboxClaim"),
        );
        let tasks = vec![
            tokio::spawn(follow(sandboxes, seen.clone(), on_sandbox, true)),
            tokio::spawn(follow(claims, seen.clone(), on_claim, false)),
        ];
        Self { seen, tasks }
    }

    /// Reads what was seen so far.
    pub fn with<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

type Handler = fn(&mut Seen, &DynamicObject, bool, Instant);

/// Feeds every event of `api`'s watch to `handle` (`true`: deleted); for sandboxes
/// (`members`), a fresh list replaces the pool membership known (deletions may have been
/// missed).
async fn follow(api: Api<DynamicObject>, seen: Arc<Mutex<Seen>>, handle: Handler, members: bool) {
    let events = watcher(api, watcher::Config::default());
    futures::pin_mut!(events);
    while let Some(event) = events.next().await {
        let now = Instant::now();
        let Ok(event) = event else {
            // The watcher lists and watches again by itself.
            continue;
        };
        let mut seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
        match event {
            watcher::Event::Init if members => {
                seen.members.clear();
                seen.ready_members.clear();
            }
            watcher::Event::Init | watcher::Event::InitDone => {}
            watcher::Event::InitApply(o) | watcher::Event::Apply(o) => {
                handle(&mut seen, &o, false, now);
            }
            watcher::Event::Delete(o) => handle(&mut seen, &o, true, now),
        }
    }
}

fn on_sandbox(seen: &mut Seen, object: &DynamicObject, deleted: bool, now: Instant) {
    let Some(name) = object.metadata.name.clone() else {
        return;
    };
    let value = &object.data;
    if !deleted && ready(value) {
        seen.sandbox_ready.entry(name.clone()).or_insert(now);
    }
    if let Some(launch) = object
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("agents.x-k8s.io/launch-type"))
    {
        seen.launch.insert(name.clone(), launch.clone());
    }
    let owner = controller_kind(object);
    if let Some(("SandboxClaim", claim)) = owner {
        seen.bound_to
            .entry(name.clone())
            .or_default()
            .insert(claim.to_owned());
        let controlled = seen.controlled.entry(claim.to_owned()).or_default();
        if deleted {
            controlled.remove(&name);
        } else {
            controlled.insert(name.clone());
        }
        if controlled.len() > 1 {
            let now_controlled = controlled.clone();
            seen.doubled
                .entry(claim.to_owned())
                .or_default()
                .extend(now_controlled);
        }
    }
    let member = !deleted
        && object.metadata.deletion_timestamp.is_none()
        && matches!(owner, Some(("SandboxWarmPool", _)));
    if member {
        seen.members.insert(name.clone());
        seen.ever_members.insert(name.clone());
        if ready(value) {
            seen.ready_members.insert(name);
        } else {
            seen.ready_members.remove(&name);
        }
        seen.max_members = seen.max_members.max(seen.members.len());
    } else {
        seen.members.remove(&name);
        seen.ready_members.remove(&name);
    }
}

fn on_claim(seen: &mut Seen, object: &DynamicObject, deleted: bool, now: Instant) {
    let Some(name) = object.metadata.name.clone() else {
        return;
    };
    let sandbox = object.data["status"]["sandbox"]["name"]
        .as_str()
        .filter(|s| !s.is_empty());
    if let Some(sandbox) = sandbox {
        seen.claim_sandbox.insert(name.clone(), sandbox.to_owned());
        seen.bound_to
            .entry(sandbox.to_owned())
            .or_default()
            .insert(name.clone());
        if !deleted && ready(&object.data) {
            seen.claim_ready.entry(name).or_insert(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn object(value: Value) -> DynamicObject {
        serde_json::from_value(value).expect("an object")
    }

    #[test]
    fn counts_members_and_bindings() {
        let mut seen = Seen::default();
        let now = Instant::now();
        let member = |name: &str, ready: &str| {
            object(json!({
                "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
                "metadata": {"name": name, "ownerReferences": [{"apiVersion": "x", "kind": "SandboxWarmPool", "name": "p", "uid": "1", "controller": true}]},
                "status": {"conditions": [{"type": "Ready", "status": ready}]},
            }))
        };
        on_sandbox(&mut seen, &member("a", "False"), false, now);
        on_sandbox(&mut seen, &member("b", "True"), false, now);
        assert_eq!((seen.members.len(), seen.ready_members.len()), (2, 1));
        let adopted = object(json!({
            "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "Sandbox",
            "metadata": {"name": "b", "labels": {"agents.x-k8s.io/launch-type": "warm"},
                "ownerReferences": [{"apiVersion": "x", "kind": "SandboxClaim", "name": "c1", "uid": "2", "controller": true}]},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }));
        on_sandbox(&mut seen, &adopted, false, now);
        assert_eq!(seen.members.len(), 1, "b left the pool");
        assert_eq!(seen.max_members, 2);
        assert_eq!(seen.launch.get("b").map(String::as_str), Some("warm"));
        let claim = |name: &str| {
            object(json!({
                "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
                "metadata": {"name": name},
                "status": {"sandbox": {"name": "b"}, "conditions": [{"type": "Ready", "status": "True"}]},
            }))
        };
        on_claim(&mut seen, &claim("c1"), false, now);
        assert!(seen.double_bindings().is_empty());
        assert!(seen.claim_ready.contains_key("c1"));
        on_claim(&mut seen, &claim("c2"), false, now);
        assert_eq!(seen.double_bindings().len(), 1, "{:?}", seen.bound_to);
        // A claim whose sandbox was deleted before it got another is not a double binding;
        // one that holds two at once is.
        on_sandbox(&mut seen, &adopted, true, now);
        let mut second = adopted.clone();
        second.metadata.name = Some("d".into());
        on_sandbox(&mut seen, &second, false, now);
        assert!(
            !seen
                .double_bindings()
                .iter()
                .any(|v| v.starts_with("c1 controls")),
            "{:?}",
            seen.double_bindings()
        );
        let mut third = adopted.clone();
        third.metadata.name = Some("e".into());
        on_sandbox(&mut seen, &third, false, now);
        assert!(
            seen.double_bindings()
                .iter()
                .any(|v| v.starts_with("c1 controls")),
            "{:?}",
            seen.double_bindings()
        );
    }
}
