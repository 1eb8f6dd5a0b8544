//! Removing unwanted members (stepping a primary down first) and deleting
//! their StatefulSets once they are out of the config.

use super::*;

#[test]
fn removes_the_highest_index_first() {
    let (facts, set) = three_local_in_sync(2);
    let (new, change) = expect_reconfig(plan(&input(1, facts, Observed::Configured(set.clone()))));
    assert_eq!(change, Change::RemoveMember { host: local(2) });
    assert!(!new.contains(&local(2)));
    assert_eq!(new.version, set.config.version + 1);
}

#[test]
fn removals_take_precedence_over_additions() {
    // Index 1 is unwanted (desired 1) while the arbiter is wanted and missing.
    let (mut facts, set) = three_local_in_sync(2);
    facts.push(running(MemberSlot::Arbiter, Some(empty_probe())));
    let mut input = input(1, facts, Observed::Configured(set));
    input.arbiter_wanted = true;
    let (_, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::RemoveMember { host: local(2) });
}

#[test]
fn removing_the_primary_steps_it_down_first() {
    let (facts, mut set) = three_local_in_sync(2);
    set = healthy(set.config, &local(2));
    assert_eq!(
        plan(&input(2, facts, Observed::Configured(set))),
        Step::StepDown {
            primary: local(2),
            step_down_secs: 60,
            secondary_catch_up_period_secs: 10
        }
    );
}

#[test]
fn waits_for_a_new_primary_after_stepping_down() {
    let (facts, set) = three_local_in_sync(2);
    let mut set = healthy(set.config, &local(2));
    let mut stepped_down = input(2, facts.clone(), Observed::Configured(set.clone()));
    stepped_down.stepped_down_recently = Some(local(2));
    let step = plan(&stepped_down);
    assert_eq!(
        step,
        Step::Wait {
            reason: WaitReason::WaitingForNewPrimary {
                old_primary: local(2)
            }
        }
    );
    set.primary = None;
    set.config_committed = false;
    stepped_down.observed = Observed::Configured(set);
    assert_eq!(plan(&stepped_down).reason(), "WaitingForNewPrimary");
}

#[test]
fn a_step_down_held_back_after_a_refusal_is_a_wait_naming_the_lag() {
    let (facts, set) = three_local_in_sync(2);
    let mut set = healthy(set.config, &local(2));
    for (host, lag) in [
        (local(0), 40),
        (local(1), 25),
        (remote(0), 70),
        (remote(1), 90),
    ] {
        set.members
            .insert(host, member_status(MemberState::Secondary, true, Some(lag)));
    }
    let mut input = input(2, facts, Observed::Configured(set));
    assert_eq!(plan(&input).reason(), "StepDown");
    input.step_down_held = Some(local(2));
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::StepDownRefused {
                primary: local(2),
                least_lag_secs: Some(25)
            }
        }
    );
}

#[test]
fn the_lag_a_held_step_down_names_is_that_of_mongods_closest_candidate() {
    // mongod hands over only to a healthy electable SECONDARY: a member
    // catching up in RECOVERING, or one that no longer answers, is no
    // candidate however close its last optime, and the Event names the
    // same candidates (`ObservedSet::successor_lags`).
    let (facts, set) = three_local_in_sync(2);
    let mut set = healthy(set.config, &local(2));
    for (host, state, healthy, lag) in [
        (local(0), MemberState::Recovering, true, 2),
        (local(1), MemberState::Secondary, false, 3),
        (remote(0), MemberState::Secondary, true, 70),
        (remote(1), MemberState::Secondary, true, 40),
    ] {
        set.members
            .insert(host, member_status(state, healthy, Some(lag)));
    }
    let mut input = input(2, facts, Observed::Configured(set));
    input.step_down_held = Some(local(2));
    let Step::Wait {
        reason: WaitReason::StepDownRefused { least_lag_secs, .. },
    } = plan(&input)
    else {
        panic!("not a held step-down: {:?}", plan(&input));
    };
    assert_eq!(least_lag_secs, Some(40));
}

