//! Well-known label and annotation keys, condition types and condition reasons.
//!
//! The values are upstream agent-sandbox's, so objects written by either controller are
//! understood by the other.

/// Label and annotation prefixes reserved for the system; stripped from or rejected in user
/// metadata.
pub const SYSTEM_PREFIXES: [&str; 2] = ["agents.x-k8s.io/", "extensions.agents.x-k8s.io/"];

/// Label on objects owned by a sandbox: the hash of the sandbox's name.
pub const SANDBOX_NAME_HASH: &str = "agents.x-k8s.io/sandbox-name-hash";
/// Annotation on a sandbox naming its pod.
pub const POD_NAME: &str = "agents.x-k8s.io/pod-name";
/// Label on a sandbox: `cold` or `warm`, how a claim got it.
pub const LAUNCH_TYPE: &str = "agents.x-k8s.io/launch-type";
/// Label on a sandbox that belongs to a warm pool.
pub const WARM_POOL_SANDBOX: &str = "agents.x-k8s.io/warm-pool-sandbox";
/// Annotation on a sandbox naming the template it was made from (an annotation, as upstream's,
/// since a template's name may be longer than a label value). Sandboxes made by earlier Rouse
/// versions carry it as a label; readers accept both ([`template_ref`]).
pub const SANDBOX_TEMPLATE_REF: &str = "agents.x-k8s.io/sandbox-template-ref";
/// Label on a sandbox: the name hash of the template it was made from (selectable, unlike
/// the annotation).
pub const SANDBOX_TEMPLATE_REF_HASH: &str = "agents.x-k8s.io/sandbox-template-ref-hash";
/// Label on a warm pool member: the hash of the template blueprint it was made from.
pub const SANDBOX_TEMPLATE_HASH: &str = "agents.x-k8s.io/sandbox-template-hash";
/// Label on a warm pool member that a claim may adopt.
pub const ADOPTABLE: &str = "agents.x-k8s.io/adoptable";
/// Annotation on a sandbox's workload (Pod): the hash of the `spec.podTemplate.spec` it was
/// made from, to tell when the sandbox's template has changed since.
pub const POD_TEMPLATE_HASH: &str = "agents.x-k8s.io/pod-template-hash";
/// Annotation on a claim naming the sandbox it adopted.
pub const SANDBOX_NAME: &str = "agents.x-k8s.io/sandbox-name";
/// Annotation on a claim: when the controller first saw it (RFC 3339 with nanoseconds), the
/// start of its startup latency; written once.
pub const CONTROLLER_FIRST_OBSERVED_AT: &str = "agents.x-k8s.io/controller-first-observed-at";

