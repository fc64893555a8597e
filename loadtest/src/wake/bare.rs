//! The restore scenario's baselines without Rouse: `runsc restore` (and `runsc checkpoint`)
//! of a copy of the warm sandbox's image, run by hand in the sandbox's own network namespace
//! and bundle under another runsc root, and the option matrix: the same image restored and
//! re-checkpointed under each option the runsc offers (uncompressed or compressed image,
//! direct file I/O, background loading of memory, image on tmpfs or disk), so the choice of
//! Rouse's defaults rests on one run's figures.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

use super::{DEADLINE, Latencies};

/// The container id of every bare restore.
const ID: &str = "rouse_bench_bare";

/// What a bare restore needs: the runsc, its own root, and the sandbox's bundle and address.
pub struct Bare {
    runsc: PathBuf,
    root: PathBuf,
    bundle: PathBuf,
    namespace: String,
    device: String,
    ip: Ipv4Addr,
    port: u16,
}

/// One way of restoring: the image and the extra `runsc restore` flags.
pub struct Variant<'a> {
    /// What is printed.
    pub name: &'static str,
    /// The image directory.
    pub image: &'a Path,
    /// Flags after `restore`.
    pub flags: &'a [&'a str],
}

/// One row of the option matrix.
#[derive(Debug, Clone)]
pub struct MatrixRow {
    /// The restores of this variant.
    pub restores: Latencies,
    /// The image's size.
    pub image_bytes: u64,
    /// How long the checkpoint that wrote this image took (the matrix's own), if it made one.
    pub checkpoint: Option<Latencies>,
}

impl Bare {
    /// The bare side of the sandbox `name` in Rouse's data directory `data`, with its own
    /// runsc root under `root`.
    pub fn new(
        data: &Path,
        name: &str,
        port: u16,
        runsc: &Path,
        root: &Path,
    ) -> anyhow::Result<Bare> {
        let index: u32 = std::fs::read_to_string(data.join("run/netns/default").join(name))
            .context("the sandbox's network namespace index")?
            .trim()
            .parse()?;
        std::fs::create_dir_all(root)?;
        Ok(Bare {
            runsc: runsc.to_owned(),
            root: root.to_owned(),
            bundle: data.join("run/bundles/default").join(name),
            namespace: format!("rouse-{index}"),
            device: format!("rvs{index}"),
            ip: Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 234, 0, 0)) + index * 4 + 2),
            port,
        })
    }

    /// `cycles` restores of `variant` (bounded by `max_time`): spawn → first byte.
    pub fn restores(
        &self,
        variant: &Variant<'_>,
        cycles: usize,
        max_time: Duration,
    ) -> anyhow::Result<Latencies> {
        let mut samples = Vec::new();
        let started = Instant::now();
        while samples.len() < cycles && started.elapsed() < max_time {
            let t = Instant::now();
            let mut child = self.spawn(variant)?;
            let result = answered(self.addr(), t + DEADLINE);
            let took = t.elapsed();
            self.stop(&mut child);
            result
                .with_context(|| format!("the bare restore ({}) never answered", variant.name))?;
            samples.push(took);
        }
        Ok(Latencies {
            name: variant.name,
            samples,
        })
    }

    /// Restores `from` fully, then checkpoints it into `into` with `flags` after
    /// `checkpoint`, `times` times: how long each `runsc checkpoint` took.
    pub fn checkpoints(
        &self,
        from: &Path,
        into: &Path,
        flags: &[&str],
        times: usize,
    ) -> anyhow::Result<Latencies> {
        let mut samples = Vec::new();
        for _ in 0..times {
            let _ = std::fs::remove_dir_all(into);
            std::fs::create_dir_all(into)?;
            let mut child = self.spawn(&variant("restore to checkpoint", from, &[]))?;
            let ready = answered(self.addr(), Instant::now() + DEADLINE);
            let t = Instant::now();
            let status = ready.and_then(|()| {
                Ok(Command::new(&self.runsc)
                    .arg("--root")
                    .arg(&self.root)
                    .arg("checkpoint")
                    .args(flags)
                    .arg("--image-path")
                    .arg(into)
                    .arg(ID)
                    .stdout(Stdio::null())
                    .status()?)
            });
            let took = t.elapsed();
            self.stop(&mut child);
            let status = status.with_context(|| format!("checkpoint {flags:?}"))?;
            if !status.success() {
                bail!("runsc checkpoint {flags:?} failed: {status}");
            }
            samples.push(took);
        }
        Ok(Latencies {
            name: "checkpoint",
            samples,
        })
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((self.ip, self.port))
    }

    /// Puts the address back in the namespace (runsc moved it into gVisor last time, and Rouse
    /// does the same) and spawns `runsc restore` with Rouse's command line.
    fn spawn(&self, variant: &Variant<'_>) -> anyhow::Result<Child> {
        let _ = Command::new("ip")
            .args(["-n", &self.namespace, "addr", "replace"])
            .arg(format!("{}/30", self.ip))
            .args(["dev", &self.device])
            .status();
        Command::new(&self.runsc)
            .arg("--root")
            .arg(&self.root)
            .args([
                "--platform=systrap",
                "--network=sandbox",
                "--overlay2=root:memory",
                "--ignore-cgroups",
                "restore",
            ])
            .args(variant.flags)
            .arg("--image-path")
            .arg(variant.image)
            .arg("--bundle")
            .arg(&self.bundle)
            .arg(ID)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("spawn runsc restore")
    }

    /// Kills and deletes the bare container. A management call's failure shows in the next
    /// restore, which then never answers.
    fn stop(&self, child: &mut Child) {
        let runsc = |args: &[&str]| {
            let _ = Command::new(&self.runsc)
                .arg("--root")
                .arg(&self.root)
                .args(args)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        };
        runsc(&["kill", "--all", ID, "9"]);
        let _ = child.kill();
        let _ = child.wait();
        runsc(&["delete", "--force", ID]);
    }
}

