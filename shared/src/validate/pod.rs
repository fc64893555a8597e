//! Rules for the blueprint of a sandbox: its pod template (containers, ports, volume mounts,
//! resources, metadata) and its volume claim templates.

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::{Container, PodSpec};

use super::text::quote;
use super::{FieldPath, Findings, meta, quantity};
use crate::api::{PersistentVolumeClaimTemplate, PodTemplate};
use crate::names;

/// Checks a pod template and the volume claim templates it may mount; `sandbox` names the
/// sandbox when known, to check the names of the claims it will get.
pub(super) fn check_blueprint(
    pod: &PodTemplate,
    claims: &[PersistentVolumeClaimTemplate],
    sandbox: Option<&str>,
    out: &mut Findings,
) {
    let spec = FieldPath::of(&["spec"]);
    let template = spec.field("podTemplate");
    pod_metadata(pod, &template.field("metadata"), out);
    pod_spec(&pod.spec, claims, &template.field("spec"), out);
    check_claims(claims, sandbox, &spec.field("volumeClaimTemplates"), out);
}

fn pod_metadata(pod: &PodTemplate, path: &FieldPath, out: &mut Findings) {
    meta::labels(&pod.metadata.labels, &path.field("labels"), out);
    meta::annotations(&pod.metadata.annotations, &path.field("annotations"), out);
    for (field, map) in [
        ("labels", &pod.metadata.labels),
        ("annotations", &pod.metadata.annotations),
    ] {
        for key in map.keys().filter(|k| meta::is_system_key(k)) {
            out.warn(
                &path.field(field).key(key),
                "ignored: keys under agents.x-k8s.io/ and extensions.agents.x-k8s.io/ are \
                 reserved for the controller and stripped from pod templates"
                    .to_owned(),
            );
        }
    }
}

fn pod_spec(
    spec: &PodSpec,
    claims: &[PersistentVolumeClaimTemplate],
    path: &FieldPath,
    out: &mut Findings,
) {
    if spec.containers.is_empty() {
        out.error(
            &path.field("containers"),
            "must have at least one container".to_owned(),
        );
    }
    let volumes: BTreeSet<&str> = spec
        .volumes
        .iter()
        .flatten()
        .map(|v| v.name.as_str())
        .chain(claims.iter().map(|c| c.metadata.name.as_str()))
        .collect();
    let mut names_seen = BTreeSet::new();
    let groups = [
        (
            "initContainers",
            spec.init_containers.as_deref().unwrap_or_default(),
        ),
        ("containers", spec.containers.as_slice()),
    ];
    for (field, containers) in groups {
        for (i, c) in containers.iter().enumerate() {
            let cpath = path.field(field).index(i);
            if let Err(e) = names::validate_dns1123_label(&c.name) {
                out.error(&cpath.field("name"), e.to_string());
            } else if !names_seen.insert(c.name.as_str()) {
                out.error(
                    &cpath.field("name"),
                    format!("duplicate container name {}", c.name),
                );
            }
            container(c, &volumes, &cpath, out);
        }
    }
    for (i, v) in spec.volumes.iter().flatten().enumerate() {
        let vpath = path.field("volumes").index(i);
        if let Err(e) = names::validate_dns1123_label(&v.name) {
            out.error(&vpath.field("name"), e.to_string());
        }
        if let Some(limit) = v.empty_dir.as_ref().and_then(|d| d.size_limit.as_ref()) {
            quantity::check(&limit.0, &vpath.field("emptyDir").field("sizeLimit"), out);
        }
    }
}

fn container(c: &Container, volumes: &BTreeSet<&str>, path: &FieldPath, out: &mut Findings) {
    let mut port_names = BTreeSet::new();
    for (i, port) in c.ports.iter().flatten().enumerate() {
        let ppath = path.field("ports").index(i);
        if !(1..=65535).contains(&port.container_port) {
            out.error(
                &ppath.field("containerPort"),
                format!("must be between 1 and 65535, got {}", port.container_port),
            );
        }
        if let Some(host_port) = port.host_port.filter(|p| !(0..=65535).contains(p)) {
            out.error(
                &ppath.field("hostPort"),
                format!("must be between 0 and 65535, got {host_port}"),
            );
        }
        if let Some(name) = &port.name {
            if let Some(problem) = port_name_problem(name) {
                out.error(
                    &ppath.field("name"),
                    format!("invalid port name {}: {problem}", quote(name)),
                );
            } else if !port_names.insert(name.as_str()) {
                out.error(&ppath.field("name"), format!("duplicate port name {name}"));
            }
        }
    }
    for (i, mount) in c.volume_mounts.iter().flatten().enumerate() {
        if !volumes.contains(mount.name.as_str()) {
            out.error(
                &path.field("volumeMounts").index(i).field("name"),
                format!(
                    "no volume named {} in the pod's volumes or volumeClaimTemplates",
                    quote(&mount.name)
                ),
            );
        }
    }
    if let Some(r) = &c.resources {
        quantity::check_maps(
            r.limits.as_ref(),
            r.requests.as_ref(),
            &path.field("resources"),
            out,
        );
    }
}

/// What is wrong with a port name under the IANA service-name rules Kubernetes applies.
fn port_name_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() || name.len() > 15 {
        Some("must be 1 to 15 characters")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        Some("must consist of lower case letters, digits and '-'")
    } else if !name.bytes().any(|b| b.is_ascii_lowercase()) {
        Some("must contain at least one letter")
    } else if name.starts_with('-') || name.ends_with('-') || name.contains("--") {
        Some("must not start or end with '-' or contain '--'")
    } else {
        None
    }
}

/// Checks volume claim templates: named (the pod volume name), unique, with a storage request.
pub(super) fn check_claims(
    claims: &[PersistentVolumeClaimTemplate],
    sandbox: Option<&str>,
    path: &FieldPath,
    out: &mut Findings,
) {
    let mut seen = BTreeSet::new();
    for (i, claim) in claims.iter().enumerate() {
        let cpath = path.index(i);
        let mpath = cpath.field("metadata");
        let name = claim.metadata.name.as_str();
        let npath = mpath.field("name");
        if name.is_empty() {
            out.error(
                &npath,
                "required field is missing (the pod volume name)".to_owned(),
            );
        } else if let Err(e) = names::validate_dns1123_label(name) {
            out.error(&npath, e.to_string());
        } else if !seen.insert(name) {
            out.error(&npath, format!("duplicate volume claim template {name}"));
        } else if let Some(sandbox) = sandbox {
            let pvc = format!("{name}-{sandbox}");
            if let Err(e) = names::validate_dns1123_subdomain(&pvc) {
                out.error(&npath, format!("the claim would be named \"{pvc}\": {e}"));
            }
        }
        meta::labels(&claim.metadata.labels, &mpath.field("labels"), out);
        meta::annotations(
            &claim.metadata.annotations,
            &mpath.field("annotations"),
            out,
        );
        let rpath = cpath.field("spec").field("resources");
        let resources = claim.spec.resources.as_ref();
        let requests = resources.and_then(|r| r.requests.as_ref());
        if !requests.is_some_and(|r| r.contains_key("storage")) {
            out.error(
                &rpath.field("requests").key("storage"),
                "required field is missing (the size of the volume, e.g. 1Gi)".to_owned(),
            );
        }
        if let Some(r) = resources {
            quantity::check_maps(r.limits.as_ref(), r.requests.as_ref(), &rpath, out);
        }
    }
}
