//! The DNS server on a real node: records from watches of Services and EndpointSlices,
//! sockets bound inside the node's network namespace, and the `kube-dns` Service that leads
//! pods there.
//!
//! The server listens on the node's address (port 53) inside the namespace; the Service
//! `kube-system/kube-dns` (ClusterIP [`DNS_IP`], no selector) has an EndpointSlice naming
//! that address, so kube-proxy DNATs the pods' queries to it and un-DNATs the answers. The
//! sockets must be bound to the node's address, not the wildcard: an answer must leave from
//! the address the query was DNATed to, or conntrack cannot map it back to the Service IP.

use std::fs::File;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, UdpSocket};
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client, ResourceExt};
use nix::sched::CloneFlags;
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{DnsConfig, DnsCounts, DnsServer, Error, Records, Result};
use crate::node::DNS_IP;

/// How long the caches may take to sync at start.
const SYNC_DEADLINE: Duration = Duration::from_secs(60);
/// The label linking an EndpointSlice to its Service.
const SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";
/// The field manager of what [`install_service`] applies.
const MANAGER: &str = "rouse-testsupport-dns";

/// Records from the API server: ClusterIPs of Services, ready endpoints of headless ones.
/// Made only once both caches have synced, so always [ready](Records::ready).
pub struct KubeRecords {
    services: Store<Service>,
    slices: Store<EndpointSlice>,
}

impl KubeRecords {
    /// Starts the two watches on tasks that end on `stop`; returns once both caches synced.
    pub async fn start(
        client: Client,
        stop: CancellationToken,
    ) -> Result<(Arc<Self>, Vec<JoinHandle<()>>)> {
        let (services, services_writer) = reflector::store();
        let (slices, slices_writer) = reflector::store();
        let tasks = vec![
            spawn_watch(
                Api::<Service>::all(client.clone()),
                services_writer,
                stop.clone(),
            ),
            spawn_watch(Api::<EndpointSlice>::all(client), slices_writer, stop),
        ];
        let synced = async {
            let wait = |what, ready: Result<(), reflector::store::WriterDropped>| {
                ready.map_err(|_| Error::Sync {
                    what,
                    deadline: SYNC_DEADLINE,
                })
            };
            wait("Service", services.wait_until_ready().await)?;
            wait("EndpointSlice", slices.wait_until_ready().await)
        };
        match tokio::time::timeout(SYNC_DEADLINE, synced).await {
            Ok(Ok(())) => {}
            Ok(Err(error)) => return Err(error),
            Err(_) => {
                return Err(Error::Sync {
                    what: "Service and EndpointSlice",
                    deadline: SYNC_DEADLINE,
                });
            }
        }
        Ok((Arc::new(Self { services, slices }), tasks))
    }

    /// The ready IPv4 endpoints of the EndpointSlices of Service `namespace/name`.
    fn endpoints(&self, namespace: &str, name: &str) -> Vec<Ipv4Addr> {
        let mut addresses: Vec<Ipv4Addr> = self
            .slices
            .state()
            .iter()
            .filter(|slice| {
                slice.namespace().as_deref() == Some(namespace)
                    && slice.labels().get(SERVICE_NAME_LABEL).map(String::as_str) == Some(name)
                    && slice.address_type == "IPv4"
            })
            .flat_map(|slice| slice.endpoints.clone())
            .filter(|endpoint| {
                endpoint
                    .conditions
                    .as_ref()
                    .and_then(|c| c.ready)
                    .unwrap_or(true)
            })
            .flat_map(|endpoint| endpoint.addresses)
            .filter_map(|address| address.parse().ok())
            .collect();
        addresses.sort_unstable();
        addresses.dedup();
        addresses
    }
}

impl Records for KubeRecords {
    fn ready(&self) -> bool {
        true
    }

    fn service(&self, namespace: &str, name: &str) -> Option<Vec<Ipv4Addr>> {
        let service = self.services.get(&ObjectRef::new(name).within(namespace))?;
        let spec = service.spec.as_ref()?;
        match spec.cluster_ip.as_deref() {
            Some("None") => Some(self.endpoints(namespace, name)),
            Some(ip) => Some(ip.parse().into_iter().collect()),
            // ExternalName: no address of ours (CoreDNS would answer a CNAME).
            None => Some(Vec::new()),
        }
    }
}

