//! The `restore` scenario: waking a gVisor sandbox suspended by checkpoint (a Python server
//! holding `--mib` MiB of written memory) through `rouse up`'s proxy, beside two baselines
//! measured in the same run:
//!
//! - **bare restore**: `runsc restore` of a copy of the same image in the same network
//!   namespace and bundle, without Rouse: spawn → the first response byte;
//! - **cold start**: the same workload in a sandbox suspended by stop (`strategy: Stop`), woken
//!   through the proxy: `runsc run`, Python's start and the memory filled again.
//!
//! Each wake is connect → request → the first response byte through the proxy, with the
//! sandbox suspended (and its checkpoint recorded) before. Each checkpoint's time and image
//! size are read from its `Checkpointed` condition. Needs a current runsc (the pinned build
//! of testsupport/gvisor/build.sh) and root. With `--restore-matrix`, the bare side also runs
//! under each option runsc offers (`bare::matrix`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use serde_json::json;

use super::bare::{self, Bare, MatrixRow};
use super::up::RouseUp;
use super::{DEADLINE, Latencies, SETTLE, first_byte};

/// The sandbox suspended by checkpoint, and the one suspended by stop.
const WARM: &str = "restored";
const COLD: &str = "cold";
/// The port the workload listens on (in its own network namespace it is the container port).
const PORT: u16 = 8000;
/// Keep-alive HTTP/1.1 on `0.0.0.0:$PORT` (every address of the sandbox's own network
/// namespace), after writing `$MIB` MiB of memory that is not all zero pages.
const WORKLOAD: &str = r#"
import http.server, os
hold = bytearray(os.urandom(1 << 20)) * int(os.environ["MIB"])
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("0.0.0.0", int(os.environ["PORT"])), H).serve_forever()
"#;

/// What to run.
#[derive(Debug, Clone)]
pub struct RestoreOptions {
    /// The `rouse` binary (a release build).
    pub rouse: PathBuf,
    /// Wakes (and bare restores, and cold starts).
    pub cycles: usize,
    /// Stop starting cycles after this long per side.
    pub max_time: Duration,
    /// MiB of memory the workload writes.
    pub mib: usize,
    /// The runsc to run (`rouse up` and the bare restore).
    pub runsc: PathBuf,
    /// Restore with `runsc restore --background` (`[runtime.gvisor] background_restore`).
    pub background_restore: bool,
    /// The data directory (and so the checkpoint images) on tmpfs (`/dev/shm`) instead of
    /// the disk.
    pub tmpfs: bool,
    /// Also restore (and re-checkpoint) the image bare under each runsc option.
    pub matrix: bool,
}

/// The three sides and the image's size.
#[derive(Debug, Clone)]
pub struct RestoreReport {
    /// `runsc restore` alone: spawn → first byte.
    pub bare: Latencies,
    /// A wake of the checkpointed sandbox through the proxy: connect → first byte.
    pub wake: Latencies,
    /// A wake of the same workload suspended by stop: connect → first byte.
    pub cold: Latencies,
    /// The checkpoint image's size.
    pub image_bytes: u64,
    /// How long each `runsc checkpoint` of the warm sandbox took (its `Checkpointed`
    /// condition).
    pub checkpoints: Latencies,
    /// The MiB the workload wrote.
    pub mib: usize,
    /// The bare restore under each runsc option, when asked for.
    pub matrix: Option<Vec<MatrixRow>>,
}

/// Runs the whole scenario.
pub fn run(options: &RestoreOptions) -> anyhow::Result<RestoreReport> {
    if !nix::unistd::geteuid().is_root() {
        bail!("the restore scenario needs root (network namespaces for checkpointable gVisor)");
    }
    let mut data = tempfile::Builder::new();
    data.prefix("rouse-restore-");
    let data = if options.tmpfs {
        data.tempdir_in("/dev/shm")
    } else {
        data.tempdir()
    }
    .context("temporary data directory")?;
    let runtime = format!(
        "[runtime.gvisor]\nbackground_restore = {}\n",
        options.background_restore
    );
    // A checkpointed sandbox is never woken directly: the default wake path serves.
    let mut rouse = RouseUp::start_with(
        &options.rouse,
        data.path(),
        true,
        &runtime,
        Some(&options.runsc),
    )?;
    let dir = data.path().join("data");
    let result = sides(&rouse, &dir, options).map_err(|error| {
        let log = |name: &str| {
            let path = dir.join("logs/default").join(format!("{name}.log"));
            std::fs::read_to_string(path).unwrap_or_default()
        };
        error.context(format!(
            "workload logs:\n{WARM}:\n{}\n{COLD}:\n{}",
            log(WARM),
            log(COLD)
        ))
    });
    // Deleted, so their network namespaces go with them.
    let deleted = delete(&rouse, &[WARM, COLD]);
    rouse.stop();
    let report = result?;
    deleted?;
    Ok(report)
}

