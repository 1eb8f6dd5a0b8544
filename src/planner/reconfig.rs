//! What every reconfig must satisfy: a voting majority that still answers, a
//! primary, a committed config and no member still `newlyAdded` before it is
//! planned; a version one above the observed config's, a healthy voting
//! majority after it, and nothing mongod would refuse without `force`.

use std::ops::ControlFlow::{self, Break, Continue};

use super::{refuse, wait, Change, Refusal, Step, WaitReason};
use crate::hostconf::MemberAddress;
use crate::observe::ObservedSet;
use crate::replset::{reconfig_problems, MemberStatus, ReplicaSetConfig};

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
/// `one-voting-change-per-reconfig`, `config-within-mongodb-limits`).
pub(super) fn checked_reconfig(
    old: &ReplicaSetConfig,
    config: ReplicaSetConfig,
    change: Change,
) -> Step {
    let problems = reconfig_problems(old, &config);
    if problems.is_empty() {
        Step::Reconfig { config, change }
    } else {
        refuse(Refusal::InvalidConfig { problems })
    }
}
