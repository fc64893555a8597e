//! A real Kubernetes control plane for integration tests: etcd, kube-apiserver and
//! kube-controller-manager (garbage collector, namespace and service account controllers) on
//! 127.0.0.1 ports, with generated certificates, torn down at the end.
//!
//! The two Kubernetes binaries are built by `testsupport/cluster/build.sh` from the release
//! pinned in `testsupport/cluster/go.mod` into a cache outside the repository; etcd is Debian's
//! `etcd-server`. No kubelet or scheduler runs: [`ClusterKubelet`] binds pods and writes their
//! status through the API server. See docs/testing.md.

mod apply;
pub(crate) mod certs;
mod kubelet;
mod process;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};

pub use apply::{apply, apply_dir, apply_file, wait_established, yaml_documents};
pub use kubelet::ClusterKubelet;
pub use process::ControlPlane;

/// The `go.mod` that pins the Kubernetes release.
const GO_MOD: &str = include_str!("../../cluster/go.mod");

/// How long a wait on the control plane (start, a namespace's service account) may take.
pub const START_DEADLINE: Duration = Duration::from_secs(180);

/// The `k8s.io/kubernetes` version pinned in `testsupport/cluster/go.mod`, e.g. `v1.35.4`.
pub fn kube_version() -> &'static str {
    GO_MOD
        .lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let first = fields.next()?;
            let module = if first == "require" {
                fields.next()?
            } else {
                first
            };
            (module == "k8s.io/kubernetes")
                .then(|| fields.next())
                .flatten()
        })
        .next()
        .unwrap_or("unknown")
}

/// The directory `build.sh` puts the binaries in: `$ROUSE_KUBE_BIN_DIR`, else
/// `$ROUSE_KUBE_CACHE/kube-<version>` (default cache `$XDG_CACHE_HOME/rouse` or
/// `~/.cache/rouse`).
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("ROUSE_KUBE_BIN_DIR") {
        return dir.into();
    }
    cache_dir().join(format!("kube-{}", kube_version()))
}

/// The cache the build scripts fill: `$ROUSE_KUBE_CACHE`, else `$XDG_CACHE_HOME/rouse`, else
/// `~/.cache/rouse`.
pub fn cache_dir() -> PathBuf {
    std::env::var_os("ROUSE_KUBE_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| Path::new(&d).join("rouse")))
        .or_else(|| std::env::var_os("HOME").map(|d| Path::new(&d).join(".cache/rouse")))
        .unwrap_or_else(|| PathBuf::from("/tmp/rouse-cache"))
}

/// The programs a control plane runs.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// `etcd` (`$ROUSE_ETCD`, else the first on `PATH`).
    pub etcd: PathBuf,
    /// `kube-apiserver`.
    pub apiserver: PathBuf,
    /// `kube-controller-manager`.
    pub controller_manager: PathBuf,
}

impl Binaries {
    /// Finds the binaries, or says which is missing and how to get it.
    pub fn find() -> Result<Self> {
        let etcd = match std::env::var_os("ROUSE_ETCD") {
            Some(path) => PathBuf::from(path),
            None => std::env::var_os("PATH")
                .iter()
                .flat_map(std::env::split_paths)
                .map(|dir| dir.join("etcd"))
                .find(|p| p.is_file())
                .context("etcd not found on PATH (install Debian's etcd-server)")?,
        };
        let dir = bin_dir();
        let apiserver = dir.join("kube-apiserver");
        let controller_manager = dir.join("kube-controller-manager");
        for binary in [&apiserver, &controller_manager] {
            if !binary.is_file() {
                bail!(
                    "{} missing (build it with testsupport/cluster/build.sh)",
                    binary.display()
                );
            }
        }
        Ok(Self {
            etcd,
            apiserver,
            controller_manager,
        })
    }
}

/// Whether this run must have a real control plane: under CI (`CI=true`) or when
/// `ROUSE_KUBE_REQUIRED=1`. Otherwise tests skip when the binaries are missing.
pub fn required() -> bool {
    let set = |name: &str| {
        std::env::var(name)
            .map(|v| !v.is_empty() && v != "0" && v != "false")
            .unwrap_or(false)
    };
    set("CI") || set("ROUSE_KUBE_REQUIRED")
}

static SHARED: OnceLock<std::result::Result<ControlPlane, String>> = OnceLock::new();

/// The control plane shared by the tests of one test binary, started on first use; `None`
/// (with a message naming `test`) when the binaries are missing and the run does not
/// [require](required) them. Panics when it is required but cannot start.
///
/// Its processes are stopped when the test process exits. Tests share it, so each works in
/// a namespace of its own ([`test_namespace`]).
pub fn shared_or_skip(test: &str) -> Option<&'static ControlPlane> {
    if let Err(missing) = Binaries::find() {
        if required() {
            panic!("{test}: a real control plane is required (CI is set): {missing:#}");
        }
        eprintln!("skipping {test}: {missing:#}");
        return None;
    }
    let shared = SHARED.get_or_init(|| ControlPlane::start().map_err(|e| format!("{e:#}")));
    match shared {
        Ok(plane) => Some(plane),
        Err(e) => panic!("{test}: the control plane did not start: {e}"),
    }
}

