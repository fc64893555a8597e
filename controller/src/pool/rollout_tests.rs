//! Upstream's `Recreate` rollout rules (its e2e `TestWarmPoolRolloutSwitchTemplate` and
//! `TestWarmPoolRolloutMetadataUpdate`), on the pure pool plan.

use std::collections::BTreeSet;
use std::time::Duration;

use kube::ResourceExt;
use rouse_shared::api::WarmPoolUpdateStrategyType;
use rouse_shared::api::keys::SANDBOX_TEMPLATE_REF;

use super::{PoolObserved, plan};
use crate::extensions::fixtures::{member, now, pool, template};
use crate::template::template_hash;

const STUCK: Duration = Duration::from_secs(300);

fn strategy(
    mut p: rouse_shared::api::SandboxWarmPool,
    type_: WarmPoolUpdateStrategyType,
) -> rouse_shared::api::SandboxWarmPool {
    p.spec.update_strategy = Some(rouse_shared::api::WarmPoolUpdateStrategy { type_ });
    p
}

/// A pool switched to another template with an identical
/// spec replaces its members; a labels-only change of its template does not.
#[test]
fn recreate_rolls_on_a_template_switch_not_on_metadata() {
    let a = template("template-a");
    let mut b = template("template-b");
    b.spec = a.spec.clone();
    let recreate = |template: &str| {
        strategy(
            pool("runners", template, 1),
            WarmPoolUpdateStrategyType::Recreate,
        )
    };
    let old = recreate("template-a");
    let members = vec![member(&old, &a, "runners-a", 60, true)];
    assert_eq!(
        members[0].annotations().get(SANDBOX_TEMPLATE_REF),
        Some(&"template-a".to_owned()),
        "members name their template (upstream reads the annotation)"
    );
    let deletes: BTreeSet<String> = BTreeSet::new();
    let observe = |template| PoolObserved {
        template: Some(template),
        members: &members,
        creates_in_flight: 0,
        deletes_in_flight: &deletes,
    };

    let switched = plan(&recreate("template-b"), &observe(&b), STUCK, now());
    let deleted: Vec<&str> = switched.delete.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(deleted, ["runners-a"], "switched to template-b");
    assert_eq!(switched.create, 1, "replaced from template-b");

    let mut relabelled = a.clone();
    relabelled
        .spec
        .pod_template
        .metadata
        .labels
        .insert("new-label".into(), "new-value".into());
    assert_ne!(template_hash(&relabelled.spec), template_hash(&a.spec));
    let same = plan(&old, &observe(&relabelled), STUCK, now());
    assert!(same.delete.is_empty(), "labels only: {:?}", same.delete);
    assert_eq!(same.create, 0);

    let mut respecced = a.clone();
    respecced.spec.pod_template.spec.containers[0].env =
        Some(vec![k8s_openapi::api::core::v1::EnvVar {
            name: "TEST_ENV".into(),
            value: Some("updated".into()),
            value_from: None,
        }]);
    let rolled = plan(&old, &observe(&respecced), STUCK, now());
    assert_eq!(rolled.delete.len(), 1, "a pod spec change rolls");
}
