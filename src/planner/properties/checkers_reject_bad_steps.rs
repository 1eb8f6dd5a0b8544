//! Each checker rejects a step that breaks its invariant: a checker that
//! accepts everything would let every property pass.

use super::*;

fn local(index: u32) -> MemberAddress {
    addr(VIPS[0], port_of(MemberSlot::Data(index)))
}

fn remote(cluster: usize) -> MemberAddress {
    addr(VIPS[cluster], port_of(MemberSlot::Data(0)))
}

fn voter(id: i64, host: MemberAddress) -> ConfigMember {
    ConfigMember {
        id,
        host,
        arbiter_only: false,
        votes: 1,
        priority: 1.0,
        hidden: false,
        tags: BTreeMap::new(),
        newly_added: false,
    }
}

fn this_set() -> MemberProbe {
    MemberProbe {
        has_config: true,
        replica_set_id: Some(SET_ID.to_owned()),
        set_name: Some(SET.to_owned()),
        state: Some(MemberState::Secondary),
        me: None,
        too_stale: false,
    }
}

fn empty() -> MemberProbe {
    MemberProbe {
        has_config: false,
        replica_set_id: None,
        set_name: None,
        state: None,
        me: None,
        too_stale: false,
    }
}

fn running(index: u32, probe: MemberProbe) -> LocalMemberFacts {
    LocalMemberFacts {
        slot: MemberSlot::Data(index),
        address: Some(local(index)),
        stateful_set_exists: true,
        stateful_set_deleting: false,
        pod_running: true,
        probe: Some(probe),
        recorded: None,
    }
}

/// Three clusters; the config holds local members 0 (primary) and 1 and
/// one member of each other cluster, all voting and healthy. This cluster
/// wants a third member, which runs and answered empty: the planner adds
/// it without a vote (with one, this cluster would hold 3 of 5).
fn fixture() -> PlanInput {
    let hosts = [local(0), local(1), remote(1), remote(2)];
    let config = ReplicaSetConfig {
        set_name: SET.to_owned(),
        version: 7,
        term: Some(3),
        members: (0..)
            .zip(hosts.iter().cloned())
            .map(|(id, h)| voter(id, h))
            .collect(),
        settings: ConfigSettings::from_desired(
            &ReplicaSetSettings::default(),
            Some(SET_ID.to_owned()),
        ),
    };
    let members = hosts
        .iter()
        .map(|h| {
            let state = if *h == local(0) {
                MemberState::Primary
            } else {
                MemberState::Secondary
            };
            (h.clone(), member_status(state, true, Some(0)))
        })
        .collect();
    let listed = hosts.iter().cloned().chain([local(2)]);
    PlanInput {
        local_vip: VIPS[0].to_owned(),
        set_name: SET.to_owned(),
        desired_members: 3,
        arbiter_wanted: false,
        rs_init: true,
        settings: ReplicaSetSettings::default(),
        pvc_policy: PvcPolicy::Retain,
        known_replica_set_id: Some(SET_ID.to_owned()),
        hostconf: HostConf {
            members: listed
                .map(|address| HostConfMember {
                    address,
                    arbiter: false,
                    votes: None,
                    priority: None,
                    hidden: false,
                    tags: BTreeMap::new(),
                })
                .collect(),
        },
        local_members: vec![
            running(0, this_set()),
            running(1, this_set()),
            running(2, empty()),
        ],
        remote_probes: BTreeMap::new(),
        observed: Observed::Configured(ObservedSet {
            config,
            primary: Some(local(0)),
            members,
            config_committed: true,
            write_concern: Default::default(),
        }),
        stepped_down_recently: None,
        step_down_held: None,
        dropped_members: DroppedMembers::Read(Vec::new()),
        forgotten_cluster: None,
    }
}

fn set_of(input: &mut PlanInput) -> &mut ObservedSet {
    match &mut input.observed {
        Observed::Configured(set) => set,
        Observed::Unreachable => unreachable!("the fixture has a set"),
    }
}

