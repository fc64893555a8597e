//! The import graph of a crate's source files, for the crates' module-graph tests: the
//! `use crate::…`, `super::…`, `self::…` and child-module paths between the files of a `src`
//! directory, a cycle finder, and the graph between top-level modules.
//!
//! One kind of edge is left out of the file graph: a module re-exporting its own submodule's
//! items (`pub use child::Item;` in a facade), which is naming, not use. The top-level graph
//! keeps every edge. Test code (`tests.rs` files and inline `mod tests { … }` blocks) is left
//! out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside the crate: `[]` is the crate root, `["l7", "client"]` is `l7::client`.
pub type ModPath = Vec<String>;

/// Import edges: file → the files it uses.
pub type Edges = BTreeMap<ModPath, BTreeSet<ModPath>>;

/// Every non-test source file, by module path: files named `tests.rs` and the files of
/// modules declared under `#[cfg(test)]` (with or without `#[path]`) are left out.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut found = all_modules(src);
    let mut test_modules = BTreeSet::new();
    let mut test_files = BTreeSet::new();
    for (module, file) in &found {
        let dir = file.parent().unwrap_or(src);
        for (name, path) in test_declarations(&std::fs::read_to_string(file).expect("read source"))
        {
            match path {
                Some(path) => {
                    test_files.insert(dir.join(path));
                }
                None => {
                    let mut child = module.clone();
                    child.push(name);
                    test_modules.insert(child);
                }
            }
        }
    }
    found.retain(|module, file| {
        !test_files.contains(file) && !test_modules.iter().any(|t| module.starts_with(t))
    });
    found
}

/// The `mod` declarations of `text` under `#[cfg(test)]`: each name, with its `#[path]`.
fn test_declarations(text: &str) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    let mut under_test = false;
    let mut path = None;
    for line in text.lines().map(str::trim) {
        if line == "#[cfg(test)]" {
            under_test = true;
            continue;
        }
        if let Some(rest) = line.strip_prefix("#[path = \"") {
            path = rest.strip_suffix("\"]").map(str::to_owned);
            continue;
        }
        if under_test || path.is_some() {
            let declared = line
                .trim_start_matches("pub(crate) ")
                .trim_start_matches("pub ")
                .strip_prefix("mod ")
                .and_then(|rest| rest.strip_suffix(';'));
            if let Some(name) = declared {
                out.push((name.to_owned(), path.take()));
            }
        }
        under_test = false;
        path = None;
    }
    out
}

/// Every source file, by module path.
fn all_modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
    let mut found = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    // Bounded: the source tree is finite and walked once.
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("read src dir") {
            let path = entry.expect("dir entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let mut parts: ModPath = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
                .collect();
            if parts.last().is_some_and(|p| p == "tests") {
                continue;
            }
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            found.insert(parts, path);
        }
    }
    found
}

/// The file's text without its comments and its inline test module (by convention the last
/// item of a file).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read source");
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("mod tests {") {
            break;
        }
        // A path in a comment (a doc link) names an item; it imports nothing.
        if line.trim_start().starts_with("//") {
            continue;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// Identifiers of `text` starting at `at`, split by `::`: `a::b::{c, d::e}` gives `[a, b, c]`
/// and `[a, b, d, e]`.
fn paths_at(text: &str, at: usize) -> Vec<Vec<String>> {
    let bytes = text.as_bytes();
    let mut segments = Vec::new();
    let mut i = at;
    loop {
        let start = i;
        while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
            i += 1;
        }
        if i == start {
            break;
        }
        segments.push(text[start..i].to_owned());
        if text[i..].starts_with("::") {
            i += 2;
            if text[i..].starts_with('{') {
                let end = matching_brace(text, i);
                let mut out = Vec::new();
                for item in split_top(&text[i + 1..end]) {
                    let offset = i + 1 + item;
                    for tail in paths_at(text, offset) {
                        let mut full = segments.clone();
                        full.extend(tail);
                        out.push(full);
                    }
                }
                return out;
            }
            continue;
        }
        break;
    }
    vec![segments]
}

/// The index of the `}` closing the `{` at `open`.
fn matching_brace(text: &str, open: usize) -> usize {
    let mut depth = 0;
    for (i, c) in text[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return open + i;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// Start offsets (after whitespace) of the comma-separated items of a brace group's inside.
fn split_top(inside: &str) -> Vec<usize> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in inside.char_indices().chain([(inside.len(), ',')]) {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                let item = &inside[start..i];
                let lead = item.len() - item.trim_start().len();
                if !item.trim().is_empty() {
                    out.push(start + lead);
                }
                start = i + 1;
            }
            _ => {}
        }
    }
    out
}

/// The deepest module file `path` (relative to `base`) names.
fn resolve(
    known: &BTreeMap<ModPath, PathBuf>,
    base: &[String],
    path: &[String],
) -> Option<ModPath> {
    let mut current: ModPath = base.to_vec();
    let mut resolved = None;
    for segment in path {
        match segment.as_str() {
            "self" => {}
            "super" => {
                current.pop();
            }
            name => {
                current.push(name.to_owned());
                if !known.contains_key(&current) {
                    break;
                }
            }
        }
        if known.contains_key(&current) {
            resolved = Some(current.clone());
        }
    }
    resolved
}

