//! The sandbox runtime shipped for the agent-sandbox SDK (`deploy/examples/runtime/`): it
//! serves the SDK's workload API (checked over real HTTP by a Python script, since the runtime
//! is Python), and the copy embedded in `deploy/examples/sdk-runtime.yaml` is that file.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn runtime_source() -> PathBuf {
    root().join("deploy/examples/runtime/sandbox_runtime.py")
}

#[test]
fn embedded_runtime_is_the_source_file() {
    let path = root().join("deploy/examples/sdk-runtime.yaml");
    let text = std::fs::read_to_string(&path).expect("read the example");
    let docs: Vec<Value> = serde_saphyr::from_str_multiple(&text).expect("yaml");
    let template = docs
        .iter()
        .find(|d| d["kind"] == "SandboxTemplate")
        .expect("a SandboxTemplate");
    let command = &template["spec"]["podTemplate"]["spec"]["containers"][0]["command"];
    assert_eq!(command[0], "python3");
    assert_eq!(command[1], "-c");
    let embedded = command[2].as_str().expect("the script");
    let source = std::fs::read_to_string(runtime_source()).expect("read the runtime");
    assert!(
        embedded == source,
        "deploy/examples/sdk-runtime.yaml embeds a different runtime than \
         deploy/examples/runtime/sandbox_runtime.py: copy the file into the block scalar \
         (indented 14 spaces)"
    );
    let pool = docs
        .iter()
        .find(|d| d["kind"] == "SandboxWarmPool")
        .expect("a SandboxWarmPool");
    assert_eq!(
        pool["spec"]["sandboxTemplateRef"]["name"],
        template["metadata"]["name"]
    );
}

#[test]
fn runtime_serves_the_sdk_workload_api() {
    let script = root().join("tests/fixtures/sdk/check_runtime.py");
    let mut child = Command::new("python3")
        .arg(&script)
        .arg(runtime_source())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3 runs (it is needed by the test suite)");
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for the check") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the runtime check did not finish within 90 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let output = child.wait_with_output().expect("output");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        status.success(),
        "runtime check failed ({status}):\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("all checks passed"), "{stdout}");
}
