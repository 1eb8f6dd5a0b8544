//! A member whose address changed keeps its entry and takes the new host;
//! its recorded entry tells it apart from other members.

use super::*;

/// Three local members in sync (0 primary) and two remote voters, where local
/// member 2 now answers at `new_address` (its Service recreated with another
/// nodePort): the config still lists it at its old host, which answers no more.
fn readdressed_member_2(
    new_address: MemberAddress,
    recorded: Option<RecordedEntry>,
) -> (Vec<LocalMemberFacts>, ObservedSet) {
    let (mut facts, mut set) = three_local_in_sync(2);
    facts[2].address = Some(new_address);
    facts[2].recorded = recorded;
    set.members
        .insert(local(2), member_status(MemberState::Down, false, None));
    (facts, set)
}

fn with_hostconf_at(mut input: PlanInput, old: &MemberAddress, new: &MemberAddress) -> PlanInput {
    for m in input.hostconf.members.iter_mut() {
        if &m.address == old {
            m.address = new.clone();
        }
    }
    input
}

#[test]
fn a_member_whose_address_changed_keeps_its_entry_and_takes_the_new_host() {
    let moved = addr(VIP, 30102);
    let recorded = RecordedEntry {
        id: 2,
        host: local(2),
    };
    let (facts, set) = readdressed_member_2(moved.clone(), Some(recorded));
    let old = set.config.clone();
    let mut input = with_hostconf_at(
        input(3, facts, Observed::Configured(set)),
        &local(2),
        &moved,
    );
    // A member in the config needs no recovery records, so the controller
    // reads none: the readdress must not wait for them.
    assert!(!input.needs_dropped_members());
    input.dropped_members = DroppedMembers::NotRead;
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(
        change,
        Change::ReaddressMember {
            from: local(2),
            to: moved.clone()
        }
    );
    let mut expected = hosts(&old);
    expected[2].1 = moved;
    assert_eq!(hosts(&config), expected, "same _id and votes, new host");
    assert_eq!(config.version, old.version + 1);
    assert_eq!(voting_changes(&old, &config), 0);
}

#[test]
fn a_member_readdressed_before_its_entry_was_recorded_is_not_added_a_second_time() {
    let moved = addr(VIP, 30102);
    let (facts, set) = readdressed_member_2(moved.clone(), None);
    let input = with_hostconf_at(
        input(3, facts, Observed::Configured(set)),
        &local(2),
        &moved,
    );
    assert_eq!(
        plan(&input),
        Step::Refuse {
            reason: Refusal::UnaccountedLocalMember { host: local(2) }
        }
    );
}

#[test]
fn a_leaving_member_whose_address_changed_is_removed_by_its_entry_before_its_statefulset_goes() {
    let moved = addr(VIP, 30102);
    let recorded = RecordedEntry {
        id: 2,
        host: local(2),
    };
    let (facts, set) = readdressed_member_2(moved.clone(), Some(recorded));
    // Its entry follows it first (down at its old host, it would weigh on
    // the majority the removal needs), then it is removed by that entry;
    // its StatefulSet is never deleted meanwhile.
    let (readdressed, change) =
        expect_reconfig(plan(&input(2, facts.clone(), Observed::Configured(set))));
    assert_eq!(
        change,
        Change::ReaddressMember {
            from: local(2),
            to: moved.clone()
        }
    );
    let set = healthy(readdressed, &local(0));
    let (config, change) = expect_reconfig(plan(&input(2, facts, Observed::Configured(set))));
    assert_eq!(
        change,
        Change::RemoveMember {
            host: moved.clone()
        }
    );
    assert!(!config.contains(&moved));
}

#[test]
fn a_recorded_id_since_given_to_another_member_is_not_taken_over() {
    let moved = addr(VIP, 30102);
    let recorded = RecordedEntry {
        id: 11,
        host: local(2),
    };
    // Member 2 left (its entry is gone) and `_id` 11 now belongs to a remote member.
    let (facts, mut set) = readdressed_member_2(moved.clone(), Some(recorded));
    set.config.members.retain(|m| m.host != local(2));
    set.members.remove(&local(2));
    let input = with_hostconf_at(
        input(3, facts, Observed::Configured(set)),
        &local(2),
        &moved,
    );
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(
        change,
        Change::AddMember {
            host: moved.clone()
        }
    );
    assert_eq!(
        config.member(&remote(1)).map(|m| m.id),
        Some(11),
        "the remote member keeps its entry"
    );
}

#[test]
fn an_unwanted_member_that_never_recorded_its_entry_is_not_deleted_while_an_entry_is_unlisted() {
    // Member 2 is no longer wanted; its VIP changed before its entry was
    // recorded, and its pod is down (it cannot say who it is). The config
    // still holds it at the old VIP, which hostconf no longer lists.
    let (mut facts, mut set) = three_local_in_sync(2);
    let old = addr("10.0.8.1", port_of(MemberSlot::Data(2)));
    for m in set.config.members.iter_mut().filter(|m| m.host == local(2)) {
        m.host = old.clone();
    }
    set.members.remove(&local(2));
    set.members
        .insert(old.clone(), member_status(MemberState::Down, false, None));
    facts[2].pod_running = false;
    facts[2].probe = None;
    let mut input = input(2, facts, Observed::Configured(set));
    input.hostconf.members.retain(|m| m.address != old);
    assert_eq!(
        plan(&input),
        Step::Refuse {
            reason: Refusal::DepartureUnproven {
                slot: MemberSlot::Data(2),
                entry: old
            }
        }
    );
}

