//! Brings the entries of local members already in the set to what hostconf
//! lists for them: `votes: 0` (a vote taken; a vote given is
//! `promote_non_voters`' work, under the vote-balancing rules), `priority`,
//! `hidden` and `tags`. Without it, hostconf reached a member only as it
//! joined, and a later change (demoting a disaster-recovery site, say) did
//! nothing, silently (`docs/replica-set-rules.md`, *Settings of existing
//! members*).

use std::ops::ControlFlow::{self, Break, Continue};

use super::joining::voter_priority;
use super::membership::{held_for_leaving_arbiter, step_down};
use super::reconfig::{
    check_healthy_majority, check_reconfig_allowed, checked_reconfig, next_version,
};
use super::{wait, Change, PlanInput, Step, WaitReason};
use crate::hostconf::{HostConfMember, MemberAddress};
use crate::observe::ObservedSet;
use crate::replset::ConfigMember;

/// Changes one local member per reconfig (at most one voting change), the
/// primary last: each change keeps a healthy voting majority, and the primary
/// is stepped down first — to a successor hostconf keeps electable — when its
/// own change would make it unelectable (mongod refuses a reconfig that does,
/// 104 NodeNotElectable). Arbiters and members still `newlyAdded` are left as
/// they are; so are other clusters' members (`only-local-members-change`).
pub(super) fn update_member_settings(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let mut differing: Vec<(&ConfigMember, ConfigMember)> = input
        .wanted_slots()
        .into_iter()
        .filter_map(|slot| input.facts(slot)?.entry_in(&set.config))
        .filter(|entry| !entry.arbiter_only && !entry.newly_added)
        .filter_map(|entry| {
            let mut wanted = as_hostconf_lists(entry, input.hint(&entry.host)?);
            if entry.priority == 0.0 && held_for_leaving_arbiter(input, &set.config, &entry.host) {
                wanted.priority = 0.0;
            }
            (!same_settings(entry, &wanted)).then_some((entry, wanted))
        })
        .collect();
    differing.sort_by_key(|(entry, _)| set.primary.as_ref() == Some(&entry.host));
    let Some((entry, wanted)) = differing.into_iter().next() else {
        return Continue(());
    };
    let host = &entry.host;
    if input.stepped_down_recently.as_ref() == Some(host)
        && set.primary.as_ref().is_none_or(|p| p == host)
    {
        return Break(wait(WaitReason::WaitingForNewPrimary {
            old_primary: host.clone(),
        }));
    }
    let primary = check_reconfig_allowed(set)?;
    if primary == host && !wanted.is_electable() {
        let stays = |h: &MemberAddress| {
            input.hint(h).is_some_and(hostconf_keeps_electable) && !input.is_leaving(&set.config, h)
        };
        return Break(step_down(input, set, host, stays));
    }
    let mut config = next_version(&set.config);
    for m in config.members.iter_mut().filter(|m| m.id == entry.id) {
        *m = wanted.clone();
    }
    check_healthy_majority(&config, set, None)?;
    Break(checked_reconfig(
        set,
        config,
        Change::UpdateMember { host: host.clone() },
    ))
}

/// `entry` with hostconf's settings: no vote when pinned to 0 (else its vote
/// as it is), the priority a member with that vote and visibility joins with,
/// hostconf's `hidden` and `tags`.
fn as_hostconf_lists(entry: &ConfigMember, hint: &HostConfMember) -> ConfigMember {
    let votes = if hint.votes == Some(0) {
        0
    } else {
        entry.votes
    };
    ConfigMember {
        votes,
        priority: voter_priority(votes, hint.hidden, Some(hint)),
        hidden: hint.hidden,
        tags: hint.tags.clone(),
        ..entry.clone()
    }
}

fn same_settings(a: &ConfigMember, b: &ConfigMember) -> bool {
    a.votes == b.votes && a.priority == b.priority && a.hidden == b.hidden && a.tags == b.tags
}

/// Whether hostconf leaves a member electable (a successor that hostconf is
/// about to make unelectable would only hand the primary on again).
fn hostconf_keeps_electable(hint: &HostConfMember) -> bool {
    hint.votes != Some(0) && !hint.hidden && hint.priority != Some(0.0)
}
