//! The Rouse data plane: the wake-on-connect ingress proxy.
//!
//! Accepts client connections (HTTP/1.1, HTTP/2, WebSocket, TLS passthrough, raw TCP), maps the
//! hostname to a sandbox with [`rouse_shared::names::SandboxDomains`], holds the connection while
//! a suspended sandbox is woken, then proxies the traffic through. The request path, phase by
//! phase (listed for HTTP in [`l7`], drawn in `docs/architecture.md`):
//!
//! accept ([`server`], `accept`) → classify ([`l7`], [`l4`], [`tls`]) → route ([`route`]) →
//! hold/wake ([`hold`], [`wake`]) → connect ([`Router::connect`]) → forward ([`l7`], [`l4`],
//! [`splice`]) → account ([`activity`], [`metrics`]).

#![forbid(unsafe_code)]

mod accept;
pub mod activity;
mod admin;
pub mod config;
mod deadline;
pub mod directory;
pub mod error;
pub mod hold;
pub mod kind;
pub mod l4;
pub mod l7;
pub mod limits;
pub mod metrics;
mod on_wake;
pub mod open_files;
pub mod quiesce;
pub mod reporter;
pub mod route;
pub mod server;
pub mod splice;
pub mod tls;
pub mod wake;

pub use activity::ConnectionGuard;
pub use config::Config;
pub use directory::{
    Directory, RouteState, RouteUpdate, SandboxKey, StaticDirectory, StoreDirectory,
};
pub use error::ProxyError;
pub use kind::ConnKind;
pub use l7::{Scheme, serve_http_connection};
pub use route::{ReadinessCheck, RouteError, RouteTarget, Router, Upstream};
pub use server::{BoundAddrs, Proxy, ServerError, run};
