//! Starting and stopping the control plane's processes.

use std::fs::File;
use std::net::{Ipv4Addr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};

use super::certs::{self, CertPaths};
use super::{Binaries, START_DEADLINE, client_from};

/// The node object made for [`ClusterKubelet`](super::ClusterKubelet), named like the default
/// [`KubeletOptions::node_name`](crate::kube::KubeletOptions::node_name).
pub const NODE_NAME: &str = "fake-node";

/// How many times a start is tried with new ports (another process may take a free port
/// between our probe and the server's bind).
const ATTEMPTS: usize = 3;

/// A running control plane. Stopped when dropped; a watchdog process also stops it when the
/// process that started it exits (a shared control plane in a `static` is never dropped).
pub struct ControlPlane {
    dir: PathBuf,
    url: String,
    kubeconfig: PathBuf,
    certs: CertPaths,
    children: Mutex<Vec<(&'static str, Child)>>,
}

impl std::fmt::Debug for ControlPlane {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ControlPlane")
            .field("url", &self.url)
            .field("kubeconfig", &self.kubeconfig)
            .finish()
    }
}

impl Drop for ControlPlane {
    fn drop(&mut self) {
        self.stop();
    }
}

impl ControlPlane {
    /// Starts etcd, kube-apiserver and kube-controller-manager in a new temporary directory and
    /// waits until the API server is ready and the controller manager works. Blocking; callable
    /// from anywhere (it runs on a thread of its own).
    pub fn start() -> Result<Self> {
        let binaries = Binaries::find()?;
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let mut last = None;
            for attempt in 1..=ATTEMPTS {
                match runtime.block_on(Self::try_start(&binaries)) {
                    Ok(plane) => return Ok(plane),
                    Err(e) => {
                        // Visible in the test's output even when a later attempt succeeds.
                        eprintln!("control plane start attempt {attempt}/{ATTEMPTS} failed: {e:#}");
                        last = Some(e);
                    }
                }
            }
            Err(last.unwrap_or_else(|| anyhow::anyhow!("no attempt made")))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the control plane start thread panicked"))?
    }

    /// The API server's URL (`https://127.0.0.1:<port>`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// A kubeconfig of a cluster admin (`system:masters`).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The CA that signed the API server's certificate.
    pub fn ca(&self) -> &Path {
        &self.certs.ca
    }

    /// The directory holding certificates, data and each process's log (`<name>.log`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A cluster admin client.
    pub async fn client(&self) -> Result<Client> {
        client_from(&self.kubeconfig, None).await
    }

    /// A client that impersonates ServiceAccount `namespace/name`: it can do exactly what
    /// RBAC grants that account.
    pub async fn service_account_client(&self, namespace: &str, name: &str) -> Result<Client> {
        let (user, groups) = super::service_account_identity(namespace, name);
        let groups: Vec<&str> = groups.iter().map(String::as_str).collect();
        client_from(&self.kubeconfig, Some((&user, &groups))).await
    }

    /// Writes a kubeconfig that impersonates ServiceAccount `namespace/name` (for a process
    /// under test: it can do exactly what RBAC grants that account).
    pub fn write_service_account_kubeconfig(
        &self,
        path: &Path,
        namespace: &str,
        name: &str,
    ) -> Result<()> {
        let (user, groups) = super::service_account_identity(namespace, name);
        let groups: String = groups.iter().map(|g| format!("\n    - {g}")).collect();
        let text = kubeconfig_text(&self.url, &self.certs)
            + &format!("    as: {user}\n    as-groups:{groups}\n");
        std::fs::write(path, text).with_context(|| format!("write {}", path.display()))
    }

