//! The resources the fake API server knows: group, version, plural, kind, scope and which
//! subresources each has. Anything else is answered with a 404 `Status`, as a server without
//! that API would.

/// One kind of object the fake server stores, as its API discovery would describe it.
#[derive(Debug, PartialEq, Eq)]
pub struct ResourceType {
    /// API group; empty for the core group (`/api/v1`).
    pub group: &'static str,
    /// API version within the group.
    pub version: &'static str,
    /// Lower-case plural used in paths.
    pub plural: &'static str,
    /// `kind` of the objects.
    pub kind: &'static str,
    /// Namespaced (true) or cluster-scoped (false).
    pub namespaced: bool,
    /// Has a `/status` subresource: main-resource writes keep the stored status.
    pub status: bool,
    /// Has a `/scale` subresource (`.spec.replicas`, `.status.replicas`, `.status.selector`).
    pub scale: bool,
    /// A custom resource (CRD); strategic merge patch is refused for these, as by Kubernetes.
    pub custom: bool,
}

impl ResourceType {
    /// `apiVersion` of the objects (`v1`, `agents.x-k8s.io/v1beta1`).
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_owned()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// The resource name as Kubernetes messages print it (`pods`, `sandboxes.agents.x-k8s.io`).
    pub fn qualified(&self) -> String {
        if self.group.is_empty() {
            self.plural.to_owned()
        } else {
            format!("{}.{}", self.plural, self.group)
        }
    }

    /// The kind as Kubernetes' `Invalid` messages print it (`Pod`, `Sandbox.agents.x-k8s.io`).
    pub fn qualified_kind(&self) -> String {
        if self.group.is_empty() {
            self.kind.to_owned()
        } else {
            format!("{}.{}", self.kind, self.group)
        }
    }
}

const fn core(plural: &'static str, kind: &'static str, status: bool) -> ResourceType {
    ResourceType {
        group: "",
        version: "v1",
        plural,
        kind,
        namespaced: true,
        status,
        scale: false,
        custom: false,
    }
}

const fn builtin(
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
    status: bool,
) -> ResourceType {
    ResourceType {
        group,
        version: "v1",
        plural,
        kind,
        namespaced: true,
        status,
        scale: false,
        custom: false,
    }
}

const fn crd(
    group: &'static str,
    plural: &'static str,
    kind: &'static str,
    status: bool,
    scale: bool,
) -> ResourceType {
    ResourceType {
        group,
        version: "v1beta1",
        plural,
        kind,
        namespaced: true,
        status,
        scale,
        custom: true,
    }
}

/// A custom resource of another project, at its own version (no scale subresource).
const fn foreign_crd(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    kind: &'static str,
    status: bool,
) -> ResourceType {
    ResourceType {
        group,
        version,
        plural,
        kind,
        namespaced: true,
        status,
        scale: false,
        custom: true,
    }
}

const AGENTS: &str = "agents.x-k8s.io";
const EXTENSIONS: &str = "extensions.agents.x-k8s.io";

/// Every resource served, in lookup order (core `events` before `events.k8s.io` ones).
pub static RESOURCES: &[ResourceType] = &[
    core("pods", "Pod", true),
    core("services", "Service", true),
    core("persistentvolumeclaims", "PersistentVolumeClaim", true),
    core("events", "Event", false),
    core("configmaps", "ConfigMap", false),
    core("secrets", "Secret", false),
    ResourceType {
        group: "",
        version: "v1",
        plural: "namespaces",
        kind: "Namespace",
        namespaced: false,
        status: true,
        scale: false,
        custom: false,
    },
    builtin("events.k8s.io", "events", "Event", false),
    builtin("coordination.k8s.io", "leases", "Lease", false),
    builtin(
        "networking.k8s.io",
        "networkpolicies",
        "NetworkPolicy",
        false,
    ),
    crd(AGENTS, "sandboxes", "Sandbox", true, false),
    crd(AGENTS, "sandboxsnapshots", "SandboxSnapshot", true, false),
    crd(
        EXTENSIONS,
        "sandboxtemplates",
        "SandboxTemplate",
        false,
        false,
    ),
    crd(
        EXTENSIONS,
        "sandboxwarmpools",
        "SandboxWarmPool",
        true,
        true,
    ),
    crd(EXTENSIONS, "sandboxclaims", "SandboxClaim", true, false),
    // The CSI external snapshotter's CRD (status subresource since v4).
    foreign_crd(
        "snapshot.storage.k8s.io",
        "v1",
        "volumesnapshots",
        "VolumeSnapshot",
        true,
    ),
    // GKE pod snapshots (the objects the upstream agent-sandbox GKE extension uses).
    foreign_crd(
        "podsnapshot.gke.io",
        "v1",
        "podsnapshotmanualtriggers",
        "PodSnapshotManualTrigger",
        true,
    ),
    foreign_crd(
        "podsnapshot.gke.io",
        "v1",
        "podsnapshots",
        "PodSnapshot",
        true,
    ),
];

/// The resource served at `/{api|apis/group}/{version}/{plural}`.
pub fn find(group: &str, version: &str, plural: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.group == group && r.version == version && r.plural == plural)
}

/// A resource by plural (`pods`) or qualified name (`sandboxes.agents.x-k8s.io`); a bare
/// plural picks the first match, so `events` is the core one.
pub fn by_name(name: &str) -> Option<&'static ResourceType> {
    RESOURCES
        .iter()
        .find(|r| r.plural == name || r.qualified() == name)
}
