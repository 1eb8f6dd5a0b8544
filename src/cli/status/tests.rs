//! Unit tests of the status view: one table of the whole set, the reference
//! report, disagreeing, stale and unread clusters said as such.

use serde_json::json;

use super::*;
use crate::cli::fixtures::*;

fn report(context: &str, outcome: Result<MongoDB, Unread>) -> ContextReport {
    ContextReport {
        context: context.to_string(),
        namespace: "default".to_string(),
        outcome,
    }
}

fn cluster_a(
    version: i64,
    observed: u32,
    down: &[&str],
    conditions: serde_json::Value,
) -> ContextReport {
    let locals = json!([local(0, A0, "PRIMARY", 0), local(1, A1, "SECONDARY", 1)]);
    report(
        "a",
        Ok(mongodb(status(version, observed, down, locals, conditions))),
    )
}

fn cluster_b(version: i64, observed: u32) -> ContextReport {
    let locals = json!([local(0, B0, "SECONDARY", 0), local(1, B1, "SECONDARY", 2)]);
    report(
        "b",
        Ok(mongodb(status(version, observed, &[], locals, healthy()))),
    )
}

fn cluster_c(version: i64, observed: u32) -> ContextReport {
    let locals = json!([local(0, C0, "SECONDARY", 0)]);
    report(
        "c",
        Ok(mongodb(status(version, observed, &[], locals, healthy()))),
    )
}

/// The member table's rows (host first), between its header and the line
/// that follows it.
fn member_rows(output: &str) -> Vec<&str> {
    output
        .lines()
        .skip_while(|l| !l.starts_with("MEMBER"))
        .skip(1)
        .take_while(|l| !l.starts_with('('))
        .collect()
}

fn line_of<'a>(output: &'a str, prefix: &str) -> &'a str {
    output
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in\n{output}"))
}

#[test]
fn a_healthy_set_is_one_table_of_every_member_with_its_cluster_and_one_primary() {
    let reports = [
        cluster_a(3, 10, &[], healthy()),
        cluster_b(3, 10),
        cluster_c(3, 10),
    ];
    let output = render("ledger", &reports, now());
    let rows = member_rows(&output);
    assert_eq!(rows.len(), 5, "{output}");
    let row_a0 = line_of(&output, A0);
    assert!(
        row_a0.contains(" a ") && row_a0.contains("PRIMARY") && row_a0.ends_with('*'),
        "{row_a0}"
    );
    let row_b1 = line_of(&output, B1);
    assert!(
        row_b1.contains(" b ") && row_b1.contains("SECONDARY") && row_b1.contains("2s"),
        "{row_b1}"
    );
    assert_eq!(rows.iter().filter(|r| r.ends_with('*')).count(), 1);
    assert!(
        output.contains(&format!(
            "config version 3, observed 4m50s ago; primary {A0} in a"
        )),
        "{output}"
    );
    assert!(
        !output.contains("disagree")
            && !output.contains("STALE")
            && !output.contains("UNREACHABLE"),
        "{output}"
    );
    // The cluster table: state, members, config version, Ready, Degraded.
    let row = line_of(&output, "c  ");
    for cell in [
        "Running",
        "2/2",
        " 3 ",
        "4m50s",
        "True",
        "NotInProcess",
        "ledger-6f5",
    ] {
        assert!(row.contains(cell), "{cell} not in {row}");
    }
    assert!(errors("ledger", &reports).is_empty());
}

#[test]
fn a_lost_majority_shows_the_survivor_waiting_the_unreachable_and_the_stale() {
    let lost = [B0, B1, C0];
    let reports = [
        cluster_a(3, 200, &lost, majority_lost()),
        report(
            "b",
            Err(Unread::Unreachable("503 Service Unavailable".into())),
        ),
        cluster_c(3, 10),
    ];
    let output = render("ledger", &reports, now());
    // The members as a (the latest view) sees them: b's and c's down.
    for host in lost {
        let row = line_of(&output, host);
        assert!(
            row.contains("down") && row.contains("(not reachable/healthy)"),
            "{row}"
        );
    }
    assert!(output.contains("no primary"), "{output}");
    // b's members, which no cluster read hosts, come last.
    let rows = member_rows(&output);
    assert!(
        rows[3].starts_with(B0) && rows[4].starts_with(B1),
        "{output}"
    );
    assert!(rows[4].contains(" ? "), "{output}");
    let a = line_of(&output, "a  ");
    assert!(a.contains("VotingMajorityLost"), "{a}");
    assert!(line_of(&output, "b  ").contains("UNREACHABLE"), "{output}");
    assert!(line_of(&output, "c  ").contains("STALE?"), "{output}");
    // What a waits for, in its operator's words, once per reason.
    let waits = line_of(
        &output,
        "a: Ready=False Degraded=True Progressing=True VotingMajorityLost: ",
    );
    assert!(
        waits.contains(&format!("3 of 5 voters do not answer ({B0}, {B1}, {C0})")),
        "{waits}"
    );
    assert!(line_of(&output, "b: unreachable: 503").contains("503"));
    let stale = line_of(&output, "c: STALE?: ");
    assert!(
        stale.contains(&format!(
            "a sees its members {C0} down (1m40s ago), which c last saw up (4m50s ago)"
        )),
        "{stale}"
    );
    assert_eq!(
        errors("ledger", &reports),
        ["context b: unreachable: 503 Service Unavailable"]
    );
}

