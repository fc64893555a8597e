//! The Kubernetes request semantics kubectl and client libraries rely on, in process:
//! discovery, auth before routing, JSON patch, server-side apply, dry runs, the scale and status
//! subresources, DeleteOptions bodies, paging and the initial-events bookmark.

use serde_json::{Value, json};

use super::{SANDBOXES, Server, assert_status, labelled, sandbox};

const APPLY: &str = "application/apply-patch+yaml";
const POOLS: &str = "/apis/extensions.agents.x-k8s.io/v1beta1/namespaces/default/sandboxwarmpools";

fn pool(replicas: i32) -> Value {
    json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1",
        "kind": "SandboxWarmPool",
        "metadata": {"name": "pool"},
        "spec": {"replicas": replicas, "sandboxTemplateRef": {"name": "t"}},
    })
}

#[tokio::test]
async fn discovery_and_auth_before_routing() {
    let server = Server::start().await;
    let c = &server.client;
    let (code, groups) = c.get("/apis").await;
    assert_eq!(code, 200, "{groups}");
    assert_eq!(groups["kind"], "APIGroupList");
    assert_eq!(
        groups["groups"].as_array().map(Vec::len),
        Some(2),
        "{groups}"
    );
    let (_, list) = c.get("/apis/agents.x-k8s.io/v1beta1").await;
    assert_eq!(list["kind"], "APIResourceList");
    assert_eq!(list["resources"][0]["name"], "sandboxes");
    let (_, version) = c.get("/version").await;
    assert_eq!(version["major"], "1");
    assert_status(&c.get("/apis/apps/v1").await, 404, "NotFound");
    // Without the token every path is 401, so paths cannot be probed.
    let anonymous = super::client::Client::new(c.addr(), None);
    assert_status(&anonymous.get("/apis").await, 401, "Unauthorized");
    assert_status(&anonymous.get("/no/such/path").await, 401, "Unauthorized");
    server.stop().await;
}

#[tokio::test]
async fn json_patch_dry_run_status_and_delete_options() {
    // The embedded store: it checks delete preconditions (the in-memory one does not).
    let server = Server::embedded().await;
    let c = &server.client;
    let web = format!("{SANDBOXES}/web");
    // dryRun=All answers as a create would and stores nothing.
    let (code, _) = c
        .post(&format!("{SANDBOXES}?dryRun=All"), &sandbox("web"))
        .await;
    assert_eq!(code, 201);
    assert_status(&c.get(&web).await, 404, "NotFound");
    // No Content-Type: JSON.
    let body = serde_json::to_vec(&sandbox("web")).expect("json");
    let (code, created) = c.raw("POST", SANDBOXES, None, body).await;
    assert_eq!(code, 201, "{created}");

    let ops = br#"[{"op":"add","path":"/metadata/labels","value":{"a":"1"}},{"op":"test","path":"/metadata/name","value":"web"}]"#;
    let (code, patched) = c
        .raw(
            "PATCH",
            &web,
            Some("application/json-patch+json"),
            ops.to_vec(),
        )
        .await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["labels"], json!({"a": "1"}));
    let failing = br#"[{"op":"test","path":"/metadata/name","value":"other"}]"#;
    let got = c
        .raw(
            "PATCH",
            &web,
            Some("application/json-patch+json"),
            failing.to_vec(),
        )
        .await;
    assert_status(&got, 422, "Invalid");

    // A dry-run replace changes nothing.
    let mut relabelled = patched.clone();
    relabelled["metadata"]["labels"] = json!({"b": "2"});
    let (code, answer) = c.put(&format!("{web}?dryRun=All"), &relabelled).await;
    assert_eq!(
        (code.as_u16(), &answer["metadata"]["labels"]),
        (200, &json!({"b": "2"}))
    );
    assert_eq!(c.get(&web).await.1["metadata"]["labels"], json!({"a": "1"}));

    // PUT on /status replaces the status only.
    let mut with_status = patched.clone();
    with_status["status"] = json!({"podIPs": ["10.1.2.3"]});
    with_status["spec"]["operatingMode"] = json!("Suspended");
    let (code, stored) = c.put(&format!("{web}/status"), &with_status).await;
    assert_eq!(code, 200, "{stored}");
    assert_eq!(stored["status"]["podIPs"], json!(["10.1.2.3"]));
    assert!(stored["spec"].get("operatingMode").is_none(), "{stored}");

    // DeleteOptions: a wrong uid precondition is a conflict; a dry run keeps the object.
    let wrong = serde_json::to_vec(&json!({"preconditions": {"uid": "nope"}})).expect("json");
    let got = c.raw("DELETE", &web, Some("application/json"), wrong).await;
    assert_status(&got, 409, "Conflict");
    let dry = serde_json::to_vec(&json!({"dryRun": ["All"], "propagationPolicy": "Foreground"}))
        .expect("json");
    let (code, _) = c.raw("DELETE", &web, Some("application/json"), dry).await;
    assert_eq!(code, 200);
    assert_eq!(c.get(&web).await.0, 200);
    let right = serde_json::to_vec(&json!({"preconditions": {"uid": created["metadata"]["uid"]}}))
        .expect("json");
    let (code, _) = c.raw("DELETE", &web, Some("application/json"), right).await;
    assert_eq!(code, 200);
    assert_status(&c.get(&web).await, 404, "NotFound");
    server.stop().await;
}

