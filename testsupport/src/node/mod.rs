//! A real single-node Kubernetes for end-to-end tests: etcd, kube-apiserver,
//! kube-controller-manager, kube-scheduler, the kubelet, kube-proxy and containerd (with `runc`
//! and gVisor's `runsc` as the RuntimeClass `gvisor`), all inside a network namespace the run
//! makes (see [`net`]), with every file under `/var/tmp/rouse-node/<id>`, every pod under the
//! cgroup `rouse-node-<id>`, and a tear-down that removes exactly those (see [`teardown`]).
//!
//! The Kubernetes binaries come from `testsupport/cluster/build.sh`, gVisor from
//! `testsupport/gvisor/build.sh`, containerd, runc, the CNI plugins and etcd from Debian. It
//! needs root. Images come from local archives (no registry): pods use
//! `imagePullPolicy: Never`. Cluster DNS comes from [`dns`], the volume provisioner from
//! [`crate::provisioner`], both in the test process. See docs/testing.md ("The real node").

pub mod dns;
mod files;
mod net;
pub mod release;
mod teardown;

use std::fs::File;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Node, ServiceAccount};
use kube::{Api, Client};

pub use files::{DNS_IP, PAUSE_IMAGE, POD_CIDR, SERVICE_CIDR};
pub use net::NodeNet;
pub use teardown::sweep_stale;

use crate::cluster::{self, START_DEADLINE};
use files::RunDir;

/// The node's name (also the kubelet's `--hostname-override`).
pub const NODE_NAME: &str = "rouse-node";

/// What a real node runs, found before anything starts.
#[derive(Debug, Clone)]
pub struct NodeBinaries {
    kube: PathBuf,
    etcd: PathBuf,
    runsc: PathBuf,
    shim_dir: PathBuf,
}

impl NodeBinaries {
    /// Finds every program, or says which is missing and how to get it.
    pub fn find() -> Result<Self> {
        if !nix::unistd::geteuid().is_root() {
            bail!("a real node needs root (network namespaces, cgroups, containerd)");
        }
        let kube = cluster::bin_dir();
        for name in [
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kubelet",
            "kube-proxy",
        ] {
            if !kube.join(name).is_file() {
                bail!(
                    "{} missing (build it with testsupport/cluster/build.sh)",
                    kube.join(name).display()
                );
            }
        }
        let etcd = cluster::Binaries::find()?.etcd;
        for (program, package) in [
            ("containerd", "containerd"),
            ("ctr", "containerd"),
            ("runc", "runc"),
            ("ip", "iproute2"),
            ("nsenter", "util-linux"),
            ("setsid", "util-linux"),
            ("iptables", "iptables"),
        ] {
            if which(program).is_none() {
                bail!("{program} not found on PATH (install Debian's {package})");
            }
        }
        if !Path::new("/usr/lib/cni/bridge").is_file() {
            bail!("/usr/lib/cni/bridge missing (install Debian's containernetworking-plugins)");
        }
        let gvisor = crate::gvisor::dir();
        let runsc = gvisor.join("runsc");
        if !runsc.is_file() {
            bail!(
                "{} missing (build it with testsupport/gvisor/build.sh)",
                runsc.display()
            );
        }
        Ok(Self {
            kube,
            etcd,
            runsc,
            shim_dir: crate::gvisor::shim_dir()?,
        })
    }
}

/// A running real node. Torn down when dropped; a watchdog also tears it down when the
/// process that started it exits.
pub struct RealNode {
    run: RunDir,
    net: NodeNet,
    kubeconfig: PathBuf,
    ca: PathBuf,
    children: Mutex<Vec<(&'static str, Child)>>,
    /// The in-process parts (cluster DNS, the volume provisioner) and what stops them.
    services: Mutex<Option<Services>>,
}

/// The node's in-process parts, on a thread and runtime of their own (they outlive the
/// runtime of the test that started the node).
struct Services {
    stop: tokio::sync::oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

impl std::fmt::Debug for RealNode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RealNode")
            .field("run", &self.run.root)
            .field("node_ip", &self.net.node_ip())
            .finish()
    }
}

