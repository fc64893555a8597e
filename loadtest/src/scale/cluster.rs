//! The scale benchmark's cluster: the test control plane of `rouse_testsupport::cluster`
//! (etcd, kube-apiserver, kube-controller-manager), kube-scheduler, kube-controller-manager's
//! node lifecycle controller, and kwok playing `nodes` nodes with its own stages, so that pods
//! are scheduled and turn Running and Ready as a kubelet would report them. Each controller's
//! CRDs and RBAC are installed before its run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use k8s_openapi::api::core::v1::{Namespace, Node, NodeSpec, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleRef, Subject};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{ObjectMeta, PostParams};
use kube::{Api, Client};
use rouse_testsupport::cluster::{self, ControlPlane, SYSTEM_NAMESPACE};
use rouse_testsupport::upstream::{self, KWOK_ANNOTATION, Programs, Supervised};

/// How long the nodes may take to turn Ready and schedulable.
const NODES_DEADLINE: Duration = Duration::from_secs(300);

/// Upstream's namespace and ServiceAccount (its `k8s/controller.yaml`).
pub const UPSTREAM_NAMESPACE: &str = "agent-sandbox-system";
const UPSTREAM_ACCOUNT: &str = "agent-sandbox-controller";

/// Everything the benchmark needs from the disk, found before anything starts.
#[derive(Debug, Clone)]
pub struct Binaries {
    /// What `testsupport/upstream/build.sh` builds.
    pub upstream: Programs,
    /// Upstream's CRDs and RBAC (`build.sh --print upstream-manifests`).
    pub upstream_manifests: PathBuf,
    /// The `rouse` binary.
    pub rouse: PathBuf,
}

impl Binaries {
    /// Finds the programs, or says which is missing and how to build it.
    pub fn find(rouse: PathBuf) -> Result<Self> {
        cluster::Binaries::find()?;
        upstream::scheduler()?;
        let paths = Programs::paths();
        let manifests = paths.controller.with_file_name("manifests.yaml");
        for path in [
            &paths.controller,
            &paths.kwok,
            &paths.kwok_stages,
            &manifests,
        ] {
            if !path.is_file() {
                bail!(
                    "{} missing (build it with testsupport/upstream/build.sh)",
                    path.display()
                );
            }
        }
        if !rouse.is_file() {
            bail!(
                "{} missing (cargo build --release -p rouse, or pass --rouse)",
                rouse.display()
            );
        }
        Ok(Self {
            upstream: paths,
            upstream_manifests: manifests,
            rouse,
        })
    }
}

/// A running cluster; everything stops when it is dropped.
pub struct Cluster {
    /// A cluster admin client (the benchmark's own requests).
    pub client: Client,
    /// The control plane (its kubeconfig, and the ServiceAccount kubeconfigs).
    pub plane: ControlPlane,
    /// Where the parts log.
    pub dir: tempfile::TempDir,
    parts: Vec<Supervised>,
}

impl Cluster {
    /// Starts the control plane, the scheduler, the node lifecycle controller and kwok, and
    /// waits until `nodes` kwok nodes are Ready and schedulable.
    pub async fn start(programs: &Binaries, nodes: usize) -> Result<Self> {
        let plane = tokio::task::spawn_blocking(ControlPlane::start)
            .await
            .context("start thread")??;
        let client = plane.client().await?;
        let dir = tempfile::Builder::new()
            .prefix("rouse-scale-")
            .tempdir()
            .context("temporary directory")?;
        let admin = plane.kubeconfig();
        let parts = vec![
            upstream::start_scheduler(admin, dir.path())?,
            upstream::start_node_controllers(admin, dir.path())?,
            upstream::start_kwok(&programs.upstream, admin, dir.path())?,
        ];
        let mut cluster = Self {
            client,
            plane,
            dir,
            parts,
        };
        cluster.create_nodes(nodes).await?;
        cluster.wait_nodes(nodes).await?;
        Ok(cluster)
    }

