//! The Helm-installed release on a real node, shared by the tests of one test binary: the node
//! of `rouse_testsupport::node` with the pause, Python runtime and Rouse images (the Rouse
//! image made from this build's `rouse` binary), and `helm install` of `deploy/helm/rouse`
//! exactly as a user runs it, with the proxy's Service on a NodePort the tests reach from the
//! host.
//!
//! Skipped with a message when the node cannot run here (no root, binaries missing), failing
//! under CI.

#![allow(dead_code)]

pub mod sdk;
pub mod upstream;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use kube::Client;
use rouse_testsupport::cluster;
use rouse_testsupport::image;
use rouse_testsupport::node::{RealNode, release, shared_or_skip};
use serde_json::Value;

pub use rouse_testsupport::node::release::{DOMAIN, RELEASE_NAMESPACE};
/// Bounds every wait of these tests: pods really start here.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// The installed release.
#[derive(Debug)]
pub struct Release {
    /// The node.
    pub node: &'static RealNode,
    /// The proxy's NodePort on the node's address.
    pub proxy: SocketAddr,
}

static RELEASE: OnceLock<std::result::Result<Release, String>> = OnceLock::new();

/// The release, installed on first use; `None` (printed) when the node cannot run here.
pub fn release(test: &str) -> Option<&'static Release> {
    let node = shared_or_skip(test, images)?;
    // On a thread of its own: the caller may be inside a runtime, and `install` blocks.
    let release = RELEASE.get_or_init(|| {
        std::thread::spawn(move || install(node).map_err(|e| format!("{e:#}")))
            .join()
            .unwrap_or_else(|_| Err("the install thread panicked".to_owned()))
    });
    match release {
        Ok(release) => Some(release),
        Err(e) => panic!("{test}: installing the release failed: {e}"),
    }
}

/// The images the node imports before it starts pods.
fn images() -> Result<Vec<PathBuf>> {
    let rouse = stripped_rouse()?;
    Ok(vec![
        image::pause_image()?.archive,
        image::python_runtime_image()?.archive,
        image::rouse_image(&rouse)?.archive,
    ])
}

/// This build's `rouse` without its debug sections (a third of the size: the image packs,
/// imports and starts faster), next to the test's other outputs.
fn stripped_rouse() -> Result<PathBuf> {
    let binary = Path::new(env!("CARGO_BIN_EXE_rouse"));
    let out = binary.with_file_name("rouse-image-binary");
    let status = Command::new("objcopy")
        .arg("--strip-debug")
        .arg(binary)
        .arg(&out)
        .status()
        .context("run objcopy (binutils)")?;
    if !status.success() {
        bail!("objcopy --strip-debug {} failed", binary.display());
    }
    Ok(out)
}

/// `helm install` of the chart with the local image, the RuntimeClass `gvisor` and the
/// proxy's Service on a NodePort; waits for every Deployment.
fn install(node: &'static RealNode) -> Result<Release> {
    let started = Instant::now();
    release::helm_install(node).map_err(|e| e.context(describe_release(node)))?;
    eprintln!(
        "helm install: the release is up after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let port = block_on(release::proxy_node_port(node))?;
    Ok(Release {
        node,
        proxy: SocketAddr::from((node.node_ip(), port)),
    })
}

/// Pods and events of the release, for a failure message.
fn describe_release(node: &RealNode) -> String {
    let out = Command::new("kubectl")
        .args(["get", "pods,events", "-n", RELEASE_NAMESPACE, "-o", "wide"])
        .env("KUBECONFIG", node.kubeconfig())
        .output();
    match out {
        Ok(out) => String::from_utf8_lossy(&out.stdout).into_owned(),
        Err(e) => format!("(kubectl: {e})"),
    }
}

fn block_on<T>(future: impl Future<Output = Result<T>>) -> Result<T> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(future)
}

impl Release {
    /// A cluster-admin client (one per test: clients belong to a runtime).
    pub async fn client(&self) -> Client {
        self.node.client().await.expect("a client of the node")
    }

    /// A namespace of the test's own.
    pub async fn namespace(&self, test: &str) -> String {
        cluster::test_namespace(&self.client().await, test)
            .await
            .expect("test namespace")
    }

