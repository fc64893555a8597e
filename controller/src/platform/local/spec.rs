//! What the local runtimes run for a sandbox: the first container's command, environment,
//! ports, volumes, readiness probe, restart policy and grace period, read from the pod
//! template and checked once, so a sandbox standalone mode cannot run fails with a clear
//! message before anything starts.

use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, PodSpec, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use rouse_shared::api::Sandbox;
use rouse_shared::names::validate_dns1123_label;

use crate::sandbox::workload_spec;

use super::error::{Error, Result};
use super::readiness::{ProbeAction, Readiness};

/// The `runtimeClassName` that selects the gvisor runtime.
pub const GVISOR_RUNTIME_CLASS: &str = "gvisor";
/// The `runtimeClassName` that selects the process runtime (also the default).
pub const PROCESS_RUNTIME_CLASS: &str = "process";
/// The image prefix naming a local root filesystem directory for the gvisor runtime.
pub const DIR_IMAGE_PREFIX: &str = "dir://";
/// The longest grace period honoured, so a stop or shutdown is bounded.
pub const MAX_GRACE: Duration = Duration::from_secs(120);
/// Kubernetes' default `terminationGracePeriodSeconds`.
const DEFAULT_GRACE_SECONDS: i64 = 30;

/// Which local runtime runs a workload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuntimeKind {
    /// A plain host process (no isolation).
    Process,
    /// A gVisor sandbox run by `runsc`.
    Gvisor,
}

impl RuntimeKind {
    /// The runtime class name, for logs and metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            RuntimeKind::Process => PROCESS_RUNTIME_CLASS,
            RuntimeKind::Gvisor => GVISOR_RUNTIME_CLASS,
        }
    }
}

/// The pod's `restartPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    /// Restart whenever the workload exits (the default).
    Always,
    /// Restart only when it exits with a failure.
    OnFailure,
    /// Never restart; an exit is final.
    Never,
}

impl RestartPolicy {
    /// Whether an exit with this success status leads to a restart.
    pub fn restarts(self, succeeded: bool) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => !succeeded,
            RestartPolicy::Never => false,
        }
    }
}

/// A declared container port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortSpec {
    /// The port's name, if it has one.
    pub name: Option<String>,
    /// The declared `containerPort`.
    pub container_port: u16,
}

/// A volume: a directory under the data dir, mounted where the container asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeSpec {
    /// The volume's name (the claim template's or the pod volume's).
    pub name: String,
    /// Where the first container mounts it, if it does.
    pub mount_path: Option<String>,
    /// Whether the mount is read-only.
    pub read_only: bool,
}

/// Everything a local runtime needs to run one sandbox's workload.
#[derive(Debug, Clone, PartialEq)]
pub struct LaunchSpec {
    /// The runtime chosen by `runtimeClassName`.
    pub runtime: RuntimeKind,
    /// `command` followed by `args`, before `$(VAR)` expansion.
    pub argv: Vec<String>,
    /// The container's plain `env` values, in order, before `$(VAR)` expansion.
    pub env: Vec<(String, String)>,
    /// The container's `workingDir` (used by the gvisor runtime only).
    pub working_dir: Option<String>,
    /// Declared container ports, in order; the first is `PORT`.
    pub ports: Vec<PortSpec>,
    /// Volumes; the first is the process runtime's working directory.
    pub volumes: Vec<VolumeSpec>,
    /// How readiness is checked.
    pub readiness: Readiness,
    /// What happens when the workload exits.
    pub restart_policy: RestartPolicy,
    /// How long a stop waits after SIGTERM before SIGKILL.
    pub grace: Duration,
    /// The root filesystem directory from `image: dir:///path` (gvisor only).
    pub rootfs: Option<PathBuf>,
    /// `spec.memorySharing: Merge` on the process runtime: the program that marks the
    /// workload mergeable before it execs it (`rouse __merge-exec`); `None` runs it as is.
    pub merge_exec: Option<PathBuf>,
}

impl LaunchSpec {
    /// Reads and checks a sandbox's pod template (with its claim volumes merged in, as the
    /// controller core's `workload_spec` does).
    pub fn from_sandbox(sandbox: &Sandbox) -> Result<Self> {
        Self::from_pod(&workload_spec(sandbox).spec)
    }

