//! Writing the docker archive: the layer tar (hashed as it is written), the config JSON named
//! by its digest, `manifest.json` and `repositories`, cached under a key of the inputs.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Read, Seek, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ring::digest::{Context, SHA256};
use serde_json::json;

use super::layer::{Content, Entry, Kind};
use super::name::split_name;
use super::{Error, Result, RunConfig};

/// Bumped when the archive layout changes, so older cached archives are not reused.
const FORMAT: &str = "rouse-testsupport docker-archive v1";

/// Archives of the same image name unused for this long are removed when a new one is built
/// (every use refreshes an archive's mtime), so the cache does not grow with every input change.
const UNUSED: Duration = Duration::from_secs(3600);

/// The archive of these inputs in `dir`, built when it is not there yet.
pub(crate) fn build_cached(
    dir: &Path,
    name: &str,
    config: &RunConfig,
    entries: &BTreeMap<String, Entry>,
) -> Result<PathBuf> {
    let key = cache_key(name, config, entries);
    let slug: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = dir.join(format!("{slug}-{}.tar", &key[..16]));
    if path.is_file() {
        touch(&path);
        return Ok(path);
    }
    std::fs::create_dir_all(dir).map_err(|e| write_error(dir, e))?;
    // Both files are written beside the result and renamed into place: a concurrent build of
    // the same inputs writes the same bytes, and a reader never sees half an archive.
    let layer = tempfile::NamedTempFile::new_in(dir).map_err(|e| write_error(dir, e))?;
    let (diff_id, layer_size) = write_layer(entries, layer.as_file(), layer.path())?;
    let config_json = config_json(config, &diff_id);
    let config_id = sha256_hex(&config_json);
    let (repo, tag) = split_name(name);
    let manifest = json!([{
        "Config": format!("{config_id}.json"),
        "RepoTags": [name],
        "Layers": [format!("{diff_id}/layer.tar")],
    }]);
    let repositories = json!({ repo: { tag: diff_id } });

    let out = tempfile::NamedTempFile::new_in(dir).map_err(|e| write_error(dir, e))?;
    let fail = |e| write_error(out.path(), e);
    let mut tar = tar::Builder::new(BufWriter::new(out.as_file()));
    // The manifest first: a reader finds the image's name without reading the layer.
    append_bytes(&mut tar, "manifest.json", manifest.to_string().as_bytes()).map_err(fail)?;
    append_bytes(
        &mut tar,
        "repositories",
        repositories.to_string().as_bytes(),
    )
    .map_err(fail)?;
    append_bytes(&mut tar, &format!("{config_id}.json"), &config_json).map_err(fail)?;
    let mut layer_file = layer.reopen().map_err(|e| write_error(layer.path(), e))?;
    layer_file.rewind().map_err(fail)?;
    let mut header = file_header(0o644, layer_size);
    tar.append_data(
        &mut header,
        format!("{diff_id}/layer.tar"),
        layer_file.take(layer_size),
    )
    .map_err(fail)?;
    tar.into_inner().and_then(|mut w| w.flush()).map_err(fail)?;
    // Readable by all, as any cache file (temporary files are created 0600).
    std::fs::set_permissions(out.path(), std::fs::Permissions::from_mode(0o644))
        .map_err(|e| write_error(out.path(), e))?;
    out.persist(&path)
        .map_err(|e| write_error(&path, e.error))?;
    prune(dir, &slug, &path);
    Ok(path)
}

/// Writes the layer tar of `entries` to `file`: entries in path order, mtime 0, no user or
/// group names. Returns its SHA-256 (hex, the config's `diff_id`) and size.
fn write_layer(entries: &BTreeMap<String, Entry>, file: &File, at: &Path) -> Result<(String, u64)> {
    let fail = |e| write_error(at, e);
    let mut tar = tar::Builder::new(HashingWriter::new(BufWriter::new(file)));
    for (path, entry) in entries {
        let mut header = tar::Header::new_ustar();
        header.set_mode(entry.mode);
        header.set_uid(u64::from(entry.uid));
        header.set_gid(u64::from(entry.gid));
        header.set_mtime(0);
        match &entry.kind {
            Kind::Dir => {
                header.set_entry_type(tar::EntryType::Directory);
                header.set_size(0);
                tar.append_data(&mut header, path, std::io::empty())
                    .map_err(fail)?;
            }
            Kind::Symlink(target) => {
                header.set_entry_type(tar::EntryType::Symlink);
                header.set_size(0);
                tar.append_link(&mut header, path, target).map_err(fail)?;
            }
            Kind::File(Content::Bytes(data)) => {
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(data.len() as u64);
                tar.append_data(&mut header, path, data.as_slice())
                    .map_err(fail)?;
            }
            Kind::File(Content::Host {
                path: host, size, ..
            }) => {
                let source = File::open(host).map_err(|e| read_error(host, e))?;
                let now = source.metadata().map_err(|e| read_error(host, e))?.len();
                if now != *size {
                    // The header's size must match the bytes that follow it.
                    return Err(read_error(
                        host,
                        std::io::Error::other("changed while the image was built"),
                    ));
                }
                header.set_entry_type(tar::EntryType::Regular);
                header.set_size(*size);
                tar.append_data(&mut header, path, source.take(*size))
                    .map_err(fail)?;
            }
        }
    }
    let mut hashing = tar.into_inner().map_err(fail)?;
    hashing.flush().map_err(fail)?;
    Ok((hashing.hex(), hashing.written))
}

