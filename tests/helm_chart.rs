//! `deploy/helm/rouse` stays in sync with `deploy/crds` and `deploy/kubernetes` (the same CRDs,
//! RBAC rules and proxy config; rendered with its defaults, the same containers), every value
//! is documented, and helm renders and lints it and a real API server admits what it renders
//! (server-side dry-run apply). The helm tests skip when helm or the control plane's binaries
//! are missing, except under CI.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use rouse_testsupport::cluster;
use serde_json::Value;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn chart() -> PathBuf {
    root().join("deploy/helm/rouse")
}

fn documents(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    cluster::yaml_documents(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

#[test]
fn the_chart_crds_are_the_deploy_crds() {
    let names = |dir: &Path| -> BTreeSet<String> {
        std::fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .filter(|n| n != "kustomization.yaml")
            .collect()
    };
    let (deploy, chart) = (root().join("deploy/crds"), chart().join("crds"));
    assert_eq!(
        names(&deploy),
        names(&chart),
        "copy deploy/crds/*.yaml to {}",
        chart.display()
    );
    for name in names(&deploy) {
        let a = std::fs::read_to_string(deploy.join(&name)).expect("read");
        let b = std::fs::read_to_string(chart.join(&name)).expect("read");
        assert!(
            a == b,
            "{name} differs: copy deploy/crds/{name} to the chart's crds/"
        );
    }
}

#[test]
fn the_chart_rbac_rules_are_the_kustomize_rules() {
    let kubernetes = root().join("deploy/kubernetes");
    let controller = documents(&kubernetes.join("controller-rbac.yaml"));
    let proxy = documents(&kubernetes.join("proxy-rbac.yaml"));
    for (file, want) in [
        (
            "controller-rules.yaml",
            &find(&controller, "ClusterRole", "rouse-controller")["rules"],
        ),
        (
            "leader-election-rules.yaml",
            &find(&controller, "Role", "rouse-controller-leader-election")["rules"],
        ),
        (
            "proxy-rules.yaml",
            &find(&proxy, "ClusterRole", "rouse-proxy")["rules"],
        ),
    ] {
        let path = chart().join("files").join(file);
        let text = std::fs::read_to_string(&path).expect("read rules");
        let got: Value = serde_saphyr::from_str(&text).expect("rules parse");
        assert_eq!(
            &got,
            want,
            "{}: the rules differ from deploy/kubernetes",
            path.display()
        );
    }
}

/// The chart's values.yaml.
fn values() -> Value {
    documents(&chart().join("values.yaml")).remove(0)
}

#[test]
fn the_chart_proxy_config_is_the_kustomize_config() {
    let config = documents(&root().join("deploy/kubernetes/proxy-config.yaml"));
    let want = &find(&config, "ConfigMap", "rouse-proxy")["data"]["proxy.toml"];
    assert_eq!(&values()["proxy"]["config"], want);
}

/// Every leaf key of `value`, as dotted paths.
fn leaves(prefix: &str, value: &Value, out: &mut Vec<String>) {
    match value {
        Value::Object(map)
            if !map.is_empty()
                && prefix != "controller.resources"
                && prefix != "proxy.resources" =>
        {
            for (key, v) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                leaves(&path, v, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

#[test]
fn every_value_is_documented() {
    let mut keys = Vec::new();
    leaves("", &values(), &mut keys);
    assert!(keys.len() > 30, "{keys:?}");
    let docs = std::fs::read_to_string(root().join("docs/helm.md")).expect("docs/helm.md");
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| !docs.contains(&format!("`{k}`")))
        .collect();
    assert!(
        missing.is_empty(),
        "values not in docs/helm.md: {missing:?}"
    );
}

/// Runs helm with `args`; its standard output.
fn helm(helm: &Path, args: &[&str]) -> String {
    let out = Command::new(helm).args(args).output().expect("run helm");
    assert!(
        out.status.success(),
        "helm {args:?} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8 output")
}

/// `helm template` of the chart into namespace rouse-system with `sets`.
fn render(helm_bin: &Path, sets: &[&str]) -> Vec<Value> {
    let chart = chart();
    let chart = chart.to_str().expect("utf-8 path");
    let mut args = vec![
        "template",
        "rouse",
        chart,
        "--namespace",
        "rouse-system",
        "--include-crds",
    ];
    for set in sets {
        args.extend(["--set", set]);
    }
    cluster::yaml_documents(&helm(helm_bin, &args)).expect("helm output parses")
}

/// A container with what differs on purpose between the chart and the kustomize base (image,
/// pull policy) removed.
fn container(deployment: &Value) -> Value {
    let mut c = deployment["spec"]["template"]["spec"]["containers"][0].clone();
    if let Some(c) = c.as_object_mut() {
        c.remove("image");
        c.remove("imagePullPolicy");
    }
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn helm_renders_lints_and_the_api_server_admits_the_chart() {
    let test = "helm_renders_lints_and_the_api_server_admits_the_chart";
    let helm_bin = match cluster::helm_binary() {
        Ok(helm) => helm,
        Err(e) if cluster::required() => panic!("{test}: helm is required under CI: {e:#}"),
        Err(e) => return eprintln!("skipping {test}: {e:#}"),
    };
    let Some(plane) = cluster::shared_or_skip(test) else {
        return;
    };
    let chart_dir = chart();
    let chart_dir = chart_dir.to_str().expect("utf-8 path");
    helm(&helm_bin, &["lint", chart_dir, "--strict"]);
    helm(
        &helm_bin,
        &[
            "lint",
            chart_dir,
            "--strict",
            "--set",
            "serviceMonitor.enabled=true",
        ],
    );

    // Defaults: the same containers, ConfigMap and Service as the kustomize base.
    let rendered = render(&helm_bin, &[]);
    let kubernetes = root().join("deploy/kubernetes");
    for (file, name) in [
        ("controller.yaml", "rouse-controller"),
        ("proxy.yaml", "rouse-proxy"),
    ] {
        let base = documents(&kubernetes.join(file));
        assert_eq!(
            container(find(&rendered, "Deployment", name)),
            container(find(&base, "Deployment", name)),
            "{name}: the chart's container differs from deploy/kubernetes/{file}"
        );
        assert_eq!(
            find(&rendered, "Deployment", name)["spec"]["replicas"],
            find(&base, "Deployment", name)["spec"]["replicas"]
        );
    }
    let base_proxy = documents(&kubernetes.join("proxy.yaml"));
    assert_eq!(
        find(&rendered, "Service", "rouse-proxy")["spec"]["ports"],
        find(&base_proxy, "Service", "rouse-proxy")["spec"]["ports"]
    );
    assert!(rendered.iter().any(|d| d["kind"] == "PodDisruptionBudget"));
    assert!(
        rendered
            .iter()
            .all(|d| d["kind"] != "HorizontalPodAutoscaler")
    );

    // Everything optional on (but the ServiceMonitor, whose CRD is not installed here).
    let client = plane.client().await.expect("admin client");
    cluster::install(&client).await.expect("install");
    let sandboxes = cluster::test_namespace(&client, "helm-sandboxes")
        .await
        .expect("namespace");
    let namespaces = format!("sandboxNetworkPolicy.namespaces={{{sandboxes}}}");
    let everything = render(
        &helm_bin,
        &[
            "proxy.autoscaling.enabled=true",
            "runtimeClasses.gvisor=true",
            "runtimeClasses.kata=true",
            "sandboxNetworkPolicy.enabled=true",
            &namespaces,
        ],
    );
    for kind in [
        "HorizontalPodAutoscaler",
        "RuntimeClass",
        "NetworkPolicy",
        "CustomResourceDefinition",
    ] {
        assert!(everything.iter().any(|d| d["kind"] == kind), "no {kind}");
    }
    let proxy = find(&everything, "Deployment", "rouse-proxy");
    assert!(
        proxy["spec"]["replicas"].is_null(),
        "the HPA owns the replicas"
    );
    for doc in rendered.iter().chain(&everything) {
        cluster::apply(&client, doc, true)
            .await
            .unwrap_or_else(|e| {
                panic!("{} {} refused: {e:#}", doc["kind"], doc["metadata"]["name"])
            });
    }
}