    /// Reads and checks a pod spec whose volume claim templates are already pod volumes.
    pub fn from_pod(pod: &PodSpec) -> Result<Self> {
        let container = pod
            .containers
            .first()
            .ok_or_else(|| Error::Unsupported("podTemplate.spec.containers is empty".into()))?;
        let runtime = runtime_kind(pod)?;
        let argv = argv(container)?;
        let env = env(container)?;
        let ports = ports(container)?;
        let volumes = volumes(pod, container)?;
        let readiness = match &container.readiness_probe {
            Some(probe) => readiness(probe, &ports)?,
            None => Readiness::default(),
        };
        let rootfs = rootfs(container.image.as_deref(), runtime)?;
        if runtime == RuntimeKind::Gvisor && rootfs.is_none() {
            // Said here, as the sandbox's condition, rather than as runsc's error at start.
            for volume in &volumes {
                if let Some(path) = &volume.mount_path
                    && let Some(dir) = super::gvisor::rootfs::under_system_dir(path)
                {
                    return Err(Error::Unsupported(format!(
                        "volume {:?}: mountPath {path} is inside /{dir}, which a gvisor sandbox \
                         sees read-only from the host; mount it elsewhere, or use a dir:// image",
                        volume.name
                    )));
                }
            }
        }
        Ok(Self {
            runtime,
            argv,
            env,
            working_dir: container.working_dir.clone().filter(|d| !d.is_empty()),
            ports,
            volumes,
            readiness,
            restart_policy: restart_policy(pod)?,
            grace: grace(pod.termination_grace_period_seconds),
            rootfs,
            merge_exec: None,
        })
    }
}

fn runtime_kind(pod: &PodSpec) -> Result<RuntimeKind> {
    match pod.runtime_class_name.as_deref() {
        None | Some("") | Some(PROCESS_RUNTIME_CLASS) => Ok(RuntimeKind::Process),
        Some(GVISOR_RUNTIME_CLASS) => Ok(RuntimeKind::Gvisor),
        Some(other) => Err(Error::Unsupported(format!(
            "runtimeClassName {other:?}: standalone mode runs \"process\" (the default) and \"gvisor\""
        ))),
    }
}

/// Kubernetes semantics: `command` replaces the image entrypoint and `args` follow it. There
/// is no image entrypoint in standalone mode, so `args` alone cannot run.
fn argv(container: &Container) -> Result<Vec<String>> {
    let command = container.command.clone().unwrap_or_default();
    if command.is_empty() {
        return Err(Error::Unsupported(
            "containers[0].command is empty: standalone mode has no image entrypoint, so the \
             command to run must be given in `command` (with `args` after it)"
                .into(),
        ));
    }
    let mut argv = command;
    argv.extend(container.args.clone().unwrap_or_default());
    Ok(argv)
}

fn env(container: &Container) -> Result<Vec<(String, String)>> {
    if container.env_from.as_ref().is_some_and(|e| !e.is_empty()) {
        return Err(Error::Unsupported(
            "containers[0].envFrom: standalone mode has no ConfigMaps or Secrets; use env with value"
                .into(),
        ));
    }
    let mut out = Vec::new();
    for (i, var) in container.env.iter().flatten().enumerate() {
        if var.value_from.is_some() {
            return Err(Error::Unsupported(format!(
                "containers[0].env[{i}] ({}): valueFrom is not supported in standalone mode; use value",
                var.name
            )));
        }
        out.push((var.name.clone(), var.value.clone().unwrap_or_default()));
    }
    Ok(out)
}

fn ports(container: &Container) -> Result<Vec<PortSpec>> {
    let mut out: Vec<PortSpec> = Vec::new();
    for (i, port) in container.ports.iter().flatten().enumerate() {
        let container_port = u16::try_from(port.container_port)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "containers[0].ports[{i}].containerPort {} is not a port number",
                    port.container_port
                ))
            })?;
        // The same port may be declared per protocol; standalone maps it once.
        if out.iter().all(|p| p.container_port != container_port) {
            out.push(PortSpec {
                name: port.name.clone().filter(|n| !n.is_empty()),
                container_port,
            });
        }
    }
    Ok(out)
}

/// The pod's directory-like volumes (claims, emptyDir, ephemeral), mounted ones first in
/// `volumeMounts` order, so the first volume is the one the container mounts first.
fn volumes(pod: &PodSpec, container: &Container) -> Result<Vec<VolumeSpec>> {
    let mut names: Vec<String> = Vec::new();
    for (i, volume) in pod.volumes.iter().flatten().enumerate() {
        if names.contains(&volume.name) {
            continue;
        }
        let directory_like = volume.empty_dir.is_some()
            || volume.persistent_volume_claim.is_some()
            || volume.ephemeral.is_some();
        // The name becomes a directory name: Kubernetes' own rule keeps it a plain label.
        if let Err(error) = validate_dns1123_label(&volume.name) {
            return Err(Error::Unsupported(format!(
                "volumes[{i}].name {:?}: {}",
                volume.name,
                error.message()
            )));
        }
        if !directory_like {
            return Err(Error::Unsupported(format!(
                "volumes[{i}] ({}): standalone mode supports emptyDir, persistentVolumeClaim, \
                 ephemeral and volumeClaimTemplates volumes only",
                volume.name
            )));
        }
        names.push(volume.name.clone());
    }
    let mounts = container.volume_mounts.clone().unwrap_or_default();
    let mut out: Vec<VolumeSpec> = Vec::new();
    for mount in &mounts {
        if !names.contains(&mount.name) {
            return Err(Error::Unsupported(format!(
                "containers[0].volumeMounts: volume {:?} is not declared in volumes or \
                 volumeClaimTemplates",
                mount.name
            )));
        }
        if out.iter().any(|v| v.name == mount.name) {
            continue;
        }
        out.push(VolumeSpec {
            name: mount.name.clone(),
            mount_path: Some(mount.mount_path.clone()),
            read_only: mount.read_only.unwrap_or(false),
        });
    }
    for name in names {
        if out.iter().all(|v| v.name != name) {
            out.push(VolumeSpec {
                name,
                mount_path: None,
                read_only: false,
            });
        }
    }
    Ok(out)
}

