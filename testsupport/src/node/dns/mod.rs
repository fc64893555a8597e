//! Cluster DNS for the real node: a small authoritative server for `cluster.local`, so pods
//! resolve Services by name with the `resolv.conf` the kubelet writes (nameserver
//! [`DNS_IP`](super::DNS_IP), search `<ns>.svc.cluster.local svc.cluster.local cluster.local`,
//! `ndots:5`).
//!
//! A node built from the Kubernetes binaries has no DNS add-on, and CoreDNS would be one more
//! Go build and image to carry for the few names the tests need. This one runs in the test
//! process beside the volume provisioner:
//!
//! - `<service>.<namespace>.svc.cluster.local`: A of the Service's ClusterIP, or of the ready
//!   endpoints of a headless Service (from its EndpointSlices); `NODATA` for other types;
//! - `<a-b-c-d>.<namespace>.pod.cluster.local`: A `a.b.c.d` (CoreDNS's `pods insecure`);
//! - any other name under `cluster.local`: `NXDOMAIN`; names outside it and classes other than
//!   IN: `REFUSED` (nothing outside the node resolves); `SERVFAIL` until the Service cache has
//!   synced.
//!
//! Negative answers carry no SOA, so no resolver caches them: a Service made a moment later
//! resolves at once. Answers are authoritative with a TTL of [`DnsConfig::ttl`].
//!
//! [`server`] serves UDP and TCP on one task with bounded messages and connections;
//! [`kube`] feeds it from watches of Services and EndpointSlices, binds it inside the node's
//! network namespace and installs the `kube-dns` Service that points pods at it.
//!
//! # Example
//! ```no_run
//! # async fn f() -> Result<(), rouse_testsupport::node::dns::Error> {
//! use std::collections::HashMap;
//! use rouse_testsupport::node::dns::{DnsConfig, DnsServer, StaticRecords};
//! let web = ("default".to_owned(), "web".to_owned());
//! let records = StaticRecords::new(HashMap::from([(web, vec!["10.96.0.20".parse().unwrap()])]));
//! let (udp, tcp) = DnsServer::bind("127.0.0.1:0".parse().unwrap())?;
//! let server = DnsServer::start(udp, tcp, records, DnsConfig::default())?;
//! // web.default.svc.cluster.local. A -> 10.96.0.20 at server.local_addr()
//! server.stop().await;
//! # Ok(()) }
//! ```

pub mod codec;
pub mod kube;
mod server;

use std::collections::HashMap;
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

pub use server::{DnsCounts, DnsServer};

use codec::{CLASS_IN, Query, Rcode, TYPE_A};

/// What the server is configured with; [`Default`] gives the values the node uses.
#[derive(Debug, Clone)]
pub struct DnsConfig {
    /// The cluster domain (the kubelet's `clusterDomain`). Default `cluster.local`.
    pub domain: String,
    /// The TTL of every A record, in seconds. Default 5 (CoreDNS's `kubernetes` plugin's).
    pub ttl: u32,
    /// TCP connections served at once; more are closed at accept. Default 16.
    pub tcp_connections: usize,
    /// How long one TCP connection may stay open. Default 5 s.
    pub tcp_deadline: Duration,
    /// Queries answered on one TCP connection before it is closed. Default 16.
    pub tcp_queries: usize,
}

impl Default for DnsConfig {
    fn default() -> Self {
        Self {
            domain: "cluster.local".to_owned(),
            ttl: 5,
            tcp_connections: 16,
            tcp_deadline: Duration::from_secs(5),
            tcp_queries: 16,
        }
    }
}

