//! `rouse validate` end to end: the real binary on the example manifests, upstream v1beta1
//! manifests, broken manifests and standard input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn validate(args: &[&Path]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rouse"))
        .arg("validate")
        .args(args)
        .current_dir(root())
        .output()
        .expect("run rouse validate")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8(bytes.to_vec()).expect("utf-8 output")
}

fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read dir")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .collect();
    files.sort();
    files
}

#[test]
fn examples_are_valid() {
    let files = yaml_files(&root().join("deploy/examples"));
    assert!(
        files.len() >= 4,
        "expected the example manifests, found {files:?}"
    );
    let refs: Vec<&Path> = files.iter().map(PathBuf::as_path).collect();
    let out = validate(&refs);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "examples failed:\n{stdout}\n{stderr}");
    assert!(!stderr.contains("warning:"), "examples warn:\n{stderr}");
    for line in [
        "ok  Sandbox default/web",
        "ok  SandboxTemplate default/python-runner",
        "ok  SandboxWarmPool default/python-runners",
        "ok  SandboxClaim default/task-42",
        "ok  Sandbox default/notebook",
        "ok  SandboxSnapshot default/notebook-before-upgrade",
        "ok  Sandbox default/notebook-fork",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing {line:?} in:\n{stdout}"
        );
    }
}

#[test]
fn upstream_manifests_are_valid() {
    let out = validate(&[Path::new("tests/fixtures/upstream")]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(
        out.status.success(),
        "upstream manifests failed:\n{stdout}\n{stderr}"
    );
    let ok: Vec<&str> = stdout.lines().filter(|l| l.starts_with("ok  ")).collect();
    assert_eq!(
        ok,
        [
            "ok  SandboxTemplate claimed-sandbox-service/serving-template",
            "ok  SandboxWarmPool claimed-sandbox-service/serving-pool",
            "ok  SandboxClaim claimed-sandbox-service/serving-a",
            "ok  SandboxClaim claimed-sandbox-service/serving-b",
            "ok  Sandbox default/docker-sbx",
            "ok  Sandbox default/demo-sandbox",
            "ok  SandboxTemplate hpa-test/python-sandbox-template",
            "ok  SandboxWarmPool hpa-test/python-sdk-warmpool",
        ],
        "stderr:\n{stderr}"
    );
}

#[test]
fn broken_manifests_name_file_document_and_field() {
    let out = validate(&[Path::new("tests/fixtures/invalid/broken.yaml")]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(
        stdout.trim(),
        "ok  Sandbox default/ok-one",
        "stderr:\n{stderr}"
    );
    let file = "tests/fixtures/invalid/broken.yaml";
    for want in [
        format!(
            "error: {file}: document 1 (line 3): Sandbox default/Web_1: spec.operatingMode: must be one of Running, Suspended, got \"running\" (did you mean \"Running\"?)"
        ),
        format!(
            "error: {file}: document 1 (line 3): Sandbox default/Web_1: spec.podTemplate.spec.containers[0].imagePulPolicy: unknown field \"imagePulPolicy\" (did you mean \"imagePullPolicy\"?)"
        ),
        format!("error: {file}: document 1 (line 3): Sandbox default/Web_1: metadata.name: "),
        format!(
            "error: {file}: document 2 (line 18): SandboxWarmPool default/pool: spec.replicas: must be an integer, got string \"3\"; remove the quotes"
        ),
        format!(
            "error: {file}: document 2 (line 18): SandboxWarmPool default/pool: spec.sandboxTemplateRef: required field is missing"
        ),
        format!(
            "error: {file}: document 3 (line 25): SandboxClaim default/claim: apiVersion: SandboxClaim belongs to group extensions.agents.x-k8s.io"
        ),
        format!(
            "error: {file}: document 4 (line 33): Sandbox default/forked: spec.restoreFrom.snapshotName: required field is missing"
        ),
        format!(
            "error: {file}: document 4 (line 33): Sandbox default/forked: spec.suspension.idleTimeoutSeconds: must be at least 0, got -5"
        ),
        format!(
            "error: {file}: document 4 (line 33): Sandbox default/forked: spec.suspension.strategy: must be one of Stop, Checkpoint, got \"Freeze\""
        ),
    ] {
        assert!(
            stderr.lines().any(|l| l.starts_with(&want)),
            "missing {want:?} in:\n{stderr}"
        );
    }
    assert!(stderr.contains("1 valid, 4 invalid, 0 skipped"), "{stderr}");
}

#[test]
fn a_syntax_error_does_not_hide_other_documents() {
    let out = validate(&[Path::new("tests/fixtures/invalid/syntax.yaml")]);
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "ok  SandboxSnapshot default/before",
            "ok  SandboxSnapshot default/after"
        ],
        "stderr:\n{stderr}"
    );
    let line = stderr
        .lines()
        .find(|l| l.starts_with("error: tests/fixtures/invalid/syntax.yaml: document 2"))
        .unwrap_or_else(|| panic!("no error for document 2 in:\n{stderr}"));
    assert!(
        line.ends_with("document 2 (line 11, column 9): unclosed bracket '['"),
        "the error names the absolute line and column: {line}"
    );
}

