//! `rouse up`: standalone mode in one process — the embedded store, the sandbox reconciler on
//! the local platform, the wake-on-connect proxy and the REST API.
//!
//! The same reconciler and proxy as in Kubernetes mode run here behind the standalone
//! adapters: `EmbeddedStore` for `Store`, `LocalPlatform` for `Platform`, and the proxy's
//! `StoreDirectory` on the embedded store. Ctrl-C (or SIGTERM) drains the proxy and the API and
//! stops every workload cleanly; starting again on the same data directory restores the
//! objects and volumes and restarts what was running. SIGHUP (or a change of the config file)
//! reloads the proxy's sections of the config.

mod config;

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use anyhow::{Context, bail};
use rouse_controller::api::{self, ApiConfig, ApiState};
use rouse_controller::mode::local::{self as standalone, LocalMode};
use rouse_controller::platform::local::{ActivityView, LocalConfig, LocalPlatform};
use rouse_controller::store::{EmbeddedStore, STORE_FILE_NAME};
use rouse_proxy::directory::{DirectDirectory, DirectStart, DirectWake};
use rouse_proxy::{Proxy, StoreDirectory};
use tokio::signal::unix::{SignalKind, signal};
use tokio_util::sync::CancellationToken;

pub use config::UpConfig;

/// How often the config file's modification time is checked for a reload.
const WATCH_INTERVAL: Duration = Duration::from_secs(2);

/// Arguments of `rouse up`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The data directory (store, volumes, logs, token); default `$XDG_DATA_HOME/rouse` or
    /// `~/.local/share/rouse`.
    #[arg(long, value_name = "DIR", env = "ROUSE_DATA_DIR")]
    data_dir: Option<PathBuf>,
    /// The config file (TOML): `[api]`, `[runtime]` and every proxy section of
    /// docs/proxy-config.md; see docs/standalone.md.
    #[arg(long, value_name = "FILE", env = "ROUSE_UP_CONFIG")]
    config: Option<PathBuf>,
    /// Serve the REST API without a bearer token (for tests and trusted machines only).
    #[arg(long)]
    no_auth: bool,
}

/// Runs standalone mode until Ctrl-C or SIGTERM.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let config = match &args.config {
        Some(path) => UpConfig::from_file(path)?,
        None => UpConfig::default(),
    };
    let data_dir = match &args.data_dir {
        Some(dir) => dir.clone(),
        None => rouse_shared::datadir::default_data_dir().context(
            "no data directory: set --data-dir or ROUSE_DATA_DIR (HOME and XDG_DATA_HOME are unset)",
        )?,
    };
    std::fs::create_dir_all(&data_dir)
        .with_context(|| format!("cannot create the data directory {}", data_dir.display()))?;
    crate::telemetry::init();
    super::open_files::raise_and_report(config.proxy.limits.max_connections);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(serve(args, config, &data_dir))?;
    Ok(ExitCode::SUCCESS)
}

