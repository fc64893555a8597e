//! The plain manifests in `deploy/kubernetes/` stay well-formed: every document parses into its
//! k8s-openapi type and back without losing a field (so a misspelt key fails here, not on a
//! cluster), the kustomizations list exactly the files beside them, the proxy's ConfigMap holds
//! a valid proxy config, and the RBAC grants what the code calls.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

fn deploy(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(dir)
}

/// Every `*.yaml` file of a directory, sorted.
fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    files
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_saphyr::from_str_multiple::<Value, Vec<Value>>(&text)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .into_iter()
        .filter(|v| !v.is_null())
        .collect()
}

/// Parses `doc` as `K` and checks that nothing was dropped on the way.
fn typed<K: DeserializeOwned + Serialize>(doc: &Value, origin: &str) -> K {
    let object: K = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{origin}: {e}"));
    let back = serde_json::to_value(&object).expect("serialize");
    assert_eq!(&back, doc, "{origin}: a field is unknown or misplaced");
    object
}

/// All documents of deploy/kubernetes except the kustomization, with where each came from.
fn manifests() -> Vec<(String, Value)> {
    yaml_files(&deploy("kubernetes"))
        .into_iter()
        .filter(|p| !p.ends_with("kustomization.yaml"))
        .flat_map(|path| {
            let file = path
                .file_name()
                .expect("name")
                .to_string_lossy()
                .into_owned();
            documents(&path)
                .into_iter()
                .enumerate()
                .map(move |(i, doc)| (format!("{file} document {}", i + 1), doc))
        })
        .collect()
}

fn find<'a>(all: &'a [(String, Value)], kind: &str, name: &str) -> &'a Value {
    all.iter()
        .map(|(_, doc)| doc)
        .find(|doc| doc["kind"] == kind && doc["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn every_manifest_parses_into_its_kubernetes_type() {
    let all = manifests();
    assert!(!all.is_empty());
    for (origin, doc) in &all {
        let kind = doc["kind"]
            .as_str()
            .unwrap_or_else(|| panic!("{origin}: no kind"));
        match kind {
            "Namespace" => drop(typed::<Namespace>(doc, origin)),
            "ServiceAccount" => drop(typed::<ServiceAccount>(doc, origin)),
            "ClusterRole" => drop(typed::<ClusterRole>(doc, origin)),
            "ClusterRoleBinding" => drop(typed::<ClusterRoleBinding>(doc, origin)),
            "Role" => drop(typed::<Role>(doc, origin)),
            "RoleBinding" => drop(typed::<RoleBinding>(doc, origin)),
            "Deployment" => drop(typed::<Deployment>(doc, origin)),
            "ConfigMap" => drop(typed::<ConfigMap>(doc, origin)),
            "Service" => drop(typed::<Service>(doc, origin)),
            other => panic!("{origin}: kind {other} has no check here; add one"),
        }
        let namespaced = !matches!(kind, "Namespace" | "ClusterRole" | "ClusterRoleBinding");
        if namespaced {
            assert_eq!(doc["metadata"]["namespace"], "rouse-system", "{origin}");
        }
    }
}

#[test]
fn the_kustomizations_list_every_file() {
    let dir = deploy("kubernetes");
    let kustomization = &documents(&dir.join("kustomization.yaml"))[0];
    let listed: BTreeSet<&str> = kustomization["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a path"))
        .collect();
    let mut want: BTreeSet<String> = yaml_files(&dir)
        .iter()
        .map(|p| p.file_name().expect("name").to_string_lossy().into_owned())
        .filter(|f| f != "kustomization.yaml")
        .collect();
    want.insert("../crds".to_owned());
    assert_eq!(listed, want.iter().map(String::as_str).collect());

    let crds = deploy("crds");
    let listed: BTreeSet<String> = documents(&crds.join("kustomization.yaml"))[0]["resources"]
        .as_array()
        .expect("resources")
        .iter()
        .map(|r| r.as_str().expect("a path").to_owned())
        .collect();
    let want: BTreeSet<String> = rouse_shared::crds::all()
        .iter()
        .map(rouse_shared::crds::file_name)
        .collect();
    assert_eq!(listed, want);
}

