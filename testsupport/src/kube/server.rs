//! The fake Kubernetes API server: a plain-HTTP listener on 127.0.0.1 that the real
//! `kube::Client` (and kube-runtime's watcher, controller and leases) talks to, plus direct
//! accessors and request counters for test assertions.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::Value;
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

use super::delete::{DeleteOptions, Deleted};
use super::handler;
use super::patch::PatchKind;
use super::registry::{self, ResourceType};
use super::status::ApiError;
use super::storage::Storage;
use super::write::Part;

/// State shared by the connections of one server.
pub(crate) struct ServerState {
    pub(crate) storage: Arc<Storage>,
    pub(crate) bookmark_interval: Duration,
    counts: Mutex<BTreeMap<(String, String), u64>>,
    faults: Mutex<Vec<Fault>>,
}

/// A failure a test asked for: the next `remaining` requests of `verb` on `resource` get
/// `code`.
struct Fault {
    verb: String,
    resource: String,
    code: u16,
    remaining: usize,
}

impl ServerState {
    /// Counts one request of `verb` on `resource` (`pods`, `sandboxes/status`) and fails it
    /// if a test injected a failure for it.
    pub(crate) fn admit(&self, verb: &str, resource: &str) -> Result<(), ApiError> {
        {
            let mut counts = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            *counts
                .entry((verb.to_owned(), resource.to_owned()))
                .or_default() += 1;
        }
        let mut faults = self.faults.lock().unwrap_or_else(|e| e.into_inner());
        let hit = faults
            .iter_mut()
            .find(|f| f.verb == verb && f.resource == resource && f.remaining > 0);
        let Some(fault) = hit else {
            return Ok(());
        };
        fault.remaining -= 1;
        let error = ApiError::injected(fault.code);
        faults.retain(|f| f.remaining > 0);
        Err(error)
    }
}

/// Requests served so far, by verb and resource.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestCounts {
    counts: BTreeMap<(String, String), u64>,
}

impl RequestCounts {
    /// Requests of `verb` (`get`, `list`, `watch`, `create`, `update`, `patch`, `apply`,
    /// `delete`, `deletecollection`) on `resource` (`pods`, `sandboxes/status`, ...).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        self.counts
            .get(&(verb.to_owned(), resource.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// All requests of `verb`, on any resource.
    pub fn verb(&self, verb: &str) -> u64 {
        self.counts
            .iter()
            .filter(|((v, _), _)| v == verb)
            .map(|(_, n)| n)
            .sum()
    }

    /// Every (verb, resource, count), sorted.
    pub fn all(&self) -> impl Iterator<Item = (&str, &str, u64)> {
        self.counts
            .iter()
            .map(|((v, r), n)| (v.as_str(), r.as_str(), *n))
    }
}

/// Builds a [`FakeApiServer`] with non-default limits.
#[derive(Debug, Clone)]
pub struct FakeApiServerBuilder {
    history_limit: usize,
    bookmark_interval: Duration,
}

impl Default for FakeApiServerBuilder {
    fn default() -> Self {
        Self {
            history_limit: 10_000,
            bookmark_interval: Duration::from_secs(5),
        }
    }
}

impl FakeApiServerBuilder {
    /// Watch events kept per resource (default 10 000); a watch from an older version gets
    /// 410 Gone.
    pub fn history_limit(mut self, events: usize) -> Self {
        self.history_limit = events.max(1);
        self
    }

    /// How long a watch with `allowWatchBookmarks` stays quiet before a BOOKMARK (default 5 s).
    pub fn bookmark_interval(mut self, interval: Duration) -> Self {
        self.bookmark_interval = interval;
        self
    }

    /// Binds 127.0.0.1 on a free port and starts serving.
    pub async fn start(self) -> io::Result<FakeApiServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(ServerState {
            storage: Arc::new(Storage::new(self.history_limit)),
            bookmark_interval: self.bookmark_interval,
            counts: Mutex::new(BTreeMap::new()),
            faults: Mutex::new(Vec::new()),
        });
        let task = tokio::spawn(serve(listener, state.clone()));
        Ok(FakeApiServer { addr, state, task })
    }
}

async fn serve(listener: TcpListener, state: Arc<ServerState>) {
    // Dropping this set (when the server is dropped and this task aborted) closes every
    // connection, watches included.
    let mut connections = JoinSet::new();
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
        };
        let stream = match accepted {
            Ok((stream, _)) => stream,
            Err(error) => {
                tracing::debug!(%error, "fake api server: accept failed");
                continue;
            }
        };
        let state = state.clone();
        connections.spawn(async move {
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, std::convert::Infallible>(handler::handle(state, request).await) }
            });
            let builder = auto::Builder::new(TokioExecutor::new());
            if let Err(error) = builder.serve_connection(TokioIo::new(stream), service).await {
                tracing::debug!(%error, "fake api server: connection ended with an error");
            }
        });
    }
}

/// An in-process fake Kubernetes API server for tests; stops when dropped.
///
/// # Example
/// ```no_run
/// # async fn example() -> anyhow::Result<()> {
/// use k8s_openapi::api::core::v1::ConfigMap;
/// use rouse_testsupport::kube::FakeApiServer;
///
/// let server = FakeApiServer::start().await?;
/// let configmaps: kube::Api<ConfigMap> = kube::Api::default_namespaced(server.client()?);
/// assert!(configmaps.list(&Default::default()).await?.items.is_empty());
/// # Ok(())
/// # }
/// ```
pub struct FakeApiServer {
    addr: SocketAddr,
    state: Arc<ServerState>,
    task: JoinHandle<()>,
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The resource named `name` (`pods`, `sandboxes`, `events.events.k8s.io`).
///
/// # Panics
/// If the fake server does not serve it: a typo in a test must not read as "absent".
fn resource(name: &str) -> &'static ResourceType {
    match registry::by_name(name) {
        Some(rt) => rt,
        None => panic!(
            "the fake API server serves no resource {name:?}; served: {:?}",
            registry::RESOURCES
                .iter()
                .map(|r| r.qualified())
                .collect::<Vec<_>>()
        ),
    }
}