impl Drop for RealNode {
    fn drop(&mut self) {
        self.stop();
    }
}

impl RealNode {
    /// Starts the node, imports the image archives `images` (docker-archive tarballs; the
    /// pause image [`PAUSE_IMAGE`] among them) and waits until it is Ready. containerd's
    /// `runsc` handler is there; the RuntimeClass `gvisor` that selects it is not (the Helm
    /// chart makes it, or [`RealNode::create_runtime_class`]). Blocking; callable from anywhere (it runs on a thread of its
    /// own). First tears down the nodes of crashed runs.
    pub fn start(images: &[PathBuf]) -> Result<Self> {
        let binaries = NodeBinaries::find()?;
        let images = images.to_vec();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            teardown::sweep_stale();
            let node = Self::create(&binaries)?;
            match runtime.block_on(node.boot(&binaries, &images)) {
                Ok(()) => {}
                Err(e) => return Err(e.context(node.logs())),
            }
            node.start_services()?;
            Ok(node)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the node start thread panicked"))?
    }

    /// The node's address (API server on 6443, kubelet on 10250, NodePort Services), reached
    /// from the host over the run's veth pair.
    pub fn node_ip(&self) -> Ipv4Addr {
        self.net.node_ip()
    }

    /// The API server's URL.
    pub fn url(&self) -> String {
        format!("https://{}:6443", self.node_ip())
    }

    /// A cluster-admin kubeconfig.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The cluster's CA certificate.
    pub fn ca(&self) -> &Path {
        &self.ca
    }

    /// The network namespace's path (for `nsenter --net=` in tests that must act inside).
    pub fn netns_path(&self) -> String {
        self.net.netns_path()
    }

    /// The cgroup, under every v1 hierarchy's root, that holds the node's parts and its pods
    /// (`rouse-node-<id>`; the kubelet's `cgroupRoot`).
    pub fn cgroup(&self) -> String {
        format!("rouse-node-{}", self.net.id)
    }

    /// The run directory (logs in `logs/<part>.log`).
    pub fn dir(&self) -> &Path {
        &self.run.root
    }

    /// A cluster-admin client.
    pub async fn client(&self) -> Result<Client> {
        cluster::client_from(&self.kubeconfig, None).await
    }

