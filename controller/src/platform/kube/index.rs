//! An index of cached Pods by namespace and `sandbox-name-hash` label, kept from the Pod
//! watch, so finding a sandbox's other pods is a map lookup instead of a scan of the cache.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher::Event;
use rouse_shared::api::keys::SANDBOX_NAME_HASH;

type Key = (String, String);
type Names = HashMap<Key, BTreeSet<String>>;

#[derive(Default)]
struct State {
    live: Names,
    /// The relist in progress; swapped in when it completes, as the reflector does.
    building: Option<Names>,
}

/// Names of cached Pods per (namespace, hash label); cheap to clone.
#[derive(Clone, Default)]
pub struct PodIndex {
    state: Arc<Mutex<State>>,
}

fn key(pod: &Pod) -> Option<(Key, String)> {
    let hash = pod.metadata.labels.as_ref()?.get(SANDBOX_NAME_HASH)?;
    let namespace = pod.metadata.namespace.clone()?;
    let name = pod.metadata.name.clone()?;
    Some(((namespace, hash.clone()), name))
}

fn insert(names: &mut Names, pod: &Pod) {
    if let Some((key, name)) = key(pod) {
        names.entry(key).or_default().insert(name);
    }
}

impl PodIndex {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The index holds only names; a panic elsewhere leaves it usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Applies one watch event.
    pub fn apply(&self, event: &Event<Pod>) {
        let mut state = self.lock();
        match event {
            Event::Apply(pod) => insert(&mut state.live, pod),
            Event::Delete(pod) => {
                if let Some((key, name)) = key(pod)
                    && let Some(set) = state.live.get_mut(&key)
                {
                    set.remove(&name);
                    if set.is_empty() {
                        state.live.remove(&key);
                    }
                }
            }
            Event::Init => state.building = Some(Names::new()),
            Event::InitApply(pod) => insert(state.building.get_or_insert_with(Names::new), pod),
            Event::InitDone => {
                if let Some(built) = state.building.take() {
                    state.live = built;
                }
            }
        }
    }

    /// Names of the cached Pods in `namespace` labelled with `hash`.
    pub fn names(&self, namespace: &str, hash: &str) -> Vec<String> {
        let state = self.lock();
        state
            .live
            .get(&(namespace.to_owned(), hash.to_owned()))
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    use super::*;

    fn pod(name: &str, hash: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("ns".into()),
                labels: Some([(SANDBOX_NAME_HASH.to_owned(), hash.to_owned())].into()),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[test]
    fn follows_applies_deletes_and_relists() {
        let index = PodIndex::default();
        index.apply(&Event::Apply(pod("a", "h1")));
        index.apply(&Event::Apply(pod("a-old", "h1")));
        index.apply(&Event::Apply(pod("b", "h2")));
        assert_eq!(index.names("ns", "h1"), ["a", "a-old"]);
        index.apply(&Event::Delete(pod("a-old", "h1")));
        assert_eq!(index.names("ns", "h1"), ["a"]);

        // A relist replaces everything once done; until then the old view stays.
        index.apply(&Event::Init);
        index.apply(&Event::InitApply(pod("c", "h1")));
        assert_eq!(index.names("ns", "h1"), ["a"]);
        index.apply(&Event::InitDone);
        assert_eq!(index.names("ns", "h1"), ["c"]);
        assert!(index.names("ns", "h2").is_empty());
        assert!(index.names("other", "h1").is_empty());
    }
}