/// The observed config at the next version, changed by `edit`.
fn reconfig(input: &PlanInput, edit: impl FnOnce(&mut ReplicaSetConfig)) -> Step {
    let Observed::Configured(set) = &input.observed else {
        unreachable!("the fixture has a set");
    };
    let mut config = set.config.clone();
    config.version += 1;
    edit(&mut config);
    Step::Reconfig {
        config,
        change: Change::UpdateSettings,
    }
}

fn add_local_2_voting(config: &mut ReplicaSetConfig) {
    config.members.push(voter(4, local(2)));
}

fn add_local_2_passive(config: &mut ReplicaSetConfig) {
    config.members.push(ConfigMember {
        votes: 0,
        priority: 0.0,
        ..voter(4, local(2))
    });
}

fn rejects(invariant: Invariant, input: &PlanInput, step: &Step) {
    assert!(invariant(input, step).is_err(), "accepted {step:?}");
}

#[test]
fn the_fixture_plans_a_step_every_checker_accepts() {
    let input = fixture();
    let step = plan(&input);
    let Step::Reconfig { config, change } = &step else {
        panic!("{step:?}");
    };
    assert_eq!(change, &Change::AddMember { host: local(2) });
    assert_eq!(config.members.last().map(|m| m.votes), Some(0));
    assert_eq!(check_all(&input, &step), Ok(()));
}

#[test]
fn host_is_local_compares_with_the_vip_without_brackets() {
    let mut input = fixture();
    assert!(host_is_local(&input, &local(0)));
    assert!(!host_is_local(&input, &remote(1)));
    input.local_vip = "[fd00::1]".to_owned();
    assert!(host_is_local(&input, &addr("fd00::1", 30000)));
}

#[test]
fn two_voting_changes_are_rejected() {
    let input = fixture();
    let two = reconfig(&input, |c| {
        add_local_2_voting(c);
        c.members.retain(|m| m.host != remote(2));
    });
    rejects(one_voting_change_per_reconfig, &input, &two);
    rejects(reconfig_accepted_without_force, &input, &two);
    assert!(reconfig_rule_breaks(
        &observed_set(&input).unwrap().config,
        config_sent(&two).unwrap()
    )
    .iter()
    .any(|b| b.contains("2 voting changes")));
}

#[test]
fn a_reconfig_before_commit_is_rejected() {
    let mut input = fixture();
    set_of(&mut input).config_committed = false;
    let add = reconfig(&input, add_local_2_passive);
    rejects(one_voting_change_per_reconfig, &input, &add);
    rejects(reconfig_accepted_without_force, &input, &add);
}

#[test]
fn a_reconfig_mongod_needs_force_for_is_rejected() {
    let input = fixture();
    let skipped_version = reconfig(&input, |c| c.version += 1);
    let changed_id = reconfig(&input, |c| c.members[1].id = 9);
    let other_set = reconfig(&input, |c| {
        c.settings.replica_set_id = Some("other".to_owned())
    });
    let unelectable_primary = reconfig(&input, |c| c.members[0].priority = 0.0);
    for step in [skipped_version, changed_id, other_set, unelectable_primary] {
        rejects(reconfig_accepted_without_force, &input, &step);
    }
}

#[test]
fn a_second_initiate_is_rejected() {
    let input = fixture();
    let config = observed_set(&input).unwrap().config.clone();
    let again = Step::Initiate {
        config: ReplicaSetConfig {
            version: 1,
            ..config
        },
        on: addr(VIPS[0], 30000),
    };
    rejects(never_initiate_twice, &input, &again);
    // Nothing observed, but member 0 answered with a config.
    let mut unseen = fixture();
    unseen.observed = Observed::Unreachable;
    unseen.known_replica_set_id = None;
    rejects(never_initiate_twice, &unseen, &again);
}

