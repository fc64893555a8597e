//! HTTPS for the REST API: a CA made once in the data directory and a serving certificate it
//! signs at every start.
//!
//! Kubernetes clients (kubectl, client-go, the Python client) send a bearer token only over
//! TLS, so standalone mode serves HTTPS by default. The CA (`{data}/tls/ca.crt`, `ca.key`, mode
//! 0600) is kept, so a kubeconfig written once stays valid; the serving certificate is issued
//! afresh on each start for the names configured then (127.0.0.1, ::1 and localhost always).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// Why the API's certificates could not be loaded or made.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file of the CA cannot be read or written.
    #[error("cannot {action} {}", path.display())]
    File {
        /// `read` or `write`.
        action: &'static str,
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A key or certificate cannot be made or parsed (e.g. a damaged `ca.key`).
    #[error("cannot make the api's {what}: {source}")]
    Certificate {
        /// Which one.
        what: &'static str,
        /// rcgen's error.
        #[source]
        source: rcgen::Error,
    },
    /// rustls refused the serving certificate.
    #[error("cannot configure TLS for the api")]
    Config(#[source] rustls::Error),
}

impl TlsError {
    /// A fixed label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            TlsError::File { .. } => "tls_file",
            TlsError::Certificate { .. } => "tls_certificate",
            TlsError::Config(_) => "tls_config",
        }
    }
}

/// The API's TLS material: the CA to trust and the server config to serve with.
#[derive(Clone)]
pub struct ApiTls {
    /// The CA certificate (PEM) clients trust; it goes into the kubeconfig.
    pub ca_pem: String,
    /// The rustls config (ALPN h2 and http/1.1) with the serving certificate.
    pub server: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for ApiTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiTls").finish_non_exhaustive()
    }
}

/// Names every serving certificate holds, so local clients verify whatever they dial.
const LOCAL_NAMES: [&str; 3] = ["127.0.0.1", "::1", "localhost"];

/// Loads the CA from `{data}/tls/` (making it on first use) and issues a serving certificate for
/// the local names plus `names`.
///
/// # Example
/// ```
/// let dir = std::env::temp_dir().join(format!("rouse-tls-doc-{}", std::process::id()));
/// let tls = rouse_controller::api::load_or_create_tls(&dir, &[]).expect("tls");
/// assert!(tls.ca_pem.starts_with("-----BEGIN CERTIFICATE-----"));
/// # std::fs::remove_dir_all(&dir).ok();
/// ```
pub fn load_or_create_tls(data_dir: &Path, names: &[String]) -> Result<ApiTls, TlsError> {
    let dir = rouse_shared::datadir::tls_dir(data_dir);
    std::fs::create_dir_all(&dir).map_err(|source| TlsError::File {
        action: "create",
        path: dir.clone(),
        source,
    })?;
    let (key_path, cert_path) = (dir.join("ca.key"), dir.join("ca.crt"));
    let ca_key = match std::fs::read_to_string(&key_path) {
        Ok(pem) => KeyPair::from_pem(&pem).map_err(|source| TlsError::Certificate {
            what: "CA key (delete the tls directory to make a new CA)",
            source,
        })?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let key = KeyPair::generate().map_err(|source| TlsError::Certificate {
                what: "CA key",
                source,
            })?;
            write_private(&key_path, &key.serialize_pem())?;
            // A new key makes any older CA certificate useless.
            let _ = std::fs::remove_file(&cert_path);
            key
        }
        Err(source) => {
            return Err(TlsError::File {
                action: "read",
                path: key_path,
                source,
            });
        }
    };
    let ca_params = ca_params();
    let ca_pem = match std::fs::read_to_string(&cert_path) {
        Ok(pem) if pem.contains("BEGIN CERTIFICATE") => pem,
        _ => {
            let cert = ca_params
                .self_signed(&ca_key)
                .map_err(|source| TlsError::Certificate {
                    what: "CA certificate",
                    source,
                })?;
            write_private(&cert_path, &cert.pem())?;
            cert.pem()
        }
    };
    // The issuer needs only the CA's name and key, both fixed, so the CA certificate on disk
    // never has to be parsed.
    let issuer = Issuer::new(ca_params, ca_key);
    let mut sans: Vec<String> = LOCAL_NAMES.iter().map(|n| (*n).to_owned()).collect();
    sans.extend(
        names
            .iter()
            .filter(|n| !sans.contains(n))
            .cloned()
            .collect::<Vec<_>>(),
    );
    let mut params = CertificateParams::new(sans).map_err(|source| TlsError::Certificate {
        what: "serving certificate names",
        source,
    })?;
    params
        .distinguished_name
        .push(DnType::CommonName, "rouse api");
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().map_err(|source| TlsError::Certificate {
        what: "serving key",
        source,
    })?;
    let cert = params
        .signed_by(&key, &issuer)
        .map_err(|source| TlsError::Certificate {
            what: "serving certificate",
            source,
        })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut server = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(TlsError::Config)?
        .with_no_client_auth()
        .with_single_cert(
            vec![CertificateDer::from(cert.der().to_vec())],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .map_err(TlsError::Config)?;
    server.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(ApiTls {
        ca_pem,
        server: Arc::new(server),
    })
}

/// The CA's parameters; fixed, so the issuer can be rebuilt from the key alone.
fn ca_params() -> CertificateParams {
    let mut params = CertificateParams::default();
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, "rouse local api CA");
    params.distinguished_name = name;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

/// Writes `text` to a new file only its owner can read (mode 0600), replacing any old one.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<(), TlsError> {
    let fail = |source| TlsError::File {
        action: "write",
        path: path.to_owned(),
        source,
    };
    let tmp = path.with_extension("tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp).map_err(fail)?;
    file.write_all(text.as_bytes())
        .and_then(|()| file.sync_all())
        .map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

#[cfg(test)]
mod tests {
    #[test]
    fn ca_is_kept_and_serving_cert_verifies() {
        let dir = tempfile::tempdir().expect("tempdir");
        let first = super::load_or_create_tls(dir.path(), &["rouse.example".to_owned()])
            .expect("first start");
        let second = super::load_or_create_tls(dir.path(), &[]).expect("second start");
        assert_eq!(first.ca_pem, second.ca_pem, "the CA is kept across starts");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join("tls/ca.key"))
                .expect("stat")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }
}