    /// Applies a manifest (server-side, as the cluster admin).
    pub async fn apply(&self, doc: &Value) {
        cluster::apply(&self.client().await, doc, false)
            .await
            .unwrap_or_else(|e| panic!("apply {doc}: {e:#}"));
    }

    /// Runs kubectl with the admin kubeconfig; its output, or a panic naming the command.
    pub fn kubectl(&self, args: &[&str]) -> String {
        let out = Command::new(kubectl())
            .args(args)
            .env("KUBECONFIG", self.node.kubeconfig())
            .output()
            .expect("run kubectl");
        assert!(
            out.status.success(),
            "kubectl {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// One HTTP/1.1 request through the proxy with the sandbox's host name.
    pub async fn get(&self, namespace: &str, name: &str, path: &str) -> Result<(u16, String)> {
        let host = format!("{name}.{namespace}.{DOMAIN}");
        http(self.proxy, "GET", path, &host, &[], Vec::new()).await
    }
}

/// The test venv of `testsupport/python/setup.sh`: `ROUSE_TEST_VENV`, else
/// `~/.cache/rouse/venv` (it may not exist).
pub fn venv() -> Option<PathBuf> {
    std::env::var_os("ROUSE_TEST_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/rouse/venv")))
}

/// kubectl: the test venv's, else the one on `PATH`.
pub fn kubectl() -> PathBuf {
    venv()
        .map(|v| v.join("bin/kubectl"))
        .filter(|k| k.is_file())
        .unwrap_or_else(|| PathBuf::from("kubectl"))
}

/// The venv's python with the agent-sandbox SDK and the Kubernetes client importable (and
/// its kubectl, for the SDK's tunnel mode), or why there is none.
pub fn sdk_python() -> std::result::Result<PathBuf, String> {
    let venv = venv().ok_or("neither ROUSE_TEST_VENV nor HOME is set")?;
    let python = venv.join("bin/python3");
    let probe = Command::new(&python)
        .args(["-c", "import k8s_agent_sandbox, kubernetes"])
        .output()
        .map_err(|err| format!("{}: {err}", python.display()))?;
    if !probe.status.success() {
        return Err(format!(
            "{} cannot import the SDK: {}",
            python.display(),
            String::from_utf8_lossy(&probe.stderr).trim()
        ));
    }
    if !venv.join("bin/kubectl").is_file() {
        return Err(format!("{} has no kubectl", venv.display()));
    }
    Ok(python)
}

/// One HTTP/1.1 request on a fresh connection, bounded by [`DEADLINE`].
pub async fn http(
    addr: SocketAddr,
    method: &str,
    path: &str,
    host: &str,
    headers: &[(&str, &str)],
    body: Vec<u8>,
) -> Result<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(addr).await?;
        let mut head = format!(
            "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (name, value) in headers {
            head.push_str(&format!("{name}: {value}\r\n"));
        }
        head.push_str("\r\n");
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(&body).await?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await?;
        anyhow::Ok(answer)
    };
    let answer = tokio::time::timeout(DEADLINE, exchange)
        .await
        .context("no answer in time")??;
    let text = String::from_utf8_lossy(&answer);
    let code = text
        .get(9..12)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("not an HTTP answer: {text:?}"))?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        dechunk(body)
    } else {
        body.to_owned()
    };
    Ok((code, body))
}

/// A chunked body's data (the tests' bodies are small text).
fn dechunk(body: &str) -> String {
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, tail)) = rest.split_once("\r\n") {
        let Ok(size) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if size == 0 || tail.len() < size {
            break;
        }
        out.push_str(&tail[..size]);
        rest = tail[size..].trim_start_matches("\r\n");
    }
    out
}

/// Polls `check` until it yields a value or [`DEADLINE`] passes; the failure names `what` and
/// the last error.
pub async fn wait_for<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<Option<T>>>,
{
    let end = Instant::now() + DEADLINE;
    let mut last = String::new();
    loop {
        match check().await {
            Ok(Some(value)) => return value,
            Ok(None) => {}
            Err(e) => last = format!("{e:#}"),
        }
        assert!(
            Instant::now() < end,
            "not {what} within {DEADLINE:?}; last error: {last}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
