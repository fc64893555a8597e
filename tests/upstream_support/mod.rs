//! The cluster upstream's end-to-end suites run on (tests/upstream_e2e.rs): the shared control
//! plane, kube-scheduler, kwok and its node, static volumes with their binder, Rouse's CRDs and
//! RBAC, `rouse controller` as its ServiceAccount, and the framework's stand-ins; and running
//! one suite binary, reading each test's result from its `-test.v` output.

mod results;
mod stand_in;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Node;
use kube::Api;
use rouse_testsupport::cluster::{self, ControlPlane, SYSTEM_NAMESPACE};
use rouse_testsupport::upstream::{self, KWOK_NODE, Programs, Supervised};

pub use results::{Outcome, Results};

/// How long the cluster's parts may take to come up.
const START_DEADLINE: Duration = Duration::from_secs(120);

/// Which of upstream's suites.
#[derive(Debug, Clone, Copy)]
pub enum Suite {
    /// `test/e2e`.
    Core,
    /// `test/e2e/extensions`.
    Extensions,
}

/// Everything the suites run against; stopped when dropped.
pub struct Harness {
    plane: &'static ControlPlane,
    programs: Programs,
    dir: tempfile::TempDir,
    controller: Supervised,
    _parts: Vec<Supervised>,
    stand_in: tokio::task::JoinHandle<()>,
    runtime: tokio::runtime::Runtime,
}

impl Drop for Harness {
    fn drop(&mut self) {
        self.stand_in.abort();
    }
}

/// What is missing to run the suites, if anything.
fn missing() -> Option<String> {
    let checks = [
        cluster::Binaries::find().err(),
        Programs::find().err(),
        upstream::scheduler().err(),
    ];
    let missing: Vec<String> = checks
        .into_iter()
        .flatten()
        .map(|e| format!("{e:#}"))
        .collect();
    (!missing.is_empty()).then(|| missing.join("; "))
}

impl Harness {
    /// Brings everything up, or returns `None` (with a message) when binaries are missing and
    /// the run does not require them; panics under CI or when something fails to start.
    pub fn start(test: &str) -> Option<Self> {
        if let Some(missing) = missing() {
            if cluster::required() {
                panic!("{test}: the upstream suites are required (CI is set): {missing}");
            }
            eprintln!("skipping {test}: {missing}");
            return None;
        }
        let plane = cluster::shared_or_skip(test)?;
        let programs = Programs::find().expect("checked above");
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let dir = tempfile::Builder::new()
            .prefix("rouse-upstream-e2e-")
            .tempdir()
            .expect("temporary directory");
        let client = runtime.block_on(async {
            let client = plane.client().await.expect("admin client");
            cluster::install(&client)
                .await
                .expect("install Rouse's CRDs and RBAC");
            stand_in::install(&client)
                .await
                .expect("install the framework's stand-ins");
            upstream::create_kwok_node(&client)
                .await
                .expect("kwok node");
            upstream::create_static_volumes(&client, 40, "4Gi")
                .await
                .expect("static volumes");
            client
        });
        let admin = plane.kubeconfig();
        let parts = vec![
            upstream::start_scheduler(admin, dir.path()).expect("kube-scheduler"),
            upstream::start_node_controllers(admin, dir.path()).expect("node controllers"),
            upstream::start_kwok(&programs, admin, dir.path()).expect("kwok"),
        ];
        let controller_kubeconfig = dir.path().join("rouse-controller.kubeconfig");
        plane
            .write_service_account_kubeconfig(
                &controller_kubeconfig,
                SYSTEM_NAMESPACE,
                "rouse-controller",
            )
            .expect("controller kubeconfig");
        let controller = start_rouse(&controller_kubeconfig, dir.path());
        let stand_in = runtime.spawn(stand_in::deployment_status(client.clone()));
        let mut harness = Self {
            plane,
            programs,
            dir,
            controller,
            _parts: parts,
            stand_in,
            runtime,
        };
        harness.wait_node_ready(&client);
        Some(harness)
    }