#[test]
fn the_proxy_deployment_reads_a_valid_store_config() {
    let all = manifests();
    let config_map: ConfigMap = typed(find(&all, "ConfigMap", "rouse-proxy"), "ConfigMap");
    let text = &config_map.data.expect("data")["proxy.toml"];
    let config = rouse_proxy::Config::from_toml(text).expect("a valid proxy config");
    assert_eq!(
        config.directory.kind,
        rouse_proxy::config::DirectoryKind::Store
    );
    let admin = config.admin.listen.expect("admin listener").port();
    let http = config.http.listen.expect("http listener").port();

    let deployment: Deployment = typed(find(&all, "Deployment", "rouse-proxy"), "Deployment");
    let pod = deployment
        .spec
        .expect("spec")
        .template
        .spec
        .expect("pod spec");
    let container = &pod.containers[0];
    let args = container.args.clone().unwrap_or_default();
    let mount = &container.volume_mounts.as_ref().expect("mounts")[0];
    assert_eq!(
        args,
        [
            "proxy",
            "--config",
            &format!("{}/proxy.toml", mount.mount_path)
        ]
    );
    let ports: Vec<(String, i32)> = container
        .ports
        .iter()
        .flatten()
        .map(|p| (p.name.clone().unwrap_or_default(), p.container_port))
        .collect();
    assert!(
        ports.contains(&("http".into(), i32::from(http))),
        "{ports:?}"
    );
    assert!(
        ports.contains(&("admin".into(), i32::from(admin))),
        "{ports:?}"
    );
    assert_eq!(pod.service_account_name.as_deref(), Some("rouse-proxy"));
}

/// The verbs a role grants on one resource of one API group.
fn verbs(rules: &[PolicyRule], group: &str, resource: &str) -> BTreeSet<String> {
    rules
        .iter()
        .filter(|r| r.api_groups.iter().flatten().any(|g| g == group))
        .filter(|r| r.resources.iter().flatten().any(|x| x == resource))
        .flat_map(|r| r.verbs.iter().cloned())
        .collect()
}

fn set(verbs: &[&str]) -> BTreeSet<String> {
    verbs.iter().map(|v| (*v).to_owned()).collect()
}

#[test]
fn the_roles_grant_what_the_code_calls() {
    let all = manifests();
    let proxy: ClusterRole = typed(find(&all, "ClusterRole", "rouse-proxy"), "proxy role");
    let rules = proxy.rules.expect("rules");
    // StoreDirectory: list + watch; wake = patch; activity = status patch.
    assert_eq!(
        verbs(&rules, "agents.x-k8s.io", "sandboxes"),
        set(&["get", "list", "watch", "patch"])
    );
    assert_eq!(
        verbs(&rules, "agents.x-k8s.io", "sandboxes/status"),
        set(&["patch"])
    );

    let controller: ClusterRole = typed(
        find(&all, "ClusterRole", "rouse-controller"),
        "controller role",
    );
    let rules = controller.rules.expect("rules");
    for (group, resource, want) in [
        (
            "agents.x-k8s.io",
            "sandboxes",
            &["get", "list", "watch", "create", "patch", "delete"][..],
        ),
        ("agents.x-k8s.io", "sandboxes/status", &["patch"]),
        // Pools and claims (controller/src/extensions/kube.rs).
        (
            "extensions.agents.x-k8s.io",
            "sandboxclaims",
            &["get", "list", "watch", "patch", "delete"],
        ),
        (
            "extensions.agents.x-k8s.io",
            "sandboxclaims/status",
            &["patch"],
        ),
        (
            "extensions.agents.x-k8s.io",
            "sandboxwarmpools",
            &["get", "list", "watch"],
        ),
        (
            "extensions.agents.x-k8s.io",
            "sandboxwarmpools/status",
            &["patch"],
        ),
        (
            "extensions.agents.x-k8s.io",
            "sandboxtemplates",
            &["get", "list", "watch"],
        ),
        (
            "networking.k8s.io",
            "networkpolicies",
            &["get", "list", "watch", "create", "patch", "delete"],
        ),
        ("", "pods", &["list", "watch", "create", "patch", "delete"]),
        ("", "services", &["list", "watch", "create", "delete"]),
        (
            "",
            "persistentvolumeclaims",
            &["get", "list", "watch", "create"],
        ),
        // Snapshots (controller/src/snapshot/kube/) and forks (platform/kube/restore.rs).
        (
            "agents.x-k8s.io",
            "sandboxsnapshots",
            &["get", "list", "watch"],
        ),
        ("agents.x-k8s.io", "sandboxsnapshots/status", &["patch"]),
        (
            "agents.x-k8s.io",
            "sandboxsnapshots/finalizers",
            &["update"],
        ),
        (
            "snapshot.storage.k8s.io",
            "volumesnapshots",
            &["get", "list", "watch", "create"],
        ),
        (
            "podsnapshot.gke.io",
            "podsnapshotmanualtriggers",
            &["get", "list", "watch", "create"],
        ),
        ("podsnapshot.gke.io", "podsnapshots", &["get"]),
        ("events.k8s.io", "events", &["create", "patch"]),
    ] {
        let granted = verbs(&rules, group, resource);
        assert!(
            set(want).is_subset(&granted),
            "{group}/{resource}: {granted:?} lacks some of {want:?}"
        );
    }
    let lease: Role = typed(
        find(&all, "Role", "rouse-controller-leader-election"),
        "lease role",
    );
    assert_eq!(
        verbs(
            &lease.rules.expect("rules"),
            "coordination.k8s.io",
            "leases"
        ),
        set(&["get", "create", "update"])
    );
}
