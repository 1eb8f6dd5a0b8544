//! The planner's rules, one example each.

use std::collections::BTreeMap;

use super::*;
use crate::replset::voting_changes;

pub(super) const SET: &str = "rs0";
pub(super) const SET_ID: &str = "5f0000000000000000000001";
const VIP: &str = "10.0.0.1";
const OTHER_VIP: &str = "10.0.0.2";
const THIRD_VIP: &str = "10.0.0.3";

pub(super) fn addr(vip: &str, port: u16) -> MemberAddress {
    MemberAddress {
        host: vip.to_owned(),
        port,
    }
}

pub(super) fn port_of(slot: MemberSlot) -> u16 {
    match slot {
        MemberSlot::Data(index) => 30000 + index as u16,
        MemberSlot::Arbiter => 31000,
    }
}

fn local(index: u32) -> MemberAddress {
    addr(VIP, port_of(MemberSlot::Data(index)))
}

fn remote(index: u32) -> MemberAddress {
    addr(OTHER_VIP, port_of(MemberSlot::Data(index)))
}

fn third(index: u32) -> MemberAddress {
    addr(THIRD_VIP, port_of(MemberSlot::Data(index)))
}

fn empty_probe() -> MemberProbe {
    MemberProbe {
        has_config: false,
        replica_set_id: None,
        set_name: None,
        state: None,
        me: None,
    }
}

fn member_probe(replica_set_id: &str, state: MemberState) -> MemberProbe {
    MemberProbe {
        has_config: true,
        replica_set_id: Some(replica_set_id.to_owned()),
        set_name: Some(SET.to_owned()),
        state: Some(state),
        me: None,
    }
}

fn running(slot: MemberSlot, probe: Option<MemberProbe>) -> LocalMemberFacts {
    LocalMemberFacts {
        slot,
        address: Some(addr(VIP, port_of(slot))),
        stateful_set_exists: true,
        pod_running: true,
        probe,
        recorded: None,
    }
}

