//! Binding and starting the listeners beyond plain HTTP: HTTPS, TLS passthrough and the static
//! TCP listeners, plus the certificate reload task. The server binds them with the rest of its
//! listeners ([`Listeners::bind`]) and starts them on the router's task tracker
//! ([`Listeners::spawn`]); they stop accepting on the router's drain signal.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::config::{CertificateConfig, Config};
use crate::l7::UpstreamClient;
use crate::route::{RouteTarget, Router};
use crate::tls::{self, CertSource, CertStore, TlsError};

/// How often certificate files are checked for changes.
pub const CERT_RELOAD_INTERVAL: Duration = Duration::from_secs(5);

/// Why the extra listeners could not start.
#[derive(Debug, thiserror::Error)]
pub enum ListenersError {
    /// A listen address could not be bound.
    #[error("binding the {listener} listener to {addr}: {source}")]
    Bind {
        /// Which listener (`https`, `tls_passthrough`, `tcp`).
        listener: &'static str,
        /// The address.
        addr: SocketAddr,
        /// The bind error.
        #[source]
        source: io::Error,
    },
    /// The HTTPS certificates could not be loaded.
    #[error("https: {0}")]
    Tls(#[from] TlsError),
}

impl ListenersError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::Bind { .. } => "bind",
            Self::Tls(err) => err.metric_label(),
        }
    }
}

/// The addresses the extra listeners are bound to (useful with port 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListenerAddrs {
    /// The HTTPS listener.
    pub https: Option<SocketAddr>,
    /// The TLS passthrough listener.
    pub tls_passthrough: Option<SocketAddr>,
    /// The static TCP listeners, in config order.
    pub tcp: Vec<SocketAddr>,
}

/// Bound but not yet serving: HTTPS, TLS passthrough and static TCP listeners.
pub struct Listeners {
    https: Option<(TcpListener, Arc<CertStore>, Arc<TlsAcceptor>)>,
    passthrough: Option<TcpListener>,
    tcp: Vec<(TcpListener, RouteTarget)>,
}

impl std::fmt::Debug for Listeners {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listeners")
            .field("addrs", &self.addrs())
            .finish_non_exhaustive()
    }
}

fn sources(certificates: &[CertificateConfig]) -> Vec<CertSource> {
    certificates
        .iter()
        .map(|c| CertSource {
            cert: c.cert.clone(),
            key: c.key.clone(),
        })
        .collect()
}

async fn bind(listener: &'static str, addr: SocketAddr) -> Result<TcpListener, ListenersError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ListenersError::Bind {
            listener,
            addr,
            source,
        })
}

impl Listeners {
    /// Binds every listener `config` enables and loads the HTTPS certificates.
    pub async fn bind(config: &Config) -> Result<Self, ListenersError> {
        let https = match config.https.listen {
            Some(addr) => {
                let store = Arc::new(CertStore::load(sources(&config.https.certificates))?);
                let acceptor = Arc::new(TlsAcceptor::from(tls::server_config(Arc::clone(&store))?));
                Some((bind("https", addr).await?, store, acceptor))
            }
            None => None,
        };
        let passthrough = match config.tls_passthrough.listen {
            Some(addr) => Some(bind("tls_passthrough", addr).await?),
            None => None,
        };
        let mut tcp = Vec::with_capacity(config.tcp.len());
        for entry in &config.tcp {
            let target = RouteTarget {
                key: entry.sandbox.clone(),
                port: entry.port,
            };
            tcp.push((bind("tcp", entry.listen).await?, target));
        }
        Ok(Self {
            https,
            passthrough,
            tcp,
        })
    }

    /// The bound addresses.
    pub fn addrs(&self) -> ListenerAddrs {
        ListenerAddrs {
            https: self.https.as_ref().and_then(|(l, ..)| l.local_addr().ok()),
            tls_passthrough: self.passthrough.as_ref().and_then(|l| l.local_addr().ok()),
            tcp: self
                .tcp
                .iter()
                .filter_map(|(l, _)| l.local_addr().ok())
                .collect(),
        }
    }

    /// Starts every listener, and the certificate reload, on the router's task tracker; HTTPS
    /// requests go upstream through `client`.
    pub fn spawn(self, router: &Router, client: &Arc<UpstreamClient>) {
        let tasks = router.tasks();
        if let Some((listener, store, acceptor)) = self.https {
            let config_router = router.clone();
            router.background_tasks().spawn(store.watch(
                CERT_RELOAD_INTERVAL,
                router.background_stop(),
                move || sources(&config_router.config().https.certificates),
            ));
            tasks.spawn(tls::serve(
                router.clone(),
                Arc::clone(client),
                listener,
                acceptor,
            ));
        }
        if let Some(listener) = self.passthrough {
            tasks.spawn(super::passthrough::serve(router.clone(), listener));
        }
        for (listener, target) in self.tcp {
            tasks.spawn(super::tcp::serve(router.clone(), listener, target));
        }
    }
}