fn readiness(probe: &Probe, ports: &[PortSpec]) -> Result<Readiness> {
    let action = if let Some(http) = &probe.http_get {
        if let Some(scheme) = http
            .scheme
            .as_deref()
            .filter(|s| !s.eq_ignore_ascii_case("HTTP"))
        {
            return Err(Error::Unsupported(format!(
                "readinessProbe.httpGet.scheme {scheme:?}: only HTTP is supported in standalone mode"
            )));
        }
        let headers = http
            .http_headers
            .iter()
            .flatten()
            .map(|h| (h.name.clone(), h.value.clone()))
            .collect();
        ProbeAction::Http {
            container_port: probe_port(&http.port, ports)?,
            path: http.path.clone().unwrap_or_else(|| "/".to_owned()),
            headers,
        }
    } else if let Some(tcp) = &probe.tcp_socket {
        ProbeAction::Tcp {
            container_port: probe_port(&tcp.port, ports)?,
        }
    } else {
        return Err(Error::Unsupported(
            "readinessProbe: standalone mode supports httpGet and tcpSocket probes only".into(),
        ));
    };
    Ok(Readiness::from_probe(action, probe))
}

/// A probe port as a declared container port. An undeclared number is allowed only when no
/// port is declared at all: the workload then listens on `PORT` alone.
fn probe_port(port: &IntOrString, ports: &[PortSpec]) -> Result<Option<u16>> {
    match port {
        IntOrString::Int(n) => {
            let found = ports.iter().find(|p| i32::from(p.container_port) == *n);
            match (found, ports.is_empty()) {
                (Some(p), _) => Ok(Some(p.container_port)),
                (None, true) => Ok(None),
                (None, false) => Err(Error::Unsupported(format!(
                    "readinessProbe port {n} is not a declared containerPort"
                ))),
            }
        }
        IntOrString::String(name) => ports
            .iter()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| Some(p.container_port))
            .ok_or_else(|| {
                Error::Unsupported(format!(
                    "readinessProbe port {name:?} names no declared container port"
                ))
            }),
    }
}

fn restart_policy(pod: &PodSpec) -> Result<RestartPolicy> {
    match pod.restart_policy.as_deref() {
        None | Some("") | Some("Always") => Ok(RestartPolicy::Always),
        Some("OnFailure") => Ok(RestartPolicy::OnFailure),
        Some("Never") => Ok(RestartPolicy::Never),
        Some(other) => Err(Error::Unsupported(format!(
            "restartPolicy {other:?}: expected Always, OnFailure or Never"
        ))),
    }
}

fn grace(seconds: Option<i64>) -> Duration {
    let seconds = seconds.unwrap_or(DEFAULT_GRACE_SECONDS).max(0);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0)).min(MAX_GRACE)
}

/// `image: dir:///path` names a root filesystem for gvisor; any other image is informational.
fn rootfs(image: Option<&str>, runtime: RuntimeKind) -> Result<Option<PathBuf>> {
    let Some(path) = image.and_then(|i| i.strip_prefix(DIR_IMAGE_PREFIX)) else {
        return Ok(None);
    };
    if runtime != RuntimeKind::Gvisor {
        return Ok(None);
    }
    let path = PathBuf::from(path);
    if !path.is_absolute() {
        return Err(Error::Unsupported(format!(
            "image {:?}: a dir:// image must name an absolute path, e.g. dir:///srv/rootfs",
            image.unwrap_or_default()
        )));
    }
    // Said here, as the sandbox's condition, rather than as runsc's error from deep in a start.
    if !path.is_dir() {
        return Err(Error::Unsupported(format!(
            "image {:?}: the root filesystem {} is not a directory on this machine",
            image.unwrap_or_default(),
            path.display()
        )));
    }
    Ok(Some(path))
}

/// Expands Kubernetes `$(VAR)` references: a defined variable is replaced by its value, `$$`
/// is a literal `$`, and anything else (an undefined name, an unclosed reference) stays as
/// written.
pub fn expand(input: &str, lookup: impl Fn(&str) -> Option<String>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(body) = after.strip_prefix('(')
            && let Some(close) = body.find(')')
        {
            let name = &body[..close];
            match lookup(name) {
                Some(value) => out.push_str(&value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &body[close + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}
