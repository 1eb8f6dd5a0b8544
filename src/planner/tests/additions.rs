//! Reconfig preconditions, and adding wanted members one at a time.

use super::votes::an_arbiter_whose_vote_would_give_its_cluster_a_majority;
use super::*;

#[test]
fn waits_without_a_primary() {
    let (mut facts, mut set) = three_local_in_sync(0);
    facts.push(data(3, Some(empty_probe())));
    set.primary = None;
    set.config_committed = false;
    let step = plan(&input(4, facts, Observed::Configured(set)));
    assert_eq!(
        step,
        Step::Wait {
            reason: WaitReason::NoPrimary
        }
    );
}

#[test]
fn waits_while_the_config_is_not_committed() {
    let (mut facts, mut set) = three_local_in_sync(0);
    facts.push(data(3, Some(empty_probe())));
    set.config_committed = false;
    let step = plan(&input(4, facts, Observed::Configured(set)));
    assert_eq!(
        step,
        Step::Wait {
            reason: WaitReason::ConfigNotCommitted
        }
    );
}

#[test]
fn waits_while_a_newly_added_member_syncs() {
    let (mut facts, mut set) = three_local_in_sync(1);
    facts.push(data(3, Some(empty_probe())));
    set.config.members[3].newly_added = true;
    let step = plan(&input(4, facts, Observed::Configured(set)));
    assert_eq!(
        step,
        Step::Wait {
            reason: WaitReason::NewlyAddedMemberSyncing { host: remote(0) }
        }
    );
}

#[test]
fn adds_members_one_at_a_time_in_index_order() {
    let (mut facts, set) = three_local_in_sync(0);
    facts.push(data(4, Some(empty_probe())));
    facts.push(data(3, Some(empty_probe())));
    let old = set.config.clone();
    let (new, change) = expect_reconfig(plan(&input(5, facts, Observed::Configured(set))));
    assert_eq!(change, Change::AddMember { host: local(3) });
    assert_eq!(new.version, old.version + 1);
    assert_eq!(new.members.len(), old.members.len() + 1);
    assert_eq!(voting_changes(&old, &new), 1);
}

#[test]
fn adds_a_member_with_the_smallest_unused_id() {
    let (mut facts, mut set) = three_local_in_sync(0);
    set.config.members[1].id = 7;
    facts.push(data(3, Some(empty_probe())));
    let (new, _) = expect_reconfig(plan(&input(4, facts, Observed::Configured(set))));
    assert_eq!(new.member(&local(3)).map(|m| m.id), Some(1));
}

#[test]
fn eighth_voter_joins_without_a_vote() {
    let (mut facts, set) = three_local_in_sync(4);
    facts.push(data(3, Some(empty_probe())));
    let (new, change) = expect_reconfig(plan(&input(4, facts, Observed::Configured(set))));
    assert_eq!(change, Change::AddMember { host: local(3) });
    let joined = new.member(&local(3)).expect("added");
    assert_eq!((joined.votes, joined.priority), (0, 0.0));
    assert_eq!(new.voting_member_count(), 7);
}

#[test]
fn waits_for_the_pod_before_adding() {
    let (mut facts, set) = three_local_in_sync(0);
    let mut pending = data(3, None);
    pending.pod_running = false;
    facts.push(pending);
    assert_eq!(
        plan(&input(4, facts, Observed::Configured(set))),
        Step::Wait {
            reason: WaitReason::PodNotRunning {
                slot: MemberSlot::Data(3)
            }
        }
    );
}

#[test]
fn waits_for_a_member_that_does_not_answer() {
    let (mut facts, set) = three_local_in_sync(0);
    facts.push(data(3, None));
    assert_eq!(
        plan(&input(4, facts, Observed::Configured(set))).reason(),
        "MemberNotAnswering"
    );
}

#[test]
fn waits_for_a_member_whose_service_has_no_address_yet() {
    let (mut facts, set) = three_local_in_sync(0);
    let mut unknown = data(3, None);
    unknown.address = None;
    facts.push(unknown);
    assert_eq!(
        plan(&input(4, facts, Observed::Configured(set))).reason(),
        "MemberAddressUnknown"
    );
}

#[test]
fn adds_a_member_that_comes_back_empty_instead_of_initiating() {
    let (mut facts, set) = three_local_in_sync(0);
    facts.push(data(3, Some(empty_probe())));
    let mut input = input(4, facts, Observed::Configured(set));
    input.rs_init = true;
    let (_, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::AddMember { host: local(3) });
}