async fn serve(args: &Args, config: UpConfig, data_dir: &Path) -> anyhow::Result<()> {
    let mut term = signal(SignalKind::terminate()).context("SIGTERM handler")?;
    let mut int = signal(SignalKind::interrupt()).context("SIGINT handler")?;
    let mut hup = signal(SignalKind::hangup()).context("SIGHUP handler")?;

    // The store first: it locks the data directory, and the platform may only take over the
    // workloads a previous run left once no other `rouse up` owns the directory.
    let store = EmbeddedStore::open(&data_dir.join(STORE_FILE_NAME))?;
    let mut local = LocalConfig::new(data_dir);
    local.runsc = config.runtime.runsc.clone();
    local.gvisor = config.runtime.gvisor.clone();
    local.ksm = config.runtime.ksm.to_config();
    // Merge sandboxes start through this binary's `__merge-exec` trampoline, every workload
    // through its `__cgroup-exec` one where cgroups are used.
    let rouse = std::env::current_exe().context("cannot locate the rouse binary")?;
    local.merge_exec = Some(rouse.clone());
    local.cgroup_exec = Some(rouse);
    local.cgroups = config.runtime.cgroups;
    report_runsc(&local.runsc);
    let platform = LocalPlatform::new(local)?;

    let token = if args.no_auth {
        None
    } else {
        let (token, created) = api::load_or_create_token(data_dir)?;
        if created {
            println!(
                "api token (saved in {}): {token}",
                rouse_shared::datadir::token_file(data_dir).display()
            );
        }
        Some(token)
    };
    let mut api_config = ApiConfig::new(token.clone(), data_dir);
    api_config.listen = config.api.listen;
    if config.api.tls {
        api_config.tls = Some(api::load_or_create_tls(data_dir, &config.api.names)?);
    }
    let api_listener = tokio::net::TcpListener::bind(api_config.listen)
        .await
        .with_context(|| format!("cannot listen for the api on {}", api_config.listen))?;
    let api_addr = api_listener.local_addr().context("api listener address")?;
    let api_url = api_url(api_addr, api_config.tls.is_some());
    let kubeconfig = api::write_kubeconfig(
        data_dir,
        &api_url,
        api_config.tls.as_ref().map(|t| t.ca_pem.as_str()),
        token.as_deref(),
    )?;

    // Before the proxy serves: what the last run left says Ready with endpoints nothing
    // listens on (controller/src/mode/local/stale.rs).
    let stale = standalone::mark_not_ready(&store)
        .await
        .context("cannot mark the last run's sandboxes not ready")?;
    if stale > 0 {
        tracing::info!(
            sandboxes = stale,
            "marked the last run's ready sandboxes not ready until they start again"
        );
    }
    let params = match &config.proxy.directory.namespace {
        Some(namespace) => rouse_shared::store::ListParams::namespace(namespace.clone()),
        None => rouse_shared::store::ListParams::default(),
    };
    let directory = StoreDirectory::with_params(store.clone(), params);
    let waker = standalone::DirectWaker::new(store.clone(), platform.clone());
    let proxy = if config.runtime.direct_wake {
        // Wakes go to the local platform first; the store's write follows behind.
        let direct = DirectDirectory::new(directory, Arc::new(PlatformWake(waker.clone())));
        Proxy::start(config.proxy.clone(), direct).await?
    } else {
        Proxy::start(config.proxy.clone(), directory).await?
    };
    // Idle suspend asks the proxy in this process whether a sandbox is in use right now.
    platform.set_activity_view(Arc::new(ProxyActivity(proxy.router().clone())));
    // A checkpoint suspend has the proxy reset and hold the sandbox's connections first.
    platform.set_quiesce(Arc::new(ProxyQuiesce(proxy.router().clone())));
    // Readiness (the admin listener's and the API's /readyz) says whether the store can
    // write, for as long as it cannot: after a full disk, until it has reopened its file.
    let store_ready = store_readiness(&store);
    proxy.router().set_readiness_check(store_ready.clone());

    let shutdown = CancellationToken::new();
    let mut controller = Some(tokio::spawn(standalone::run(
        LocalMode {
            store: store.clone(),
            platform,
            api: (
                api_listener,
                ApiState::new(store.clone(), api_config).with_readiness(store_ready),
            ),
            sandboxes: standalone::DriverConfig::default(),
            extensions: rouse_controller::extensions::ExtensionsConfig::default(),
        },
        shutdown.clone(),
    )));

    print_banner(data_dir, &api_url, &kubeconfig, &proxy, args.no_auth);

    let mut tick = tokio::time::interval(WATCH_INTERVAL);
    let mut seen = args.config.as_deref().and_then(modified);
    let mut failure = None;
    loop {
        tokio::select! {
            _ = term.recv() => break,
            _ = int.recv() => break,
            _ = hup.recv() => {
                if let Some(path) = &args.config {
                    seen = modified(path);
                    reload(&proxy, path);
                }
            }
            _ = tick.tick() => {
                if let Some(path) = &args.config {
                    let now = modified(path);
                    if now != seen {
                        seen = now;
                        reload(&proxy, path);
                    }
                }
            }
            // Standalone mode ending on its own is a failure: stop everything else and say why.
            result = async { controller.as_mut().expect("polled only while present").await }, if controller.is_some() => {
                controller = None;
                failure = Some(match result {
                    Ok(Ok(())) => anyhow::anyhow!("the sandbox reconciler stopped unexpectedly"),
                    Ok(Err(err)) => anyhow::Error::new(err),
                    Err(err) => anyhow::Error::new(err).context("standalone mode's task panicked"),
                });
                break;
            }
        }
    }
    println!("stopping: draining the proxy and the api, stopping sandboxes");
    shutdown.cancel();
    proxy.shutdown().await;
    if let Some(controller) = controller {
        match controller.await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => tracing::error!(error = %err, "standalone mode stopped with an error"),
            Err(err) => tracing::error!(error = %err, "standalone mode's task failed"),
        }
    }
    waker.close().await;
    drop(store);
    match failure {
        Some(err) => Err(err),
        None => {
            println!("stopped");
            Ok(())
        }
    }
}

/// A readiness check that fails, naming why, while the store cannot read and write its file.
fn store_readiness(store: &EmbeddedStore) -> Arc<dyn Fn() -> Result<(), String> + Send + Sync> {
    let store = store.clone();
    Arc::new(move || {
        let health = store.health();
        if health.is_healthy() {
            Ok(())
        } else {
            Err(format!("store: {}", health.describe()))
        }
    })
}

/// The proxy's live view of traffic, for the local platform's idle suspend.
struct ProxyActivity(rouse_proxy::Router);

impl ActivityView for ProxyActivity {
    fn last_activity(&self, key: &rouse_shared::store::ObjectKey) -> Option<jiff::Timestamp> {
        let at = self.0.last_activity(key)?;
        jiff::Timestamp::try_from(at).ok()
    }
}

/// The local platform's direct wake, for the proxy (`[runtime] direct_wake`).
struct PlatformWake(standalone::DirectWaker);

