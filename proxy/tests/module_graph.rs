//! The proxy's source files import each other one way only: a graph of `use crate::…`,
//! `super::…`, `self::…` and child-module paths between the files of `proxy/src` has no cycle,
//! neither between files nor between modules at the first two levels (`route`, `l7`, `l4`, …;
//! `l7::relay`, `route::connect`, …). And the request pipeline points one way: the cores
//! (routing, hold, wake, directory, config, activity, limits) import no listener or codec, the
//! request's context (`l7::exchange`, `l7::handover`) imports no codec, and the codecs (the
//! compact hold, the byte relay, hyper's service) import neither each other nor `l7/mod.rs`.
//!
//! One kind of edge is left out of the file graph: a module re-exporting its own submodule's
//! items (`pub use child::Item;` in a facade), which is naming, not use. The top-level graph
//! keeps every edge.
//!
//! Test code (`tests.rs` files and inline `mod tests { … }` blocks) is left out: tests may
//! reach anywhere. The graph and the layering it shows are drawn in `docs/architecture.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside the crate: `[]` is the crate root, `["l7", "client"]` is `l7::client`.
type ModPath = Vec<String>;

/// Every non-test source file, by module path.
fn modules(src: &Path) -> BTreeMap<ModPath, PathBuf> {
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

/// The file's text without its inline test module (by convention the last item of a file).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read source");
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with("mod tests {") {
            break;
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
fn graph(src: &Path) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
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

/// The graph between modules `depth` levels deep (at depth 1 `route::slot` counts as `route`;
/// at depth 2 `l7::relay::request` counts as `l7::relay`).
fn grouped(
    edges: &BTreeMap<ModPath, BTreeSet<ModPath>>,
    depth: usize,
) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let top = |m: &ModPath| m.iter().take(depth).cloned().collect::<ModPath>();
    let mut out: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
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
fn find_cycle(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Option<Vec<ModPath>> {
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

fn name(module: &ModPath) -> String {
    if module.is_empty() {
        "lib".to_owned()
    } else {
        module.join("::")
    }
}

#[test]
fn proxy_modules_import_each_other_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&src);
    assert!(
        edges.len() > 30,
        "the walk found the source files: {:?}",
        edges.keys().map(name).collect::<Vec<_>>()
    );
    // The parser sees real imports: a known edge is present.
    let l7_client = vec!["l7".to_owned(), "client".to_owned()];
    assert!(
        edges[&l7_client].contains(&vec!["route".to_owned()]),
        "l7::client uses route: {:?}",
        edges[&l7_client].iter().map(name).collect::<Vec<_>>()
    );
    if let Some(cycle) = find_cycle(&edges) {
        let cycle: Vec<String> = cycle.iter().map(name).collect();
        panic!(
            "import circle between files of proxy/src: {}",
            cycle.join(" → ")
        );
    }
    for depth in [1, 2] {
        if let Some(cycle) = find_cycle(&grouped(&edges, depth)) {
            let cycle: Vec<String> = cycle.iter().map(name).collect();
            panic!(
                "import circle between modules of proxy/src (depth {depth}): {}",
                cycle.join(" → ")
            );
        }
    }
}

/// A module path from its text: `"l7::relay"`.
fn path(text: &str) -> ModPath {
    text.split("::").map(str::to_owned).collect()
}

/// The imports `edges` has that break a rule "`from` (and its submodules) never imports
/// `to`" (`to` with a trailing `::*` covers its submodules too; without, only that file).
fn broken(edges: &BTreeMap<ModPath, BTreeSet<ModPath>>, from: &str, to: &str) -> Vec<String> {
    let (to, subtree) = match to.strip_suffix("::*") {
        Some(to) => (path(to), true),
        None => (path(to), false),
    };
    let from = path(from);
    let mut out = Vec::new();
    for (module, targets) in edges {
        if !module.starts_with(&from) {
            continue;
        }
        for target in targets {
            let hit = if subtree {
                target.starts_with(&to)
            } else {
                *target == to
            };
            if hit {
                out.push(format!("{} → {}", name(module), name(target)));
            }
        }
    }
    out
}

#[test]
fn the_request_pipeline_points_one_way() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&src);
    let cores = [
        "route",
        "hold",
        "wake",
        "directory",
        "config",
        "activity",
        "limits",
        "reporter",
    ];
    let edge_of_the_crate = ["l7::*", "l4::*", "tls::*", "server", "admin", "accept"];
    let mut rules: Vec<(&str, &str)> = Vec::new();
    for core in cores {
        for outer in edge_of_the_crate {
            rules.push((core, outer));
        }
    }
    let codecs = ["l7::park", "l7::relay", "l7::service"];
    for context in ["l7::exchange", "l7::handover", "l7::route"] {
        for codec in codecs {
            rules.push((context, codec));
        }
        rules.push((context, "l7"));
    }
    for codec in codecs {
        for other in codecs.iter().filter(|other| **other != codec) {
            rules.push((codec, other));
        }
        rules.push((codec, "l7"));
    }
    // The rules see real imports: a rule the code keeps by design is not vacuous.
    assert!(
        !broken(&edges, "l7::relay", "l7::exchange").is_empty(),
        "the relay uses the exchange"
    );
    let broken: Vec<String> = rules
        .iter()
        .flat_map(|(from, to)| broken(&edges, from, to))
        .collect();
    assert!(
        broken.is_empty(),
        "imports against the request pipeline's direction: {broken:#?}"
    );
}

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
    edges.insert(m("c"), BTreeSet::new());
    assert_eq!(find_cycle(&edges), None);
}
