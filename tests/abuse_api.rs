//! The API and store part of the chaos and abuse suite (issue 24), against the real `rouse up`:
//! patches built to amplify are refused before they are built while others are served, a
//! full disk is reported and recovered from, and `kill -9` in the middle of patches and
//! deletes loses nothing acknowledged. Every loop is bounded in count and time, every wait is
//! on a condition with a deadline.

mod support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rouse_testsupport::tmpfs::Tmpfs;
use serde_json::{Value, json};
use support::{DEADLINE, Options, Rouse, sandbox};

/// A workload that costs nothing; the sandboxes here stay suspended anyway.
const SLEEP: &str = "exec sleep 600";

/// One request to the REST API with the token and a content type; the status and the body.
async fn send(
    rouse: &Rouse,
    method: &str,
    path: &str,
    content_type: &str,
    body: String,
) -> (u16, String) {
    let mut headers = vec![("content-type", content_type.to_owned())];
    if let Some(token) = &rouse.token {
        headers.push(("authorization", format!("Bearer {token}")));
    }
    support::http(rouse.api, method, path, "localhost", &headers, body)
        .await
        .unwrap_or_else(|e| rouse.fail(&format!("{method} {path}: {e}")))
}

/// The peak resident memory of a process so far (`VmHWM`), in bytes.
fn peak_rss(pid: i32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .expect("VmHWM in /proc/PID/status")
}

/// The attack of the issue: one `add` of a map holding 1,000 characters, then 18 `copy`
/// operations of the map into itself, each doubling it (2.6 KB of patch, 256 MB of map).
fn doubling_patch() -> String {
    let mut ops = vec![json!({
        "op": "add", "path": "/metadata/annotations", "value": {"a": "x".repeat(1000)},
    })];
    for k in 0..18 {
        ops.push(json!({
            "op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/k{k}"),
        }));
    }
    Value::Array(ops).to_string()
}

/// A YAML apply whose one 100 KB string is aliased 40 times (4 MB once expanded).
fn alias_bomb(name: &str) -> String {
    let mut yaml = format!(
        "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: {name}\n  annotations:\n    a0: &big \"{}\"\n",
        "x".repeat(100_000)
    );
    for i in 1..=40 {
        yaml.push_str(&format!("    a{i}: *big\n"));
    }
    yaml.push_str("spec:\n  podTemplate:\n    spec:\n      containers: [{name: app, image: x}]\n");
    yaml
}

/// Reads another sandbox and the list until `stop`, counting what was not a 200.
async fn keep_reading(
    rouse: Arc<Rouse>,
    stop: Arc<AtomicBool>,
    failures: Arc<AtomicUsize>,
) -> usize {
    let mut reads = 0;
    while !stop.load(Ordering::Acquire) && reads < 10_000 {
        for path in [
            "/v1/namespaces/default/sandboxes/bystander",
            "/v1/namespaces/default/sandboxes",
        ] {
            let (code, _) = rouse.api("GET", path, None).await;
            if code != 200 {
                failures.fetch_add(1, Ordering::Relaxed);
            }
            reads += 1;
        }
    }
    reads
}

