//! The system under test: a real node of `rouse_testsupport::node` with the pause, Python
//! runtime and Rouse images (the Rouse image packed from the given `rouse` binary), and the
//! Helm chart installed on it by `rouse_testsupport::node::release`, as the end-to-end suite installs it: the
//! local image, the RuntimeClass `gvisor`, the proxy's Service on a NodePort.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::Client;
use rouse_testsupport::image;
use rouse_testsupport::node::{NodeBinaries, RealNode, release};

pub use rouse_testsupport::node::release::{DOMAIN, RELEASE_NAMESPACE};

/// The node with the release installed; the node is torn down when this is dropped.
pub struct Release {
    /// The node.
    pub node: RealNode,
    /// The proxy's NodePort on the node's address, reached from the host.
    pub proxy: SocketAddr,
    /// Seconds from start to the node Ready.
    pub node_start: Duration,
    /// Seconds `helm install --wait` took.
    pub install: Duration,
}

impl std::fmt::Debug for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Release")
            .field("node", &self.node)
            .field("proxy", &self.proxy)
            .finish()
    }
}

impl Release {
    /// Starts the node and installs the chart (blocking; not on a runtime's thread).
    pub fn start(rouse: &Path) -> Result<Self> {
        if !rouse.is_file() {
            bail!(
                "{} does not exist; build it first: cargo build --release -p rouse",
                rouse.display()
            );
        }
        // Before the images are packed: a missing program is said at once.
        NodeBinaries::find()?;
        let images = vec![
            image::pause_image()?.archive,
            image::python_runtime_image()?.archive,
            image::rouse_image(&stripped(rouse)?)?.archive,
        ];
        let started = Instant::now();
        let node = RealNode::start(&images)?;
        let node_start = started.elapsed();
        let started = Instant::now();
        release::helm_install(&node)?;
        let install = started.elapsed();
        let port = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(release::proxy_node_port(&node))?;
        Ok(Self {
            proxy: SocketAddr::from((node.node_ip(), port)),
            node,
            node_start,
            install,
        })
    }

    /// A cluster-admin client (clients belong to the runtime that made them).
    pub async fn client(&self) -> Result<Client> {
        self.node.client().await
    }

    /// The host name of sandbox `name` in `namespace` under the proxy's domain.
    pub fn host(namespace: &str, name: &str) -> String {
        format!("{name}.{namespace}.{DOMAIN}")
    }
}

/// `rouse` without its debug sections beside it (`<rouse>-image`), made again only when
/// `rouse` is newer: the image packs and imports faster, and an unchanged binary keeps its
/// cached image archive.
fn stripped(rouse: &Path) -> Result<PathBuf> {
    let mut name = rouse.file_name().context("a file name")?.to_owned();
    name.push("-image");
    let out = rouse.with_file_name(name);
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(made), Some(source)) = (modified(&out), modified(rouse))
        && made >= source
    {
        return Ok(out);
    }
    let status = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(rouse)
        .arg(&out)
        .status()
        .context("run objcopy (binutils)")?;
    if !status.success() {
        bail!("objcopy --strip-debug {} failed", rouse.display());
    }
    Ok(out)
}
