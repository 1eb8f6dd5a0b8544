//! Unit tests of the recover command's decisions: the dry run from the
//! chosen cluster's status, the refusals, the request and its phases.

use serde_json::json;

use super::*;
use crate::cli::fixtures::*;

const REASON: &str = "b and c lost in the flood, ticket 4711";

fn lost_a() -> MongoDB {
    let locals = json!([local(0, A0, "SECONDARY", 0), local(1, A1, "SECONDARY", 0)]);
    mongodb(status(3, 200, &[B0, B1, C0], locals, majority_lost()))
}

fn with_recovery(mut mongodb: MongoDB, request: &str, phase: &str) -> MongoDB {
    mongodb.status.as_mut().unwrap().recovery = Some(
        serde_json::from_value(json!({
            "request": request, "phase": phase, "message": "forced on a0",
            "keeping": [A0, A1], "dropping": [B0, B1, C0], "forcedOn": A0, "since": at(210),
        }))
        .unwrap(),
    );
    mongodb
}

#[test]
fn the_dry_run_names_what_a_forced_reconfig_keeps_and_drops() {
    let plan = dry_run("a", &lost_a(), REASON).unwrap();
    assert_eq!(
        plan.keeping,
        [format!("{A0} (SECONDARY)"), format!("{A1} (SECONDARY)")]
    );
    assert_eq!(plan.dropping, [B0, B1, C0]);
    assert!(!plan.already_asked);
    let text = plan.to_string();
    assert!(
        text.starts_with(
            "cluster a reports VotingMajorityLost (config version 3):\n  3 of 5 voters"
        ),
        "{text}"
    );
    assert!(
        text.contains(&format!("  drop: {B0}, {B1}, {C0}\n")),
        "{text}"
    );
    assert!(text.contains("down or fenced first"), "{text}");
}

#[test]
fn a_cluster_that_does_not_report_a_lost_majority_is_not_asked() {
    let locals = json!([local(0, A0, "PRIMARY", 0)]);
    let healthy = mongodb(status(3, 10, &[], locals, healthy()));
    let refusal = dry_run("a", &healthy, REASON).unwrap_err();
    assert!(matches!(refusal, Refusal::MajorityNotLost { .. }));
    let text = refusal.to_string();
    assert!(
        text.contains(
            "cluster a does not report VotingMajorityLost (Degraded False Healthy: every member"
        ),
        "{text}"
    );
    let mut blank = lost_a();
    blank.status = None;
    assert_eq!(
        dry_run("a", &blank, REASON),
        Err(Refusal::NoStatus {
            context: "a".into()
        })
    );
}

#[test]
fn a_request_answered_already_is_not_asked_again_but_one_under_way_is_followed() {
    for phase in ["Done", "Refused"] {
        let answered = with_recovery(lost_a(), REASON, phase);
        let refusal = dry_run("a", &answered, REASON).unwrap_err();
        assert!(
            refusal.to_string().contains("ask with another reason"),
            "{refusal}"
        );
        // Another reason is a new request.
        assert!(dry_run("a", &answered, "lost again, ticket 4712").is_ok());
    }
    let mut forced = with_recovery(lost_a(), REASON, "Forced");
    // Forced: the set may have a primary again; the request is followed.
    forced.status.as_mut().unwrap().conditions.clear();
    forced.metadata.annotations =
        Some([(RECOVERY_ANNOTATION.to_string(), REASON.to_string())].into());
    let plan = dry_run("a", &forced, REASON).unwrap();
    assert!(plan.already_asked);
    assert_eq!(plan.lost, "forced on a0");
    let other = dry_run("a", &forced, "another reason").unwrap_err();
    assert!(
        matches!(
            other,
            Refusal::OtherInProgress {
                phase: RecoveryPhase::Forced,
                ..
            }
        ),
        "{other}"
    );
}

#[test]
fn the_request_is_the_annotation_with_a_reason_that_is_not_blank() {
    assert!(parse_reason("  ").is_err());
    assert!(parse_reason("").is_err());
    assert_eq!(parse_reason(REASON).as_deref(), Ok(REASON));
    assert_eq!(
        annotation_patch(REASON),
        json!({"metadata": {"annotations": {"middleware.fedstate.io/disaster-recovery": REASON}}})
    );
    assert!(confirmed("y\n") && confirmed(" YES ") && !confirmed("") && !confirmed("no"));
    assert!(question("a", "ledger").ends_with("[y/N] "));
}

#[test]
fn the_phases_of_this_request_are_followed_and_others_ignored() {
    let done = with_recovery(lost_a(), REASON, "Done");
    let recovery = progress(&done, REASON).unwrap();
    assert_eq!(phase_line(recovery), "Done: forced on a0");
    assert!(progress(&done, "an older request").is_none());
    assert!(progress(&lost_a(), REASON).is_none());
}
