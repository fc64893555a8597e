//! The sandbox API: the five kinds of `agents.x-k8s.io` / `extensions.agents.x-k8s.io`
//! `v1beta1`, field for field compatible with upstream agent-sandbox, plus Rouse's optional
//! additions (see `docs/api.md`).

// Clippy reads the repeated `printcolumn(type_ = .., ..)` arguments of kube's derive as
// duplicated attributes; they are separate columns.
#![allow(clippy::duplicated_attributes)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

mod claim;
mod common;
pub mod keys;
mod sandbox;
mod snapshot;
mod template;
mod warm_pool;

pub use claim::{
    ClaimEnvVar, ClaimLifecycle, ClaimShutdownPolicy, ClaimedSandbox, SandboxClaim,
    SandboxClaimSpec, SandboxClaimStatus,
};
pub use common::{
    EmbeddedObjectMetadata, LocalObjectReference, MemorySharing, OperatingMode,
    PersistentVolumeClaimTemplate, PodMetadata, PodTemplate, ShutdownPolicy, Suspension,
    SuspensionStrategy,
};
pub use sandbox::{
    Endpoint, EndpointPort, LastSnapshot, MemorySharingStatus, RestoreFrom, Sandbox, SandboxSpec,
    SandboxStatus,
};
pub use snapshot::{SandboxSnapshot, SandboxSnapshotSpec, SandboxSnapshotStatus, SnapshotPhase};
pub use template::{
    InjectionPolicy, NetworkPolicyManagement, NetworkPolicySpec, SandboxTemplate,
    SandboxTemplateSpec,
};
pub use warm_pool::{
    SandboxWarmPool, SandboxWarmPoolSpec, SandboxWarmPoolStatus, WarmPoolUpdateStrategy,
    WarmPoolUpdateStrategyType,
};

/// API group of `Sandbox` and `SandboxSnapshot`.
pub const GROUP: &str = "agents.x-k8s.io";
/// API group of `SandboxTemplate`, `SandboxClaim` and `SandboxWarmPool`.
pub const EXTENSIONS_GROUP: &str = "extensions.agents.x-k8s.io";
/// The served and stored version of every kind.
pub const VERSION: &str = "v1beta1";

/// The controller ownerReference that `owner` puts on what it creates: `controller: true` and
/// `blockOwnerDeletion: true`, as upstream's controllers set it, so a foreground deletion of
/// the owner waits for its dependents. `None` when `owner` has no uid (not read from a store).
pub fn controller_ref<K>(owner: &K) -> Option<OwnerReference>
where
    K: kube::Resource<DynamicType = ()>,
{
    let mut reference = owner.controller_owner_ref(&())?;
    reference.block_owner_deletion = Some(true);
    Some(reference)
}

#[cfg(test)]
mod tests;
