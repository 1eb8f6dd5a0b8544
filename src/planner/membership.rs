//! Changes to an existing replica set, one per pass, in the order
//! [`plan_membership`](super::plan_membership) takes them: delete the
//! StatefulSets of members already out of the config, give readdressed
//! members their new host, remove unwanted members (stepping a primary down
//! first), add wanted ones, promote non-voters, rebalance votes across
//! clusters, bring `settings` in line, and report what this cluster cannot
//! fix on its own.

use std::ops::ControlFlow::{self, Break, Continue};

use super::joining::{check_set_name, new_member, ready_to_join, voter_priority};
use super::reconfig::{
    check_healthy_majority, check_reconfig_allowed, checked_reconfig, healthy_voters_after,
    next_version,
};
use super::{
    refuse, wait, Change, LocalMemberFacts, PlanInput, Refusal, Step, WaitReason,
    SECONDARY_CATCH_UP_PERIOD_SECS, STEP_DOWN_SECS,
};
use crate::api::PvcPolicy;
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::observe::{DroppedMember, DroppedMembers, MemberProbe, ObservedSet};
use crate::replset::{
    cluster_holds_no_majority, psa_rule_refuses, ConfigMember, ConfigSettings, MemberState,
    ReplicaSetConfig, MAX_MEMBERS, MAX_VOTERS,
};

/// Deletes the StatefulSet of an unwanted member once the primary's committed
/// config shows it out of the set (`docs/replica-set-rules.md`,
/// `never-delete-a-member-in-the-config`), once: a StatefulSet already being
/// deleted stays until the garbage collector has removed its pod.
pub(super) fn delete_departed(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let departed = input.local_members.iter().find(|m| {
        !input.is_wanted(m.slot)
            && m.stateful_set_exists
            && !m.stateful_set_deleting
            && m.address.is_some()
            && m.entry_in(&set.config).is_none()
    });
    let Some(departed) = departed else {
        return Continue(());
    };
    // Absent at its address is proof enough only for a member that recorded
    // its entry (and whose recorded `_id` is gone, or stands for a member
    // hostconf lists or a local member is), says who it is, or answers that
    // it holds no config; otherwise an entry nobody lists nor accounts for
    // may be it under an old address (readdressed after its last record).
    let accounted = input.accounted_ids(&set.config);
    let unlisted = |m: &&ConfigMember| input.hint(&m.host).is_none() && !accounted.contains(&m.id);
    let recorded_proves = departed.recorded.as_ref().is_some_and(|recorded| {
        !set.config
            .members
            .iter()
            .any(|m| m.id == recorded.id && unlisted(&m))
    });
    let knows_itself = recorded_proves
        || departed
            .probe
            .as_ref()
            .is_some_and(|p| p.me.is_some() || !p.has_config);
    if !knows_itself {
        if let Some(entry) = set.config.members.iter().find(unlisted) {
            return Break(refuse(Refusal::DepartureUnproven {
                slot: departed.slot,
                entry: entry.host.clone(),
            }));
        }
    }
    if set.primary.is_none() {
        return Break(wait(WaitReason::NoPrimary));
    }
    if !set.config_committed {
        return Break(wait(WaitReason::ConfigNotCommitted));
    }
    Break(Step::DeleteStatefulSet {
        slot: departed.slot,
        delete_pvc: input.pvc_policy == PvcPolicy::Delete,
    })
}