#[test]
fn removes_the_old_primary_once_another_member_is_primary() {
    let (facts, set) = three_local_in_sync(2);
    let set = healthy(set.config, &remote(0));
    let mut input = input(2, facts, Observed::Configured(set));
    input.stepped_down_recently = Some(local(2));
    let (_, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::RemoveMember { host: local(2) });
}

#[test]
fn waits_to_step_down_a_primary_no_secondary_can_replace() {
    // Member 1 (unwanted) is the only electable member; member 0 is passive
    // and pinned so by hostconf (votes 0): nothing can make it a successor.
    let members = vec![non_voter(0, local(0)), voter(1, local(1))];
    let set = healthy(config(members), &local(1));
    let facts = vec![
        data(0, Some(member_probe(SET_ID, MemberState::Secondary))),
        data(1, Some(member_probe(SET_ID, MemberState::Primary))),
    ];
    let mut input = input(1, facts, Observed::Configured(set));
    input.hostconf.members[0].votes = Some(0);
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::NoElectableSecondary { primary: local(1) }
        }
    );
}

#[test]
fn refuses_a_removal_that_would_break_the_voting_majority() {
    // 5 voters: local 0,1,2 and remote 0,1; both remote voters are down.
    // Removing local 2 leaves 4 voters (majority 3) with only 2 healthy.
    let (facts, mut set) = three_local_in_sync(2);
    for host in [remote(0), remote(1)] {
        set.members
            .insert(host, member_status(MemberState::Down, false, None));
    }
    assert_eq!(
        plan(&input(2, facts, Observed::Configured(set))),
        Step::Refuse {
            reason: Refusal::WouldBreakVotingMajority {
                host: local(2),
                healthy: 2,
                needed: 3
            }
        }
    );
}

#[test]
fn an_unready_wanted_member_does_not_block_the_next_one() {
    // Members 0 and 1 are in the set; member 2's pod is not running, member 3
    // answers: member 3 is added rather than everything waiting on member 2.
    let (mut facts, mut set) = three_local_in_sync(2);
    set.config.members.retain(|m| m.host != local(2));
    set.members.remove(&local(2));
    facts[2].pod_running = false;
    facts[2].probe = None;
    facts.push(data(3, Some(empty_probe())));
    let (_, change) = expect_reconfig(plan(&input(
        4,
        facts.clone(),
        Observed::Configured(set.clone()),
    )));
    assert_eq!(change, Change::AddMember { host: local(3) });

    // Once member 3 is in, the set waits on member 2 and says so.
    set.config.members.push(voter(3, local(3)));
    set.members.insert(
        local(3),
        member_status(MemberState::Secondary, true, Some(0)),
    );
    facts[3].probe = Some(member_probe(SET_ID, MemberState::Secondary));
    assert_eq!(
        plan(&input(4, facts, Observed::Configured(set))),
        Step::Wait {
            reason: WaitReason::PodNotRunning {
                slot: MemberSlot::Data(2)
            }
        }
    );
}

#[test]
fn members_still_syncing_do_not_count_as_healthy_voters() {
    // STARTUP2 (initial sync), RECOVERING and ROLLBACK members answer
    // heartbeats but mongod does not count them towards a removal's majority.
    for state in [
        MemberState::Startup2,
        MemberState::Recovering,
        MemberState::Rollback,
    ] {
        let (facts, mut set) = three_local_in_sync(2);
        for host in [remote(0), remote(1)] {
            set.members.insert(host, member_status(state, true, None));
        }
        assert_eq!(
            plan(&input(2, facts, Observed::Configured(set))),
            Step::Refuse {
                reason: Refusal::WouldBreakVotingMajority {
                    host: local(2),
                    healthy: 2,
                    needed: 3
                }
            },
            "{state:?}"
        );
    }
}