/// The image config: architecture, the run config, the layer's `diff_id`, a fixed date.
fn config_json(config: &RunConfig, diff_id: &str) -> Vec<u8> {
    let value = json!({
        "architecture": architecture(),
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": config,
        "rootfs": { "type": "layers", "diff_ids": [format!("sha256:{diff_id}")] },
        "history": [{
            "created": "1970-01-01T00:00:00Z",
            "created_by": "rouse-testsupport image builder",
        }],
    });
    value.to_string().into_bytes()
}

/// The OCI name of this machine's architecture.
pub(crate) fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// A digest of everything the archive is made of: names, modes, owners, texts, symlink
/// targets, host files by path, size and mtime (not content: hashing a large tree at every
/// use would cost more than a rebuild), and the config.
fn cache_key(name: &str, config: &RunConfig, entries: &BTreeMap<String, Entry>) -> String {
    let mut context = Context::new(&SHA256);
    let mut line = |text: String| {
        context.update(text.as_bytes());
        context.update(b"\n");
    };
    line(FORMAT.to_owned());
    line(architecture().to_owned());
    line(name.to_owned());
    line(json!(config).to_string());
    for (path, entry) in entries {
        let what = match &entry.kind {
            Kind::Dir => "dir".to_owned(),
            Kind::Symlink(target) => format!("symlink {target}"),
            Kind::File(Content::Bytes(data)) => format!("bytes {}", sha256_hex(data)),
            Kind::File(Content::Host {
                path,
                size,
                mtime_ns,
            }) => format!("host {} {size} {mtime_ns}", path.display()),
        };
        line(format!(
            "{path}\t{:o}\t{}:{}\t{what}",
            entry.mode, entry.uid, entry.gid
        ));
    }
    hex(context.finish().as_ref())
}

/// Removes other archives of the same name that were not used for [`UNUSED`].
fn prune(dir: &Path, slug: &str, keep: &Path) {
    let Ok(listing) = std::fs::read_dir(dir) else {
        return;
    };
    let prefix = format!("{slug}-");
    for entry in listing.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let ours = name.starts_with(&prefix)
            && name.ends_with(".tar")
            && name.len() == prefix.len() + 16 + 4;
        if !ours || path == keep {
            continue;
        }
        let unused = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > UNUSED);
        if unused {
            let _ = std::fs::remove_file(&path);
        }
    }
}

/// Marks a cached archive as used now (see [`UNUSED`]); a read-only cache is fine.
fn touch(path: &Path) {
    if let Ok(file) = File::options().write(true).open(path) {
        let _ = file.set_modified(SystemTime::now());
    }
}

fn append_bytes<W: Write>(
    tar: &mut tar::Builder<W>,
    name: &str,
    data: &[u8],
) -> std::io::Result<()> {
    let mut header = file_header(0o644, data.len() as u64);
    tar.append_data(&mut header, name, data)
}

fn file_header(mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_ustar();
    header.set_entry_type(tar::EntryType::Regular);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(0);
    header
}

/// SHA-256 of `data`, lowercase hex.
pub(crate) fn sha256_hex(data: &[u8]) -> String {
    hex(ring::digest::digest(&SHA256, data).as_ref())
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A writer that hashes and counts what passes through it.
pub(crate) struct HashingWriter<W> {
    inner: W,
    context: Context,
    written: u64,
}

impl<W> HashingWriter<W> {
    pub(crate) fn new(inner: W) -> Self {
        Self {
            inner,
            context: Context::new(&SHA256),
            written: 0,
        }
    }

    /// The SHA-256 of everything written so far, lowercase hex.
    pub(crate) fn hex(&self) -> String {
        hex(self.context.clone().finish().as_ref())
    }
}

impl<W: Write> Write for HashingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.context.update(&buf[..n]);
        self.written += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

fn write_error(path: &Path, source: std::io::Error) -> Error {
    Error::Write {
        path: path.to_owned(),
        source,
    }
}

fn read_error(path: &Path, source: std::io::Error) -> Error {
    Error::HostRead {
        path: path.to_owned(),
        source,
    }
}
