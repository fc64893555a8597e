//! Behaviour of the embedded store through the `Store` port, against real files.

mod crud;
mod delete;
mod disk_full;
mod durability;
mod sequence;
mod watch;

use std::path::PathBuf;

use k8s_openapi::api::core::v1::Container;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::{Resource, ResourceExt};
use rouse_shared::api::{Sandbox, SandboxSpec};
use rouse_shared::store::{ObjectKey, Patch};
use serde_json::Value;

use super::{EmbeddedStore, EmbeddedStoreConfig};

/// A store in a fresh temporary directory (kept alive by the returned guard).
fn temp_store() -> (EmbeddedStore, tempfile::TempDir) {
    temp_store_with(EmbeddedStoreConfig::default())
}

fn temp_store_with(config: EmbeddedStoreConfig) -> (EmbeddedStore, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = EmbeddedStore::open_with(&store_path(&dir), config).expect("open store");
    (store, dir)
}

fn store_path(dir: &tempfile::TempDir) -> PathBuf {
    dir.path().join(super::STORE_FILE_NAME)
}

/// A minimal valid sandbox in `team-a`.
fn sandbox(name: &str) -> Sandbox {
    let mut sandbox = Sandbox::new(
        name,
        SandboxSpec::running(Container {
            name: "main".into(),
            image: Some("busybox".into()),
            ..Default::default()
        }),
    );
    sandbox.metadata.namespace = Some("team-a".into());
    sandbox
}

/// Builder steps on test sandboxes.
trait SandboxFixture {
    fn labeled(self, key: &str, value: &str) -> Self;
    fn in_namespace(self, namespace: &str) -> Self;
    fn finalized(self, finalizer: &str) -> Self;
    fn owned_by(self, owner: &impl Resource<DynamicType = ()>) -> Self;
}

impl SandboxFixture for Sandbox {
    fn labeled(mut self, key: &str, value: &str) -> Self {
        self.labels_mut().insert(key.into(), value.into());
        self
    }
    fn in_namespace(mut self, namespace: &str) -> Self {
        self.metadata.namespace = Some(namespace.into());
        self
    }
    fn finalized(mut self, finalizer: &str) -> Self {
        self.finalizers_mut().push(finalizer.into());
        self
    }
    fn owned_by(mut self, owner: &impl Resource<DynamicType = ()>) -> Self {
        self.owner_references_mut().push(OwnerReference {
            api_version: owner_api_version(owner),
            kind: owner_kind(owner),
            name: owner.meta().name.clone().expect("owner has a name"),
            uid: owner.meta().uid.clone().expect("owner was stored"),
            ..Default::default()
        });
        self
    }
}

fn owner_api_version<R: Resource<DynamicType = ()>>(_: &R) -> String {
    R::api_version(&()).into_owned()
}

fn owner_kind<R: Resource<DynamicType = ()>>(_: &R) -> String {
    R::kind(&()).into_owned()
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::new("team-a", name)
}

fn merge(value: Value) -> Patch {
    Patch::merge(value).expect("a JSON object")
}

/// The resourceVersion of an object as a number.
fn rv(object: &impl Resource) -> u64 {
    object
        .meta()
        .resource_version
        .as_deref()
        .expect("stored objects have a resourceVersion")
        .parse()
        .expect("a number")
}