#[test]
fn deletes_the_statefulset_only_after_the_member_left_the_config() {
    let (mut facts, mut set) = three_local_in_sync(2);
    set.config.members.retain(|m| m.host != local(2));
    facts[2].probe = Some(member_probe(SET_ID, MemberState::Removed));
    let mut input = input(2, facts, Observed::Configured(set));
    assert_eq!(
        plan(&input),
        Step::DeleteStatefulSet {
            slot: MemberSlot::Data(2),
            delete_pvc: false
        }
    );
    input.pvc_policy = PvcPolicy::Delete;
    assert_eq!(
        plan(&input),
        Step::DeleteStatefulSet {
            slot: MemberSlot::Data(2),
            delete_pvc: true
        }
    );
}

#[test]
fn never_deletes_a_statefulset_again_while_it_terminates() {
    // Deleted in the foreground, a StatefulSet stays (deletionTimestamp set)
    // until the garbage collector has removed its pod: no new delete.
    let (mut facts, mut set) = three_local_in_sync(2);
    set.config.members.retain(|m| m.host != local(2));
    facts[2].probe = Some(member_probe(SET_ID, MemberState::Removed));
    facts[2].stateful_set_deleting = true;
    let step = plan(&input(2, facts, Observed::Configured(set)));
    assert!(!matches!(step, Step::DeleteStatefulSet { .. }), "{step:?}");
}

#[test]
fn waits_for_commit_before_deleting_a_statefulset() {
    let (facts, mut set) = three_local_in_sync(2);
    set.config.members.retain(|m| m.host != local(2));
    set.config_committed = false;
    assert_eq!(
        plan(&input(2, facts, Observed::Configured(set))),
        Step::Wait {
            reason: WaitReason::ConfigNotCommitted
        }
    );
}

#[test]
fn never_deletes_a_statefulset_whose_address_is_unknown() {
    let (mut facts, set) = three_local_in_sync(2);
    facts.push(LocalMemberFacts {
        slot: MemberSlot::Data(5),
        address: None,
        stateful_set_exists: true,
        stateful_set_deleting: false,
        pod_running: true,
        probe: None,
        recorded: None,
    });
    assert_eq!(
        plan(&input(3, facts, Observed::Configured(set))),
        Step::Refuse {
            reason: Refusal::StatefulSetAddressUnknown {
                slot: MemberSlot::Data(5)
            }
        }
    );
}

#[test]
fn removes_an_unwanted_arbiter_after_data_members() {
    let (mut facts, mut set) = three_local_in_sync(2);
    let arbiter_host = addr(VIP, port_of(MemberSlot::Arbiter));
    set.config.members.push(ConfigMember {
        arbiter_only: true,
        priority: 0.0,
        ..voter(9, arbiter_host.clone())
    });
    set = healthy(set.config, &local(0));
    facts.push(running(MemberSlot::Arbiter, Some(empty_probe())));
    // 6 voters, remove local 2 first, then the arbiter.
    let (_, change) = expect_reconfig(plan(&input(
        2,
        facts.clone(),
        Observed::Configured(set.clone()),
    )));
    assert_eq!(change, Change::RemoveMember { host: local(2) });
    let (_, change) = expect_reconfig(plan(&input(3, facts, Observed::Configured(set))));
    assert_eq!(change, Change::RemoveMember { host: arbiter_host });
}