#[test]
fn a_reconfig_without_a_healthy_voting_majority_is_rejected() {
    let mut input = fixture();
    for host in [remote(1), remote(2)] {
        set_of(&mut input)
            .members
            .insert(host, member_status(MemberState::Down, false, None));
    }
    // Without member 1, the voters are 0 (healthy) and the two remote ones (down).
    let remove = reconfig(&input, |c| c.members.retain(|m| m.host != local(1)));
    rejects(keep_a_healthy_voting_majority, &input, &remove);
    let two_at_once = reconfig(&fixture(), |c| c.members.truncate(2));
    rejects(keep_a_healthy_voting_majority, &fixture(), &two_at_once);
}

#[test]
fn removing_or_wrongly_stepping_down_the_primary_is_rejected() {
    let mut input = fixture();
    let remove_primary = reconfig(&input, |c| c.members.retain(|m| m.host != local(0)));
    rejects(
        step_down_before_removing_the_primary,
        &input,
        &remove_primary,
    );
    let step_down = |primary| Step::StepDown {
        primary,
        step_down_secs: STEP_DOWN_SECS,
        secondary_catch_up_period_secs: SECONDARY_CATCH_UP_PERIOD_SECS,
    };
    // Not the primary; then the primary, but it stays wanted.
    rejects(
        step_down_before_removing_the_primary,
        &input,
        &step_down(local(1)),
    );
    rejects(
        step_down_before_removing_the_primary,
        &input,
        &step_down(local(0)),
    );
    // The primary leaves, but nobody that stays is a healthy secondary.
    input.desired_members = 0;
    for host in [local(1), remote(1), remote(2)] {
        set_of(&mut input)
            .members
            .insert(host, member_status(MemberState::Down, false, None));
    }
    rejects(
        step_down_before_removing_the_primary,
        &input,
        &step_down(local(0)),
    );
}

#[test]
fn a_config_beyond_mongodb_limits_is_rejected() {
    let input = fixture();
    let eight_voters = reconfig(&input, |c| {
        c.members = (0..8u16)
            .map(|i| voter(i64::from(i), addr(VIPS[usize::from(i) % 3], 30000 + i)))
            .collect();
    });
    rejects(config_within_mongodb_limits, &input, &eight_voters);
    let passive_with_priority = reconfig(&input, |c| {
        c.members.push(ConfigMember {
            votes: 0,
            ..voter(4, local(2))
        })
    });
    rejects(config_within_mongodb_limits, &input, &passive_with_priority);
    let hidden_with_priority = reconfig(&input, |c| c.members[1].hidden = true);
    rejects(config_within_mongodb_limits, &input, &hidden_with_priority);
    assert!(
        config_rule_breaks(config_sent(&eight_voters).unwrap()).contains(&"8 voters".to_owned())
    );
}

#[test]
fn a_vote_giving_a_cluster_the_majority_is_rejected() {
    let input = fixture();
    let third_local_voter = reconfig(&input, add_local_2_voting);
    rejects(no_cluster_gains_a_vote_majority, &input, &third_local_voter);
}

#[test]
fn deleting_a_member_still_in_the_config_is_rejected() {
    let mut input = fixture();
    let delete = Step::DeleteStatefulSet {
        slot: MemberSlot::Data(1),
        delete_pvc: true,
    };
    rejects(never_delete_a_member_in_the_config, &input, &delete);
    // Unwanted now, but still in the config.
    input.desired_members = 1;
    rejects(never_delete_a_member_in_the_config, &input, &delete);
}

#[test]
fn deleting_a_readdressed_member_still_in_the_config_is_rejected() {
    let mut input = fixture();
    // Member 1 now answers at another nodePort; the config holds it at
    // its old host, as recorded on its StatefulSet.
    input.desired_members = 1;
    input.local_members[1].address = Some(addr(VIPS[0], 31001));
    input.local_members[1].recorded = Some(RecordedEntry {
        id: 1,
        host: local(1),
    });
    let delete = Step::DeleteStatefulSet {
        slot: MemberSlot::Data(1),
        delete_pvc: true,
    };
    rejects(never_delete_a_member_in_the_config, &input, &delete);
}

