//! Starts a real single-node Kubernetes (docs/testing.md, "The real node") for local use,
//! importing the image archives given as arguments and creating the RuntimeClass `gvisor`,
//! prints its kubeconfig and runs until interrupted:
//!
//! ```text
//! cargo run -p rouse-testsupport --bin real-node -- IMAGE.tar...
//! ```

use std::path::PathBuf;

use anyhow::Result;
use rouse_testsupport::node::RealNode;

fn main() -> Result<()> {
    let images: Vec<PathBuf> = std::env::args_os().skip(1).map(PathBuf::from).collect();
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
