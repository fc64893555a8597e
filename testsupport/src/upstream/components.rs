//! Starting the cluster components a simulated node needs beside the control plane: kwok,
//! kube-scheduler, and kube-controller-manager's node lifecycle and PersistentVolume binder.

use std::net::{Ipv4Addr, TcpListener};
use std::path::Path;
use std::process::Command;

use anyhow::Result;

use super::node::{KWOK_ANNOTATION, KWOK_NODE};
use super::{Programs, Supervised};

/// A port free on 127.0.0.1 right now (a component's own health and metrics server).
fn free_port() -> Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?
        .local_addr()?
        .port())
}

/// kwok with its stages, managing the nodes annotated `kwok.x-k8s.io/node=fake` (the
/// [`KWOK_NODE`] of [`super::create_kwok_node`]): it makes them Ready and plays the pods
/// scheduled to them. It serves no kubelet API (no exec, logs or port-forward).
pub fn start_kwok(programs: &Programs, kubeconfig: &Path, dir: &Path) -> Result<Supervised> {
    Supervised::spawn(
        "kwok",
        Command::new(&programs.kwok)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!("--config={}", programs.kwok_stages.display()))
            .arg("--manage-all-nodes=false")
            .arg(format!(
                "--manage-nodes-with-annotation-selector={}={}",
                KWOK_ANNOTATION.0, KWOK_ANNOTATION.1
            ))
            .arg(format!("--node-name={KWOK_NODE}"))
            .arg("--node-ip=127.0.0.1")
            .arg("--cidr=10.244.0.0/16"),
        dir,
    )
}

/// kube-scheduler (`<kube bin dir>/kube-scheduler`), without leader election.
pub fn start_scheduler(kubeconfig: &Path, dir: &Path) -> Result<Supervised> {
    let port = free_port()?;
    Supervised::spawn(
        "kube-scheduler",
        Command::new(super::scheduler()?)
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!(
                "--authentication-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg(format!(
                "--authorization-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}")),
        dir,
    )
}

/// A second kube-controller-manager running what a node needs of it: the node lifecycle
/// controller (it lifts the `not-ready` taint the API server puts on a new node once kwok
/// reports it Ready) and the PersistentVolume binder, which binds claims to the static
/// volumes of [`super::create_static_volumes`]. (The control plane's own runs what every test
/// needs; these only matter with a node.)
pub fn start_node_controllers(kubeconfig: &Path, dir: &Path) -> Result<Supervised> {
    let port = free_port()?;
    let certs = dir.join("node-controllers");
    std::fs::create_dir_all(&certs)?;
    Supervised::spawn(
        "kube-controller-manager-node",
        Command::new(crate::cluster::bin_dir().join("kube-controller-manager"))
            .arg(format!("--kubeconfig={}", kubeconfig.display()))
            .arg(format!(
                "--authentication-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg(format!(
                "--authorization-kubeconfig={}",
                kubeconfig.display()
            ))
            .arg("--controllers=nodelifecycle,persistentvolume-binder")
            .arg("--leader-elect=false")
            .arg("--bind-address=127.0.0.1")
            .arg(format!("--secure-port={port}"))
            .arg(format!("--cert-dir={}", certs.display())),
        dir,
    )
}
