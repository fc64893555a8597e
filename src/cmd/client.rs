//! The HTTP client of the API commands: where the server is, the token, and requests that
//! turn `Status` failures into kubectl-style errors.

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use bytes::Bytes;
use http::{Method, Request, StatusCode, Uri, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client as Http;
use hyper_util::client::legacy::connect::HttpConnector;
use rouse_controller::api::Kind;
use serde_json::Value;

/// Where the API is and how to authenticate, shared by every API command.
///
/// Without `--server`, the kubeconfig `rouse up` wrote into the data directory says where the
/// API is, which CA to trust and the token; without that file, `https://127.0.0.1:7070` with the
/// data directory's CA and token.
#[derive(Debug, Clone, clap::Args)]
pub struct Connection {
    /// Address of the Rouse REST API (`https://HOST:PORT` or `http://HOST:PORT`); default: the
    /// server in `{data dir}/kubeconfig`, else `https://127.0.0.1:7070`.
    #[arg(long, env = "ROUSE_SERVER", global = true)]
    server: Option<String>,
    /// Bearer token; by default the kubeconfig's, else read from `{data dir}/token`.
    #[arg(long, env = "ROUSE_TOKEN", hide_env_values = true, global = true)]
    token: Option<String>,
    /// Data directory of `rouse up`, where the kubeconfig, CA and token are (default
    /// `$XDG_DATA_HOME/rouse` or `~/.local/share/rouse`).
    #[arg(long, env = "ROUSE_DATA_DIR", value_name = "DIR", global = true)]
    data_dir: Option<PathBuf>,
    /// How long one request may take before it is abandoned.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration, global = true)]
    request_timeout: Duration,
}

/// A failure the server reported as a `Status` object.
#[derive(Debug)]
pub struct ServerError {
    /// HTTP status.
    pub code: StatusCode,
    /// The Status `reason`.
    pub reason: String,
    /// The Status `message`.
    pub message: String,
}

impl std::fmt::Display for ServerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Error from server ({}): {}", self.reason, self.message)
    }
}

impl std::error::Error for ServerError {}

/// A connected client.
pub struct Client {
    base: String,
    token: Option<String>,
    /// Where a token was looked for, when none was found: said with a 401.
    token_hint: Option<String>,
    timeout: Duration,
    http: Http<HttpsConnector<HttpConnector>, Full<Bytes>>,
}

/// The server when neither `--server` nor a kubeconfig says otherwise.
const DEFAULT_SERVER: &str = "https://127.0.0.1:7070";

impl Connection {
    /// A client for this connection: server, CA and token from the flags, the kubeconfig or
    /// the data directory, in that order.
    pub fn client(&self) -> anyhow::Result<Client> {
        let dir = self
            .data_dir
            .clone()
            .or_else(rouse_shared::datadir::default_data_dir);
        let from_file = match (&self.server, &dir) {
            (None, Some(dir)) => super::kubeconfig::read(dir)?,
            _ => None,
        };
        let server = match (&self.server, &from_file) {
            (Some(server), _) => server.clone(),
            (None, Some(file)) => file.server.clone(),
            (None, None) => DEFAULT_SERVER.to_owned(),
        };
        let base = server.trim_end_matches('/').to_owned();
        let uri: Uri = base
            .parse()
            .with_context(|| format!("invalid --server {server:?}"))?;
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                bail!("invalid --server {server:?}: expected https://HOST:PORT or http://HOST:PORT")
            }
        };
        if uri.host().is_none() {
            bail!("invalid --server {server:?}: expected https://HOST:PORT or http://HOST:PORT");
        }
        let (token, token_hint) = match (&self.token, &from_file) {
            (Some(token), _) => (Some(token.trim().to_owned()), None),
            (None, Some(file)) if file.token.is_some() => (file.token.clone(), None),
            _ => self.token_from_file(dir.as_deref())?,
        };
        let ca_pem = match (&from_file, &dir) {
            (Some(file), _) if file.ca_pem.is_some() => file.ca_pem.clone(),
            (_, Some(dir)) if https => {
                let path = rouse_shared::datadir::tls_dir(dir).join("ca.crt");
                std::fs::read_to_string(&path).ok()
            }
            _ => None,
        };
        // A plain-http server needs no roots; an https one the CA (else the system's roots).
        let http =
            super::kubeconfig::https_client(ca_pem.as_deref().filter(|_| https)).or_else(|e| {
                if https {
                    Err(e)
                } else {
                    super::kubeconfig::https_client(Some(""))
                }
            })?;
        Ok(Client {
            base,
            token,
            token_hint,
            timeout: self.request_timeout,
            http,
        })
    }

    /// The token in the data directory's token file; without one, where it was looked for.
    fn token_from_file(
        &self,
        dir: Option<&std::path::Path>,
    ) -> anyhow::Result<(Option<String>, Option<String>)> {
        let Some(dir) = dir else {
            let hint = "no token: none given with --token or ROUSE_TOKEN, and no data directory \
                        to read one from (--data-dir, ROUSE_DATA_DIR, $XDG_DATA_HOME or $HOME)";
            return Ok((None, Some(hint.to_owned())));
        };
        let path = rouse_shared::datadir::token_file(dir);
        let missing = || {
            Some(format!(
                "no token: none given with --token or ROUSE_TOKEN, and {} has none",
                path.display()
            ))
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let token = Some(text.trim().to_owned()).filter(|t| !t.is_empty());
                let hint = if token.is_none() { missing() } else { None };
                Ok((token, hint))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok((None, missing())),
            Err(e) => Err(e).with_context(|| format!("cannot read the token {}", path.display())),
        }
    }
}

