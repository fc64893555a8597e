//! TLS termination: certificates chosen by SNI and reloaded when their files change, the rustls
//! server configuration, and the HTTPS listener that hands decrypted streams to the HTTP service.

mod listener;
mod store;

use std::path::PathBuf;
use std::sync::Arc;

pub use listener::{TLS_HANDSHAKE_ERRORS_TOTAL, serve};
pub use store::{CertSource, CertStore};

/// ALPN protocols offered, in order of preference: HTTP/2 first.
pub const ALPN_PROTOCOLS: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// Why certificates could not be loaded or TLS could not be configured.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// No certificate is configured for a TLS listener.
    #[error("no certificates configured")]
    NoCertificates,
    /// A certificate file could not be read or holds no PEM certificate.
    #[error("reading certificates from {path}: {source}")]
    ReadCert {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// A key file could not be read or holds no PEM private key.
    #[error("reading the private key from {path}: {source}")]
    ReadKey {
        /// The file.
        path: PathBuf,
        /// What went wrong.
        #[source]
        source: rustls_pki_types::pem::Error,
    },
    /// The leaf certificate cannot be parsed.
    #[error("parsing the certificate in {path}: {source}")]
    ParseCert {
        /// The file.
        path: PathBuf,
        /// What webpki rejected.
        #[source]
        source: webpki::Error,
    },
    /// The leaf certificate names no DNS host.
    #[error("the certificate in {path} has no DNS subject alternative name")]
    NoNames {
        /// The file.
        path: PathBuf,
    },
    /// The key is unsupported or does not belong to the certificate.
    #[error("the key in {key} does not fit the certificate in {cert}: {source}")]
    Key {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// What rustls rejected.
        #[source]
        source: rustls::Error,
    },
    /// rustls rejected the server configuration.
    #[error("building the TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

impl TlsError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::NoCertificates => "no_certificates",
            Self::ReadCert { .. } => "read_cert",
            Self::ReadKey { .. } => "read_key",
            Self::ParseCert { .. } | Self::NoNames { .. } => "parse_cert",
            Self::Key { .. } => "key",
            Self::Config(_) => "config",
        }
    }
}

/// Builds the rustls server configuration: ring crypto, TLS 1.2 and 1.3, certificates from
/// `store` by SNI, ALPN `h2` then `http/1.1`.
pub fn server_config(store: Arc<CertStore>) -> Result<Arc<rustls::ServerConfig>, TlsError> {
    // Ring explicitly: a process-wide default provider is ambiguous when two are linked.
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_cert_resolver(store);
    config.alpn_protocols = ALPN_PROTOCOLS.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}
