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
//! Test code (`tests.rs` files, modules declared under `#[cfg(test)]` and inline
//! `mod tests { … }` blocks) is left out: tests may reach anywhere. The parser is
//! `rouse_testsupport::module_graph`, shared with the controller's test. The graph and the
//! layering it shows are drawn in `docs/architecture.md`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use rouse_testsupport::module_graph::{ModPath, find_cycle, graph, grouped, name};

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
