//! Property tests of the planner, one per invariant of
//! `docs/replica-set-rules.md` (the test `invariant_<name>` checks the
//! invariant `<name>`, and the `INVARIANTS` table names each checker the same
//! way), in two kinds:
//!
//! - **single inputs**: random configs, health, probes and desired counts; each
//!   returned step is checked against the invariant;
//! - **sequences**: the [`world`](super::world) model of several clusters, where
//!   every cluster's planner acts in turn, interleaved with failures, elections,
//!   commits and spec changes; every invariant is checked after every step, and
//!   fault-free runs must converge to `InSync` everywhere.
//!
//! The checkers judge with their own small helpers and with mongod's rules as
//! [`world`](super::world) writes them again, never with the planner's or
//! `replset`'s helpers; `checkers_reject_bad_steps` shows that each can reject a
//! step.

mod checkers;
mod checkers_reject_bad_steps;
mod generators;
mod runner;

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::mongod_rules::implicit_majority;
use super::tests::{addr, member_status, port_of, SET, SET_ID};
use super::world::{
    config_rule_breaks, electable, lists, reconfig_rule_breaks, voting_hosts, voting_ids, Event,
    World,
};
use super::*;
use crate::api::{PvcPolicy, ReplicaSetSettings};
use crate::hostconf::{HostConf, HostConfMember, MemberAddress};
use crate::member::{MemberSlot, RecordedEntry};
use crate::observe::{DroppedMembers, MemberProbe, Observed, ObservedSet};
use crate::replset::{
    ClusterWriteConcern, ConfigMember, ConfigSettings, MemberState, MemberStatus, ReplicaSetConfig,
};
use checkers::*;
use generators::*;
use runner::*;

const VIPS: [&str; 3] = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];

