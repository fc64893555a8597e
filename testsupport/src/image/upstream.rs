//! Stand-ins for the images upstream agent-sandbox's end-to-end tests run, packed from host
//! files under the exact names those tests reference (their default `IMAGE_PREFIX` and
//! `IMAGE_TAG`), so the real node finds them without pulling. docs/testing.md ("Upstream's
//! suites on the real node") lists how each differs from upstream's.

use std::path::Path;

use super::recipes::{pause_binary, python_base, with_busybox};
use super::{Image, ImageBuilder, Result, SANDBOX_RUNTIME_PATH};

/// The name upstream's Python runtime tests use (`test/e2e/extensions/pythonruntime_test.go`).
pub const UPSTREAM_PYTHON_RUNTIME: &str = "kind.local/python-runtime-sandbox:latest";

/// The name upstream's sandboxd test uses (`test/e2e/extensions/sandboxd_test.go`).
pub const UPSTREAM_SANDBOXD: &str = "kind.local/sandboxd:latest";

/// The pause image upstream's RuntimeClass tests run (`runtime_class_test.go`).
pub const UPSTREAM_PAUSE: &str = "registry.k8s.io/pause:3.10";

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

fn image(archive: std::path::PathBuf, name: &str) -> Image {
    Image {
        archive,
        name: name.to_owned(),
    }
}
