//! `rouse proxy`: run the wake-on-connect proxy from a config file, or check one.
//!
//! With `[directory] kind = "store"` the routes come from the Sandbox objects of a Kubernetes
//! cluster (kubeconfig or in-cluster config): wakes patch `spec.operatingMode`, activity patches
//! `status.lastActivityTime`. With `kind = "static"` they come from the file.
//!
//! The file is reloaded when its modification time changes (checked every two seconds) and on
//! SIGHUP; an invalid file is rejected with every bad key, and the config in force stays.
//! SIGTERM or SIGINT drain the proxy (see `[drain]`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use anyhow::Context;
use rouse_proxy::config::DirectoryKind;
use rouse_proxy::{Config, Directory, Proxy, StaticDirectory, StoreDirectory};
use rouse_shared::store::{KubeStore, ListParams};
use tokio::signal::unix::{SignalKind, signal};

/// How often the config file's modification time is checked.
const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Arguments of `rouse proxy`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The config file (TOML; every key is in docs/proxy-config.md).
    #[arg(long, value_name = "FILE", env = "ROUSE_PROXY_CONFIG")]
    config: Option<PathBuf>,
    /// Check a config file and exit: status 0 when valid, 1 listing every problem otherwise.
    #[arg(long, value_name = "FILE", conflicts_with = "config")]
    check_config: Option<PathBuf>,
}

/// Runs or checks.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(path) = &args.check_config {
        return Ok(check(path));
    }
    let Some(path) = &args.config else {
        return Err(super::usage::usage(
            "give --config FILE to run the proxy, or --check-config FILE to check one",
        ));
    };
    crate::telemetry::init();
    let config = Config::from_file(path)?;
    super::open_files::raise_and_report(config.limits.max_connections);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(start(path, config))?;
    Ok(ExitCode::SUCCESS)
}

/// What a reload must keep: the directory the proxy was started with.
#[derive(Debug)]
enum Fixed {
    /// Static routes, replaced from each reloaded file.
    Static(StaticDirectory),
    /// Sandboxes on the cluster, of one namespace or all.
    Store { namespace: Option<String> },
}

/// Builds the directory the config names and serves until a signal.
async fn start(path: &Path, config: Config) -> anyhow::Result<()> {
    match config.directory.kind {
        DirectoryKind::Static => {
            let directory = StaticDirectory::new(&config.directory.routes);
            serve(path, config, directory.clone(), Fixed::Static(directory)).await
        }
        DirectoryKind::Store => {
            let client = super::cluster::client().await?;
            let namespace = config.directory.namespace.clone();
            let params = match &namespace {
                Some(namespace) => ListParams::namespace(namespace.clone()),
                None => ListParams::default(),
            };
            tracing::info!(
                directory.namespace = namespace.as_deref().unwrap_or("(all)"),
                "routing the sandboxes of the cluster"
            );
            let directory = StoreDirectory::with_params(KubeStore::new(client), params);
            serve(path, config, directory, Fixed::Store { namespace }).await
        }
    }
}

/// Prints whether the file is a valid config.
fn check(path: &Path) -> ExitCode {
    match Config::from_file(path) {
        Ok(_) => {
            println!("{}: ok", path.display());
            ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("error: {}: {err}", path.display());
            ExitCode::from(1)
        }
    }
}

async fn serve(
    path: &Path,
    config: Config,
    directory: impl Directory,
    fixed: Fixed,
) -> anyhow::Result<()> {
    // The handlers come first: a SIGTERM sent as soon as the listeners are logged must drain,
    // not kill.
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let mut hup = signal(SignalKind::hangup()).context("SIGHUP handler")?;
    let proxy = Proxy::start(config, directory).await?;
    let mut tick = tokio::time::interval(WATCH_INTERVAL);
    let mut seen = modified(path);
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                seen = modified(path);
                reload(&proxy, &fixed, path);
            }
            _ = tick.tick() => {
                let now = modified(path);
                if now != seen {
                    seen = now;
                    reload(&proxy, &fixed, path);
                }
            }
        }
    }
    proxy.shutdown().await;
    Ok(())
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Reads the file again and puts it in force, or logs why not and keeps the old config.
fn reload(proxy: &Proxy, fixed: &Fixed, path: &Path) {
    let config = match Config::from_file(path) {
        Ok(config) => config,
        Err(err) => {
            tracing::error!(config.path = %path.display(), error = %err, "config reload rejected; the old config stays");
            return;
        }
    };
    let unchanged = match fixed {
        Fixed::Static(_) => config.directory.kind == DirectoryKind::Static,
        Fixed::Store { namespace } => {
            config.directory.kind == DirectoryKind::Store
                && config.directory.namespace == *namespace
        }
    };
    if !unchanged {
        tracing::error!(config.path = %path.display(), "config reload rejected: directory.kind and directory.namespace cannot change while running");
        return;
    }
    let routes = config.directory.routes.clone();
    match proxy.reload(config) {
        Ok(()) => {
            if let Fixed::Static(directory) = fixed {
                directory.replace(&routes);
            }
            tracing::info!(config.path = %path.display(), "config reloaded");
        }
        Err(err) => {
            tracing::error!(config.path = %path.display(), error = %err, "config reload rejected; the old config stays");
        }
    }
}
