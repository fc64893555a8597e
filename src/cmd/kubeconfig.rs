//! `rouse kubeconfig`: print the kubeconfig `rouse up` wrote; and reading that file for the
//! CLI's own connection (server, CA, token).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use base64::Engine;
use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client as Http;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::Value;

/// Arguments of `rouse kubeconfig`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Data directory of `rouse up` (default `$XDG_DATA_HOME/rouse` or `~/.local/share/rouse`).
    #[arg(long, env = "ROUSE_DATA_DIR", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// Print the file's path instead of its content (for `export KUBECONFIG=$(...)`).
    #[arg(long)]
    path: bool,
}

/// Prints `{data}/kubeconfig`, or its path.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let dir = args
        .data_dir
        .clone()
        .or_else(rouse_shared::datadir::default_data_dir)
        .context("no data directory: set --data-dir or ROUSE_DATA_DIR")?;
    let path = rouse_shared::datadir::kubeconfig_file(&dir);
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "cannot read {}; `rouse up` writes it when it starts",
            path.display()
        )
    })?;
    if args.path {
        println!("{}", path.display());
    } else {
        print!("{text}");
    }
    Ok(ExitCode::SUCCESS)
}

/// What the CLI takes from a kubeconfig.
#[derive(Debug, Clone, PartialEq)]
pub struct KubeconfigFile {
    /// `clusters[].cluster.server` of the current context.
    pub server: String,
    /// The decoded `certificate-authority-data`, if any.
    pub ca_pem: Option<String>,
    /// `users[].user.token` of the current context, if any.
    pub token: Option<String>,
}

/// Reads `{data}/kubeconfig`; `None` when there is none.
pub fn read(data_dir: &Path) -> anyhow::Result<Option<KubeconfigFile>> {
    let path = rouse_shared::datadir::kubeconfig_file(data_dir);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
    };
    parse(&text)
        .with_context(|| format!("{} is not a kubeconfig rouse can use", path.display()))
        .map(Some)
}

/// The current context's server, CA and token.
fn parse(text: &str) -> anyhow::Result<KubeconfigFile> {
    let doc: Value = serde_saphyr::from_str(text).context("invalid YAML")?;
    let named = |list: &str, name: &str| -> Option<Value> {
        doc.get(list)?
            .as_array()?
            .iter()
            .find(|e| e.get("name").and_then(Value::as_str) == Some(name))
            .cloned()
    };
    let current = doc
        .get("current-context")
        .and_then(Value::as_str)
        .context("no current-context")?;
    let context = named("contexts", current).context("the current context is not listed")?;
    let field = |key: &str| {
        context
            .pointer(&format!("/context/{key}"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let cluster = named("clusters", &field("cluster").context("no cluster")?)
        .context("the context's cluster is not listed")?;
    let server = cluster
        .pointer("/cluster/server")
        .and_then(Value::as_str)
        .context("no server")?
        .to_owned();
    let ca_pem = match cluster
        .pointer("/cluster/certificate-authority-data")
        .and_then(Value::as_str)
    {
        Some(data) => Some(
            String::from_utf8(
                base64::engine::general_purpose::STANDARD
                    .decode(data.trim())
                    .context("certificate-authority-data is not base64")?,
            )
            .context("certificate-authority-data is not PEM")?,
        ),
        None => None,
    };
    let token = field("user")
        .and_then(|user| named("users", &user))
        .and_then(|u| {
            u.pointer("/user/token")
                .and_then(Value::as_str)
                .map(str::to_owned)
        });
    Ok(KubeconfigFile {
        server,
        ca_pem,
        token,
    })
}

/// An HTTP client for `https://` servers trusting `ca_pem` (else the system's roots); plain
/// `http://` works with it too.
pub fn https_client(
    ca_pem: Option<&str>,
) -> anyhow::Result<Http<HttpsConnector<HttpConnector>, Full<Bytes>>> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let builder = HttpsConnectorBuilder::new();
    let builder = match ca_pem {
        Some(pem) => {
            use rustls::pki_types::CertificateDer;
            use rustls::pki_types::pem::PemObject;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem.as_bytes()) {
                roots
                    .add(cert.context("the CA is not a PEM certificate")?)
                    .context("the CA certificate is not usable")?;
            }
            let tls = rustls::ClientConfig::builder_with_provider(provider)
                .with_safe_default_protocol_versions()
                .context("TLS setup")?
                .with_root_certificates(roots)
                .with_no_client_auth();
            builder.with_tls_config(tls)
        }
        // A server given by address with a public certificate: the system's roots.
        None => builder
            .with_provider_and_native_roots(provider)
            .context("no CA given and the system's CA certificates cannot be loaded")?,
    };
    let connector = builder.https_or_http().enable_http1().build();
    Ok(Http::builder(TokioExecutor::new()).build(connector))
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_what_rouse_up_writes() {
        let text = rouse_controller::api::kubeconfig("https://127.0.0.1:9", Some("PEM"), Some("t"));
        let file = super::parse(&text).expect("parse");
        assert_eq!(file.server, "https://127.0.0.1:9");
        assert_eq!(file.ca_pem.as_deref(), Some("PEM"));
        assert_eq!(file.token.as_deref(), Some("t"));
    }
}
