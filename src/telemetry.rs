//! Log setup for long-running commands: `tracing` to stderr, filtered by `ROUSE_LOG` (or
//! `RUST_LOG`), `info` by default.

use tracing_subscriber::EnvFilter;

/// Installs the log subscriber once; later calls do nothing.
pub fn init() {
    let filter = std::env::var("ROUSE_LOG")
        .ok()
        .or_else(|| std::env::var("RUST_LOG").ok())
        .and_then(|spec| EnvFilter::try_new(spec).ok())
        .unwrap_or_else(|| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
