use std::collections::BTreeMap;

use super::*;

fn deployment(replicas: i32, strategy: serde_json::Value) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": 1},
        "spec": {"replicas": replicas, "strategy": strategy, "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}
    }))
    .unwrap()
}

fn rolling(surge: serde_json::Value, unavailable: serde_json::Value) -> serde_json::Value {
    json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
}

fn set(name: &str, spec: i32, available: i32, created: &str) -> ReplicaSet {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"), "creationTimestamp": created,
            "annotations": {DESIRED_REPLICAS_ANNOTATION: "4", MAX_REPLICAS_ANNOTATION: "5"}},
        "spec": {"replicas": spec, "selector": {"matchLabels": {"app": "web"}}},
        "status": {"replicas": spec, "availableReplicas": available, "readyReplicas": available}
    }))
    .unwrap()
}

#[test]
fn fenceposts_round_surge_up_and_unavailability_down() {
    let default = deployment(1, json!(null));
    assert_eq!((max_surge(&default), max_unavailable(&default)), (1, 0));
    let four = deployment(4, rolling(json!("25%"), json!("25%")));
    assert_eq!((max_surge(&four), max_unavailable(&four)), (1, 1));
    let ten = deployment(10, rolling(json!(3), json!("15%")));
    assert_eq!((max_surge(&ten), max_unavailable(&ten)), (3, 1));
    let zero = deployment(3, rolling(json!(0), json!("10%")));
    assert_eq!(
        (max_surge(&zero), max_unavailable(&zero)),
        (0, 1),
        "both zero: one unavailable"
    );
    let recreate = deployment(3, json!({"type": "Recreate"}));
    assert_eq!((max_surge(&recreate), max_unavailable(&recreate)), (0, 0));
    assert_eq!(
        max_unavailable(&deployment(2, rolling(json!(0), json!(5)))),
        2
    );
}

#[test]
fn the_new_replica_set_grows_within_the_surge() {
    let d = deployment(4, rolling(json!(1), json!(1)));
    let old = set("web-old", 4, 4, "2026-01-01T00:00:00Z");
    let new = set("web-new", 0, 0, "2026-01-02T00:00:00Z");
    assert_eq!(
        new_rs_new_replicas(&d, &[old.clone(), new.clone()], &new),
        1
    );
    let old3 = set("web-old", 3, 3, "2026-01-01T00:00:00Z");
    let new1 = set("web-new", 1, 0, "2026-01-02T00:00:00Z");
    assert_eq!(new_rs_new_replicas(&d, &[old3, new1.clone()], &new1), 2);
    let recreate = deployment(4, json!({"type": "Recreate"}));
    assert_eq!(
        new_rs_new_replicas(&recreate, std::slice::from_ref(&new), &new),
        4
    );
}

#[test]
fn templates_compare_without_the_hash_label_and_hash_stably() {
    let d = deployment(1, json!(null));
    let template = d.spec.clone().unwrap().template;
    let mut labeled = template.clone();
    labeled
        .metadata
        .as_mut()
        .unwrap()
        .labels
        .as_mut()
        .unwrap()
        .insert(POD_TEMPLATE_HASH_LABEL.into(), "abc".into());
    labeled.spec.as_mut().unwrap().volumes = Some(vec![]);
    assert!(equal_ignore_hash(&template, &labeled));
    let mut changed = template.clone();
    changed.spec.as_mut().unwrap().containers[0].image = Some("i:2".into());
    assert!(!equal_ignore_hash(&template, &changed));
    assert_eq!(
        template_hash(&template, None),
        template_hash(&template, None)
    );
    assert_ne!(
        template_hash(&template, None),
        template_hash(&changed, None)
    );
    assert_ne!(
        template_hash(&template, None),
        template_hash(&template, Some(1))
    );
    assert!(template_hash(&template, None)
        .bytes()
        .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)));
}

#[test]
fn scaling_shares_replicas_in_proportion() {
    // 4 replicas, surge 1: two active sets sized for 5 in all; scaled to 8 (+1 surge = 9).
    let mut d = deployment(8, rolling(json!(1), json!(1)));
    d.status = Some(DeploymentStatus {
        replicas: Some(5),
        ..Default::default()
    });
    let old = set("web-old", 3, 3, "2026-01-01T00:00:00Z");
    let new = set("web-new", 2, 0, "2026-01-02T00:00:00Z");
    let to_add = 9 - 5;
    let p_old = get_proportion(&old, &d, to_add, 0);
    let p_new = get_proportion(&new, &d, to_add, p_old);
    assert_eq!((p_old, p_new), (2, 2), "3*9/5 = 5.4 → 5; 2*9/5 = 3.6 → 4");
    let zero = deployment(0, rolling(json!(1), json!(1)));
    assert_eq!(get_proportion(&old, &zero, -5, 0), -3);
}

