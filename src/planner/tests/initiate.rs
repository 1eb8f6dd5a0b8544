//! Initiating the set: only once, only in the rsInit cluster, with every
//! desired local member and a majority of hostconf answering.

use super::*;

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
