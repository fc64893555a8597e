//! Loopback ports for workloads: each sandbox gets a free port passed as `PORT`, and one per
//! declared container port.
//!
//! A port is found by binding `127.0.0.1:0` and closing the listener again, then handed to the
//! workload. Between the close and the workload's own bind another process may take the port;
//! the workload then fails to bind, exits and is restarted by its restart policy with the same
//! ports (the window is microseconds, and the kernel hands out ephemeral ports round-robin, so
//! a quick reuse is unlikely).

use std::net::{Ipv4Addr, SocketAddr, TcpListener};

use super::error::{Error, Result};
use super::spec::PortSpec;

/// Where a workload listens: `PORT` and the host port of each declared container port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortMap {
    /// The port passed as `PORT` (the first declared port's host port).
    pub default_port: u16,
    /// `(containerPort, host port)` for each declared port, in declaration order.
    pub mapped: Vec<(u16, u16)>,
}

impl PortMap {
    /// Reserves a free loopback port for each declared port (one for `PORT` if none is).
    pub fn allocate(ports: &[PortSpec]) -> Result<Self> {
        let mut mapped = Vec::with_capacity(ports.len());
        // Hold every listener until all are chosen so one map never gets the same port twice.
        let mut held = Vec::with_capacity(ports.len().max(1));
        for spec in ports {
            let (listener, port) = reserve()?;
            held.push(listener);
            mapped.push((spec.container_port, port));
        }
        let default_port = match mapped.first() {
            Some((_, port)) => *port,
            None => {
                let (listener, port) = reserve()?;
                held.push(listener);
                port
            }
        };
        drop(held);
        Ok(Self {
            default_port,
            mapped,
        })
    }

    /// The host port of a container port; `None` asks for `PORT`.
    pub fn host_port(&self, container_port: Option<u16>) -> u16 {
        container_port
            .and_then(|c| self.mapped.iter().find(|(cp, _)| *cp == c).map(|(_, p)| *p))
            .unwrap_or(self.default_port)
    }

    /// The loopback address of a container port; `None` asks for `PORT`.
    pub fn addr(&self, container_port: Option<u16>) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.host_port(container_port)))
    }
}

fn reserve() -> Result<(TcpListener, u16)> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(Error::Port)?;
    let port = listener.local_addr().map_err(Error::Port)?.port();
    Ok((listener, port))
}
