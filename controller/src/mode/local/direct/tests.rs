//! The direct wake's rules on a real store and platform: no stale stop, no second start while
//! claimed, a refused wake stops its workload, a wake through the waker writes the store, the
//! claim lasts until the workload accepts.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerPort, PodSpec};
use rouse_shared::api::{OperatingMode, PodTemplate, Sandbox, SandboxSpec};
use rouse_shared::store::{ObjectKey, Patch, Store, StoreError};

use super::{DirectWake, DirectWaker, Finisher};
use crate::platform::Platform;
use crate::platform::local::{LocalConfig, LocalPlatform};
use crate::sandbox::{Action, workload_spec};
use crate::store::{EmbeddedStore, STORE_FILE_NAME};

const DEADLINE: Duration = Duration::from_secs(30);
/// A workload that listens on `$PORT` (python3 answers HTTP; only the connect matters).
const SERVE: &str = "exec python3 -m http.server --bind 127.0.0.1 $PORT";
/// A workload that runs but never listens: its wake waits out the whole accept window.
const SILENT: &str = "exec sleep 30";

struct Env {
    _dir: tempfile::TempDir,
    store: EmbeddedStore,
    platform: LocalPlatform,
}

impl Env {
    /// A store holding one suspended sandbox `alice` serving HTTP, and a platform (no driver).
    async fn new() -> (Self, Sandbox) {
        Self::running(SERVE).await
    }

    /// [`Env::new`] with the workload's shell command.
    async fn running(command: &str) -> (Self, Sandbox) {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(&dir.path().join(STORE_FILE_NAME)).expect("store");
        let platform = LocalPlatform::new(LocalConfig::new(dir.path())).expect("platform");
        let mut sandbox = Sandbox::new(
            "alice",
            SandboxSpec {
                pod_template: PodTemplate {
                    spec: PodSpec {
                        containers: vec![Container {
                            name: "main".into(),
                            command: Some(vec!["sh".into(), "-c".into(), command.into()]),
                            ports: Some(vec![ContainerPort {
                                container_port: 8080,
                                ..ContainerPort::default()
                            }]),
                            ..Container::default()
                        }],
                        termination_grace_period_seconds: Some(1),
                        ..PodSpec::default()
                    },
                    ..PodTemplate::default()
                },
                operating_mode: Some(OperatingMode::Suspended),
                ..SandboxSpec::default()
            },
        );
        sandbox.metadata.namespace = Some("default".into());
        let sandbox = store.create(&sandbox).await.expect("create");
        let env = Self {
            _dir: dir,
            store,
            platform,
        };
        (env, sandbox)
    }

