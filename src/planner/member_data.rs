//! Members whose data is gone: a local member whose volume was lost (a new
//! PVC, a disk replaced) comes back empty at the same address and, through
//! the primary's heartbeat, installs the config with its old entry. mongod
//! flags `newlyAdded` only for a new `_id`, and an empty member in initial
//! sync (STARTUP2, null last optime) grants its vote to any candidate: with
//! it, a candidate lacking a majority-acknowledged write can win, and the
//! write is rolled back when the old primary returns. Its vote is taken away
//! (votes 0, priority 0) until it is SECONDARY again; promotion gives it back.
//!
//! A member away longer than the oplog window says it is too stale to catch
//! up and stays RECOVERING until its data is wiped; it is resynced (PVC and
//! pod deleted) once the set keeps a healthy voting majority without it, and
//! then comes back empty as above.

use std::ops::ControlFlow::{self, Break, Continue};

use super::reconfig::{
    check_healthy_majority, check_reconfig_allowed, checked_reconfig, next_version,
};
use super::{wait, Change, LocalMemberFacts, PlanInput, Step, WaitReason};
use crate::observe::ObservedSet;
use crate::replset::{ConfigMember, MemberState, MemberStatus};

/// Whether a local member answers as an empty mongod: no config (it has not
/// heard from the set yet), or in initial sync.
fn answers_empty(facts: &LocalMemberFacts, set: &ObservedSet, host: &ConfigMember) -> bool {
    let probe_empty = facts
        .probe
        .as_ref()
        .is_some_and(|p| !p.has_config || p.state == Some(MemberState::Startup2));
    let seen_syncing = set
        .members
        .get(&host.host)
        .is_some_and(|s| s.healthy && s.state == MemberState::Startup2);
    probe_empty || seen_syncing
}

/// Takes the vote of the first local member that answers empty while its
/// entry votes (`docs/replica-set-rules.md`, `an-emptied-member-never-votes`).
/// One voting change, a healthy voting majority kept; never the primary's
/// entry (a primary holds data).
pub(super) fn silence_emptied_members(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    for facts in &input.local_members {
        let Some(entry) = facts.entry_in(&set.config) else {
            continue;
        };
        if entry.votes == 0
            || entry.newly_added
            || entry.arbiter_only
            || set.primary.as_ref() == Some(&entry.host)
            || !answers_empty(facts, set, entry)
        {
            continue;
        }
        check_reconfig_allowed(set)?;
        let mut config = next_version(&set.config);
        for m in config.members.iter_mut().filter(|m| m.id == entry.id) {
            m.votes = 0;
            m.priority = 0.0;
        }
        check_healthy_majority(&config, set, None)?;
        return Break(checked_reconfig(
            set,
            config,
            Change::SilenceEmptiedMember {
                host: entry.host.clone(),
            },
        ));
    }
    Continue(())
}

/// Resyncs the first local member that reports itself too stale to catch up
/// (`docs/replica-set-rules.md`, `a-too-stale-member-is-resynced`): its PVC
/// and pod go, so that it comes back empty. Only while the healthy voters
/// other than it are a majority of the voters: it counts for nothing while
/// RECOVERING, and the resync must not be what leaves the set without a
/// primary should another member fail meanwhile. Voters are counted as
/// mongod counts them, `newlyAdded` members not among them: a slot scaled
/// down and up again onto its retained volume is such a member, and counting
/// its vote would hold it RECOVERING, and every reconfig with it, while
/// mongod's majority is there.
pub(super) fn resync_too_stale_members(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    for facts in &input.local_members {
        if !facts.probe.as_ref().is_some_and(|p| p.too_stale) {
            continue;
        }
        let Some(entry) = facts.entry_in(&set.config) else {
            continue;
        };
        let voters = || set.config.members.iter().filter(|m| m.votes_now());
        let healthy = voters()
            .filter(|m| m.host != entry.host)
            .filter(|m| {
                set.members
                    .get(&m.host)
                    .is_some_and(MemberStatus::counts_towards_majority)
            })
            .count();
        let needed = voters().count() / 2 + 1;
        if set.primary.is_none() || healthy < needed {
            return Break(wait(WaitReason::TooStaleMemberWaitsForMajority {
                host: entry.host.clone(),
                healthy,
                needed,
            }));
        }
        return Break(Step::ResyncMember {
            slot: facts.slot,
            host: entry.host.clone(),
        });
    }
    Continue(())
}

/// The wait to report once nothing else is left to do while a local member
/// whose vote was taken resyncs (it answers empty and hostconf does not pin
/// it to 0 votes): promotion gives the vote back once it is SECONDARY, so the
/// set is not in sync before.
pub(super) fn member_resyncing(input: &PlanInput, set: &ObservedSet) -> Option<Step> {
    input.local_members.iter().find_map(|facts| {
        let entry = facts.entry_in(&set.config)?;
        let pinned = input.hint(&entry.host).and_then(|h| h.votes) == Some(0);
        (input.is_wanted(facts.slot)
            && entry.votes == 0
            && !entry.arbiter_only
            && !pinned
            && answers_empty(facts, set, entry))
        .then(|| {
            wait(WaitReason::MemberResyncing {
                host: entry.host.clone(),
            })
        })
    })
}

/// The wait to report once nothing else is left to do while a wanted local
/// member is still `newlyAdded`: it has no vote until mongod clears the flag,
/// so the set is not in sync before (and, with the write concern not pinned,
/// mongod may never clear it: `cluster-write-concern-pinned`).
pub(super) fn member_newly_added(input: &PlanInput, set: &ObservedSet) -> Option<Step> {
    input.local_members.iter().find_map(|facts| {
        let entry = facts.entry_in(&set.config)?;
        (input.is_wanted(facts.slot) && entry.newly_added).then(|| {
            wait(WaitReason::NewlyAddedMemberSyncing {
                host: entry.host.clone(),
            })
        })
    })
}
