//! In-process tests of the REST API: a real listener on 127.0.0.1:0, a real HTTP client and
//! an in-memory store.

mod abuse;
mod client;
mod kube_client;
mod kube_compat;
mod memory;
mod streams;

use std::time::Duration;

use axum::http::StatusCode;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use self::client::Client;
use self::memory::MemoryStore;
use super::{ApiConfig, ApiState, merge_patch, serve};
use crate::store::EmbeddedStore;

const TOKEN: &str = "s3cret-token";
const DEADLINE: Duration = Duration::from_secs(20);

struct Server<S = MemoryStore> {
    client: Client,
    store: S,
    data: tempfile::TempDir,
    shutdown: CancellationToken,
    task: tokio::task::JoinHandle<super::Result<()>>,
}

impl Server {
    async fn start() -> Server {
        Self::start_with(|_| {}).await
    }

    async fn start_with(tune: impl FnOnce(&mut ApiConfig)) -> Server {
        let data = tempfile::tempdir().expect("tempdir");
        Server::serve(MemoryStore::default(), data, tune).await
    }
}

impl Server<EmbeddedStore> {
    async fn embedded() -> Server<EmbeddedStore> {
        Self::embedded_with(|_| {}).await
    }

    async fn embedded_with(tune: impl FnOnce(&mut ApiConfig)) -> Server<EmbeddedStore> {
        let data = tempfile::tempdir().expect("tempdir");
        let store = EmbeddedStore::open(&data.path().join("store.redb")).expect("open store");
        Server::serve(store, data, tune).await
    }
}

impl<S: super::ApiStore> Server<S> {
    async fn serve(store: S, data: tempfile::TempDir, tune: impl FnOnce(&mut ApiConfig)) -> Self {
        let mut config = ApiConfig::new(Some(TOKEN.to_owned()), data.path());
        config.log_poll_interval = Duration::from_millis(10);
        tune(&mut config);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        let shutdown = CancellationToken::new();
        let task = tokio::spawn(serve(
            listener,
            ApiState::new(store.clone(), config),
            shutdown.clone(),
        ));
        Server {
            client: Client::new(addr, Some(TOKEN)),
            store,
            data,
            shutdown,
            task,
        }
    }

    async fn stop(self) {
        self.shutdown.cancel();
        tokio::time::timeout(DEADLINE, self.task)
            .await
            .expect("server stops in time")
            .expect("server task")
            .expect("serve ok");
    }
}

fn sandbox(name: &str) -> Value {
    json!({
        "apiVersion": "agents.x-k8s.io/v1beta1",
        "kind": "Sandbox",
        "metadata": {"name": name},
        "spec": {"podTemplate": {"spec": {"containers": [{"name": "app", "image": "python:3"}]}}},
    })
}

fn labelled(name: &str, labels: Value) -> Value {
    let mut object = sandbox(name);
    object["metadata"]["labels"] = labels;
    object
}

const SANDBOXES: &str = "/v1/namespaces/default/sandboxes";

fn assert_status(got: &(StatusCode, Value), code: u16, reason: &str) {
    let (status, body) = got;
    assert_eq!(status.as_u16(), code, "{body}");
    assert_eq!(body["kind"], "Status", "{body}");
    assert_eq!(body["status"], "Failure", "{body}");
    assert_eq!(body["reason"], reason, "{body}");
    assert_eq!(body["code"], code, "{body}");
}

#[tokio::test]
async fn create_get_list_replace_patch_delete() {
    let server = Server::start().await;
    crud(&server.client).await;
    server.stop().await;
}

#[tokio::test]
async fn the_embedded_store_serves_the_api() {
    let server = Server::embedded().await;
    crud(&server.client).await;
    let c = &server.client;
    let (_, list) = c.get(SANDBOXES).await;
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();
    let mut watch = c
        .stream(&format!("{SANDBOXES}?watch=true&resourceVersion={rv}"))
        .await;
    c.post(SANDBOXES, &sandbox("web")).await;
    c.raw_json("POST", &format!("{SANDBOXES}/web/suspend"))
        .await;
    let lines = watch.json_lines(2, DEADLINE).await;
    assert_eq!(lines[0]["type"], "ADDED");
    assert_eq!(lines[1]["type"], "MODIFIED");
    assert_eq!(lines[1]["object"]["spec"]["operatingMode"], "Suspended");
    server.shutdown.cancel();
    watch.end(DEADLINE).await;
    server.stop().await;
}

