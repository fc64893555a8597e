//! The NetworkPolicy a template's sandboxes get in Kubernetes mode: the template's own rules,
//! or secure defaults — ingress only from the proxy's pods, egress to the internet but not to
//! private, link-local or metadata ranges (and DNS, without which nothing resolves).

use std::collections::BTreeMap;

use k8s_openapi::api::networking::v1::{
    IPBlock, NetworkPolicy, NetworkPolicyEgressRule, NetworkPolicyIngressRule, NetworkPolicyPeer,
    NetworkPolicyPort, NetworkPolicySpec as KubeNetworkPolicySpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use rouse_shared::api::{NetworkPolicyManagement, SandboxTemplate, controller_ref};

/// Pod label naming the template a sandbox was made from; the managed NetworkPolicy selects
/// on it. Not under a system prefix, because those are stripped from pod labels.
pub const TEMPLATE_POD_LABEL: &str = "rouse.dev/sandbox-template";

/// Suffix of a template's managed NetworkPolicy: `<template>-network-policy`.
pub const NETWORK_POLICY_SUFFIX: &str = "-network-policy";

/// Label of the proxy's pods (deploy/kubernetes/proxy.yaml); the only default ingress peer.
const PROXY_POD_LABEL: (&str, &str) = ("app.kubernetes.io/name", "rouse-proxy");

/// Ranges sandboxes may not reach by default: private (RFC 1918, ULA), link-local (which
/// holds the cloud metadata endpoint 169.254.169.254) and the IPv6 link-local range.
const DENIED_V4: [&str; 4] = [
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
];
const DENIED_V6: [&str; 2] = ["fc00::/7", "fe80::/10"];

/// The managed NetworkPolicy of a template, owned by it; `None` with `Unmanaged`.
pub fn network_policy(template: &SandboxTemplate) -> Option<NetworkPolicy> {
    if template.spec.network_policy_management.unwrap_or_default()
        == NetworkPolicyManagement::Unmanaged
    {
        return None;
    }
    let name = template.name_any();
    let (ingress, egress) = match &template.spec.network_policy {
        Some(rules) => (rules.ingress.clone(), rules.egress.clone()),
        None => (default_ingress(), default_egress()),
    };
    Some(NetworkPolicy {
        metadata: ObjectMeta {
            name: Some(format!("{name}{NETWORK_POLICY_SUFFIX}")),
            namespace: template.namespace(),
            owner_references: controller_ref(template).map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(KubeNetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(TEMPLATE_POD_LABEL.to_owned(), name)])),
                ..LabelSelector::default()
            }),
            policy_types: Some(vec!["Ingress".to_owned(), "Egress".to_owned()]),
            ingress: Some(ingress),
            egress: Some(egress),
        }),
    })
}

fn default_ingress() -> Vec<NetworkPolicyIngressRule> {
    vec![NetworkPolicyIngressRule {
        from: Some(vec![NetworkPolicyPeer {
            // Any namespace: the proxy runs in its own.
            namespace_selector: Some(LabelSelector::default()),
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    PROXY_POD_LABEL.0.to_owned(),
                    PROXY_POD_LABEL.1.to_owned(),
                )])),
                ..LabelSelector::default()
            }),
            ip_block: None,
        }]),
        ports: None,
    }]
}

fn default_egress() -> Vec<NetworkPolicyEgressRule> {
    let block = |cidr: &str, except: &[&str]| NetworkPolicyPeer {
        ip_block: Some(IPBlock {
            cidr: cidr.to_owned(),
            except: Some(except.iter().map(|s| (*s).to_owned()).collect()),
        }),
        ..NetworkPolicyPeer::default()
    };
    let dns = |protocol: &str| NetworkPolicyPort {
        port: Some(IntOrString::Int(53)),
        protocol: Some(protocol.to_owned()),
        end_port: None,
    };
    vec![
        NetworkPolicyEgressRule {
            to: Some(vec![
                block("0.0.0.0/0", &DENIED_V4),
                block("::/0", &DENIED_V6),
            ]),
            ports: None,
        },
        // Cluster DNS lives at a private address; without it no name resolves.
        NetworkPolicyEgressRule {
            to: Some(vec![NetworkPolicyPeer {
                namespace_selector: Some(LabelSelector::default()),
                pod_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        "k8s-app".to_owned(),
                        "kube-dns".to_owned(),
                    )])),
                    ..LabelSelector::default()
                }),
                ip_block: None,
            }]),
            ports: Some(vec![dns("UDP"), dns("TCP")]),
        },
    ]
}