/// The option matrix over the uncompressed image `image` (on disk): each restore option, the
/// image on tmpfs, and images re-checkpointed uncompressed, with direct I/O and compressed.
pub fn matrix(
    bare: &Bare,
    image: &Path,
    cycles: usize,
    max_time: Duration,
) -> anyhow::Result<Vec<MatrixRow>> {
    let work = tempfile::tempdir().context("option matrix directory")?;
    let shm = tempfile::Builder::new()
        .prefix("rouse-restore-image-")
        .tempdir_in("/dev/shm")
        .context("tmpfs image directory")?;
    let on_tmpfs = shm.path().join("image");
    copy(image, &on_tmpfs)?;
    let plain = work.path().join("none");
    let direct = work.path().join("direct");
    let flate = work.path().join("flate");
    let times = cycles.clamp(1, 3);
    let plain_written = bare.checkpoints(image, &plain, &[], times)?;
    let direct_written = bare.checkpoints(image, &direct, &["--direct"], times)?;
    let flate_flags = ["--compression=flate-best-speed"];
    let flate_written = bare.checkpoints(image, &flate, &flate_flags, times)?;
    let variants: [(Variant<'_>, Option<Latencies>); 7] = [
        (
            variant("uncompressed, disk", &plain, &[]),
            Some(plain_written),
        ),
        (
            variant(
                "uncompressed, disk, --background",
                &plain,
                &["--background"],
            ),
            None,
        ),
        (
            variant("uncompressed, disk, --direct", &plain, &["--direct"]),
            None,
        ),
        (variant("uncompressed, tmpfs", &on_tmpfs, &[]), None),
        (
            variant(
                "uncompressed, tmpfs, --background",
                &on_tmpfs,
                &["--background"],
            ),
            None,
        ),
        (
            variant("written with --direct, disk", &direct, &[]),
            Some(direct_written),
        ),
        (
            variant("flate-best-speed, disk", &flate, &[]),
            Some(flate_written),
        ),
    ];
    // Round robin, one restore of each per round, so every variant sees the same load.
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let started = Instant::now();
    for _ in 0..cycles {
        if started.elapsed() >= max_time {
            break;
        }
        for ((variant, _), samples) in variants.iter().zip(&mut samples) {
            samples.extend(bare.restores(variant, 1, max_time)?.samples);
        }
    }
    Ok(variants
        .into_iter()
        .zip(samples)
        .map(|((variant, checkpoint), samples)| MatrixRow {
            image_bytes: size(variant.image),
            restores: Latencies {
                name: variant.name,
                samples,
            },
            checkpoint,
        })
        .collect())
}

fn variant<'a>(name: &'static str, image: &'a Path, flags: &'a [&'a str]) -> Variant<'a> {
    Variant { name, image, flags }
}

/// Prints the matrix: per variant the image size, its checkpoint's p50 and its restores.
pub fn print_matrix(rows: &[MatrixRow]) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    println!("-- bare restore under each runsc option (same image, same run)");
    println!(
        "{:<36} {:>9} {:>14} {:>4} {:>9} {:>9}",
        "variant", "image MiB", "checkpoint p50", "n", "p50 ms", "p99 ms"
    );
    for row in rows {
        let checkpoint = row
            .checkpoint
            .as_ref()
            .map(|c| format!("{:.0} ms", ms(c.quantile(0.5))))
            .unwrap_or_else(|| "-".to_owned());
        println!(
            "{:<36} {:>9.1} {:>14} {:>4} {:>9.0} {:>9.0}",
            row.restores.name,
            row.image_bytes as f64 / f64::from(1u32 << 20),
            checkpoint,
            row.restores.samples.len(),
            ms(row.restores.quantile(0.5)),
            ms(row.restores.quantile(0.99)),
        );
    }
}

/// Copies the image directory `from` to `to`.
pub fn copy(from: &Path, to: &Path) -> anyhow::Result<()> {
    let status = Command::new("cp")
        .args(["-a", "--no-target-directory"])
        .arg(from)
        .arg(to)
        .status()?;
    if !status.success() {
        bail!(
            "copying the image {} to {} failed",
            from.display(),
            to.display()
        );
    }
    Ok(())
}

/// The bytes of the files in `dir`.
pub fn size(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// Retries a GET on `addr` until its first response byte arrives or `until`: each connect
/// is bounded, since an address in a namespace nobody answers in yet can swallow a SYN.
fn answered(addr: SocketAddr, until: Instant) -> anyhow::Result<()> {
    loop {
        let attempt = (|| -> anyhow::Result<()> {
            let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(200))?;
            stream.set_read_timeout(Some(DEADLINE))?;
            stream.set_nodelay(true)?;
            stream.write_all(b"GET / HTTP/1.1\r\nhost: localhost\r\n\r\n")?;
            let mut byte = [0u8; 1];
            if stream.read(&mut byte)? == 0 {
                bail!("{addr} closed without answering");
            }
            Ok(())
        })();
        match attempt {
            Ok(()) => return Ok(()),
            Err(error) if Instant::now() > until => return Err(error),
            Err(_) => std::thread::sleep(Duration::from_millis(1)),
        }
    }
}
