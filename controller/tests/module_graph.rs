//! The controller's source files import each other one way only, and its layers hold:
//!
//! - no circle of `use crate::…`, `super::…`, `self::…` and child-module paths between the
//!   files of `controller/src`, nor between its top-level modules (`sandbox`, `platform`,
//!   `api`, …);
//! - the kinds' cores — `sandbox`, `claim`, `pool`, `template` and the snapshot plan code —
//!   import neither the driver layer (`drive`) nor the composition roots (`mode`);
//! - `drive` imports no kind: it runs reconcilers without knowing what they reconcile.
//!
//! The parser (`rouse_testsupport::module_graph`) leaves test code out and does not count a
//! facade's `pub use child::Item` as use. The graph is drawn in `docs/architecture.md`.

use std::path::Path;

use rouse_testsupport::module_graph::{Edges, ModPath, circle, graph, name, top_level};

fn src_graph() -> Edges {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = graph(&src);
    assert!(
        edges.len() > 100,
        "the walk found the source files: {:?}",
        edges.keys().map(name).collect::<Vec<_>>()
    );
    edges
}

fn path(s: &str) -> ModPath {
    s.split("::").map(str::to_owned).collect()
}

/// Whether `module` is a kind's core: the modules whose logic is the same in both modes.
fn is_core(module: &ModPath) -> bool {
    let top = module.first().map(String::as_str);
    match top {
        Some("sandbox" | "claim" | "pool" | "template") => true,
        // The snapshot port, the local plan and the providers' plans; the Kubernetes
        // controller and the providers' reconciles are wiring.
        Some("snapshot") => {
            let rest: Vec<&str> = module[1..].iter().map(String::as_str).collect();
            matches!(
                rest.as_slice(),
                [] | ["plan"]
                    | ["outcome"]
                    | ["record"]
                    | ["quantity"]
                    | ["kube", "plan"]
                    | ["kube", "ownership"]
                    | ["kube", _, "plan"]
            )
        }
        _ => false,
    }
}

fn is_kind(module: &ModPath) -> bool {
    matches!(
        module.first().map(String::as_str),
        Some("sandbox" | "claim" | "pool" | "template" | "snapshot" | "extensions")
    )
}

fn under(module: &ModPath, top: &str) -> bool {
    module.first().is_some_and(|m| m == top)
}

#[test]
fn controller_modules_import_each_other_one_way() {
    let edges = src_graph();
    // The parser sees real imports: known edges are present.
    let csi = path("snapshot::kube::csi::reconcile");
    assert!(
        edges[&csi].contains(&path("snapshot::kube::csi::plan")),
        "the csi reconcile uses its plan: {:?}",
        edges[&csi].iter().map(name).collect::<Vec<_>>()
    );
    let sandboxes = path("mode::local::sandboxes");
    assert!(
        edges[&sandboxes].contains(&path("drive::driver")),
        "the local sandboxes run on the driver: {:?}",
        edges[&sandboxes].iter().map(name).collect::<Vec<_>>()
    );
    if let Some(cycle) = circle(&edges) {
        panic!("import circle between files of controller/src: {cycle}");
    }
    if let Some(cycle) = circle(&top_level(&edges)) {
        panic!("import circle between modules of controller/src: {cycle}");
    }
}

#[test]
fn cores_import_neither_the_driver_nor_the_modes() {
    let edges = src_graph();
    let mut wrong = Vec::new();
    for (from, tos) in &edges {
        if !is_core(from) {
            continue;
        }
        for to in tos {
            if under(to, "drive") || under(to, "mode") {
                wrong.push(format!("{} → {}", name(from), name(to)));
            }
        }
    }
    assert!(
        edges.keys().filter(|m| is_core(m)).count() > 20,
        "the cores were found"
    );
    assert!(
        wrong.is_empty(),
        "cores importing drive/ or mode/: {wrong:?}"
    );
}

#[test]
fn the_driver_imports_no_kind() {
    let edges = src_graph();
    let driver: Vec<&ModPath> = edges.keys().filter(|m| under(m, "drive")).collect();
    assert!(driver.len() >= 4, "drive/ was found: {driver:?}");
    let mut wrong = Vec::new();
    for from in driver {
        for to in &edges[from] {
            if is_kind(to) || under(to, "mode") || under(to, "platform") {
                wrong.push(format!("{} → {}", name(from), name(to)));
            }
        }
    }
    assert!(wrong.is_empty(), "drive/ importing a kind: {wrong:?}");
}