#[tokio::test]
async fn amplifying_patches_are_refused_before_they_are_built_and_others_are_served() {
    const ATTACKS: usize = 24;
    const AT_ONCE: usize = 8;
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Arc::new(Rouse::start(dir.path(), &Options::default()));
    let pid = rouse.pid().expect("running");
    let suspended = json!({"operatingMode": "Suspended"});
    rouse
        .create(&sandbox("target", SLEEP, suspended.clone()))
        .await;
    rouse.create(&sandbox("bystander", SLEEP, suspended)).await;
    let baseline = peak_rss(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let failures = Arc::new(AtomicUsize::new(0));
    let reader = tokio::spawn(keep_reading(rouse.clone(), stop.clone(), failures.clone()));
    let target = "/v1/namespaces/default/sandboxes/target";
    let semaphore = Arc::new(tokio::sync::Semaphore::new(AT_ONCE));
    let mut attacks = tokio::task::JoinSet::new();
    for i in 0..ATTACKS {
        let (rouse, semaphore) = (rouse.clone(), semaphore.clone());
        attacks.spawn(async move {
            let _slot = semaphore.acquire_owned().await.expect("semaphore");
            let (path, content_type, body) = match i % 3 {
                0 => (
                    target.to_owned(),
                    "application/json-patch+json",
                    doubling_patch(),
                ),
                1 => (
                    format!("{target}/status"),
                    "application/json-patch+json",
                    doubling_patch(),
                ),
                _ => (
                    format!("/v1/namespaces/default/sandboxes/bomb{i}?fieldManager=attacker"),
                    "application/apply-patch+yaml",
                    alias_bomb(&format!("bomb{i}")),
                ),
            };
            let (code, answer) = send(&rouse, "PATCH", &path, content_type, body).await;
            (i, code, answer)
        });
    }
    while let Some(result) = attacks.join_next().await {
        let (i, code, answer) = result.expect("attack task");
        let refused = match i % 3 {
            0 | 1 => code == 422 && answer.contains("copy operations would add more than"),
            _ => code == 413 && answer.contains("limit of one object"),
        };
        if !refused {
            rouse.fail(&format!(
                "attack {i} was not refused by a bound: {code} {answer}"
            ));
        }
    }
    // Too many operations: 413 before any is applied.
    let op = json!({"op": "test", "path": "/kind", "value": "Sandbox"});
    let ops = Value::Array(vec![op; 10_001]).to_string();
    let (code, answer) = send(&rouse, "PATCH", target, "application/json-patch+json", ops).await;
    assert_eq!(code, 413, "{answer}");
    stop.store(true, Ordering::Release);
    let reads = reader.await.expect("reader");

    let grown = peak_rss(pid).saturating_sub(baseline);
    eprintln!(
        "peak RSS grew by {} MiB over {ATTACKS} amplifying patches ({AT_ONCE} at once); {reads} reads served meanwhile",
        grown / 1024 / 1024
    );
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "every read of the others was served"
    );
    assert!(reads > 0, "the others were read during the attacks");
    // Each refused patch builds at most the object, the body and the 1 MiB copy budget.
    assert!(
        grown < 128 * 1024 * 1024,
        "peak RSS grew by {} MiB",
        grown / 1024 / 1024
    );
    // Nothing was written, and the process still serves writes.
    let (code, object) = rouse.api("GET", target, None).await;
    assert_eq!(code, 200, "{object}");
    assert!(object["metadata"].get("annotations").is_none(), "{object}");
    let (code, _) = rouse
        .api(
            "POST",
            "/v1/namespaces/default/sandboxes",
            Some(&sandbox(
                "after",
                SLEEP,
                json!({"operatingMode": "Suspended"}),
            )),
        )
        .await;
    assert_eq!(code, 201);
}

/// The readiness answer of a listener: the status and the body.
async fn readyz(rouse: &Rouse, addr: std::net::SocketAddr) -> (u16, String) {
    support::http(addr, "GET", "/readyz", "localhost", &[], String::new())
        .await
        .unwrap_or_else(|e| rouse.fail(&format!("GET /readyz on {addr}: {e}")))
}