#[test]
fn adds_a_removed_member_of_this_set_without_a_vote_until_it_has_caught_up() {
    // Its old data may be too far behind to catch up: briefly SECONDARY,
    // then stale. With a vote it would count towards the majority, then not.
    let (mut facts, set) = three_local_in_sync(0);
    facts.push(data(3, Some(member_probe(SET_ID, MemberState::Removed))));
    let (new, change) = expect_reconfig(plan(&input(4, facts.clone(), Observed::Configured(set))));
    assert_eq!(change, Change::AddMember { host: local(3) });
    let added = new.member(&local(3)).expect("added");
    assert_eq!((added.votes, added.priority), (0, 0.0));

    let mut joined = healthy(new, &local(0));
    let lagging = member_status(MemberState::Secondary, true, Some(600));
    joined.members.insert(local(3), lagging);
    facts[3] = data(3, Some(member_probe(SET_ID, MemberState::Secondary)));
    let step = plan(&input(
        4,
        facts.clone(),
        Observed::Configured(joined.clone()),
    ));
    // Not promoted yet, and not in sync: the pass waits for it, so the
    // vote follows a short wait rather than the next pass at rest.
    assert_eq!(
        step,
        wait(WaitReason::MemberCatchingUpForVote { host: local(3) })
    );
    joined.members.get_mut(&local(3)).unwrap().lag_secs = Some(1);
    let (_, change) = expect_reconfig(plan(&input(4, facts, Observed::Configured(joined))));
    assert_eq!(change, Change::PromoteMember { host: local(3) });
}

#[test]
fn an_empty_member_joins_with_a_vote() {
    let (mut facts, set) = three_local_in_sync(0);
    facts.push(data(3, Some(empty_probe())));
    let (new, _) = expect_reconfig(plan(&input(4, facts, Observed::Configured(set))));
    assert_eq!(new.member(&local(3)).expect("added").votes, 1);
}

#[test]
fn a_member_a_disaster_recovery_dropped_is_refused_until_resynced_from_scratch() {
    let (mut facts, set) = three_local_in_sync(0);
    facts.push(data(3, Some(member_probe(SET_ID, MemberState::Removed))));
    let mut input = input(4, facts, Observed::Configured(set));
    assert!(input.needs_dropped_members());
    let recovery = "forced in cluster 10.0.0.9".to_string();
    input.dropped_members = DroppedMembers::Read(vec![DroppedMember {
        host: local(3),
        recovery: recovery.clone(),
        forgotten: false,
    }]);
    let step = plan(&input);
    assert_eq!(
        step,
        Step::Refuse {
            reason: Refusal::DroppedByRecovery {
                host: local(3),
                recovery
            }
        }
    );
    assert!(step
        .to_string()
        .contains("delete its PersistentVolumeClaim"));

    // Back before it learnt the forced config: it still shows the set's id
    // and its old state, and is refused all the same.
    input.local_members[3].probe = Some(member_probe(SET_ID, MemberState::Secondary));
    assert_eq!(plan(&input).reason(), "DroppedByRecovery");

    // Unknown whether it was dropped: not added.
    input.dropped_members = DroppedMembers::Unreadable;
    assert_eq!(plan(&input).reason(), "DroppedMembersUnreadable");
    input.dropped_members = DroppedMembers::NotRead;
    assert_eq!(plan(&input).reason(), "DroppedMembersUnreadable");

    // Resynced from scratch (an empty volume: no config), it joins.
    input.local_members[3].probe = Some(empty_probe());
    assert!(!input.needs_dropped_members());
    let (_, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::AddMember { host: local(3) });
}

#[test]
fn refuses_a_member_holding_another_replica_sets_data() {
    let (mut facts, set) = three_local_in_sync(0);
    facts.push(data(
        3,
        Some(member_probe("another-set", MemberState::Removed)),
    ));
    assert_eq!(
        plan(&input(4, facts, Observed::Configured(set))),
        Step::Refuse {
            reason: Refusal::MemberHoldsAnotherReplicaSet {
                host: local(3),
                member_replica_set_id: "another-set".to_owned(),
                replica_set_id: SET_ID.to_owned(),
            }
        }
    );
}

#[test]
fn waits_when_a_member_with_a_config_does_not_tell_its_replica_set_id() {
    let (mut facts, set) = three_local_in_sync(0);
    let mut probe = member_probe(SET_ID, MemberState::Removed);
    probe.replica_set_id = None;
    facts.push(data(3, Some(probe)));
    assert_eq!(
        plan(&input(4, facts, Observed::Configured(set))).reason(),
        "MemberIdentityUnknown"
    );
}

/// Fifty members (local 0 the primary, 49 remote), and local member 1
/// answering, empty, to join.
fn a_full_set_and_local_1_joining() -> PlanInput {
    let mut members = vec![voter(0, local(0))];
    members.extend((1..50).map(|i| non_voter(i64::from(i), remote(i))));
    let set = healthy(config(members), &local(0));
    let facts = vec![
        data(0, Some(member_probe(SET_ID, MemberState::Primary))),
        data(1, Some(empty_probe())),
    ];
    input(2, facts, Observed::Configured(set))
}

#[test]
fn refuses_to_add_a_fifty_first_member() {
    assert_eq!(
        plan(&a_full_set_and_local_1_joining()),
        Step::Refuse {
            reason: Refusal::TooManyMembers { host: local(1) }
        }
    );
}