impl Client {
    /// `/v1/namespaces/{ns}/{plural}` or, without a namespace, `/v1/{plural}`.
    pub fn collection(kind: Kind, namespace: Option<&str>) -> String {
        match namespace {
            Some(ns) => format!("/v1/namespaces/{ns}/{}", kind.plural()),
            None => format!("/v1/{}", kind.plural()),
        }
    }

    /// `/v1/namespaces/{ns}/{plural}/{name}`.
    pub fn object(kind: Kind, namespace: &str, name: &str) -> String {
        format!("/v1/namespaces/{namespace}/{}/{name}", kind.plural())
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, Vec<u8>)>,
    ) -> anyhow::Result<hyper::Response<Incoming>> {
        let url = format!("{}{path}", self.base);
        let mut request = Request::builder().method(method.clone()).uri(&url);
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let payload = match body {
            Some((content_type, bytes)) => {
                request = request.header(header::CONTENT_TYPE, content_type);
                Bytes::from(bytes)
            }
            None => Bytes::new(),
        };
        let request = request.body(Full::new(payload))?;
        tokio::time::timeout(self.timeout, self.http.request(request))
            .await
            .with_context(|| format!("{method} {url}: no response within {:?}", self.timeout))?
            .with_context(|| format!("cannot reach the Rouse API at {}", self.base))
    }

    /// Sends a request and reads the JSON answer; a failure status becomes a [`ServerError`].
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<(&str, &Value)>,
    ) -> anyhow::Result<Value> {
        let body = body.map(|(t, v)| (t, v.to_string().into_bytes()));
        let response = self.send(method.clone(), path, body).await?;
        let status = response.status();
        let bytes = tokio::time::timeout(self.timeout, response.into_body().collect())
            .await
            .context("the response body did not arrive in time")?
            .context("reading the response")?
            .to_bytes();
        if !status.is_success() {
            return Err(self.failure(status, &bytes));
        }
        serde_json::from_slice(&bytes)
            .with_context(|| format!("{method} {path}: the response is not JSON"))
    }

    /// `GET` of a JSON document.
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(Method::GET, path, None).await
    }

    /// Starts a streamed `GET` (watch or log); the body arrives as it is written.
    pub async fn stream(&self, path: &str) -> anyhow::Result<Incoming> {
        let response = self.send(Method::GET, path, None).await?;
        let status = response.status();
        if !status.is_success() {
            let bytes = tokio::time::timeout(self.timeout, response.into_body().collect())
                .await
                .context("the response body did not arrive in time")?
                .context("reading the response")?
                .to_bytes();
            return Err(self.failure(status, &bytes));
        }
        Ok(response.into_body())
    }

    /// The error of a failure response; a 401 without a token says where one was looked for.
    fn failure(&self, status: StatusCode, body: &[u8]) -> anyhow::Error {
        let error = anyhow::Error::new(server_error(status, body));
        match &self.token_hint {
            Some(hint) if status == StatusCode::UNAUTHORIZED => error.context(hint.clone()),
            _ => error,
        }
    }
}

/// The error a failure response stands for: its `Status`, or the status line and text.
fn server_error(status: StatusCode, body: &[u8]) -> ServerError {
    let parsed: Option<Value> = serde_json::from_slice(body).ok();
    let text = |field: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(field))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    ServerError {
        code: status,
        reason: text("reason")
            .or_else(|| status.canonical_reason().map(|r| r.replace(' ', "")))
            .unwrap_or_else(|| status.as_str().to_owned()),
        message: text("message").unwrap_or_else(|| String::from_utf8_lossy(body).trim().to_owned()),
    }
}

/// Is this error the server's `NotFound`?
pub fn is_not_found(err: &anyhow::Error) -> bool {
    err.downcast_ref::<ServerError>()
        .is_some_and(|e| e.code == StatusCode::NOT_FOUND)
}

/// Is this error the server's `AlreadyExists`?
pub fn is_already_exists(err: &anyhow::Error) -> bool {
    err.downcast_ref::<ServerError>()
        .is_some_and(|e| e.code == StatusCode::CONFLICT && e.reason == "AlreadyExists")
}

/// Runs an API command on a small runtime.
pub fn block_on<F: std::future::Future>(future: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    Ok(runtime.block_on(future))
}

/// A kind from a command-line word, or an error listing the accepted ones.
pub fn kind_arg(word: &str) -> anyhow::Result<Kind> {
    Kind::parse(word).ok_or_else(|| {
        let known: Vec<&str> = Kind::ALL.iter().map(|k| k.plural()).collect();
        anyhow::anyhow!(
            "the server doesn't have a resource type \"{word}\" (known: {})",
            known.join(", ")
        )
    })
}

/// The kind and names of `KIND NAME...` or `KIND/NAME` (kubectl accepts both).
pub fn kind_and_names(word: &str, names: &[String]) -> anyhow::Result<(Kind, Vec<String>)> {
    match word.split_once('/') {
        Some((kind, name)) if !name.is_empty() => {
            let mut all = vec![name.to_owned()];
            all.extend(names.iter().cloned());
            Ok((kind_arg(kind)?, all))
        }
        Some(_) => bail!("{word:?}: expected KIND/NAME"),
        None => Ok((kind_arg(word)?, names.to_vec())),
    }
}

/// `%`-encodes a query parameter value.
pub fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}
