//! `rouse up` as a child process of the benchmark: started on a data directory, its banner
//! read for the addresses, driven over plain HTTP/1.0, stopped with SIGINT.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::Value;

use super::{DEADLINE, NAME, POLL};

/// A `rouse up` child process, stopped with SIGINT.
pub(super) struct RouseUp {
    child: Option<Child>,
    api: SocketAddr,
    /// The proxy's HTTP address.
    pub(super) proxy: SocketAddr,
    admin: Option<SocketAddr>,
}

impl RouseUp {
    /// Starts `rouse up` with its wake path (`[runtime] direct_wake`) on or off.
    pub(super) fn start(rouse: &Path, data: &Path, direct_wake: bool) -> anyhow::Result<RouseUp> {
        Self::start_with(rouse, data, direct_wake, "", None)
    }

    /// [`RouseUp::start`] with more `[runtime]` keys (`runtime`, e.g. `"[runtime.gvisor]\n..."`
    /// lines appended after the section) and the runsc it finds first on its `PATH`.
    pub(super) fn start_with(
        rouse: &Path,
        data: &Path,
        direct_wake: bool,
        runtime: &str,
        runsc: Option<&Path>,
    ) -> anyhow::Result<RouseUp> {
        if !rouse.exists() {
            bail!(
                "{} does not exist; build it first: cargo build --release -p rouse",
                rouse.display()
            );
        }
        let config = data.join("config.toml");
        std::fs::write(
            &config,
            format!(
                "[api]\nlisten = \"127.0.0.1:0\"\ntls = false\n[http]\nlisten = \"127.0.0.1:0\"\n\
                 [admin]\nlisten = \"127.0.0.1:0\"\n[runtime]\ndirect_wake = {direct_wake}\n{runtime}"
            ),
        )?;
        let mut command = Command::new(rouse);
        if let Some(runsc) = runsc {
            command.env("PATH", rouse_testsupport::gvisor::path_with(runsc));
        }
        let mut child = command
            .arg("up")
            .arg("--no-auth")
            .arg("--data-dir")
            .arg(data.join("data"))
            .arg("--config")
            .arg(&config)
            .env(
                "RUST_LOG",
                std::env::var("ROUSE_LOG").unwrap_or_else(|_| "warn".to_owned()),
            )
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .with_context(|| format!("start {} up", rouse.display()))?;
        let stdout = child.stdout.take().context("piped stdout")?;
        let mut up = RouseUp {
            child: Some(child),
            api: SocketAddr::from(([127, 0, 0, 1], 0)),
            proxy: SocketAddr::from(([127, 0, 0, 1], 0)),
            admin: None,
        };
        // The banner comes first; a thread keeps draining stdout afterwards.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in std::io::BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
            {
                let _ = tx.send(line);
            }
        });
        let (mut api, mut proxy) = (None, None);
        while api.is_none() || proxy.is_none() || up.admin.is_none() {
            let line = rx
                .recv_timeout(DEADLINE)
                .context("no banner from rouse up")?;
            api = api.or_else(|| banner_addr(&line, "api: http://"));
            proxy = proxy.or_else(|| banner_addr(&line, "proxy: http://"));
            up.admin = up.admin.or_else(|| banner_addr(&line, "metrics: http://"));
        }
        up.api = api.context("api address")?;
        up.proxy = proxy.context("proxy address")?;
        Ok(up)
    }

    /// One REST call over HTTP/1.0, so the answer is never chunked.
    pub(super) fn api(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<(u16, Value)> {
        let body = body.map(Value::to_string).unwrap_or_default();
        let mut stream = TcpStream::connect(self.api)?;
        stream.set_read_timeout(Some(DEADLINE))?;
        write!(
            stream,
            "{method} {path} HTTP/1.0\r\nhost: localhost\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n{body}",
            body.len()
        )?;
        let mut answer = String::new();
        stream.read_to_string(&mut answer)?;
        let code = answer
            .get(9..12)
            .and_then(|c| c.parse().ok())
            .with_context(|| format!("not an HTTP answer: {answer:?}"))?;
        let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
        Ok((code, serde_json::from_str(body).unwrap_or(Value::Null)))
    }

    /// Means of the histograms that break a wake down, from `/metrics` (empty if unreadable).
    pub(super) fn means(&self) -> Vec<(&'static str, f64)> {
        let Some(text) = self.admin.and_then(metrics_text) else {
            return Vec::new();
        };
        // (label, histogram, a label filter on its lines)
        let wanted = [
            (
                "proxy: wake sent → route running",
                "rouse_proxy_wake_duration_seconds",
                "",
            ),
            (
                "proxy: connection held → dialled",
                "rouse_proxy_hold_duration_seconds",
                "",
            ),
            (
                "direct: read the sandbox",
                "rouse_controller_direct_wake_duration_seconds",
                "phase=\"read\"",
            ),
            (
                "direct: claim, queue the write, start",
                "rouse_controller_direct_wake_duration_seconds",
                "phase=\"start\"",
            ),
            (
                "direct: started → accepting",
                "rouse_controller_direct_wake_duration_seconds",
                "phase=\"accept\"",
            ),
            (
                "direct: total (wake called → endpoint)",
                "rouse_controller_direct_wake_duration_seconds",
                "phase=\"total\"",
            ),
            (
                "direct: write queued → answered",
                "rouse_controller_direct_wake_duration_seconds",
                "phase=\"write\"",
            ),
            (
                "store: patch (incl. commit)",
                "rouse_store_operation_duration_seconds",
                "op=\"patch\"",
            ),
            (
                "store: patch_status (incl. commit)",
                "rouse_store_operation_duration_seconds",
                "op=\"patch_status\"",
            ),
        ];
        let value = |name: &str, filter: &str| {
            text.lines()
                .filter(|l| l.starts_with(name) && l.contains(filter))
                .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .sum::<f64>()
        };
        wanted
            .into_iter()
            .filter_map(|(label, base, filter)| {
                let count = value(&format!("{base}_count"), filter);
                (count > 0.0).then(|| (label, value(&format!("{base}_sum"), filter) / count))
            })
            .collect()
    }

    /// Polls until the sandbox's condition `kind` has `status`.
    pub(super) fn wait_condition(&self, kind: &str, status: &str) -> anyhow::Result<()> {
        self.wait_condition_of(NAME, kind, status)
    }

    /// Polls until the condition `kind` of sandbox `name` has `status` (`"absent"`: until it
    /// has no such condition).
    pub(super) fn wait_condition_of(
        &self,
        name: &str,
        kind: &str,
        status: &str,
    ) -> anyhow::Result<()> {
        let path = format!("/v1/namespaces/default/sandboxes/{name}");
        let until = Instant::now() + DEADLINE;
        loop {
            let (_, sandbox) = self.api("GET", &path, None)?;
            let found = sandbox["status"]["conditions"]
                .as_array()
                .and_then(|c| c.iter().find(|c| c["type"] == kind))
                .map(|c| c["status"].clone());
            let holds = match found {
                Some(s) => s == status,
                None => status == "absent",
            };
            if holds {
                return Ok(());
            }
            if Instant::now() > until {
                bail!("{name}: not {kind}={status} within {DEADLINE:?}: {sandbox}");
            }
            std::thread::sleep(POLL);
        }
    }

    pub(super) fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        let pid = i32::try_from(child.id()).map(nix::unistd::Pid::from_raw);
        if let Ok(pid) = pid
            && nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).is_ok()
        {
            let until = Instant::now() + DEADLINE;
            while Instant::now() < until {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for RouseUp {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The text of `/metrics` on the admin listener.
fn metrics_text(admin: SocketAddr) -> Option<String> {
    let mut stream = TcpStream::connect(admin).ok()?;
    stream.set_read_timeout(Some(DEADLINE)).ok()?;
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nhost: localhost\r\n\r\n")
        .ok()?;
    let mut text = String::new();
    stream.read_to_string(&mut text).ok()?;
    Some(text)
}

pub(super) fn banner_addr(line: &str, prefix: &str) -> Option<SocketAddr> {
    line.strip_prefix(prefix)?
        .split([' ', '/'])
        .next()?
        .parse()
        .ok()
}