#[test]
fn only_touches_members_with_the_local_vip() {
    // remote(1) is in hostconf but not in the config, and remote(2) is a
    // non-voter: neither is this cluster's to add or promote.
    let (facts, mut set) = three_local_in_sync(1);
    set.config.members.push(non_voter(20, remote(2)));
    set.members.insert(
        remote(2),
        member_status(MemberState::Secondary, true, Some(0)),
    );
    let mut input = input(3, facts, Observed::Configured(set));
    input.hostconf = hostconf(&[
        local(0),
        local(1),
        local(2),
        remote(0),
        remote(1),
        remote(2),
    ]);
    assert_eq!(plan(&input), Step::InSync);
}

#[test]
fn an_arbiter_joins_after_the_data_members_with_a_vote_and_priority_zero() {
    let (mut facts, set) = three_local_in_sync(2);
    facts.push(running(MemberSlot::Arbiter, Some(empty_probe())));
    let mut input = input(3, facts, Observed::Configured(set));
    input.arbiter_wanted = true;
    let (new, change) = expect_reconfig(plan(&input));
    let arbiter_host = addr(VIP, port_of(MemberSlot::Arbiter));
    assert_eq!(
        change,
        Change::AddMember {
            host: arbiter_host.clone()
        }
    );
    let arbiter = new.member(&arbiter_host).expect("added");
    assert!(arbiter.arbiter_only);
    assert_eq!((arbiter.votes, arbiter.priority), (1, 0.0));
}

#[test]
fn refuses_an_arbiter_when_seven_members_already_vote() {
    let (mut facts, set) = three_local_in_sync(4);
    facts.push(running(MemberSlot::Arbiter, Some(empty_probe())));
    let mut input = input(3, facts, Observed::Configured(set));
    input.arbiter_wanted = true;
    assert_eq!(
        plan(&input),
        Step::Refuse {
            reason: Refusal::NoVoteForArbiter {
                host: addr(VIP, port_of(MemberSlot::Arbiter))
            }
        }
    );
}

#[test]
fn waits_to_add_a_voter_while_too_few_voters_are_healthy() {
    // 3 voters, both remote ones down: a fourth voter makes a majority of 3,
    // and only local 0 and the newcomer are healthy.
    let members = vec![voter(0, local(0)), voter(1, remote(0)), voter(2, remote(1))];
    let mut set = healthy(config(members), &local(0));
    for host in [remote(0), remote(1)] {
        set.members
            .insert(host, member_status(MemberState::Down, false, None));
    }
    let facts = vec![
        data(0, Some(member_probe(SET_ID, MemberState::Primary))),
        data(1, Some(empty_probe())),
    ];
    assert_eq!(
        plan(&input(2, facts, Observed::Configured(set))),
        Step::Wait {
            reason: WaitReason::NotEnoughHealthyVoters {
                healthy: 2,
                needed: 3
            }
        }
    );
}

/// Local member 3 answers as a member of this set that a disaster recovery
/// dropped, besides three local members in sync (0 primary) and two remote
/// voters; `desired` local members are wanted.
fn with_a_dropped_member_3(desired: u32, more: Vec<LocalMemberFacts>) -> PlanInput {
    let (mut facts, set) = three_local_in_sync(2);
    facts.push(data(3, Some(member_probe(SET_ID, MemberState::Removed))));
    facts.extend(more);
    let mut input = input(desired, facts, Observed::Configured(set));
    input.dropped_members = DroppedMembers::Read(vec![DroppedMember {
        host: local(3),
        recovery: "forced in cluster 10.0.0.9".to_owned(),
        forgotten: false,
    }]);
    input
}

#[test]
fn a_refused_member_does_not_hold_up_the_next_one() {
    let input = with_a_dropped_member_3(5, vec![data(4, Some(empty_probe()))]);
    let (_, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::AddMember { host: local(4) });
}

#[test]
fn a_refused_member_holds_up_neither_promotions_nor_settings_and_is_reported_last() {
    let mut input = with_a_dropped_member_3(4, vec![]);
    let Observed::Configured(set) = &mut input.observed else {
        unreachable!()
    };
    set.config.members[2] = non_voter(2, local(2));
    let (promoted, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::PromoteMember { host: local(2) });

    input.observed = Observed::Configured(healthy(promoted, &local(0)));
    input.settings.election_timeout_millis = 5000;
    let (updated, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::UpdateSettings);

    input.observed = Observed::Configured(healthy(updated, &local(0)));
    assert_eq!(plan(&input).reason(), "DroppedByRecovery");
}

#[test]
fn too_many_members_or_a_refused_arbiter_do_not_hold_up_the_settings() {
    let mut full = a_full_set_and_local_1_joining();
    full.settings.election_timeout_millis = 5000;
    let (_, change) = expect_reconfig(plan(&full));
    assert_eq!(change, Change::UpdateSettings);

    let mut arbiter = an_arbiter_whose_vote_would_give_its_cluster_a_majority();
    arbiter.settings.election_timeout_millis = 5000;
    let (_, change) = expect_reconfig(plan(&arbiter));
    assert_eq!(change, Change::UpdateSettings);
}