    /// Waits until kwok has made its node Ready, failing early when a part exits.
    fn wait_node_ready(&mut self, client: &kube::Client) {
        let nodes: Api<Node> = Api::all(client.clone());
        let end = Instant::now() + START_DEADLINE;
        loop {
            for part in self._parts.iter_mut().chain([&mut self.controller]) {
                if let Some(exited) = part.exited() {
                    panic!("{exited}");
                }
            }
            let node = self
                .runtime
                .block_on(nodes.get_opt(KWOK_NODE))
                .ok()
                .flatten();
            let ready = node
                .as_ref()
                .and_then(|n| n.status.as_ref()?.conditions.as_ref())
                .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
            if ready {
                return;
            }
            assert!(
                Instant::now() < end,
                "kwok did not make {KWOK_NODE} Ready within {START_DEADLINE:?}; last: {:?}\n{}",
                node.and_then(|n| n.status),
                self._parts[2].log_tail(40)
            );
            // A poll with a deadline: kwok's node stage runs within a second or two.
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Runs `tests` of `suite` (with their subtests), one at a time, and reads the results.
    pub fn run(&self, suite: Suite, tests: &[&str], deadline: Duration) -> Results {
        let (binary, name) = match suite {
            Suite::Core => (&self.programs.e2e, "e2e"),
            Suite::Extensions => (&self.programs.e2e_extensions, "e2e-extensions"),
        };
        let work = self.dir.path().join(name);
        std::fs::create_dir_all(&work).expect("suite directory");
        let pattern = format!("^({})$", tests.join("|"));
        let mut run = Supervised::spawn(
            name,
            Command::new(binary)
                .arg("-test.v")
                .arg(format!("-test.run={pattern}"))
                .arg("-test.parallel=1")
                .arg("-test.count=1")
                // Our deadline is the one that counts; Go's must not cut in first.
                .arg(format!("-test.timeout={}s", deadline.as_secs() + 60))
                .current_dir(&work)
                .env("KUBECONFIG", self.plane.kubeconfig())
                .env("ARTIFACTS", work.join("artifacts"))
                .env("SANDBOX_VERSION", "rouse"),
            self.dir.path(),
        )
        .expect("start the suite");
        let end = Instant::now() + deadline;
        while run.exited().is_none() {
            if Instant::now() >= end {
                drop(run);
                panic!("the {name} suite ran longer than {deadline:?}");
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        let output = std::fs::read_to_string(run.log()).expect("suite output");
        keep_log(run.log());
        Results::parse(&output)
    }

    /// The last `lines` lines of the controller's log.
    pub fn controller_log(&self, lines: usize) -> String {
        self.controller.log_tail(lines)
    }
}

/// `rouse controller` as its ServiceAccount, leader election in `rouse-system` as deployed:
/// this build's binary, or the one `ROUSE_UPSTREAM_E2E_ROUSE` names (to compare releases).
fn start_rouse(kubeconfig: &Path, dir: &Path) -> Supervised {
    let binary = std::env::var_os("ROUSE_UPSTREAM_E2E_ROUSE")
        .map_or_else(|| PathBuf::from(env!("CARGO_BIN_EXE_rouse")), PathBuf::from);
    Supervised::spawn(
        "rouse-controller",
        Command::new(binary)
            .args(["controller", "--metrics-address", "127.0.0.1:0"])
            .args([
                "--lease-namespace",
                SYSTEM_NAMESPACE,
                "--identity",
                "upstream-e2e",
            ])
            .env("KUBECONFIG", kubeconfig)
            // The test's own RUST_LOG, if set, reaches the controller (e.g. to debug a test).
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".to_owned()),
            )
            .env_remove("KUBERNETES_SERVICE_HOST"),
        dir,
    )
    .expect("start rouse controller")
}

/// Copies a suite's output into the directory `ROUSE_UPSTREAM_E2E_LOGS` names, if any: the
/// temporary directory goes with the harness.
fn keep_log(log: &Path) {
    if let Some(keep) = std::env::var_os("ROUSE_UPSTREAM_E2E_LOGS") {
        let keep = PathBuf::from(keep);
        if std::fs::create_dir_all(&keep).is_ok()
            && let Some(name) = log.file_name()
        {
            let _ = std::fs::copy(log, keep.join(name));
        }
    }
}
