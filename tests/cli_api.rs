//! The API commands of `rouse` end to end: the real binary as a subprocess against a REST API
//! served by the test process on 127.0.0.1:0 with the embedded store.

use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use rouse_controller::api::{ApiConfig, ApiState, load_or_create_token, serve};
use rouse_controller::store::EmbeddedStore;
use rouse_shared::api::Sandbox;
use rouse_shared::store::{ObjectKey, Patch, Store};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

const DEADLINE: Duration = Duration::from_secs(30);

const HELLO: &str = "\
apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: hello
  labels:
    app: hello
spec:
  podTemplate:
    spec:
      containers:
        - name: app
          image: python:3
          command: [python3, -m, http.server]
---
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxTemplate
metadata:
  name: runner
  namespace: team-a
spec:
  podTemplate:
    spec:
      containers:
        - name: app
          image: python:3
";

struct Api {
    server: String,
    data: tempfile::TempDir,
    store: EmbeddedStore,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<Result<(), rouse_controller::api::Error>>,
}

impl Api {
    async fn start() -> Api {
        let data = tempfile::tempdir().expect("tempdir");
        let (token, created) = load_or_create_token(data.path()).expect("token");
        assert!(created);
        let store = EmbeddedStore::open(&data.path().join("store.redb")).expect("store");
        let mut config = ApiConfig::new(Some(token), data.path());
        config.log_poll_interval = Duration::from_millis(10);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let server = format!("http://{}", listener.local_addr().expect("addr"));
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(
            listener,
            ApiState::new(store.clone(), config),
            shutdown.clone(),
        ));
        Api {
            server,
            data,
            store,
            shutdown,
            task,
        }
    }

    /// The CLI with this server and data dir, and nothing from the caller's environment.
    fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(env!("CARGO_BIN_EXE_rouse"));
        command
            .args(args)
            .env_remove("ROUSE_TOKEN")
            .env("ROUSE_SERVER", &self.server)
            .env("ROUSE_DATA_DIR", self.data.path())
            .stdin(Stdio::null())
            .kill_on_drop(true);
        command
    }

    async fn run(&self, args: &[&str]) -> Output {
        let output = self.command(args).output();
        tokio::time::timeout(DEADLINE, output)
            .await
            .unwrap_or_else(|_| panic!("rouse {args:?} did not finish"))
            .expect("run rouse")
    }

    async fn run_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        let mut child = self
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn rouse");
        let mut input = child.stdin.take().expect("stdin");
        input
            .write_all(stdin.as_bytes())
            .await
            .expect("write stdin");
        drop(input);
        tokio::time::timeout(DEADLINE, child.wait_with_output())
            .await
            .expect("rouse finishes")
            .expect("run rouse")
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("server stops")
            .expect("server task")
            .expect("serve");
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8")
}

/// Asserts the exit code and returns stdout and stderr.
fn expect(output: &Output, code: i32) -> (String, String) {
    let (stdout, stderr) = (text(&output.stdout), text(&output.stderr));
    assert_eq!(
        output.status.code(),
        Some(code),
        "stdout:\n{stdout}\nstderr:\n{stderr}"
    );
    (stdout, stderr)
}