/// Waits until `/readyz` on `addr` answers 200.
async fn wait_ready(rouse: &Rouse, addr: std::net::SocketAddr) {
    let until = Instant::now() + DEADLINE;
    loop {
        let (code, body) = readyz(rouse, addr).await;
        if code == 200 {
            return;
        }
        if Instant::now() > until {
            rouse.fail(&format!(
                "/readyz on {addr} not 200 within {DEADLINE:?}: {body}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_full_disk_is_reported_and_rouse_up_recovers_without_losing_anything() {
    let dir = tempfile::tempdir().expect("tempdir");
    // Declared before `rouse`, so it is unmounted after `rouse up` has stopped.
    let Some(disk) =
        Tmpfs::mount_or_skip("a_full_disk_is_reported", &dir.path().join("data"), "2m")
    else {
        return;
    };
    let options = Options {
        admin: true,
        config: "[wake]\ndeadline = \"3s\"\n".to_owned(),
        ..Options::default()
    };
    let mut rouse = Rouse::start(dir.path(), &options);
    let admin = rouse.admin.expect("admin listener");
    wait_ready(&rouse, admin).await;
    let suspended = json!({"operatingMode": "Suspended"});
    rouse.create(&sandbox("sleeper", SLEEP, suspended)).await;

    // Sandboxes with 200 KB of annotations until the disk is full.
    let mut acknowledged = Vec::new();
    let refusal = loop {
        let name = format!("s{}", acknowledged.len());
        let mut object = sandbox(&name, SLEEP, json!({"operatingMode": "Suspended"}));
        object["metadata"]["annotations"] = json!({"example.com/blob": "x".repeat(200_000)});
        let (code, body) = rouse
            .api("POST", "/v1/namespaces/default/sandboxes", Some(&object))
            .await;
        match code {
            201 => acknowledged.push(name),
            _ => break (code, body),
        }
        assert!(acknowledged.len() < 20, "a 2 MiB disk holds fewer than 20");
    };
    assert_eq!(refusal.0, 503, "{}", refusal.1);
    assert!(
        refusal.1.to_string().contains("No space left"),
        "{}",
        refusal.1
    );

    // Reported on both readiness endpoints while it lasts; liveness stays green (the process
    // recovers by itself, a restart would not help while the disk is full).
    for addr in [admin, rouse.api] {
        let (code, body) = readyz(&rouse, addr).await;
        assert_eq!(code, 503, "/readyz on {addr}: {body}");
        assert!(
            body.contains("store") && body.contains("No space left"),
            "{body}"
        );
    }
    let (code, _) = support::http(
        rouse.api,
        "GET",
        "/healthz",
        "localhost",
        &[],
        String::new(),
    )
    .await
    .expect("healthz");
    assert_eq!(code, 200);
    assert_eq!(rouse.metric("rouse_store_healthy", "").await, 0.0);
    // Every call says why at once, instead of meeting the broken file.
    let started = Instant::now();
    let (code, body) = rouse
        .api("GET", "/v1/namespaces/default/sandboxes", None)
        .await;
    assert_eq!(code, 503, "{body}");
    assert!(body.to_string().contains("reopened"), "{body}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "answered at once"
    );
    // A wake cannot write its operatingMode: the request is answered at the wake deadline
    // (3 s here) with an error, and the log says why.
    let answer = rouse.get("sleeper", "/").await;
    assert!(
        matches!(answer, Ok((code, _)) if code >= 500),
        "a wake the store refuses is an error: {answer:?}"
    );
    let log = std::fs::read_to_string(dir.path().join("stderr.log")).expect("stderr log");
    assert!(
        log.lines()
            .any(|l| l.contains("wake failed") && l.contains("No space left")),
        "the failed wake is logged with its reason"
    );

    // Room again: the store reopens on its own and readiness turns green.
    disk.resize("64m");
    wait_ready(&rouse, rouse.api).await;
    wait_ready(&rouse, admin).await;
    assert!(
        rouse
            .metric("rouse_store_reopens_total", "result=\"ok\"")
            .await
            >= 1.0
    );
    let present = |list: &Value| -> BTreeMap<String, usize> {
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|s| {
                let name = s["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let blob = s["metadata"]["annotations"]["example.com/blob"]
                    .as_str()
                    .map_or(0, str::len);
                (name, blob)
            })
            .collect()
    };
    let (code, list) = rouse
        .api("GET", "/v1/namespaces/default/sandboxes", None)
        .await;
    assert_eq!(code, 200, "{list}");
    let found = present(&list);
    for name in &acknowledged {
        assert_eq!(
            found.get(name),
            Some(&200_000),
            "{name} is there and intact"
        );
    }
    let (code, _) = rouse
        .api(
            "POST",
            "/v1/namespaces/default/sandboxes",
            Some(&sandbox(
                "after",
                SLEEP,
                json!({"operatingMode": "Suspended"}),
            )),
        )
        .await;
    assert_eq!(code, 201, "writes work again");

    // And a restart finds the same.
    assert!(rouse.stop(), "rouse up exits cleanly");
    drop(rouse);
    let rouse = Rouse::start(dir.path(), &options);
    let (_, list) = rouse
        .api("GET", "/v1/namespaces/default/sandboxes", None)
        .await;
    let found = present(&list);
    for name in &acknowledged {
        assert_eq!(found.get(name), Some(&200_000), "{name} after the restart");
    }
    assert!(
        found.contains_key("after"),
        "the write after the reopen, after the restart"
    );
    drop(rouse);
    drop(disk);
}

#[tokio::test]
async fn kill9_during_patches_and_deletes_loses_nothing_acknowledged() {
    const OBJECTS: usize = 32;
    const PATCHES_EACH: usize = 40;
    const KILL_AFTER: usize = 400;
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Arc::new(Rouse::start(dir.path(), &Options::default()));
    let pid = rouse.pid().expect("running");
    for i in 0..OBJECTS {
        let object = sandbox(
            &format!("o{i}"),
            SLEEP,
            json!({"operatingMode": "Suspended"}),
        );
        rouse.create(&object).await;
    }
    // Per object: the last counter acknowledged, and whether its delete was acknowledged.
    let acked = Arc::new(std::sync::Mutex::new(
        BTreeMap::<usize, (usize, bool)>::new(),
    ));
    let total = Arc::new(AtomicUsize::new(0));
    let mut writers = tokio::task::JoinSet::new();
    for i in 0..OBJECTS {
        let (rouse, acked, total) = (rouse.clone(), acked.clone(), total.clone());
        writers.spawn(async move {
            let path = format!("/v1/namespaces/default/sandboxes/o{i}");
            for n in 1..=PATCHES_EACH {
                // Odd objects are deleted half-way.
                let (method, body) = if i % 2 == 1 && n == PATCHES_EACH / 2 {
                    ("DELETE", String::new())
                } else {
                    let patch =
                        json!({"metadata": {"annotations": {"example.com/n": n.to_string()}}});
                    ("PATCH", patch.to_string())
                };
                let Ok((code, _)) = support::http(
                    rouse.api,
                    method,
                    &path,
                    "localhost",
                    &[
                        ("content-type", "application/merge-patch+json".to_owned()),
                        (
                            "authorization",
                            format!("Bearer {}", rouse.token.as_deref().unwrap_or_default()),
                        ),
                    ],
                    body,
                )
                .await
                else {
                    return; // killed: the connection broke
                };
                if code != 200 {
                    return;
                }
                {
                    let mut acked = acked.lock().expect("lock");
                    let entry = acked.entry(i).or_insert((0, false));
                    if method == "DELETE" {
                        entry.1 = true;
                    } else {
                        entry.0 = n;
                    }
                }
                if total.fetch_add(1, Ordering::AcqRel) + 1 == KILL_AFTER {
                    let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
                }
                if method == "DELETE" {
                    return;
                }
            }
        });
    }
    while writers.join_next().await.is_some() {}
    assert!(
        total.load(Ordering::Acquire) >= KILL_AFTER,
        "rouse up was killed mid-way ({} writes acknowledged)",
        total.load(Ordering::Acquire)
    );
    let mut rouse = Arc::into_inner(rouse).expect("the only owner");
    rouse.stop();
    drop(rouse);

    let rouse = Rouse::start(dir.path(), &Options::default());
    let acked = acked.lock().expect("lock").clone();
    for (i, (n, deleted)) in acked {
        let object = rouse.sandbox(&format!("o{i}")).await;
        if deleted {
            assert!(object.is_none(), "o{i}: its acknowledged delete is kept");
            continue;
        }
        let object = object.unwrap_or_else(|| rouse.fail(&format!("o{i} is missing")));
        let stored: usize = object["metadata"]["annotations"]["example.com/n"]
            .as_str()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(
            stored >= n,
            "o{i}: patch {n} was acknowledged, {stored} is stored"
        );
    }
}
