use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::ResourceExt;
use serde_json::{Value, json};

use super::plan::{ClaimDecision, VolumeDecision, plan_claim, plan_volume};
use super::*;

fn config() -> ProvisionerConfig {
    ProvisionerConfig::new("node-1", "/var/lib/volumes")
}

fn class(mode: &str, provisioner: &str) -> StorageClass {
    serde_json::from_value(json!({
        "metadata": {"name": "rouse-local"},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }))
    .expect("a StorageClass")
}

/// A claim of class `rouse-local` requesting 1Gi, changed by `patch` (a JSON merge patch).
fn claim(patch: Value) -> PersistentVolumeClaim {
    let mut value = json!({
        "metadata": {"name": "data", "namespace": "ns", "uid": "u-1"},
        "spec": {
            "storageClassName": "rouse-local",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
        },
    });
    json_patch::merge(&mut value, &patch);
    serde_json::from_value(value).expect("a PVC")
}

fn decision_name(decision: &Result<ClaimDecision>) -> String {
    match decision {
        Ok(ClaimDecision::Skip(reason)) => format!("skip: {reason}"),
        Ok(ClaimDecision::Retry(reason)) => format!("retry: {reason}"),
        Ok(ClaimDecision::Provision(pv)) => format!("provision {}", pv.name_any()),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn claims_are_provisioned_only_when_ours_and_ready() {
    let wffc = class("WaitForFirstConsumer", PROVISIONER);
    let immediate = class("Immediate", PROVISIONER);
    let other = class("Immediate", "ebs.csi.aws.com");
    let selected = json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: "node-1"}}});
    struct Case {
        name: &'static str,
        claim: PersistentVolumeClaim,
        class: Option<StorageClass>,
        want: &'static str,
    }
    let cases = [
        Case {
            name: "immediate",
            claim: claim(json!({})),
            class: Some(immediate.clone()),
            want: "provision pvc-u-1",
        },
        Case {
            name: "wffc without a node",
            claim: claim(json!({})),
            class: Some(wffc.clone()),
            want: "skip: waiting for the scheduler to select a node",
        },
        Case {
            name: "wffc on our node",
            claim: claim(selected.clone()),
            class: Some(wffc.clone()),
            want: "provision pvc-u-1",
        },
        Case {
            name: "wffc on another node",
            claim: claim(
                json!({"metadata": {"annotations": {SELECTED_NODE_ANNOTATION: "node-2"}}}),
            ),
            class: Some(wffc.clone()),
            want: "skip: the scheduler selected another node",
        },
        Case {
            name: "another provisioner",
            claim: claim(json!({})),
            class: Some(other),
            want: "skip: the claim's class has another provisioner",
        },
        Case {
            name: "class missing",
            claim: claim(json!({})),
            class: None,
            want: "retry: the claim's storage class does not exist",
        },
        Case {
            name: "no class",
            claim: claim(json!({"spec": {"storageClassName": null}})),
            class: None,
            want: "skip: the claim has no storage class",
        },
        Case {
            name: "bound",
            claim: claim(json!({"spec": {"volumeName": "pv-a"}})),
            class: Some(immediate.clone()),
            want: "skip: the claim names its volume",
        },
        Case {
            name: "deleting",
            claim: claim(json!({"metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"}})),
            class: Some(immediate.clone()),
            want: "skip: the claim is being deleted",
        },
        Case {
            name: "no request",
            claim: claim(json!({"spec": {"resources": null}})),
            class: Some(immediate.clone()),
            want: "error: claim ns/data requests no storage (spec.resources.requests.storage)",
        },
        Case {
            name: "block",
            claim: claim(json!({"spec": {"volumeMode": "Block"}})),
            class: Some(immediate.clone()),
            want: "error: claim ns/data: volumeMode Block (a directory is a filesystem volume)",
        },
        Case {
            name: "selector",
            claim: claim(json!({"spec": {"selector": {"matchLabels": {"a": "b"}}}})),
            class: Some(immediate),
            want: "error: claim ns/data: a selector or a data source (a new empty directory has neither)",
        },
    ];
    for Case {
        name,
        claim,
        class,
        want,
    } in cases
    {
        let got = decision_name(&plan_claim(&claim, class.as_ref(), &config()));
        assert_eq!(got, want, "{name}");
    }
}

