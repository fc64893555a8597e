//! Restarts, the file lock, acknowledged writes surviving `kill -9`, and concurrent writers.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use kube::ResourceExt;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{DeleteParams, ListParams, ObjectKey, Store, StoreError, WatchEvent};
use serde_json::json;

use super::super::{EmbeddedStore, EmbeddedStoreConfig, OpenError};
use super::{SandboxFixture, key, merge, rv, sandbox, store_path, temp_store_with};

const DEADLINE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn restart_keeps_objects_and_versions() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = store_path(&dir);
    let a = {
        let store = EmbeddedStore::open(&path).expect("open");
        store.create(&sandbox("a")).await.expect("a");
        store.create(&sandbox("b")).await.expect("b");
        let a: Sandbox = store
            .patch(
                &key("a"),
                &merge(json!({"spec": {"operatingMode": "Suspended"}})),
            )
            .await
            .expect("patch");
        Store::<Sandbox>::delete(&store, &key("b"), &DeleteParams::default())
            .await
            .expect("delete");
        a
    };
    let store = EmbeddedStore::open(&path).expect("reopen after the last handle dropped");
    let got: Sandbox = store.get(&key("a")).await.expect("a survives");
    assert_eq!(got, a);
    let err = Store::<Sandbox>::get(&store, &key("b"))
        .await
        .expect_err("b stays deleted");
    assert!(err.is_not_found());
    let list = Store::<Sandbox>::list(&store, &ListParams::default())
        .await
        .expect("list");
    // The first write reserved versions up to 1 + RESERVE_BLOCK (watchers may have seen some
    // before they were durable): a reopened store continues above them.
    let reopened = 1 + super::super::embedded::RESERVE_BLOCK;
    assert_eq!(
        list.resource_version,
        reopened.to_string(),
        "the version continues above the reservation after the restart"
    );
    assert_eq!(rv(&got), 3, "objects keep their versions");

    // The history is in memory: older versions expire, the current one works.
    let mut old = Store::<Sandbox>::watch(&store, &ListParams::default(), "4")
        .await
        .expect("watch");
    let first = tokio::time::timeout(DEADLINE, old.next())
        .await
        .expect("an item");
    assert!(
        matches!(first, Some(Err(StoreError::Expired { .. }))),
        "{first:?}"
    );
    let mut current =
        Store::<Sandbox>::watch(&store, &ListParams::default(), &list.resource_version)
            .await
            .expect("watch");
    let c = store.create(&sandbox("c")).await.expect("c");
    assert_eq!(
        rv(&c),
        reopened + 1,
        "versions keep increasing after a restart"
    );
    let event = tokio::time::timeout(DEADLINE, current.next())
        .await
        .expect("an item");
    assert!(
        matches!(event, Some(Ok(WatchEvent::Added(ref s))) if s.name_any() == "c"),
        "{event:?}"
    );
}

#[test]
fn a_second_open_names_the_locked_file() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = store_path(&dir);
    let first = EmbeddedStore::open(&path).expect("open");
    let err = EmbeddedStore::open(&path).expect_err("locked");
    assert!(matches!(err, OpenError::Locked { .. }), "{err}");
    assert_eq!(err.metric_label(), "locked");
    let message = err.to_string();
    assert!(message.contains(&path.display().to_string()), "{message}");
    assert!(message.contains("another `rouse up`"), "{message}");
    drop(first);
    EmbeddedStore::open(&path).expect("free again once closed");
}

#[test]
fn a_file_that_is_not_a_store_is_an_open_error() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = store_path(&dir);
    std::fs::write(&path, b"not a database, just some text that is long enough").expect("write");
    let err = EmbeddedStore::open(&path).expect_err("garbage");
    assert!(
        err.to_string().contains(&path.display().to_string()),
        "{err}"
    );
}

/// Environment variable that turns [`kill9_writer_child`] into the writer.
const WRITER_DIR_ENV: &str = "ROUSE_STORE_TEST_WRITER_DIR";
/// Acknowledgements the parent waits for before it kills the writer.
const ACKS_BEFORE_KILL: usize = 300;

/// The child of [`acknowledged_writes_survive_kill_9`]: creates sandboxes from 4 tasks and
/// prints `ack <name> <resourceVersion>` after each acknowledged create, and `seen
/// <resourceVersion>` for each change its watch sees (changes are published before they are
/// durable), until killed.
#[test]
#[ignore = "the writer process of acknowledged_writes_survive_kill_9; runs only as its child"]
fn kill9_writer_child() {
    let Some(dir) = std::env::var_os(WRITER_DIR_ENV) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async move {
        let store =
            EmbeddedStore::open(&std::path::Path::new(&dir).join(super::super::STORE_FILE_NAME))
                .expect("open");
        let started = Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        let mut watch = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
            .await
            .expect("watch");
        tasks.spawn(async move {
            while let Some(Ok(WatchEvent::Added(s))) = watch.next().await {
                let mut out = std::io::stdout().lock();
                writeln!(out, "seen {}", rv(&s)).expect("stdout");
                out.flush().expect("stdout");
                if started.elapsed() > Duration::from_secs(120) {
                    break;
                }
            }
        });
        for task in 0..4 {
            let store = store.clone();
            tasks.spawn(async move {
                // Bounded in count and time; the parent kills it long before either.
                for i in 0..20_000u32 {
                    if started.elapsed() > Duration::from_secs(120) {
                        break;
                    }
                    let name = format!("w{task}-{i}");
                    let object = sandbox(&name).labeled("seq", &i.to_string());
                    let created = store.create(&object).await.expect("create");
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "ack {name} {}", rv(&created)).expect("stdout");
                    out.flush().expect("stdout");
                }
            });
        }
        while tasks.join_next().await.is_some() {}
    });
}

