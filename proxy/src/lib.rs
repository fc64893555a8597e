//! The Rouse data plane: the wake-on-connect ingress proxy.
//!
//! Accepts client connections (HTTP/1.1, HTTP/2, WebSocket, TLS passthrough, raw TCP), maps the
//! hostname to a sandbox with [`rouse_shared::names::SandboxDomains`], holds the connection while
//! a suspended sandbox is woken, then splices the traffic through. See `docs/architecture.md`.
//! The request path lands here phase by phase; this crate currently holds no code.

pub mod l4;
pub mod tls;