impl DirectWake for PlatformWake {
    fn wake(
        &self,
        key: &rouse_shared::store::ObjectKey,
    ) -> futures::future::BoxFuture<'static, DirectStart> {
        let waker = self.0.clone();
        let key = key.clone();
        Box::pin(async move {
            let standalone::DirectWake::Started {
                endpoint,
                generation,
                uid,
                written,
            } = waker.wake(&key).await
            else {
                return DirectStart::NotDirect;
            };
            match rouse_proxy::directory::status_endpoint(&endpoint) {
                Some(endpoint) => DirectStart::Started {
                    endpoint,
                    generation: u64::try_from(generation).unwrap_or(0),
                    uid,
                    written: Box::pin(async move { written.await.unwrap_or(false) }),
                },
                // Its write is queued: the wake through the store finds it woken.
                None => DirectStart::NotDirect,
            }
        })
    }
}

/// The proxy's side of a checkpoint suspend, for the local platform.
struct ProxyQuiesce(rouse_proxy::Router);

/// How long a checkpoint waits for the sandbox's upstream connections to close after their
/// reset (they close at once unless a handler is stuck).
const QUIESCE_LIMIT: std::time::Duration = std::time::Duration::from_secs(2);

impl rouse_controller::snapshot::Quiesce for ProxyQuiesce {
    fn quiesce(
        &self,
        key: &rouse_shared::store::ObjectKey,
    ) -> futures::future::BoxFuture<'static, bool> {
        let router = self.0.clone();
        let key = key.clone();
        Box::pin(async move { router.quiescer().quiesce(&key, QUIESCE_LIMIT).await })
    }

    fn release(&self, key: &rouse_shared::store::ObjectKey) {
        self.0.quiescer().release(key);
    }
}

/// Says what listens where, one `name: address` line each, so people and tests can read it.
fn print_banner(data_dir: &Path, api_url: &str, kubeconfig: &Path, proxy: &Proxy, no_auth: bool) {
    let config = proxy.config();
    let addrs = proxy.addrs();
    println!("rouse is up; data in {}", data_dir.display());
    let auth = if no_auth {
        "no auth".to_owned()
    } else {
        format!(
            "bearer token in {}",
            rouse_shared::datadir::token_file(data_dir).display()
        )
    };
    println!("api: {api_url} ({auth})");
    println!("kubeconfig: {}", kubeconfig.display());
    if let Some(http) = addrs.http {
        let domain = config.routing.domains.first().map_or("", String::as_str);
        println!(
            "proxy: http://{http} (http://NAME.NAMESPACE.{domain}:{})",
            http.port()
        );
    }
    if let Some(https) = addrs.https {
        println!("proxy-https: https://{https}");
    }
    if let Some(passthrough) = addrs.tls_passthrough {
        println!("proxy-tls-passthrough: {passthrough}");
    }
    if let Some(admin) = addrs.admin {
        println!("metrics: http://{admin}/metrics");
    }
    println!("press Ctrl-C to stop");
}

/// The API's URL as clients on this machine dial it: a wildcard listen address becomes
/// 127.0.0.1 (which the serving certificate names).
fn api_url(addr: std::net::SocketAddr, tls: bool) -> String {
    let scheme = if tls { "https" } else { "http" };
    let addr = if addr.ip().is_unspecified() {
        std::net::SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    format!("{scheme}://{addr}")
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

/// Reads the file again and puts its proxy sections in force, or logs why not.
fn reload(proxy: &Proxy, path: &Path) {
    match UpConfig::from_file(path) {
        Ok(config) if config.proxy.directory.namespace != proxy.config().directory.namespace => {
            tracing::error!(config.path = %path.display(), "config reload rejected: directory.namespace cannot change while running");
        }
        Ok(config) => match proxy.reload(config.proxy) {
            Ok(()) => tracing::info!(config.path = %path.display(), "proxy config reloaded"),
            Err(err) => {
                tracing::error!(config.path = %path.display(), error = %err, "config reload rejected; the old config stays")
            }
        },
        Err(err) => {
            tracing::error!(config.path = %path.display(), error = %err, "config reload rejected; the old config stays");
        }
    }
}

/// Fails early, with the reason, when a config asks for what standalone mode cannot do.
pub fn check_standalone(config: &rouse_proxy::Config) -> anyhow::Result<()> {
    if config.directory.kind != rouse_proxy::config::DirectoryKind::Store
        || !config.directory.routes.is_empty()
    {
        bail!(
            "[directory]: `rouse up` routes to the sandboxes in its own store; remove the section (static routes are for `rouse proxy`)"
        );
    }
    Ok(())
}

/// Says at start which runsc the gvisor runtime will use, or why it cannot: a missing one is
/// normal (most sandboxes need none), an unusable one a warning naming what to install.
fn report_runsc(program: &Path) {
    use rouse_controller::platform::local::{Error, inspect_runsc};
    match inspect_runsc(program) {
        Ok((path, info)) => tracing::info!(
            runsc.path = %path.display(),
            runsc.version = %info.version,
            "gvisor runtime ready"
        ),
        Err(missing @ Error::RuntimeMissing { .. }) => {
            tracing::info!(reason = %missing, "gvisor runtime unavailable")
        }
        Err(error) => tracing::warn!(%error, "gvisor runtime unusable"),
    }
}
