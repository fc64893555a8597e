//! Container images without a registry: host files packed into a one-layer docker archive
//! (the `docker save` format) and imported into containerd with `ctr images import`.
//!
//! A real node has no registry here, so every image a test pod runs is made from the host:
//! [`ImageBuilder`] collects files, directories, host programs with the shared libraries `ldd`
//! finds for them, and text; [`ImageBuilder::build`] writes the archive deterministically
//! (sorted entries, mtime 0, the owners given) under `<cache>/images/` and reuses it while the
//! inputs are unchanged. [`pause_image`], [`python_runtime_image`] and [`rouse_image`] are the
//! images the real node needs, [`python_sdk_image`] the one its SDK tests add, the
//! `upstream_*` images stand in for those of upstream's end-to-end tests; [`import`] loads an
//! archive into a containerd.
//!
//! # Example
//! ```no_run
//! use rouse_testsupport::image::ImageBuilder;
//! let archive = ImageBuilder::new("registry.local/true:1")
//!     .binary_with_libs("/bin/true", "/bin/true")
//!     .entrypoint(["/bin/true"])
//!     .build()?;
//! # Ok::<(), rouse_testsupport::image::Error>(())
//! ```

mod archive;
mod command;
mod containerd;
mod layer;
mod ldd;
mod name;
mod read;
mod recipes;
mod upstream;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;

pub use containerd::{K8S_NAMESPACE, ScratchContainerd, containerd_or_skip, import, listed_images};
pub use name::normalized_name;
pub use read::{ArchiveContents, LayerEntry, inspect, read_layer_file};
pub use recipes::{
    Image, NONROOT, PAUSE, PYTHON_RUNTIME, PYTHON_SDK, ROUSE, SANDBOX_RUNTIME_PATH,
    SDK_SITE_PACKAGES, pause_binary, pause_image, python_runtime_image, python_sdk_image,
    rouse_image,
};
pub use upstream::{
    UPSTREAM_CHROME, UPSTREAM_PAUSE, UPSTREAM_PYTHON_RUNTIME, UPSTREAM_SANDBOXD,
    upstream_chrome_image, upstream_pause_image, upstream_python_runtime_image,
    upstream_sandboxd_image,
};