    async fn stopped(&self) -> bool {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            let status = self.platform.workload_status(&key());
            if status.is_none_or(|s| s.pgid.is_none() && !s.ready) {
                return true;
            }
            if tokio::time::Instant::now() > deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn key() -> ObjectKey {
    ObjectKey::new("default", "alice")
}

#[tokio::test]
async fn a_view_from_before_the_wake_does_not_stop_the_woken_workload() {
    let (env, sandbox) = Env::new().await;
    let now = jiff::Timestamp::now();
    env.platform
        .claim_direct_wake(&sandbox, now)
        .expect("claimable");
    assert!(
        env.platform.claim_direct_wake(&sandbox, now).is_err(),
        "one claim at a time"
    );
    // The reconciler's create leaves a claimed sandbox's start to the wake.
    let create = Action::CreateWorkload(Box::new(workload_spec(&sandbox)));
    env.platform.apply(&sandbox, &create).await.expect("create");
    assert!(env.platform.workload_status(&key()).is_none(), "no start");
    env.platform.start_direct(&sandbox).await.expect("started");

    let delete = Action::DeleteWorkload {
        name: "alice".into(),
    };
    env.platform
        .apply(&sandbox, &delete)
        .await
        .expect("stale delete");
    assert!(
        env.platform
            .workload_status(&key())
            .is_some_and(|s| s.pgid.is_some() || s.restarts == 0),
        "a suspended view from before the wake keeps the workload"
    );
    let mut later = sandbox.clone();
    later.metadata.generation = sandbox.metadata.generation.map(|g| g + 2);
    env.platform.apply(&later, &delete).await.expect("delete");
    assert!(
        env.stopped().await,
        "a suspend written after the wake stops it"
    );
}

#[tokio::test]
async fn a_refused_wake_stops_its_workload_and_ends_the_claim() {
    let (env, sandbox) = Env::new().await;
    env.platform
        .claim_direct_wake(&sandbox, jiff::Timestamp::now())
        .expect("claimable");
    env.platform.start_direct(&sandbox).await.expect("started");
    let finisher = Finisher {
        store: env.store.clone(),
        platform: env.platform.clone(),
        key: key(),
        uid: sandbox.metadata.uid.clone().unwrap_or_default(),
    };
    let refused = StoreError::NotFound {
        kind: "Sandbox".into(),
        key: key(),
    };
    assert!(!finisher.finish(Err(refused)).await, "not kept");
    assert!(!env.platform.direct_wake_pending(&key()), "claim ended");
    assert!(env.stopped().await, "the workload is stopped again");
}

#[tokio::test]
async fn a_direct_wake_writes_the_store_behind_the_start() {
    let (env, sandbox) = Env::new().await;
    let waker = DirectWaker::new(env.store.clone(), env.platform.clone());
    let DirectWake::Started {
        endpoint,
        generation,
        written,
        ..
    } = waker.wake(&key()).await
    else {
        panic!("a suspended process sandbox is woken directly");
    };
    assert_eq!(Some(generation), sandbox.metadata.generation);
    assert_eq!(endpoint.address, "127.0.0.1");
    let port = u16::try_from(endpoint.ports[0].port).expect("port");
    // Handed over once it accepts, or after the accept window (python may start slower).
    let deadline = std::time::Instant::now() + DEADLINE;
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            std::time::Instant::now() < deadline,
            "the endpoint never accepted"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let kept = tokio::time::timeout(DEADLINE, written)
        .await
        .expect("answered in time");
    assert_eq!(kept, Ok(true));
    let stored: Sandbox = env.store.get(&key()).await.expect("get");
    assert_eq!(
        stored.spec.effective_operating_mode(),
        OperatingMode::Running
    );
    assert!(!env.platform.direct_wake_pending(&key()));
    // Woken already: a second wake goes through the store.
    assert!(matches!(
        waker.wake(&key()).await,
        DirectWake::NotDirect("not_suspended")
    ));
    // A suspend through the store, then a wake of a sandbox whose workload still stops.
    let patch = Patch::merge(serde_json::json!({"spec": {"operatingMode": "Suspended"}}))
        .expect("object patch");
    let suspended: Sandbox = env.store.patch(&key(), &patch).await.expect("suspend");
    env.platform
        .apply(
            &suspended,
            &Action::DeleteWorkload {
                name: "alice".into(),
            },
        )
        .await
        .expect("stop");
    assert!(env.stopped().await);
    waker.close().await;
}

#[tokio::test]
async fn the_claim_lasts_until_the_workload_accepts() {
    // Ended once the store's write is answered, the claim would let the driver publish the
    // endpoint of a workload that does not listen yet (the proxy would dial it too early).
    let (env, sandbox) = Env::running(SILENT).await;
    let waker = DirectWaker::new(env.store.clone(), env.platform.clone());
    let alice = key();
    let mut wake = Box::pin(waker.wake(&alice));
    // Checks made once the wake's write was answered: the store answers writes in order, so
    // once a later write returned, the wake's was answered before it.
    let mut after_answer = 0u32;
    // The test runtime has one thread: the wake and the claim's end only move when polled here.
    let outcome = loop {
        tokio::select! {
            biased;
            outcome = &mut wake => break outcome,
            () = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
        assert!(
            env.platform.direct_wake_pending(&key()),
            "the claim ended while the wake still waited for the workload to accept \
             ({after_answer} checks after the write's answer)"
        );
        if after_answer > 0 {
            after_answer += 1;
        } else if env
            .store
            .get_now::<Sandbox>(&key())
            .is_ok_and(|s| s.spec.effective_operating_mode() == OperatingMode::Running)
        {
            let label = Patch::merge(serde_json::json!({"metadata": {"labels": {"seen": "yes"}}}))
                .expect("object patch");
            let _: Sandbox = env.store.patch(&key(), &label).await.expect("label");
            after_answer = 1;
        }
    };
    let DirectWake::Started { written, .. } = outcome else {
        panic!("a suspended process sandbox is woken directly");
    };
    // The accept window is 250 ms and the store answers in a few.
    assert!(
        after_answer >= 2,
        "the write was not answered long enough before the accept window ended ({after_answer})"
    );
    let kept = tokio::time::timeout(DEADLINE, written)
        .await
        .expect("answered in time");
    assert_eq!(kept, Ok(true));
    assert!(!env.platform.direct_wake_pending(&key()), "claim ended");
    let mut later = sandbox.clone();
    later.metadata.generation = sandbox.metadata.generation.map(|g| g + 2);
    let delete = Action::DeleteWorkload {
        name: "alice".into(),
    };
    env.platform.apply(&later, &delete).await.expect("delete");
    assert!(env.stopped().await, "stopped");
    waker.close().await;
}