#[test]
fn reads_standard_input_and_reports_missing_files() {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rouse"))
        .args(["validate", "-", "does/not/exist.yaml"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rouse validate");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(
            b"apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n---\n\
              apiVersion: agents.x-k8s.io/v1beta1\nkind: SandboxSnapshot\n\
              metadata: {name: s, namespace: team-a}\nspec: {sandboxName: alice}\n",
        )
        .expect("write stdin");
    let out = child.wait_with_output().expect("wait");
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "skip  Namespace team-a (not a sandbox kind)",
            "ok  SandboxSnapshot team-a/s"
        ],
        "stderr:\n{stderr}"
    );
    assert!(
        stderr.contains("error: does/not/exist.yaml: No such file or directory"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn directory_walk_skips_links_hidden_and_target_directories() {
    let dir = std::env::temp_dir().join(format!("rouse-validate-walk-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    for sub in ["nested", ".git", "target"] {
        std::fs::create_dir_all(dir.join(sub)).expect("create dirs");
    }
    let snapshot = "apiVersion: agents.x-k8s.io/v1beta1\nkind: SandboxSnapshot\n\
                    metadata: {name: NAME}\nspec: {sandboxName: web}\n";
    for (file, name) in [
        ("a.yaml", "a"),
        ("nested/b.yml", "b"),
        (".git/c.yaml", "c"),
        ("target/d.json", "d"),
    ] {
        std::fs::write(dir.join(file), snapshot.replace("NAME", name)).expect("write");
    }
    // Two links back up make a walk that follows links grow without end.
    std::os::unix::fs::symlink(&dir, dir.join("self")).expect("symlink");
    std::os::unix::fs::symlink(&dir, dir.join("nested/up")).expect("symlink");
    let out = validate(&[dir.as_path()]);
    let stdout = text(&out.stdout);
    std::fs::remove_dir_all(&dir).expect("clean up");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "ok  SandboxSnapshot default/a",
            "ok  SandboxSnapshot default/b"
        ]
    );
}

#[test]
fn json_output_has_one_object_per_document_and_a_summary() {
    let out = Command::new(env!("CARGO_BIN_EXE_rouse"))
        .args([
            "validate",
            "--output",
            "json",
            "tests/fixtures/invalid/broken.yaml",
            "tests/fixtures/invalid/syntax.yaml",
        ])
        .current_dir(root())
        .output()
        .expect("run rouse validate");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "json mode writes only stdout: {out:?}"
    );
    let lines: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("each line is JSON"))
        .collect();
    assert_eq!(lines.len(), 5 + 3 + 1, "{lines:#?}");
    let results: Vec<&str> = lines[..8]
        .iter()
        .map(|l| l["result"].as_str().expect("result"))
        .collect();
    assert_eq!(
        results,
        [
            "invalid", "invalid", "invalid", "invalid", "valid", "valid", "invalid", "valid"
        ]
    );
    let pool = &lines[1];
    assert_eq!(pool["kind"], "SandboxWarmPool");
    assert_eq!(pool["document"], 2);
    assert_eq!(pool["line"], 18);
    assert_eq!(pool["namespace"], serde_json::Value::Null);
    assert_eq!(pool["findings"][0]["path"], "spec.replicas");
    assert_eq!(pool["findings"][0]["severity"], "error");
    let syntax = &lines[6];
    assert_eq!(syntax["document"], 2);
    assert!(syntax["findings"][0]["message"].is_string());
    assert_eq!(
        lines[8],
        serde_json::json!({"summary": {"valid": 3, "invalid": 5, "skipped": 0, "unreadable": 0}})
    );
}