fn write(dir: &Path, name: &str, content: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, content).expect("write manifest");
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn apply_get_delete() {
    let api = Api::start().await;
    let file = write(api.data.path(), "hello.yaml", HELLO);

    let (stdout, _) = expect(&api.run(&["apply", "-f", &file]).await, 0);
    assert_eq!(
        stdout,
        "sandbox.agents.x-k8s.io/hello created\nsandboxtemplate.extensions.agents.x-k8s.io/runner created\n"
    );
    let (stdout, _) = expect(&api.run(&["apply", "-f", &file]).await, 0);
    assert_eq!(
        stdout,
        "sandbox.agents.x-k8s.io/hello unchanged\nsandboxtemplate.extensions.agents.x-k8s.io/runner unchanged\n"
    );
    let changed = HELLO.replace("app: hello", "app: hello-2");
    let (stdout, _) = expect(
        &api.run_with_stdin(&["apply", "-f", "-"], &changed).await,
        0,
    );
    assert!(
        stdout.starts_with("sandbox.agents.x-k8s.io/hello configured\n"),
        "{stdout}"
    );

    // Table, wide, all namespaces.
    let (stdout, _) = expect(&api.run(&["get", "sandboxes"]).await, 0);
    let lines: Vec<&str> = stdout.lines().collect();
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(
        header,
        ["NAME", "READY", "REASON", "MODE", "AGE"],
        "{stdout}"
    );
    let row: Vec<&str> = lines[1].split_whitespace().collect();
    assert_eq!(
        &row[..4],
        ["hello", "<none>", "<none>", "Running"],
        "{stdout}"
    );
    assert!(row[4].ends_with('s'), "age {stdout}");
    let (stdout, _) = expect(&api.run(&["get", "sbx", "hello", "-o", "wide"]).await, 0);
    assert!(
        stdout.starts_with("NAME") && stdout.contains("POD IP") && stdout.contains("LAST ACTIVITY"),
        "{stdout}"
    );
    let (stdout, _) = expect(&api.run(&["get", "sandboxtemplate", "-A"]).await, 0);
    assert!(stdout.starts_with("NAMESPACE"), "{stdout}");
    assert!(
        stdout
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("team-a")),
        "{stdout}"
    );

    // Machine formats.
    let (stdout, _) = expect(
        &api.run(&["get", "sandbox", "hello", "-o", "json"]).await,
        0,
    );
    let object: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(object["kind"], "Sandbox");
    assert_eq!(object["metadata"]["labels"]["app"], "hello-2");
    let (stdout, _) = expect(&api.run(&["get", "sandboxes", "-o", "json"]).await, 0);
    let list: Value = serde_json::from_str(&stdout).expect("json");
    assert_eq!(list["kind"], "List");
    assert_eq!(list["items"][0]["metadata"]["name"], "hello");
    let (stdout, _) = expect(
        &api.run(&["get", "sandbox", "hello", "-o", "yaml"]).await,
        0,
    );
    assert!(stdout.contains("kind: Sandbox"), "{stdout}");
    let (stdout, _) = expect(&api.run(&["get", "sandboxes", "-o", "name"]).await, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io/hello\n");
    let (stdout, _) = expect(&api.run(&["get", "Sandbox/hello", "-o", "name"]).await, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io/hello\n");
    let (stdout, _) = expect(
        &api.run(&["get", "sandboxes", "-l", "app=other", "-o", "name"])
            .await,
        0,
    );
    assert_eq!(stdout, "");

    // Errors: not found, empty, unknown kind, invalid manifest.
    let (_, stderr) = expect(&api.run(&["get", "sandbox", "nope"]).await, 1);
    assert_eq!(
        stderr,
        "Error from server (NotFound): sandboxes.agents.x-k8s.io \"nope\" not found\n"
    );
    let (stdout, stderr) = expect(&api.run(&["get", "swp", "-n", "empty"]).await, 0);
    assert_eq!(
        (stdout.as_str(), stderr.as_str()),
        ("", "No resources found in empty namespace.\n")
    );
    let (_, stderr) = expect(&api.run(&["get", "pods"]).await, 1);
    assert!(
        stderr.contains("doesn't have a resource type \"pods\""),
        "{stderr}"
    );
    let invalid = write(
        api.data.path(),
        "bad.yaml",
        "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: bad\nspec:\n  replicas: 2\n",
    );
    let (stdout, stderr) = expect(&api.run(&["apply", "-f", &invalid]).await, 1);
    assert_eq!(stdout, "");
    assert!(stderr.contains("spec.podTemplate"), "{stderr}");
    expect(&api.run(&["get", "sandbox", "bad"]).await, 1);

    // Delete, and re-create from `get -o yaml` output.
    let (exported, _) = expect(
        &api.run(&["get", "sandbox", "hello", "-o", "yaml"]).await,
        0,
    );
    let exported = write(api.data.path(), "exported.yaml", &exported);
    let (stdout, _) = expect(&api.run(&["delete", "sandbox", "hello"]).await, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io \"hello\" deleted\n");
    let (stdout, _) = expect(&api.run(&["apply", "-f", &exported]).await, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io/hello created\n");
    let (stdout, _) = expect(&api.run(&["delete", "sbx/hello"]).await, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io \"hello\" deleted\n");
    let (_, stderr) = expect(&api.run(&["delete", "sandbox", "hello"]).await, 1);
    assert!(
        stderr.starts_with("Error from server (NotFound)"),
        "{stderr}"
    );
    expect(
        &api.run(&["delete", "sandbox", "hello", "--ignore-not-found"])
            .await,
        0,
    );
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn suspend_resume_wait() {
    let api = Api::start().await;
    let file = write(api.data.path(), "hello.yaml", HELLO);
    expect(&api.run(&["apply", "-f", &file]).await, 0);

    let (stdout, _) = expect(&api.run(&["suspend", "hello"]).await, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io/hello suspended\n");
    let (stdout, _) = expect(&api.run(&["get", "sandbox", "hello"]).await, 0);
    assert!(stdout.contains("Suspended"), "{stdout}");
    let (stdout, _) = expect(&api.run(&["resume", "hello"]).await, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io/hello resumed\n");
    let (_, stderr) = expect(&api.run(&["suspend", "nope"]).await, 1);
    assert!(
        stderr.starts_with("Error from server (NotFound)"),
        "{stderr}"
    );

    // A resume of an expired sandbox changes nothing: it says why.
    let expired = HELLO
        .split("---")
        .next()
        .expect("the sandbox")
        .replace("name: hello", "name: past")
        .replace(
            "spec:\n  podTemplate",
            "spec:\n  shutdownTime: \"2020-01-01T00:00:00Z\"\n  podTemplate",
        );
    let file = write(api.data.path(), "past.yaml", &expired);
    expect(&api.run(&["apply", "-f", &file]).await, 0);
    let (_, stderr) = expect(&api.run(&["resume", "past"]).await, 1);
    assert!(
        stderr.contains("expired at 2020-01-01T00:00:00Z (spec.shutdownTime)"),
        "{stderr}"
    );

    // Usage errors exit 2 with clap's prefix, like unknown flags.
    for args in [
        &["delete", "sandbox"][..],
        &["wait", "hello", "--for=bogus"][..],
        &["get", "sandbox/"][..],
    ] {
        let (_, stderr) = expect(&api.run(args).await, 2);
        assert!(stderr.starts_with("error: "), "{args:?}: {stderr}");
    }

    // Not ready within the timeout: exit 1 with kubectl's message.
    let (_, stderr) = expect(
        &api.run(&["wait", "hello", "--for=condition=Ready", "--timeout=1s"])
            .await,
        1,
    );
    assert_eq!(
        stderr,
        "error: timed out waiting for the condition on sandboxes/hello\n"
    );

    // Becomes ready while the CLI waits: it returns as soon as it sees the condition.
    let waiting = api
        .command(&["wait", "hello", "--for=condition=Ready", "--timeout=30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wait");
    let ready = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }]}});
    Store::<Sandbox>::patch_status(
        &api.store,
        &ObjectKey::new("default", "hello"),
        &Patch::merge(ready).expect("object"),
    )
    .await
    .expect("patch status");
    let output = tokio::time::timeout(DEADLINE, waiting.wait_with_output())
        .await
        .expect("wait returns")
        .expect("wait output");
    let (stdout, _) = expect(&output, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io/hello condition met\n");
    let (stdout, _) = expect(&api.run(&["get", "sandbox", "hello"]).await, 0);
    assert!(stdout.contains("True"), "{stdout}");

    // Waiting for deletion.
    let deleting = api
        .command(&["wait", "sandbox/hello", "--for=delete", "--timeout=30s"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn wait");
    expect(&api.run(&["delete", "sbx", "hello"]).await, 0);
    let output = tokio::time::timeout(DEADLINE, deleting.wait_with_output())
        .await
        .expect("wait returns")
        .expect("wait output");
    let (stdout, _) = expect(&output, 0);
    assert_eq!(stdout, "sandbox.agents.x-k8s.io/hello deleted\n");
    api.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_and_auth() {
    let api = Api::start().await;
    let file = write(api.data.path(), "hello.yaml", HELLO);
    expect(&api.run(&["apply", "-f", &file]).await, 0);
    let log = rouse_shared::datadir::log_file(api.data.path(), "default", "hello");
    std::fs::create_dir_all(log.parent().expect("parent")).expect("mkdir");
    std::fs::write(&log, "one\ntwo\nthree\n").expect("write log");

    let (stdout, _) = expect(&api.run(&["logs", "hello"]).await, 0);
    assert_eq!(stdout, "one\ntwo\nthree\n");
    let (stdout, _) = expect(&api.run(&["logs", "hello", "--tail", "1"]).await, 0);
    assert_eq!(stdout, "three\n");
    let (_, stderr) = expect(&api.run(&["logs", "nope"]).await, 1);
    assert!(
        stderr.starts_with("Error from server (NotFound)"),
        "{stderr}"
    );

    // Follow: appended output arrives while the command runs.
    let mut follow = api
        .command(&["logs", "hello", "-f", "--tail", "1"])
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn logs -f");
    let mut stdout = follow.stdout.take().expect("stdout");
    let mut seen = Vec::new();
    let mut read_until = async |needle: &str| {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&seen).contains(needle) {
            let n = tokio::time::timeout_at(deadline, stdout.read(&mut buf))
                .await
                .unwrap_or_else(|_| panic!("no {needle:?} in {:?}", String::from_utf8_lossy(&seen)))
                .expect("read");
            assert!(n > 0, "logs -f ended early");
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    };
    assert_eq!(read_until("three\n").await, "three\n");
    {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&log)
            .expect("open");
        f.write_all(b"four\n").expect("append");
    }
    assert_eq!(read_until("four\n").await, "three\nfour\n");
    follow.start_kill().expect("stop logs -f");
    follow.wait().await.expect("reap logs -f");

    // Auth: the token comes from the data dir by default; a wrong one fails with 401.
    let (_, stderr) = expect(&api.run(&["get", "sandboxes", "--token", "wrong"]).await, 1);
    assert_eq!(stderr, "Error from server (Unauthorized): Unauthorized\n");
    let elsewhere = tempfile::tempdir().expect("tempdir");
    let no_token = api
        .command(&["get", "sandboxes"])
        .env("ROUSE_DATA_DIR", elsewhere.path())
        .output();
    let output = tokio::time::timeout(DEADLINE, no_token)
        .await
        .expect("finishes")
        .expect("runs");
    let (_, stderr) = expect(&output, 1);
    assert!(stderr.contains("Unauthorized"), "{stderr}");
    // It says where it looked for a token.
    let looked = elsewhere.path().join("token");
    assert!(
        stderr.contains("no token") && stderr.contains(&looked.display().to_string()),
        "{stderr}"
    );
    // No server listening: a clear error, exit 1.
    let (_, stderr) = expect(
        &api.run(&["get", "sandboxes", "--server", "http://127.0.0.1:1"])
            .await,
        1,
    );
    assert!(stderr.contains("cannot reach the Rouse API"), "{stderr}");
    api.stop().await;
}