fn single_input_config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(single_input_config())]

    #[test]
    fn invariant_one_voting_change_per_reconfig(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(one_voting_change_per_reconfig(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_reconfig_accepted_without_force(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(reconfig_accepted_without_force(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_initiate_twice(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_initiate_twice(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_keep_a_healthy_voting_majority(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(keep_a_healthy_voting_majority(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_step_down_before_removing_the_primary(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(step_down_before_removing_the_primary(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_config_within_mongodb_limits(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(config_within_mongodb_limits(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_delete_a_member_in_the_config(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_delete_a_member_in_the_config(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_add_a_member_of_another_set(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_add_a_member_of_another_set(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_only_local_members_change(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(only_local_members_change(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_one_entry_per_member(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(one_entry_per_member(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_settings_written_by_the_rs_init_cluster_only(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(settings_written_by_the_rs_init_cluster_only(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_an_emptied_member_never_votes(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(an_emptied_member_never_votes(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_same_input_same_step(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(same_input_same_step(&input, &step), Ok(()));
    }
}

proptest! {
    // Only a few random inputs give a vote from a config where no cluster holds
    // a majority (about 1 in 20): more cases than the other single inputs.
    #![proptest_config(ProptestConfig {
        cases: 1024,
        ..ProptestConfig::default()
    })]

    #[test]
    fn invariant_no_cluster_gains_a_vote_majority(input in arb_input()) {
        prop_assume!(clusters_in_hostconf(&input) >= 3);
        let step = plan(&input);
        prop_assert_eq!(no_cluster_gains_a_vote_majority(&input, &step), Ok(()));
    }
}

/// Enough rounds for up to 15 members to join or leave one at a time.
const ROUNDS: usize = 60;

fn sequence_config() -> ProptestConfig {
    ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(sequence_config())]

    #[test]
    fn invariants_hold_after_every_step_of_random_runs(
        desired in arb_desired(),
        arbiter in any::<bool>(),
        pvc_policy in arb_pvc_policy(),
        ops in prop::collection::vec(arb_op(), 1..120),
    ) {
        let mut world = World::new(&desired, arbiter, pvc_policy);
        let outcome = run(&mut world, &ops);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
    }

    #[test]
    fn fault_free_runs_converge_to_in_sync_with_the_desired_members(
        desired in arb_desired(),
        arbiter in any::<bool>(),
        pvc_policy in arb_pvc_policy(),
        changes in prop::collection::vec(prop::collection::vec(0u32..6, CLUSTERS), 0..4),
    ) {
        let mut world = World::new(&desired, arbiter, pvc_policy);
        let outcome = converge(&mut world, ROUNDS);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
        prop_assert_eq!(check_converged(&world), Ok(()));
        for counts in changes.iter().filter(|c| c.iter().any(|&n| n > 0)) {
            for (cluster, &desired) in counts.iter().enumerate() {
                world.apply_event(&Event::SetDesired { cluster, desired });
            }
            let outcome = converge(&mut world, ROUNDS);
            prop_assert!(outcome.is_ok(), "{:?}", outcome);
            prop_assert_eq!(check_converged(&world), Ok(()));
        }
    }

    #[test]
    fn runs_with_faults_converge_once_the_faults_heal(
        desired in arb_desired(),
        arbiter in any::<bool>(),
        pvc_policy in arb_pvc_policy(),
        ops in prop::collection::vec(arb_op(), 1..80),
    ) {
        let mut world = World::new(&desired, arbiter, pvc_policy);
        let outcome = run(&mut world, &ops);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
        if world.set.is_none() {
            // Only the rsInit cluster initiates, and only with members of its own.
            if let Some(cluster) = world.clusters.iter().position(|c| c.rs_init && c.desired == 0) {
                world.apply_event(&Event::SetDesired { cluster, desired: 1 });
            }
        } else if world.clusters.iter().all(|c| c.desired == 0) {
            world.apply_event(&Event::SetDesired { cluster: 0, desired: 1 });
        }
        // An arbiter wanted once seven members vote is refused for good
        // (NoVoteForArbiter): the control plane takes it back. An arbiter
        // whose entry names its address before a move is in the set, not
        // refused: it is judged by the entry it stands for, not by its host.
        for cluster in 0..CLUSTERS {
            let arbiter = (cluster, MemberSlot::Arbiter);
            let in_config = world
                .set
                .as_ref()
                .is_some_and(|s| s.owners.values().any(|owner| *owner == arbiter));
            if world.clusters[cluster].arbiter && !in_config {
                world.apply_event(&Event::SetArbiter { cluster, wanted: false });
            }
        }
        // Addresses that moved under a majority of the voters at once leave
        // the set without a primary: only a forced reconfig (an SRE's
        // disaster recovery, never the operator's) or moving them back helps.
        // So does a member added at an address that moved between the plan
        // and the reconfig: it stays `newlyAdded` where nobody answers, and
        // the planner waits on it (`docs/replica-set-rules.md`, *What is not
        // enforced*). So does every electable voter moved at once: no member
        // can be elected to take the new address. The control plane moves
        // them back; other moves are the planner's to follow.
        if !world.voters_reachable()
            || !world.electable_voter_reachable()
            || world.newly_added_unreachable()
        {
            world.restore_addresses();
        }
        for cluster in 0..CLUSTERS {
            let slots = (0..6).map(MemberSlot::Data).chain([MemberSlot::Arbiter]);
            for slot in slots {
                world.apply_event(&Event::PodUp { cluster, slot });
            }
        }
        let outcome = converge(&mut world, ROUNDS);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
        prop_assert_eq!(check_converged(&world), Ok(()));
    }
}

#[test]
fn a_three_cluster_federation_initiates_grows_and_shrinks_to_in_sync() {
    let mut world = World::new(&[3, 2, 2], true, PvcPolicy::Retain);
    assert_eq!(converge(&mut world, ROUNDS).map(|_| ()), Ok(()));
    assert_eq!(check_converged(&world), Ok(()));
    assert_eq!(world.initiations, 1);

    // 7 of 8 vote (the arbiter's cluster 3, the others 2 each). Grow to 9
    // members and the arbiter: the newcomers join without a vote.
    world.apply_event(&Event::SetDesired {
        cluster: 1,
        desired: 4,
    });
    world.apply_event(&Event::SetDesired {
        cluster: 2,
        desired: 2,
    });
    assert_eq!(converge(&mut world, ROUNDS).map(|_| ()), Ok(()));
    assert_eq!(check_converged(&world), Ok(()));

    // Shrink the initiating cluster to nothing: its primary steps down first.
    world.apply_event(&Event::SetDesired {
        cluster: 0,
        desired: 0,
    });
    assert_eq!(converge(&mut world, ROUNDS).map(|_| ()), Ok(()));
    assert_eq!(check_converged(&world), Ok(()));
}

/// Guards the generators: random single inputs must reach every kind of step,
/// or the invariant tests above would prove little.
#[test]
fn random_inputs_reach_every_kind_of_step() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = arb_input();
    let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
    for _ in 0..3000 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        *seen.entry(plan(&tree.current()).reason()).or_default() += 1;
    }
    eprintln!("{seen:?}");
    for kind in [
        "Initiate",
        "AddMember",
        "PromoteMember",
        "RemoveMember",
        "UpdateSettings",
        "StepDown",
        "DeleteStatefulSet",
        "InSync",
        "WouldBreakVotingMajority",
        "MemberHoldsAnotherReplicaSet",
        "NoPrimary",
        "WaitingForNewPrimary",
        "ReaddressMember",
        "UnaccountedLocalMember",
        "UpdateMember",
    ] {
        assert!(seen.contains_key(kind), "no {kind} in {seen:?}");
    }
}

/// Guards the sequence generator: random runs must reach every kind of
/// membership step, or the sequence properties would prove little.
#[test]
fn random_runs_reach_every_kind_of_membership_step() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = (
        arb_desired(),
        any::<bool>(),
        arb_pvc_policy(),
        prop::collection::vec(arb_op(), 1..120),
    );
    let mut seen = StepCounts::new();
    for _ in 0..200 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let (desired, arbiter, pvc_policy, ops) = tree.current();
        let mut world = World::new(&desired, arbiter, pvc_policy);
        for (kind, count) in run(&mut world, &ops).unwrap_or_default() {
            *seen.entry(kind).or_default() += count;
        }
    }
    eprintln!("{seen:?}");
    for kind in [
        "Initiate",
        "AddMember",
        "PromoteMember",
        "RemoveMember",
        "StepDown",
        "DeleteStatefulSet",
        "WaitingForNewPrimary",
        "ReaddressMember",
        "InSync",
    ] {
        assert!(seen.contains_key(kind), "no {kind} in {seen:?}");
    }
}
