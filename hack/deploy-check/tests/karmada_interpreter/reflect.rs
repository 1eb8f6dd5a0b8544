//! `ReflectStatus`: what each member cluster's status brings back to the
//! control plane.

use super::*;

#[test]
fn reflect_status_keeps_what_the_control_plane_needs_and_drops_local_details() {
    let report = ClusterReport::running("member1");
    let reflected = Interpreter::load(Operation::StatusReflection)
        .call_one("ReflectStatus", &[report.observed_object()]);
    let written = integral_numbers(report.status());
    for field in [
        "state",
        "replset",
        "currentInfo",
        "conditions",
        "primary",
        "configVersion",
        "replicaSetId",
        "readyMembers",
        "observedGeneration",
        // FedState's control plane reads each cluster's currentRevision from the
        // ResourceBinding (pkg/controller/multicloudmongodb/core.go).
        "currentRevision",
        "replicaSetObservedAt",
        // The set's default write concern: global once the operator pinned it.
        "defaultWriteConcern",
    ] {
        assert_eq!(
            reflected[field], written[field],
            "status.{field} is reflected unchanged"
        );
    }
    for local in ["localMembers", "restartState"] {
        assert!(
            reflected.get(local).is_none(),
            "status.{local} stays in the member cluster"
        );
    }
    assert_eq!(reflected["generation"], json!(report.member_generation()));
    assert_eq!(reflected["resourceTemplateGeneration"], json!(GENERATION));
}

#[test]
fn reflect_status_of_an_object_without_status_is_empty() {
    let mut object = ClusterReport::running("member3").observed_object();
    object.as_object_mut().expect("object").remove("status");
    assert_eq!(
        Interpreter::load(Operation::StatusReflection).call_one("ReflectStatus", &[object]),
        json!({})
    );
}
