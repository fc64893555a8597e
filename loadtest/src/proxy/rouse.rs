//! Rouse under test: the proxy started in-process on its own one-thread runtime, fed by a
//! directory whose wake starts a backend, so wake latency can be split into the backend's own
//! start time and the proxy's overhead.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context;
use futures::future::{BoxFuture, FutureExt};
use futures::stream::BoxStream;
use rouse_proxy::directory::{ActivityReport, Endpoint, PortMapping};
use rouse_proxy::{Config, Directory, Proxy, RouteState, RouteUpdate, SandboxKey, StaticDirectory};

use super::backend;

/// The routes of a benchmark run; waking a sandbox starts an HTTP backend for it.
#[derive(Clone)]
pub struct BenchDirectory {
    routes: StaticDirectory,
    /// Per woken sandbox: when the wake arrived and when its backend was up and routed.
    pub wakes: Arc<Mutex<Vec<(SandboxKey, Instant, Instant)>>>,
}

impl BenchDirectory {
    /// An empty directory.
    pub fn new() -> Self {
        Self {
            routes: StaticDirectory::new(&[]),
            wakes: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Routes `key` to `addr` (container port 80).
    pub fn running(&self, key: SandboxKey, addr: SocketAddr) {
        self.routes.set(key, running_state(addr));
    }

    /// Marks `key` suspended (wake on connect).
    pub fn suspended(&self, key: SandboxKey) {
        self.routes.set(key, RouteState::suspended(true));
    }
}

impl Default for BenchDirectory {
    fn default() -> Self {
        Self::new()
    }
}

fn running_state(addr: SocketAddr) -> RouteState {
    RouteState::Running {
        endpoint: Endpoint {
            address: addr.ip().to_string(),
            ports: vec![PortMapping {
                container_port: 80,
                port: addr.port(),
            }],
        },
    }
}

impl Directory for BenchDirectory {
    fn updates(&self) -> BoxStream<'static, RouteUpdate> {
        self.routes.updates()
    }

    fn wake(&self, key: &SandboxKey) -> BoxFuture<'static, rouse_proxy::directory::Result<()>> {
        let woken = Instant::now();
        let this = self.clone();
        let key = key.clone();
        async move {
            // The sandbox's "start": bind and serve a backend, then publish its address.
            let started = async {
                let (listener, addr) = backend::bind_local().await?;
                tokio::spawn(backend::serve_http(listener));
                anyhow::Ok(addr)
            }
            .await;
            if let Ok(addr) = started {
                this.routes.set(key.clone(), running_state(addr));
                let ready = Instant::now();
                if let Ok(mut wakes) = this.wakes.lock() {
                    wakes.push((key, woken, ready));
                }
            }
            Ok(())
        }
        .boxed()
    }

    fn report_activity(
        &self,
        key: &SandboxKey,
        report: ActivityReport,
    ) -> BoxFuture<'static, rouse_proxy::directory::Result<()>> {
        self.routes.report_activity(key, report)
    }
}

/// The proxy config of the benchmarks: generous limits, no idle timeouts.
pub fn bench_config(tcp_target: Option<&str>, admin: bool) -> anyhow::Result<Config> {
    let tcp = tcp_target
        .map(|sandbox| {
            format!("[[tcp]]\nlisten = \"127.0.0.1:0\"\nsandbox = \"{sandbox}\"\nport = 80\n")
        })
        .unwrap_or_default();
    let admin = if admin { "127.0.0.1:0" } else { "off" };
    let text = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n\
         [admin]\nlisten = \"{admin}\"\n\
         [limits]\nmax_connections = 0\nmax_connections_per_ip = 0\nidle_timeout = \"off\"\nheader_read_timeout = \"10m\"\n\
         [wake]\ndeadline = \"10m\"\nmax_held_per_sandbox = 1000000\nmax_held_total = 1000000\n\
         {tcp}"
    );
    Config::from_toml(&text).context("benchmark proxy config")
}

/// A proxy running on its own runtime thread.
pub struct RunningProxy {
    runtime: tokio::runtime::Runtime,
    proxy: Option<Proxy>,
}

impl RunningProxy {
    /// Starts the proxy on a new one-worker runtime.
    pub fn start(config: Config, directory: impl Directory) -> anyhow::Result<Self> {
        Self::start_with_workers(config, directory, 1)
    }

    /// Starts the proxy on a new runtime with `workers` worker threads.
    pub fn start_with_workers(
        config: Config,
        directory: impl Directory,
        workers: usize,
    ) -> anyhow::Result<Self> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers.max(1))
            .thread_name("rouse-proxy")
            .enable_all()
            .build()?;
        let proxy = runtime.block_on(Proxy::start(config, directory))?;
        Ok(Self {
            runtime,
            proxy: Some(proxy),
        })
    }

    /// The running proxy.
    pub fn proxy(&self) -> &Proxy {
        self.proxy.as_ref().expect("present until dropped")
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        if let Some(proxy) = self.proxy.take() {
            self.runtime.block_on(proxy.shutdown());
        }
    }
}