/// Removes the unwanted member with the highest index (the arbiter last),
/// stepping it down first when it is the primary (`docs/replica-set-rules.md`,
/// `step-down-before-removing-the-primary`). A primary without a successor
/// yet holds up nothing: its wait is returned for the caller to report once
/// nothing else can be done ([`hold_without_successor`]).
pub(super) fn remove_unwanted(
    input: &PlanInput,
    set: &ObservedSet,
) -> ControlFlow<Step, Option<Step>> {
    let mut unwanted: Vec<(&LocalMemberFacts, &MemberAddress)> = input
        .local_members
        .iter()
        .filter(|m| !input.is_wanted(m.slot))
        .filter_map(|m| m.entry_in(&set.config).map(|e| (m, &e.host)))
        .collect();
    unwanted.sort_by_key(|(m, _)| match m.slot {
        MemberSlot::Data(index) => (false, std::cmp::Reverse(index)),
        MemberSlot::Arbiter => (true, std::cmp::Reverse(0)),
    });
    let Some(&(leaving, host)) = unwanted.first() else {
        return Continue(None);
    };
    if is_torn_down(input, set) {
        return Continue(None);
    }
    let change = Change::RemoveMember { host: host.clone() };
    hold_without_successor(remove_member(
        input,
        set,
        host,
        leaving.address.as_ref(),
        change,
    ))
}

/// Removes a member of the cluster an SRE asked this cluster to forget
/// ([`PlanInput::forgotten_cluster`]), the highest `_id` first and the arbiter
/// last, with every rule of a removal: a primary is stepped down first, and
/// a removal that would leave fewer healthy voters than a majority is
/// refused (`docs/replica-set-rules.md`, `only-local-members-change`).
pub(super) fn remove_forgotten(
    input: &PlanInput,
    set: &ObservedSet,
) -> ControlFlow<Step, Option<Step>> {
    let Some(forgotten) = set
        .config
        .members
        .iter()
        .filter(|m| input.is_forgotten(&m.host))
        .min_by_key(|m| (m.arbiter_only, std::cmp::Reverse(m.id)))
    else {
        return Continue(None);
    };
    let host = &forgotten.host;
    let change = Change::RemoveForgottenMember { host: host.clone() };
    hold_without_successor(remove_member(input, set, host, Some(host), change))
}

/// A removal whose primary waits for a successor (`NoElectableSecondary`)
/// lets the stages after it go on: one of them may make that successor (a
/// silenced member given its vote back by `promote_non_voters`), and would
/// never run while the removal waited first.
fn hold_without_successor(removal: ControlFlow<Step>) -> ControlFlow<Step, Option<Step>> {
    match removal {
        Break(
            step @ Step::Wait {
                reason: WaitReason::NoElectableSecondary { .. },
            },
        ) => Continue(Some(step)),
        Break(step) => Break(step),
        Continue(()) => Continue(None),
    }
}

/// Removes `host` from the config (`change`), stepping it down first when it
/// is the primary (`docs/replica-set-rules.md`,
/// `step-down-before-removing-the-primary`); `answers_at`: where the member
/// answers now, which a step-down is sent to.
fn remove_member(
    input: &PlanInput,
    set: &ObservedSet,
    host: &MemberAddress,
    answers_at: Option<&MemberAddress>,
    change: Change,
) -> ControlFlow<Step> {
    if input.stepped_down_recently.as_ref() == Some(host)
        && set.primary.as_ref().is_none_or(|p| p == host)
    {
        return Break(wait(WaitReason::WaitingForNewPrimary {
            old_primary: host.clone(),
        }));
    }
    let primary = check_reconfig_allowed(set)?;
    if primary == host && answers_at != Some(host) {
        // Asked to step down at its old host, it would not answer.
        return Break(wait(WaitReason::PrimaryAddressChanged {
            primary: host.clone(),
            now_at: answers_at.cloned().unwrap_or_else(|| host.clone()),
        }));
    }
    if primary == host {
        // A successor must stay in the set: stepping down in favour of a member
        // that is leaving too only moves the problem (two clusters shrinking at
        // once would hand the primary back and forth).
        let stays =
            |h: &MemberAddress| input.hint(h).is_some() && !input.is_leaving(&set.config, h);
        return Break(step_down(input, set, host, stays));
    }

    let mut config = next_version(&set.config);
    config.members.retain(|m| &m.host != host);
    hold_secondary_priority_for_psa(input, &set.config, &mut config, primary);
    if psa_rule_refuses(&set.config, &config) {
        // The electable secondary is another cluster's: its cluster holds it
        // (`hold_secondary_for_leaving_arbiter`).
        if let Some(secondary) = config
            .members
            .iter()
            .find(|m| !m.arbiter_only && m.priority > 0.0 && &m.host != primary)
        {
            return Break(wait(WaitReason::SecondaryNotYetHeldForPsa {
                secondary: secondary.host.clone(),
            }));
        }
    }
    let (healthy, needed) = healthy_voters_after(&config, set, None);
    if healthy < needed {
        return Break(refuse(Refusal::WouldBreakVotingMajority {
            host: host.clone(),
            healthy,
            needed,
        }));
    }
    Break(checked_reconfig(set, config, change))
}