/// The template a sandbox was made from: its [`SANDBOX_TEMPLATE_REF`] annotation, else the
/// label of that key that earlier versions wrote.
pub fn template_ref(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Option<&str> {
    fn find(map: &Option<std::collections::BTreeMap<String, String>>) -> Option<&str> {
        map.as_ref()?.get(SANDBOX_TEMPLATE_REF).map(String::as_str)
    }
    find(&meta.annotations).or_else(|| find(&meta.labels))
}

/// Value of [`LAUNCH_TYPE`] for a sandbox created for its claim.
pub const LAUNCH_TYPE_COLD: &str = "cold";
/// Value of [`LAUNCH_TYPE`] for a sandbox adopted from a warm pool.
pub const LAUNCH_TYPE_WARM: &str = "warm";

/// Condition types.
pub mod condition {
    /// The sandbox (or claim's sandbox) serves.
    pub const READY: &str = "Ready";
    /// Only while `False`: the running workload was made from an older pod template (Rouse's
    /// own; upstream leaves such a pod as it is without saying so).
    pub const POD_TEMPLATE_UP_TO_DATE: &str = "PodTemplateUpToDate";
    /// The sandbox's workload is suspended.
    pub const SUSPENDED: &str = "Suspended";
    /// Copied from the pod.
    pub const POD_SCHEDULED: &str = "PodScheduled";
    /// The pod reached a terminal phase.
    pub const FINISHED: &str = "Finished";
    /// The claim passed its expiry.
    pub const CLAIM_EXPIRED: &str = "ClaimExpired";
    /// Only with `spec.memorySharing: Merge`: whether the workload's memory is offered for
    /// merging (Rouse's own).
    pub const MEMORY_SHARING: &str = "MemorySharing";
}

/// Condition reasons.
pub mod reason {
    /// `Ready=True`: pod running and ready, with an IP and the Service if asked for.
    pub const DEPENDENCIES_READY: &str = "DependenciesReady";
    /// `Ready=False`: the pod or Service is not ready yet.
    pub const DEPENDENCIES_NOT_READY: &str = "DependenciesNotReady";
    /// `Ready=False`: the sandbox is suspended.
    pub const SANDBOX_SUSPENDED: &str = "SandboxSuspended";
    /// `Ready=False`: `spec.restoreFrom` names a `SandboxSnapshot` that does not exist (Rouse
    /// addition); the sandbox waits for it.
    pub const SNAPSHOT_NOT_FOUND: &str = "SnapshotNotFound";
    /// `Ready=False`: the `SandboxSnapshot` of `spec.restoreFrom` is not `Ready` (Rouse
    /// addition); the sandbox waits for it.
    pub const SNAPSHOT_NOT_READY: &str = "SnapshotNotReady";
    /// `Ready=False`: the pod succeeded.
    pub const POD_SUCCEEDED: &str = "PodSucceeded";
    /// `Ready=False`: the pod failed.
    pub const POD_FAILED: &str = "PodFailed";
    /// `Ready=False`: `shutdownTime` passed.
    pub const SANDBOX_EXPIRED: &str = "SandboxExpired";
    /// `PodScheduled=True` copied from a pod whose condition has no reason.
    pub const POD_SCHEDULED: &str = "PodScheduled";
    /// `PodScheduled=Unknown`: the pod has not reported scheduling yet, or cannot be read.
    pub const POD_SCHEDULING_UNKNOWN: &str = "PodSchedulingUnknown";
    /// `Ready=False`: the reconciler failed; the message says why.
    pub const RECONCILER_ERROR: &str = "ReconcilerError";
    /// `Ready=False`: more than one pod claims to be the sandbox's.
    pub const MULTIPLE_PODS: &str = "MultiplePods";
    /// `Suspended=True`: the pod is gone.
    pub const POD_TERMINATED: &str = "PodTerminated";
    /// `Suspended=False`: the pod is being deleted.
    pub const POD_TERMINATING: &str = "PodTerminating";
    /// `Suspended=False`: a pod of that name exists but is not the sandbox's.
    pub const POD_NOT_OWNED: &str = "PodNotOwned";
    /// `Suspended=False`: the sandbox is not suspended.
    pub const NOT_SUSPENDED: &str = "NotSuspended";
    /// `Suspended=Unknown`: the pod's state cannot be read.
    pub const POD_STATE_UNKNOWN: &str = "PodStateUnknown";
    /// `PodTemplateUpToDate=False`: the workload runs an older `spec.podTemplate.spec`.
    pub const RESTART_REQUIRED: &str = "RestartRequired";
    /// `MemorySharing=True`: the workload is marked mergeable and KSM runs.
    pub const MERGING: &str = "Merging";
    /// `MemorySharing=False`: KSM is missing or off and could not be turned on.
    pub const KSM_UNAVAILABLE: &str = "KsmUnavailable";
    /// `MemorySharing=False`: the workload's processes could not be marked mergeable.
    pub const NOT_MARKED: &str = "NotMarked";
    /// `MemorySharing=False`: the runtime cannot merge this sandbox's memory (gVisor).
    pub const UNSUPPORTED: &str = "Unsupported";
}
