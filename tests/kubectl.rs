//! `rouse up` speaks Kubernetes: the real kubectl and the official Python client, unchanged,
//! drive it over HTTPS with the kubeconfig it writes.
//!
//! - `kubectl_drives_rouse_up`: discovery (`api-resources`), OpenAPI (`explain`), client- and
//!   server-side apply (with a conflict), `get` with the CRD's printer columns, a bounded
//!   `get -w`, `wait --for=condition=Ready`, merge and JSON patches, `label`, `scale` of a warm
//!   pool, `--dry-run=server`, and `delete` with each propagation policy.
//! - `python_client_drives_rouse_up`: tests/fixtures/k8s_client.py — CRUD, label and field
//!   selectors, paging, a watch from a list's resourceVersion, and 410 Gone for a watch from a
//!   version older than a restart.
//!
//! The clients come from the venv testsupport/python/setup.sh makes (`ROUSE_TEST_VENV`, else
//! `~/.cache/rouse/venv`); without it the tests fail under CI and are skipped elsewhere.

// The harness also exports helpers this file does not use.
#[allow(unused_imports)]
mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use support::{Options, Rouse};

/// The venv with kubectl and the Python clients, or `None` (after failing under CI).
fn venv() -> Option<PathBuf> {
    let dir = std::env::var_os("ROUSE_TEST_VENV")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/rouse/venv")));
    match dir {
        Some(dir) if dir.join("bin/kubectl").is_file() => Some(dir),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "no test venv with kubectl: run testsupport/python/setup.sh (CI does in .ci/run)"
            );
            eprintln!("skipped: no test venv; run testsupport/python/setup.sh");
            None
        }
    }
}

/// Runs kubectl with the kubeconfig `rouse up` wrote.
fn kubectl(venv: &Path, rouse: &Rouse, args: &[&str]) -> Output {
    Command::new(venv.join("bin/kubectl"))
        .args(args)
        .arg("--request-timeout=30s")
        .env("KUBECONFIG", rouse.kubeconfig())
        .env_remove("KUBECTL_EXTERNAL_DIFF")
        .output()
        .expect("run kubectl")
}