/// Steps `primary` down before a change it cannot take as primary (its
/// removal, or its own entry made unelectable), once a healthy electable
/// SECONDARY for which `stays` holds can take over; waits otherwise, and
/// while a step-down it refused is held back (asking again at once would
/// refuse writes again while mongod waits for a caught-up secondary).
pub(super) fn step_down(
    input: &PlanInput,
    set: &ObservedSet,
    primary: &MemberAddress,
    stays: impl Fn(&MemberAddress) -> bool,
) -> Step {
    if !set.has_electable_successor(primary, &stays) {
        return wait(WaitReason::NoElectableSecondary {
            primary: primary.clone(),
        });
    }
    if input.step_down_held.as_ref() == Some(primary) {
        let least_lag_secs = set
            .successor_lags(primary)
            .first()
            .and_then(|(_, lag)| *lag);
        return wait(WaitReason::StepDownRefused {
            primary: primary.clone(),
            least_lag_secs,
        });
    }
    Step::StepDown {
        primary: primary.clone(),
        step_down_secs: STEP_DOWN_SECS,
        secondary_catch_up_period_secs: SECONDARY_CATCH_UP_PERIOD_SECS,
    }
}

/// Whether the set is being torn down: every member of the config is a local
/// member that is leaving, and hostconf lists no member of another cluster.
/// No successor will ever stay, so the members are not removed one by one
/// (the last one, the primary, could never be): they go with their
/// StatefulSets.
fn is_torn_down(input: &PlanInput, set: &ObservedSet) -> bool {
    set.config
        .members
        .iter()
        .all(|m| input.is_leaving(&set.config, &m.host))
        && input
            .hostconf
            .members
            .iter()
            .all(|m| input.is_local(&m.address))
}

/// Gives a local member whose address changed (its Service recreated
/// with another nodePort, or the VIP changed) its new host in the entry it
/// already has: same `_id`, votes and priority, so no voting change and never
/// a second entry for one mongod (`docs/replica-set-rules.md`,
/// `one-entry-per-member`). The member must answer at its new address as a
/// member that may be in this set. The primary's own entry waits: its peers
/// cannot reach it at the old host and elect another primary first. A member
/// whose new address the config still names for another entry is passed
/// over (mongod keeps a host's `_id` across a reconfig), so a member that
/// took the port of one that moved elsewhere follows once that one did; when
/// no other can move (ports exchanged), the refusal says what to do.
pub(super) fn readdress_members(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let set_id = set.config.settings.replica_set_id.as_ref();
    let mut blocked = None;
    for facts in &input.local_members {
        let slot = facts.slot;
        let (Some(address), Some(entry)) = (facts.address.as_ref(), facts.entry_in(&set.config))
        else {
            continue;
        };
        if &entry.host == address {
            continue;
        }
        let Continue((host, probe)) = ready_to_join(input, slot) else {
            continue;
        };
        if let Some(holder) = set.config.member(host) {
            blocked.get_or_insert(Refusal::NewAddressHeldByAnotherEntry {
                from: entry.host.clone(),
                to: host.clone(),
                holder: holder.id,
            });
            continue;
        }
        check_set_name(input, host, probe)?;
        check_same_replica_set(host, probe, set_id)?;
        let primary = check_reconfig_allowed(set)?;
        if primary == &entry.host {
            return Break(wait(WaitReason::PrimaryAddressChanged {
                primary: entry.host.clone(),
                now_at: host.clone(),
            }));
        }
        // An empty mongod at the new address (its volume was lost too) takes
        // the entry without its vote (`an-emptied-member-never-votes`).
        let emptied = !probe.has_config && !entry.arbiter_only;
        let mut config = next_version(&set.config);
        for m in config.members.iter_mut().filter(|m| m.id == entry.id) {
            m.host = host.clone();
            if emptied {
                m.votes = 0;
                m.priority = 0.0;
            }
        }
        check_healthy_majority(&config, set, (!emptied).then_some(host))?;
        return Break(checked_reconfig(
            set,
            config,
            Change::ReaddressMember {
                from: entry.host.clone(),
                to: host.clone(),
            },
        ));
    }
    match blocked {
        Some(refusal) => Break(refuse(refusal)),
        None => Continue(()),
    }
}

