//! Stand-ins for the images upstream agent-sandbox's end-to-end tests run, packed from host
//! files under the exact names those tests reference (their default `IMAGE_PREFIX` and
//! `IMAGE_TAG`), so the real node finds them without pulling. docs/testing.md ("Upstream's
//! suites on the real node") lists how each differs from upstream's.

use std::path::Path;

use super::recipes::{pause_binary, python_base, with_busybox};
use super::{Error, Image, ImageBuilder, Result, SANDBOX_RUNTIME_PATH};

/// The name upstream's Python runtime tests use (`test/e2e/extensions/pythonruntime_test.go`).
pub const UPSTREAM_PYTHON_RUNTIME: &str = "kind.local/python-runtime-sandbox:latest";

/// The name upstream's sandboxd test uses (`test/e2e/extensions/sandboxd_test.go`).
pub const UPSTREAM_SANDBOXD: &str = "kind.local/sandboxd:latest";

/// The pause image upstream's RuntimeClass tests run (`runtime_class_test.go`).
pub const UPSTREAM_PAUSE: &str = "registry.k8s.io/pause:3.10";

/// The name upstream's Chrome test uses (`test/e2e/chromesandbox_test.go`).
pub const UPSTREAM_CHROME: &str = "kind.local/chrome-sandbox:latest";

/// Debian's headless Chromium (`chromium-headless-shell`, with `chromium-common`'s files).
const CHROMIUM_DIR: &str = "/usr/lib/chromium";
/// Its program.
const CHROMIUM: &str = "/usr/lib/chromium/chromium-headless-shell";
/// Vulkan's validation layer: a debugging aid, 23 MB Chromium never loads by itself.
const CHROMIUM_EXCLUDES: &[&str] = &[
    "libVkLayer_khronos_validation.so",
    "libVkLayer_khronos_validation.so.TOC",
];

/// The Chrome stand-in's entrypoint (ours).
const CHROME_ENTRYPOINT: &str = include_str!("../../image/chrome-sandbox-entrypoint.sh");

/// The non-root user upstream's runtime images run as (`USER 1000`).
const UPSTREAM_USER: u32 = 1000;

/// `/etc/passwd` naming upstream's runtime user.
const PASSWD: &str = "root:x:0:0:root:/root:/bin/sh\n\
sandbox:x:1000:1000:sandbox:/workspace:/bin/sh\n\
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n";

/// `kind.local/python-runtime-sandbox:latest`: what [`super::python_runtime_image`] holds
/// (the host's Python, busybox, `deploy/examples/runtime/sandbox_runtime.py`, which serves
/// the `GET /` and `POST /execute` upstream's FastAPI runtime serves and the tests call, on
/// 8888, on a threading server), as upstream's user 1000.
pub fn upstream_python_runtime_image() -> Result<Image> {
    let (builder, _) = python_base(UPSTREAM_PYTHON_RUNTIME)?;
    let runtime = crate::cluster::deploy_dir().join("examples/runtime/sandbox_runtime.py");
    let archive = builder
        .file(&runtime, SANDBOX_RUNTIME_PATH)
        .cmd(["python3", SANDBOX_RUNTIME_PATH])
        .user(UPSTREAM_USER, UPSTREAM_USER)
        .expose(8888)
        .build()?;
    Ok(image(archive, UPSTREAM_PYTHON_RUNTIME))
}

/// `kind.local/sandboxd:latest`: upstream's own sandboxd (`sandboxd`, the static binary
/// `testsupport/upstream/build.sh` builds from the pinned module) at
/// `/usr/local/bin/sandboxd` as the entrypoint, as upstream's `packages/sandboxd/Dockerfile`
/// lays it out (`/workspace` owned by and the working directory of user 1000, REST on 8080,
/// gRPC on 9090), with busybox's shell and tools where upstream has Debian's.
pub fn upstream_sandboxd_image(sandboxd: &Path) -> Result<Image> {
    let builder = ImageBuilder::new(UPSTREAM_SANDBOXD).file(sandboxd, "/usr/local/bin/sandboxd");
    let archive = with_busybox(builder)?
        .text("/etc/passwd", PASSWD, 0o644)
        .text("/etc/group", "root:x:0:\nsandbox:x:1000:\n", 0o644)
        .empty_dir("/workspace", 0o755)
        .owner("/workspace", UPSTREAM_USER, UPSTREAM_USER)
        .empty_dir("/tmp", 0o1777)
        .workdir("/workspace")
        .user(UPSTREAM_USER, UPSTREAM_USER)
        .expose(8080)
        .expose(9090)
        .entrypoint(["/usr/local/bin/sandboxd"])
        .build()?;
    Ok(image(archive, UPSTREAM_SANDBOXD))
}

/// `registry.k8s.io/pause:3.10`: the program of [`super::pause_image`] under the name
/// upstream's RuntimeClass tests run.
pub fn upstream_pause_image() -> Result<Image> {
    let archive = ImageBuilder::new(UPSTREAM_PAUSE)
        .file(pause_binary()?, "/pause")
        .entrypoint(["/pause"])
        .build()?;
    Ok(image(archive, UPSTREAM_PAUSE))
}

/// `kind.local/chrome-sandbox:latest`: Debian's headless Chromium (`/usr/lib/chromium`, the
/// package `chromium-headless-shell`) with the shared libraries of it and of its modules,
/// busybox, and `/chrome-sandbox-entrypoint` (`testsupport/image/chrome-sandbox-entrypoint.sh`):
/// without arguments it runs Chromium with its DevTools endpoint on 127.0.0.1:9222, with
/// `probe` it checks that endpoint answers (the readiness probe upstream's test sets).
pub fn upstream_chrome_image() -> Result<Image> {
    let dir = Path::new(CHROMIUM_DIR);
    if !Path::new(CHROMIUM).is_file() {
        return Err(Error::HostRead {
            path: CHROMIUM.into(),
            source: std::io::Error::other("missing: install Debian's chromium-headless-shell"),
        });
    }
    let mut builder = with_busybox(ImageBuilder::new(UPSTREAM_CHROME))?
        .dir(dir, CHROMIUM_DIR)
        .libs_of(CHROMIUM);
    for excluded in CHROMIUM_EXCLUDES {
        builder = builder.exclude(&format!("{CHROMIUM_DIR}/{excluded}"));
    }
    let listing = std::fs::read_dir(dir).map_err(|source| Error::HostRead {
        path: dir.to_owned(),
        source,
    })?;
    for entry in listing.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".so") && !CHROMIUM_EXCLUDES.contains(&name.as_str()) {
            builder = builder.libs_of(entry.path());
        }
    }
    let archive = builder
        .text("/chrome-sandbox-entrypoint", CHROME_ENTRYPOINT, 0o755)
        .empty_dir("/tmp", 0o1777)
        .empty_dir("/root", 0o700)
        .env("HOME", "/root")
        .expose(9222)
        .entrypoint(["/chrome-sandbox-entrypoint"])
        .build()?;
    Ok(image(archive, UPSTREAM_CHROME))
}

fn image(archive: std::path::PathBuf, name: &str) -> Image {
    Image {
        archive,
        name: name.to_owned(),
    }
}
