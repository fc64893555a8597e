//! The upstream agent-sandbox Python SDK (`k8s-agent-sandbox`, unchanged) against a real
//! `rouse up` over its HTTPS API and kubeconfig: direct mode through the proxy's router
//! headers, a sandbox adopted from the warm pool of `deploy/examples/sdk-runtime.yaml`,
//! commands, files, a command that wakes the suspended sandbox, terminate
//! (`tests/fixtures/sdk/sdk_flow.py` does the steps).
//!
//! It runs twice: with the pinned SDK of the venv testsupport/python/setup.sh makes
//! (`ROUSE_TEST_VENV`, else `~/.cache/rouse/venv`), and with the newest release on PyPI,
//! which setup.sh installs into `ROUSE_TEST_SDK_LATEST_VENV`, else
//! `~/.cache/rouse/venv-sdk-latest` (`.ci/run` calls it). Without a venv its test is skipped
//! with a printed reason, except under CI (`CI` set), where it fails.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use support::{Options, Rouse};

/// The SDK flow starts, wakes and stops sandboxes; it takes a few seconds.
const FLOW_DEADLINE: Duration = Duration::from_secs(180);

/// The python of the venv `env` names (else `~/.cache/rouse/<default>`) with the SDK
/// importable, or why there is none.
fn sdk_python(env: &str, default: &str) -> Result<PathBuf, String> {
    let venv = match std::env::var_os(env) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let home = std::env::var_os("HOME").ok_or("HOME is not set")?;
            Path::new(&home).join(".cache/rouse").join(default)
        }
    };
    let python = venv.join("bin/python3");
    let probe = Command::new(&python)
        .args(["-c", "import k8s_agent_sandbox, kubernetes"])
        .output()
        .map_err(|err| format!("{}: {err}", python.display()))?;
    if !probe.status.success() {
        return Err(format!(
            "{} cannot import the SDK: {}",
            python.display(),
            String::from_utf8_lossy(&probe.stderr)
        ));
    }
    Ok(python)
}

#[test]
fn sdk_readme_flow_against_rouse_up() {
    if let Some(python) = python_or_skip("ROUSE_TEST_VENV", "venv") {
        flow(&python);
    }
}

/// The same flow with the newest `k8s-agent-sandbox` release.
#[test]
fn newest_sdk_readme_flow_against_rouse_up() {
    if let Some(python) = python_or_skip("ROUSE_TEST_SDK_LATEST_VENV", "venv-sdk-latest") {
        let version = python
            .parent()
            .and_then(Path::parent)
            .map(|venv| venv.join(".rouse-sdk-version"))
            .and_then(|f| std::fs::read_to_string(f).ok())
            .unwrap_or_default();
        eprintln!("k8s-agent-sandbox {}", version.trim());
        flow(&python);
    }
}

/// The venv's python, or `None` with a printed reason (a panic under CI).
fn python_or_skip(env: &str, default: &str) -> Option<PathBuf> {
    match sdk_python(env, default) {
        Ok(python) => Some(python),
        Err(why) if std::env::var_os("CI").is_some() => {
            panic!("the agent-sandbox SDK venv is needed under CI: {why}")
        }
        Err(why) => {
            eprintln!(
                "skipped: the agent-sandbox SDK venv is missing ({why}); run testsupport/python/setup.sh"
            );
            None
        }
    }
}

/// The SDK flow with `python`'s SDK against a new `rouse up`.
fn flow(python: &Path) {
    let dir = tempfile::tempdir().expect("temp dir");
    let rouse = Rouse::start(
        dir.path(),
        &Options {
            tls: true,
            ..Options::default()
        },
    );
    let example = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/deploy/examples/sdk-runtime.yaml"
    );
    let applied = rouse.cli(&["apply", "-f", example]);
    if !applied.status.success() {
        rouse.fail(&format!(
            "rouse apply failed: {}",
            String::from_utf8_lossy(&applied.stderr)
        ));
    }
    // Adoption needs a ready member: wait for the pool as a user would, with the CLI.
    let until = Instant::now() + support::DEADLINE;
    loop {
        let pool = rouse.cli(&["get", "pools", "python-sandbox-warmpool", "-o", "json"]);
        let ready = serde_json::from_slice::<serde_json::Value>(&pool.stdout)
            .ok()
            .and_then(|v| v["status"]["readyReplicas"].as_i64())
            .unwrap_or(0);
        if ready >= 1 {
            break;
        }
        if Instant::now() > until {
            rouse.fail(&format!(
                "the warm pool has no ready member: {}{}",
                String::from_utf8_lossy(&pool.stdout),
                String::from_utf8_lossy(&pool.stderr)
            ));
        }
        std::thread::sleep(Duration::from_millis(100));
    }

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/sdk/sdk_flow.py"
    );
    let mut child = Command::new(python)
        .arg(script)
        .arg("--kubeconfig")
        .arg(rouse.kubeconfig())
        .arg("--direct")
        .arg(format!("http://{}", rouse.proxy))
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the SDK flow");
    let until = Instant::now() + FLOW_DEADLINE;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the SDK flow") {
            break status;
        }
        if Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            rouse.fail("the SDK flow did not finish in time");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let output = child.wait_with_output().expect("SDK flow output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !status.success() || !stdout.contains("all steps passed") {
        rouse.fail(&format!(
            "the SDK flow failed ({status}):\n{stdout}\n{stderr}"
        ));
    }
    println!("{stdout}");
}