#[test]
fn the_volume_is_a_host_path_bound_to_the_claim_on_our_node() {
    let claim = claim(json!({"spec": {"accessModes": ["ReadWriteOncePod"]}}));
    let class = class("Immediate", PROVISIONER);
    let Ok(ClaimDecision::Provision(volume)) = plan_claim(&claim, Some(&class), &config()) else {
        panic!("no volume");
    };
    let got = serde_json::to_value(&volume).expect("JSON");
    let want = json!({
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": "pvc-u-1",
            "annotations": {PROVISIONED_BY_ANNOTATION: PROVISIONER},
        },
        "spec": {
            "accessModes": ["ReadWriteOncePod"],
            "capacity": {"storage": "1Gi"},
            "claimRef": {
                "apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "namespace": "ns", "name": "data", "uid": "u-1",
            },
            "hostPath": {
                "path": "/var/lib/volumes/pvc-u-1_ns_data",
                "type": "DirectoryOrCreate",
            },
            "nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-1"]},
            ]}]}},
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": "rouse-local",
            "volumeMode": "Filesystem",
        },
    });
    assert_eq!(got, want);
}

#[test]
fn only_our_released_volumes_under_the_base_are_reclaimed() {
    let (path, class) = (
        "/var/lib/volumes/pvc-u-1_ns_data",
        class("Immediate", PROVISIONER),
    );
    let Ok(ClaimDecision::Provision(volume)) =
        plan_claim(&claim(json!({})), Some(&class), &config())
    else {
        panic!("no volume");
    };
    let volume = serde_json::to_value(&*volume).expect("JSON");
    let with = |patch: Value| -> PersistentVolume {
        let mut value = volume.clone();
        json_patch::merge(&mut value, &json!({"status": {"phase": "Released"}}));
        json_patch::merge(&mut value, &patch);
        serde_json::from_value(value).expect("a PV")
    };
    let cases = [
        (
            "released",
            with(json!({})),
            Ok(VolumeDecision::Reclaim(path.into())),
            "",
        ),
        (
            "bound",
            with(json!({"status": {"phase": "Bound"}})),
            Ok(VolumeDecision::Skip("not released")),
            "",
        ),
        (
            "retained",
            with(json!({"spec": {"persistentVolumeReclaimPolicy": "Retain"}})),
            Ok(VolumeDecision::Skip("its reclaim policy keeps it")),
            "",
        ),
        (
            "not ours",
            with(json!({"metadata": {"annotations": {PROVISIONED_BY_ANNOTATION: "other"}}})),
            Ok(VolumeDecision::Skip("not provisioned by us")),
            "",
        ),
        (
            "another node",
            with(
                json!({"spec": {"nodeAffinity": {"required": {"nodeSelectorTerms": [{"matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["node-2"]},
                ]}]}}}}),
            ),
            Ok(VolumeDecision::Skip("a volume of another node")),
            "",
        ),
        (
            "escapes the base",
            with(json!({"spec": {"hostPath": {"path": "/var/lib/volumes/../../etc"}}})),
            Err(()),
            "volume pvc-u-1: path /var/lib/volumes/../../etc is not a directory under /var/lib/volumes",
        ),
        (
            "the base itself",
            with(json!({"spec": {"hostPath": {"path": "/var/lib/volumes"}}})),
            Err(()),
            "volume pvc-u-1: path /var/lib/volumes is not a directory under /var/lib/volumes",
        ),
    ];
    for (name, volume, want, message) in cases {
        match (plan_volume(&volume, &config()), want) {
            (Ok(got), Ok(want)) => assert_eq!(got, want, "{name}"),
            (Err(e), Err(())) => assert_eq!(e.to_string(), message, "{name}"),
            (got, want) => panic!("{name}: got {got:?}, want {want:?}"),
        }
    }
}
