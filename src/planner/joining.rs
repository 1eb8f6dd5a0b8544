//! What a local member must show before it joins (at initiate or by a
//! reconfig), and the config entry it joins with.

use std::collections::BTreeMap;
use std::ops::ControlFlow::{self, Break, Continue};

use super::{refuse, wait, PlanInput, Refusal, Step, WaitReason};
use crate::hostconf::{HostConfMember, MemberAddress};
use crate::member::MemberSlot;
use crate::observe::MemberProbe;
use crate::replset::ConfigMember;

/// A member as it joins: a vote when `may_vote` and hostconf does not pin it
/// to 0; priority from hostconf or 1 for a visible voter, else 0. An arbiter
/// always votes with priority 0.
pub(super) fn new_member(
    input: &PlanInput,
    id: i64,
    host: MemberAddress,
    arbiter: bool,
    may_vote: bool,
) -> ConfigMember {
    let hint = input.hint(&host);
    if arbiter {
        return ConfigMember {
            id,
            host,
            arbiter_only: true,
            votes: 1,
            priority: 0.0,
            hidden: false,
            tags: BTreeMap::new(),
            newly_added: false,
        };
    }
    let hidden = hint.is_some_and(|h| h.hidden);
    let votes = u8::from(may_vote && hint.and_then(|h| h.votes) != Some(0));
    ConfigMember {
        id,
        host,
        arbiter_only: false,
        votes,
        priority: voter_priority(votes, hidden, hint),
        hidden,
        tags: hint.map(|h| h.tags.clone()).unwrap_or_default(),
        newly_added: false,
    }
}

pub(super) fn voter_priority(votes: u8, hidden: bool, hint: Option<&HostConfMember>) -> f64 {
    if votes == 0 || hidden {
        0.0
    } else {
        hint.and_then(|h| h.priority).unwrap_or(1.0)
    }
}

/// A wanted local member that runs and answers at its address.
pub(super) fn ready_to_join(
    input: &PlanInput,
    slot: MemberSlot,
) -> ControlFlow<Step, (&MemberAddress, &MemberProbe)> {
    let Some(facts) = input.facts(slot) else {
        return Break(wait(WaitReason::PodNotRunning { slot }));
    };
    let Some(address) = facts.address.as_ref() else {
        return Break(wait(WaitReason::MemberAddressUnknown { slot }));
    };
    if !facts.stateful_set_exists || !facts.pod_running {
        return Break(wait(WaitReason::PodNotRunning { slot }));
    }
    let Some(probe) = facts.probe.as_ref() else {
        return Break(wait(WaitReason::MemberNotAnswering {
            slot,
            host: address.clone(),
        }));
    };
    Continue((address, probe))
}

pub(super) fn check_set_name(
    input: &PlanInput,
    host: &MemberAddress,
    probe: &MemberProbe,
) -> ControlFlow<Step> {
    match &probe.set_name {
        Some(name) if name != &input.set_name => Break(refuse(Refusal::MemberSetNameMismatch {
            host: host.clone(),
            member_set_name: name.clone(),
            set_name: input.set_name.clone(),
        })),
        _ => Continue(()),
    }
}
