//! The fuzz targets' seed corpora on stable: every file under `fuzz/corpus/<target>/` is fed to
//! the same function its cargo-fuzz target runs (`fuzz/src/targets.rs` and the files it
//! uses, included by path), so a seed — and every crash input added to a corpus as a
//! regression — is checked by `cargo test`.

#[path = "../fuzz/src/chunked_grammar.rs"]
mod chunked_grammar;
#[path = "../fuzz/src/relay.rs"]
mod relay;
#[path = "../fuzz/src/targets.rs"]
mod targets;

use std::path::Path;

#[test]
fn every_seed_of_every_fuzz_target_passes() {
    let corpora = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus");
    for (name, target) in targets::ALL {
        let dir = corpora.join(name);
        let mut seeds: Vec<_> = std::fs::read_dir(&dir)
            .unwrap_or_else(|err| panic!("corpus {}: {err}", dir.display()))
            .map(|entry| entry.expect("corpus entry").path())
            .collect();
        seeds.sort();
        assert!(!seeds.is_empty(), "fuzz target {name} has no seed corpus");
        for seed in seeds {
            let bytes = std::fs::read(&seed).expect("read seed");
            eprintln!("{name}: {}", seed.display());
            target(&bytes);
        }
    }
}
