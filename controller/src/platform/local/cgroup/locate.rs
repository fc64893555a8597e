//! Where the workloads' cgroups go: the hierarchy to use and this process's own cgroup in
//! it, read from `/proc/self/mountinfo` and `/proc/self/cgroup`.

use std::path::{Path, PathBuf};

use super::Hierarchy;

/// Where the workloads' cgroups go, from `/proc/self/mountinfo` and `/proc/self/cgroup`: the
/// hierarchy and the directory of this process's own cgroup in it (or the hierarchy's root
/// where that directory is not visible, as in a container without a cgroup namespace).
pub fn locate(mountinfo: &str, own: &str) -> Result<(Hierarchy, PathBuf), String> {
    let mounts: Vec<Mount> = mountinfo.lines().filter_map(Mount::parse).collect();
    let pids = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == "pids"));
    let unified = mounts.iter().find(|m| m.fstype == "cgroup2");
    let own_path = |wanted: &dyn Fn(&str, &str) -> bool| {
        own.lines().find_map(|line| {
            let mut parts = line.splitn(3, ':');
            let (id, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
            wanted(id, controllers).then(|| path.to_owned())
        })
    };
    let (hierarchy, mount, path) = if let Some(mount) = pids {
        let path = own_path(&|_, c| c.split(',').any(|c| c == "pids"));
        (Hierarchy::V1Pids, mount, path)
    } else if let Some(mount) = unified {
        let path = own_path(&|id, c| id == "0" && c.is_empty());
        (Hierarchy::V2, mount, path)
    } else {
        return Err("no cgroup v1 `pids` or cgroup v2 hierarchy is mounted".to_owned());
    };
    let base = path
        .and_then(|path| {
            let relative = Path::new(&path).strip_prefix(&mount.root).ok()?;
            let dir = mount.point.join(relative);
            dir.is_dir().then_some(dir)
        })
        .unwrap_or_else(|| mount.point.clone());
    Ok((hierarchy, base))
}

/// One line of `/proc/self/mountinfo`, as far as it matters here.
struct Mount {
    /// The directory of the hierarchy mounted (a bind mount or a namespace shows a subtree).
    root: PathBuf,
    point: PathBuf,
    fstype: String,
    options: String,
}

impl Mount {
    /// `ID PARENT MAJ:MIN ROOT POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS`.
    fn parse(line: &str) -> Option<Mount> {
        let (before, after) = line.split_once(" - ")?;
        let mut fields = before.split(' ');
        let root = fields.nth(3)?;
        let point = fields.next()?;
        let mut after = after.split(' ');
        let fstype = after.next()?.to_owned();
        let options = after.nth(1).unwrap_or_default().to_owned();
        Some(Mount {
            root: PathBuf::from(unescape(root)),
            point: PathBuf::from(unescape(point)),
            fstype,
            options,
        })
    }
}

/// Undoes mountinfo's octal escapes (`\040` for a space).
pub(super) fn unescape(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(digits)) => {
                let value = digits.iter().fold(0u32, |v, d| v * 8 + u32::from(d - b'0'));
                out.push(u8::try_from(value).unwrap_or(b'?'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