/// Deletes the sandboxes and waits until they are gone.
fn delete(rouse: &RouseUp, names: &[&str]) -> anyhow::Result<()> {
    for name in names {
        let path = format!("/v1/namespaces/default/sandboxes/{name}");
        rouse.api("DELETE", &path, None)?;
    }
    let until = Instant::now() + DEADLINE;
    for name in names {
        let path = format!("/v1/namespaces/default/sandboxes/{name}");
        while rouse.api("GET", &path, None)?.0 != 404 {
            if Instant::now() > until {
                bail!("{name} not deleted within {DEADLINE:?}");
            }
            std::thread::sleep(SETTLE);
        }
    }
    Ok(())
}

fn sides(rouse: &RouseUp, data: &Path, options: &RestoreOptions) -> anyhow::Result<RestoreReport> {
    create(rouse, WARM, "Checkpoint", options.mib)?;
    create(rouse, COLD, "Stop", options.mib)?;
    rouse.wait_condition_of(WARM, "Ready", "True")?;
    rouse.wait_condition_of(COLD, "Ready", "True")?;
    let warm_host = format!("{WARM}.default.sandbox.localhost");
    let cold_host = format!("{COLD}.default.sandbox.localhost");
    // A request first, so the proxy holds a pooled connection the suspend must reset.
    first_byte(rouse.proxy, &warm_host)?;
    let mut checkpoints = vec![suspend(rouse, WARM, true)?];
    let image = data.join("checkpoints/default").join(WARM).join("image");
    let bench = tempfile::tempdir().context("bare restore directory")?;
    let copy = bench.path().join("image");
    bare::copy(&image, &copy)?;
    let image_bytes = bare::size(&copy);
    let side = Bare::new(data, WARM, PORT, &options.runsc, &bench.path().join("root"))?;
    let flags: &[&str] = if options.background_restore {
        &["--background"]
    } else {
        &[]
    };
    let variant = bare::Variant {
        name: "bare runsc restore (spawn → first byte)",
        image: &copy,
        flags,
    };
    // Bare restore and wake alternate, so both see the same load on a shared machine: each
    // round checkpoints the sandbox, restores the copied image bare in its namespace (free
    // while the sandbox is suspended), then wakes the sandbox through the proxy.
    let mut bare_samples = Vec::new();
    let mut wake = Vec::new();
    let started = Instant::now();
    while wake.len() < options.cycles && started.elapsed() < options.max_time {
        if !wake.is_empty() {
            checkpoints.push(suspend(rouse, WARM, true)?);
        }
        bare_samples.extend(side.restores(&variant, 1, options.max_time)?.samples);
        std::thread::sleep(SETTLE);
        let t = Instant::now();
        first_byte(rouse.proxy, &warm_host)?;
        wake.push(t.elapsed());
        rouse.wait_condition_of(WARM, "Ready", "True")?;
        // Restored and ready: the image is gone, so the next suspend records a new one.
        rouse.wait_condition_of(WARM, "Checkpointed", "absent")?;
    }
    let bare = Latencies {
        name: variant.name,
        samples: bare_samples,
    };
    // The matrix last: the sandbox is suspended again so its namespace is free.
    let matrix = if options.matrix {
        suspend(rouse, WARM, true)?;
        Some(bare::matrix(
            &side,
            &copy,
            options.cycles,
            options.max_time,
        )?)
    } else {
        None
    };
    let mut cold = Vec::new();
    let started = Instant::now();
    while cold.len() < options.cycles && started.elapsed() < options.max_time {
        suspend(rouse, COLD, false)?;
        std::thread::sleep(SETTLE);
        let t = Instant::now();
        first_byte(rouse.proxy, &cold_host)?;
        cold.push(t.elapsed());
        rouse.wait_condition_of(COLD, "Ready", "True")?;
    }
    Ok(RestoreReport {
        bare,
        wake: Latencies {
            name: "wake by restore (connect → first byte)",
            samples: wake,
        },
        cold: Latencies {
            name: "wake by cold start (connect → first byte)",
            samples: cold,
        },
        image_bytes,
        matrix,
        checkpoints: Latencies {
            name: "runsc checkpoint (its Checkpointed condition)",
            samples: checkpoints.into_iter().flatten().collect(),
        },
        mib: options.mib,
    })
}