/// Adds the first wanted member (index order, the arbiter last) that is not in
/// the config yet and runs and answers as a member that may join. A member not
/// ready yet, or refused (another set's name or data, dropped by a disaster
/// recovery, no room left, an arbiter that may not vote), is passed over: one
/// slot must not freeze the next one, promotions, vote balancing and settings.
/// The first refusal, else the first wait, is returned for the caller to
/// report once nothing else can be done.
pub(super) fn add_wanted(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step, Option<Step>> {
    let set_id = set
        .config
        .settings
        .replica_set_id
        .as_ref()
        .or(input.known_replica_set_id.as_ref());
    let mut held = None;
    for slot in input.wanted_slots() {
        let Some(facts) = input.facts(slot) else {
            hold(&mut held, wait(WaitReason::PodNotRunning { slot }));
            continue;
        };
        let Some(address) = facts.address.as_ref() else {
            hold(&mut held, wait(WaitReason::MemberAddressUnknown { slot }));
            continue;
        };
        if set.config.contains(address) || facts.entry_in(&set.config).is_some() {
            continue;
        }
        let (host, probe) = match ready_to_join(input, slot) {
            Continue(ready) => ready,
            Break(not_ready) => {
                hold(&mut held, not_ready);
                continue;
            }
        };
        if let Break(not_this_one) = check_may_join(input, host, probe, set_id) {
            hold(&mut held, not_this_one);
            continue;
        }
        // A member of this set that is not in the config under its address may
        // be in it under an address it had before its entry was recorded:
        // adding it again would give one mongod two entries.
        if let Some(entry) = input.unaccounted_local_entry(&set.config) {
            if probe.has_config {
                return Break(refuse(Refusal::UnaccountedLocalMember {
                    host: entry.host.clone(),
                }));
            }
        }
        check_reconfig_allowed(set)?;
        if set.config.members.len() >= MAX_MEMBERS {
            hold(
                &mut held,
                refuse(Refusal::TooManyMembers { host: host.clone() }),
            );
            continue;
        }
        let arbiter = slot == MemberSlot::Arbiter;
        // A data member back on a volume of this set's (it holds a config)
        // may be too far behind to catch up: briefly SECONDARY, then stale.
        // With a vote, that moment would count it towards the majority and
        // the next leave the set short of one; it joins without, and
        // `promote_non_voters` gives the vote once it is a caught-up SECONDARY.
        let may_vote = input.vote_is_free(&set.config, host) && (arbiter || !probe.has_config);
        if arbiter && !may_vote {
            let host = host.clone();
            let reason = if set.config.voting_member_count() >= MAX_VOTERS {
                Refusal::NoVoteForArbiter { host }
            } else {
                Refusal::ArbiterVoteWouldGiveClusterMajority { host }
            };
            hold(&mut held, refuse(reason));
            continue;
        }
        let mut config = next_version(&set.config);
        let member = new_member(
            input,
            set.config.smallest_unused_id(),
            host.clone(),
            arbiter,
            may_vote,
        );
        config.members.push(member);
        hold_priority_for_psa(&set.config, &mut config, host);
        check_healthy_majority(&config, set, Some(host))?;
        return Break(checked_reconfig(
            set,
            config,
            Change::AddMember { host: host.clone() },
        ));
    }
    Continue(held)
}

/// Keeps what a passed-over slot is held by: the first refusal, which needs
/// someone to act, in preference to the first wait.
fn hold(held: &mut Option<Step>, step: Step) {
    let refused = |s: &Step| matches!(s, Step::Refuse { .. });
    if held.as_ref().is_none_or(|h| !refused(h) && refused(&step)) {
        *held = Some(step);
    }
}

/// Whether a member that answers may join this set: this set's name, not
/// dropped by a disaster recovery, and this set's data or none.
fn check_may_join(
    input: &PlanInput,
    host: &MemberAddress,
    probe: &MemberProbe,
    set_id: Option<&String>,
) -> ControlFlow<Step> {
    check_set_name(input, host, probe)?;
    check_not_dropped(input, host, probe)?;
    check_same_replica_set(host, probe, set_id)
}

/// A member a disaster recovery dropped, or one removed with its cluster
/// forgotten on request, joins only once resynced from scratch (it holds no
/// config then): its data may have diverged (`docs/disaster-recovery.md`).
fn check_not_dropped(
    input: &PlanInput,
    host: &MemberAddress,
    probe: &MemberProbe,
) -> ControlFlow<Step> {
    if !probe.has_config {
        return Continue(());
    }
    let dropped = match &input.dropped_members {
        DroppedMembers::Read(dropped) => dropped,
        DroppedMembers::NotRead | DroppedMembers::Unreadable => {
            return Break(wait(WaitReason::DroppedMembersUnreadable {
                host: host.clone(),
            }));
        }
    };
    let is_it = |d: &&DroppedMember| &d.host == host || probe.me.as_ref() == Some(&d.host);
    match dropped.iter().find(is_it) {
        Some(d) if d.forgotten => Break(refuse(Refusal::ForgottenWithItsCluster {
            host: host.clone(),
            forgotten: d.recovery.clone(),
        })),
        Some(d) => Break(refuse(Refusal::DroppedByRecovery {
            host: host.clone(),
            recovery: d.recovery.clone(),
        })),
        None => Continue(()),
    }
}

/// A member that holds a config may join only with this set's `replicaSetId`
/// (`docs/replica-set-rules.md`, `never-add-a-member-of-another-set`); one
/// that holds none joins and re-syncs.
fn check_same_replica_set(
    host: &MemberAddress,
    probe: &MemberProbe,
    set_id: Option<&String>,
) -> ControlFlow<Step> {
    match (&probe.replica_set_id, set_id) {
        (Some(member_id), Some(set_id)) if member_id != set_id => {
            Break(refuse(Refusal::MemberHoldsAnotherReplicaSet {
                host: host.clone(),
                member_replica_set_id: member_id.clone(),
                replica_set_id: set_id.clone(),
            }))
        }
        (Some(_), Some(_)) => Continue(()),
        _ if probe.has_config => Break(wait(WaitReason::MemberIdentityUnknown {
            host: host.clone(),
        })),
        _ => Continue(()),
    }
}

/// How far behind the primary a SECONDARY may be and still be given a vote:
/// one that is catching up, not one whose data the oplog left behind.
const PROMOTE_WITHIN_LAG_SECS: i64 = 10;

/// Gives a vote to the first wanted local non-voter that is a healthy
/// SECONDARY within [`PROMOTE_WITHIN_LAG_SECS`] of the primary, hostconf does
/// not pin to 0 votes, and may vote: fewer than seven
/// vote and the vote leaves its cluster without a majority (checked again on
/// every pass, so a non-voter is promoted once other clusters added voters).
pub(super) fn promote_non_voters(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    for slot in input.wanted_slots() {
        let Some(member) = input.facts(slot).and_then(|f| f.entry_in(&set.config)) else {
            continue;
        };
        let host = &member.host;
        let hint = input.hint(host);
        let secondary = set.members.get(host).is_some_and(|h| {
            h.healthy
                && h.state == MemberState::Secondary
                && h.lag_secs.is_some_and(|lag| lag <= PROMOTE_WITHIN_LAG_SECS)
        });
        if member.votes > 0
            || member.arbiter_only
            || hint.and_then(|h| h.votes) == Some(0)
            || !secondary
            || !input.vote_is_free(&set.config, host)
        {
            continue;
        }
        check_reconfig_allowed(set)?;
        let mut config = next_version(&set.config);
        for m in config.members.iter_mut().filter(|m| &m.host == host) {
            m.votes = 1;
            m.priority = voter_priority(1, m.hidden, hint);
        }
        hold_priority_for_psa(&set.config, &mut config, host);
        check_healthy_majority(&config, set, Some(host))?;
        return Break(checked_reconfig(
            set,
            config,
            Change::PromoteMember { host: host.clone() },
        ));
    }
    raise_held_priority(input, set)
}

/// A wanted local non-voter that [`promote_non_voters`] gives a vote once it
/// is a caught-up SECONDARY, while it is not one yet (just added, syncing,
/// or further behind): the pass waits for it, so that the vote follows a
/// short wait instead of the next pass at rest. Reported only once nothing
/// else is left to do, so it holds up no other step.
pub(super) fn member_catching_up_for_vote(input: &PlanInput, set: &ObservedSet) -> Option<Step> {
    input.wanted_slots().into_iter().find_map(|slot| {
        let member = input.facts(slot)?.entry_in(&set.config)?;
        let host = &member.host;
        let wanted_vote = member.votes == 0
            && !member.arbiter_only
            && input.hint(host).and_then(|h| h.votes) != Some(0)
            && input.vote_is_free(&set.config, host);
        wanted_vote.then(|| wait(WaitReason::MemberCatchingUpForVote { host: host.clone() }))
    })
}

/// The first of `rs.reconfigForPSASet`'s two steps: when giving `host` its
/// vote with its priority would make a primary-secondary-arbiter set whose
/// secondary is electable from a config with a single writable voter (which
/// mongod refuses, `replset::psa_rule_refuses`), it gets the vote with
/// priority 0; [`raise_held_priority`] gives the priority once that config
/// is in place (`docs/replica-set-rules.md`, `psa-voter-electable-in-two-steps`).
fn hold_priority_for_psa(
    old: &ReplicaSetConfig,
    config: &mut ReplicaSetConfig,
    host: &MemberAddress,
) {
    if psa_rule_refuses(old, config) {
        for m in config.members.iter_mut().filter(|m| &m.host == host) {
            m.priority = 0.0;
        }
    }
}

/// The same remedy for a removal: leaving primary-secondary-arbiter from a
/// config with a single writable voter (one of two arbiters removed from
/// {P, S, A, A}) is refused while the secondary is electable, so a local
/// secondary gets priority 0 in the removing reconfig and
/// [`raise_held_priority`] gives it back from the PSA config, where mongod
/// allows it. A remote secondary is held by its own cluster
/// ([`hold_secondary_for_leaving_arbiter`]).
fn hold_secondary_priority_for_psa(
    input: &PlanInput,
    old: &ReplicaSetConfig,
    config: &mut ReplicaSetConfig,
    primary: &MemberAddress,
) {
    if psa_rule_refuses(old, config) {
        let secondaries = config
            .members
            .iter_mut()
            .filter(|m| !m.arbiter_only && &m.host != primary && input.is_local(&m.host));
        for m in secondaries {
            m.priority = 0.0;
        }
    }
}

/// Gives a local secondary priority 0 while an arbiter of another cluster
/// leaves whose removal mongod's PSA rule refuses as long as the secondary is
/// electable (one of two arbiters leaving {P, S, A, A}): each cluster changes
/// only its own members, so the arbiter's cluster waits for this hold, and
/// [`raise_held_priority`] gives the priority back once the arbiter is out.
pub(super) fn hold_secondary_for_leaving_arbiter(
    input: &PlanInput,
    set: &ObservedSet,
) -> ControlFlow<Step> {
    let Some(host) = set
        .config
        .members
        .iter()
        .filter(|m| input.is_local(&m.host) && !m.arbiter_only && m.priority > 0.0)
        .filter(|m| set.primary.as_ref() != Some(&m.host))
        .map(|m| &m.host)
        .find(|host| held_for_leaving_arbiter(input, &set.config, host))
    else {
        return Continue(());
    };
    check_reconfig_allowed(set)?;
    let mut config = next_version(&set.config);
    for m in config.members.iter_mut().filter(|m| &m.host == host) {
        m.priority = 0.0;
    }
    check_healthy_majority(&config, set, None)?;
    Break(checked_reconfig(
        set,
        config,
        Change::HoldPriority { host: host.clone() },
    ))
}

/// Whether data member `host` must stay at priority 0: electable, it would
/// make mongod's PSA rule refuse the removal of an arbiter that is leaving
/// (this cluster's unwanted one, or another cluster's that hostconf no
/// longer lists).
pub(super) fn held_for_leaving_arbiter(
    input: &PlanInput,
    config: &ReplicaSetConfig,
    host: &MemberAddress,
) -> bool {
    let leaves = |arbiter: &MemberAddress| {
        if input.is_local(arbiter) {
            input.is_leaving(config, arbiter)
        } else {
            input.hint(arbiter).is_none()
        }
    };
    config
        .members
        .iter()
        .filter(|m| m.arbiter_only && leaves(&m.host))
        .any(|arbiter| {
            let mut after = config.clone();
            after.members.retain(|m| m.host != arbiter.host);
            for m in after.members.iter_mut().filter(|m| &m.host == host) {
                m.priority = m.priority.max(1.0);
            }
            psa_rule_refuses(config, &after)
        })
}

/// The second step: a wanted local voter that holds priority 0 while it
/// should have one (hostconf's, or 1) gets it, once it no longer is
/// `newlyAdded`.
fn raise_held_priority(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    for slot in input.wanted_slots() {
        let Some(member) = input.facts(slot).and_then(|f| f.entry_in(&set.config)) else {
            continue;
        };
        let host = &member.host;
        let wanted = voter_priority(member.votes, member.hidden, input.hint(host));
        if member.arbiter_only
            || member.votes == 0
            || member.priority > 0.0
            || wanted == 0.0
            || held_for_leaving_arbiter(input, &set.config, host)
        {
            continue;
        }
        check_reconfig_allowed(set)?;
        let mut config = next_version(&set.config);
        for m in config.members.iter_mut().filter(|m| &m.host == host) {
            m.priority = wanted;
        }
        check_healthy_majority(&config, set, None)?;
        return Break(checked_reconfig(
            set,
            config,
            Change::RaisePriority { host: host.clone() },
        ));
    }
    Continue(())
}

/// Gives up one of this cluster's votes while it holds a majority of them and
/// a member of another cluster could take that vote (a healthy non-voting
/// SECONDARY that hostconf does not pin to 0, whose vote would then be free):
/// a config written from a stale hostconf that listed only this cluster would
/// otherwise keep every vote forever. One voting change per reconfig: the
/// other cluster promotes its member on its next pass (`docs/replica-set-rules.md`,
/// `no-cluster-gains-a-vote-majority`). Never the primary's vote.
pub(super) fn rebalance_votes(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let voters = || set.config.voters().map(|m| &m.host);
    let clusters = input.cluster_count();
    if cluster_holds_no_majority(voters(), &input.local_vip, clusters) {
        return Continue(());
    }
    let candidate = set
        .config
        .members
        .iter()
        .filter(|m| !input.is_local(&m.host) && m.votes == 0 && !m.arbiter_only && !m.hidden)
        .filter(|m| input.hint(&m.host).is_some_and(|h| h.votes != Some(0)))
        .find(|m| {
            set.members
                .get(&m.host)
                .is_some_and(|h| h.healthy && h.state == MemberState::Secondary)
        });
    let Some(candidate) = candidate else {
        return Continue(());
    };
    let give_up = set.config.members.iter().rev().find(|m| {
        input.is_local(&m.host)
            && m.votes > 0
            && !m.arbiter_only
            && Some(&m.host) != set.primary.as_ref()
    });
    let Some(give_up) = give_up else {
        return Continue(());
    };
    let mut config = next_version(&set.config);
    for m in config.members.iter_mut().filter(|m| m.host == give_up.host) {
        m.votes = 0;
        m.priority = 0.0;
    }
    if !input.vote_is_free(&config, &candidate.host) {
        return Continue(());
    }
    check_reconfig_allowed(set)?;
    check_healthy_majority(&config, set, None)?;
    Break(checked_reconfig(
        set,
        config,
        Change::DemoteMember {
            host: give_up.host.clone(),
        },
    ))
}

/// Brings `settings` to the spec's values, keeping `replicaSetId` — in the
/// rsInit cluster only: the settings belong to the whole set, and two clusters
/// whose specs differ (a propagation lag, an override) would otherwise revert
/// each other without end (`docs/replica-set-rules.md`,
/// `settings-written-by-the-rs-init-cluster-only`). The others report the
/// difference in status.
pub(super) fn update_settings(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    if !input.rs_init || set.config.settings.matches(&input.settings) {
        return Continue(());
    }
    check_reconfig_allowed(set)?;
    let mut config = next_version(&set.config);
    config.settings =
        ConfigSettings::from_desired(&input.settings, set.config.settings.replica_set_id.clone());
    check_healthy_majority(&config, set, None)?;
    Break(checked_reconfig(set, config, Change::UpdateSettings))
}

/// What this cluster cannot fix on its own: a local-VIP host in the config that
/// no local member accounts for (`docs/replica-set-rules.md`,
/// `only-local-members-change`), and an unwanted StatefulSet whose address is
/// unknown (`never-delete-a-member-in-the-config`). Such a host that nobody
/// answers at and that holds no vote is removed instead: a member added at an
/// address its Service left between the plan and the reconfig, which joined
/// again at its new one; it counts in no majority, and should a local member
/// it stood for come back, that member holds this set's config and is added
/// again.
pub(super) fn report_leftovers(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    if let Some(m) = input.unaccounted_local_entry(&set.config) {
        let answers = set.members.get(&m.host).is_some_and(|s| s.healthy);
        if m.votes == 0 && !answers {
            check_reconfig_allowed(set)?;
            let mut config = next_version(&set.config);
            config.members.retain(|e| e.id != m.id);
            check_healthy_majority(&config, set, None)?;
            let change = Change::RemoveUnaccountedEntry {
                host: m.host.clone(),
            };
            return Break(checked_reconfig(set, config, change));
        }
        return Break(refuse(Refusal::UnaccountedLocalMember {
            host: m.host.clone(),
        }));
    }
    if let Some(m) = input
        .local_members
        .iter()
        .find(|m| !input.is_wanted(m.slot) && m.stateful_set_exists && m.address.is_none())
    {
        return Break(refuse(Refusal::StatefulSetAddressUnknown { slot: m.slot }));
    }
    Continue(())
}
