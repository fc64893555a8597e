//! The proxy's source files import each other one way only: a graph of `use crate::…`,
//! `super::…`, `self::…` and child-module paths between the files of `proxy/src` has no cycle,
//! neither between files nor between the top-level modules (`route`, `l7`, `l4`, …).
//!
//! One kind of edge is left out of the file graph: a module re-exporting its own submodule's
//! items (`pub use child::Item;` in a facade), which is naming, not use. The top-level graph
//! keeps every edge.
//!
//! Test code (`tests.rs` files, modules declared under `#[cfg(test)]` and inline
//! `mod tests { … }` blocks) is left out: tests may reach anywhere. The parser is
//! `rouse_testsupport::module_graph`, shared with the controller's test. The graph and the
//! layering it shows are drawn in `docs/architecture.md`.

use std::path::Path;

use rouse_testsupport::module_graph::{circle, graph, name, top_level};

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
    if let Some(cycle) = circle(&edges) {
        panic!("import circle between files of proxy/src: {cycle}");
    }
    if let Some(cycle) = circle(&top_level(&edges)) {
        panic!("import circle between modules of proxy/src: {cycle}");
    }
}