#[test]
fn the_highest_config_version_gives_the_members_and_lower_ones_are_behind() {
    // a forced a config of a0 and a1 (the others dropped); c is back on its
    // old config and refused.
    let forced = json!({
        "state": "Running", "configVersion": 100_002, "replicaSetObservedAt": at(100),
        "replset": [member(0, A0, true, "PRIMARY"), member(1, A1, true, "SECONDARY")],
        "localMembers": [local(0, A0, "PRIMARY", 0), local(1, A1, "SECONDARY", 0)],
        "conditions": healthy(),
        "recovery": {"request": "b and c lost", "phase": "Done", "message": "recorded",
                     "keeping": [A0, A1], "dropping": [B0, B1, C0], "since": at(90)},
    });
    let mut refused = status(
        3,
        200,
        &[],
        json!([local(0, C0, "NotInConfig", 0)]),
        healthy(),
    );
    refused["replset"] = json!([]);
    let reports = [
        report("a", Ok(mongodb(forced))),
        report("b", Err(Unread::NotFound)),
        report("c", Ok(mongodb(refused))),
    ];
    let output = render("ledger", &reports, now());
    let rows = member_rows(&output);
    assert_eq!(rows.len(), 3, "{output}");
    assert!(line_of(&output, C0).contains("NotInConfig"), "{output}");
    assert!(
        output.contains(
            "config versions disagree: a 100002, c 3; the members above are as a reports them"
        ),
        "{output}"
    );
    assert!(line_of(&output, "c  ").contains("behind"), "{output}");
    assert!(line_of(&output, "b  ").contains("NOT FOUND"), "{output}");
    let recovery = line_of(&output, "a: recovery \"b and c lost\" Done (3m30s ago): ");
    assert!(
        recovery.ends_with(&format!("keeping {A0}, {A1}; dropping {B0}, {B1}, {C0}")),
        "{recovery}"
    );
    assert_eq!(
        errors("ledger", &reports),
        ["context b: no MongoDB default/ledger there"]
    );
}

#[test]
fn between_equal_config_versions_the_latest_observation_is_the_reference() {
    let reports = [
        cluster_b(3, 10),
        cluster_a(3, 200, &[C0], healthy()),
        cluster_c(3, 10),
    ];
    assert_eq!(reference(&reports), Some(1));
    let output = render("ledger", &reports, now());
    assert!(output.contains("(as a reports the set"), "{output}");
    assert!(line_of(&output, C0).contains("down"), "{output}");
    // b's members are up in a's view too: only c is suspect.
    assert!(!line_of(&output, "b  ").contains("STALE"), "{output}");
    assert!(line_of(&output, "c  ").contains("STALE?"), "{output}");
}

#[test]
fn a_bad_context_and_a_cluster_without_status_are_said_so() {
    let mut fresh = mongodb(json!({}));
    fresh.status = None;
    let reports = [
        report(
            "x",
            Err(Unread::BadContext(
                "not in the kubeconfig (it has a, b, c)".into(),
            )),
        ),
        report("a", Ok(fresh)),
    ];
    let output = render("ledger", &reports, now());
    assert!(
        output.contains("no cluster reports the replica set's members yet"),
        "{output}"
    );
    assert!(line_of(&output, "x  ").contains("BAD CONTEXT"), "{output}");
    assert!(
        line_of(&output, "a  ").contains("no status yet: its operator has not reported"),
        "{output}"
    );
    assert_eq!(
        errors("ledger", &reports),
        ["context x: bad context: not in the kubeconfig (it has a, b, c)"]
    );
}