fn data(index: u32, probe: Option<MemberProbe>) -> LocalMemberFacts {
    running(MemberSlot::Data(index), probe)
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

fn non_voter(id: i64, host: MemberAddress) -> ConfigMember {
    ConfigMember {
        votes: 0,
        priority: 0.0,
        ..voter(id, host)
    }
}

fn config(members: Vec<ConfigMember>) -> ReplicaSetConfig {
    ReplicaSetConfig {
        set_name: SET.to_owned(),
        version: 5,
        term: Some(2),
        members,
        settings: ConfigSettings::from_desired(
            &ReplicaSetSettings::default(),
            Some(SET_ID.to_owned()),
        ),
    }
}

/// Every member healthy; `primary` is PRIMARY, the others SECONDARY (arbiters
/// ARBITER); the config is committed.
fn healthy(config: ReplicaSetConfig, primary: &MemberAddress) -> ObservedSet {
    let members = config
        .members
        .iter()
        .map(|m| {
            let state = if &m.host == primary {
                MemberState::Primary
            } else if m.arbiter_only {
                MemberState::Arbiter
            } else {
                MemberState::Secondary
            };
            let health = member_status(state, true, Some(0));
            (m.host.clone(), health)
        })
        .collect();
    ObservedSet {
        config,
        primary: Some(primary.clone()),
        members,
        config_committed: true,
    }
}

fn hostconf(addresses: &[MemberAddress]) -> HostConf {
    HostConf {
        members: addresses
            .iter()
            .map(|a| HostConfMember {
                address: a.clone(),
                arbiter: a.port == port_of(MemberSlot::Arbiter),
                votes: None,
                priority: None,
                hidden: false,
                tags: BTreeMap::new(),
            })
            .collect(),
    }
}

fn input(desired: u32, local_members: Vec<LocalMemberFacts>, observed: Observed) -> PlanInput {
    let mut listed: Vec<MemberAddress> = (0..desired).map(local).collect();
    if let Observed::Configured(set) = &observed {
        listed.extend(
            set.config
                .members
                .iter()
                .map(|m| m.host.clone())
                .filter(|h| h.host != VIP),
        );
    }
    PlanInput {
        local_vip: VIP.to_owned(),
        set_name: SET.to_owned(),
        desired_members: desired,
        arbiter_wanted: false,
        rs_init: true,
        settings: ReplicaSetSettings::default(),
        pvc_policy: PvcPolicy::Retain,
        known_replica_set_id: match observed {
            Observed::Configured(_) => Some(SET_ID.to_owned()),
            Observed::Unreachable => None,
        },
        hostconf: hostconf(&listed),
        local_members,
        remote_probes: BTreeMap::new(),
        observed,
        stepped_down_recently: None,
        step_down_held: None,
        dropped_members: DroppedMembers::Read(Vec::new()),
    }
}

/// A member as `replSetGetStatus` reports it, with what the planner does not read left empty.
pub(super) fn member_status(
    state: MemberState,
    healthy: bool,
    lag_secs: Option<i64>,
) -> MemberStatus {
    MemberStatus {
        id: 0,
        healthy,
        state,
        sync_source: String::new(),
        lag_secs,
        config_version: None,
    }
}

/// Three local members 0..3 in the config, 0 primary, plus `remote` voters.
fn three_local_in_sync(remote_voters: u32) -> (Vec<LocalMemberFacts>, ObservedSet) {
    let mut members: Vec<ConfigMember> = (0..3).map(|i| voter(i64::from(i), local(i))).collect();
    members.extend((0..remote_voters).map(|i| voter(10 + i64::from(i), remote(i))));
    let facts = (0..3)
        .map(|i| data(i, Some(member_probe(SET_ID, MemberState::Secondary))))
        .collect();
    (facts, healthy(config(members), &local(0)))
}

fn expect_reconfig(step: Step) -> (ReplicaSetConfig, Change) {
    match step {
        Step::Reconfig { config, change } => (config, change),
        other => panic!("expected a reconfig, got {other:?}"),
    }
}

fn expect_initiate(step: Step) -> ReplicaSetConfig {
    match step {
        Step::Initiate { config, .. } => config,
        other => panic!("expected an initiate, got {other:?}"),
    }
}

fn hosts(config: &ReplicaSetConfig) -> Vec<(i64, MemberAddress, u8)> {
    config
        .members
        .iter()
        .map(|m| (m.id, m.host.clone(), m.votes))
        .collect()
}

// ------------------------------------------------------------------ initiate

#[test]
fn initiates_with_every_local_member_when_nobody_has_a_config() {
    let facts = (0..3).map(|i| data(i, Some(empty_probe()))).collect();
    let config = expect_initiate(plan(&input(3, facts, Observed::Unreachable)));
    assert_eq!(
        hosts(&config),
        vec![(0, local(0), 1), (1, local(1), 1), (2, local(2), 1)]
    );
    assert_eq!(config.version, 1);
    assert_eq!(config.set_name, SET);
    assert_eq!(config.settings.replica_set_id, None);
    assert!(config.members.iter().all(|m| m.priority == 1.0));
}

#[test]
fn initial_config_lists_local_members_first_then_empty_remote_members_by_address() {
    let facts = vec![data(1, Some(empty_probe())), data(0, Some(empty_probe()))];
    let mut input = input(2, facts, Observed::Unreachable);
    input.hostconf = hostconf(&[local(0), local(1), remote(1), remote(0), remote(2)]);
    input.remote_probes = BTreeMap::from([
        (remote(1), empty_probe()),
        (remote(0), empty_probe()),
        // remote(2) does not answer: it is left out, to be added later.
    ]);
    let config = expect_initiate(plan(&input));
    assert_eq!(
        hosts(&config),
        vec![
            (0, local(0), 1),
            (1, local(1), 1),
            (2, remote(0), 1),
            (3, remote(1), 1)
        ]
    );
}

#[test]
fn never_initiates_when_any_member_has_a_config() {
    let facts = vec![
        data(0, Some(empty_probe())),
        data(1, Some(member_probe(SET_ID, MemberState::Secondary))),
    ];
    let step = plan(&input(2, facts, Observed::Unreachable));
    assert_eq!(
        step,
        Step::Wait {
            reason: WaitReason::ExistingConfigUnreadable { host: local(1) }
        }
    );

    let facts = vec![data(0, Some(empty_probe()))];
    let mut input = input(1, facts, Observed::Unreachable);
    input.hostconf = hostconf(&[local(0), remote(0)]);
    input.remote_probes =
        BTreeMap::from([(remote(0), member_probe("other", MemberState::Removed))]);
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::ExistingConfigUnreadable { host: remote(0) }
        }
    );
}

