//! A harness for end-to-end tests of `rouse up`: the real binary as a subprocess on a temporary
//! data directory, listening on 127.0.0.1:0, plus small HTTP helpers for its REST API and its
//! proxy. Every wait polls a condition under a deadline.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::Value;

mod http;
mod manifest;

pub use http::http;
// Each test binary uses a different part of the harness.
#[allow(unused_imports)]
pub use manifest::{SERVE, sandbox};

/// Bounds every wait of a test; only a failure ever takes this long.
pub const DEADLINE: Duration = Duration::from_secs(60);
/// How long `rouse up` may take to stop after SIGINT before it is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(30);
/// Pause between two checks of a condition.
const POLL: Duration = Duration::from_millis(50);

/// How to start `rouse up`.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Serve the REST API without a token.
    pub no_auth: bool,
    /// Start the admin listener (metrics) on 127.0.0.1:0.
    pub admin: bool,
    /// More TOML appended to the config file (sections not written by the harness).
    pub config: String,
    /// Serve the REST API over HTTPS (the default of `rouse up`); the harness's own HTTP
    /// helpers speak plain HTTP, so tests that use them leave this off.
    pub tls: bool,
    /// The runsc `rouse up` finds first on its `PATH` (the gVisor tests' pinned build, from
    /// `rouse_testsupport::gvisor::available`).
    pub runsc: Option<PathBuf>,
}

/// A running `rouse up`; stopped with SIGINT when dropped.
pub struct Rouse {
    child: Option<Child>,
    /// The data directory (kept by the test's `TempDir`).
    pub data: PathBuf,
    stderr: PathBuf,
    /// The REST API's address.
    pub api: SocketAddr,
    /// The proxy's HTTP address.
    pub proxy: SocketAddr,
    /// The admin listener's address, when started with one.
    pub admin: Option<SocketAddr>,
    /// The bearer token, unless started with `--no-auth`.
    pub token: Option<String>,
    /// Whether the REST API serves HTTPS.
    pub tls: bool,
}

