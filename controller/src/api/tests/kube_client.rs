//! The Kubernetes paths (`/apis/{group}/{version}/...`) with the real kube-rs client: a
//! Kubernetes client pointed at Rouse works unchanged.

use futures::{StreamExt, TryStreamExt};
use kube::api::{
    Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use rouse_shared::api::{OperatingMode, Sandbox, SandboxWarmPool};
use serde_json::json;

use super::{DEADLINE, Server, TOKEN, sandbox};

fn client(server: &Server) -> kube::Client {
    let url = format!("http://{}", server.client.addr())
        .parse()
        .expect("url");
    let mut config = kube::Config::new(url);
    config.auth_info = serde_json::from_value(json!({"token": TOKEN})).expect("auth info");
    kube::Client::try_from(config).expect("client")
}

#[tokio::test]
async fn kube_rs_client_works_unchanged() {
    let server = Server::start().await;
    let sandboxes: Api<Sandbox> = Api::namespaced(client(&server), "default");
    let mut object: Sandbox = serde_json::from_value(sandbox("web")).expect("sandbox");
    object.metadata.labels = Some([("app".to_owned(), "web".to_owned())].into());
    let created = sandboxes
        .create(&PostParams::default(), &object)
        .await
        .expect("create");
    let version = created.metadata.resource_version.clone().expect("rv");

    let mut events = sandboxes
        .watch(&WatchParams::default().labels("app=web"), &version)
        .await
        .expect("watch")
        .boxed();
    let got = sandboxes.get("web").await.expect("get");
    assert_eq!(got.metadata.uid, created.metadata.uid);
    let list = sandboxes
        .list(&ListParams::default().labels("app=web"))
        .await
        .expect("list");
    assert_eq!(list.items.len(), 1);

    let patched = sandboxes
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"operatingMode": "Suspended"}})),
        )
        .await
        .expect("patch");
    assert_eq!(patched.spec.operating_mode, Some(OperatingMode::Suspended));
    let event = tokio::time::timeout(DEADLINE, events.try_next())
        .await
        .expect("event in time")
        .expect("event")
        .expect("stream open");
    match event {
        WatchEvent::Modified(s) => {
            assert_eq!(s.spec.operating_mode, Some(OperatingMode::Suspended));
        }
        other => panic!("expected MODIFIED, got {other:?}"),
    }

    let missing = sandboxes.get("nope").await.expect_err("404");
    match missing {
        kube::Error::Api(status) => {
            assert_eq!(status.code, 404);
            assert_eq!(status.reason, "NotFound");
        }
        other => panic!("expected an API error, got {other:?}"),
    }
    sandboxes
        .delete("web", &DeleteParams::default())
        .await
        .expect("delete");

    // The group must be the kind's: warm pools live under extensions.agents.x-k8s.io.
    let pools: Api<SandboxWarmPool> = Api::namespaced(client(&server), "default");
    assert!(
        pools
            .list(&ListParams::default())
            .await
            .expect("list")
            .items
            .is_empty()
    );
    let (status, _) = server
        .client
        .get("/apis/agents.x-k8s.io/v1beta1/namespaces/default/sandboxwarmpools")
        .await;
    assert_eq!(status.as_u16(), 404);
    server.shutdown.cancel();
    drop(events);
    server.stop().await;
}
