//! Readiness: the pod's `readinessProbe` (httpGet or tcpSocket) against the workload's
//! loopback ports, or a TCP connect to `PORT` when there is none.
//!
//! Until the first success after a start, probes run on a fast schedule (10 ms doubling up to
//! 100 ms), like a startup probe, so a wake is not delayed by a whole period; after that every
//! `periodSeconds`, with `successThreshold`/`failureThreshold` applied.

use std::convert::Infallible;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::ports::PortMap;
use super::readiness::{ProbeAction, Readiness};

/// The first delay of the fast schedule before the first success.
const FAST_START: Duration = Duration::from_millis(10);
/// The longest delay of the fast schedule: a slow starter costs at most ten connects a second.
const FAST_MAX: Duration = Duration::from_millis(100);
/// The most bytes read looking for an HTTP status line.
const MAX_STATUS_LINE: usize = 1024;

impl Readiness {
    /// Probes forever, calling `report` whenever readiness changes; the caller drops the
    /// future when the workload stops.
    pub async fn run(&self, ports: &PortMap, mut report: impl FnMut(bool)) -> Infallible {
        tokio::time::sleep(self.initial_delay).await;
        let mut ready = false;
        let mut successes = 0u32;
        let mut failures = 0u32;
        let fast_max = FAST_MAX.min(self.period);
        let mut delay = FAST_START.min(fast_max);
        loop {
            if self.check(ports).await {
                failures = 0;
                successes = successes.saturating_add(1);
                if !ready && successes >= self.success_threshold {
                    ready = true;
                    report(true);
                }
            } else {
                successes = 0;
                failures = failures.saturating_add(1);
                if ready && failures >= self.failure_threshold {
                    ready = false;
                    report(false);
                }
            }
            let wait = if ready { self.period } else { delay };
            delay = (delay * 2).min(fast_max);
            tokio::time::sleep(wait).await;
        }
    }

    /// One check, bounded by the timeout.
    pub async fn check(&self, ports: &PortMap) -> bool {
        let attempt = async {
            match &self.action {
                ProbeAction::Connect => TcpStream::connect(ports.addr(None)).await.is_ok(),
                ProbeAction::Tcp { container_port } => {
                    TcpStream::connect(ports.addr(*container_port))
                        .await
                        .is_ok()
                }
                ProbeAction::Http {
                    container_port,
                    path,
                    headers,
                } => http_get(ports, *container_port, path, headers)
                    .await
                    .is_some_and(|status| (200..400).contains(&status)),
            }
        };
        tokio::time::timeout(self.timeout, attempt)
            .await
            .unwrap_or(false)
    }
}

/// Sends one GET and returns the response status code.
async fn http_get(
    ports: &PortMap,
    container_port: Option<u16>,
    path: &str,
    headers: &[(String, String)],
) -> Option<u16> {
    let addr = ports.addr(container_port);
    let mut stream = TcpStream::connect(addr).await.ok()?;
    let mut request = format!("GET {path} HTTP/1.1\r\n");
    let has_host = headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host"));
    if !has_host {
        request.push_str(&format!("Host: {addr}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("User-Agent: rouse-probe\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut buf = Vec::with_capacity(128);
    let mut chunk = [0u8; 256];
    while !buf.windows(2).any(|w| w == b"\r\n") && buf.len() < MAX_STATUS_LINE {
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            break;
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    parse_status(&buf)
}

/// The status code of an HTTP/1.x status line.
fn parse_status(buf: &[u8]) -> Option<u16> {
    let line = buf.split(|b| *b == b'\r').next()?;
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split(' ');
    if !parts.next()?.starts_with("HTTP/1.") {
        return None;
    }
    parts.next()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{ProbeAction, Readiness, parse_status};
    use crate::platform::local::PortMap;

    #[tokio::test]
    async fn ready_on_first_success_and_unready_after_the_failure_threshold() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let ports = PortMap {
            host: std::net::Ipv4Addr::LOCALHOST,
            default_port: port,
            mapped: vec![(8080, port)],
        };
        let readiness = Readiness {
            action: ProbeAction::Tcp {
                container_port: Some(8080),
            },
            period: Duration::from_secs(1),
            failure_threshold: 2,
            ..Readiness::default()
        };
        let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
        let probing = tokio::spawn(async move {
            let never = readiness.run(&ports, |ready| {
                let _ = tx.send(ready);
            });
            match never.await {}
        });
        let deadline = Duration::from_secs(30);
        let first = tokio::time::timeout(deadline, rx.recv()).await;
        assert_eq!(first.expect("ready in time"), Some(true));
        drop(listener);
        let second = tokio::time::timeout(deadline, rx.recv()).await;
        assert_eq!(second.expect("unready in time"), Some(false));
        probing.abort();
    }

    #[test]
    fn status_lines() {
        assert_eq!(parse_status(b"HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(parse_status(b"HTTP/1.0 503 Busy\r\nx"), Some(503));
        assert_eq!(parse_status(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(parse_status(b"HTTP/1.1 abc\r\n"), None);
    }
}
