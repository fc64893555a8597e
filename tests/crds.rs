//! The checked-in CRDs in `deploy/crds/` are exactly what the code generates, and `rouse crds`
//! prints all of them.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

const REGENERATE: &str = "regenerate with `cargo run -- crds --out-dir deploy/crds`";

#[test]
fn checked_in_crds_match_generated() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/crds");
    let mut expected = BTreeSet::new();
    for crd in rouse_shared::crds::all() {
        let file = rouse_shared::crds::file_name(&crd);
        let want = rouse_shared::crds::to_yaml(&crd).expect("render CRD");
        let path = dir.join(&file);
        let got = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("{}: {e}; {REGENERATE}", path.display()));
        assert!(
            got == want,
            "{} differs from the generated CRD; {REGENERATE}",
            path.display()
        );
        expected.insert(file);
    }
    // Not generated: checked against the CRD files by tests/deploy_manifests.rs.
    expected.insert("kustomization.yaml".to_owned());
    let present: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("read deploy/crds")
        .map(|e| {
            e.expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        present, expected,
        "stray or missing files in deploy/crds; {REGENERATE}"
    );
}

#[test]
fn rouse_crds_prints_every_crd() {
    let out = Command::new(env!("CARGO_BIN_EXE_rouse"))
        .arg("crds")
        .output()
        .expect("run rouse crds");
    assert!(out.status.success(), "rouse crds failed: {out:?}");
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    let docs: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text).expect("valid YAML");
    let names: BTreeSet<&str> = docs
        .iter()
        .map(|d| {
            assert_eq!(d["kind"], "CustomResourceDefinition");
            d["metadata"]["name"].as_str().expect("named CRD")
        })
        .collect();
    let want: BTreeSet<&str> = [
        "sandboxes.agents.x-k8s.io",
        "sandboxsnapshots.agents.x-k8s.io",
        "sandboxtemplates.extensions.agents.x-k8s.io",
        "sandboxwarmpools.extensions.agents.x-k8s.io",
        "sandboxclaims.extensions.agents.x-k8s.io",
    ]
    .into();
    assert_eq!(names, want);
    let pool = docs
        .iter()
        .find(|d| d["spec"]["names"]["kind"] == "SandboxWarmPool")
        .expect("warm pool CRD");
    let scale = &pool["spec"]["versions"][0]["subresources"]["scale"];
    assert_eq!(scale["specReplicasPath"], ".spec.replicas");
    assert_eq!(scale["statusReplicasPath"], ".status.replicas");
    assert_eq!(scale["labelSelectorPath"], ".status.selector");
}