#[test]
fn removing_one_of_two_arbiters_holds_the_secondary_at_priority_0_first() {
    // {P, S, A, A}: two writable voters of four, so mongod refuses the PSA
    // config left by removing an arbiter while its secondary is electable.
    let local_arbiter = arbiter_entry(2, VIP);
    let remote_arbiter = arbiter_entry(3, OTHER_VIP);
    let members = vec![
        voter(0, local(0)),
        voter(1, local(1)),
        local_arbiter.clone(),
        remote_arbiter,
    ];
    let set = healthy(config(members), &local(0));
    let mut facts: Vec<LocalMemberFacts> = (0..2)
        .map(|i| data(i, Some(member_probe(SET_ID, MemberState::Secondary))))
        .collect();
    facts.push(running(
        MemberSlot::Arbiter,
        Some(member_probe(SET_ID, MemberState::Arbiter)),
    ));
    let (new, change) = expect_reconfig(plan(&input(2, facts.clone(), Observed::Configured(set))));
    assert_eq!(
        change,
        Change::RemoveMember {
            host: local_arbiter.host
        }
    );
    let priority = |host: &MemberAddress| {
        new.members
            .iter()
            .find(|m| &m.host == host)
            .map(|m| m.priority)
    };
    assert_eq!(priority(&local(0)), Some(1.0));
    assert_eq!(priority(&local(1)), Some(0.0));

    // From the PSA config (the arbiter's StatefulSet deleted) mongod lets
    // the secondary be electable again.
    facts.pop();
    let (raised, change) = expect_reconfig(plan(&input(
        2,
        facts,
        Observed::Configured(healthy(new.clone(), &local(0))),
    )));
    assert_eq!(change, Change::RaisePriority { host: local(1) });
    assert!(raised
        .members
        .iter()
        .all(|m| m.arbiter_only || m.priority == 1.0));
}

#[test]
fn a_set_whose_every_member_leaves_is_torn_down_without_a_step_down() {
    // The last cluster's object is deleted (or a one-cluster set shrinks to 0):
    // no successor will ever stay, so waiting for one would never end.
    let (facts, set) = three_local_in_sync(0);
    let mut leaving = input(0, facts, Observed::Configured(set));
    leaving.hostconf = hostconf(&[local(0), local(1), local(2)]);
    assert_eq!(plan(&leaving), Step::InSync);

    // While hostconf lists a member of another cluster, someone is meant to
    // stay: the primary is handed over first, as ever.
    let (facts, set) = three_local_in_sync(0);
    let mut shrinking = input(0, facts, Observed::Configured(set));
    shrinking.hostconf = hostconf(&[local(0), local(1), local(2), remote(0)]);
    assert_ne!(plan(&shrinking), Step::InSync);
}

#[test]
fn does_not_step_down_in_favour_of_a_member_that_is_leaving_too() {
    // Both members leave (this cluster's and remote 0, no longer in hostconf);
    // remote 1 is listed but not yet in the config. Stepping local 0 down
    // would make remote 0 primary, which its own cluster would step down in
    // turn: wait until remote 0 is gone or a staying member can take over.
    let members = vec![voter(0, local(0)), voter(1, remote(0))];
    let set = healthy(config(members), &local(0));
    let facts = vec![data(0, Some(member_probe(SET_ID, MemberState::Primary)))];
    let mut input = input(0, facts, Observed::Configured(set));
    input.hostconf = hostconf(&[remote(1)]);
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::NoElectableSecondary { primary: local(0) }
        }
    );
    input.hostconf = hostconf(&[remote(0), remote(1)]);
    assert_eq!(plan(&input).reason(), "StepDown");
}

/// The config entry of the arbiter of the cluster at `vip`.
fn arbiter_entry(id: i64, vip: &str) -> ConfigMember {
    ConfigMember {
        arbiter_only: true,
        priority: 0.0,
        ..voter(id, addr(vip, port_of(MemberSlot::Arbiter)))
    }
}

