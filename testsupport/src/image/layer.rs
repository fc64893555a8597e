//! The layer's entries: the builder's items resolved against the host into one map sorted by
//! image path, with missing parent directories added, exclusions and owners applied.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::{Error, Item, Result, ldd};

/// At most this many entries in one image: a `dir("/")` by mistake fails instead of packing
/// the host.
const MAX_ENTRIES: usize = 100_000;

/// At most this many bytes of file content in one image (4 GiB).
const MAX_BYTES: u64 = 4 << 30;

/// One path of the layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub kind: Kind,
    /// Permission bits (`0o755`), setuid/setgid/sticky included.
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

/// What a path is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File(Content),
    Symlink(String),
}

/// Where a file's bytes come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Content {
    /// A host file, read when the layer is written; its size and mtime identify it in the
    /// cache key.
    Host {
        path: PathBuf,
        size: u64,
        mtime_ns: i128,
    },
    Bytes(Vec<u8>),
}

impl Entry {
    fn dir(mode: u32) -> Self {
        Self {
            kind: Kind::Dir,
            mode,
            uid: 0,
            gid: 0,
        }
    }

    fn size(&self) -> u64 {
        match &self.kind {
            Kind::File(Content::Host { size, .. }) => *size,
            Kind::File(Content::Bytes(data)) => data.len() as u64,
            Kind::Dir | Kind::Symlink(_) => 0,
        }
    }
}

/// Resolves `items` (later ones win on the same path; shared libraries never replace an
/// explicit item), drops `excludes`, adds parent directories (`0o755`, `0:0`), then applies
/// `owners`.
pub(crate) fn resolve(
    items: &[Item],
    excludes: &[String],
    owners: &[(String, u32, u32)],
) -> Result<BTreeMap<String, Entry>> {
    let mut map = BTreeMap::new();
    let programs: Vec<PathBuf> = items
        .iter()
        .filter_map(|item| match item {
            Item::LibsOf { host } => Some(host.clone()),
            _ => None,
        })
        .collect();
    for library in ldd::closure(&programs)? {
        let image = library
            .to_str()
            .ok_or_else(|| not_utf8(&library))?
            .to_owned();
        map.insert(clean(&image)?, host_file(&library)?);
    }
    for item in items {
        match item {
            Item::File { host, image } => {
                map.insert(clean(image)?, host_file(host)?);
            }
            Item::Dir { host, image } => walk(host, clean(image)?, &mut map)?,
            Item::LibsOf { .. } => {}
            Item::Text { image, data, mode } => {
                let entry = Entry {
                    kind: Kind::File(Content::Bytes(data.clone())),
                    mode: *mode,
                    uid: 0,
                    gid: 0,
                };
                map.insert(clean(image)?, entry);
            }
            Item::EmptyDir { image, mode } => {
                map.insert(clean(image)?, Entry::dir(*mode));
            }
            Item::Symlink { image, target } => {
                let entry = Entry {
                    kind: Kind::Symlink(target.clone()),
                    mode: 0o777,
                    uid: 0,
                    gid: 0,
                };
                map.insert(clean(image)?, entry);
            }
        }
        check_bounds(&map)?;
    }
    for exclude in excludes {
        let exclude = clean(exclude)?;
        let below = format!("{exclude}/");
        map.retain(|path, _| *path != exclude && !path.starts_with(&below));
    }
    add_parents(&mut map)?;
    for (path, uid, gid) in owners {
        let entry = map
            .get_mut(&clean(path)?)
            .ok_or_else(|| Error::NoSuchEntry { path: path.clone() })?;
        entry.uid = *uid;
        entry.gid = *gid;
    }
    check_bounds(&map)?;
    Ok(map)
}

/// `/usr/bin/x` as the layer's `usr/bin/x`; refuses relative paths, `.`, `..` and the root.
pub(crate) fn clean(image: &str) -> Result<String> {
    let bad = |reason| Error::ImagePath {
        path: image.to_owned(),
        reason,
    };
    let rest = image
        .strip_prefix('/')
        .ok_or_else(|| bad("must be absolute"))?;
    let parts: Vec<&str> = rest.split('/').filter(|p| !p.is_empty()).collect();
    if parts.is_empty() {
        return Err(bad("is the image root"));
    }
    if parts.iter().any(|p| *p == "." || *p == "..") {
        return Err(bad("must not contain . or .."));
    }
    Ok(parts.join("/"))
}