#[test]
fn a_recorded_entry_whose_id_stands_at_an_unlisted_host_is_no_proof_of_departure() {
    // Member 2 is no longer wanted and its pod is down. It recorded its entry
    // at its address; the entry was readdressed since (its VIP moved) before
    // a new record, and the VIP moved back. The config holds its `_id` at the
    // old VIP, which hostconf no longer lists: that is still member 2.
    let (mut facts, mut set) = three_local_in_sync(2);
    let moved = addr("10.0.8.1", port_of(MemberSlot::Data(2)));
    let entry = set.config.member(&local(2)).unwrap().id;
    facts[2].recorded = Some(RecordedEntry {
        id: entry,
        host: local(2),
    });
    for m in set.config.members.iter_mut().filter(|m| m.host == local(2)) {
        m.host = moved.clone();
    }
    set.members.remove(&local(2));
    set.members
        .insert(moved.clone(), member_status(MemberState::Down, false, None));
    facts[2].pod_running = false;
    facts[2].probe = None;
    let mut input = input(2, facts, Observed::Configured(set));
    input.hostconf.members.retain(|m| m.address != moved);
    assert_eq!(
        plan(&input),
        Step::Refuse {
            reason: Refusal::DepartureUnproven {
                slot: MemberSlot::Data(2),
                entry: moved
            }
        }
    );
}

/// Three local members in sync (0 primary) and an arbiter entry at its first
/// nodePort, which answers no more: the arbiter's Service was recreated with
/// another nodePort before its entry was recorded, and it answers at `moved`
/// holding no config (the set never reached it).
fn arbiter_moved_before_its_record(moved: &MemberAddress) -> (Vec<LocalMemberFacts>, ObservedSet) {
    let (mut facts, mut set) = three_local_in_sync(0);
    let old = addr(VIP, port_of(MemberSlot::Arbiter));
    set.config.members.push(ConfigMember {
        arbiter_only: true,
        priority: 0.0,
        ..voter(5, old.clone())
    });
    set.members
        .insert(old, member_status(MemberState::Down, false, None));
    facts.push(LocalMemberFacts {
        address: Some(moved.clone()),
        ..running(MemberSlot::Arbiter, Some(empty_probe()))
    });
    (facts, set)
}

#[test]
fn an_arbiter_whose_address_changed_before_its_entry_was_recorded_takes_the_new_host() {
    let moved = addr(VIP, 32000);
    let (facts, set) = arbiter_moved_before_its_record(&moved);
    let old = set.config.clone();
    let mut input = input(3, facts, Observed::Configured(set));
    input.arbiter_wanted = true;
    input.hostconf = hostconf(&[local(0), local(1), local(2), moved.clone()]);
    input.hostconf.members[3].arbiter = true;
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(
        change,
        Change::ReaddressMember {
            from: addr(VIP, port_of(MemberSlot::Arbiter)),
            to: moved.clone()
        }
    );
    let arbiter = config.member(&moved).expect("readdressed");
    assert_eq!((arbiter.id, arbiter.arbiter_only), (5, true));
    assert_eq!(config.members.len(), old.members.len(), "no second entry");
    assert_eq!(voting_changes(&old, &config), 0);
}

#[test]
fn an_unwanted_arbiter_whose_address_changed_before_its_entry_was_recorded_is_removed() {
    let moved = addr(VIP, 32000);
    let (facts, set) = arbiter_moved_before_its_record(&moved);
    // Its entry follows it, then goes; its StatefulSet only once the entry
    // is out (as for a data member).
    let (readdressed, change) =
        expect_reconfig(plan(&input(3, facts.clone(), Observed::Configured(set))));
    assert_eq!(
        change,
        Change::ReaddressMember {
            from: addr(VIP, port_of(MemberSlot::Arbiter)),
            to: moved.clone()
        }
    );
    let set = healthy(readdressed, &local(0));
    let (config, change) = expect_reconfig(plan(&input(3, facts, Observed::Configured(set))));
    assert_eq!(
        change,
        Change::RemoveMember {
            host: moved.clone()
        }
    );
    assert!(config.members.iter().all(|m| !m.arbiter_only));
}

#[test]
fn members_whose_nodeports_were_swapped_are_refused_with_what_to_do() {
    // Members 1 and 2 exchanged nodePorts: each one's new host is still the
    // other's entry, and mongod keeps a host's `_id` across a reconfig.
    let (mut facts, set) = three_local_in_sync(2);
    for (i, now_at) in [(1, local(2)), (2, local(1))] {
        facts[i].recorded = Some(RecordedEntry {
            id: i as i64,
            host: local(i as u32),
        });
        facts[i].address = Some(now_at);
    }
    assert_eq!(
        plan(&input(3, facts, Observed::Configured(set))),
        Step::Refuse {
            reason: Refusal::NewAddressHeldByAnotherEntry {
                from: local(1),
                to: local(2),
                holder: 2,
            }
        }
    );
}

#[test]
fn a_member_moved_to_a_port_another_member_leaves_follows_once_that_one_moved() {
    // Member 1 took member 2's nodePort, member 2 a free one: member 2's
    // entry moves first, then member 1's.
    let (mut facts, set) = three_local_in_sync(2);
    for (i, now_at) in [(1, local(2)), (2, addr(VIP, 30102))] {
        facts[i].recorded = Some(RecordedEntry {
            id: i as i64,
            host: local(i as u32),
        });
        facts[i].address = Some(now_at);
    }
    let input = input(3, facts, Observed::Configured(set));
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(
        change,
        Change::ReaddressMember {
            from: local(2),
            to: addr(VIP, 30102)
        }
    );
    let mut input = input;
    input.observed = Observed::Configured(healthy(config, &local(0)));
    let (_, change) = expect_reconfig(plan(&input));
    assert_eq!(
        change,
        Change::ReaddressMember {
            from: local(1),
            to: local(2)
        }
    );
}