/// Edges of the import graph: file → the files it uses.
pub fn graph(src: &Path) -> Edges {
    let known = modules(src);
    let mut edges: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (module, file) in &known {
        let text = code(file);
        let children: BTreeSet<String> = known
            .keys()
            .filter(|k| k.len() == module.len() + 1 && k.starts_with(module))
            .map(|k| k[module.len()].clone())
            .collect();
        let reexports = reexport_ranges(&text);
        let mut targets = BTreeSet::new();
        let bytes = text.as_bytes();
        for (at, _) in text.match_indices("::") {
            // Only the start of a path: the identifier before `::` not itself after `::`.
            let mut start = at;
            while start > 0
                && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_')
            {
                start -= 1;
            }
            if start == at || (start >= 2 && &text[start - 2..start] == "::") {
                continue;
            }
            let head = &text[start..at];
            let base: ModPath = match head {
                "crate" => Vec::new(),
                "super" | "self" => module.clone(),
                child if children.contains(child) => module.clone(),
                _ => continue,
            };
            for path in paths_at(&text, start) {
                let path = if head == "crate" {
                    &path[1..]
                } else {
                    &path[..]
                };
                let Some(target) = resolve(&known, &base, path) else {
                    continue;
                };
                let own_child = target.len() > module.len() && target.starts_with(module);
                let reexported = reexports.iter().any(|r| r.contains(&start));
                if target != *module && !(own_child && reexported) {
                    targets.insert(target);
                }
            }
        }
        edges.insert(module.clone(), targets);
    }
    edges
}

/// Byte ranges of the `pub use …;` / `pub(crate) use …;` statements of `text`.
fn reexport_ranges(text: &str) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with("pub use ") || trimmed.starts_with("pub(crate) use ") {
            let end = text[offset..].find(';').map_or(text.len(), |i| offset + i);
            ranges.push(offset..end);
        }
        offset += line.len();
    }
    ranges
}

/// The graph between top-level modules (`route::slot` counts as `route`).
pub fn top_level(edges: &Edges) -> Edges {
    grouped(edges, 1)
}

/// The graph between modules `depth` levels deep (at depth 1 `route::slot` counts as `route`;
/// at depth 2 `l7::relay::request` counts as `l7::relay`).
pub fn grouped(edges: &Edges, depth: usize) -> Edges {
    let top = |m: &ModPath| m.iter().take(depth).cloned().collect::<ModPath>();
    let mut out: Edges = BTreeMap::new();
    for (from, tos) in edges {
        let entry = out.entry(top(from)).or_default();
        for to in tos {
            if top(to) != top(from) && !to.is_empty() {
                entry.insert(top(to));
            }
        }
    }
    out
}

/// A cycle of the graph, if there is one.
pub fn find_cycle(edges: &Edges) -> Option<Vec<ModPath>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        node: &ModPath,
        edges: &BTreeMap<ModPath, BTreeSet<ModPath>>,
        marks: &mut BTreeMap<ModPath, Mark>,
        stack: &mut Vec<ModPath>,
    ) -> Option<Vec<ModPath>> {
        match marks.get(node) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let from = stack.iter().position(|n| n == node).unwrap_or(0);
                let mut cycle = stack[from..].to_vec();
                cycle.push(node.clone());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(node.clone(), Mark::Open);
        stack.push(node.clone());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(cycle) = visit(next, edges, marks, stack) {
                return Some(cycle);
            }
        }
        stack.pop();
        marks.insert(node.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for node in edges.keys() {
        if let Some(cycle) = visit(node, edges, &mut marks, &mut Vec::new()) {
            return Some(cycle);
        }
    }
    None
}

/// A module path as written in Rust (`lib` for the crate root).
pub fn name(module: &ModPath) -> String {
    if module.is_empty() {
        "lib".to_owned()
    } else {
        module.join("::")
    }
}

/// The first circle of `edges`, written `a → b → a`, if there is one.
pub fn circle(edges: &Edges) -> Option<String> {
    find_cycle(edges).map(|cycle| cycle.iter().map(name).collect::<Vec<_>>().join(" → "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cycle_finder_finds_a_cycle() {
        let m = |s: &str| vec![s.to_owned()];
        let mut edges = BTreeMap::new();
        edges.insert(m("a"), BTreeSet::from([m("b")]));
        edges.insert(m("b"), BTreeSet::from([m("c")]));
        edges.insert(m("c"), BTreeSet::from([m("a")]));
        edges.insert(m("d"), BTreeSet::from([m("a")]));
        let cycle = find_cycle(&edges).expect("a → b → c → a");
        assert_eq!(cycle.first(), cycle.last());
        assert_eq!(cycle.len(), 4);
        assert_eq!(circle(&edges).as_deref(), Some("a → b → c → a"));
        edges.insert(m("c"), BTreeSet::new());
        assert_eq!(find_cycle(&edges), None);
    }
}