/// A host file (symlinks followed) as a layer file with the host's permission bits.
fn host_file(host: &Path) -> Result<Entry> {
    let meta = std::fs::metadata(host).map_err(|source| read_error(host, source))?;
    if !meta.is_file() {
        return Err(read_error(
            host,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
        ));
    }
    Ok(Entry {
        kind: Kind::File(Content::Host {
            path: host.to_owned(),
            size: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        }),
        mode: meta.permissions().mode() & 0o7777,
        uid: 0,
        gid: 0,
    })
}

/// Adds the host directory `host` as `image` and everything below it.
fn walk(host: &Path, image: String, map: &mut BTreeMap<String, Entry>) -> Result<()> {
    let meta = std::fs::metadata(host).map_err(|source| read_error(host, source))?;
    if !meta.is_dir() {
        return Err(read_error(
            host,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a directory"),
        ));
    }
    map.insert(
        image.clone(),
        Entry::dir(meta.permissions().mode() & 0o7777),
    );
    let mut stack = vec![(host.to_owned(), image)];
    while let Some((dir, prefix)) = stack.pop() {
        let listing = std::fs::read_dir(&dir).map_err(|source| read_error(&dir, source))?;
        for child in listing {
            let child = child.map_err(|source| read_error(&dir, source))?;
            let path = child.path();
            let name = child.file_name();
            let name = name.to_str().ok_or_else(|| not_utf8(&path))?;
            let image = format!("{prefix}/{name}");
            let meta = std::fs::symlink_metadata(&path).map_err(|e| read_error(&path, e))?;
            let kind = meta.file_type();
            if kind.is_dir() {
                map.insert(
                    image.clone(),
                    Entry::dir(meta.permissions().mode() & 0o7777),
                );
                stack.push((path, image));
            } else if kind.is_file() {
                map.insert(image, host_file(&path)?);
            } else if kind.is_symlink() {
                let target = std::fs::read_link(&path).map_err(|e| read_error(&path, e))?;
                let target = target.to_str().ok_or_else(|| not_utf8(&path))?.to_owned();
                let entry = Entry {
                    kind: Kind::Symlink(target),
                    mode: 0o777,
                    uid: 0,
                    gid: 0,
                };
                map.insert(image, entry);
            } else {
                return Err(read_error(
                    &path,
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        "neither a file, a directory nor a symlink",
                    ),
                ));
            }
            if map.len() > MAX_ENTRIES {
                check_bounds(map)?;
            }
        }
    }
    Ok(())
}

/// Adds every missing parent as a `0o755` directory; fails when a parent is not a directory.
fn add_parents(map: &mut BTreeMap<String, Entry>) -> Result<()> {
    let paths: Vec<String> = map.keys().cloned().collect();
    for path in paths {
        let mut parent = path.as_str();
        while let Some(i) = parent.rfind('/') {
            parent = &parent[..i];
            match map.get(parent) {
                Some(Entry {
                    kind: Kind::Dir, ..
                }) => {}
                Some(_) => {
                    return Err(Error::NotADirectory {
                        path: format!("/{path}"),
                        parent: format!("/{parent}"),
                    });
                }
                None => {
                    map.insert(parent.to_owned(), Entry::dir(0o755));
                }
            }
        }
    }
    Ok(())
}

fn check_bounds(map: &BTreeMap<String, Entry>) -> Result<()> {
    let bytes: u64 = map.values().map(Entry::size).sum();
    if map.len() > MAX_ENTRIES || bytes > MAX_BYTES {
        return Err(Error::TooLarge {
            entries: map.len(),
            bytes,
        });
    }
    Ok(())
}

fn read_error(path: &Path, source: std::io::Error) -> Error {
    Error::HostRead {
        path: path.to_owned(),
        source,
    }
}

fn not_utf8(path: &Path) -> Error {
    read_error(
        path,
        std::io::Error::new(std::io::ErrorKind::InvalidData, "the name is not UTF-8"),
    )
}
