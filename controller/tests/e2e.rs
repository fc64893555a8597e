//! The controller scenarios against a real cluster, run only when `ROUSE_E2E_KUBECONFIG`
//! names a kubeconfig (e.g. of a kind cluster); see docs/testing.md.
//!
//! Each test makes its own namespace `rouse-e2e-<test>-<random>` and deletes it afterwards.
//! The CRDs are installed if missing.

mod scenarios;

use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use scenarios::{Env, lifecycle, wait_for};

/// The environment, or `None` (with a message) when no cluster is configured.
async fn cluster(test: &str) -> Option<Env> {
    let Some(path) = std::env::var_os("ROUSE_E2E_KUBECONFIG") else {
        eprintln!("skipping {test}: set ROUSE_E2E_KUBECONFIG to a kubeconfig to run it");
        return None;
    };
    let kubeconfig = Kubeconfig::read_from(&path).expect("read ROUSE_E2E_KUBECONFIG");
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .expect("kubeconfig");
    let client = Client::try_from(config).expect("client");
    install_crds(&client).await;
    let suffix = format!("{:08x}", rand_suffix());
    let namespace = format!("rouse-e2e-{}-{suffix}", test.replace('_', "-"))
        .chars()
        .take(63)
        .collect::<String>();
    let ns = Namespace {
        metadata: kube::api::ObjectMeta {
            name: Some(namespace.clone()),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .expect("create namespace");
    Some(Env {
        client,
        namespace,
        image: std::env::var("ROUSE_E2E_IMAGE").unwrap_or_else(|_| "busybox:1.36".to_owned()),
        timeout: Duration::from_secs(180),
    })
}

fn rand_suffix() -> u32 {
    let mut bytes = [0u8; 4];
    getrandom::fill(&mut bytes).expect("random bytes");
    u32::from_le_bytes(bytes)
}

async fn install_crds(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    for crd in rouse_shared::crds::all() {
        match api.create(&PostParams::default(), &crd).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.is_already_exists() => {}
            Err(e) => panic!("install CRD: {e}"),
        }
        let name = crd.metadata.name.clone().expect("crd name");
        wait_for(
            Duration::from_secs(60),
            &format!("CRD {name} established"),
            || async {
                let crd = api.get(&name).await.map_err(|e| e.to_string())?;
                let established = crd
                    .status
                    .and_then(|s| s.conditions)
                    .unwrap_or_default()
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True");
                if established {
                    Ok(())
                } else {
                    Err("not established".to_owned())
                }
            },
        )
        .await;
    }
}

async fn cleanup(env: &Env) {
    let _ = Api::<Namespace>::all(env.client.clone())
        .delete(&env.namespace, &DeleteParams::default())
        .await;
}

async fn restart_five(env: &Env) {
    lifecycle::restart_converges(env, 5).await;
}

macro_rules! e2e {
    ($name:ident, $scenario:expr) => {
        #[tokio::test]
        async fn $name() {
            let Some(env) = cluster(stringify!($name)).await else {
                return;
            };
            $scenario(&env).await;
            cleanup(&env).await;
        }
    };
}

e2e!(e2e_create_ready, lifecycle::create_ready);
e2e!(e2e_suspend_resume, lifecycle::suspend_resume);
e2e!(e2e_expiry, lifecycle::expiry);
e2e!(e2e_idle_suspend, lifecycle::idle_suspend);
e2e!(e2e_restart_converges, restart_five);
e2e!(e2e_leader_election, lifecycle::leader_election);
