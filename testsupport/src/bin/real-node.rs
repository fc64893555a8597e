//! Starts a real single-node Kubernetes (docs/testing.md, "The real node") for local use,
//! with the pause and Python runtime images, the Rouse image of `--rouse BINARY` and any
//! further image archives given, creates the RuntimeClass `gvisor`, prints its kubeconfig and
//! runs until interrupted (as root):
//!
//! ```text
//! cargo run -p rouse-testsupport --bin real-node -- [--rouse target/release/rouse] [IMAGE.tar...]
//! ```

use std::path::PathBuf;

use anyhow::{Context, Result};
use rouse_testsupport::node::RealNode;

fn main() -> Result<()> {
    use rouse_testsupport::image;
    let mut images = vec![
        image::pause_image()?.archive,
        image::python_runtime_image()?.archive,
    ];
    let mut args = std::env::args_os().skip(1);
    while let Some(arg) = args.next() {
        if arg == "--rouse" {
            let binary = PathBuf::from(args.next().context("--rouse needs a binary")?);
            images.push(image::rouse_image(&binary)?.archive);
        } else {
            images.push(PathBuf::from(arg));
        }
    }
    let started = std::time::Instant::now();
    let node = RealNode::start(&images)?;
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(node.create_runtime_class())?;
    println!("export KUBECONFIG={}", node.kubeconfig().display());
    eprintln!(
        "node Ready at {} after {:.1} s (logs in {}); Ctrl-C stops it",
        node.url(),
        started.elapsed().as_secs_f64(),
        node.dir().display()
    );
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(async {
            let mut term =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
            tokio::select! {
                r = tokio::signal::ctrl_c() => r,
                _ = term.recv() => Ok(()),
            }
        })?;
    node.stop();
    Ok(())
}