/// A failure to start the DNS server or its Kubernetes parts; each names what failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A socket could not be made, bound or handed to the runtime.
    #[error("bind the DNS sockets: {0}")]
    Bind(#[source] std::io::Error),
    /// The node's network namespace could not be entered.
    #[error("enter the network namespace {netns}: {source}")]
    Netns {
        /// Its path.
        netns: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A call to the API server failed.
    #[error("{action}: {source}")]
    Api {
        /// What was being done (`apply Service kube-system/kube-dns`).
        action: String,
        /// The client's error.
        source: ::kube::Error,
    },
    /// The Service or EndpointSlice cache did not sync in time.
    #[error("the {what} cache did not sync within {deadline:?}")]
    Sync {
        /// `Service` or `EndpointSlice`.
        what: &'static str,
        /// The deadline it had.
        deadline: Duration,
    },
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where the server looks names up.
pub trait Records: Send + Sync + 'static {
    /// Whether the records are loaded (until then every cluster name gets `SERVFAIL`).
    fn ready(&self) -> bool;
    /// The addresses of Service `name` in `namespace`: `None` when there is no such Service,
    /// empty when it has none (a headless Service without ready endpoints, an ExternalName).
    fn service(&self, namespace: &str, name: &str) -> Option<Vec<Ipv4Addr>>;
}

/// Records from a fixed map of `(namespace, name)` to addresses; always ready. For tests.
#[derive(Debug, Clone, Default)]
pub struct StaticRecords(HashMap<(String, String), Vec<Ipv4Addr>>);

impl StaticRecords {
    /// Records of these Services.
    pub fn new(services: HashMap<(String, String), Vec<Ipv4Addr>>) -> Arc<Self> {
        Arc::new(Self(services))
    }
}

impl Records for StaticRecords {
    fn ready(&self) -> bool {
        true
    }

    fn service(&self, namespace: &str, name: &str) -> Option<Vec<Ipv4Addr>> {
        self.0
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
    }
}

/// A name under the cluster domain, by its shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterName {
    /// `<name>.<namespace>.svc.<domain>`.
    Service {
        /// The Service's namespace.
        namespace: String,
        /// Its name.
        name: String,
    },
    /// `<a-b-c-d>.<namespace>.pod.<domain>`.
    Pod {
        /// The address spelled by the first label.
        ip: Ipv4Addr,
    },
    /// Any other name under the domain.
    Other,
}

/// The shape of `labels` under `domain` (`cluster.local`); `None` when outside it.
pub fn classify(labels: &[String], domain: &str) -> Option<ClusterName> {
    let domain: Vec<&str> = domain.split('.').filter(|l| !l.is_empty()).collect();
    let inside = labels.len().checked_sub(domain.len())?;
    if !labels[inside..]
        .iter()
        .zip(&domain)
        .all(|(label, want)| label.eq_ignore_ascii_case(want))
    {
        return None;
    }
    Some(match &labels[..inside] {
        [name, namespace, kind] if kind == "svc" => ClusterName::Service {
            namespace: namespace.clone(),
            name: name.clone(),
        },
        [dashed, _namespace, kind] if kind == "pod" => match dashed.replace('-', ".").parse() {
            Ok(ip) => ClusterName::Pod { ip },
            Err(_) => ClusterName::Other,
        },
        _ => ClusterName::Other,
    })
}

/// The code and addresses that answer `query`.
pub fn resolve(query: &Query, records: &dyn Records, domain: &str) -> (Rcode, Vec<Ipv4Addr>) {
    if query.qclass != CLASS_IN {
        return (Rcode::Refused, Vec::new());
    }
    let Some(name) = classify(&query.labels, domain) else {
        return (Rcode::Refused, Vec::new());
    };
    let addresses = match name {
        ClusterName::Pod { ip } => vec![ip],
        ClusterName::Other => return (Rcode::NxDomain, Vec::new()),
        ClusterName::Service { .. } if !records.ready() => {
            return (Rcode::ServFail, Vec::new());
        }
        ClusterName::Service { namespace, name } => match records.service(&namespace, &name) {
            Some(addresses) => addresses,
            None => return (Rcode::NxDomain, Vec::new()),
        },
    };
    // The name exists: other types get an empty answer (NODATA), never NXDOMAIN, or a
    // resolver asking A and AAAA at once would give up on the name.
    if query.qtype == TYPE_A {
        (Rcode::NoError, addresses)
    } else {
        (Rcode::NoError, Vec::new())
    }
}

#[cfg(test)]
mod tests;