#[test]
fn the_only_active_or_the_newest_set_takes_the_scale() {
    let old = set("web-old", 0, 0, "2026-01-01T00:00:00Z");
    let older = set("web-older", 0, 0, "2025-01-01T00:00:00Z");
    let new = set("web-new", 2, 2, "2026-01-02T00:00:00Z");
    let only = find_active_or_latest(Some(&new), std::slice::from_ref(&old)).unwrap();
    assert_eq!(only.name_any(), "web-new");
    let newest = find_active_or_latest(None, &[older.clone(), old.clone()]).unwrap();
    assert_eq!(newest.name_any(), "web-old");
    let active_old = set("web-old", 1, 1, "2026-01-01T00:00:00Z");
    assert!(find_active_or_latest(Some(&new), &[active_old]).is_none());
}

#[test]
fn revisions_grow_and_remember_their_history() {
    let mut d = deployment(2, json!(null));
    d.metadata.annotations = Some(BTreeMap::from([
        ("team".to_string(), "db".to_string()),
        (REVISION_ANNOTATION.to_string(), "7".to_string()),
    ]));
    let mut new = set("web-new", 0, 0, "2026-01-02T00:00:00Z");
    new.metadata.annotations = None;
    assert!(set_new_rs_annotations(&d, &mut new, 1, false));
    let annotations = new.annotations();
    assert_eq!(annotations[REVISION_ANNOTATION], "1");
    assert_eq!(annotations["team"], "db");
    assert_eq!(annotations[DESIRED_REPLICAS_ANNOTATION], "2");
    assert_eq!(annotations[MAX_REPLICAS_ANNOTATION], "3");
    assert!(!set_new_rs_annotations(&d, &mut new, 1, true));
    // Rolled back to: revision 3, history "1".
    assert!(set_new_rs_annotations(&d, &mut new, 3, true));
    assert_eq!(new.annotations()[REVISION_ANNOTATION], "3");
    assert_eq!(new.annotations()[REVISION_HISTORY_ANNOTATION], "1");
}

#[test]
fn status_reports_counts_and_conditions() {
    let d = deployment(4, rolling(json!(1), json!(1)));
    let old = set("web-old", 1, 1, "2026-01-01T00:00:00Z");
    let new = set("web-new", 4, 2, "2026-01-02T00:00:00Z");
    let status = sync_rollout_status(&[old.clone(), new.clone()], Some(&new), &d);
    assert_eq!(
        (
            status.replicas,
            status.updated_replicas,
            status.ready_replicas,
            status.available_replicas,
            status.unavailable_replicas,
            status.observed_generation
        ),
        (Some(5), Some(4), Some(3), Some(3), Some(2), Some(1))
    );
    let available = get_condition(Some(&status), "Available").unwrap();
    assert_eq!(
        (available.status.as_str(), available.reason.as_deref()),
        ("True", Some(MINIMUM_REPLICAS_AVAILABLE)),
        "3 available >= 4 - 1"
    );
    let progressing = get_condition(Some(&status), "Progressing").unwrap();
    assert_eq!(progressing.reason.as_deref(), Some(REPLICA_SET_UPDATED));

    let done = set("web-new", 4, 4, "2026-01-02T00:00:00Z");
    let status = sync_rollout_status(std::slice::from_ref(&done), Some(&done), &d);
    let progressing = get_condition(Some(&status), "Progressing").unwrap();
    assert_eq!(progressing.reason.as_deref(), Some(NEW_RS_AVAILABLE));
    assert!(deployment_complete(&d, Some(&status)));

    let down = set("web-new", 4, 1, "2026-01-02T00:00:00Z");
    let status = calculate_status(&[down], None, &d);
    let available = get_condition(Some(&status), "Available").unwrap();
    assert_eq!(available.status, "False");
}

#[test]
fn status_patches_drop_zero_counters() {
    let status = DeploymentStatus {
        observed_generation: Some(3),
        replicas: Some(0),
        ..Default::default()
    };
    let patch = status_patch(&status);
    assert_eq!(patch["status"]["observedGeneration"], 3);
    assert!(patch["status"]["replicas"].is_null());
    assert!(patch["status"]["conditions"].is_null());
}