/// A reflector of `api` into `writer`, retried with backoff, until `stop`.
fn spawn_watch<K>(
    api: Api<K>,
    writer: reflector::store::Writer<K>,
    stop: CancellationToken,
) -> JoinHandle<()>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let stream = reflector::reflector(writer, watcher(api, watcher::Config::default()))
        .default_backoff()
        .for_each(|event| async move {
            if let Err(error) = event {
                tracing::debug!(%error, "dns watch");
            }
        });
    tokio::spawn(async move {
        tokio::select! {
            () = stop.cancelled() => {}
            () = stream => {}
        }
    })
}

/// Applies the Service `kube-system/kube-dns` (ClusterIP [`DNS_IP`], UDP and TCP 53, no
/// selector) and its EndpointSlice pointing at `server` (port 53).
pub async fn install_service(client: &Client, server: Ipv4Addr) -> Result<()> {
    let ports = json!([
        {"name": "dns", "port": 53, "protocol": "UDP"},
        {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
    ]);
    let service = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "kube-dns", "namespace": "kube-system",
                     "labels": {"k8s-app": "kube-dns"}},
        "spec": {"clusterIP": DNS_IP, "ports": ports},
    });
    let slice = json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kube-dns-testsupport",
            "namespace": "kube-system",
            // Not the endpointslice controller's: it leaves slices of other managers alone.
            "labels": {SERVICE_NAME_LABEL: "kube-dns",
                       "endpointslice.kubernetes.io/managed-by": MANAGER},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [server.to_string()], "conditions": {"ready": true}}],
        "ports": ports,
    });
    let params = PatchParams::apply(MANAGER).force();
    let api = |action: &'static str| {
        move |source| Error::Api {
            action: action.to_owned(),
            source,
        }
    };
    Api::<Service>::namespaced(client.clone(), "kube-system")
        .patch("kube-dns", &params, &Patch::Apply(&service))
        .await
        .map_err(api("apply Service kube-system/kube-dns"))?;
    Api::<EndpointSlice>::namespaced(client.clone(), "kube-system")
        .patch("kube-dns-testsupport", &params, &Patch::Apply(&slice))
        .await
        .map_err(api("apply EndpointSlice kube-system/kube-dns-testsupport"))?;
    Ok(())
}

/// Binds UDP and TCP on `addr` inside the network namespace at `netns` (a `/run/netns/`
/// path): on a thread of its own that enters it, so the caller's namespace is untouched. The
/// sockets stay in that namespace wherever they are used.
pub fn bind_in_netns(netns: &str, addr: SocketAddr) -> Result<(UdpSocket, TcpListener)> {
    let path = netns.to_owned();
    std::thread::spawn(move || {
        let entered = File::open(&path)
            .and_then(|file| nix::sched::setns(file, CloneFlags::CLONE_NEWNET).map_err(Into::into))
            .map_err(|source| Error::Netns {
                netns: path.clone(),
                source,
            });
        entered.and_then(|()| DnsServer::bind(addr))
    })
    .join()
    .map_err(|_| Error::Bind(std::io::Error::other("the bind thread panicked")))?
}

/// Cluster DNS on a real node: the server, its records and the `kube-dns` Service.
#[derive(Debug)]
pub struct ClusterDns {
    server: DnsServer,
    stop: CancellationToken,
    watches: Vec<JoinHandle<()>>,
}

impl ClusterDns {
    /// Installs the `kube-dns` Service pointing at `node_ip:53`, syncs the records and serves
    /// them on `sockets` (bound there by [`bind_in_netns`]). Needs a cluster-admin `client`.
    pub async fn start(
        client: Client,
        sockets: (UdpSocket, TcpListener),
        node_ip: Ipv4Addr,
        config: DnsConfig,
    ) -> Result<Self> {
        install_service(&client, node_ip).await?;
        let stop = CancellationToken::new();
        let (records, watches) = KubeRecords::start(client, stop.clone()).await?;
        let server = DnsServer::start(sockets.0, sockets.1, records, config)?;
        Ok(Self {
            server,
            stop,
            watches,
        })
    }

    /// What the server did so far.
    pub fn counts(&self) -> DnsCounts {
        self.server.counts()
    }

    /// Stops the server and the watches.
    pub async fn stop(self) {
        self.stop.cancel();
        self.server.stop().await;
        for watch in self.watches {
            watch.abort();
        }
    }
}