    /// Imports a docker-archive image into the node's containerd (`k8s.io` namespace).
    pub fn import_image(&self, archive: &Path) -> Result<()> {
        let out = Command::new("ctr")
            .arg("--address")
            .arg(self.run.containerd_socket())
            .args(["-n", "k8s.io", "images", "import"])
            .arg(archive)
            .output()
            .context("run ctr")?;
        if !out.status.success() {
            bail!(
                "ctr images import {} failed: {}",
                archive.display(),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(())
    }

    /// Creates the RuntimeClass `gvisor` (handler `runsc`), for clusters without the chart's.
    pub async fn create_runtime_class(&self) -> Result<()> {
        cluster::apply(
            &self.client().await?,
            &serde_json::json!({
                "apiVersion": "node.k8s.io/v1",
                "kind": "RuntimeClass",
                "metadata": {"name": "gvisor"},
                "handler": "runsc",
            }),
            false,
        )
        .await
        .map(|_| ())
    }

    /// Starts cluster DNS ([`dns`]: the `kube-dns` Service at [`DNS_IP`] answered on the
    /// node's address, port 53) and the local-path volume provisioner
    /// (`rouse_testsupport::provisioner`, the default StorageClass `rouse-local`) with its
    /// volumes under the run directory.
    fn start_services(&self) -> Result<()> {
        let kubeconfig = self.kubeconfig.clone();
        let base = self.run.join("volumes");
        std::fs::create_dir_all(&base)?;
        let node_ip = self.net.node_ip();
        let sockets = dns::kube::bind_in_netns(
            &self.net.netns_path(),
            std::net::SocketAddr::from((node_ip, 53)),
        )?;
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let (stop, stop_rx) = tokio::sync::oneshot::channel();
        let thread = std::thread::spawn(move || {
            let runtime = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(runtime) => runtime,
                Err(e) => {
                    let _ = ready_tx.send(Err(anyhow::Error::from(e)));
                    return;
                }
            };
            runtime.block_on(async move {
                let started = async {
                    let client = cluster::client_from(&kubeconfig, None).await?;
                    let dns = dns::kube::ClusterDns::start(
                        client.clone(),
                        sockets,
                        node_ip,
                        dns::DnsConfig::default(),
                    )
                    .await
                    .context("start cluster DNS")?;
                    let config = crate::provisioner::ProvisionerConfig::new(NODE_NAME, base);
                    let provisioner =
                        crate::provisioner::LocalPathProvisioner::start(client, config)
                            .await
                            .context("start the volume provisioner")?;
                    anyhow::Ok((dns, provisioner))
                };
                match started.await {
                    Ok((dns, provisioner)) => {
                        let _ = ready_tx.send(Ok(()));
                        let _ = stop_rx.await;
                        provisioner.stop().await;
                        dns.stop().await;
                    }
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                    }
                }
            });
        });
        ready_rx
            .recv_timeout(START_DEADLINE)
            .context("the node's services (DNS, volume provisioner) did not start")??;
        *self
            .services
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))? = Some(Services { stop, thread });
        Ok(())
    }

    /// Stops everything and removes what the run made (idempotent).
    pub fn stop(&self) {
        let services = match self.services.lock() {
            Ok(mut services) => services.take(),
            Err(poisoned) => poisoned.into_inner().take(),
        };
        if let Some(services) = services {
            let _ = services.stop.send(());
            let _ = services.thread.join();
        }
        if let Err(error) = teardown::run(&self.run.root) {
            eprintln!("tearing down the real node: {error:#}");
        }
        let mut children = match self.children.lock() {
            Ok(children) => children,
            Err(poisoned) => poisoned.into_inner(),
        };
        for (_, child) in children.iter_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
        children.clear();
    }

    /// Makes the run directory, the namespace, the cgroups and the tear-down script.
    fn create(binaries: &NodeBinaries) -> Result<Self> {
        let id = random_id()?;
        let root = Path::new(teardown::RUNS).join(&id);
        std::fs::create_dir_all(&root).with_context(|| format!("create {}", root.display()))?;
        let run = RunDir { root };
        std::fs::write(run.join(teardown::OWNER), teardown::owner_record())?;
        let cgroup = format!("rouse-node-{id}");
        let netns = format!("rouse-node-{id}");
        std::fs::write(
            run.join(teardown::SCRIPT),
            teardown::script(&teardown::Names {
                run: &run.root,
                netns: &netns,
                cgroup: &cgroup,
            }),
        )?;
        teardown::watchdog(&run.root, std::process::id())?;
        let net = NodeNet::create(&id)?;
        make_cgroups(&cgroup)?;
        for dir in [
            "etc",
            "logs",
            "cni/conf",
            "containerd/root",
            "containerd/state",
            "runsc",
            "kubelet",
            "pod-logs",
            "kubelet-plugins",
        ] {
            std::fs::create_dir_all(run.join(dir))?;
        }
        let node_ip = net.node_ip();
        let names: Vec<String> = [
            node_ip.to_string(),
            "10.96.0.1".to_owned(),
            "127.0.0.1".to_owned(),
            "localhost".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default".to_owned(),
            "kubernetes.default.svc".to_owned(),
            "kubernetes.default.svc.cluster.local".to_owned(),
        ]
        .into();
        let pki = run.join("pki");
        std::fs::create_dir_all(&pki)?;
        let certs = cluster::certs::write_for(&pki, &names, Some(NODE_NAME))?;
        let (node_crt, node_key) = certs.node.clone().context("node certificate")?;
        let kubeconfig = run.join("etc/admin.kubeconfig");
        std::fs::write(
            &kubeconfig,
            files::kubeconfig(node_ip, &certs.ca, &certs.admin.0, &certs.admin.1),
        )?;
        std::fs::write(
            run.join("etc/node.kubeconfig"),
            files::kubeconfig(node_ip, &certs.ca, &node_crt, &node_key),
        )?;
        std::fs::write(
            run.join("etc/containerd.toml"),
            files::containerd_toml(&run),
        )?;
        std::fs::write(
            run.join("etc/runsc.toml"),
            files::runsc_toml(&run, &binaries.runsc),
        )?;
        std::fs::write(
            run.join("cni/conf/10-bridge.conflist"),
            files::cni_conflist(&run),
        )?;
        std::fs::write(
            run.join("etc/kubelet.yaml"),
            files::kubelet_yaml(&run, node_ip, &cgroup, &certs.ca),
        )?;
        std::fs::write(run.join("etc/resolv.conf"), files::resolv_conf())?;
        Ok(Self {
            ca: certs.ca.clone(),
            run,
            net,
            kubeconfig,
            children: Mutex::new(Vec::new()),
            services: Mutex::new(None),
        })
    }

    /// Starts the parts in order and waits until the node is Ready.
    async fn boot(&self, binaries: &NodeBinaries, images: &[PathBuf]) -> Result<()> {
        let run = &self.run;
        let pki = run.join("pki");
        let node_ip = self.net.node_ip();
        let kube = |name: &str| binaries.kube.join(name);
        let arg = |flag: &str, path: PathBuf| format!("--{flag}={}", path.display());
        self.spawn(
            "etcd",
            Command::new(&binaries.etcd)
                .arg(arg("data-dir", run.join("etcd")))
                .arg("--name=rouse-node")
                .arg("--listen-client-urls=http://127.0.0.1:2379")
                .arg("--advertise-client-urls=http://127.0.0.1:2379")
                .arg("--listen-peer-urls=http://127.0.0.1:2380")
                .arg("--initial-advertise-peer-urls=http://127.0.0.1:2380")
                .arg("--initial-cluster=rouse-node=http://127.0.0.1:2380")
                .arg("--unsafe-no-fsync"),
        )?;
        // The gVisor shim wrapper first on containerd's PATH (testsupport/gvisor/build.sh).
        let path = std::env::join_paths(
            std::iter::once(binaries.shim_dir.clone()).chain(
                std::env::var_os("PATH")
                    .iter()
                    .flat_map(std::env::split_paths),
            ),
        )?;
        self.spawn(
            "containerd",
            Command::new("containerd")
                .arg("--config")
                .arg(run.join("etc/containerd.toml"))
                .env("PATH", path),
        )?;
        self.spawn(
            "kube-apiserver",
            Command::new(kube("kube-apiserver"))
                .arg("--etcd-servers=http://127.0.0.1:2379")
                .arg(format!("--advertise-address={node_ip}"))
                .arg("--bind-address=0.0.0.0")
                .arg("--secure-port=6443")
                .arg(arg("tls-cert-file", pki.join("apiserver.crt")))
                .arg(arg("tls-private-key-file", pki.join("apiserver.key")))
                .arg(arg("client-ca-file", pki.join("ca.crt")))
                .arg(arg("service-account-key-file", pki.join("service-account.pub")))
                .arg(arg(
                    "service-account-signing-key-file",
                    pki.join("service-account.key"),
                ))
                .arg("--service-account-issuer=https://kubernetes.default.svc")
                .arg(format!("--service-cluster-ip-range={SERVICE_CIDR}"))
                .arg("--authorization-mode=Node,RBAC")
                .arg("--enable-admission-plugins=NodeRestriction,OwnerReferencesPermissionEnforcement")
                .arg("--allow-privileged=true")
                .arg(arg("kubelet-client-certificate", pki.join("admin.crt")))
                .arg(arg("kubelet-client-key", pki.join("admin.key")))
                // No DNS for the node's name: exec, logs and port-forward dial its address.
                .arg("--kubelet-preferred-address-types=InternalIP")
                .arg("--profiling=false"),
        )?;
        let client = self.client().await?;
        self.wait("kube-apiserver /readyz", || async {
            let request = http::Request::get("/readyz").body(Vec::new())?;
            Ok(client
                .request_text(request)
                .await
                .is_ok_and(|t| t.trim() == "ok"))
        })
        .await?;
        for image in images {
            self.import_image(image)?;
        }
        let admin = self.kubeconfig.clone();
        self.spawn(
            "kube-controller-manager",
            Command::new(kube("kube-controller-manager"))
                .arg(arg("kubeconfig", admin.clone()))
                .arg(arg("authentication-kubeconfig", admin.clone()))
                .arg(arg("authorization-kubeconfig", admin.clone()))
                .arg(arg(
                    "service-account-private-key-file",
                    pki.join("service-account.key"),
                ))
                .arg(arg("root-ca-file", pki.join("ca.crt")))
                .arg("--use-service-account-credentials=true")
                .arg("--leader-elect=false")
                .arg("--bind-address=127.0.0.1")
                .arg(arg("cert-dir", run.join("kcm-certs")))
                .arg("--concurrent-gc-syncs=4"),
        )?;
        self.spawn(
            "kube-scheduler",
            Command::new(kube("kube-scheduler"))
                .arg(arg("kubeconfig", admin.clone()))
                .arg(arg("authentication-kubeconfig", admin.clone()))
                .arg(arg("authorization-kubeconfig", admin.clone()))
                .arg("--leader-elect=false")
                .arg("--bind-address=127.0.0.1")
                .arg(arg("cert-dir", run.join("scheduler-certs"))),
        )?;
        self.spawn(
            "kubelet",
            Command::new(kube("kubelet"))
                .arg(arg("config", run.join("etc/kubelet.yaml")))
                .arg(arg("kubeconfig", run.join("etc/node.kubeconfig")))
                .arg(format!("--hostname-override={NODE_NAME}"))
                .arg(format!("--node-ip={node_ip}"))
                .arg(arg("root-dir", run.join("kubelet")))
                .arg(arg("cert-dir", run.join("kubelet-pki"))),
        )?;
        self.spawn(
            "kube-proxy",
            Command::new(kube("kube-proxy"))
                .arg(arg("kubeconfig", admin))
                .arg("--proxy-mode=iptables")
                .arg(format!("--cluster-cidr={POD_CIDR}"))
                .arg(format!("--hostname-override={NODE_NAME}"))
                // 0 leaves nf_conntrack_max alone: it is not per namespace.
                .arg("--conntrack-max-per-core=0")
                .arg(format!("--bind-address={node_ip}"))
                .arg("--healthz-bind-address=127.0.0.1:10256")
                .arg("--metrics-bind-address=127.0.0.1:10249"),
        )?;
        let nodes: Api<Node> = Api::all(client.clone());
        self.wait("the node Ready", || async {
            Ok(nodes.get_opt(NODE_NAME).await?.is_some_and(|node| {
                node.status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Ready" && c.status == "True")
            }))
        })
        .await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), "default");
        self.wait("the default ServiceAccount", || async {
            Ok(accounts.get_opt("default").await?.is_some())
        })
        .await?;
        Ok(())
    }

    /// Starts `command` inside the node's namespace with its output in `logs/<name>.log`;
    /// records its PID for the tear-down and puts it in the run's cgroup.
    fn spawn(&self, name: &'static str, command: &mut Command) -> Result<()> {
        let log = File::create(self.run.join(&format!("logs/{name}.log")))?;
        let mut wrapped = Command::new("nsenter");
        wrapped
            .arg(format!("--net={}", self.net.netns_path()))
            .arg(command.get_program())
            .args(command.get_args());
        for (key, value) in command.get_envs() {
            match value {
                Some(value) => wrapped.env(key, value),
                None => wrapped.env_remove(key),
            };
        }
        let child = wrapped
            .current_dir(&self.run.root)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("start {name}"))?;
        // nsenter execs the program in its place: the PID is the program's.
        let pid = child.id();
        let mut pids = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.run.join(teardown::PIDS))?;
        // With its start time: the tear-down kills a PID only while it is still this process
        // (a late tear-down must not hit a later run's process that reused the number).
        let started = teardown::start_time(pid).unwrap_or_default();
        std::io::Write::write_all(&mut pids, format!("{pid} {started}\n").as_bytes())?;
        let cgroup = self
            .net
            .netns()
            .replace("rouse-node-", "/sys/fs/cgroup/pids/rouse-node-");
        // Its children (containerd's shims, and the gVisor sandboxes they start) inherit it,
        // so the tear-down finds them even if their parent is gone.
        std::fs::write(format!("{cgroup}/system/cgroup.procs"), pid.to_string())
            .with_context(|| format!("move {name} into {cgroup}/system"))?;
        self.children
            .lock()
            .map_err(|_| anyhow::anyhow!("poisoned"))?
            .push((name, child));
        Ok(())
    }

    /// Polls `check` until it is true, failing early (with the logs) when a part exits.
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
                bail!("{what} not ready after {START_DEADLINE:?}");
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The first part that exited, if any.
    fn exited(&self) -> Option<String> {
        let mut children = self.children.lock().ok()?;
        for (name, child) in children.iter_mut() {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(format!("{name} exited with {status}"));
            }
        }
        None
    }

    /// The last lines of every part's log, for a failed start.
    pub fn logs(&self) -> String {
        let mut out = String::new();
        for name in [
            "etcd",
            "containerd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kubelet",
            "kube-proxy",
        ] {
            let text = std::fs::read_to_string(self.run.join(&format!("logs/{name}.log")))
                .unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            out.push_str(&format!(
                "--- {name}\n{}\n",
                lines[lines.len().saturating_sub(20)..].join("\n")
            ));
        }
        out
    }
}

