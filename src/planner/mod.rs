//! The replica-set planner: from facts observed in this cluster and through the
//! replica set, the **one** next step towards the desired membership.
//!
//! Pure: no client, no async, no clock. The controller gathers a [`PlanInput`]
//! (Kubernetes objects, hostconf, what each member answered, the config read
//! from the primary), calls [`plan`], executes the returned [`Step`] and plans
//! again on its next pass. Every step is computed from the live config, so a
//! crash between two steps is harmless (`docs/replica-set-rules.md`,
//! `same-input-same-step`).
//!
//! The rules, and the invariants named below, are written down in
//! `docs/replica-set-rules.md`; each invariant has a property test of the same
//! name in `planner/properties/`.
//!
//! - Only this cluster's members (host = this cluster's VIP) are added, promoted
//!   or removed; other clusters' members are only counted
//!   (`only-local-members-change`), except those of a lost cluster an SRE
//!   asked this cluster to forget ([`PlanInput::forgotten_cluster`]), which
//!   are removed.
//! - **Initiate** only in the `rsInit` cluster, only when no replica-set id is
//!   recorded, no member that answered has a config, every desired local member
//!   answers, and a majority of hostconf's data members answered
//!   (`never-initiate-twice`).
//! - Every **reconfig** starts from the observed config, raises its version by
//!   one, makes at most one voting change, passes
//!   [`reconfig_problems`](crate::replset::reconfig_problems), and is planned
//!   only with a primary, a majority-committed config and no `newlyAdded`
//!   member. The step cannot express `force`
//!   (`one-voting-change-per-reconfig`, `reconfig-accepted-without-force`,
//!   `config-within-mongodb-limits`).
//! - Order of work: delete the StatefulSets of members already out of the config
//!   (`never-delete-a-member-in-the-config`), then remove unwanted members
//!   (highest index first, the arbiter last; step a primary down first, once a
//!   healthy electable secondary that stays in the set can take over:
//!   `step-down-before-removing-the-primary`; before them, the members of a
//!   lost cluster an SRE asked this cluster to forget, by the same rules),
//!   then add wanted members (index
//!   order, the arbiter last; never one holding another set:
//!   `never-add-a-member-of-another-set`; one not ready or refused is passed
//!   over and reported last), then promote non-voters, then bring existing
//!   local members' votes (taken only), priority, hidden and tags to
//!   hostconf's, one member per reconfig and the primary last (stepped down
//!   first when the change would make it unelectable), then bring `settings`
//!   in line.
//! - **Votes**: at most seven members vote; a member pinned to 0 votes in
//!   hostconf never does. When hostconf spans at least three clusters
//!   (distinct VIPs), a member is given a vote — at initiate, on joining, on
//!   promotion — only if afterwards its cluster holds no majority of the
//!   voters, arbiters counted with their cluster
//!   (`no-cluster-gains-a-vote-majority`,
//!   [`cluster_holds_no_majority`](crate::replset::cluster_holds_no_majority)).
//!   Initiate hands the votes round-robin across clusters and keeps the longest
//!   balanced run of that order; it waits while only one cluster's members
//!   could vote. A member that may not vote joins with votes 0 and priority 0
//!   and is promoted once other clusters have added voters; an arbiter, which
//!   cannot join without a vote, is refused. With one or two clusters votes
//!   stay first-come (local members first at initiate): two sites cannot be
//!   balanced (one holds a majority or they tie), so losing a site may need the
//!   manual forced reconfig however the votes are split.
//!   A cluster holding a majority of the votes gives one non-primary vote up
//!   when a healthy non-voter of another cluster could take it
//!   (`rebalance_votes`, one voting change per reconfig); without such
//!   a member (after removals, say) it keeps its majority (*What is not
//!   enforced* in the same document).
//! - A reconfig whose resulting config would have fewer healthy voters than a
//!   majority of its voters is refused (removal) or waited on (addition,
//!   promotion, settings) (`keep-a-healthy-voting-majority`).
//!
//! Laid out by what it decides: `inputs` (the [`PlanInput`] it looks at and
//! how a pass builds it), `initiate` (the first config), `membership` (the
//! changes to an existing set, in the order [`plan`] takes them), `joining`
//! and `reconfig` (what a joining member and every reconfig must satisfy),
//! and `steps` (the [`Step`] it returns, and why it waits or refuses).

use std::ops::ControlFlow::{self, Break, Continue};

use crate::observe::{Observed, ObservedSet};

