//! The watch behind every cache Kubernetes mode keeps: kube-runtime's watcher, each object
//! stripped of its `metadata.managedFields` before a reflector stores it.
//!
//! Why: no reconcile reads managed fields (the API server keeps them; a write without them
//! leaves them as they are), yet k8s-openapi decodes them into trees of JSON values, one per
//! manager that wrote the object (a Pod has the scheduler's, the kubelet's and this
//! controller's). Dropping them cut the controller's peak memory by a third at 2,000 sandboxes
//! (docs/benchmarks.md, "Memory: the caches without managed fields").

use futures::Stream;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Resource};
use serde::de::DeserializeOwned;

/// `api`'s list-watch under `config`, each object without its managed fields.
pub(crate) fn cached_watch<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
{
    without_managed_fields(watcher(api, config))
}

/// `events` with every object they carry stripped of its managed fields.
fn without_managed_fields<K, S>(
    events: S,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static
where
    K: Resource + Send + 'static,
    S: Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
{
    events.modify(|object| object.meta_mut().managed_fields = None)
}

#[cfg(test)]
mod tests {
    use futures::{StreamExt, stream};
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry;
    use kube::api::ObjectMeta;
    use kube::runtime::reflector::{self, ObjectRef};
    use kube::runtime::watcher::Event;

    use super::*;

    fn pod(name: &str) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some(name.into()),
                namespace: Some("default".into()),
                labels: Some([("app".to_owned(), "x".to_owned())].into()),
                managed_fields: Some(vec![ManagedFieldsEntry {
                    manager: Some("kube-scheduler".into()),
                    operation: Some("Update".into()),
                    ..ManagedFieldsEntry::default()
                }]),
                ..ObjectMeta::default()
            },
            ..Pod::default()
        }
    }

    #[tokio::test]
    async fn listed_and_watched_objects_reach_the_cache_without_their_managed_fields() {
        // What the API server sends: an initial list, then a change, then a deletion.
        let events = stream::iter([
            Ok(Event::Init),
            Ok(Event::InitApply(pod("listed"))),
            Ok(Event::InitDone),
            Ok(Event::Apply(pod("watched"))),
            Ok(Event::Apply(pod("gone"))),
            Ok(Event::Delete(pod("gone"))),
        ]);
        let (reader, writer) = reflector::store::<Pod>();
        let seen: Vec<_> = reflector::reflector(writer, without_managed_fields(events))
            .collect()
            .await;
        for event in &seen {
            if let Event::InitApply(p) | Event::Apply(p) | Event::Delete(p) =
                event.as_ref().expect("no error")
            {
                assert_eq!(p.metadata.managed_fields, None, "{:?}", p.metadata.name);
            }
        }
        assert_eq!(reader.state().len(), 2);
        for name in ["listed", "watched"] {
            let cached = reader
                .get(&ObjectRef::new(name).within("default"))
                .expect("cached");
            assert_eq!(cached.metadata.managed_fields, None);
            // Nothing else was lost on the way.
            assert_eq!(cached.metadata.labels, pod(name).metadata.labels);
        }
    }
}
