//! Loopback ports for workloads: each sandbox gets a free port passed as `PORT`, and one per
//! declared container port.
//!
//! A port is found by binding `127.0.0.1:0` and closing the listener again, then handed to the
//! workload. The kernel may hand the same free port out again at once, so every port given to
//! a workload stays reserved in this process (a [`PortLease`]) until its supervisor ends: many
//! sandboxes starting together never share a port. Another program may still take the port
//! between the close and the workload's own bind; the workload then fails to bind and exits,
//! and the supervisor gives it new ports before the restart (see [`PortMap::all_free`]).

use std::collections::HashSet;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::sync::{Mutex, PoisonError};

use super::error::{Error, Result};
use super::spec::PortSpec;

/// Where a workload listens: `PORT` and the host port of each declared container port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMap {
    /// The address the workload is reached at: loopback, or its network namespace's address.
    pub host: Ipv4Addr,
    /// The port passed as `PORT` (the first declared port's host port).
    pub default_port: u16,
    /// `(containerPort, host port)` for each declared port, in declaration order.
    pub mapped: Vec<(u16, u16)>,
}

/// Ports handed to workloads of this process and not yet released. Process-wide, because
/// ports are: two platforms in one process (tests) must not share one either.
static LEASED: Mutex<Option<HashSet<u16>>> = Mutex::new(None);

/// How many ports one allocation may find taken by a lease before it gives up.
const MAX_TRIES: usize = 4096;

fn leased<R>(f: impl FnOnce(&mut HashSet<u16>) -> R) -> R {
    // A panic while holding the lock leaves a plain set that is still consistent.
    let mut guard = LEASED.lock().unwrap_or_else(PoisonError::into_inner);
    let set = guard.get_or_insert_with(HashSet::new);
    let out = f(set);
    metrics::gauge!("rouse_controller_workload_ports_leased").set(set.len() as f64);
    out
}

/// Keeps a workload's ports reserved in this process until dropped.
#[derive(Debug)]
pub struct PortLease {
    ports: Vec<u16>,
}

impl Drop for PortLease {
    fn drop(&mut self) {
        leased(|set| {
            for port in &self.ports {
                set.remove(port);
            }
        });
    }
}

impl PortLease {
    /// A lease of no port: for a workload in its own network namespace, whose ports are its
    /// own.
    pub fn none() -> Self {
        Self { ports: Vec::new() }
    }
}

impl PortMap {
    /// The ports of a workload in its own network namespace at `host`: each container port
    /// as itself (nothing else listens there), `PORT` the first one or 8080. They stay the
    /// same across restarts, so a restored checkpoint listens where it is dialled.
    pub fn own(host: Ipv4Addr, ports: &[PortSpec]) -> Self {
        let mapped: Vec<(u16, u16)> = ports
            .iter()
            .map(|p| (p.container_port, p.container_port))
            .collect();
        Self {
            host,
            default_port: mapped.first().map_or(8080, |(_, p)| *p),
            mapped,
        }
    }

    /// Reserves a free loopback port for each declared port (one for `PORT` if none is), none
    /// of them leased to another workload; the lease keeps them until dropped.
    pub fn allocate(ports: &[PortSpec]) -> Result<(Self, PortLease)> {
        let mut mapped = Vec::with_capacity(ports.len());
        // Hold every listener until all are chosen so one map never gets the same port twice,
        // and so the kernel does not offer a port it gave us (but was leased) again.
        let mut held = Vec::with_capacity(ports.len().max(1));
        let mut lease = PortLease { ports: Vec::new() };
        for spec in ports {
            let port = reserve_unleased(&mut held, &mut lease)?;
            mapped.push((spec.container_port, port));
        }
        let default_port = match mapped.first() {
            Some((_, port)) => *port,
            None => reserve_unleased(&mut held, &mut lease)?,
        };
        drop(held);
        Ok((
            Self {
                host: Ipv4Addr::LOCALHOST,
                default_port,
                mapped,
            },
            lease,
        ))
    }

    /// Whether every port of the map can be bound now; after the workload exited, a port that
    /// cannot be bound was taken by another program.
    pub fn all_free(&self) -> bool {
        let mut ports: Vec<u16> = self.mapped.iter().map(|(_, p)| *p).collect();
        ports.push(self.default_port);
        ports
            .into_iter()
            .all(|port| TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok())
    }

    /// The host port of a container port; `None` asks for `PORT`.
    pub fn host_port(&self, container_port: Option<u16>) -> u16 {
        container_port
            .and_then(|c| self.mapped.iter().find(|(cp, _)| *cp == c).map(|(_, p)| *p))
            .unwrap_or(self.default_port)
    }

    /// The address of a container port; `None` asks for `PORT`.
    pub fn addr(&self, container_port: Option<u16>) -> SocketAddr {
        SocketAddr::from((self.host, self.host_port(container_port)))
    }
}

/// Binds ports until one is not leased, leases it and keeps its listener in `held`.
fn reserve_unleased(held: &mut Vec<TcpListener>, lease: &mut PortLease) -> Result<u16> {
    for _ in 0..MAX_TRIES {
        let (listener, port) = reserve()?;
        held.push(listener);
        if leased(|set| set.insert(port)) {
            lease.ports.push(port);
            return Ok(port);
        }
    }
    Err(Error::Port(std::io::Error::new(
        std::io::ErrorKind::AddrInUse,
        format!("no free loopback port that is not already leased after {MAX_TRIES} tries"),
    )))
}

fn reserve() -> Result<(TcpListener, u16)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(Error::Port)?;
    let port = listener.local_addr().map_err(Error::Port)?.port();
    Ok((listener, port))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::PortMap;
    use crate::platform::local::spec::PortSpec;

    #[test]
    fn ports_leased_at_once_are_all_distinct_and_released_on_drop() {
        let spec = [
            PortSpec {
                name: None,
                container_port: 80,
            },
            PortSpec {
                name: None,
                container_port: 81,
            },
        ];
        // As many sandboxes starting together: the kernel offers a just-closed port again,
        // which without the lease gave two of them the same port.
        let maps: Vec<_> = (0..600)
            .map(|_| PortMap::allocate(&spec).expect("ports"))
            .collect();
        let mut seen = HashSet::new();
        for (map, _) in &maps {
            for (_, port) in &map.mapped {
                assert!(seen.insert(*port), "port {port} handed out twice");
            }
        }
        let (first, _) = &maps[0];
        let port = first.default_port;
        drop(maps);
        assert!(
            !super::leased(|set| set.contains(&port)),
            "a dropped lease releases its ports"
        );
    }
}