mod initiate;
mod inputs;
mod joining;
mod member_data;
mod member_settings;
mod membership;
mod reconfig;
mod steps;

#[cfg(test)]
mod mongod_rules;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod world;
#[cfg(test)]
mod world_volumes;

pub use inputs::{entries_to_record, LocalMemberFacts, PlanInput};
pub use steps::{
    Change, Refusal, Step, WaitReason, SECONDARY_CATCH_UP_PERIOD_SECS, STEP_DOWN_SECS,
};

use initiate::plan_initiate;
use member_data::{
    member_newly_added, member_resyncing, resync_too_stale_members, silence_emptied_members,
};
use member_settings::update_member_settings;
use membership::{
    add_wanted, delete_departed, hold_secondary_for_leaving_arbiter, member_catching_up_for_vote,
    promote_non_voters, readdress_members, rebalance_votes, remove_forgotten, remove_unwanted,
    report_leftovers, update_settings,
};
use reconfig::{check_voting_majority, pin_cluster_write_concern};

/// The one next step for this cluster.
///
/// Inside, each stage returns [`ControlFlow::Break`] with the step as soon as
/// it has one (work, a wait or a refusal); when every stage continues, the
/// set is in sync.
pub fn plan(input: &PlanInput) -> Step {
    match &input.observed {
        Observed::Unreachable => match plan_initiate(input) {
            Continue((config, on)) => Step::Initiate { config, on },
            Break(step) => step,
        },
        Observed::Configured(set) => match plan_membership(input, set) {
            Continue(()) => Step::InSync,
            Break(step) => step,
        },
    }
}

fn wait(reason: WaitReason) -> Step {
    Step::Wait { reason }
}

fn refuse(reason: Refusal) -> Step {
    Step::Refuse { reason }
}

/// The changes to an existing set, in the order they are taken: the set must
/// be this instance's, nothing changes without a voting majority, and the
/// first stage with something to do (or to wait for, or to refuse) decides.
fn plan_membership(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let config = &set.config;
    if config.set_name != input.set_name {
        return Break(refuse(Refusal::SetNameMismatch {
            observed: config.set_name.clone(),
            desired: input.set_name.clone(),
        }));
    }
    if let (Some(observed), Some(recorded)) =
        (&config.settings.replica_set_id, &input.known_replica_set_id)
    {
        if observed != recorded {
            return Break(refuse(Refusal::ReplicaSetIdMismatch {
                observed: observed.clone(),
                recorded: recorded.clone(),
            }));
        }
    }
    check_voting_majority(set)?;
    pin_cluster_write_concern(input, set)?;
    delete_departed(input, set)?;
    // A member whose address moved counts as down until its entry follows,
    // also one that is leaving: it takes part in the majority its removal and
    // the others' need.
    readdress_members(input, set)?;
    silence_emptied_members(input, set)?;
    resync_too_stale_members(input, set)?;
    // A primary that must leave but has no successor yet holds up nothing
    // (a later stage may make one); its wait is reported last.
    let forgotten_waits = remove_forgotten(input, set)?;
    let removal_waits = remove_unwanted(input, set)?;
    hold_secondary_for_leaving_arbiter(input, set)?;
    // A wanted member that is not ready yet, or refused, holds up neither
    // the next one, nor promotions, nor settings; its refusal or wait is
    // reported once nothing else is left to do.
    let waiting_member = add_wanted(input, set)?;
    promote_non_voters(input, set)?;
    rebalance_votes(input, set)?;
    update_member_settings(input, set)?;
    update_settings(input, set)?;
    report_leftovers(input, set)?;
    let syncing = || {
        member_resyncing(input, set)
            .or_else(|| member_newly_added(input, set))
            .or_else(|| member_catching_up_for_vote(input, set))
    };
    let held = forgotten_waits.or(removal_waits).or(waiting_member);
    match held.or_else(syncing) {
        Some(wait) => Break(wait),
        None => Continue(()),
    }
}

/// Whether this cluster's members are out of the set, as a leaving pass sees
/// it: the planner has nothing left to do, or no set can be read and no local
/// member holds a config.
pub fn has_left(input: &PlanInput, step: &Step) -> bool {
    let holds_config = |m: &LocalMemberFacts| m.probe.as_ref().is_some_and(|p| p.has_config);
    *step == Step::InSync
        || (input.observed == Observed::Unreachable
            && !input.local_members.iter().any(holds_config))
}