static SHARED: OnceLock<std::result::Result<RealNode, String>> = OnceLock::new();

/// The node shared by the tests of one test binary, started on first use with `images`; `None`
/// (with a message naming `test`) when something it needs is missing and the run does not
/// [require](cluster::required) it. Panics when it is required but cannot start.
pub fn shared_or_skip(
    test: &str,
    images: impl FnOnce() -> Result<Vec<PathBuf>>,
) -> Option<&'static RealNode> {
    if let Err(missing) = NodeBinaries::find() {
        if cluster::required() {
            panic!("{test}: a real node is required (CI is set): {missing:#}");
        }
        eprintln!("skipping {test}: {missing:#}");
        return None;
    }
    let shared = SHARED.get_or_init(|| {
        images()
            .and_then(|images| RealNode::start(&images))
            .map_err(|e| format!("{e:#}"))
    });
    match shared {
        Ok(node) => Some(node),
        Err(e) => panic!("{test}: the real node did not start: {e}"),
    }
}

/// Makes the run's cgroup (and its `system` child, for the node's own processes) in every v1
/// hierarchy: the kubelet's `cgroupRoot` must exist everywhere, and a new cpuset needs its
/// CPUs and memory nodes before a task can join.
fn make_cgroups(name: &str) -> Result<()> {
    for entry in std::fs::read_dir("/sys/fs/cgroup").context("read /sys/fs/cgroup")? {
        let hierarchy = entry?.path();
        if hierarchy.file_name().is_some_and(|n| n == "unified") || !hierarchy.is_dir() {
            continue;
        }
        for dir in [hierarchy.join(name), hierarchy.join(name).join("system")] {
            std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
            for file in ["cpuset.cpus", "cpuset.mems"] {
                let parent = dir.parent().map(|p| p.join(file));
                if let Some(parent) = parent.filter(|p| p.is_file()) {
                    let value = std::fs::read_to_string(&parent)?;
                    std::fs::write(dir.join(file), value.trim())
                        .with_context(|| format!("write {}", dir.join(file).display()))?;
                }
            }
        }
    }
    Ok(())
}

fn random_id() -> Result<String> {
    let mut bytes = [0u8; 3];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("random bytes: {e}"))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn which(program: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}
