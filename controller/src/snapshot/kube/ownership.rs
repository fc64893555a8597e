//! The objects a `SandboxSnapshot` owns in Kubernetes mode (the `kube-csi` provider's
//! `VolumeSnapshot`s, the `kube-gke` provider's `PodSnapshotManualTrigger`): the metadata
//! both providers give them, and how ownership is read back from one.

use kube::ResourceExt;
use kube::api::{ApiResource, DynamicObject};
use rouse_shared::api::keys::SANDBOX_NAME_HASH;
use rouse_shared::api::{Sandbox, SandboxSnapshot, controller_ref};
use rouse_shared::names::sandbox_name_hash;
use serde_json::Value;

/// Label on an owned object: the UID of the `SandboxSnapshot` it belongs to (a UID always
/// fits a label value; a name may not). The snapshot controller watches only objects with it.
pub const SNAPSHOT_UID_LABEL: &str = "rouse.dev/snapshot-uid";
/// Annotation on an owned object: the name of the `SandboxSnapshot` it belongs to.
pub const SNAPSHOT_ANNOTATION: &str = "rouse.dev/snapshot";

/// The object of `resource` named `name` that `snapshot` of `sandbox` owns, with `data`
/// (`spec`, ...) as its content: in the snapshot's namespace, labelled with the snapshot's
/// UID, the sandbox's name hash and `labels`, annotated with the snapshot's name, and
/// controlled by the snapshot (deleting the `SandboxSnapshot` deletes it through garbage
/// collection).
pub fn owned_object(
    resource: &ApiResource,
    name: &str,
    snapshot: &SandboxSnapshot,
    sandbox: &Sandbox,
    labels: impl IntoIterator<Item = (String, String)>,
    data: Value,
) -> DynamicObject {
    let mut object = DynamicObject::new(name, resource);
    object.metadata.namespace = snapshot.namespace();
    let mut all = std::collections::BTreeMap::from([
        (
            SNAPSHOT_UID_LABEL.to_owned(),
            snapshot.uid().unwrap_or_default(),
        ),
        (
            SANDBOX_NAME_HASH.to_owned(),
            sandbox_name_hash(&sandbox.name_any()),
        ),
    ]);
    all.extend(labels);
    object.metadata.labels = Some(all);
    object.metadata.annotations =
        Some([(SNAPSHOT_ANNOTATION.to_owned(), snapshot.name_any())].into());
    object.metadata.owner_references = controller_ref(snapshot).map(|r| vec![r]);
    object.data = data;
    object
}

/// Whether `object` has a controller reference to the owner of UID `owner_uid` (one of that
/// name made for another snapshot, or by someone else, does not).
pub fn controlled_by(object: &DynamicObject, owner_uid: &str) -> bool {
    object
        .owner_references()
        .iter()
        .any(|r| r.controller == Some(true) && r.uid == owner_uid)
}
