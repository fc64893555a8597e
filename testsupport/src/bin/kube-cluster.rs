//! Starts the test control plane (etcd, kube-apiserver, kube-controller-manager) for local
//! use, building the Kubernetes binaries first when they are not cached, prints where its
//! kubeconfig is and runs until interrupted:
//!
//! ```text
//! cargo run -p rouse-testsupport --bin kube-cluster
//! ```

use std::process::Command;

use anyhow::{Context, Result, bail};
use rouse_testsupport::cluster::{Binaries, ControlPlane, bin_dir, kube_version};

fn main() -> Result<()> {
    if Binaries::find().is_err() {
        let script = concat!(env!("CARGO_MANIFEST_DIR"), "/cluster/build.sh");
        eprintln!(
            "building Kubernetes {} into {} (once; takes a while)",
            kube_version(),
            bin_dir().display()
        );
        let status = Command::new(script)
            .status()
            .with_context(|| format!("run {script}"))?;
        if !status.success() {
            bail!("{script} failed: {status}");
        }
    }
    let plane = ControlPlane::start()?;
    println!("export KUBECONFIG={}", plane.kubeconfig().display());
    eprintln!(
        "control plane up at {} (logs in {}); Ctrl-C stops it",
        plane.url(),
        plane.dir().display()
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r,
                _ = term.recv() => Ok(()),
            }
        })?;
    plane.stop();
    Ok(())
}
