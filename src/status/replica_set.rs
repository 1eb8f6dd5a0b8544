//! The replica set as status shows it: `replset[]`, the primary, and the last
//! view kept while the set cannot be read.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::StatusInput;
use crate::api::{DefaultWriteConcernStatus, MongoDBStatus, ReplSetMemberStatus};
use crate::observe::ObservedSet;
use crate::replset::ClusterWriteConcern;

/// The replica set as status shows it to the control plane.
pub(super) struct ReplicaSetView {
    pub(super) replset: Vec<ReplSetMemberStatus>,
    pub(super) primary: Option<String>,
    pub(super) ready_local: i32,
    pub(super) observed_at: Option<Time>,
}

/// This pass's view when it read the set (with the time it was first seen as
/// it is), else the last one.
pub(super) fn view(
    input: &StatusInput,
    previous: &MongoDBStatus,
    ready_local: i32,
) -> ReplicaSetView {
    let Some(observation) = input.observation else {
        return ReplicaSetView {
            replset: previous.replset.clone(),
            primary: previous.primary.clone(),
            ready_local: previous.current_info.members,
            observed_at: previous.replica_set_observed_at.clone(),
        };
    };
    let replset = replset(Some(observation));
    let primary = observation.primary.as_ref().map(ToString::to_string);
    let unchanged = previous.replset == replset
        && previous.primary == primary
        && previous.current_info.members == ready_local;
    let observed_at = match &previous.replica_set_observed_at {
        Some(at) if unchanged => at.clone(),
        _ => input.now.clone(),
    };
    ReplicaSetView {
        replset,
        primary,
        ready_local,
        observed_at: Some(observed_at),
    }
}

/// Whether this pass saw a primary in the set.
/// `status.defaultWriteConcern`: the write concern in force and its source,
/// when it could be read (`None` keeps the last one).
pub(super) fn default_write_concern(
    observation: &ObservedSet,
) -> Option<DefaultWriteConcernStatus> {
    let status = |w: Option<String>, source: &str| DefaultWriteConcernStatus {
        w,
        source: source.to_string(),
    };
    match &observation.write_concern {
        ClusterWriteConcern::Unknown => None,
        ClusterWriteConcern::NotSetBefore50 => Some(status(None, "none")),
        ClusterWriteConcern::Implicit => {
            let w = observation.config.implicit_default_write_concern();
            Some(status(Some(w.as_w().to_string()), "implicit"))
        }
        ClusterWriteConcern::Global { w } => Some(status(Some(w.clone()), "global")),
    }
}

pub(super) fn has_primary(input: &StatusInput) -> bool {
    input.observation.is_some_and(|o| o.primary.is_some())
}

/// The set's members as `status.replset` lists them, by `_id`.
fn replset(observation: Option<&ObservedSet>) -> Vec<ReplSetMemberStatus> {
    let Some(observation) = observation else {
        return Vec::new();
    };
    let mut members: Vec<ReplSetMemberStatus> = observation
        .members
        .iter()
        .map(|(host, member)| ReplSetMemberStatus {
            id: member.id,
            name: host.to_string(),
            health: if member.healthy { 1.0 } else { 0.0 },
            state: member.state.code(),
            state_str: member.state.as_str().to_string(),
            sync_source_host: member.sync_source.clone(),
        })
        .collect();
    members.sort_by_key(|m| m.id);
    members
}

/// `host (state)` of each member the set reports unhealthy.
/// The members whose heartbeats the reporting member (the primary) sees
/// refused internal authentication, each with its cluster's VIP.
pub(super) fn authentication_refused(observation: Option<&ObservedSet>) -> Vec<String> {
    observation
        .map(|o| {
            o.members
                .iter()
                .filter(|(_, m)| m.authentication_refused)
                .map(|(host, _)| format!("{host} (cluster {})", host.host))
                .collect()
        })
        .unwrap_or_default()
}

pub(super) fn unhealthy_members(observation: Option<&ObservedSet>) -> Vec<String> {
    observation
        .map(|o| {
            o.members
                .iter()
                .filter(|(_, m)| !m.healthy)
                .map(|(host, m)| format!("{host} ({})", m.state))
                .collect()
        })
        .unwrap_or_default()
}