#[test]
fn acknowledged_writes_survive_kill_9() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut child = Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "store::tests::durability::kill9_writer_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(WRITER_DIR_ENV, dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn the writer");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    let (seen_tx, seen_rx) = mpsc::channel::<u64>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Some(seen) = line.strip_prefix("seen ") {
                let _ = seen_tx.send(seen.parse().expect("a version"));
            } else if let Some(ack) = line.strip_prefix("ack ") {
                let (name, version) = ack.split_once(' ').expect("ack <name> <rv>");
                let version: u64 = version.parse().expect("a version");
                if tx.send((name.to_owned(), version)).is_err() {
                    break;
                }
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(120);
    let mut acked = BTreeMap::new();
    while acked.len() < ACKS_BEFORE_KILL {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((name, version)) => {
                acked.insert(name, version);
            }
            Err(e) => {
                let _ = child.kill();
                panic!("writer acknowledged only {} creates: {e}", acked.len());
            }
        }
    }
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGKILL).expect("SIGKILL");
    child.wait().expect("reap the writer");
    reader.join().expect("reader thread");
    // Acks printed before the kill are acknowledged writes too.
    acked.extend(rx.try_iter());

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = EmbeddedStore::open(&store_path(&dir)).expect("reopen after kill -9");
        for (name, version) in &acked {
            let got: Sandbox = store
                .get(&ObjectKey::new("team-a", name.as_str()))
                .await
                .unwrap_or_else(|e| panic!("acknowledged {name} (rv {version}) lost: {e}"));
            assert_eq!(rv(&got), *version, "{name} intact");
            let seq = name.rsplit('-').next().expect("w<task>-<seq>");
            assert_eq!(
                got.labels().get("seq").map(String::as_str),
                Some(seq),
                "{name} intact"
            );
        }
        let highest = acked.values().max().copied().unwrap_or_default();
        let next = store.create(&sandbox("after-crash")).await.expect("create");
        assert!(rv(&next) > highest, "versions never go back after a crash");
        // A watcher may have seen changes whose commit the crash lost: their versions are
        // never handed out again.
        let seen = seen_rx.try_iter().max().unwrap_or_default();
        assert!(seen > 0, "the watcher saw the writes");
        assert!(
            rv(&next) > seen,
            "version {} after the crash was already seen ({seen}) before it",
            rv(&next)
        );
    });
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_get_unique_increasing_versions() {
    const TASKS: usize = 8;
    const PER_TASK: usize = 200;
    let config = EmbeddedStoreConfig {
        watch_buffer: TASKS * PER_TASK + 10,
        ..Default::default()
    };
    let (store, _dir) = temp_store_with(config);
    let mut watch = Store::<Sandbox>::watch(&store, &ListParams::default(), "0")
        .await
        .expect("watch");
    let mut tasks = tokio::task::JoinSet::new();
    for task in 0..TASKS {
        let store = store.clone();
        tasks.spawn(async move {
            let mut versions = Vec::with_capacity(PER_TASK);
            for i in 0..PER_TASK {
                let created = store
                    .create(&sandbox(&format!("t{task}-{i}")))
                    .await
                    .expect("create");
                versions.push(rv(&created));
            }
            versions
        });
    }
    let mut all = Vec::new();
    let joined = tokio::time::timeout(Duration::from_secs(120), async {
        while let Some(versions) = tasks.join_next().await {
            let versions = versions.expect("writer task");
            assert!(
                versions.windows(2).all(|w| w[0] < w[1]),
                "one task's versions increase"
            );
            all.extend(versions);
        }
    })
    .await;
    joined.expect("all writers done in time");
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), TASKS * PER_TASK, "every version is unique");
    assert_eq!(all.first(), Some(&1));
    assert_eq!(all.last(), Some(&((TASKS * PER_TASK) as u64)));

    let mut last = 0;
    for _ in 0..TASKS * PER_TASK {
        let event = tokio::time::timeout(DEADLINE, watch.next())
            .await
            .expect("an event in time");
        let Some(Ok(WatchEvent::Added(object))) = event else {
            panic!("expected Added, got {event:?}");
        };
        assert!(rv(&object) > last, "watch events arrive in version order");
        last = rv(&object);
    }
    let list = Store::<Sandbox>::list(&store, &ListParams::default())
        .await
        .expect("list");
    assert_eq!(list.items.len(), TASKS * PER_TASK);
}
