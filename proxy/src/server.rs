//! The proxy's lifecycle: bind the listeners, feed the routing table, hot-reload the config,
//! and drain on shutdown (stop accepting, let in-flight work finish up to `drain.timeout`, then
//! close what is left).

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::{Config, ConfigError};
use crate::directory::Directory;
use crate::metrics as m;
use crate::route::Router;

/// How long connections get to close after the drain deadline forced them.
const HARD_STOP_GRACE: Duration = Duration::from_secs(5);

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A listener could not be bound.
    #[error("cannot listen on {addr} for {listener}: {source}")]
    Bind {
        /// Which listener (`http`, `admin`, ...).
        listener: &'static str,
        /// The address.
        addr: SocketAddr,
        /// What failed.
        source: std::io::Error,
    },
    /// The HTTPS, TLS passthrough or static TCP listeners could not start.
    #[error(transparent)]
    Listeners(#[from] crate::l4::ListenersError),
}

impl ServerError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            ServerError::Config(_) => "config",
            ServerError::Bind { .. } => "bind",
            ServerError::Listeners(err) => err.metric_label(),
        }
    }
}

/// The addresses the listeners are bound to (the actual ports when the config said `:0`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BoundAddrs {
    /// The plain HTTP listener.
    pub http: Option<SocketAddr>,
    /// The HTTPS listener.
    pub https: Option<SocketAddr>,
    /// The TLS passthrough listener.
    pub tls_passthrough: Option<SocketAddr>,
    /// The static TCP listeners, in config order.
    pub tcp: Vec<SocketAddr>,
    /// The admin listener.
    pub admin: Option<SocketAddr>,
}

/// A running proxy.
#[derive(Debug)]
pub struct Proxy {
    router: Router,
    addrs: BoundAddrs,
}

async fn bind(listener: &'static str, addr: SocketAddr) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Bind {
            listener,
            addr,
            source,
        })
}

impl Proxy {
    /// Binds every configured listener, starts following the directory and serves.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
    /// use rouse_proxy::{Config, Proxy, StaticDirectory};
    ///
    /// let config = Config::from_toml("[http]\nlisten = \"127.0.0.1:0\"\n[directory]\nkind = \"static\"\n")?;
    /// let directory = StaticDirectory::new(&config.directory.routes);
    /// let proxy = Proxy::start(config, directory).await?;
    /// println!("serving on {:?}", proxy.addrs().http);
    /// proxy.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn start(config: Config, directory: impl Directory) -> Result<Self, ServerError> {
        crate::metrics::install_recorder();
        let http = match config.http.listen {
            Some(addr) => Some(bind("http", addr).await?),
            None => None,
        };
        let admin = match config.admin.listen {
            Some(addr) => Some(bind("admin", addr).await?),
            None => None,
        };
        let l4 = crate::l4::Listeners::bind(&config).await?;
        let router = Router::new(config, directory)?;
        let mut addrs = BoundAddrs::default();
        router.start_updates();
        let l4_addrs = l4.addrs();
        (addrs.https, addrs.tls_passthrough, addrs.tcp) =
            (l4_addrs.https, l4_addrs.tls_passthrough, l4_addrs.tcp);
        // One pooled upstream client for the HTTP and HTTPS listeners: owned by them, not by
        // the router it dials through.
        let client = std::sync::Arc::new(crate::l7::UpstreamClient::new(router.clone()));
        l4.spawn(&router, &client);
        if let Some(listener) = http {
            addrs.http = listener.local_addr().ok();
            router
                .tasks()
                .spawn(crate::l7::accept_loop(router.clone(), client, listener));
        }
        if let Some(listener) = admin {
            addrs.admin = listener.local_addr().ok();
            router
                .background_tasks()
                .spawn(crate::admin::accept_loop(router.clone(), listener));
        }
        for (listener, addr) in [
            ("http", addrs.http),
            ("https", addrs.https),
            ("tls_passthrough", addrs.tls_passthrough),
            ("admin", addrs.admin),
        ]
        .into_iter()
        .chain(addrs.tcp.iter().map(|a| ("tcp", Some(*a))))
        {
            if let Some(addr) = addr {
                tracing::info!(listener, listener.addr = %addr, "listening");
            }
        }
        Ok(Self { router, addrs })
    }

    /// The shared router (for listeners added on top, and for tests).
    pub fn router(&self) -> &Router {
        &self.router
    }

    /// Where the listeners are bound.
    pub fn addrs(&self) -> &BoundAddrs {
        &self.addrs
    }

    /// The config in force.
    pub fn config(&self) -> std::sync::Arc<Config> {
        self.router.config()
    }

    /// Puts a new config in force atomically. Listener addresses are bound at start only; a
    /// change to them is logged and takes effect at the next start.
    pub fn reload(&self, config: Config) -> Result<(), ConfigError> {
        let old = self.router.config();
        let listeners_changed = old.http.listen != config.http.listen
            || old.https.listen != config.https.listen
            || old.tls_passthrough.listen != config.tls_passthrough.listen
            || old.admin.listen != config.admin.listen
            || old.tcp != config.tcp;
        let result = self.router.reload(config);
        let label = if result.is_ok() { "ok" } else { "error" };
        metrics::counter!(m::CONFIG_RELOADS_TOTAL, "result" => label).increment(1);
        if result.is_ok() && listeners_changed {
            tracing::warn!("listener addresses changed; they apply at the next start");
        }
        result
    }

    /// Reads, validates and puts in force a config file; on any error the old config stays
    /// and the error names every bad key.
    pub fn reload_file(&self, path: &Path) -> Result<(), ConfigError> {
        match Config::from_file(path) {
            Ok(config) => self.reload(config),
            Err(err) => {
                metrics::counter!(m::CONFIG_RELOADS_TOTAL, "result" => "error").increment(1);
                Err(err)
            }
        }
    }

    /// Drains and stops: stop accepting, let in-flight work finish up to `drain.timeout`, close
    /// what is left, stop background work.
    pub async fn shutdown(self) {
        let drain = self.router.config().drain.timeout;
        let tasks = self.router.tasks();
        tracing::info!(drain.timeout_ms = drain.as_millis() as u64, "draining");
        self.router.start_drain();
        tasks.close();
        if tokio::time::timeout(drain, tasks.wait()).await.is_err() {
            tracing::warn!(
                connections = tasks.len(),
                "drain deadline passed; closing open connections"
            );
            self.router.stop_now();
            let _ = tokio::time::timeout(HARD_STOP_GRACE, tasks.wait()).await;
        }
        self.router.stop_now();
        self.router.stop_background().await;
        tracing::info!("proxy stopped");
    }
}

/// Runs a proxy until `shutdown` is cancelled, then drains it.
pub async fn run(
    config: Config,
    directory: impl Directory,
    shutdown: CancellationToken,
) -> Result<(), ServerError> {
    let proxy = Proxy::start(config, directory).await?;
    shutdown.cancelled().await;
    proxy.shutdown().await;
    Ok(())
}
