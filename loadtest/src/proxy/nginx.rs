//! nginx as the reference proxy (keep-alive upstream, no access log, one or more workers) and,
//! for the wrk comparison, as the backend itself; run in the foreground as a child process
//! with its config in a temporary directory.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// A running nginx; stopped when dropped.
pub struct Nginx {
    child: Child,
    _dir: tempfile::TempDir,
    /// Where it listens.
    pub addr: SocketAddr,
}

/// The nginx binary, if installed.
pub fn find() -> Option<PathBuf> {
    ["/usr/sbin/nginx", "/usr/local/sbin/nginx", "/usr/bin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

impl Nginx {
    /// Starts nginx (one worker) proxying `listen` to `backend`, keeping `keepalive` idle
    /// upstream connections, and waits until it accepts connections.
    pub fn start(
        binary: &PathBuf,
        listen: SocketAddr,
        backend: SocketAddr,
        keepalive: usize,
    ) -> anyhow::Result<Self> {
        Self::proxy(binary, listen, backend, keepalive, 1)
    }

    /// Starts nginx with `workers` worker processes proxying `listen` to `backend`.
    pub fn proxy(
        binary: &PathBuf,
        listen: SocketAddr,
        backend: SocketAddr,
        keepalive: usize,
        workers: usize,
    ) -> anyhow::Result<Self> {
        let server = format!(
            "upstream backend {{ server {backend}; keepalive {keepalive}; }}\n\
             server {{\n\
               listen {listen};\n\
               keepalive_requests 1000000;\n\
               location / {{\n\
                 proxy_pass http://backend;\n\
                 proxy_http_version 1.1;\n\
                 proxy_set_header Connection \"\";\n\
                 proxy_set_header Host $host;\n\
                 proxy_set_header X-Forwarded-For $remote_addr;\n\
                 proxy_buffering on;\n\
               }}\n\
             }}\n"
        );
        Self::run(binary, listen, &server, workers)
    }

    /// Starts nginx (one worker) as a backend answering every request with the same 13 bytes
    /// the hyper backend sends.
    pub fn backend(binary: &PathBuf, listen: SocketAddr) -> anyhow::Result<Self> {
        let server = format!(
            "server {{\n\
               listen {listen};\n\
               keepalive_requests 1000000;\n\
               location / {{ default_type text/plain; return 200 \"hello, world\\n\"; }}\n\
             }}\n"
        );
        Self::run(binary, listen, &server, 1)
    }

    /// Runs nginx with `server` (the `http` block's servers and upstreams) and `workers`
    /// worker processes; waits until it accepts connections on `listen`.
    fn run(
        binary: &PathBuf,
        listen: SocketAddr,
        server: &str,
        workers: usize,
    ) -> anyhow::Result<Self> {
        let dir = tempfile::tempdir()?;
        let prefix = dir.path();
        let config = format!(
            "worker_processes {workers};\n\
             daemon off;\n\
             pid {pid};\n\
             error_log stderr error;\n\
             events {{ worker_connections 20000; }}\n\
             http {{\n\
               access_log off;\n\
               client_body_temp_path {tmp};\n\
               proxy_temp_path {tmp};\n\
               fastcgi_temp_path {tmp};\n\
               uwsgi_temp_path {tmp};\n\
               scgi_temp_path {tmp};\n\
               {server}\
             }}\n",
            pid = prefix.join("nginx.pid").display(),
            tmp = prefix.display(),
        );
        let conf_path = prefix.join("nginx.conf");
        std::fs::write(&conf_path, config)?;
        let child = Command::new(binary)
            .arg("-p")
            .arg(prefix)
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .context("starting nginx")?;
        let mut nginx = Self {
            child,
            _dir: dir,
            addr: listen,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(listen).is_err() {
            if let Some(status) = nginx.child.try_wait()? {
                bail!("nginx exited at start: {status}");
            }
            if Instant::now() > deadline {
                bail!("nginx did not listen on {listen} within 10 s");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(nginx)
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        // SIGTERM, not SIGKILL: the master must take its worker down with it.
        let stopped = i32::try_from(self.child.id())
            .ok()
            .map(nix::unistd::Pid::from_raw)
            .is_some_and(|pid| {
                nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).is_ok()
            });
        let deadline = Instant::now() + Duration::from_secs(10);
        while stopped && Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