/// Runs kubectl and returns its stdout; fails the test (with stderr and the server's log)
/// when it does not succeed.
fn ok(venv: &Path, rouse: &Rouse, args: &[&str]) -> String {
    let output = kubectl(venv, rouse, args);
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    if !output.status.success() {
        rouse.fail(&format!(
            "kubectl {args:?} failed: {stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    stdout
}

/// Writes a manifest into the test's directory.
fn manifest(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write manifest");
    path.display().to_string()
}

const SANDBOX: &str = "apiVersion: agents.x-k8s.io/v1beta1
kind: Sandbox
metadata:
  name: web
spec:
  podTemplate:
    spec:
      containers:
        - name: web
          image: python:3
          command: [sh, -c, 'exec python3 -m http.server --bind 127.0.0.1 \"$PORT\"']
          ports:
            - containerPort: 8000
";

#[test]
fn kubectl_drives_rouse_up() {
    let Some(venv) = venv() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let rouse = Rouse::start(
        dir.path(),
        &Options {
            tls: true,
            ..Options::default()
        },
    );
    let kubeconfig = std::fs::read_to_string(rouse.kubeconfig()).expect("kubeconfig");
    assert!(kubeconfig.contains(&format!("server: https://{}", rouse.api)));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(rouse.kubeconfig())
            .expect("stat")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the kubeconfig holds the token");
    }

    // Discovery and OpenAPI.
    let resources = ok(&venv, &rouse, &["api-resources"]);
    for want in [
        "sandboxes",
        "sandboxwarmpools",
        "swp",
        "extensions.agents.x-k8s.io/v1beta1",
    ] {
        assert!(resources.contains(want), "{want} in {resources}");
    }
    let explain = ok(&venv, &rouse, &["explain", "sandbox.spec.suspension"]);
    assert!(explain.contains("idleTimeoutSeconds"), "{explain}");

    // Client-side apply, printer columns, wait, a bounded watch.
    let web = manifest(dir.path(), "web.yaml", SANDBOX);
    let applied = ok(&venv, &rouse, &["apply", "-f", &web]);
    assert!(
        applied.contains("sandbox.agents.x-k8s.io/web created"),
        "{applied}"
    );
    ok(
        &venv,
        &rouse,
        &[
            "wait",
            "--for=condition=Ready",
            "sandbox/web",
            "--timeout=60s",
        ],
    );
    let table = ok(&venv, &rouse, &["get", "sandboxes"]);
    let header: Vec<&str> = table
        .lines()
        .next()
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert_eq!(
        header,
        ["NAME", "READY", "REASON", "MODE", "AGE"],
        "{table}"
    );
    assert!(table.contains("DependenciesReady"), "{table}");
    let watched = ok(
        &venv,
        &rouse,
        &["get", "sandboxes", "-w", "--request-timeout=2s"],
    );
    assert!(watched.lines().any(|l| l.starts_with("web ")), "{watched}");

    // Patches and labels.
    ok(
        &venv,
        &rouse,
        &[
            "patch",
            "sandbox",
            "web",
            "--type=merge",
            "-p",
            r#"{"metadata":{"labels":{"a":"1"}}}"#,
        ],
    );
    ok(
        &venv,
        &rouse,
        &[
            "patch",
            "sandbox",
            "web",
            "--type=json",
            "-p",
            r#"[{"op":"add","path":"/metadata/labels/b","value":"2"}]"#,
        ],
    );
    ok(&venv, &rouse, &["label", "sandbox", "web", "c=3"]);
    let labels = ok(
        &venv,
        &rouse,
        &["get", "sandbox", "web", "-o", "jsonpath={.metadata.labels}"],
    );
    assert_eq!(labels, r#"{"a":"1","b":"2","c":"3"}"#);

    // Server-side dry run stores nothing.
    let other = manifest(
        dir.path(),
        "other.yaml",
        &SANDBOX.replace("name: web\n", "name: dry\n"),
    );
    ok(&venv, &rouse, &["apply", "-f", &other, "--dry-run=server"]);
    let missing = kubectl(&venv, &rouse, &["get", "sandbox", "dry"]);
    assert!(!missing.status.success(), "a dry-run create was stored");
    ok(
        &venv,
        &rouse,
        &["delete", "sandbox", "web", "--dry-run=server"],
    );
    ok(&venv, &rouse, &["get", "sandbox", "web"]);

    // Server-side apply of the warm pool example, a conflict, scale.
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/examples/warm-pool.yaml"
    );
    let applied = ok(&venv, &rouse, &["apply", "--server-side", "-f", example]);
    assert!(
        applied.contains(
            "sandboxwarmpool.extensions.agents.x-k8s.io/python-runners serverside-applied"
        ),
        "{applied}"
    );
    let rival = manifest(
        dir.path(),
        "rival.yaml",
        "apiVersion: extensions.agents.x-k8s.io/v1beta1\nkind: SandboxWarmPool\n\
         metadata:\n  name: python-runners\nspec:\n  replicas: 5\n",
    );
    let conflict = kubectl(
        &venv,
        &rouse,
        &[
            "apply",
            "--server-side",
            "--field-manager=rival",
            "-f",
            &rival,
        ],
    );
    let stderr = String::from_utf8_lossy(&conflict.stderr);
    assert!(
        !conflict.status.success() && stderr.contains(r#"conflict with "kubectl": .spec.replicas"#),
        "{stderr}"
    );
    ok(
        &venv,
        &rouse,
        &["scale", "sandboxwarmpool", "python-runners", "--replicas=3"],
    );
    ok(
        &venv,
        &rouse,
        &[
            "wait",
            "--for=jsonpath={.status.readyReplicas}=3",
            "swp/python-runners",
            "--timeout=60s",
        ],
    );
    let selector = ok(
        &venv,
        &rouse,
        &[
            "get",
            "swp",
            "python-runners",
            "-o",
            "jsonpath={.status.selector}",
        ],
    );

    // Delete with each propagation policy: the pool orphans its members; the claim's sandbox
    // goes in the foreground; the template in the background.
    ok(
        &venv,
        &rouse,
        &[
            "delete",
            "sandboxwarmpool",
            "python-runners",
            "--cascade=orphan",
        ],
    );
    let members = ok(
        &venv,
        &rouse,
        &["get", "sandboxes", "-l", &selector, "-o", "name"],
    );
    assert_eq!(
        members.lines().count(),
        3,
        "orphaned members stay: {members}"
    );
    ok(
        &venv,
        &rouse,
        &["delete", "sandboxclaim", "task-42", "--cascade=foreground"],
    );
    ok(
        &venv,
        &rouse,
        &[
            "delete",
            "sandboxtemplate",
            "python-runner",
            "--cascade=background",
        ],
    );
    ok(&venv, &rouse, &["delete", "sandbox", "web"]);
    let left = ok(
        &venv,
        &rouse,
        &[
            "get",
            "sandboxclaims,sandboxtemplates,sandboxwarmpools",
            "-o",
            "name",
        ],
    );
    assert_eq!(left.trim(), "", "{left}");
}

#[test]
fn python_client_drives_rouse_up() {
    let Some(venv) = venv() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let options = Options {
        tls: true,
        ..Options::default()
    };
    let mut rouse = Rouse::start(dir.path(), &options);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/k8s_client.py");
    let version_file = dir.path().join("resource-version");
    let run = |rouse: &Rouse, mode: &str| {
        let output = Command::new(venv.join("bin/python"))
            .arg(script)
            .arg(rouse.kubeconfig())
            .arg(mode)
            .arg(&version_file)
            .output()
            .expect("run python");
        if !output.status.success() {
            rouse.fail(&format!(
                "k8s_client.py {mode} failed: {}{}",
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            ));
        }
    };
    run(&rouse, "crud");
    // A restart forgets the watch history: a watch from before it is 410 Gone.
    assert!(rouse.stop(), "rouse up stops cleanly");
    let rouse = Rouse::start(dir.path(), &options);
    run(&rouse, "expired");
}
