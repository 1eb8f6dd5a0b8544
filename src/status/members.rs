//! The local members as status lists them, and how many of them are ready.

use super::{desired_members, StatusInput};
use crate::api::LocalMemberStatus;
use crate::build::names;
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::replset::MemberState;
use crate::validate::Validated;

/// A local member as Kubernetes shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalMemberView {
    /// Which member.
    pub slot: MemberSlot,
    /// StatefulSet (and Service) name.
    pub stateful_set: String,
    /// Its Service's nodePort, when known.
    pub node_port: Option<i32>,
    /// `VIP:nodePort`, when known.
    pub host: Option<MemberAddress>,
    /// The revision its pod runs, when it has a pod.
    pub revision: Option<String>,
}

/// The local members status lists: every slot with a Service or a StatefulSet.
pub fn local_member_views(instance: &str, validated: &Validated) -> Vec<LocalMemberView> {
    let mut slots: Vec<MemberSlot> = validated
        .services
        .keys()
        .chain(validated.stateful_sets.keys())
        .copied()
        .collect();
    slots.sort();
    slots.dedup();
    slots
        .into_iter()
        .map(|slot| LocalMemberView {
            slot,
            stateful_set: names::slot(instance, slot),
            node_port: validated.services.get(&slot).and_then(|s| s.node_port),
            host: validated.address(slot),
            revision: validated
                .stateful_sets
                .get(&slot)
                .and_then(|s| s.pod.as_ref())
                .and_then(|pod| pod.revision.clone()),
        })
        .collect()
}

/// Local data members that are in the config and PRIMARY or SECONDARY.
pub(super) fn ready_local_members(input: &StatusInput) -> i32 {
    let Some(observation) = input.observation else {
        return 0;
    };
    let ready = |host: &MemberAddress| {
        observation.members.get(host).is_some_and(|member| {
            member.healthy && matches!(member.state, MemberState::Primary | MemberState::Secondary)
        })
    };
    let count = input
        .local_members
        .iter()
        .filter(|m| matches!(m.slot, MemberSlot::Data(_)))
        .filter_map(|m| m.host.as_ref())
        .filter(|host| ready(host))
        .count();
    i32::try_from(count).unwrap_or(i32::MAX)
}

/// Whether a local member above `spec.members` is still listed: it is
/// leaving, and the instance is not yet as the spec wants it.
pub(super) fn any_leaving(input: &StatusInput) -> bool {
    let desired = desired_members(input);
    input
        .local_members
        .iter()
        .any(|view| slot_index(view.slot) >= desired)
}

/// How far a member's replication lag must move before status shows the new
/// value: every status write triggers another pass, and a lag that moves by a
/// second on most passes would keep an idle instance busy.
const LAG_TOLERANCE_SECS: i64 = 10;

/// The lag status shows: the previous value while the new one is within
/// [`LAG_TOLERANCE_SECS`] of it, else the new one.
fn steady_lag(previous: Option<i64>, observed: Option<i64>) -> Option<i64> {
    match (previous, observed) {
        (Some(previous), Some(observed)) if (observed - previous).abs() < LAG_TOLERANCE_SECS => {
            Some(previous)
        }
        _ => observed,
    }
}

/// The lag status showed for `slot` before this pass.
fn previous_lag(input: &StatusInput, slot: MemberSlot) -> Option<i64> {
    let index = slot_index(slot);
    let previous = input.mongodb.status.as_ref()?;
    previous
        .local_members
        .iter()
        .find(|m| m.index == index)?
        .lag_seconds
}

/// The index status gives a slot (-1 for the arbiter).
fn slot_index(slot: MemberSlot) -> i32 {
    match slot {
        MemberSlot::Data(index) => i32::try_from(index).unwrap_or(i32::MAX),
        MemberSlot::Arbiter => -1,
    }
}

/// Each local member as status lists it: its role in the set, its lag and
/// the revision its pod runs.
pub(super) fn local_member_statuses(input: &StatusInput) -> Vec<LocalMemberStatus> {
    input
        .local_members
        .iter()
        .map(|view| {
            let observed = view
                .host
                .as_ref()
                .and_then(|host| input.observation.and_then(|o| o.members.get(host)));
            LocalMemberStatus {
                index: slot_index(view.slot),
                stateful_set: view.stateful_set.clone(),
                pod: format!("{}-0", view.stateful_set),
                node_port: view.node_port,
                host: view.host.as_ref().map(ToString::to_string),
                role: match (input.observation, observed) {
                    (_, Some(member)) => member.state.as_str().to_string(),
                    (Some(_), None) => "NotInConfig".to_string(),
                    (None, None) => "Unknown".to_string(),
                },
                lag_seconds: steady_lag(
                    previous_lag(input, view.slot),
                    observed.and_then(|m| m.lag_secs),
                ),
                revision: view.revision.clone(),
                tls_mode: view
                    .host
                    .as_ref()
                    .and_then(|host| input.tls?.modes.get(host).copied()),
            }
        })
        .collect()
}
