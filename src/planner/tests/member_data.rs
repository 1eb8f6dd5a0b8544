//! A member whose data is gone votes no more until it is SECONDARY again.

use super::*;

/// Three local voters in sync (0 primary) and two remote ones, where local
/// member 2 answers as `probe` and the primary sees it as `state`.
fn member_2_answers(probe: MemberProbe, state: MemberState) -> PlanInput {
    let (mut facts, mut set) = three_local_in_sync(2);
    facts[2].probe = Some(probe);
    set.members
        .insert(local(2), member_status(state, true, None));
    input(3, facts, Observed::Configured(set))
}

fn vote_of(config: &ReplicaSetConfig, host: &MemberAddress) -> (u8, f64) {
    let m = config.member(host).expect("entry kept");
    (m.votes, m.priority)
}

#[test]
fn a_voter_that_answers_empty_loses_its_vote_first() {
    for (probe, state) in [
        (empty_probe(), MemberState::Startup),
        (
            member_probe(SET_ID, MemberState::Startup2),
            MemberState::Startup2,
        ),
        (
            member_probe(SET_ID, MemberState::Secondary),
            MemberState::Startup2,
        ),
    ] {
        let input = member_2_answers(probe, state);
        let old = match &input.observed {
            Observed::Configured(set) => set.config.clone(),
            Observed::Unreachable => unreachable!(),
        };
        let (config, change) = expect_reconfig(plan(&input));
        assert_eq!(change, Change::SilenceEmptiedMember { host: local(2) });
        assert_eq!(vote_of(&config, &local(2)), (0, 0.0));
        assert_eq!(voting_changes(&old, &config), 1);
        assert_eq!(hosts(&config).len(), old.members.len(), "nobody removed");
    }
}

#[test]
fn an_emptied_member_gets_its_vote_back_once_secondary() {
    let (facts, mut set) = three_local_in_sync(2);
    for m in set.config.members.iter_mut().filter(|m| m.host == local(2)) {
        m.votes = 0;
        m.priority = 0.0;
    }
    let (_, change) = expect_reconfig(plan(&input(3, facts, Observed::Configured(set))));
    assert_eq!(change, Change::PromoteMember { host: local(2) });
}

#[test]
fn an_emptied_member_keeps_its_vote_while_taking_it_would_break_the_majority() {
    let mut input = member_2_answers(empty_probe(), MemberState::Startup);
    if let Observed::Configured(set) = &mut input.observed {
        for host in [remote(0), remote(1)] {
            set.members
                .insert(host, member_status(MemberState::Down, false, None));
        }
    }
    assert!(matches!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::NotEnoughHealthyVoters { .. }
        }
    ));
}

#[test]
fn a_newly_added_member_in_initial_sync_is_left_to_mongod() {
    let mut input = member_2_answers(
        member_probe(SET_ID, MemberState::Startup2),
        MemberState::Startup2,
    );
    if let Observed::Configured(set) = &mut input.observed {
        for m in set.config.members.iter_mut().filter(|m| m.host == local(2)) {
            m.newly_added = true;
        }
    }
    let step = plan(&input);
    assert!(
        !matches!(
            step,
            Step::Reconfig {
                change: Change::SilenceEmptiedMember { .. },
                ..
            }
        ),
        "{step:?}"
    );
}

fn too_stale_member_2() -> PlanInput {
    let mut probe = member_probe(SET_ID, MemberState::Recovering);
    probe.too_stale = true;
    member_2_answers(probe, MemberState::Recovering)
}

#[test]
fn a_too_stale_member_is_resynced_while_the_others_are_a_majority() {
    assert_eq!(
        plan(&too_stale_member_2()),
        Step::ResyncMember {
            slot: MemberSlot::Data(2),
            host: local(2)
        }
    );
}

#[test]
fn a_too_stale_member_keeps_its_data_while_the_others_are_no_majority() {
    let mut input = too_stale_member_2();
    if let Observed::Configured(set) = &mut input.observed {
        for host in [remote(0), remote(1)] {
            set.members
                .insert(host, member_status(MemberState::Down, false, None));
        }
    }
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::TooStaleMemberWaitsForMajority {
                host: local(2),
                healthy: 2,
                needed: 3
            }
        }
    );
}

/// A slot scaled down and up again comes back on its retained volume as a
/// new entry, which mongod marks `newlyAdded`: it votes for nothing, so the
/// majority its resync must keep is that of the other voters. Three voters
/// and the re-added member, one voter down: the two healthy ones are
/// mongod's majority, and waiting for a third would hold the member
/// RECOVERING, and with it every reconfig, until the down voter returns.
#[test]
fn a_re_added_too_stale_member_is_resynced_with_the_majority_mongod_counts() {
    let (mut facts, mut set) = three_local_in_sync(1);
    let mut probe = member_probe(SET_ID, MemberState::Recovering);
    probe.too_stale = true;
    facts[2].probe = Some(probe);
    for m in set.config.members.iter_mut().filter(|m| m.host == local(2)) {
        m.newly_added = true;
    }
    set.members
        .insert(local(2), member_status(MemberState::Recovering, true, None));
    set.members
        .insert(remote(0), member_status(MemberState::Down, false, None));
    assert_eq!(
        plan(&input(3, facts, Observed::Configured(set))),
        Step::ResyncMember {
            slot: MemberSlot::Data(2),
            host: local(2)
        }
    );
}

#[test]
fn a_member_merely_recovering_keeps_its_data() {
    let input = member_2_answers(
        member_probe(SET_ID, MemberState::Recovering),
        MemberState::Recovering,
    );
    assert!(!matches!(plan(&input), Step::ResyncMember { .. }));
}