/// Create, read, list, replace, patch, status and delete one sandbox.
async fn crud(c: &Client) {
    let (status, created) = c.post(SANDBOXES, &sandbox("web")).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert_eq!(created["metadata"]["namespace"], "default");
    let rv = created["metadata"]["resourceVersion"]
        .as_str()
        .expect("rv")
        .to_owned();

    let (status, got) = c.get(&format!("{SANDBOXES}/web")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(got["spec"], created["spec"]);

    let again = c.post(SANDBOXES, &sandbox("web")).await;
    assert_status(&again, 409, "AlreadyExists");
    assert_eq!(
        again.1["message"],
        "sandboxes.agents.x-k8s.io \"web\" already exists"
    );

    let (status, list) = c.get(SANDBOXES).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["kind"], "SandboxList");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(1));
    let (_, all) = c.get("/v1/sandboxes").await;
    assert_eq!(all["items"][0]["metadata"]["name"], "web");

    // Replace with the current version: labels are set, spec is replaced.
    let mut replaced = labelled("web", json!({"app": "web"}));
    replaced["metadata"]["resourceVersion"] = json!(rv);
    replaced["spec"]["service"] = json!(true);
    let (status, stored) = c.put(&format!("{SANDBOXES}/web"), &replaced).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert_eq!(stored["metadata"]["labels"]["app"], "web");
    assert_eq!(stored["spec"]["service"], true);
    // The same stale version again conflicts.
    let stale = c.put(&format!("{SANDBOXES}/web"), &replaced).await;
    assert_status(&stale, 409, "Conflict");
    // Replacing without the label removes it.
    let (status, stored) = c.put(&format!("{SANDBOXES}/web"), &sandbox("web")).await;
    assert_eq!(status, StatusCode::OK, "{stored}");
    assert!(stored["metadata"].get("labels").is_none(), "{stored}");
    assert!(stored["spec"].get("service").is_none(), "{stored}");

    // Merge patch, both content types.
    let (status, patched) = c
        .patch(
            &format!("{SANDBOXES}/web"),
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"tier": "front"}}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["metadata"]["labels"]["tier"], "front");
    let (status, patched) = c
        .patch(
            &format!("{SANDBOXES}/web"),
            "application/json",
            &json!({"spec": {"shutdownPolicy": "Delete"}}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{patched}");
    assert_eq!(patched["spec"]["shutdownPolicy"], "Delete");
    assert_eq!(patched["metadata"]["labels"]["tier"], "front");
    // A stale version in the patch is a precondition.
    let stale = c
        .patch(
            &format!("{SANDBOXES}/web"),
            "application/merge-patch+json",
            &json!({"metadata": {"resourceVersion": rv}, "spec": {"service": false}}),
        )
        .await;
    assert_status(&stale, 409, "Conflict");

    // Status subresource: a spec patch ignores status, a status patch writes it.
    let cond = json!({"status": {"conditions": [{
        "type": "Ready", "status": "True", "reason": "DependenciesReady", "message": "",
        "lastTransitionTime": "2026-01-01T00:00:00Z"
    }]}});
    let (_, ignored) = c
        .patch(
            &format!("{SANDBOXES}/web"),
            "application/merge-patch+json",
            &cond,
        )
        .await;
    assert!(
        ignored
            .get("status")
            .is_none_or(|s| s.get("conditions").is_none()),
        "{ignored}"
    );
    let (status, with_status) = c
        .patch(
            &format!("{SANDBOXES}/web/status"),
            "application/merge-patch+json",
            &cond,
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{with_status}");
    assert_eq!(with_status["status"]["conditions"][0]["type"], "Ready");
    let (_, read) = c.get(&format!("{SANDBOXES}/web/status")).await;
    assert_eq!(read["status"]["conditions"][0]["status"], "True");

    let (status, deleted) = c
        .delete(&format!("{SANDBOXES}/web?propagationPolicy=Foreground"))
        .await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    let gone = c.get(&format!("{SANDBOXES}/web")).await;
    assert_status(&gone, 404, "NotFound");
    assert_eq!(
        gone.1["message"],
        "sandboxes.agents.x-k8s.io \"web\" not found"
    );
    assert_eq!(gone.1["details"]["kind"], "sandboxes");
    let twice = c.delete(&format!("{SANDBOXES}/web")).await;
    assert_status(&twice, 404, "NotFound");
}

#[tokio::test]
async fn every_kind_round_trips() {
    let server = Server::start().await;
    let c = &server.client;
    let objects = [
        (
            "sandboxtemplates",
            json!({
                "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxTemplate",
                "metadata": {"name": "t"},
                "spec": {"podTemplate": {"spec": {"containers": [{"name": "app", "image": "x"}]}}},
            }),
        ),
        (
            "sandboxwarmpools",
            json!({
                "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
                "metadata": {"name": "p"}, "spec": {"replicas": 2, "sandboxTemplateRef": {"name": "t"}},
            }),
        ),
        (
            "sandboxclaims",
            json!({
                "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxClaim",
                "metadata": {"name": "c"}, "spec": {"warmPoolRef": {"name": "p"}},
            }),
        ),
        (
            "sandboxsnapshots",
            json!({
                "apiVersion": "agents.x-k8s.io/v1beta1", "kind": "SandboxSnapshot",
                "metadata": {"name": "s"}, "spec": {"sandboxName": "web"},
            }),
        ),
    ];
    for (plural, object) in objects {
        let path = format!("/v1/namespaces/team-a/{plural}");
        let (status, created) = c.post(&path, &object).await;
        assert_eq!(status, StatusCode::CREATED, "{plural}: {created}");
        let name = object["metadata"]["name"].as_str().expect("name");
        let (status, got) = c.get(&format!("{path}/{name}")).await;
        assert_eq!(status, StatusCode::OK, "{plural}: {got}");
        assert_eq!(got["kind"], object["kind"], "{plural}");
        let (_, list) = c.get(&path).await;
        assert_eq!(list["items"].as_array().map(Vec::len), Some(1), "{plural}");
    }
    // generateName picks a name.
    let mut generated = sandbox("x");
    generated["metadata"] = json!({"generateName": "job-"});
    let (status, created) = c.post(SANDBOXES, &generated).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    assert!(
        created["metadata"]["name"]
            .as_str()
            .is_some_and(|n| n.starts_with("job-"))
    );
    server.stop().await;
}

#[tokio::test]
async fn bad_requests_get_status_objects() {
    let server = Server::start_with(|c| c.max_body_bytes = 4096).await;
    let c = &server.client;

    // Invalid object: 422 naming the field, and nothing stored.
    let mut no_template = sandbox("bad");
    no_template["spec"] = json!({"replicas": 1});
    let invalid = c.post(SANDBOXES, &no_template).await;
    assert_status(&invalid, 422, "Invalid");
    let message = invalid.1["message"].as_str().expect("message");
    assert!(
        message.starts_with("Sandbox.agents.x-k8s.io \"bad\" is invalid: "),
        "{message}"
    );
    assert!(message.contains("spec.podTemplate"), "{message}");
    let fields: Vec<&str> = invalid.1["details"]["causes"]
        .as_array()
        .expect("causes")
        .iter()
        .filter_map(|c| c["field"].as_str())
        .collect();
    assert!(fields.contains(&"spec.podTemplate"), "{fields:?}");
    assert!(fields.contains(&"spec.replicas"), "{fields:?}");
    assert_status(&c.get(&format!("{SANDBOXES}/bad")).await, 404, "NotFound");

    // A bad name is a 422 too.
    let bad_name = c.post(SANDBOXES, &sandbox("Not_A_Name")).await;
    assert_status(&bad_name, 422, "Invalid");
    assert!(
        bad_name.1["message"]
            .as_str()
            .is_some_and(|m| m.contains("metadata.name"))
    );

    // Kind and apiVersion must match the URL.
    let mut wrong_kind = sandbox("x");
    wrong_kind["kind"] = json!("SandboxTemplate");
    let got = c.post(SANDBOXES, &wrong_kind).await;
    assert_status(&got, 422, "Invalid");
    assert!(
        got.1["message"]
            .as_str()
            .is_some_and(|m| m.contains("kind: must be \"Sandbox\"")),
        "{}",
        got.1
    );
    let mut wrong_group = sandbox("x");
    wrong_group["apiVersion"] = json!("extensions.agents.x-k8s.io/v1beta1");
    assert_status(&c.post(SANDBOXES, &wrong_group).await, 422, "Invalid");

    // Namespace and name must match the URL.
    let mut other_ns = sandbox("x");
    other_ns["metadata"]["namespace"] = json!("elsewhere");
    assert_status(&c.post(SANDBOXES, &other_ns).await, 400, "BadRequest");
    c.post(SANDBOXES, &sandbox("web")).await;
    assert_status(
        &c.put(&format!("{SANDBOXES}/web"), &sandbox("other")).await,
        400,
        "BadRequest",
    );
    // A patch may not rename.
    let rename = c
        .patch(
            &format!("{SANDBOXES}/web"),
            "application/merge-patch+json",
            &json!({"metadata": {"name": "x"}}),
        )
        .await;
    assert_status(&rename, 422, "Invalid");
    // A patch that breaks the object is rejected with the field.
    let breaking = c
        .patch(
            &format!("{SANDBOXES}/web"),
            "application/merge-patch+json",
            &json!({"spec": {"operatingMode": "Sleeping"}}),
        )
        .await;
    assert_status(&breaking, 422, "Invalid");
    assert!(
        breaking.1["message"]
            .as_str()
            .is_some_and(|m| m.contains("spec.operatingMode")),
        "{}",
        breaking.1
    );
    // "Never" as Kubernetes users write it is a valid time, kept as the last representable one.
    let never = c
        .patch(
            &format!("{SANDBOXES}/web"),
            "application/merge-patch+json",
            &json!({"spec": {"shutdownTime": "9999-12-31T23:59:59Z"}}),
        )
        .await;
    assert_eq!(never.0, StatusCode::OK, "{}", never.1);
    assert_eq!(
        never.1["spec"]["shutdownTime"],
        rouse_shared::validate::LAST_TIME
    );
    // A patch may not change the uid; the error names the field.
    let uid = c
        .patch(
            &format!("{SANDBOXES}/web"),
            "application/merge-patch+json",
            &json!({"metadata": {"uid": "00000000-0000-4000-8000-000000000000"}}),
        )
        .await;
    assert_status(&uid, 422, "Invalid");
    assert_eq!(
        uid.1["details"]["causes"][0]["field"], "metadata.uid",
        "{}",
        uid.1
    );

    // Malformed JSON, not an object, bad query values, bad selector.
    let raw = c
        .raw(
            "POST",
            SANDBOXES,
            Some("application/json"),
            b"{nope".to_vec(),
        )
        .await;
    assert_status(&raw, 400, "BadRequest");
    let raw = c
        .raw("POST", SANDBOXES, Some("application/json"), b"[1]".to_vec())
        .await;
    assert_status(&raw, 400, "BadRequest");
    assert_status(
        &c.get(&format!("{SANDBOXES}?labelSelector=a%20b")).await,
        400,
        "BadRequest",
    );
    assert_status(
        &c.get(&format!("{SANDBOXES}?watch=maybe")).await,
        400,
        "BadRequest",
    );
    assert_status(
        &c.delete(&format!("{SANDBOXES}/web?propagationPolicy=Never"))
            .await,
        400,
        "BadRequest",
    );

    // Body limit, declared or streamed, and content types.
    let big = json!({"metadata": {"annotations": {"a": "x".repeat(8192)}}});
    assert_status(&c.post(SANDBOXES, &big).await, 413, "RequestEntityTooLarge");
    let chunked = c
        .chunked("POST", SANDBOXES, "application/json", vec![b' '; 8192])
        .await;
    assert_status(&chunked, 413, "RequestEntityTooLarge");
    let text = c
        .raw("POST", SANDBOXES, Some("text/plain"), b"{}".to_vec())
        .await;
    assert_status(&text, 415, "UnsupportedMediaType");
    // No Content-Type: read as JSON, as kube-apiserver does (here: an object with no name).
    let none = c.raw("POST", SANDBOXES, None, b"{}".to_vec()).await;
    assert_ne!(none.0, 415, "{none:?}");
    let strategic = c
        .raw(
            "PATCH",
            &format!("{SANDBOXES}/web"),
            Some("application/strategic-merge-patch+json"),
            b"{}".to_vec(),
        )
        .await;
    assert_status(&strategic, 415, "UnsupportedMediaType");
    let merge_on_create = c
        .raw(
            "POST",
            SANDBOXES,
            Some("application/merge-patch+json"),
            b"{}".to_vec(),
        )
        .await;
    assert_status(&merge_on_create, 415, "UnsupportedMediaType");

    // Unknown routes and methods.
    assert_status(&c.get("/v1/namespaces/default/pods").await, 404, "NotFound");
    assert_status(&c.get("/nope").await, 404, "NotFound");
    assert_status(&c.delete(SANDBOXES).await, 405, "MethodNotAllowed");
    let suspend_template = c
        .raw(
            "POST",
            "/v1/namespaces/default/sandboxtemplates/t/suspend",
            None,
            Vec::new(),
        )
        .await;
    assert_status(&suspend_template, 404, "NotFound");
    server.stop().await;
}

#[tokio::test]
async fn token_is_required() {
    let server = Server::start().await;
    let addr = server.client.addr();
    for token in [None, Some("wrong"), Some("s3cret-token-and-more")] {
        let anonymous = Client::new(addr, token);
        let got = anonymous.get(SANDBOXES).await;
        assert_status(&got, 401, "Unauthorized");
        let got = anonymous.post(SANDBOXES, &sandbox("web")).await;
        assert_status(&got, 401, "Unauthorized");
        let got = anonymous.get("/openapi.json").await;
        assert_status(&got, 401, "Unauthorized");
    }
    let anonymous = Client::new(addr, None);
    let (status, _) = anonymous.raw_text("GET", "/healthz").await;
    assert_eq!(status, StatusCode::OK);
    assert_status(
        &server.client.get(&format!("{SANDBOXES}/web")).await,
        404,
        "NotFound",
    );
    server.stop().await;

    // Without a token (`--no-auth`), anyone may call.
    let open = Server::start_with(|c| c.token = None).await;
    let anonymous = Client::new(open.client.addr(), None);
    let (status, _) = anonymous.get(SANDBOXES).await;
    assert_eq!(status, StatusCode::OK);
    open.stop().await;
}

#[tokio::test]
async fn suspend_and_resume_patch_operating_mode() {
    let server = Server::start().await;
    let c = &server.client;
    c.post(SANDBOXES, &sandbox("web")).await;
    let (status, suspended) = c
        .raw_json("POST", &format!("{SANDBOXES}/web/suspend"))
        .await;
    assert_eq!(status, StatusCode::OK, "{suspended}");
    assert_eq!(suspended["spec"]["operatingMode"], "Suspended");
    let (status, resumed) = c.raw_json("POST", &format!("{SANDBOXES}/web/resume")).await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    assert_eq!(resumed["spec"]["operatingMode"], "Running");
    let missing = c
        .raw_json("POST", &format!("{SANDBOXES}/nope/suspend"))
        .await;
    assert_status(&missing, 404, "NotFound");
    server.stop().await;
}

#[tokio::test]
async fn label_and_field_selectors() {
    let server = Server::start().await;
    let c = &server.client;
    c.post(
        SANDBOXES,
        &labelled("a", json!({"app": "web", "tier": "front"})),
    )
    .await;
    c.post(
        SANDBOXES,
        &labelled("b", json!({"app": "web", "tier": "back"})),
    )
    .await;
    c.post(SANDBOXES, &labelled("c", json!({"app": "db"})))
        .await;
    let names = |list: &Value| -> Vec<String> {
        list["items"]
            .as_array()
            .expect("items")
            .iter()
            .map(|i| i["metadata"]["name"].as_str().expect("name").to_owned())
            .collect()
    };
    let cases = [
        ("app%3Dweb", vec!["a", "b"]),
        ("app%3Dweb%2Ctier%21%3Dfront", vec!["b"]),
        ("tier%20in%20(front%2Cback)", vec!["a", "b"]),
        ("!tier", vec!["c"]),
        ("app%3Dnone", vec![]),
    ];
    for (selector, want) in cases {
        let (status, list) = c
            .get(&format!("{SANDBOXES}?labelSelector={selector}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{selector}: {list}");
        assert_eq!(names(&list), want, "{selector}");
    }
    let (_, one) = c
        .get(&format!("{SANDBOXES}?fieldSelector=metadata.name%3Db"))
        .await;
    assert_eq!(names(&one), ["b"]);
    let bad = c
        .get(&format!("{SANDBOXES}?labelSelector=tier%20in%20front"))
        .await;
    assert_status(&bad, 400, "BadRequest");
    assert!(
        bad.1["message"]
            .as_str()
            .is_some_and(|m| m.contains("labelSelector"))
    );
    server.stop().await;
}
#[tokio::test]
async fn openapi_describes_every_route() {
    let server = Server::start().await;
    let (status, doc) = server.client.get("/openapi.json").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.0.3");
    for kind in super::Kind::ALL {
        let plural = kind.plural();
        for path in [
            format!("/v1/{plural}"),
            format!("/v1/namespaces/{{ns}}/{plural}"),
            format!("/v1/namespaces/{{ns}}/{plural}/{{name}}"),
            format!("/v1/namespaces/{{ns}}/{plural}/{{name}}/status"),
        ] {
            assert!(doc["paths"].get(&path).is_some(), "missing {path}");
        }
        assert!(
            doc["components"]["schemas"][kind.kind()]["properties"]["spec"].is_object(),
            "{} schema",
            kind.kind()
        );
    }
    for sub in ["suspend", "resume", "log"] {
        let path = format!("/v1/namespaces/{{ns}}/sandboxes/{{name}}/{sub}");
        assert!(doc["paths"].get(&path).is_some(), "missing {path}");
    }
    server.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_patches_lose_no_update() {
    let server = Server::embedded().await;
    let c = &server.client;
    c.post(SANDBOXES, &sandbox("web")).await;
    let writers = (0..8).map(|i| async move {
        let patch = json!({"metadata": {"labels": {format!("writer-{i}"): "yes"}}});
        let (status, body) = c
            .patch(
                &format!("{SANDBOXES}/web"),
                "application/merge-patch+json",
                &patch,
            )
            .await;
        (i, status, body)
    });
    let results = futures::future::join_all(writers).await;
    let (_, stored) = c.get(&format!("{SANDBOXES}/web")).await;
    let mut succeeded = 0;
    for (i, status, body) in results {
        let label = &stored["metadata"]["labels"][format!("writer-{i}")];
        match status.as_u16() {
            200 => {
                succeeded += 1;
                assert_eq!(label, "yes", "writer {i} succeeded but its label is gone");
            }
            // Kubernetes too gives up after a few conflicting retries; then nothing was written.
            409 => assert!(label.is_null(), "writer {i} failed but wrote: {body}"),
            other => panic!("writer {i}: unexpected {other}: {body}"),
        }
    }
    assert!(succeeded > 0);
    server.stop().await;
}
