//! What each fuzz target does with its input. Every target feeds untrusted bytes to one parser
//! or decoder of Rouse and checks what must hold of any input: no panic (libFuzzer reports
//! one), bounded results, and a few round trips. Shared by the cargo-fuzz targets and the
//! stable corpus test, so the seed corpora run in `cargo test` too.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::OnceLock;

use http::{HeaderMap, HeaderName, HeaderValue};
use rouse_proxy::l4::sni::{MAX_SERVER_NAME_LEN, Progress, parse_client_hello};
use rouse_proxy::{Config, Router, StaticDirectory};
use rouse_shared::names::{SandboxDomains, split_host_port};
use serde_json::Value;

/// A fuzz target: takes any bytes.
pub type Target = fn(&[u8]);

/// The targets by name, for drivers that pick one by its corpus directory.
pub const ALL: [(&str, Target); 7] = [
    ("sni", sni),
    ("hostname", hostname),
    ("http_head", http_head),
    ("http_relay", http_relay),
    ("proxy_config", proxy_config),
    ("manifest", manifest),
    ("rest_body", rest_body),
];

/// The TLS ClientHello parser of the passthrough listener (`l4::sni`).
pub fn sni(data: &[u8]) {
    match parse_client_hello(data) {
        Ok(Progress::Complete(hello)) => {
            assert!(
                hello.len <= data.len(),
                "the ClientHello lies within the input"
            );
            if let Some(name) = &hello.sni {
                assert!(name.len() <= MAX_SERVER_NAME_LEN, "server name bounded");
                assert_eq!(*name, name.to_ascii_lowercase(), "server name lower-cased");
            }
        }
        Ok(Progress::Incomplete { at_least }) => {
            assert!(at_least > data.len(), "more bytes are needed than given");
        }
        Err(_) => {}
    }
}

fn domains() -> &'static SandboxDomains {
    static DOMAINS: OnceLock<SandboxDomains> = OnceLock::new();
    DOMAINS.get_or_init(|| {
        SandboxDomains::new(["sandbox.localhost", "agents.example.com"], Some("default"))
            .expect("fixed domains are valid")
    })
}

/// The hostname parser (`names::hostname`): host and port split, sandbox host parsing and its
/// canonical form; the first line of the input is the host, the others domains to validate.
pub fn hostname(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let mut lines = text.lines();
    let authority = lines.next().unwrap_or_default();
    if let Ok((host, _port)) = split_host_port(authority)
        && let Ok(parsed) = domains().parse(host)
        && let Some(canonical) = parsed.to_host("sandbox.localhost")
    {
        let again = domains()
            .parse(&canonical)
            .expect("a canonical host parses");
        assert_eq!(again, parsed, "canonical host {canonical} round trips");
    }
    let _ = SandboxDomains::new(lines, Some("default"));
}

fn router() -> &'static Router {
    static ROUTER: OnceLock<Router> = OnceLock::new();
    ROUTER.get_or_init(|| {
        let config = Config::from_toml(
            "[routing]\nupstream_headers = true\n[directory]\nkind = \"static\"\n",
        )
        .expect("fixed config is valid");
        Router::new(config, StaticDirectory::new(&[])).expect("router")
    })
}

/// The request head handling of the HTTP proxy (`l7`): the target from the upstream router
/// headers or the host, then the header rules applied before forwarding. Input: one
/// `name: value` header a line.
pub fn http_head(data: &[u8]) {
    let mut headers = HeaderMap::new();
    for line in data.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        {
            headers.append(name, value);
        }
    }
    let host = headers
        .get(http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("web.default.sandbox.localhost")
        .to_owned();
    let _ = rouse_proxy::l7::target_of(router(), &headers, &host);
    let upgrade = rouse_proxy::l7::headers::upgrade_protocol(&headers);
    rouse_proxy::l7::headers::strip_hop_by_hop(&mut headers, upgrade.clone());
    rouse_proxy::l7::headers::set_forwarded(
        &mut headers,
        IpAddr::V4(Ipv4Addr::LOCALHOST),
        "http",
        &host,
    );
    for hop in [
        "transfer-encoding",
        "te",
        "trailer",
        "keep-alive",
        "proxy-connection",
    ] {
        assert!(!headers.contains_key(hop), "{hop} is not forwarded");
    }
    assert_eq!(
        headers.contains_key(http::header::UPGRADE),
        upgrade.is_some(),
        "Upgrade forwarded only for an upgrade request"
    );
    assert_eq!(
        headers.get("x-forwarded-proto").map(HeaderValue::as_bytes),
        Some(&b"http"[..])
    );
}

/// The HTTP/1.1 relay's parsers (`l7::relay`): the input after three control bytes (see
/// `relay::Input`) as a client's pipelined requests, as a sandbox's responses with their
/// bodies, and as a chunked body.
pub fn http_relay(data: &[u8]) {
    let Some(input) = super::relay::Input::new(data) else {
        return;
    };
    super::relay::requests(&input);
    super::relay::responses(&input);
    super::relay::chunked(input.bytes, input.split);
}

/// The proxy's TOML config parsing and validation.
pub fn proxy_config(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = Config::from_toml(text);
    }
}

/// Manifest validation (`rouse validate`, the API's admission): JSON and YAML documents.
pub fn manifest(data: &[u8]) {
    if let Ok(doc) = serde_json::from_slice::<Value>(data) {
        let _ = rouse_shared::validate::validate(&doc);
    }
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(doc) = serde_saphyr::from_str::<Value>(text)
    {
        let _ = rouse_shared::validate::validate(&doc);
    }
}

fn base_sandbox() -> Value {
    serde_json::json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "app", "image": "nginx"}]}}},
    })
}

/// REST request bodies: a JSON body as a create (validated, then decoded as a Sandbox) and as
/// a merge patch on a stored Sandbox (the API's public `merge_patch`, then the same checks).
pub fn rest_body(data: &[u8]) {
    let Ok(body) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if rouse_shared::validate::validate(&body).is_valid() {
        let _ = serde_json::from_value::<rouse_shared::api::Sandbox>(body.clone());
    }
    let mut patched = base_sandbox();
    rouse_controller::api::merge_patch(&mut patched, &body);
    if rouse_shared::validate::validate(&patched).is_valid() {
        let _ = serde_json::from_value::<rouse_shared::api::Sandbox>(patched);
    }
}
