//! Hostile and malformed requests, in process (issue 24): patches that would build huge
//! documents are refused before they are applied, malformed `DeleteOptions` are a 400 that
//! deletes nothing, and list `resourceVersion`/`resourceVersionMatch` follow kube-apiserver.

use serde_json::{Value, json};

use super::{SANDBOXES, Server, assert_status, sandbox};

const JSON_PATCH: &str = "application/json-patch+json";
const MERGE_PATCH: &str = "application/merge-patch+json";
const APPLY: &str = "application/apply-patch+yaml";

/// The amplification of the issue, scaled down so that it stays harmless without the bound:
/// one `add` of a 1,000-character map, then `copies` copies of the map into itself, each
/// doubling what the document holds (2^12 KB = 4 MB for 12).
fn doubling_patch(copies: usize) -> Vec<u8> {
    let mut ops = vec![json!({
        "op": "add", "path": "/metadata/annotations", "value": {"a": "x".repeat(1000)},
    })];
    for k in 0..copies {
        ops.push(json!({
            "op": "copy", "from": "/metadata/annotations", "path": format!("/metadata/annotations/k{k}"),
        }));
    }
    serde_json::to_vec(&ops).expect("json")
}

fn message(body: &Value) -> &str {
    body["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_doubling_json_patch_is_refused_before_it_is_applied() {
    let server = Server::embedded().await;
    let c = &server.client;
    let web = format!("{SANDBOXES}/web");
    let (code, created) = c.post(SANDBOXES, &sandbox("web")).await;
    assert_eq!(code, 201, "{created}");
    for path in [web.clone(), format!("{web}/status")] {
        let got = c
            .raw("PATCH", &path, Some(JSON_PATCH), doubling_patch(12))
            .await;
        assert_status(&got, 422, "Invalid");
        // The copy bound answered, not the validation of a document already built.
        assert!(
            message(&got.1).contains("copy operations would add more than"),
            "{path}: {}",
            got.1
        );
    }
    // The scale subresource applies JSON patches too.
    let pools = "/v1/namespaces/default/sandboxwarmpools";
    let pool = json!({
        "apiVersion": "extensions.agents.x-k8s.io/v1beta1", "kind": "SandboxWarmPool",
        "metadata": {"name": "p"}, "spec": {"replicas": 1, "sandboxTemplateRef": {"name": "t"}},
    });
    assert_eq!(c.post(pools, &pool).await.0, 201);
    let got = c
        .raw(
            "PATCH",
            &format!("{pools}/p/scale"),
            Some(JSON_PATCH),
            doubling_patch(12),
        )
        .await;
    assert_status(&got, 422, "Invalid");
    assert!(
        message(&got.1).contains("copy operations would add more than"),
        "{}",
        got.1
    );
    // Nothing was written, and small copies still work.
    let (_, now) = c.get(&web).await;
    assert_eq!(
        now["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let small = br#"[{"op":"add","path":"/metadata/labels","value":{"a":"1"}},
                    {"op":"copy","from":"/metadata/labels/a","path":"/metadata/labels/b"}]"#;
    let (code, patched) = c.raw("PATCH", &web, Some(JSON_PATCH), small.to_vec()).await;
    assert_eq!(code, 200, "{patched}");
    assert_eq!(patched["metadata"]["labels"], json!({"a": "1", "b": "1"}));
    server.stop().await;
}

#[tokio::test]
async fn a_json_patch_with_too_many_operations_is_413() {
    let server = Server::embedded().await;
    let c = &server.client;
    assert_eq!(c.post(SANDBOXES, &sandbox("web")).await.0, 201);
    let op = json!({"op": "test", "path": "/kind", "value": "Sandbox"});
    let ops = Value::Array(vec![op; 10_001]);
    let got = c
        .raw(
            "PATCH",
            &format!("{SANDBOXES}/web"),
            Some(JSON_PATCH),
            serde_json::to_vec(&ops).expect("json"),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
    assert_eq!(
        message(&got.1),
        "The allowed maximum operations in a JSON patch is 10000, got 10001"
    );
    server.stop().await;
}

/// A sandbox whose container has one argument of `bytes` characters.
fn with_args(name: &str, bytes: usize) -> Value {
    let mut object = sandbox(name);
    object["spec"]["podTemplate"]["spec"]["containers"][0]["args"] = json!(["a".repeat(bytes)]);
    object
}

/// An init container with one argument of `bytes` characters.
fn init_container(bytes: usize) -> Value {
    json!([{"name": "init", "image": "busybox", "args": ["i".repeat(bytes)]}])
}

#[tokio::test]
async fn no_write_can_leave_an_object_past_the_object_limit() {
    const LIMIT: usize = 300_000;
    let server = Server::embedded_with(|c| c.max_object_bytes = LIMIT).await;
    let c = &server.client;
    let web = format!("{SANDBOXES}/web");
    let too_large = c.post(SANDBOXES, &with_args("big", 2 * LIMIT)).await;
    assert_status(&too_large, 413, "RequestEntityTooLarge");
    assert!(
        message(&too_large.1).contains("300000 bytes"),
        "{}",
        too_large.1
    );
    let (code, created) = c.post(SANDBOXES, &with_args("web", 200_000)).await;
    assert_eq!(code, 201, "{created}");
    // Each patch is under the body limit; the object it leaves is not under the object limit.
    let more =
        json!({"spec": {"podTemplate": {"spec": {"initContainers": init_container(200_000)}}}});
    assert_status(
        &c.patch(&web, MERGE_PATCH, &more).await,
        413,
        "RequestEntityTooLarge",
    );
    let ops = json!([{"op": "add", "path": "/spec/podTemplate/spec/initContainers",
                      "value": init_container(200_000)}]);
    assert_status(
        &c.patch(&web, JSON_PATCH, &ops).await,
        413,
        "RequestEntityTooLarge",
    );
    assert_status(
        &c.patch(
            &format!("{web}/status"),
            MERGE_PATCH,
            &json!({"status": {"podIPs": ["x".repeat(200_000)]}}),
        )
        .await,
        413,
        "RequestEntityTooLarge",
    );
    let mut applied = with_args("web", 200_000);
    applied["spec"]["podTemplate"]["spec"]["initContainers"] = init_container(200_000);
    let got = c
        .raw(
            "PATCH",
            &format!("{web}?fieldManager=alice"),
            Some(APPLY),
            serde_json::to_vec(&applied).expect("json"),
        )
        .await;
    assert_status(&got, 413, "RequestEntityTooLarge");
    let mut replaced = with_args("web", 200_000);
    replaced["spec"]["podTemplate"]["spec"]["initContainers"] = init_container(200_000);
    assert_status(&c.put(&web, &replaced).await, 413, "RequestEntityTooLarge");
    // What is stored did not change, and a write that fits still works.
    let (_, now) = c.get(&web).await;
    assert_eq!(
        now["metadata"]["resourceVersion"],
        created["metadata"]["resourceVersion"]
    );
    let small = json!({"spec": {"podTemplate": {"spec": {"initContainers": init_container(10)}}}});
    assert_eq!(c.patch(&web, MERGE_PATCH, &small).await.0, 200);
    server.stop().await;
}

#[tokio::test]
async fn an_apply_whose_yaml_aliases_expand_past_the_limits_is_refused() {
    let server = Server::embedded().await;
    let c = &server.client;
    // 100 KB anchored once and aliased 40 times: 4 MB after expansion, from a 100 KB body.
    let mut yaml = format!(
        "apiVersion: agents.x-k8s.io/v1beta1\nkind: Sandbox\nmetadata:\n  name: web\n  annotations:\n    a0: &big \"{}\"\n",
        "x".repeat(100_000)
    );
    for i in 1..=40 {
        yaml.push_str(&format!("    a{i}: *big\n"));
    }
    yaml.push_str("spec:\n  podTemplate:\n    spec:\n      containers: [{name: app, image: x}]\n");
    let got = c
        .raw(
            "PATCH",
            &format!("{SANDBOXES}/web?fieldManager=alice"),
            Some(APPLY),
            yaml.into_bytes(),
        )
        .await;
    assert!(
        matches!(got.0.as_u16(), 400 | 413),
        "an alias bomb is refused: {}",
        got.1
    );
    assert!(
        message(&got.1).contains("limit") || message(&got.1).contains("larger than"),
        "{}",
        got.1
    );
    assert_status(&c.get(&format!("{SANDBOXES}/web")).await, 404, "NotFound");
    server.stop().await;
}

#[tokio::test]
async fn malformed_delete_options_are_400_and_delete_nothing() {
    let server = Server::embedded().await;
    let c = &server.client;
    let web = format!("{SANDBOXES}/web");
    assert_eq!(c.post(SANDBOXES, &sandbox("web")).await.0, 201);
    let cases = [
        (
            json!({"preconditions": {"resourceVersion": 1}}),
            "preconditions.resourceVersion",
        ),
        (json!({"preconditions": {"uid": 5}}), "preconditions.uid"),
        (json!({"preconditions": "x"}), "preconditions"),
        (json!({"propagationPolicy": 3}), "propagationPolicy"),
        (json!({"gracePeriodSeconds": "soon"}), "gracePeriodSeconds"),
        (json!({"dryRun": "All"}), "dryRun"),
        (json!({"orphanDependents": "yes"}), "orphanDependents"),
    ];
    for (options, field) in cases {
        let body = serde_json::to_vec(&options).expect("json");
        let got = c.raw("DELETE", &web, Some("application/json"), body).await;
        assert_status(&got, 400, "BadRequest");
        assert!(
            message(&got.1).contains(field),
            "{options} names {field}: {}",
            got.1
        );
        assert_eq!(c.get(&web).await.0, 200, "{options} deleted nothing");
    }
    // A body that is JSON but not an object, too.
    let got = c
        .raw("DELETE", &web, Some("application/json"), b"\"x\"".to_vec())
        .await;
    assert_status(&got, 400, "BadRequest");
    // orphanDependents and propagationPolicy together are refused, as kube-apiserver does.
    let both = json!({"orphanDependents": true, "propagationPolicy": "Background"});
    let got = c
        .raw(
            "DELETE",
            &web,
            Some("application/json"),
            serde_json::to_vec(&both).expect("json"),
        )
        .await;
    assert_status(&got, 422, "Invalid");
    assert_eq!(c.get(&web).await.0, 200);
    // Well-formed options still delete.
    let (_, current) = c.get(&web).await;
    let right = json!({"preconditions": {"resourceVersion": current["metadata"]["resourceVersion"],
                                         "uid": current["metadata"]["uid"]},
                       "orphanDependents": false, "gracePeriodSeconds": 0});
    let got = c
        .raw(
            "DELETE",
            &web,
            Some("application/json"),
            serde_json::to_vec(&right).expect("json"),
        )
        .await;
    assert_eq!(got.0, 200, "{}", got.1);
    assert_status(&c.get(&web).await, 404, "NotFound");
    server.stop().await;
}

fn list_version(list: &Value) -> u64 {
    list["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("a list version: {list}"))
}

#[tokio::test]
async fn list_resource_version_semantics_follow_kube_apiserver() {
    let server = Server::embedded().await;
    let c = &server.client;
    assert_eq!(c.post(SANDBOXES, &sandbox("a")).await.0, 201);
    assert_eq!(c.post(SANDBOXES, &sandbox("b")).await.0, 201);
    let (_, list) = c.get(SANDBOXES).await;
    let current = list_version(&list);
    let at = |query: String| format!("{SANDBOXES}?{query}");

    // Exact: the current version is served as itself; an older one is gone (410).
    let (code, exact) = c
        .get(&at(format!(
            "resourceVersion={current}&resourceVersionMatch=Exact"
        )))
        .await;
    assert_eq!(code, 200, "{exact}");
    assert_eq!(list_version(&exact), current);
    assert_eq!(exact["items"].as_array().map(Vec::len), Some(2));
    let old = c
        .get(&at("resourceVersion=1&resourceVersionMatch=Exact".into()))
        .await;
    assert_status(&old, 410, "Expired");
    assert_eq!(
        message(&old.1),
        "The resourceVersion for the provided list is too old."
    );
    // The legacy form: a version with a limit and no match is Exact.
    let legacy = c.get(&at("resourceVersion=1&limit=1".into())).await;
    assert_status(&legacy, 410, "Expired");
    // Not older than: an older version gets the current list.
    let (code, newer) = c
        .get(&at(
            "resourceVersion=1&resourceVersionMatch=NotOlderThan".into()
        ))
        .await;
    assert_eq!(code, 200, "{newer}");
    assert_eq!(list_version(&newer), current);
    // Exact in the future: 504 at once, as etcd answers a future revision.
    let future = current + 1_000;
    let got = c
        .get(&at(format!(
            "resourceVersion={future}&resourceVersionMatch=Exact"
        )))
        .await;
    assert_status(&got, 504, "Timeout");
    assert_eq!(
        got.1["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    // Not older than a version never reached: waited for, then 504 with retry advice.
    for query in [
        format!("resourceVersion={future}&resourceVersionMatch=NotOlderThan"),
        format!("resourceVersion={future}"),
    ] {
        let got = c.get(&at(query.clone())).await;
        assert_status(&got, 504, "Timeout");
        assert_eq!(
            message(&got.1),
            format!("Too large resource version: {future}, current: {current}"),
            "{query}"
        );
        assert_eq!(got.1["details"]["retryAfterSeconds"], 1, "{query}");
    }
    // Not older than the next version: the list waits for it and answers once it exists.
    let next = current + 1;
    let waiting = {
        let client = super::client::Client::new(c.addr(), Some(super::TOKEN));
        let path = at(format!(
            "resourceVersion={next}&resourceVersionMatch=NotOlderThan"
        ));
        tokio::spawn(async move { client.get(&path).await })
    };
    // The write comes once the list has been sent; the list sees it either way.
    assert_eq!(c.post(SANDBOXES, &sandbox("c")).await.0, 201);
    let (code, waited) = waiting.await.expect("list task");
    assert_eq!(code, 200, "{waited}");
    assert!(list_version(&waited) >= next, "{waited}");
    assert_eq!(
        waited["items"].as_array().map(Vec::len),
        Some(3),
        "{waited}"
    );

    // The options kube-apiserver refuses (422 on ListOptions).
    for (query, field) in [
        ("resourceVersionMatch=Exact", "resourceVersionMatch"),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            "resourceVersionMatch",
        ),
        (
            "resourceVersion=5&resourceVersionMatch=Newest",
            "resourceVersionMatch",
        ),
    ] {
        let got = c.get(&at(query.into())).await;
        assert_status(&got, 422, "Invalid");
        assert!(message(&got.1).contains(field), "{query}: {}", got.1);
    }
    server.stop().await;
}

#[tokio::test]
async fn writes_past_the_in_flight_bound_wait_then_get_429() {
    use tokio::io::AsyncWriteExt;
    let server = Server::embedded_with(|c| {
        c.max_writes_in_flight = 1;
        c.write_wait = std::time::Duration::from_millis(200);
    })
    .await;
    let c = &server.client;
    let web = format!("{SANDBOXES}/web");
    assert_eq!(c.post(SANDBOXES, &sandbox("web")).await.0, 201);
    // A write whose body never completes holds the only turn while the server reads it.
    let mut slow = tokio::net::TcpStream::connect(c.addr())
        .await
        .expect("connect");
    let head = format!(
        "PATCH {web} HTTP/1.1\r\nhost: localhost\r\nauthorization: Bearer {}\r\ncontent-type: application/merge-patch+json\r\ncontent-length: 100\r\n\r\n{{",
        super::TOKEN
    );
    slow.write_all(head.as_bytes())
        .await
        .expect("write the head");
    // Another write waits for the turn, then is turned away with retry advice.
    let until = tokio::time::Instant::now() + super::DEADLINE;
    let refused = loop {
        let got = c.patch(&web, MERGE_PATCH, &json!({})).await;
        if got.0 == 429 {
            break got;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "no 429 while a write holds the only turn; last: {got:?}"
        );
    };
    assert_status(&refused, 429, "TooManyRequests");
    assert_eq!(refused.1["details"]["retryAfterSeconds"], 1);
    // Reads do not need a turn.
    assert_eq!(c.get(&web).await.0, 200);
    // The slow client leaves: its turn is free again.
    drop(slow);
    let until = tokio::time::Instant::now() + super::DEADLINE;
    loop {
        let got = c.patch(&web, MERGE_PATCH, &json!({})).await;
        if got.0 == 200 {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "the turn was not freed; last: {got:?}"
        );
    }
    server.stop().await;
}
