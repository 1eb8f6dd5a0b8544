//! Unit tests of the forget-cluster command's decisions: the dry run from
//! the surviving cluster's status, the refusals, the request and its phases.

use serde_json::json;

use super::*;
use crate::cli::fixtures::*;

const C: &str = "10.0.3.1";

/// Cluster a's object with c's member down, every other member up.
fn c_lost_in_a() -> MongoDB {
    let locals = json!([local(0, A0, "PRIMARY", 0), local(1, A1, "SECONDARY", 0)]);
    mongodb(status(3, 200, &[C0], locals, healthy()))
}

#[test]
fn the_dry_run_names_the_members_removed_and_kept() {
    let plan = dry_run("a", &c_lost_in_a(), C).unwrap();
    assert_eq!(plan.removing, [format!("{C0} ((not reachable/healthy))")]);
    assert_eq!(plan.keeping.len(), 4);
    let text = plan.to_string();
    assert!(
        text.starts_with("cluster a would forget cluster 10.0.3.1"),
        "{text}"
    );
    assert!(text.contains(&format!("\n  remove: {C0}")), "{text}");
    assert!(
        text.contains(&format!("\n  keep:   {A0} (PRIMARY), {A1}")),
        "{text}"
    );
    assert_eq!(
        request(C, " fire, ticket 4712 "),
        "10.0.3.1 fire, ticket 4712"
    );
    let patch = annotation_patch("10.0.3.1 fire");
    assert_eq!(
        patch["metadata"]["annotations"]["middleware.fedstate.io/forget-cluster"],
        "10.0.3.1 fire"
    );
}

#[test]
fn a_cluster_whose_members_are_up_is_not_forgotten() {
    let locals = json!([local(0, A0, "PRIMARY", 0)]);
    let all_up = mongodb(status(3, 10, &[], locals, healthy()));
    let refusal = dry_run("a", &all_up, C).unwrap_err();
    assert!(matches!(refusal, Refusal::ClusterAnswers { .. }));
    assert!(refusal.to_string().contains(C0), "{refusal}");
}

#[test]
fn a_lost_majority_an_unknown_vip_or_a_request_under_way_are_not_asked() {
    let locals = json!([local(0, A0, "SECONDARY", 0)]);
    let lost = mongodb(status(3, 200, &[B0, B1, C0], locals, majority_lost()));
    let refusal = dry_run("a", &lost, C).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::MajorityLost {
            context: "a".into()
        }
    );
    assert!(refusal.to_string().contains("kubectl mongodb recover"));

    let refusal = dry_run("a", &c_lost_in_a(), "10.0.9.9").unwrap_err();
    assert!(
        refusal
            .to_string()
            .contains("the set's members are at 10.0.1.1, 10.0.2.1, 10.0.3.1"),
        "{refusal}"
    );

    let mut under_way = c_lost_in_a();
    under_way.status.as_mut().unwrap().forget_cluster = Some(
        serde_json::from_value(json!({
            "request": "10.0.3.1 fire", "cluster": C, "phase": "Removing",
            "message": "removing", "members": [C0], "since": at(210),
        }))
        .unwrap(),
    );
    assert!(matches!(
        dry_run("a", &under_way, C),
        Err(Refusal::OtherInProgress { .. })
    ));
    let followed = progress(&under_way, "10.0.3.1 fire").unwrap();
    assert_eq!(phase_line(followed), "Removing: removing");
    assert_eq!(progress(&under_way, "10.0.3.1 other"), None);
}
