//! Image names: the subset of containerd's reference grammar the builder accepts, and the
//! normalized form containerd stores.

use super::{Error, Result};

/// Refuses names containerd's reference parser would reject (a subset of its grammar, enough
/// to catch typos: lowercase path components, an optional tag, no digest).
pub(crate) fn check_name(name: &str) -> Result<()> {
    let bad = |reason| {
        Err(Error::ImageName {
            name: name.to_owned(),
            reason,
        })
    };
    let (repo, tag) = split_name(name);
    if repo.is_empty() || name.contains('@') {
        return bad("expected name[:tag]");
    }
    if tag.is_empty()
        || tag.len() > 128
        || !tag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    {
        return bad("the tag must be 1-128 characters of [A-Za-z0-9._-]");
    }
    let components: Vec<&str> = repo.split('/').collect();
    let path_ok = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c);
    // Only a registry (the first of several components) may carry a `:port`.
    let component_ok = |(i, part): (usize, &&str)| {
        let (host, port) = match part.split_once(':') {
            Some((host, port)) if i == 0 && components.len() > 1 => (host, Some(port)),
            _ => (*part, None),
        };
        !host.is_empty()
            && host.chars().all(path_ok)
            && port.is_none_or(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
    };
    if !components.iter().enumerate().all(component_ok) {
        return bad("the repository must be lowercase components separated by '/'");
    }
    Ok(())
}

/// `(repository, tag)`; the tag is `latest` when the name has none (a `:` before the last
/// `/` is a registry port, not a tag).
pub(crate) fn split_name(name: &str) -> (&str, &str) {
    match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => (&name[..i], &name[i + 1..]),
        _ => (name, "latest"),
    }
}

/// The name containerd stores for `name`: Docker's normalization (`rouse:dev` becomes
/// `docker.io/library/rouse:dev`), and `:latest` added when no tag is given.
pub fn normalized_name(name: &str) -> String {
    let (repo, tag) = split_name(name);
    let first = repo.split('/').next().unwrap_or_default();
    let has_domain =
        repo.contains('/') && (first.contains('.') || first.contains(':') || first == "localhost");
    let repo = if has_domain {
        repo.to_owned()
    } else if repo.contains('/') {
        format!("docker.io/{repo}")
    } else {
        format!("docker.io/library/{repo}")
    };
    format!("{repo}:{tag}")
}