#[test]
fn a_secondary_is_held_at_priority_0_while_another_clusters_arbiter_leaves_psa() {
    // {P, S, A, A}: the S is this cluster's, and the third cluster's arbiter
    // leaves (hostconf no longer lists it). The arbiter's cluster cannot
    // remove it while this secondary is electable (mongod's PSA rule), and
    // changes only its own members: this cluster gives its secondary
    // priority 0 first.
    let members = vec![
        voter(0, remote(0)),
        arbiter_entry(1, OTHER_VIP),
        arbiter_entry(2, THIRD_VIP),
        voter(3, local(0)),
    ];
    let set = healthy(config(members), &remote(0));
    let facts = vec![data(0, Some(member_probe(SET_ID, MemberState::Secondary)))];
    let mut input = input(1, facts, Observed::Configured(set));
    input.hostconf = hostconf(&[
        local(0),
        remote(0),
        addr(OTHER_VIP, port_of(MemberSlot::Arbiter)),
    ]);
    let (held, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::HoldPriority { host: local(0) });
    let priority =
        |config: &ReplicaSetConfig, host: &MemberAddress| config.member(host).map(|m| m.priority);
    assert_eq!(priority(&held, &local(0)), Some(0.0));
    assert_eq!(priority(&held, &remote(0)), Some(1.0));

    // Held, it stays held while the arbiter is in the config.
    let mut waiting = input.clone();
    waiting.observed = Observed::Configured(healthy(held.clone(), &remote(0)));
    assert_eq!(plan(&waiting), Step::InSync);

    // Once the arbiter is out, the PSA config lets it be electable again.
    let mut removed = held.clone();
    removed.version += 1;
    removed.members.retain(|m| m.host.host != THIRD_VIP);
    waiting.observed = Observed::Configured(healthy(removed, &remote(0)));
    let (raised, change) = expect_reconfig(plan(&waiting));
    assert_eq!(change, Change::RaisePriority { host: local(0) });
    assert_eq!(priority(&raised, &local(0)), Some(1.0));
}

#[test]
fn an_arbiter_leaving_psa_waits_for_the_remote_secondary_to_be_held() {
    // This cluster's arbiter leaves {P, S, A, A}; the secondary is another
    // cluster's, so its cluster holds it first, and this one waits for that.
    let members = vec![
        voter(0, remote(0)),
        arbiter_entry(1, OTHER_VIP),
        arbiter_entry(2, VIP),
        voter(3, third(0)),
    ];
    let set = healthy(config(members), &remote(0));
    let facts = vec![running(
        MemberSlot::Arbiter,
        Some(member_probe(SET_ID, MemberState::Arbiter)),
    )];
    let leaving = input(0, facts, Observed::Configured(set.clone()));
    assert_eq!(
        plan(&leaving),
        Step::Wait {
            reason: WaitReason::SecondaryNotYetHeldForPsa {
                secondary: third(0)
            }
        }
    );

    // Held by its cluster, the removal goes ahead.
    let mut held = set.config.clone();
    held.version += 1;
    for m in held.members.iter_mut().filter(|m| m.host == third(0)) {
        m.priority = 0.0;
    }
    let mut leaving = leaving;
    leaving.observed = Observed::Configured(healthy(held, &remote(0)));
    let (_, change) = expect_reconfig(plan(&leaving));
    assert_eq!(
        change,
        Change::RemoveMember {
            host: addr(VIP, port_of(MemberSlot::Arbiter))
        }
    );
}

#[test]
fn a_leaving_primary_without_a_successor_lets_a_silenced_member_get_its_vote_back() {
    // a0 lost its volume (silenced: no vote) and is SECONDARY again; a1, the
    // primary, is no longer wanted. a0's vote comes back first, then a1 steps
    // down to it: the removal's wait must not hold up the promotion.
    let members = vec![non_voter(0, local(0)), voter(1, local(1))];
    let facts = vec![
        data(0, Some(member_probe(SET_ID, MemberState::Secondary))),
        data(1, Some(member_probe(SET_ID, MemberState::Primary))),
    ];
    let set = healthy(config(members), &local(1));
    let before = input(1, facts.clone(), Observed::Configured(set));
    let (config, change) = expect_reconfig(plan(&before));
    assert_eq!(change, Change::PromoteMember { host: local(0) });

    let promoted = healthy(config, &local(1));
    let after = input(1, facts, Observed::Configured(promoted));
    assert!(matches!(plan(&after), Step::StepDown { primary, .. } if primary == local(1)));
}