/// A client of `kubeconfig`, optionally impersonating `user` in `groups`.
pub async fn client_from(
    kubeconfig: &Path,
    impersonate: Option<(&str, &[&str])>,
) -> Result<Client> {
    let kubeconfig = Kubeconfig::read_from(kubeconfig)
        .with_context(|| format!("read {}", kubeconfig.display()))?;
    let mut config =
        Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    if let Some((user, groups)) = impersonate {
        config.auth_info.impersonate = Some(user.to_owned());
        config.auth_info.impersonate_groups =
            Some(groups.iter().map(|g| (*g).to_owned()).collect());
    }
    // Tests share one API server on a loaded machine: be patient.
    config.read_timeout = Some(Duration::from_secs(60));
    Ok(Client::try_from(config)?)
}

/// The user and groups a pod of ServiceAccount `namespace/name` authenticates as.
pub fn service_account_identity(namespace: &str, name: &str) -> (String, Vec<String>) {
    (
        format!("system:serviceaccount:{namespace}:{name}"),
        vec![
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{namespace}"),
            "system:authenticated".to_owned(),
        ],
    )
}

/// Creates namespace `rouse-<test>-<random>` (at most 63 characters) and waits for its
/// `default` ServiceAccount, without which the API server refuses pods. Returns its name.
pub async fn test_namespace(client: &Client, test: &str) -> Result<String> {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).map_err(|e| anyhow::anyhow!("random bytes: {e}"))?;
    let suffix = format!("{:08x}", u32::from_le_bytes(bytes));
    let prefix: String = format!("rouse-{}", test.replace('_', "-"))
        .chars()
        .take(63 - 9)
        .collect();
    let name = format!("{}-{suffix}", prefix.trim_end_matches('-'));
    create_namespace(client, &name).await?;
    Ok(name)
}

/// Creates namespace `name` if missing and waits for its `default` ServiceAccount.
pub async fn create_namespace(client: &Client, name: &str) -> Result<()> {
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        ..Namespace::default()
    };
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(s)) if s.is_already_exists() => {}
        Err(e) => return Err(e).with_context(|| format!("create namespace {name}")),
    }
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), name);
    let end = tokio::time::Instant::now() + START_DEADLINE;
    loop {
        if accounts.get_opt("default").await?.is_some() {
            return Ok(());
        }
        if tokio::time::Instant::now() >= end {
            bail!("namespace {name}: no default ServiceAccount after {START_DEADLINE:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The repository's `deploy/` directory.
pub fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy")
}

/// The namespace of the controller's and the proxy's ServiceAccounts in `deploy/kubernetes`.
pub const SYSTEM_NAMESPACE: &str = "rouse-system";

/// Installs what a user installs before running Rouse, with server-side apply: the CRDs of
/// `deploy/crds` (waiting until they are established), and the namespace, ServiceAccounts and
/// RBAC of `deploy/kubernetes`. Idempotent.
pub async fn install(client: &Client) -> Result<()> {
    let crds = deploy_dir().join("crds");
    apply_dir(client, &crds).await?;
    let mut names = Vec::new();
    for entry in std::fs::read_dir(&crds)? {
        let path = entry?.path();
        if let Some(name) = path.file_name().and_then(|n| n.to_str())
            && let Some(name) = name.strip_suffix(".yaml")
            && name != "kustomization"
        {
            names.push(name.to_owned());
        }
    }
    wait_established(client, &names).await?;
    let kubernetes = deploy_dir().join("kubernetes");
    for file in ["namespace.yaml", "controller-rbac.yaml", "proxy-rbac.yaml"] {
        apply_file(client, &kubernetes.join(file)).await?;
    }
    Ok(())
}

/// Installs a stand-in for the CSI snapshotter's `VolumeSnapshot` CRD
/// (`testsupport/cluster/volumesnapshot-crd.yaml`: the real group, version, kind and status
/// subresource, without its schema), so the `kube-csi` snapshot provider runs against a real
/// API server. A cluster that has the real CRD (a kind cluster with the snapshotter) keeps it.
pub async fn install_volume_snapshots(client: &Client) -> Result<()> {
    let name = "volumesnapshots.snapshot.storage.k8s.io";
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    if crds.get_opt(name).await?.is_none() {
        let crd = Path::new(env!("CARGO_MANIFEST_DIR")).join("cluster/volumesnapshot-crd.yaml");
        apply_file(client, &crd).await?;
    }
    wait_established(client, &[name.to_owned()]).await
}

/// The helm `build.sh` installs: `$ROUSE_HELM`, else `<cache>/helm-<version>/helm`.
pub fn helm_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("ROUSE_HELM") {
        return Ok(path.into());
    }
    let version = include_str!("../../cluster/build.sh")
        .lines()
        .find_map(|l| l.strip_prefix("helm_version="))
        .context("no helm_version= line in testsupport/cluster/build.sh")?;
    let helm = bin_dir()
        .parent()
        .map(|cache| cache.join(format!("helm-{version}/helm")))
        .context("no cache directory")?;
    if !helm.is_file() {
        bail!(
            "{} missing (install it with testsupport/cluster/build.sh)",
            helm.display()
        );
    }
    Ok(helm)
}
