//! Reading a docker archive back: its manifest, config and layer entries, with the digests
//! checked, so tests assert on what an archive holds rather than on how it was made.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Read};
use std::path::{Path, PathBuf};

use ring::digest::{Context, SHA256};
use serde_json::Value;

use super::archive::{hex, sha256_hex};
use super::{Error, Result};

/// At most this much of a JSON member or a file read from a layer is held in memory.
const MAX_READ: u64 = 64 << 20;

/// What a docker archive holds.
#[derive(Debug, Clone)]
pub struct ArchiveContents {
    /// The image's name (the manifest's only `RepoTags` entry).
    pub name: String,
    /// `manifest.json`.
    pub manifest: Value,
    /// The image config (`<digest>.json`).
    pub config: Value,
    /// The layer's entries by absolute image path (`/usr/bin/python3`).
    pub layer: BTreeMap<String, LayerEntry>,
}

/// One entry of the layer tar.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayerEntry {
    /// `'0'` file, `'5'` directory, `'2'` symlink (the tar type flag).
    pub kind: char,
    /// Permission bits.
    pub mode: u32,
    /// Owner.
    pub uid: u64,
    /// Group.
    pub gid: u64,
    /// Size in bytes (files).
    pub size: u64,
    /// Modification time (seconds).
    pub mtime: u64,
    /// A symlink's target.
    pub link: Option<String>,
}

/// Reads `archive`, checking that it has one image with one layer, that the config's file name
/// is its digest and that the layer's digest is the config's `diff_id`.
pub fn inspect(archive: &Path) -> Result<ArchiveContents> {
    let bad = |detail: String| Error::BadArchive {
        path: archive.to_owned(),
        detail,
    };
    let io = |e: std::io::Error| bad(e.to_string());
    let mut json = BTreeMap::new();
    let mut layers = BTreeMap::new();
    let mut outer = tar::Archive::new(BufReader::new(open(archive)?));
    for member in outer.entries().map_err(io)? {
        let member = member.map_err(io)?;
        let name = member.path().map_err(io)?.display().to_string();
        if name.ends_with("/layer.tar") {
            let mut hashing = HashingReader::new(member);
            let entries = layer_entries(&mut hashing).map_err(io)?;
            // The inner archive's end-of-archive blocks may stop before the member does.
            std::io::copy(&mut hashing, &mut std::io::sink()).map_err(io)?;
            layers.insert(name, (hashing.hex(), entries));
        } else if name.ends_with(".json") || name == "repositories" {
            json.insert(name, read_bounded(member).map_err(io)?);
        }
    }
    let manifest_bytes = json
        .get("manifest.json")
        .ok_or_else(|| bad("no manifest.json".to_owned()))?;
    let manifest: Value = serde_json::from_slice(manifest_bytes).map_err(|e| bad(e.to_string()))?;
    let image = match manifest.as_array().map(Vec::as_slice) {
        Some([image]) => image,
        _ => return Err(bad("manifest.json must list exactly one image".to_owned())),
    };
    let name = match image["RepoTags"].as_array().map(Vec::as_slice) {
        Some([Value::String(name)]) => name.clone(),
        _ => {
            return Err(bad(
                "the image must have exactly one RepoTags entry".to_owned()
            ));
        }
    };
    let config_name = image["Config"].as_str().unwrap_or_default();
    let config_bytes = json
        .get(config_name)
        .ok_or_else(|| bad(format!("no config {config_name:?}")))?;
    if format!("{}.json", sha256_hex(config_bytes)) != config_name {
        return Err(bad(format!("{config_name} is not named by its digest")));
    }
    let config: Value = serde_json::from_slice(config_bytes).map_err(|e| bad(e.to_string()))?;
    let layer_name = match image["Layers"].as_array().map(Vec::as_slice) {
        Some([Value::String(layer)]) => layer.clone(),
        _ => return Err(bad("the image must have exactly one layer".to_owned())),
    };
    let (digest, entries) = layers
        .remove(&layer_name)
        .ok_or_else(|| bad(format!("no {layer_name}")))?;
    let diff_id = config["rootfs"]["diff_ids"][0].as_str().unwrap_or_default();
    if diff_id != format!("sha256:{digest}") {
        return Err(bad(format!(
            "the layer's digest sha256:{digest} is not the config's diff_id {diff_id:?}"
        )));
    }
    Ok(ArchiveContents {
        name,
        manifest,
        config,
        layer: entries,
    })
}

