//! The certificate store: picks a certificate by SNI and reloads the files when they change.
//!
//! Names come from each leaf certificate's DNS subject alternative names. Lookup order: the
//! exact name, then a wildcard `*.parent` for the name's parent domain (one label, RFC 6125),
//! then the default — the first configured certificate, also used without SNI. When two
//! certificates claim a name, the one configured first wins. A reload builds a whole new set
//! and swaps it in; if any file fails, the old set stays and the error is logged and counted.

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_util::sync::CancellationToken;

use super::TlsError;

#[cfg(test)]
mod tests;

/// One certificate chain and its key, as PEM files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertSource {
    /// PEM file with the leaf certificate first, then any intermediates.
    pub cert: PathBuf,
    /// PEM file with the private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
}

/// Certificates by name, ready for handshakes.
struct CertSet {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// Keyed by the parent domain: `*.example.com` is stored under `example.com`.
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Arc<CertifiedKey>,
}

impl CertSet {
    fn pick(&self, sni: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = sni else {
            return self.default.clone();
        };
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if let Some(key) = self.exact.get(&name) {
            return key.clone();
        }
        name.split_once('.')
            .and_then(|(_, parent)| self.wildcard.get(parent))
            .unwrap_or(&self.default)
            .clone()
    }
}

/// What identifies a file's version: a replaced or rewritten file changes at least one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct FileStamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

fn stamp(path: &Path) -> Option<FileStamp> {
    let meta = std::fs::metadata(path).ok()?;
    Some(FileStamp {
        modified: meta.modified().ok(),
        len: meta.len(),
        inode: meta.ino(),
    })
}

struct State {
    sources: Vec<CertSource>,
    set: Arc<CertSet>,
    /// Stamps of the files as last attempted (loaded or failed), so a bad file is reported
    /// once per change rather than once per poll.
    stamps: Vec<Option<FileStamp>>,
}

/// Server certificates chosen by SNI, reloadable; rustls calls it on every handshake.
pub struct CertStore {
    provider: Arc<CryptoProvider>,
    state: RwLock<State>,
}

impl fmt::Debug for CertStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CertStore").finish_non_exhaustive()
    }
}

impl CertStore {
    /// Loads every source; fails on the first that cannot be loaded.
    pub fn load(sources: Vec<CertSource>) -> Result<Self, TlsError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamps = stamps(&sources);
        let set = Arc::new(build_set(&sources, &provider)?);
        Ok(Self {
            provider,
            state: RwLock::new(State {
                sources,
                set,
                stamps,
            }),
        })
    }

    /// Replaces the sources (after a config change) and loads them; on error the old
    /// certificates stay in force.
    pub fn set_sources(&self, sources: Vec<CertSource>) -> Result<(), TlsError> {
        let stamps = stamps(&sources);
        let set = Arc::new(build_set(&sources, &self.provider)?);
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        *state = State {
            sources,
            set,
            stamps,
        };
        Ok(())
    }

    /// Reloads the certificates if any file changed since the last attempt. Returns whether a
    /// new set was loaded; a failed reload keeps the old set, logs and counts the error.
    pub fn reload_if_changed(&self) -> Result<bool, TlsError> {
        let (sources, old) = {
            let state = self.state.read().unwrap_or_else(|e| e.into_inner());
            (state.sources.clone(), state.stamps.clone())
        };
        let now = stamps(&sources);
        if now == old {
            return Ok(false);
        }
        let result = build_set(&sources, &self.provider);
        let mut state = self.state.write().unwrap_or_else(|e| e.into_inner());
        if state.sources != sources {
            // The sources were replaced meanwhile; that load wins.
            return Ok(false);
        }
        state.stamps = now;
        match result {
            Ok(set) => {
                state.set = Arc::new(set);
                metrics::counter!("rouse_proxy_tls_cert_reloads_total", "result" => "ok")
                    .increment(1);
                tracing::info!(certificates = sources.len(), "reloaded tls certificates");
                Ok(true)
            }
            Err(err) => {
                metrics::counter!("rouse_proxy_tls_cert_reloads_total", "result" => "error")
                    .increment(1);
                tracing::error!(error = %err, "tls certificate reload failed; keeping the old certificates");
                Err(err)
            }
        }
    }

    /// The sources in force.
    pub fn sources(&self) -> Vec<CertSource> {
        self.state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .sources
            .clone()
    }

    /// Every `interval` until `shutdown`: switches to `wanted()` when the configured sources
    /// changed, else reloads the files if they changed. Failures keep the old certificates.
    pub async fn watch(
        self: Arc<Self>,
        interval: Duration,
        shutdown: CancellationToken,
        wanted: impl Fn() -> Vec<CertSource> + Send + 'static,
    ) {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            let sources = wanted();
            let store = Arc::clone(&self);
            // Stat and PEM parsing block; keep them off the runtime's worker threads.
            let work = tokio::task::spawn_blocking(move || {
                if sources != store.sources() {
                    if let Err(err) = store.set_sources(sources) {
                        metrics::counter!("rouse_proxy_tls_cert_reloads_total", "result" => "error")
                            .increment(1);
                        tracing::error!(error = %err, "new tls certificates rejected; keeping the old ones");
                    }
                } else {
                    // Logged and counted inside.
                    let _ = store.reload_if_changed();
                }
            });
            let _ = work.await;
        }
    }

    /// The certificate that a handshake for `sni` gets.
    pub fn pick(&self, sni: Option<&str>) -> Arc<CertifiedKey> {
        let set = self
            .state
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .set
            .clone();
        set.pick(sni)
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.pick(client_hello.server_name()))
    }
}

