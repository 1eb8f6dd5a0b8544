//! `MongoDB` objects as member clusters' operators report them, for the
//! plugin's unit tests: five members, `a0`/`a1` in cluster a, `b0`/`b1` in b,
//! `c0` in c.

use k8s_openapi::jiff::Timestamp;
use serde_json::{json, Value};

use crate::api::MongoDB;

/// Member hosts, `VIP:NodePort`.
pub const A0: &str = "10.0.1.1:30001";
pub const A1: &str = "10.0.1.1:30002";
pub const B0: &str = "10.0.2.1:30003";
pub const B1: &str = "10.0.2.1:30004";
pub const C0: &str = "10.0.3.1:30005";

/// The "now" the tests render at: five minutes after [`at`]`(0)`.
pub fn now() -> Timestamp {
    "2026-11-24T00:05:00Z".parse().unwrap()
}

/// `seconds` after midnight, as the API server writes times.
pub fn at(seconds: u32) -> String {
    format!("2026-11-24T00:{:02}:{:02}Z", seconds / 60, seconds % 60)
}

/// A condition of `type_`.
pub fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": message,
           "lastTransitionTime": at(0)})
}

/// A `status.replset` entry.
pub fn member(id: i64, host: &str, up: bool, state: &str) -> Value {
    let code = match state {
        "PRIMARY" => 1,
        "SECONDARY" => 2,
        _ => 8,
    };
    json!({"_id": id, "name": host, "health": if up { 1.0 } else { 0.0 }, "state": code,
           "stateStr": state})
}

/// A `status.localMembers` entry.
pub fn local(index: i32, host: &str, role: &str, lag: i64) -> Value {
    json!({"index": index, "statefulSet": format!("ledger-mongodb-{index}"),
           "pod": format!("ledger-mongodb-{index}-0"), "host": host, "role": role,
           "lagSeconds": lag})
}

/// The whole set as seen at `observed`: a0 primary, everyone else
/// secondary, the `down` hosts not answering.
pub fn replset(down: &[&str]) -> Value {
    let members: Vec<Value> = [A0, A1, B0, B1, C0]
        .iter()
        .enumerate()
        .map(|(id, host)| {
            let up = !down.contains(host);
            let state = match (up, id) {
                (false, _) => "(not reachable/healthy)",
                (true, 0) if down.len() < 3 => "PRIMARY",
                (true, _) => "SECONDARY",
            };
            member(id as i64, host, up, state)
        })
        .collect();
    Value::Array(members)
}

/// Conditions of a cluster whose members are all ready.
pub fn healthy() -> Value {
    json!([
        condition(
            "Ready",
            "True",
            "AllMembersReady",
            "2/2 local members are healthy"
        ),
        condition(
            "Degraded",
            "False",
            "Healthy",
            "every member of the replica set is healthy"
        ),
        condition("Progressing", "False", "Idle", "no change in progress"),
    ])
}

/// Conditions of a cluster that lost a voting majority (b and c gone).
pub fn majority_lost() -> Value {
    let lost = format!(
        "3 of 5 voters do not answer ({B0}, {B1}, {C0}): no primary can be elected; the operator \
         changes nothing until a majority is back"
    );
    json!([
        condition(
            "Ready",
            "False",
            "VotingMajorityLost",
            &format!("0/2 local members ready: {lost}")
        ),
        condition("Degraded", "True", "VotingMajorityLost", &lost),
        condition("Progressing", "True", "VotingMajorityLost", &lost),
    ])
}

/// A cluster's object with `status`.
pub fn mongodb(status: Value) -> MongoDB {
    serde_json::from_value(json!({
        "apiVersion": "middleware.fedstate.io/v1alpha1",
        "kind": "MongoDB",
        "metadata": {"name": "ledger", "namespace": "default"},
        "spec": {},
        "status": status,
    }))
    .unwrap()
}

/// A cluster's status: `version`, the set seen at `observed` with `down`
/// hosts down, its `locals`, `conditions`.
pub fn status(
    version: i64,
    observed: u32,
    down: &[&str],
    locals: Value,
    conditions: Value,
) -> Value {
    json!({
        "state": "Running",
        "readyMembers": "2/2",
        "configVersion": version,
        "replicaSetObservedAt": at(observed),
        "replset": replset(down),
        "localMembers": locals,
        "conditions": conditions,
        "restartState": "NotInProcess",
        "currentRevision": "ledger-6f5d8c7b9a",
        "currentInfo": {"members": 2},
    })
}
