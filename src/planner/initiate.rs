//! Initiating the replica set: the initial config and the member it is sent
//! to, only in the `rsInit` cluster, only once (`never-initiate-twice`), and
//! with the votes spread so that no cluster holds a majority of them
//! (`no-cluster-gains-a-vote-majority`).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow::{self, Break, Continue};

use super::joining::{check_set_name, new_member, ready_to_join};
use super::{refuse, wait, PlanInput, Refusal, Step, WaitReason};
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::replset::{
    cluster_holds_no_majority, ConfigSettings, ReplicaSetConfig, MAX_VOTERS,
    MIN_CLUSTERS_FOR_VOTE_BALANCE,
};

/// The initial config, when this cluster may initiate: never a second time
/// (`docs/replica-set-rules.md`, `never-initiate-twice`).
pub(super) fn plan_initiate(
    input: &PlanInput,
) -> ControlFlow<Step, (ReplicaSetConfig, MemberAddress)> {
    if let Some(id) = &input.known_replica_set_id {
        return Break(wait(WaitReason::ReplicaSetUnreachable {
            replica_set_id: id.clone(),
        }));
    }
    for (host, probe) in input.local_members.iter().filter_map(|m| m.answer()) {
        check_set_name(input, host, probe)?;
    }
    let local_answers = input.local_members.iter().filter_map(|m| m.answer());
    let remote_answers = input.remote_probes.iter();
    if let Some((host, _)) = local_answers
        .chain(remote_answers)
        .find(|(_, probe)| probe.has_config)
    {
        return Break(wait(WaitReason::ExistingConfigUnreadable {
            host: host.clone(),
        }));
    }
    if !input.rs_init {
        return Break(wait(WaitReason::AwaitingInitiate));
    }

    let mut local = Vec::new();
    for slot in input.wanted_slots() {
        let (address, _) = ready_to_join(input, slot)?;
        local.push((address.clone(), slot == MemberSlot::Arbiter));
    }
    if local.is_empty() {
        return Break(refuse(Refusal::NothingToInitiate));
    }
    local.sort();

    let data_members: Vec<&MemberAddress> =
        input.hostconf.data_members().map(|m| &m.address).collect();
    let answered_locally = |host: &MemberAddress| local.iter().any(|(a, _)| a == host);
    let answered = data_members
        .iter()
        .filter(|&&host| answered_locally(host) || input.remote_probes.contains_key(host))
        .count();
    let needed = data_members.len() / 2 + 1;
    if answered < needed {
        return Break(wait(WaitReason::TooFewMembersAnswering {
            answered,
            needed,
        }));
    }
    // A majority answering could be this cluster alone, cut off from the
    // others while they run the set (`never-initiate-twice`).
    let silent_cluster = input
        .hostconf
        .members
        .iter()
        .map(|m| &m.address)
        .filter(|a| !input.is_local(a))
        .find(|a| {
            !input
                .remote_probes
                .keys()
                .any(|answered| answered.host == a.host)
        });
    if let Some(silent) = silent_cluster {
        return Break(wait(WaitReason::ClusterNotAnswering {
            vip: silent.host.clone(),
        }));
    }

    let mut remote: Vec<(MemberAddress, bool)> = input
        .hostconf
        .members
        .iter()
        .filter(|m| !input.is_local(&m.address) && !answered_locally(&m.address))
        .filter(|m| {
            input.remote_probes.get(&m.address).is_some_and(|p| {
                !p.has_config && p.set_name.as_ref().is_none_or(|n| n == &input.set_name)
            })
        })
        .map(|m| (m.address.clone(), m.arbiter))
        .collect();
    remote.sort();
    let listed: Vec<(MemberAddress, bool)> = local.into_iter().chain(remote).collect();

    let voters = initial_voters(input, &listed)?;
    let members = (0..)
        .zip(listed)
        .map(|(id, (host, arbiter))| {
            let may_vote = voters.contains(&host);
            new_member(input, id, host, arbiter, may_vote)
        })
        .collect();
    let config = ReplicaSetConfig {
        set_name: input.set_name.clone(),
        version: 1,
        term: None,
        members,
        settings: ConfigSettings::from_desired(&input.settings, None),
    };
    let problems = config.validate();
    if !problems.is_empty() {
        return Break(refuse(Refusal::InvalidConfig { problems }));
    }
    let electable_local = config
        .members
        .iter()
        .find(|m| input.is_local(&m.host) && m.is_electable());
    let Some(on) = electable_local.map(|m| m.host.clone()) else {
        return Break(refuse(Refusal::NoElectableLocalMember));
    };
    Continue((config, on))
}

/// The members of the initial config (`listed`: address and whether it is an
/// arbiter, in `_id` order) that are given a vote: at most seven, never one
/// pinned to 0 votes.
///
/// With fewer than three clusters in hostconf the votes are first-come:
/// arbiters first (they cannot exist without one), then in `listed` order.
/// From three clusters on they go round-robin across clusters — the arbiter's
/// cluster first, then by VIP; within a cluster its arbiter first, then in
/// `listed` order — and the longest run of that order in which no cluster
/// holds a majority gets them (`docs/replica-set-rules.md`,
/// `no-cluster-gains-a-vote-majority`). A single cluster can never be
/// balanced: then initiate waits for members of other clusters.
fn initial_voters(
    input: &PlanInput,
    listed: &[(MemberAddress, bool)],
) -> ControlFlow<Step, BTreeSet<MemberAddress>> {
    let candidates = listed
        .iter()
        .filter(|(host, arbiter)| *arbiter || input.hint(host).and_then(|h| h.votes) != Some(0));
    let clusters = input.cluster_count();
    if clusters < MIN_CLUSTERS_FOR_VOTE_BALANCE {
        let (arbiters, data): (Vec<_>, Vec<_>) = candidates.partition(|(_, arbiter)| *arbiter);
        let first_come = arbiters.into_iter().chain(data).take(MAX_VOTERS);
        return Continue(first_come.map(|(host, _)| host.clone()).collect());
    }

    let mut queues: BTreeMap<&str, Vec<&(MemberAddress, bool)>> = BTreeMap::new();
    for candidate in candidates {
        queues
            .entry(candidate.0.host.as_str())
            .or_default()
            .push(candidate);
    }
    let mut queues: Vec<Vec<&(MemberAddress, bool)>> = queues.into_values().collect();
    // Stable sorts: the arbiter first in its cluster, and its cluster first.
    for queue in &mut queues {
        queue.sort_by_key(|(_, arbiter)| !*arbiter);
    }
    queues.sort_by_key(|queue| !queue.first().is_some_and(|(_, arbiter)| *arbiter));
    let rounds = queues.iter().map(Vec::len).max().unwrap_or(0);
    let order: Vec<&MemberAddress> = (0..rounds)
        .flat_map(|round| queues.iter().filter_map(move |queue| queue.get(round)))
        .map(|(host, _)| host)
        .collect();

    let balanced = |voters: &[&MemberAddress]| {
        voters
            .iter()
            .all(|v| cluster_holds_no_majority(voters.iter().copied(), &v.host, clusters))
    };
    let longest = (0..=order.len().min(MAX_VOTERS))
        .rev()
        .find(|&n| balanced(&order[..n]))
        .unwrap_or(0);
    if let (0, Some(first)) = (longest, order.first()) {
        return Break(wait(WaitReason::VotersInOneCluster {
            vip: first.host.clone(),
        }));
    }
    Continue(order[..longest].iter().map(|&host| host.clone()).collect())
}