#[test]
fn a_second_entry_for_a_readdressed_member_is_rejected() {
    let mut input = fixture();
    let moved = addr(VIPS[0], 31001);
    input.local_members[1].address = Some(moved.clone());
    input.local_members[1].recorded = Some(RecordedEntry {
        id: 1,
        host: local(1),
    });
    let added_again = reconfig(&input, |c| c.members.push(voter(4, moved.clone())));
    rejects(one_entry_per_member, &input, &added_again);
    let readdressed = reconfig(&input, |c| c.members[1].host = moved.clone());
    assert_eq!(one_entry_per_member(&input, &readdressed), Ok(()));
    assert_eq!(one_voting_change_per_reconfig(&input, &readdressed), Ok(()));
    assert_eq!(only_local_members_change(&input, &readdressed), Ok(()));
}

#[test]
fn adding_a_member_of_another_set_is_rejected() {
    let mut input = fixture();
    input.local_members[2].probe = Some(MemberProbe {
        replica_set_id: Some("another-set".to_owned()),
        ..this_set()
    });
    let add = reconfig(&input, add_local_2_passive);
    rejects(never_add_a_member_of_another_set, &input, &add);
    input.local_members[2].probe = Some(MemberProbe {
        set_name: Some("replset-9".to_owned()),
        has_config: false,
        replica_set_id: None,
        state: None,
        me: None,
        too_stale: false,
    });
    rejects(never_add_a_member_of_another_set, &input, &add);
}

#[test]
fn changing_a_remote_member_is_rejected() {
    let input = fixture();
    let remote_priority = reconfig(&input, |c| c.members[2].priority = 2.0);
    rejects(only_local_members_change, &input, &remote_priority);
    let remote_step_down = Step::StepDown {
        primary: remote(1),
        step_down_secs: STEP_DOWN_SECS,
        secondary_catch_up_period_secs: SECONDARY_CATCH_UP_PERIOD_SECS,
    };
    rejects(only_local_members_change, &input, &remote_step_down);
}

#[test]
fn settings_changed_outside_the_rs_init_cluster_are_rejected() {
    let mut input = fixture();
    input.rs_init = false;
    let settings = reconfig(&input, |c| c.settings.election_timeout_millis = 30_000);
    rejects(
        settings_written_by_the_rs_init_cluster_only,
        &input,
        &settings,
    );
    input.rs_init = true;
    assert_eq!(
        settings_written_by_the_rs_init_cluster_only(&input, &settings),
        Ok(())
    );
}

#[test]
fn another_step_for_the_same_input_is_rejected() {
    rejects(same_input_same_step, &fixture(), &Step::InSync);
}

#[test]
fn the_model_of_mongod_refuses_what_mongod_refuses() {
    let mut world = World::new(&[2, 1, 1], false, PvcPolicy::Retain);
    assert_eq!(converge(&mut world, ROUNDS).map(|_| ()), Ok(()));
    let live = world.set.as_ref().map(|s| s.config.clone()).unwrap();
    // Two voters of other clusters removed at once.
    let mut two = live.clone();
    two.version += 1;
    two.members.retain(|m| m.host.host == VIPS[0]);
    let step = Step::Reconfig {
        config: two,
        change: Change::UpdateSettings,
    };
    assert!(world.execute(0, &step).is_err());
    let again = Step::Initiate {
        config: ReplicaSetConfig {
            version: 1,
            ..live.clone()
        },
        on: addr(VIPS[0], 30000),
    };
    assert!(world.execute(0, &again).is_err());
    assert_eq!(world.set.as_ref().map(|s| &s.config), Some(&live));
}