    /// Stops every process (SIGTERM, then SIGKILL after 10 s) and removes the directory.
    pub fn stop(&self) {
        let mut children = match self.children.lock() {
            Ok(children) => children,
            Err(poisoned) => poisoned.into_inner(),
        };
        // The controller manager first, etcd last.
        while let Some((_, mut child)) = children.pop() {
            stop_child(&mut child);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }

    async fn try_start(binaries: &Binaries) -> Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("rouse-kube-")
            .tempdir()
            .context("temporary directory")?
            .keep();
        let certs = certs::write(&dir)?;
        let [etcd_client, etcd_peer, apiserver_port, kcm_port] = free_ports()?;
        let url = format!("https://127.0.0.1:{apiserver_port}");
        let kubeconfig = dir.join("kubeconfig");
        write_kubeconfig(&kubeconfig, &url, &certs)?;
        let plane = Self {
            dir: dir.clone(),
            url,
            kubeconfig,
            certs: certs.clone(),
            children: Mutex::new(Vec::new()),
        };
        let etcd_url = format!("http://127.0.0.1:{etcd_client}");
        let peer_url = format!("http://127.0.0.1:{etcd_peer}");
        plane.spawn(
            "etcd",
            Command::new(&binaries.etcd)
                .arg(format!("--data-dir={}", dir.join("etcd").display()))
                .arg("--name=rouse-test")
                .arg(format!("--listen-client-urls={etcd_url}"))
                .arg(format!("--advertise-client-urls={etcd_url}"))
                .arg(format!("--listen-peer-urls={peer_url}"))
                .arg(format!("--initial-advertise-peer-urls={peer_url}"))
                .arg(format!("--initial-cluster=rouse-test={peer_url}"))
                // Test data: durability does not matter, a loaded disk does.
                .arg("--unsafe-no-fsync"),
        )?;
        let (sa_key, sa_pub) = (
            certs.service_account.0.display().to_string(),
            certs.service_account.1.display().to_string(),
        );
        plane.spawn(
            "kube-apiserver",
            Command::new(&binaries.apiserver)
                .arg(format!("--etcd-servers={etcd_url}"))
                .arg("--bind-address=127.0.0.1")
                .arg("--advertise-address=127.0.0.1")
                .arg(format!("--secure-port={apiserver_port}"))
                .arg(format!("--cert-dir={}", dir.join("apiserver").display()))
                .arg(format!("--tls-cert-file={}", certs.serving.0.display()))
                .arg(format!(
                    "--tls-private-key-file={}",
                    certs.serving.1.display()
                ))
                .arg(format!("--client-ca-file={}", certs.ca.display()))
                .arg("--authorization-mode=RBAC")
                // As strict as the strictest clusters: setting blockOwnerDeletion needs
                // permission on the owner's finalizers.
                .arg("--enable-admission-plugins=OwnerReferencesPermissionEnforcement")
                .arg("--service-account-issuer=https://kubernetes.default.svc")
                .arg(format!("--service-account-key-file={sa_pub}"))
                .arg(format!("--service-account-signing-key-file={sa_key}"))
                .arg("--service-cluster-ip-range=10.96.0.0/16")
                .arg("--allow-privileged=true")
                .arg("--profiling=false")
                // Debian's etcd 3.4 lacks the progress notifications a streamed initial list
                // needs, and with WatchList on, the API server turns every watch from
                // resourceVersion "" or "0" into one and fails it: clients built with
                // client-go (kwok, upstream's e2e framework) then never see a change.
                .arg("--feature-gates=WatchList=false"),
        )?;
        let client = client_from(&plane.kubeconfig, None).await?;
        plane.wait_ready(&client).await?;
        plane.spawn(
            "kube-controller-manager",
            Command::new(&binaries.controller_manager)
                .arg(format!("--kubeconfig={}", plane.kubeconfig.display()))
                .arg(format!(
                    "--authentication-kubeconfig={}",
                    plane.kubeconfig.display()
                ))
                .arg(format!(
                    "--authorization-kubeconfig={}",
                    plane.kubeconfig.display()
                ))
                // Ownership GC and namespace deletion are what the tests need; serviceaccount
                // creates the `default` account pods need; pvc-protection releases claims;
                // persistentvolume-binder binds claims to the volumes a provisioner makes
                // (`crate::provisioner`) and releases them, pv-protection lets a released
                // volume go.
                .arg(
                    "--controllers=garbagecollector,namespace,serviceaccount,pvc-protection,\
                     persistentvolume-binder,pv-protection",
                )
                .arg("--leader-elect=false")
                .arg("--bind-address=127.0.0.1")
                .arg(format!("--secure-port={kcm_port}"))
                .arg(format!(
                    "--cert-dir={}",
                    dir.join("controller-manager").display()
                ))
                .arg("--concurrent-gc-syncs=4")
                // The garbage collector deletes every pod and Service a test or benchmark
                // leaves to it; at client-go's default 20 requests/s that, not the API server,
                // bounds a deletion of thousands (the scale benchmark). Kubernetes' own
                // scalability runs give the controller manager 100.
                .arg("--kube-api-qps=100")
                .arg("--kube-api-burst=200"),
        )?;
        // The controller manager works once it has made the `default` namespace's account.
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        plane
            .wait(
                "kube-controller-manager (default ServiceAccount)",
                || async { Ok(accounts.get_opt("default").await?.is_some()) },
            )
            .await?;
        let node = Node {
            metadata: ObjectMeta {
                name: Some(NODE_NAME.to_owned()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        };
        Api::<Node>::all(client)
            .create(&PostParams::default(), &node)
            .await
            .context("create the fake node")?;
        Ok(plane)
    }

    async fn wait_ready(&self, client: &Client) -> Result<()> {
        self.wait("kube-apiserver /readyz", || async {
            let request = http::Request::get("/readyz").body(Vec::new())?;
            Ok(client
                .request_text(request)
                .await
                .is_ok_and(|t| t.trim() == "ok"))
        })
        .await
    }

    /// Polls `check` until it is true, failing early (with the logs) when a process exits.
    async fn wait<F, Fut>(&self, what: &str, mut check: F) -> Result<()>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<bool>>,
    {
        let end = tokio::time::Instant::now() + START_DEADLINE;
        loop {
            if let Some(exited) = self.exited() {
                bail!("{exited}");
            }
            if check().await.unwrap_or(false) {
                return Ok(());
            }
            if tokio::time::Instant::now() >= end {
                bail!("{what} not ready after {START_DEADLINE:?}\n{}", self.logs());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// A description of the first process that exited, with its log.
    fn exited(&self) -> Option<String> {
        let mut children = self.children.lock().ok()?;
        for (name, child) in children.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(format!(
                    "{name} exited with {status}:\n{}",
                    log_tail(&self.dir.join(format!("{name}.log")))
                ));
            }
        }
        None
    }

    fn logs(&self) -> String {
        ["etcd", "kube-apiserver", "kube-controller-manager"]
            .iter()
            .map(|name| {
                format!(
                    "--- {name}\n{}",
                    log_tail(&self.dir.join(format!("{name}.log")))
                )
            })
            .collect()
    }

    /// Starts `command` with its output in `<dir>/<name>.log`, watched by a process that
    /// stops it when this process exits.
    fn spawn(&self, name: &'static str, command: &mut Command) -> Result<()> {
        let log = File::create(self.dir.join(format!("{name}.log")))?;
        let child = command
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {name} ({:?})", command.get_program()))?;
        // `tail --pid` returns when this process exits; then the watchdog stops the server and
        // removes the directory (the removal is harmless when `stop` did it already).
        Command::new("sh")
            .arg("-c")
            .arg(
                "tail --pid=\"$1\" -f /dev/null; kill -TERM \"$2\" 2>/dev/null; \
                 for _ in 1 2 3 4 5 6 7 8 9 10; do kill -0 \"$2\" 2>/dev/null || break; sleep 1; done; \
                 kill -KILL \"$2\" 2>/dev/null; rm -rf \"$3\"",
            )
            .arg("rouse-kube-watchdog")
            .arg(std::process::id().to_string())
            .arg(child.id().to_string())
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("start the watchdog")?;
        self.children
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push((name, child));
        Ok(())
    }
}

/// SIGTERM, up to 10 s to exit, then SIGKILL.
fn stop_child(child: &mut Child) {
    if let Ok(pid) = i32::try_from(child.id()) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGTERM,
        );
    }
    let end = std::time::Instant::now() + Duration::from_secs(10);
    while std::time::Instant::now() < end {
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Four distinct ports free on 127.0.0.1 right now.
fn free_ports() -> Result<[u16; 4]> {
    let listeners = (0..4)
        .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
        .collect::<std::io::Result<Vec<_>>>()?;
    let ports: Vec<u16> = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<_>>()?;
    Ok([ports[0], ports[1], ports[2], ports[3]])
}

fn write_kubeconfig(path: &Path, url: &str, certs: &CertPaths) -> Result<()> {
    std::fs::write(path, kubeconfig_text(url, certs))
        .with_context(|| format!("write {}", path.display()))
}

/// A kubeconfig with the admin's client certificate; the user entry comes last, so more of
/// its keys can be appended.
fn kubeconfig_text(url: &str, certs: &CertPaths) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: rouse-test\n  cluster:\n    server: {url}\n    \
         certificate-authority: {ca}\ncontexts:\n- name: rouse-test\n  context:\n    cluster: rouse-test\n    \
         user: admin\ncurrent-context: rouse-test\nusers:\n- name: admin\n  user:\n    client-certificate: {crt}\n    \
         client-key: {key}\n",
        ca = certs.ca.display(),
        crt = certs.admin.0.display(),
        key = certs.admin.1.display(),
    )
}

/// The last 40 lines of a log file.
fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}