fn create(rouse: &RouseUp, name: &str, strategy: &str, mib: usize) -> anyhow::Result<()> {
    let sandbox = json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": name},
        "spec": {
            "suspension": {"strategy": strategy},
            "podTemplate": {"spec": {
                "runtimeClassName": "gvisor",
                "terminationGracePeriodSeconds": 1,
                "containers": [{
                    "name": "app",
                    "image": "python:3",
                    "command": ["python3", "-c", WORKLOAD],
                    "env": [{"name": "MIB", "value": mib.to_string()}],
                    "ports": [{"containerPort": PORT}],
                }],
            }},
        },
    });
    let (code, body) = rouse.api("POST", "/v1/namespaces/default/sandboxes", Some(&sandbox))?;
    if code != 201 {
        bail!("create {name} answered {code}: {body}");
    }
    Ok(())
}

/// Suspends `name` and waits until it is (and, when `checkpoint`, its image is recorded);
/// how long the checkpoint took, as its condition says.
fn suspend(rouse: &RouseUp, name: &str, checkpoint: bool) -> anyhow::Result<Option<Duration>> {
    let path = format!("/v1/namespaces/default/sandboxes/{name}");
    let patch = json!({"spec": {"operatingMode": "Suspended"}});
    let (code, body) = rouse.api("PATCH", &path, Some(&patch))?;
    if code != 200 {
        bail!("suspend {name} answered {code}: {body}");
    }
    rouse.wait_condition_of(name, "Suspended", "True")?;
    if !checkpoint {
        return Ok(None);
    }
    rouse.wait_condition_of(name, "Checkpointed", "True")?;
    let (_, sandbox) = rouse.api("GET", &path, None)?;
    // "memory image of N bytes saved in M ms; restored on wake"
    let message = sandbox["status"]["conditions"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["type"] == "Checkpointed"))
        .and_then(|c| c["message"].as_str())
        .unwrap_or_default()
        .to_owned();
    let ms = message
        .split_once(" saved in ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .with_context(|| format!("no checkpoint time in {message:?}"))?;
    Ok(Some(Duration::from_millis(ms)))
}

/// Prints the three sides and the ratios the goal is stated in.
pub fn print(report: &RestoreReport) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let image_mib = report.image_bytes as f64 / f64::from(1u32 << 20);
    let per_gib = 1024.0 / report.mib.max(1) as f64;
    println!(
        "image {image_mib:.1} MiB for {} MiB written: {:.2} GiB per GiB; checkpoint p50 {:.0} ms = {:.0} ms per GiB",
        report.mib,
        image_mib / 1024.0 * per_gib,
        ms(report.checkpoints.quantile(0.5)),
        ms(report.checkpoints.quantile(0.5)) * per_gib,
    );
    println!("{}", report.checkpoints.row(42, 1));
    for side in [&report.bare, &report.wake, &report.cold] {
        println!("{}", side.row(42, 1));
    }
    let ratio = |a: &Latencies, b: &Latencies, q| ms(a.quantile(q)) / ms(b.quantile(q)).max(1e-9);
    println!(
        "wake / bare restore: p50 {:.2}×  p99 {:.2}×  (goal ≤ 1.2× and ≤ 400 ms)",
        ratio(&report.wake, &report.bare, 0.5),
        ratio(&report.wake, &report.bare, 0.99)
    );
    println!(
        "wake / cold start:   p50 {:.2}×  p99 {:.2}×",
        ratio(&report.wake, &report.cold, 0.5),
        ratio(&report.wake, &report.cold, 0.99)
    );
    if let Some(rows) = &report.matrix {
        bare::print_matrix(rows);
    }
}