#[test]
fn never_initiates_once_a_replica_set_id_is_recorded() {
    let facts = vec![data(0, Some(empty_probe()))];
    let mut input = input(1, facts, Observed::Unreachable);
    input.known_replica_set_id = Some(SET_ID.to_owned());
    assert_eq!(plan(&input).reason(), "ReplicaSetUnreachable");
}

#[test]
fn never_initiates_outside_the_rs_init_cluster() {
    let facts = vec![data(0, Some(empty_probe()))];
    let mut input = input(1, facts, Observed::Unreachable);
    input.rs_init = false;
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::AwaitingInitiate
        }
    );
}

#[test]
fn waits_for_every_desired_local_member_before_initiating() {
    let mut not_running = data(1, None);
    not_running.pod_running = false;
    let facts = vec![data(0, Some(empty_probe())), not_running, data(2, None)];
    assert_eq!(
        plan(&input(3, facts.clone(), Observed::Unreachable)),
        Step::Wait {
            reason: WaitReason::PodNotRunning {
                slot: MemberSlot::Data(1)
            }
        }
    );
    let mut facts = facts;
    facts[1] = data(1, Some(empty_probe()));
    assert_eq!(
        plan(&input(3, facts, Observed::Unreachable)),
        Step::Wait {
            reason: WaitReason::MemberNotAnswering {
                slot: MemberSlot::Data(2),
                host: local(2)
            }
        }
    );
}

#[test]
fn waits_for_a_majority_of_hostconf_before_initiating() {
    let facts = vec![data(0, Some(empty_probe()))];
    let mut input = input(1, facts, Observed::Unreachable);
    input.hostconf = hostconf(&[local(0), remote(0), remote(1)]);
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::TooFewMembersAnswering {
                answered: 1,
                needed: 2
            }
        }
    );
    input.remote_probes = BTreeMap::from([(remote(1), empty_probe())]);
    let config = expect_initiate(plan(&input));
    assert_eq!(hosts(&config), vec![(0, local(0), 1), (1, remote(1), 1)]);
}

#[test]
fn initiate_gives_votes_to_the_first_seven_only() {
    let facts = (0..9).map(|i| data(i, Some(empty_probe()))).collect();
    let config = expect_initiate(plan(&input(9, facts, Observed::Unreachable)));
    assert_eq!(config.voting_member_count(), 7);
    for m in &config.members[7..] {
        assert_eq!((m.votes, m.priority), (0, 0.0));
    }
    assert_eq!(config.validate(), vec![]);
}

#[test]
fn initiate_respects_hostconf_vote_priority_and_hidden_hints() {
    let facts = (0..3).map(|i| data(i, Some(empty_probe()))).collect();
    let mut input = input(3, facts, Observed::Unreachable);
    input.hostconf.members[0].priority = Some(5.0);
    input.hostconf.members[1].votes = Some(0);
    input.hostconf.members[2].hidden = true;
    input.hostconf.members[2].tags = BTreeMap::from([("site".to_owned(), "east".to_owned())]);
    let config = expect_initiate(plan(&input));
    let by_host = |h: MemberAddress| config.member(&h).cloned().expect("listed");
    assert_eq!(by_host(local(0)).priority, 5.0);
    assert_eq!(
        (by_host(local(1)).votes, by_host(local(1)).priority),
        (0, 0.0)
    );
    let hidden = by_host(local(2));
    assert!(hidden.hidden);
    assert_eq!((hidden.votes, hidden.priority), (1, 0.0));
    assert_eq!(hidden.tags.get("site").map(String::as_str), Some("east"));
}