#[tokio::test]
async fn server_side_apply_owns_fields_and_reports_conflicts() {
    let server = Server::start().await;
    let c = &server.client;
    let at =
        |manager: &str, force: bool| format!("{POOLS}/pool?fieldManager={manager}&force={force}");
    let yaml = |v: &Value| serde_json::to_vec(v).expect("json (YAML's subset)");
    // Create on apply, owned by its manager.
    let (code, created) = c
        .raw("PATCH", &at("alice", false), Some(APPLY), yaml(&pool(2)))
        .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["metadata"]["managedFields"][0]["manager"], "alice");
    assert_eq!(
        created["metadata"]["managedFields"][0]["fieldsV1"]["f:spec"]["f:replicas"],
        json!({})
    );
    // Another manager changing alice's field conflicts, unless forced.
    let got = c
        .raw("PATCH", &at("bob", false), Some(APPLY), yaml(&pool(5)))
        .await;
    assert_status(&got, 409, "Conflict");
    assert!(
        got.1["message"]
            .as_str()
            .unwrap_or_default()
            .contains(r#"conflict with "alice": .spec.replicas"#),
        "{}",
        got.1
    );
    // The same value is shared ownership, not a conflict.
    let (code, _) = c
        .raw("PATCH", &at("bob", false), Some(APPLY), yaml(&pool(2)))
        .await;
    assert_eq!(code, 200);
    let (code, forced) = c
        .raw("PATCH", &at("bob", true), Some(APPLY), yaml(&pool(5)))
        .await;
    assert_eq!(code, 200, "{forced}");
    assert_eq!(forced["spec"]["replicas"], 5);
    // A label alice stops applying goes; without a manager an apply is a bad request.
    let mut labelled_pool = pool(5);
    labelled_pool["metadata"]["labels"] = json!({"team": "a"});
    let (_, with_label) = c
        .raw(
            "PATCH",
            &at("carol", false),
            Some(APPLY),
            yaml(&labelled_pool),
        )
        .await;
    assert_eq!(with_label["metadata"]["labels"], json!({"team": "a"}));
    let (_, without) = c
        .raw("PATCH", &at("carol", false), Some(APPLY), yaml(&pool(5)))
        .await;
    assert!(
        without["metadata"]
            .get("labels")
            .is_none_or(|l| l.get("team").is_none()),
        "{without}"
    );
    let got = c
        .raw(
            "PATCH",
            &format!("{POOLS}/pool"),
            Some(APPLY),
            yaml(&pool(5)),
        )
        .await;
    assert_status(&got, 400, "BadRequest");
    server.stop().await;
}

#[tokio::test]
async fn scale_paging_and_the_initial_events_bookmark() {
    let server = Server::start().await;
    let c = &server.client;
    assert_eq!(c.post(POOLS, &pool(1)).await.0, 201);
    let (code, scale) = c.get(&format!("{POOLS}/pool/scale")).await;
    assert_eq!(code, 200, "{scale}");
    assert_eq!(
        (scale["kind"].as_str(), scale["spec"]["replicas"].as_i64()),
        (Some("Scale"), Some(1))
    );
    let (code, scaled) = c
        .patch(
            &format!("{POOLS}/pool/scale"),
            "application/merge-patch+json",
            &json!({"spec": {"replicas": 4}}),
        )
        .await;
    assert_eq!(
        (code.as_u16(), scaled["spec"]["replicas"].as_i64()),
        (200, Some(4)),
        "{scaled}"
    );
    assert_eq!(
        c.get(&format!("{POOLS}/pool")).await.1["spec"]["replicas"],
        4
    );
    assert_status(
        &c.get(&format!("{SANDBOXES}/x/scale")).await,
        404,
        "NotFound",
    );

    for name in ["a", "b", "c"] {
        assert_eq!(
            c.post(SANDBOXES, &labelled(name, json!({"k": "v"})))
                .await
                .0,
            201
        );
    }
    let (_, first) = c.get(&format!("{SANDBOXES}?limit=2")).await;
    let token = first["metadata"]["continue"]
        .as_str()
        .expect("continue token")
        .to_owned();
    assert_eq!(first["metadata"]["remainingItemCount"], 1);
    let (_, rest) = c
        .get(&format!("{SANDBOXES}?limit=2&continue={token}"))
        .await;
    let names = |l: &Value| -> Vec<String> {
        l["items"]
            .as_array()
            .map(|i| {
                i.iter()
                    .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(
        (names(&first), names(&rest)),
        (vec!["a".to_owned(), "b".to_owned()], vec!["c".to_owned()])
    );
    assert!(rest["metadata"].get("continue").is_none(), "{rest}");
    let (_, by_ns) = c
        .get("/v1/sandboxes?fieldSelector=metadata.namespace%3Dother")
        .await;
    assert!(names(&by_ns).is_empty(), "{by_ns}");

    let mut events = c
        .stream(&format!("{SANDBOXES}?watch=true&sendInitialEvents=true&allowWatchBookmarks=true&resourceVersionMatch=NotOlderThan"))
        .await;
    let lines = events.json_lines(4, super::DEADLINE).await;
    let types: Vec<&str> = lines.iter().filter_map(|l| l["type"].as_str()).collect();
    assert_eq!(types, ["ADDED", "ADDED", "ADDED", "BOOKMARK"], "{lines:?}");
    assert_eq!(
        lines[3]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
        "true"
    );
    drop(events);
    server.stop().await;
}