fn stamps(sources: &[CertSource]) -> Vec<Option<FileStamp>> {
    sources
        .iter()
        .flat_map(|s| [stamp(&s.cert), stamp(&s.key)])
        .collect()
}

fn build_set(sources: &[CertSource], provider: &CryptoProvider) -> Result<CertSet, TlsError> {
    let mut exact = HashMap::new();
    let mut wildcard = HashMap::new();
    let mut default = None;
    for source in sources {
        let (key, names) = load_one(source, provider)?;
        for name in names {
            let name = name.to_ascii_lowercase();
            match name.strip_prefix("*.") {
                Some(parent) => wildcard.entry(parent.to_owned()),
                None => exact.entry(name),
            }
            .or_insert_with(|| key.clone());
        }
        default.get_or_insert(key);
    }
    Ok(CertSet {
        exact,
        wildcard,
        default: default.ok_or(TlsError::NoCertificates)?,
    })
}

fn load_one(
    source: &CertSource,
    provider: &CryptoProvider,
) -> Result<(Arc<CertifiedKey>, Vec<String>), TlsError> {
    let read_cert = |e| TlsError::ReadCert {
        path: source.cert.clone(),
        source: e,
    };
    let chain = CertificateDer::pem_file_iter(&source.cert)
        .map_err(read_cert)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(read_cert)?;
    let leaf = chain
        .first()
        .ok_or_else(|| read_cert(rustls_pki_types::pem::Error::NoItemsFound))?;
    let names: Vec<String> = webpki::EndEntityCert::try_from(leaf)
        .map_err(|e| TlsError::ParseCert {
            path: source.cert.clone(),
            source: e,
        })?
        .valid_dns_names()
        .map(str::to_owned)
        .collect();
    if names.is_empty() {
        return Err(TlsError::NoNames {
            path: source.cert.clone(),
        });
    }
    let key = PrivateKeyDer::from_pem_file(&source.key).map_err(|e| TlsError::ReadKey {
        path: source.key.clone(),
        source: e,
    })?;
    let certified = CertifiedKey::from_der(chain, key, provider).map_err(|e| TlsError::Key {
        cert: source.cert.clone(),
        key: source.key.clone(),
        source: e,
    })?;
    Ok((Arc::new(certified), names))
}