/// The image name in `archive`'s manifest (its only `RepoTags` entry), read without the layer
/// when the manifest comes first (as [`ImageBuilder`](super::ImageBuilder) writes it).
pub(crate) fn image_name(archive: &Path) -> Result<String> {
    let bad = |detail: String| Error::BadArchive {
        path: archive.to_owned(),
        detail,
    };
    let io = |e: std::io::Error| bad(e.to_string());
    let mut outer = tar::Archive::new(BufReader::new(open(archive)?));
    for member in outer.entries().map_err(io)? {
        let member = member.map_err(io)?;
        if member.path().map_err(io)?.as_os_str() != "manifest.json" {
            continue;
        }
        let manifest: Value = serde_json::from_slice(&read_bounded(member).map_err(io)?)
            .map_err(|e| bad(e.to_string()))?;
        return match manifest[0]["RepoTags"].as_array().map(Vec::as_slice) {
            Some([Value::String(name)]) => Ok(name.clone()),
            _ => Err(bad(
                "the manifest must name the image once in RepoTags".to_owned()
            )),
        };
    }
    Err(bad("no manifest.json".to_owned()))
}

/// The bytes of the file `image_path` (`/etc/passwd`) in the layer of `archive`.
pub fn read_layer_file(archive: &Path, image_path: &str) -> Result<Vec<u8>> {
    let bad = |detail: String| Error::BadArchive {
        path: archive.to_owned(),
        detail,
    };
    let io = |e: std::io::Error| bad(e.to_string());
    let wanted = image_path.trim_start_matches('/');
    let mut outer = tar::Archive::new(BufReader::new(open(archive)?));
    for member in outer.entries().map_err(io)? {
        let member = member.map_err(io)?;
        if !member.path().map_err(io)?.ends_with("layer.tar") {
            continue;
        }
        let mut layer = tar::Archive::new(member);
        for entry in layer.entries().map_err(io)? {
            let entry = entry.map_err(io)?;
            if entry.path().map_err(io)?.as_os_str() == wanted {
                return read_bounded(entry).map_err(io);
            }
        }
    }
    Err(bad(format!("no file {image_path} in the layer")))
}

fn layer_entries(reader: &mut impl Read) -> std::io::Result<BTreeMap<String, LayerEntry>> {
    let mut entries = BTreeMap::new();
    let mut layer = tar::Archive::new(reader);
    for entry in layer.entries()? {
        let entry = entry?;
        let header = entry.header();
        let path = entry.path()?.display().to_string();
        let link = entry
            .link_name()?
            .map(|target| target.display().to_string());
        entries.insert(
            format!("/{}", path.trim_end_matches('/')),
            LayerEntry {
                kind: char::from(header.entry_type().as_byte()),
                mode: header.mode()?,
                uid: header.uid()?,
                gid: header.gid()?,
                size: header.size()?,
                mtime: header.mtime()?,
                link,
            },
        );
    }
    Ok(entries)
}

fn open(path: &Path) -> Result<File> {
    File::open(path).map_err(|source| Error::HostRead {
        path: PathBuf::from(path),
        source,
    })
}

fn read_bounded(reader: impl Read) -> std::io::Result<Vec<u8>> {
    let mut data = Vec::new();
    reader.take(MAX_READ + 1).read_to_end(&mut data)?;
    if data.len() as u64 > MAX_READ {
        return Err(std::io::Error::other("member larger than 64 MiB"));
    }
    Ok(data)
}

/// A reader that hashes what passes through it.
struct HashingReader<R> {
    inner: R,
    context: Context,
}

impl<R> HashingReader<R> {
    fn new(inner: R) -> Self {
        Self {
            inner,
            context: Context::new(&SHA256),
        }
    }

    fn hex(&self) -> String {
        hex(self.context.clone().finish().as_ref())
    }
}

impl<R: Read> Read for HashingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.context.update(&buf[..n]);
        Ok(n)
    }
}
