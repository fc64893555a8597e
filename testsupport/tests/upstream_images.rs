//! The stand-ins for upstream's e2e images: the exact names upstream's tests reference, and
//! the layout, user, ports and commands those tests rely on (docs/testing.md, "Upstream's
//! suites on the real node"). No root needed: archives are only read back.

use std::path::Path;

use rouse_testsupport::image::{
    self, ArchiveContents, LayerEntry, SANDBOX_RUNTIME_PATH, UPSTREAM_CHROME, UPSTREAM_PAUSE,
    UPSTREAM_PYTHON_RUNTIME, UPSTREAM_SANDBOXD, inspect, read_layer_file,
};
use serde_json::json;

fn entry<'a>(contents: &'a ArchiveContents, path: &str) -> &'a LayerEntry {
    contents
        .layer
        .get(path)
        .unwrap_or_else(|| panic!("{path} missing from {}", contents.name))
}

#[test]
fn the_names_are_those_upstreams_tests_reference() {
    // test/e2e/extensions: `%spython-runtime-sandbox:%s` and `%ssandboxd:%s` with the
    // default prefix `kind.local/` and tag `latest`; runtime_class_test.go's pause image.
    assert_eq!(
        UPSTREAM_PYTHON_RUNTIME,
        "kind.local/python-runtime-sandbox:latest"
    );
    assert_eq!(UPSTREAM_SANDBOXD, "kind.local/sandboxd:latest");
    assert_eq!(UPSTREAM_PAUSE, "registry.k8s.io/pause:3.10");
    // test/e2e/chromesandbox_test.go: `%schrome-sandbox:%s`.
    assert_eq!(UPSTREAM_CHROME, "kind.local/chrome-sandbox:latest");
}

#[test]
fn python_runtime_stand_in_serves_the_runtime_as_upstreams_user() {
    let built = image::upstream_python_runtime_image().expect("the stand-in");
    let contents = inspect(&built.archive).expect("a valid archive");
    assert_eq!(contents.name, UPSTREAM_PYTHON_RUNTIME);
    let runtime =
        rouse_testsupport::cluster::deploy_dir().join("examples/runtime/sandbox_runtime.py");
    assert_eq!(
        read_layer_file(&built.archive, SANDBOX_RUNTIME_PATH).expect("the runtime"),
        std::fs::read(runtime).expect("the repository's runtime")
    );
    let config = &contents.config["config"];
    assert_eq!(config["Cmd"], json!(["python3", SANDBOX_RUNTIME_PATH]));
    assert_eq!(config["User"], "1000:1000");
    assert_eq!(config["ExposedPorts"], json!({"8888/tcp": {}}));
    // The runtime's working directory is writable by user 1000.
    assert_eq!(entry(&contents, "/app").mode, 0o777);
}

#[test]
fn sandboxd_stand_in_is_laid_out_as_upstreams_dockerfile() {
    // Any host program stands for the daemon here: the layout is what is checked.
    let built = image::upstream_sandboxd_image(Path::new("/bin/true")).expect("the stand-in");
    let contents = inspect(&built.archive).expect("a valid archive");
    assert_eq!(contents.name, UPSTREAM_SANDBOXD);
    let binary = entry(&contents, "/usr/local/bin/sandboxd");
    assert_eq!((binary.kind, binary.mode), ('0', 0o755));
    let workspace = entry(&contents, "/workspace");
    assert_eq!(
        (workspace.kind, workspace.uid, workspace.gid),
        ('5', 1000, 1000)
    );
    let config = &contents.config["config"];
    assert_eq!(config["Entrypoint"], json!(["/usr/local/bin/sandboxd"]));
    assert_eq!(config["User"], "1000:1000");
    assert_eq!(config["WorkingDir"], "/workspace");
    assert_eq!(
        config["ExposedPorts"],
        json!({"8080/tcp": {}, "9090/tcp": {}})
    );
    let passwd = read_layer_file(&built.archive, "/etc/passwd").expect("passwd");
    assert!(
        String::from_utf8_lossy(&passwd)
            .lines()
            .any(|l| l.starts_with("sandbox:x:1000:1000:")),
        "no user 1000"
    );
    // The test's Execute runs `/bin/sh -c "echo hello world"`.
    if Path::new("/bin/busybox").is_file() {
        assert_eq!(
            entry(&contents, "/bin/sh").link.as_deref(),
            Some("/bin/busybox")
        );
    }
}

#[test]
fn pause_stand_in_is_the_pause_program_under_kubernetes_name() {
    let built = image::upstream_pause_image().expect("the stand-in");
    let contents = inspect(&built.archive).expect("a valid archive");
    assert_eq!(contents.name, UPSTREAM_PAUSE);
    let paths: Vec<&str> = contents.layer.keys().map(String::as_str).collect();
    assert_eq!(paths, ["/pause"]);
    assert_eq!(contents.config["config"]["Entrypoint"], json!(["/pause"]));
}

#[test]
fn chrome_stand_in_holds_chromium_and_the_entrypoint_the_test_probes() {
    let chromium = Path::new("/usr/lib/chromium/chromium-headless-shell");
    if !chromium.is_file() {
        assert!(
            !rouse_testsupport::cluster::required(),
            "{} missing: install Debian's chromium-headless-shell (required under CI)",
            chromium.display()
        );
        eprintln!("skipping: {} missing", chromium.display());
        return;
    }
    let built = image::upstream_chrome_image().expect("the stand-in");
    let contents = inspect(&built.archive).expect("a valid archive");
    assert_eq!(contents.name, UPSTREAM_CHROME);
    assert_eq!(
        entry(&contents, "/usr/lib/chromium/chromium-headless-shell").mode,
        0o755
    );
    for data in ["icudtl.dat", "resources.pak", "v8_context_snapshot.bin"] {
        assert_eq!(
            entry(&contents, &format!("/usr/lib/chromium/{data}")).kind,
            '0'
        );
    }
    assert!(
        !contents
            .layer
            .contains_key("/usr/lib/chromium/libVkLayer_khronos_validation.so"),
        "the validation layer is left out"
    );
    // The readiness probe upstream's test sets: `/chrome-sandbox-entrypoint probe`.
    let script = entry(&contents, "/chrome-sandbox-entrypoint");
    assert_eq!((script.kind, script.mode), ('0', 0o755));
    let text = read_layer_file(&built.archive, "/chrome-sandbox-entrypoint").expect("script");
    let text = String::from_utf8_lossy(&text);
    assert!(text.contains("--remote-debugging-port=9222"), "{text}");
    assert!(text.contains("probe"), "{text}");
    assert_eq!(
        entry(&contents, "/usr/bin/wget").link.as_deref(),
        Some("/bin/busybox"),
        "the probe's wget"
    );
    let config = &contents.config["config"];
    assert_eq!(config["Entrypoint"], json!(["/chrome-sandbox-entrypoint"]));
    assert_eq!(config["ExposedPorts"], json!({"9222/tcp": {}}));
}