#[test]
fn initiate_gives_the_arbiter_a_vote_and_priority_zero() {
    let facts = vec![
        data(0, Some(empty_probe())),
        running(MemberSlot::Arbiter, Some(empty_probe())),
    ];
    let mut input = input(1, facts, Observed::Unreachable);
    input.arbiter_wanted = true;
    let config = expect_initiate(plan(&input));
    let arbiter = config
        .member(&addr(VIP, port_of(MemberSlot::Arbiter)))
        .expect("arbiter listed");
    assert!(arbiter.arbiter_only);
    assert_eq!((arbiter.votes, arbiter.priority), (1, 0.0));
}

#[test]
fn initiate_refuses_a_member_of_another_set_name() {
    let mut probe = empty_probe();
    probe.set_name = Some("replset-9".to_owned());
    let facts = vec![data(0, Some(probe))];
    assert_eq!(
        plan(&input(1, facts, Observed::Unreachable)).reason(),
        "MemberSetNameMismatch"
    );
}

// ---------------------------------------------------- reconfig preconditions

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

// ------------------------------------------------------------------ additions

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
fn adds_a_removed_member_of_this_set() {
    let (mut facts, set) = three_local_in_sync(0);
    facts.push(data(3, Some(member_probe(SET_ID, MemberState::Removed))));
    let (_, change) = expect_reconfig(plan(&input(4, facts, Observed::Configured(set))));
    assert_eq!(change, Change::AddMember { host: local(3) });
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

#[test]
fn refuses_to_add_a_fifty_first_member() {
    let mut members = vec![voter(0, local(0))];
    members.extend((1..50).map(|i| non_voter(i64::from(i), remote(i))));
    let set = healthy(config(members), &local(0));
    let facts = vec![
        data(0, Some(member_probe(SET_ID, MemberState::Primary))),
        data(1, Some(empty_probe())),
    ];
    assert_eq!(
        plan(&input(2, facts, Observed::Configured(set))),
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

// ------------------------------------------------------------------- removals

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
    // Member 1 (unwanted) is the only electable member; member 0 is passive.
    let members = vec![non_voter(0, local(0)), voter(1, local(1))];
    let set = healthy(config(members), &local(1));
    let facts = vec![
        data(0, Some(member_probe(SET_ID, MemberState::Secondary))),
        data(1, Some(member_probe(SET_ID, MemberState::Primary))),
    ];
    assert_eq!(
        plan(&input(1, facts, Observed::Configured(set))),
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

// ------------------------------------------------------------------ promotion

#[test]
fn promotes_a_secondary_non_voter_when_a_vote_is_free() {
    let (facts, mut set) = three_local_in_sync(2);
    set.config.members[2] = non_voter(2, local(2));
    let old = set.config.clone();
    let (new, change) = expect_reconfig(plan(&input(3, facts, Observed::Configured(set))));
    assert_eq!(change, Change::PromoteMember { host: local(2) });
    let promoted = new.member(&local(2)).expect("kept");
    assert_eq!((promoted.votes, promoted.priority), (1, 1.0));
    assert_eq!(voting_changes(&old, &new), 1);
}

#[test]
fn does_not_promote_a_member_pinned_to_zero_votes_or_not_secondary() {
    let (facts, mut set) = three_local_in_sync(2);
    set.config.members[1] = non_voter(1, local(1));
    set.config.members[2] = non_voter(2, local(2));
    if let Some(h) = set.members.get_mut(&local(2)) {
        h.state = MemberState::Startup2;
    }
    let mut input = input(3, facts, Observed::Configured(set));
    input.hostconf.members[1].votes = Some(0);
    assert_eq!(plan(&input), Step::InSync);
}

// ------------------------ votes across clusters (no-cluster-gains-a-vote-majority)

/// An initiate input: `local_count` local members and the `remote` members,
/// every one of them listed in hostconf and answering without a config.
fn initiate_input(local_count: u32, remote: &[MemberAddress]) -> PlanInput {
    let facts = (0..local_count)
        .map(|i| data(i, Some(empty_probe())))
        .collect();
    let mut input = input(local_count, facts, Observed::Unreachable);
    let mut listed: Vec<MemberAddress> = (0..local_count).map(local).collect();
    listed.extend_from_slice(remote);
    input.hostconf = hostconf(&listed);
    input.remote_probes = remote.iter().map(|a| (a.clone(), empty_probe())).collect();
    input
}

#[test]
fn a_four_two_one_split_gives_no_cluster_a_majority_of_votes() {
    // Round-robin: local 0, remote 0, third 0, local 1, remote 1, local 2
    // make 6 voters (this cluster 3 of 6); local 3 would make it 4 of 7.
    let config = expect_initiate(plan(&initiate_input(4, &[remote(0), remote(1), third(0)])));
    assert_eq!(
        hosts(&config),
        vec![
            (0, local(0), 1),
            (1, local(1), 1),
            (2, local(2), 1),
            (3, local(3), 0),
            (4, remote(0), 1),
            (5, remote(1), 1),
            (6, third(0), 1)
        ]
    );
    assert_eq!(config.member(&local(3)).map(|m| m.priority), Some(0.0));
    assert_eq!(config.validate(), vec![]);

    // The same split grown one member at a time: the fourth local member
    // joins without a vote, although only six members vote.
    let (mut facts, mut set) = three_local_in_sync(2);
    set.config.members.push(voter(20, third(0)));
    let set = healthy(set.config, &local(0));
    facts.push(data(3, Some(empty_probe())));
    let (new, change) = expect_reconfig(plan(&input(4, facts, Observed::Configured(set))));
    assert_eq!(change, Change::AddMember { host: local(3) });
    let joined = new.member(&local(3)).expect("added");
    assert_eq!((joined.votes, joined.priority), (0, 0.0));
    assert_eq!(new.voting_member_count(), 6);
}

#[test]
fn two_clusters_keep_first_come_votes() {
    // Two sites: the local members vote first, 4 of 7.
    let config = expect_initiate(plan(&initiate_input(4, &[remote(0), remote(1), remote(2)])));
    assert_eq!(config.voting_member_count(), 7);
    assert!(config.members.iter().all(|m| m.votes == 1));

    // A fourth local member joins with a vote: 4 of 6.
    let (mut facts, set) = three_local_in_sync(2);
    facts.push(data(3, Some(empty_probe())));
    let (new, _) = expect_reconfig(plan(&input(4, facts, Observed::Configured(set))));
    assert_eq!(new.member(&local(3)).map(|m| m.votes), Some(1));
}

#[test]
fn a_non_voter_is_promoted_once_other_clusters_add_voters() {
    // Local 0 and 1 vote, local 2 does not; one voter in each other cluster.
    // A vote for local 2 would make this cluster 3 of 5.
    let (facts, mut set) = three_local_in_sync(1);
    set.config.members[2] = non_voter(2, local(2));
    set.config.members.push(voter(20, third(0)));
    let set = healthy(set.config, &local(0));
    assert_eq!(
        plan(&input(3, facts.clone(), Observed::Configured(set.clone()))),
        Step::InSync
    );

    // The third cluster adds a voter: 3 of 6 is no majority.
    let mut config = set.config;
    config.members.push(voter(21, third(1)));
    let set = healthy(config, &local(0));
    let (new, change) = expect_reconfig(plan(&input(3, facts, Observed::Configured(set))));
    assert_eq!(change, Change::PromoteMember { host: local(2) });
    assert_eq!(new.voting_member_count(), 6);
}

#[test]
fn refuses_an_arbiter_whose_vote_would_give_its_cluster_a_majority() {
    // Two local voters and one in each other cluster: the arbiter would make
    // this cluster 3 of 5.
    let (mut facts, mut set) = three_local_in_sync(1);
    set.config.members.retain(|m| m.host != local(2));
    set.config.members.push(voter(20, third(0)));
    let set = healthy(set.config, &local(0));
    facts.truncate(2);
    facts.push(running(MemberSlot::Arbiter, Some(empty_probe())));
    let mut input = input(2, facts, Observed::Configured(set));
    input.arbiter_wanted = true;
    assert_eq!(
        plan(&input),
        Step::Refuse {
            reason: Refusal::ArbiterVoteWouldGiveClusterMajority {
                host: addr(VIP, port_of(MemberSlot::Arbiter))
            }
        }
    );
}

#[test]
fn initiate_runs_on_an_electable_local_member_even_when_the_arbiter_sorts_first() {
    // mongod answers 93 to replSetInitiate sent to a member that cannot be
    // elected (arbiter, votes 0, priority 0, hidden).
    let mut input = initiate_input(2, &[remote(0), remote(1)]);
    input.arbiter_wanted = true;
    let mut arbiter = running(MemberSlot::Arbiter, Some(empty_probe()));
    arbiter.address = Some(addr(VIP, 20000));
    input.local_members.push(arbiter);
    input.hostconf.members.push(HostConfMember {
        address: addr(VIP, 20000),
        arbiter: true,
        votes: None,
        priority: None,
        hidden: false,
        tags: BTreeMap::new(),
    });
    input.hostconf.members[0].priority = Some(0.0);
    let Step::Initiate { config, on } = plan(&input) else {
        panic!("expected an initiate");
    };
    assert_eq!(
        config.members[0].host,
        addr(VIP, 20000),
        "the arbiter sorts first"
    );
    assert_eq!(
        on,
        local(1),
        "local 0 has priority 0, the arbiter cannot be elected"
    );
    assert!(config.member(&on).is_some_and(ConfigMember::is_electable));
}

#[test]
fn initiate_waits_until_every_other_cluster_has_answered() {
    // The rsInit cluster's object was recreated (status lost) while its link to
    // the other clusters is cut: a majority of hostconf answering locally must
    // not be enough, or a second set would appear beside the live one.
    let mut input = initiate_input(3, &[remote(0), third(0)]);
    input.remote_probes.remove(&third(0));
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::ClusterNotAnswering {
                vip: THIRD_VIP.to_owned()
            }
        }
    );
    input.remote_probes.insert(third(0), empty_probe());
    expect_initiate(plan(&input));
}

#[test]
fn initiate_waits_while_only_one_clusters_members_could_vote() {
    // Three clusters in hostconf, every one answering; the other clusters'
    // members are pinned to 0 votes, so the three local members would hold
    // every vote.
    let mut input = initiate_input(3, &[remote(0), third(0)]);
    input.hostconf.members[3].votes = Some(0);
    input.hostconf.members[4].votes = Some(0);
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::VotersInOneCluster {
                vip: VIP.to_owned()
            }
        }
    );
    // Once remote 0 may vote: local 0 and remote 0 vote, 1 of 2 each.
    input.hostconf.members[3].votes = None;
    let config = expect_initiate(plan(&input));
    assert_eq!(
        hosts(&config),
        vec![
            (0, local(0), 1),
            (1, local(1), 0),
            (2, local(2), 0),
            (3, remote(0), 1),
            (4, third(0), 0)
        ]
    );
}

