//! `proxy --serve`: Rouse alone in front of an nginx backend, for profilers.
//!
//! Prints the proxy's address and the host to name, then serves until stdin closes, so
//! `perf record -p` or `valgrind --tool=callgrind` can watch exactly the proxy's process
//! while wrk drives it (see docs/benchmarks.md, "Profile").

use std::io::Read;

use anyhow::Context;
use rouse_proxy::SandboxKey;

use super::nginx::{self, Nginx};
use super::rouse::{BenchDirectory, RunningProxy, bench_config};
use super::wrk::{HOST, free_addr};

/// Serves Rouse with `workers` worker threads until stdin closes.
pub fn run(workers: usize) -> anyhow::Result<()> {
    let nginx_bin = nginx::find().context("nginx is needed (apt-get install nginx)")?;
    super::system::raise_fd_limit().ok();
    let backend = Nginx::backend(&nginx_bin, free_addr()?)?;
    let directory = BenchDirectory::new();
    directory.running(SandboxKey::new("default", "app"), backend.addr);
    let proxy = RunningProxy::start_with_workers(bench_config(None, false)?, directory, workers)?;
    let addr = proxy.proxy().addrs().http.context("rouse http address")?;
    println!("rouse http://{addr}/ host {HOST} backend {}", backend.addr);
    // Serve until stdin closes (or fails): the caller decides how long.
    let mut sink = Vec::new();
    let _ = std::io::stdin().read_to_end(&mut sink);
    drop(proxy);
    drop(backend);
    Ok(())
}
