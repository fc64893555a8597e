//! Helpers of the L4 and TLS tests: a proxy over a static directory, certificates, and
//! backends (TCP echo, TLS echo, HTTP) on 127.0.0.1.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rouse_proxy::directory::{Endpoint, PortMapping};
use rouse_proxy::{Config, Proxy, RouteState, SandboxKey, StaticDirectory};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// The generous bound on every wait: only a failure takes this long.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// `{name}.default.sandbox.localhost`.
pub fn host(name: &str) -> String {
    format!("{name}.default.sandbox.localhost")
}

/// The key of sandbox `default/{name}`.
pub fn key(name: &str) -> SandboxKey {
    SandboxKey::new("default", name)
}

/// Routes `default/{name}` to `addr`, declaring container `port`.
pub fn running(directory: &StaticDirectory, name: &str, port: u16, addr: SocketAddr) {
    directory.set(
        key(name),
        RouteState::Running {
            endpoint: Endpoint {
                address: addr.ip().to_string(),
                ports: vec![PortMapping {
                    container_port: port,
                    port: addr.port(),
                }],
            },
        },
    );
}

/// Marks `default/{name}` suspended, waking on connect.
pub fn suspended(directory: &StaticDirectory, name: &str) {
    directory.set(key(name), RouteState::suspended(true));
}

/// Starts a proxy from `extra` TOML on top of loopback listeners, and waits until it is ready.
pub async fn start(extra: &str, directory: &StaticDirectory) -> Proxy {
    let text = format!(
        "[http]\nlisten = \"127.0.0.1:0\"\n[admin]\nlisten = \"off\"\n\
         [limits]\nheader_read_timeout = \"5s\"\n{extra}"
    );
    let config = Config::from_toml(&text).expect("test config");
    let proxy = Proxy::start(config, directory.clone())
        .await
        .expect("proxy starts");
    wait_for("the proxy is ready", || proxy.router().is_ready()).await;
    proxy
}

/// Waits until `probe` holds, failing after [`PATIENCE`] with `what`.
pub async fn wait_for(what: &str, mut probe: impl FnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !probe() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A self-signed certificate for `names`: its DER, and PEM files written into `dir`.
pub struct TestCert {
    /// The certificate.
    pub der: CertificateDer<'static>,
    /// The private key (PKCS#8 DER).
    pub key: Vec<u8>,
    /// Path of the PEM certificate.
    pub cert_path: std::path::PathBuf,
    /// Path of the PEM key.
    pub key_path: std::path::PathBuf,
}

/// Generates a certificate for `names` and writes `{stem}.crt` / `{stem}.key` into `dir`.
pub fn cert(dir: &Path, stem: &str, names: &[&str]) -> TestCert {
    let generated = rcgen::generate_simple_self_signed(
        names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>(),
    )
    .expect("certificate");
    let cert_path = dir.join(format!("{stem}.crt"));
    let key_path = dir.join(format!("{stem}.key"));
    std::fs::write(&cert_path, generated.cert.pem()).expect("write cert");
    std::fs::write(&key_path, generated.signing_key.serialize_pem()).expect("write key");
    TestCert {
        der: generated.cert.der().clone(),
        key: generated.signing_key.serialize_der(),
        cert_path,
        key_path,
    }
}

/// A TCP echo backend; returns its address.
pub async fn echo_backend() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let (mut r, mut w) = stream.split();
                let _ = tokio::io::copy(&mut r, &mut w).await;
                let _ = w.shutdown().await;
            });
        }
    });
    addr
}

/// A TLS backend with `cert`: answers each line with `{tag}: {line}`.
pub async fn tls_backend(cert: &TestCert, tag: &'static str) -> SocketAddr {
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(cert.key.clone()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![cert.der.clone()], key)
        .expect("server cert");
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(stream).await else {
                    return;
                };
                let (r, mut w) = tokio::io::split(tls);
                let mut lines = BufReader::new(r).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if w.write_all(format!("{tag}: {line}\n").as_bytes())
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    addr
}

/// A TLS client config trusting `roots`, offering `alpn`.
pub fn client_config(
    roots: &[&CertificateDer<'static>],
    alpn: &[&[u8]],
) -> Arc<rustls::ClientConfig> {
    let mut store = rustls::RootCertStore::empty();
    for root in roots {
        store.add((*root).clone()).expect("root");
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(store)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// Connects with TLS to `addr` naming `sni`, sends `line`, returns the answer line.
pub async fn tls_exchange(
    addr: SocketAddr,
    sni: &str,
    config: Arc<rustls::ClientConfig>,
    line: &str,
) -> std::io::Result<String> {
    let tcp = TcpStream::connect(addr).await?;
    let name = ServerName::try_from(sni.to_owned()).expect("server name");
    let tls = TlsConnector::from(config).connect(name, tcp).await?;
    let (r, mut w) = tokio::io::split(tls);
    w.write_all(format!("{line}\n").as_bytes()).await?;
    let mut answer = String::new();
    BufReader::new(r).read_line(&mut answer).await?;
    Ok(answer.trim_end().to_owned())
}

/// Renders the process's metrics (the proxy installs the recorder).
pub fn metrics_text() -> String {
    rouse_proxy::metrics::render()
}