    /// Creates `count` nodes `kwok-<i>` for kwok to play (it fills in their status).
    async fn create_nodes(&self, count: usize) -> Result<()> {
        let api: Api<Node> = Api::all(self.client.clone());
        for i in 0..count {
            let name = format!("kwok-{i}");
            let node = Node {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    annotations: Some(BTreeMap::from([(
                        KWOK_ANNOTATION.0.to_owned(),
                        KWOK_ANNOTATION.1.to_owned(),
                    )])),
                    labels: Some(BTreeMap::from([
                        ("type".to_owned(), "kwok".to_owned()),
                        ("kubernetes.io/hostname".to_owned(), name.clone()),
                    ])),
                    ..ObjectMeta::default()
                },
                spec: Some(NodeSpec::default()),
                status: None,
            };
            match api.create(&PostParams::default(), &node).await {
                Ok(_) => {}
                Err(kube::Error::Api(s)) if s.is_already_exists() => {}
                Err(e) => return Err(e).with_context(|| format!("create node {name}")),
            }
        }
        Ok(())
    }

    /// Waits until `count` kwok nodes are Ready without the `not-ready` taint, failing early
    /// when a part exits.
    async fn wait_nodes(&mut self, count: usize) -> Result<()> {
        let api: Api<Node> = Api::all(self.client.clone());
        let end = Instant::now() + NODES_DEADLINE;
        loop {
            self.check_parts()?;
            let nodes = api.list(&Default::default()).await?;
            let ready = nodes
                .items
                .iter()
                .filter(|n| {
                    n.metadata
                        .name
                        .as_deref()
                        .is_some_and(|n| n.starts_with("kwok-"))
                })
                .filter(|n| {
                    let conditions = n.status.as_ref().and_then(|s| s.conditions.as_ref());
                    let ready = conditions.is_some_and(|c| {
                        c.iter().any(|c| c.type_ == "Ready" && c.status == "True")
                    });
                    let tainted = n
                        .spec
                        .as_ref()
                        .and_then(|s| s.taints.as_ref())
                        .is_some_and(|t| t.iter().any(|t| t.effect == "NoSchedule"));
                    ready && !tainted
                })
                .count();
            if ready >= count {
                return Ok(());
            }
            if Instant::now() > end {
                bail!(
                    "only {ready} of {count} kwok nodes Ready and schedulable after {NODES_DEADLINE:?}\n{}",
                    self.parts[2].log_tail(30)
                );
            }
            // A poll with a deadline: kwok's node stage and the lifecycle controller's taint
            // removal take a few seconds.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Fails naming the first part that exited.
    pub fn check_parts(&mut self) -> Result<()> {
        for part in &mut self.parts {
            if let Some(exited) = part.exited() {
                bail!("{exited}");
            }
        }
        Ok(())
    }

    /// Installs Rouse's CRDs and RBAC and writes the kubeconfig of its ServiceAccount.
    pub async fn install_rouse(&self) -> Result<PathBuf> {
        cluster::install(&self.client).await?;
        let path = self.dir.path().join("rouse-controller.kubeconfig");
        self.plane
            .write_service_account_kubeconfig(&path, SYSTEM_NAMESPACE, "rouse-controller")?;
        Ok(path)
    }

    /// Installs upstream's CRDs and RBAC (as its `k8s/` manifests: namespace, ServiceAccount,
    /// both ClusterRoleBindings) and writes the kubeconfig of its ServiceAccount.
    pub async fn install_upstream(&self, manifests: &Path) -> Result<PathBuf> {
        cluster::apply_file(&self.client, manifests).await?;
        let crds: Api<CustomResourceDefinition> = Api::all(self.client.clone());
        let names: Vec<String> = crds
            .list(&Default::default())
            .await?
            .items
            .into_iter()
            .filter_map(|c| c.metadata.name)
            .filter(|n| n.ends_with("agents.x-k8s.io"))
            .collect();
        cluster::wait_established(&self.client, &names).await?;
        create(
            Api::<Namespace>::all(self.client.clone()),
            Namespace {
                metadata: named(UPSTREAM_NAMESPACE, None),
                ..Namespace::default()
            },
        )
        .await?;
        create(
            Api::<ServiceAccount>::namespaced(self.client.clone(), UPSTREAM_NAMESPACE),
            ServiceAccount {
                metadata: named(UPSTREAM_ACCOUNT, Some(UPSTREAM_NAMESPACE)),
                ..ServiceAccount::default()
            },
        )
        .await?;
        for role in [
            "agent-sandbox-controller",
            "agent-sandbox-controller-extensions",
        ] {
            let binding = ClusterRoleBinding {
                metadata: named(role, None),
                role_ref: RoleRef {
                    api_group: "rbac.authorization.k8s.io".into(),
                    kind: "ClusterRole".into(),
                    name: role.into(),
                },
                subjects: Some(vec![Subject {
                    kind: "ServiceAccount".into(),
                    name: UPSTREAM_ACCOUNT.into(),
                    namespace: Some(UPSTREAM_NAMESPACE.into()),
                    ..Subject::default()
                }]),
            };
            create(Api::all(self.client.clone()), binding).await?;
        }
        let path = self.dir.path().join("upstream-controller.kubeconfig");
        self.plane
            .write_service_account_kubeconfig(&path, UPSTREAM_NAMESPACE, UPSTREAM_ACCOUNT)?;
        Ok(path)
    }
}

fn named(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        ..ObjectMeta::default()
    }
}

/// Creates `object` unless it exists.
async fn create<K>(api: Api<K>, object: K) -> Result<()>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + serde::Serialize + std::fmt::Debug,
{
    match api.create(&PostParams::default(), &object).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(s)) if s.is_already_exists() => Ok(()),
        Err(e) => Err(e).with_context(|| format!("create {:?}", object.meta().name)),
    }
}
