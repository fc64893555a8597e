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

/// Every example and upstream manifest, as a Sandbox user writes them.
fn user_manifests() -> Vec<(String, serde_json::Value)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = ["deploy/examples", "tests/fixtures/upstream"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).expect("read dir"))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "json"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("read manifest");
        let docs = rouse_testsupport::cluster::yaml_documents(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for doc in docs {
            let items = match doc["kind"].as_str() {
                Some("List") => doc["items"].as_array().cloned().unwrap_or_default(),
                _ => vec![doc],
            };
            for item in items {
                out.push((file.display().to_string(), item));
            }
        }
    }
    out
}

/// The CRDs applied server-side to a real API server admit every example and upstream
/// manifest (structural schema, defaulting, CEL rules), what it defaults still parses as our
/// Sandbox type, and a value outside an enum is refused. Skipped without the control plane's
/// binaries, outside CI.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_api_server_admits_the_examples() {
    use rouse_testsupport::cluster;
    let test = "real_api_server_admits_the_examples";
    let Some(plane) = cluster::shared_or_skip(test) else {
        return;
    };
    let client = plane.client().await.expect("admin client");
    cluster::install(&client).await.expect("install CRDs");
    let namespace = cluster::test_namespace(&client, "crds")
        .await
        .expect("namespace");
    let manifests = user_manifests();
    assert!(manifests.len() >= 10, "{} manifests", manifests.len());
    for (origin, mut doc) in manifests {
        // Keep what a user writes: a `kubectl get -o json` fixture also carries what the
        // server set (managedFields, uid, status), which an apply must not send.
        let meta = &doc["metadata"];
        let mut kept = serde_json::json!({"name": meta["name"], "namespace": namespace});
        for key in ["labels", "annotations"] {
            if !meta[key].is_null() {
                kept[key] = meta[key].clone();
            }
        }
        doc["metadata"] = kept;
        if let Some(object) = doc.as_object_mut() {
            object.remove("status");
        }
        let admitted = cluster::apply(&client, &doc, true)
            .await
            .unwrap_or_else(|e| panic!("{origin}: {} refused: {e:#}", doc["kind"]));
        if doc["kind"] == "Sandbox" {
            let value = serde_json::to_value(&admitted).expect("serialize");
            serde_json::from_value::<rouse_shared::api::Sandbox>(value)
                .unwrap_or_else(|e| panic!("{origin}: the defaulted Sandbox does not parse: {e}"));
        }
    }
    let mut bad = serde_json::json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": "bad", "namespace": namespace},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "main", "image": "busybox"}]}}},
    });
    bad["spec"]["operatingMode"] = serde_json::json!("Sleeping");
    let err = cluster::apply(&client, &bad, true)
        .await
        .expect_err("an operatingMode outside the enum");
    assert!(format!("{err:#}").contains("operatingMode"), "{err:#}");
}