impl FakeApiServer {
    /// Starts a server with default limits on 127.0.0.1 and a free port.
    pub async fn start() -> io::Result<Self> {
        Self::builder().start().await
    }

    /// A builder for non-default limits.
    pub fn builder() -> FakeApiServerBuilder {
        FakeApiServerBuilder::default()
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its base URL, `http://127.0.0.1:{port}`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// A kube client configuration for it, with `default` as the default namespace.
    pub fn config(&self) -> kube::Config {
        let uri = http::Uri::try_from(self.url()).unwrap_or_else(|_| {
            // A socket address always forms a valid authority, so this arm is unreachable.
            http::Uri::from_static("http://127.0.0.1")
        });
        kube::Config::new(uri)
    }

    /// A real `kube::Client` talking to this server.
    pub fn client(&self) -> Result<kube::Client, kube::Error> {
        kube::Client::try_from(self.config())
    }

    /// Holds every watch event back by `delay` from its commit, so watches and caches lag
    /// behind reads and writes; `Duration::ZERO` turns it off.
    pub fn set_watch_delay(&self, delay: Duration) {
        self.state.storage.set_watch_delay(delay);
    }

    /// Answers the next `times` requests of `verb` on `resource` (same names as
    /// [`RequestCounts::count`]) with an error `Status` of HTTP `code` (e.g. 500, 503, 409),
    /// without performing them.
    pub fn fail_requests(&self, verb: &str, resource: &str, code: u16, times: usize) {
        let mut faults = self.state.faults.lock().unwrap_or_else(|e| e.into_inner());
        faults.push(Fault {
            verb: verb.to_owned(),
            resource: resource.to_owned(),
            code,
            remaining: times,
        });
    }

    /// Ends every open watch stream, as an API server restart or a load balancer would;
    /// clients watch again from their last version.
    pub fn end_watches(&self) {
        self.state.storage.end_watches();
    }

    /// Drops the watch history: any watch from a version before now gets 410 Gone.
    pub fn compact(&self) {
        self.state.storage.compact();
    }

    /// The current resourceVersion of the whole store.
    pub fn resource_version(&self) -> u64 {
        self.state.storage.resource_version()
    }

    /// Requests served so far, by verb and resource.
    pub fn requests(&self) -> RequestCounts {
        let counts = self.state.counts.lock().unwrap_or_else(|e| e.into_inner());
        RequestCounts {
            counts: counts.clone(),
        }
    }

    /// Forgets the request counts.
    pub fn reset_requests(&self) {
        self.state
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clear();
    }

    /// One stored object (`namespace` is ignored for cluster-scoped resources).
    ///
    /// # Panics
    /// If `resource` is not served.
    pub fn get(&self, resource_name: &str, namespace: &str, name: &str) -> Option<Value> {
        self.state
            .storage
            .get(resource(resource_name), namespace, name)
    }

    /// Every stored object of a resource, all namespaces, ordered by namespace and name.
    ///
    /// # Panics
    /// If `resource` is not served.
    pub fn list(&self, resource_name: &str) -> Vec<Value> {
        self.state
            .storage
            .list(resource(resource_name), None, |_| true)
            .0
    }

    /// Creates an object directly, with the same rules as a POST (for seeding tests).
    ///
    /// # Panics
    /// If `resource` is not served.
    pub fn create(
        &self,
        resource_name: &str,
        namespace: &str,
        object: Value,
    ) -> Result<Value, ApiError> {
        self.state
            .storage
            .create(resource(resource_name), namespace, object)
    }

    /// Applies a JSON merge patch directly (main resource, or its status when `status`), with
    /// the same rules as a PATCH request.
    ///
    /// # Panics
    /// If `resource` is not served.
    pub fn merge_patch(
        &self,
        resource_name: &str,
        namespace: &str,
        name: &str,
        patch: &Value,
        status: bool,
    ) -> Result<Value, ApiError> {
        let part = if status { Part::Status } else { Part::Main };
        let body = serde_json::to_vec(patch).map_err(|e| ApiError::internal(e.to_string()))?;
        self.state.storage.patch(
            resource(resource_name),
            namespace,
            name,
            PatchKind::Merge,
            &body,
            part,
        )
    }

    /// Deletes directly, with default options (background propagation, default grace period);
    /// returns the object's last state, or its state marked for deletion when finalizers or a
    /// grace period hold it.
    ///
    /// # Panics
    /// If `resource` is not served.
    pub fn delete(
        &self,
        resource_name: &str,
        namespace: &str,
        name: &str,
    ) -> Result<Value, ApiError> {
        let deleted = self.state.storage.delete(
            resource(resource_name),
            namespace,
            name,
            &DeleteOptions::default(),
        )?;
        Ok(match deleted {
            Deleted::Gone(object) | Deleted::Pending(object) => object,
        })
    }

    pub(crate) fn storage(&self) -> Arc<Storage> {
        self.state.storage.clone()
    }
}