/// A failure to build, read or import an image; each names what it was working on.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A path inside the image is not a clean absolute path.
    #[error("image path {path:?}: {reason}")]
    ImagePath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The image name is not `name[:tag]` of a reference containerd accepts.
    #[error("image name {name:?}: {reason}")]
    ImageName {
        /// The name as given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// A host file or directory could not be read.
    #[error("read {}: {source}", path.display())]
    HostRead {
        /// The host path.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A file in the cache could not be written.
    #[error("write {}: {source}", path.display())]
    Write {
        /// The path written.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A host program needs a shared library `ldd` cannot find.
    #[error("{} needs {library}, which ldd does not find", program.display())]
    MissingLibrary {
        /// The host program.
        program: PathBuf,
        /// The library's name.
        library: String,
    },
    /// An entry sits below a path that the image has as something other than a directory.
    #[error("image path {path} is below {parent}, which is not a directory in the image")]
    NotADirectory {
        /// The entry.
        path: String,
        /// Its parent that is a file or a symlink.
        parent: String,
    },
    /// The image would exceed the bounds (100 000 entries, 4 GiB of file content).
    #[error("image too large: {entries} entries, {bytes} bytes (at most 100000 and 4 GiB)")]
    TooLarge {
        /// Entries collected so far.
        entries: usize,
        /// Bytes of file content collected so far.
        bytes: u64,
    },
    /// An owner is given for a path the image does not contain.
    #[error("image path {path} was given an owner but the image does not contain it")]
    NoSuchEntry {
        /// The path.
        path: String,
    },
    /// A program (`ldd`, `cc`, `ctr`, `containerd`) failed.
    #[error("{program} failed: {detail}")]
    Command {
        /// The program and what it was doing.
        program: String,
        /// Exit status and the end of its output.
        detail: String,
    },
    /// A program did not finish in time (it was killed).
    #[error("{what} did not finish within {deadline:?}")]
    Deadline {
        /// The program and what it was doing.
        what: String,
        /// The deadline it had.
        deadline: Duration,
    },
    /// An archive does not have the docker-archive layout or its digests do not match.
    #[error("archive {}: {detail}", path.display())]
    BadArchive {
        /// The archive.
        path: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// `ctr images import` succeeded but containerd does not list the image.
    #[error("containerd at {} does not list {name} after the import", socket.display())]
    NotImported {
        /// The image name.
        name: String,
        /// containerd's socket.
        socket: PathBuf,
    },
    /// A containerd test cannot run here (not root, or a program missing).
    #[error("containerd unavailable: {0}")]
    Unavailable(String),
}

/// `Result` with this module's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The `PATH` of an image's environment unless [`ImageBuilder::env`] sets another (Docker's
/// default).
pub const DEFAULT_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// What goes into the image, in call order (a later item wins on the same path).
#[derive(Debug, Clone)]
enum Item {
    File {
        host: PathBuf,
        image: String,
    },
    Dir {
        host: PathBuf,
        image: String,
    },
    LibsOf {
        host: PathBuf,
    },
    Text {
        image: String,
        data: Vec<u8>,
        mode: u32,
    },
    EmptyDir {
        image: String,
        mode: u32,
    },
    Symlink {
        image: String,
        target: String,
    },
}

/// The runtime configuration written into the image's config JSON (Docker's field names).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
#[serde(rename_all = "PascalCase")]
struct RunConfig {
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    exposed_ports: BTreeMap<String, Empty>,
    env: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    entrypoint: Vec<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    cmd: Vec<String>,
    working_dir: String,
}

/// `{}` in JSON: Docker writes exposed ports as a map to empty objects.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
struct Empty {}

/// Collects what a one-layer image holds and how it runs; [`build`](Self::build) writes it.
#[derive(Debug, Clone)]
pub struct ImageBuilder {
    name: String,
    items: Vec<Item>,
    excludes: Vec<String>,
    owners: Vec<(String, u32, u32)>,
    config: RunConfig,
}

impl ImageBuilder {
    /// A builder of the image `name` (`registry.local/rouse:dev`; no tag means `latest`).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            items: Vec::new(),
            excludes: Vec::new(),
            owners: Vec::new(),
            config: RunConfig {
                user: None,
                exposed_ports: BTreeMap::new(),
                env: vec![format!("PATH={DEFAULT_PATH}")],
                entrypoint: Vec::new(),
                cmd: Vec::new(),
                working_dir: "/".to_owned(),
            },
        }
    }

    /// The host file at `host` (symlinks followed) as `image_path`, with the host's mode.
    pub fn file(mut self, host: impl AsRef<Path>, image_path: &str) -> Self {
        self.items.push(Item::File {
            host: host.as_ref().to_owned(),
            image: image_path.to_owned(),
        });
        self
    }

    /// The host directory `host` and everything below it as `image_path`; symlinks inside it
    /// stay symlinks, modes are the host's.
    pub fn dir(mut self, host: impl AsRef<Path>, image_path: &str) -> Self {
        self.items.push(Item::Dir {
            host: host.as_ref().to_owned(),
            image: image_path.to_owned(),
        });
        self
    }

    /// The host program `host` as `image_path`, plus every shared library `ldd` lists for it
    /// (the dynamic loader included) at the path `ldd` prints, so the program runs in the image.
    pub fn binary_with_libs(self, host: impl AsRef<Path>, image_path: &str) -> Self {
        let host = host.as_ref().to_owned();
        self.file(&host, image_path).libs_of(host)
    }

    /// Only the shared libraries `ldd` lists for the host ELF file `host` (a Python extension
    /// module, a plugin), at the paths `ldd` prints.
    pub fn libs_of(mut self, host: impl AsRef<Path>) -> Self {
        self.items.push(Item::LibsOf {
            host: host.as_ref().to_owned(),
        });
        self
    }

    /// A file `image_path` holding `contents`, with permission bits `mode` (`0o644`).
    pub fn text(mut self, image_path: &str, contents: impl Into<Vec<u8>>, mode: u32) -> Self {
        self.items.push(Item::Text {
            image: image_path.to_owned(),
            data: contents.into(),
            mode,
        });
        self
    }

    /// An empty directory `image_path` with permission bits `mode` (`0o1777` for `/tmp`).
    pub fn empty_dir(mut self, image_path: &str, mode: u32) -> Self {
        self.items.push(Item::EmptyDir {
            image: image_path.to_owned(),
            mode,
        });
        self
    }

    /// A symlink `image_path` pointing at `target` (kept as written: relative or absolute).
    pub fn symlink(mut self, image_path: &str, target: &str) -> Self {
        self.items.push(Item::Symlink {
            image: image_path.to_owned(),
            target: target.to_owned(),
        });
        self
    }

    /// Leaves `image_path` and everything below it out (after all additions).
    pub fn exclude(mut self, image_path: &str) -> Self {
        self.excludes.push(image_path.to_owned());
        self
    }

    /// Makes `uid:gid` the owner of the entry `image_path` (every entry is `0:0` otherwise).
    pub fn owner(mut self, image_path: &str, uid: u32, gid: u32) -> Self {
        self.owners.push((image_path.to_owned(), uid, gid));
        self
    }

    /// The program the image runs (Docker's `ENTRYPOINT`).
    pub fn entrypoint<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.config.entrypoint = args.into_iter().map(Into::into).collect();
        self
    }

    /// The default arguments (Docker's `CMD`).
    pub fn cmd<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Self {
        self.config.cmd = args.into_iter().map(Into::into).collect();
        self
    }

    /// Sets environment variable `key` (replacing an earlier value; `PATH` has a default).
    pub fn env(mut self, key: &str, value: &str) -> Self {
        let prefix = format!("{key}=");
        self.config.env.retain(|e| !e.starts_with(&prefix));
        self.config.env.push(format!("{key}={value}"));
        self
    }

    /// The working directory of the image's process (default `/`).
    pub fn workdir(mut self, path: &str) -> Self {
        self.config.working_dir = path.to_owned();
        self
    }

    /// The user the image runs as, numerically (Docker's `USER uid:gid`).
    pub fn user(mut self, uid: u32, gid: u32) -> Self {
        self.config.user = Some(format!("{uid}:{gid}"));
        self
    }

    /// Declares TCP `port` (Docker's `EXPOSE port/tcp`).
    pub fn expose(mut self, port: u16) -> Self {
        self.config
            .exposed_ports
            .insert(format!("{port}/tcp"), Empty {});
        self
    }

    /// The image's name as given.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Writes the docker archive under `<cache>/images/` and returns its path; an archive of
    /// the same inputs (names, modes, owners, host files' sizes and mtimes, texts, config)
    /// is reused without rebuilding.
    pub fn build(&self) -> Result<PathBuf> {
        self.build_in(&images_dir())
    }

    /// [`build`](Self::build) with the archive cached in `dir` instead of [`images_dir`].
    pub fn build_in(&self, dir: &Path) -> Result<PathBuf> {
        name::check_name(&self.name)?;
        let entries = layer::resolve(&self.items, &self.excludes, &self.owners)?;
        archive::build_cached(dir, &self.name, &self.config, &entries)
    }
}

/// Where built archives (and the compiled pause binary) are kept: `<cache>/images`, with the
/// cache of [`cluster::cache_dir`](crate::cluster::cache_dir).
pub fn images_dir() -> PathBuf {
    crate::cluster::cache_dir().join("images")
}

#[cfg(test)]
mod tests;