impl Rouse {
    /// Starts `rouse up` on `dir/data` (config and stderr beside it) and waits for its banner.
    pub fn start(dir: &Path, options: &Options) -> Rouse {
        let data = dir.join("data");
        let config = dir.join("config.toml");
        let admin = if options.admin { "127.0.0.1:0" } else { "off" };
        std::fs::write(
            &config,
            format!(
                "[api]\nlisten = \"127.0.0.1:0\"\ntls = {}\n[http]\nlisten = \"127.0.0.1:0\"\n\
                 [admin]\nlisten = \"{admin}\"\n{}",
                options.tls, options.config
            ),
        )
        .expect("write config");
        // Each start appends, so a failure after a restart still shows the first run's output.
        let stderr_path = dir.join("stderr.log");
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&stderr_path)
            .expect("stderr file");
        let mut command = Command::new(env!("CARGO_BIN_EXE_rouse"));
        command
            .arg("up")
            .arg("--data-dir")
            .arg(&data)
            .arg("--config")
            .arg(&config)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr);
        if options.no_auth {
            command.arg("--no-auth");
        }
        if let Some(runsc) = &options.runsc {
            command.env("PATH", rouse_testsupport::gvisor::path_with(runsc));
        }
        let mut child = command.spawn().expect("spawn rouse up");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        // Reads stdout to its end so the child never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    // Nobody listens any more; keep draining.
                    continue;
                }
            }
        });
        let mut rouse = Rouse {
            child: Some(child),
            data,
            stderr: stderr_path,
            api: "0.0.0.0:0".parse().expect("placeholder"),
            proxy: "0.0.0.0:0".parse().expect("placeholder"),
            admin: None,
            token: None,
            tls: options.tls,
        };
        let until = Instant::now() + DEADLINE;
        let (mut api, mut proxy) = (None, None);
        let mut seen = Vec::new();
        while api.is_none() || proxy.is_none() || (options.admin && rouse.admin.is_none()) {
            let left = until.saturating_duration_since(Instant::now());
            let line = match rx.recv_timeout(left) {
                Ok(line) => line,
                Err(err) => rouse.fail(&format!(
                    "no complete banner from rouse up ({err}); stdout so far: {seen:?}"
                )),
            };
            api = api
                .or_else(|| banner_addr(&line, "api: http://"))
                .or_else(|| banner_addr(&line, "api: https://"));
            proxy = proxy.or_else(|| banner_addr(&line, "proxy: http://"));
            rouse.admin = rouse
                .admin
                .or_else(|| banner_addr(&line, "metrics: http://"));
            seen.push(line);
        }
        rouse.api = api.expect("loop ends with the api address");
        rouse.proxy = proxy.expect("loop ends with the proxy address");
        if !options.no_auth {
            let token = std::fs::read_to_string(rouse.data.join("token")).expect("token file");
            rouse.token = Some(token.trim().to_owned());
        }
        rouse
    }

    /// Panics with `message` and everything `rouse up` wrote to stderr.
    pub fn fail(&self, message: &str) -> ! {
        let stderr = std::fs::read_to_string(&self.stderr).unwrap_or_default();
        let tail: String = stderr
            .lines()
            .rev()
            .take(80)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n");
        panic!("{message}\n--- rouse up stderr (last 80 lines) ---\n{tail}");
    }

    /// The REST API's URL (`https://` when started with TLS).
    pub fn api_url(&self) -> String {
        let scheme = if self.tls { "https" } else { "http" };
        format!("{scheme}://{}", self.api)
    }

    /// The kubeconfig `rouse up` wrote.
    pub fn kubeconfig(&self) -> PathBuf {
        self.data.join("kubeconfig")
    }

    /// The pid of `rouse up` while it runs.
    pub fn pid(&self) -> Option<i32> {
        self.child.as_ref().and_then(|c| i32::try_from(c.id()).ok())
    }

    /// Stops `rouse up` with SIGINT and waits for it to exit; true when it exited cleanly.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return true;
        };
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits i32"));
        if kill(pid, Signal::SIGINT).is_err() {
            return child.wait().is_ok_and(|s| s.success());
        }
        let until = Instant::now() + STOP_DEADLINE;
        while Instant::now() < until {
            match child.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) => std::thread::sleep(POLL),
                Err(_) => break,
            }
        }
        // The last resort: it did not stop in time.
        let _ = child.kill();
        let _ = child.wait();
        false
    }

    /// The log file of a sandbox in `default`.
    pub fn log_path(&self, name: &str) -> PathBuf {
        rouse_shared::datadir::log_file(&self.data, "default", name)
    }

    /// A volume's directory of a sandbox in `default`.
    pub fn volume(&self, name: &str, volume: &str) -> PathBuf {
        self.data.join("volumes/default").join(name).join(volume)
    }

    /// The runs of the sandbox's workload so far, from its log: one entry per start by the
    /// platform (a create, a wake, a restart of `rouse up`), holding the run's latest pid. A
    /// restart after the process exited (restart policy, e.g. when another process took its
    /// port first) continues the run.
    pub fn runs(&self, name: &str) -> Vec<i32> {
        let log = std::fs::read_to_string(self.log_path(name)).unwrap_or_default();
        let mut runs = Vec::new();
        let mut after_exit = false;
        for line in log.lines().filter_map(|l| l.strip_prefix("rouse: ")) {
            if let Some(pid) = line.strip_prefix("started pid ") {
                let pid = pid.trim().parse().unwrap_or_default();
                match runs.last_mut() {
                    Some(last) if after_exit => *last = pid,
                    _ => runs.push(pid),
                }
            }
            after_exit = line.starts_with("exited with");
        }
        runs
    }

    /// The sandbox's workload log, for failure messages.
    pub fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.log_path(name)).unwrap_or_default()
    }

    /// Runs the `rouse` CLI against this `rouse up` (its server and data directory, no token
    /// or server from the environment).
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        std::process::Command::new(env!("CARGO_BIN_EXE_rouse"))
            .args(args)
            .arg("--server")
            .arg(self.api_url())
            .arg("--data-dir")
            .arg(&self.data)
            .env_remove("ROUSE_TOKEN")
            .env_remove("ROUSE_SERVER")
            .output()
            .expect("run the rouse CLI")
    }

    /// Sends a request to the REST API (with the token, if any).
    pub async fn api(&self, method: &str, path: &str, body: Option<&Value>) -> (u16, Value) {
        self.api_as(method, path, body, self.token.as_deref()).await
    }

    /// Sends a request to the REST API with the given token (or none).
    pub async fn api_as(
        &self,
        method: &str,
        path: &str,
        body: Option<&Value>,
        token: Option<&str>,
    ) -> (u16, Value) {
        let mut headers = vec![("content-type", "application/json".to_owned())];
        if let Some(token) = token {
            headers.push(("authorization", format!("Bearer {token}")));
        }
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        match http(self.api, method, path, "localhost", &headers, body).await {
            Ok((code, text)) => {
                let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
                (code, value)
            }
            Err(err) => self.fail(&format!("{method} {path} to the api failed: {err}")),
        }
    }

    /// Creates a sandbox in `default`.
    pub async fn create(&self, sandbox: &Value) {
        let (code, body) = self
            .api("POST", "/v1/namespaces/default/sandboxes", Some(sandbox))
            .await;
        if code != 201 {
            self.fail(&format!("create answered {code}: {body}"));
        }
    }

    /// Reads a sandbox in `default`; `None` when it does not exist.
    pub async fn sandbox(&self, name: &str) -> Option<Value> {
        let path = format!("/v1/namespaces/default/sandboxes/{name}");
        match self.api("GET", &path, None).await {
            (200, body) => Some(body),
            (404, _) => None,
            (code, body) => self.fail(&format!("GET {path} answered {code}: {body}")),
        }
    }

    /// Waits until `check` holds for the sandbox (or its absence), returning the last read.
    pub async fn wait_for(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(Option<&Value>) -> bool,
    ) -> Option<Value> {
        let until = Instant::now() + DEADLINE;
        loop {
            let sandbox = self.sandbox(name).await;
            if check(sandbox.as_ref()) {
                return sandbox;
            }
            if Instant::now() > until {
                self.fail(&format!(
                    "sandbox {name}: not {what} within {DEADLINE:?}; last: {sandbox:?}"
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits until the sandbox's condition `kind` has `status` (and `reason`, if given).
    pub async fn wait_condition(
        &self,
        name: &str,
        kind: &str,
        status: &str,
        reason: Option<&str>,
    ) -> Value {
        let what = format!("{kind}={status} {reason:?}");
        self.wait_for(name, &what, |s| {
            s.and_then(|s| condition(s, kind))
                .is_some_and(|c| c["status"] == status && reason.is_none_or(|r| c["reason"] == r))
        })
        .await
        .expect("the condition holds only on an existing sandbox")
    }

    /// A GET through the proxy with the sandbox's host name.
    pub async fn get(&self, name: &str, path: &str) -> Result<(u16, String), String> {
        let host = format!("{name}.default.sandbox.localhost");
        http(self.proxy, "GET", path, &host, &[], String::new()).await
    }

    /// The value of a counter (summed over its label sets matching `labels`) on `/metrics`.
    pub async fn metric(&self, name: &str, labels: &str) -> f64 {
        let admin = self.admin.expect("started with the admin listener");
        let (code, text) = http(admin, "GET", "/metrics", "localhost", &[], String::new())
            .await
            .unwrap_or_else(|err| self.fail(&format!("GET /metrics: {err}")));
        assert_eq!(code, 200, "GET /metrics: {text}");
        text.lines()
            .filter(|l| l.starts_with(name) && l.contains(labels))
            .filter(|l| l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    }
}

impl Drop for Rouse {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The address after `prefix` on a banner line (`api: http://127.0.0.1:1234 (...)`).
fn banner_addr(line: &str, prefix: &str) -> Option<SocketAddr> {
    let rest = line.strip_prefix(prefix)?;
    let addr = rest.split([' ', '/']).next()?;
    addr.parse().ok()
}

/// The condition `kind` of a sandbox, if present.
pub fn condition<'a>(sandbox: &'a Value, kind: &str) -> Option<&'a Value> {
    sandbox["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
}

/// Whether a process with that pid exists (and is not a zombie of ours).
pub fn alive(pid: i32) -> bool {
    if kill(Pid::from_raw(pid), None).is_err() {
        return false;
    }
    // A zombie still answers signal 0; its state in /proc says it is gone.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z')),
        Err(_) => false,
    }
}

/// Waits until `check` holds, polling; panics naming `what` after the deadline.
pub async fn eventually(what: &str, check: impl Fn() -> bool) {
    let until = Instant::now() + DEADLINE;
    while !check() {
        assert!(Instant::now() < until, "not {what} within {DEADLINE:?}");
        tokio::time::sleep(POLL).await;
    }
}

/// The pids of live processes that are workloads of the data directory `data`: their
/// environment says so (`ROUSE_OWNER`), or they run in a directory under it (the process
/// runtime's working directory is a volume or scratch directory).
pub fn workload_processes(data: &Path) -> Vec<i32> {
    let owner = std::fs::canonicalize(data).unwrap_or_else(|_| data.to_path_buf());
    let marker = format!("ROUSE_OWNER={}", owner.display());
    let mut pids = Vec::new();
    let Ok(procs) = std::fs::read_dir("/proc") else {
        return pids;
    };
    for entry in procs.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        let marked = std::fs::read(entry.path().join("environ"))
            .is_ok_and(|env| env.split(|b| *b == 0).any(|v| v == marker.as_bytes()));
        let inside =
            std::fs::read_link(entry.path().join("cwd")).is_ok_and(|cwd| cwd.starts_with(&owner));
        if (marked || inside) && alive(pid) {
            pids.push(pid);
        }
    }
    pids
}
