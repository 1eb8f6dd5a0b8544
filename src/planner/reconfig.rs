//! What every reconfig must satisfy: a voting majority that still answers, a
//! cluster-wide write concern pinned (mongod 5.0+), a primary, a committed
//! config and no member still `newlyAdded` before it is planned; a version one
//! above the observed config's, a healthy voting majority after it, and
//! nothing mongod would refuse without `force`.

use std::ops::ControlFlow::{self, Break, Continue};

use super::{refuse, wait, Change, PlanInput, Refusal, Step, WaitReason};
use crate::hostconf::MemberAddress;
use crate::observe::ObservedSet;
use crate::replset::{
    implicit_default_for, reconfig_problems, ClusterWriteConcern, DefaultW, MemberStatus,
    ReplicaSetConfig, MAX_VOTERS,
};

/// Without a primary, whether a majority of the voters still answers
/// heartbeats: if not, no primary can be elected, and the loss is reported
/// with the voters gone; nothing is changed (`docs/replica-set-rules.md`,
/// `reconfig-accepted-without-force`).
pub(super) fn check_voting_majority(set: &ObservedSet) -> ControlFlow<Step> {
    if set.primary.is_some() {
        return Continue(());
    }
    let voters: Vec<&MemberAddress> = set
        .config
        .members
        .iter()
        .filter(|m| m.votes > 0 && !m.newly_added)
        .map(|m| &m.host)
        .collect();
    let mut lost: Vec<MemberAddress> = voters
        .iter()
        .filter(|host| !set.members.get(**host).is_some_and(|m| m.healthy))
        .map(|host| (*host).clone())
        .collect();
    if (voters.len() - lost.len()) * 2 > voters.len() {
        return Continue(());
    }
    lost.sort();
    Break(wait(WaitReason::VotingMajorityLost {
        lost,
        voters: voters.len(),
    }))
}

/// On mongod 5.0+ with no cluster-wide write concern, in the cluster whose
/// own member is the primary: pins as the cluster-wide one the implicit
/// default mongod would apply to the set as hostconf lists it, on that
/// member, before anything else is changed. mongod refuses every reconfig
/// that would change its implicit default while none is set (forced ones and
/// its own `newlyAdded` clearing included), so once pinned no change of
/// membership is refused for it. One member is primary at a time and each
/// operator pins only on its own, which refuses the write once it is no
/// longer primary: two clusters never pin at once, even while their hostconfs
/// differ, and no cluster needs another one's operator, the rsInit cluster's
/// included (`docs/replica-set-rules.md`, `cluster-write-concern-pinned`).
pub(super) fn pin_cluster_write_concern(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    match (&set.primary, &set.write_concern) {
        (Some(primary), ClusterWriteConcern::Implicit) if input.is_local(primary) => {
            Break(Step::SetClusterWriteConcern {
                primary: primary.clone(),
                w: listed_implicit_default(input),
            })
        }
        _ => Continue(()),
    }
}

/// The implicit default of the set hostconf lists — every arbiter and every
/// data member it does not pin to 0 votes, seven voters at most — rather than
/// of the config of the moment, which right after initiate may lack the
/// members that had not answered yet: the set the clients will write to.
fn listed_implicit_default(input: &PlanInput) -> DefaultW {
    let arbiters = input.hostconf.members.iter().filter(|m| m.arbiter).count();
    let arbiters = arbiters.min(MAX_VOTERS);
    let data = input
        .hostconf
        .data_members()
        .filter(|m| m.votes != Some(0))
        .count();
    implicit_default_for(data.min(MAX_VOTERS - arbiters), arbiters)
}

/// What must hold before any reconfig: a primary, a committed config, and no
/// member still flagged `newlyAdded` (`docs/replica-set-rules.md`,
/// `one-voting-change-per-reconfig`).
pub(super) fn check_reconfig_allowed(set: &ObservedSet) -> ControlFlow<Step, &MemberAddress> {
    let Some(primary) = set.primary.as_ref() else {
        return Break(wait(WaitReason::NoPrimary));
    };
    if !set.config_committed {
        return Break(wait(WaitReason::ConfigNotCommitted));
    }
    if let Some(m) = set.config.members.iter().find(|m| m.newly_added) {
        return Break(wait(WaitReason::NewlyAddedMemberSyncing {
            host: m.host.clone(),
        }));
    }
    Continue(primary)
}

/// The observed config with its version raised by one, ready to be changed
/// (`docs/replica-set-rules.md`, `reconfig-accepted-without-force`).
pub(super) fn next_version(config: &ReplicaSetConfig) -> ReplicaSetConfig {
    ReplicaSetConfig {
        version: config.version.saturating_add(1),
        ..config.clone()
    }
}

/// Healthy voters in `config` (by the observed health; `joining` counts as
/// healthy since it just answered), and how many a majority of its voters needs
/// (`docs/replica-set-rules.md`, `keep-a-healthy-voting-majority`).
pub(super) fn healthy_voters_after(
    config: &ReplicaSetConfig,
    set: &ObservedSet,
    joining: Option<&MemberAddress>,
) -> (usize, usize) {
    let healthy = config
        .voters()
        .filter(|m| {
            Some(&m.host) == joining
                || set
                    .members
                    .get(&m.host)
                    .is_some_and(MemberStatus::counts_towards_majority)
        })
        .count();
    (healthy, config.majority())
}

/// Waits unless the healthy voters of `config` are a majority
/// (`keep-a-healthy-voting-majority`).
pub(super) fn check_healthy_majority(
    config: &ReplicaSetConfig,
    set: &ObservedSet,
    joining: Option<&MemberAddress>,
) -> ControlFlow<Step> {
    let (healthy, needed) = healthy_voters_after(config, set, joining);
    if healthy < needed {
        return Break(wait(WaitReason::NotEnoughHealthyVoters { healthy, needed }));
    }
    Continue(())
}

/// The reconfig step, or a refusal naming what mongod would reject
/// (`docs/replica-set-rules.md`: `reconfig-accepted-without-force`,
/// `one-voting-change-per-reconfig`, `config-within-mongodb-limits`), or a
/// wait while it, or mongod's clearing of the `newlyAdded` flag it sets,
/// would change the implicit default write concern with none pinned yet
/// (`cluster-write-concern-pinned`).
pub(super) fn checked_reconfig(
    set: &ObservedSet,
    config: ReplicaSetConfig,
    change: Change,
) -> Step {
    let old = &set.config;
    let write_concern = &set.write_concern;
    if write_concern.refuses_change(old, &config) || write_concern.strands_newly_added(old, &config)
    {
        return wait(WaitReason::ClusterWriteConcernNotSet {
            change: change.to_string(),
            from: old.implicit_default_write_concern(),
            to: config.implicit_default_write_concern(),
        });
    }
    let problems = reconfig_problems(old, &config);
    if problems.is_empty() {
        Step::Reconfig { config, change }
    } else {
        refuse(Refusal::InvalidConfig { problems })
    }
}