#[test]
fn initiate_gives_the_arbiter_its_vote_first_across_three_clusters() {
    // Arbiter, remote 0, third 0, local 0 vote (this cluster 2 of 4); local 1
    // would make it 3 of 5.
    let mut input = initiate_input(2, &[remote(0), third(0)]);
    let arbiter = addr(VIP, port_of(MemberSlot::Arbiter));
    input.arbiter_wanted = true;
    input
        .local_members
        .push(running(MemberSlot::Arbiter, Some(empty_probe())));
    input.hostconf = hostconf(&[local(0), local(1), arbiter.clone(), remote(0), third(0)]);
    let config = expect_initiate(plan(&input));
    assert_eq!(
        hosts(&config),
        vec![
            (0, local(0), 1),
            (1, local(1), 0),
            (2, arbiter, 1),
            (3, remote(0), 1),
            (4, third(0), 1)
        ]
    );
}

// ------------------------------------------------------------------- settings

#[test]
fn updates_settings_after_membership_work_keeping_the_replica_set_id() {
    let (mut facts, set) = three_local_in_sync(2);
    facts.push(data(3, Some(empty_probe())));
    let mut input = input(4, facts, Observed::Configured(set.clone()));
    input.settings.election_timeout_millis = 30_000;
    let (_, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::AddMember { host: local(3) });

    input.desired_members = 3;
    input.local_members.pop();
    let (new, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::UpdateSettings);
    assert_eq!(new.settings.election_timeout_millis, 30_000);
    assert_eq!(new.settings.replica_set_id.as_deref(), Some(SET_ID));
    assert_eq!(new.members, set.config.members);
    assert_eq!(voting_changes(&set.config, &new), 0);
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
fn a_cluster_holding_a_majority_of_votes_gives_one_up_when_another_cluster_can_take_it() {
    // Initiated from a stale hostconf that listed only this cluster, it kept
    // every vote; now the other clusters' members are in, as non-voters.
    let mut members: Vec<ConfigMember> = (0..3).map(|i| voter(i64::from(i), local(i))).collect();
    members.push(non_voter(10, remote(0)));
    members.push(non_voter(20, third(0)));
    let set = healthy(config(members), &local(0));
    let facts = (0..3)
        .map(|i| data(i, Some(member_probe(SET_ID, MemberState::Secondary))))
        .collect();
    let mut input = input(3, facts, Observed::Configured(set.clone()));
    input.hostconf = hostconf(&[local(0), local(1), local(2), remote(0), third(0)]);
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(
        change,
        Change::DemoteMember { host: local(2) },
        "never the primary"
    );
    let demoted = config.member(&local(2)).unwrap();
    assert_eq!((demoted.votes, demoted.priority), (0, 0.0));
    assert_eq!(voting_changes(&set.config, &config), 1);

    // Balanced (this cluster 2 of 4 once the others vote): nothing to give up.
    let mut balanced = set;
    for m in balanced
        .config
        .members
        .iter_mut()
        .filter(|m| m.host.host != VIP)
    {
        m.votes = 1;
        m.priority = 1.0;
    }
    input.observed = Observed::Configured(balanced);
    assert_ne!(plan(&input).reason(), "DemoteMember");
}

#[test]
fn only_the_rs_init_cluster_writes_the_set_wide_settings() {
    // Measured in the lab: one cluster patched alone made the clusters revert
    // each other's settings, the config version climbing without end.
    let (facts, set) = three_local_in_sync(2);
    let mut input = input(3, facts, Observed::Configured(set));
    input.settings.election_timeout_millis = 30_000;
    input.rs_init = false;
    assert_eq!(
        plan(&input),
        Step::InSync,
        "another cluster's settings are not ours to write"
    );
    input.rs_init = true;
    let (_, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::UpdateSettings);
}

// ---------------------------------------------------------------- other cases

#[test]
fn in_sync_when_everything_matches() {
    let (facts, set) = three_local_in_sync(2);
    assert_eq!(
        plan(&input(3, facts, Observed::Configured(set))),
        Step::InSync
    );
}

#[test]
fn refuses_a_set_with_another_name_or_replica_set_id() {
    let (facts, mut set) = three_local_in_sync(0);
    set.config.set_name = "other".to_owned();
    assert_eq!(
        plan(&input(3, facts.clone(), Observed::Configured(set))).reason(),
        "SetNameMismatch"
    );
    let (_, set) = three_local_in_sync(0);
    let mut input = input(3, facts, Observed::Configured(set));
    input.known_replica_set_id = Some("recorded-elsewhere".to_owned());
    assert_eq!(plan(&input).reason(), "ReplicaSetIdMismatch");
}

#[test]
fn refuses_an_unaccounted_local_member() {
    let (facts, mut set) = three_local_in_sync(2);
    set.config.members.push(non_voter(30, local(9)));
    assert_eq!(
        plan(&input(3, facts, Observed::Configured(set))),
        Step::Refuse {
            reason: Refusal::UnaccountedLocalMember { host: local(9) }
        }
    );
}

#[test]
fn reasons_are_pascal_case_and_messages_read_as_sentences() {
    let steps = [
        Step::Wait {
            reason: WaitReason::NotEnoughHealthyVoters {
                healthy: 1,
                needed: 2,
            },
        },
        Step::Refuse {
            reason: Refusal::InvalidConfig {
                problems: vec![ConfigProblem::NoVoters],
            },
        },
        Step::InSync,
        Step::DeleteStatefulSet {
            slot: MemberSlot::Data(3),
            delete_pvc: false,
        },
    ];
    for step in steps {
        let reason = step.reason();
        assert!(reason
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_uppercase()));
        assert!(
            reason.chars().all(|c| c.is_ascii_alphanumeric()),
            "{reason}"
        );
        assert!(!step.to_string().is_empty());
    }
    assert_eq!(
        Step::Refuse {
            reason: Refusal::InvalidConfig {
                problems: vec![ConfigProblem::NoVoters]
            }
        }
        .to_string(),
        "refused: the resulting config would be invalid: no member has a vote"
    );
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

// ------------------------------------------------ a member's address changes

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
    // A member in the config needs no recovery records: the controller reads
    // none (found by lab 66: the readdress waited for them forever).
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

#[test]
fn a_lost_voting_majority_is_reported_with_the_members_gone_and_nothing_is_changed() {
    // Three local voters and two remote; the remote ones and a local one do
    // not answer heartbeats: 2 of 5 voters answer, no primary can be elected.
    let (facts, mut set) = three_local_in_sync(2);
    set.primary = None;
    set.config_committed = false;
    for (host, status) in set.members.iter_mut() {
        let gone = host.host != VIP || *host == local(2);
        status.healthy = !gone;
        status.state = if gone {
            MemberState::Down
        } else {
            MemberState::Secondary
        };
    }
    // Even with a change wanted (member 2 no longer wanted), nothing is planned.
    let lost_input = input(2, facts, Observed::Configured(set.clone()));
    let mut lost = vec![local(2), remote(0), remote(1)];
    lost.sort();
    assert_eq!(
        plan(&lost_input),
        Step::Wait {
            reason: WaitReason::VotingMajorityLost {
                lost: lost.clone(),
                voters: 5
            }
        }
    );
    let message = WaitReason::VotingMajorityLost { lost, voters: 5 }.to_string();
    assert!(message.contains("3 of 5 voters"), "{message}");
    assert!(
        message.contains("10.0.0.2") || message.contains(&remote(0).to_string()),
        "{message}"
    );

    // A plain election (every voter answers, no primary yet) is no loss.
    for status in set.members.values_mut() {
        status.healthy = true;
        status.state = MemberState::Secondary;
    }
    let healthy_input = input(3, three_local_in_sync(2).0, Observed::Configured(set));
    assert!(!matches!(
        plan(&healthy_input),
        Step::Wait {
            reason: WaitReason::VotingMajorityLost { .. }
        }
    ));
}
