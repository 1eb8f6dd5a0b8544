//! mongod 5.0+'s implicit default write concern and PSA rules: the
//! cluster-wide write concern pinned once, changes that would flip the
//! implicit default waited on until it is, and a PSA voter made electable in
//! two steps.

use super::*;
use crate::replset::{ClusterWriteConcern, DefaultW};

fn arbiter(id: i64, host: MemberAddress) -> ConfigMember {
    ConfigMember {
        arbiter_only: true,
        priority: 0.0,
        ..voter(id, host)
    }
}

/// Local a0 (primary) and a remote arbiter; local slot 1 answers empty.
fn primary_and_arbiter() -> (Vec<LocalMemberFacts>, ObservedSet) {
    let members = vec![voter(0, local(0)), arbiter(1, remote(9))];
    let facts = vec![
        data(0, Some(member_probe(SET_ID, MemberState::Primary))),
        data(1, Some(empty_probe())),
    ];
    (facts, healthy(config(members), &local(0)))
}

#[test]
fn the_cluster_of_the_primary_pins_the_implicit_default_before_anything_else() {
    let (mut facts, mut set) = three_local_in_sync(0);
    facts.push(data(3, Some(empty_probe())));
    set.write_concern = ClusterWriteConcern::Implicit;
    let pin = Step::SetClusterWriteConcern {
        primary: local(0),
        w: DefaultW::Majority,
    };
    // The rsInit cluster or not: its member is the primary.
    for rs_init in [true, false] {
        let mut here = input(4, facts.clone(), Observed::Configured(set.clone()));
        here.rs_init = rs_init;
        assert_eq!(plan(&here), pin, "rsInit {rs_init}");
    }
    // Once pinned, or before 5.0: nothing to pin.
    for known in [
        ClusterWriteConcern::Global { w: "1".into() },
        ClusterWriteConcern::NotSetBefore50,
    ] {
        set.write_concern = known;
        let step = plan(&input(4, facts.clone(), Observed::Configured(set.clone())));
        assert!(matches!(step, Step::Reconfig { .. }), "{step:?}");
    }
}

#[test]
fn only_the_cluster_of_the_primary_pins_whatever_its_hostconf_says() {
    // a0 (local) and b0 (remote) with an arbiter; hostconf differs between
    // the clusters while a change propagates. Whichever member is primary,
    // one cluster pins, on it, and the other does not: the rsInit cluster
    // no more than another.
    let mut members = vec![voter(0, local(0)), voter(1, remote(0))];
    members.push(arbiter(2, remote(9)));
    let facts = vec![data(0, Some(member_probe(SET_ID, MemberState::Secondary)))];
    for (primary, local_pins) in [(remote(0), false), (local(0), true)] {
        let mut set = healthy(config(members.clone()), &primary);
        set.write_concern = ClusterWriteConcern::Implicit;
        let mut here = input(1, facts.clone(), Observed::Configured(set));
        here.rs_init = true;
        let step = plan(&here);
        let pinned =
            matches!(&step, Step::SetClusterWriteConcern { primary: on, .. } if *on == primary);
        assert_eq!(pinned, local_pins, "primary {primary}: {step:?}");
        assert!(
            local_pins || !matches!(step, Step::SetClusterWriteConcern { .. }),
            "{step:?}"
        );
    }
}

#[test]
fn a_change_that_flips_the_implicit_default_waits_until_it_is_pinned() {
    // {a0, a1, a2, arbiter, b0}: four data voters of five, {w: "majority"};
    // removing a2 leaves three of four, {w: 1}.
    let (facts, mut set) = three_local_in_sync(0);
    set.config.members.push(arbiter(5, remote(9)));
    set.config.members.push(voter(6, remote(0)));
    // b0 is primary: its cluster pins, this one waits.
    set = healthy(set.config, &remote(0));
    set.write_concern = ClusterWriteConcern::Implicit;
    let mut elsewhere = input(2, facts, Observed::Configured(set.clone()));
    assert!(matches!(
        plan(&elsewhere),
        Step::Wait {
            reason: WaitReason::ClusterWriteConcernNotSet {
                from: DefaultW::Majority,
                to: DefaultW::One,
                ..
            }
        }
    ));
    if let Observed::Configured(set) = &mut elsewhere.observed {
        set.write_concern = ClusterWriteConcern::Global {
            w: "majority".into(),
        };
    }
    let (_, change) = expect_reconfig(plan(&elsewhere));
    assert_eq!(change, Change::RemoveMember { host: local(2) });
}

#[test]
fn a_data_member_rejoining_a_data_and_arbiter_set_votes_first_and_is_electable_after() {
    let (facts, set) = primary_and_arbiter();
    let (added, change) =
        expect_reconfig(plan(&input(2, facts.clone(), Observed::Configured(set))));
    assert_eq!(change, Change::AddMember { host: local(1) });
    let joined = added.member(&local(1)).unwrap();
    assert_eq!(
        (joined.votes, joined.priority),
        (1, 0.0),
        "mongod's PSA rule"
    );

    // mongod cleared newlyAdded: now its priority.
    let mut set = healthy(added, &local(0));
    set.config.version += 1;
    let mut facts = facts;
    facts[1] = data(1, Some(member_probe(SET_ID, MemberState::Secondary)));
    let (raised, change) = expect_reconfig(plan(&input(2, facts, Observed::Configured(set))));
    assert_eq!(change, Change::RaisePriority { host: local(1) });
    assert_eq!(raised.member(&local(1)).unwrap().priority, 1.0);
}

#[test]
fn the_pinned_default_is_that_of_the_set_hostconf_lists_not_of_the_first_config() {
    // Initiated as {a0, a1, a2, arbiter} ({w: 1}: three data voters of
    // four) while hostconf lists two more data members: five of six is
    // {w: "majority"}, the set the clients will write to.
    let (facts, set) = three_local_in_sync(0);
    let mut config = set.config.clone();
    config.members.push(arbiter(5, remote(9)));
    let mut set = healthy(config, &local(0));
    set.write_concern = ClusterWriteConcern::Implicit;
    assert_eq!(set.config.implicit_default_write_concern(), DefaultW::One);
    let mut pinning = input(3, facts, Observed::Configured(set));
    pinning.hostconf = hostconf(&[
        local(0),
        local(1),
        local(2),
        remote(9),
        remote(0),
        remote(1),
    ]);
    pinning.hostconf.members[3].arbiter = true;
    assert_eq!(
        plan(&pinning),
        Step::SetClusterWriteConcern {
            primary: local(0),
            w: DefaultW::Majority
        }
    );
}

#[test]
fn a_member_whose_newly_added_clearing_would_flip_the_default_waits_until_it_is_pinned() {
    // {b0, b1, b2, arbiter}: three data voters of four, {w: 1}. a0 joins
    // newlyAdded (no vote, so the config it is added with keeps {w: 1}), but
    // mongod's own reconfig that clears the flag makes four of five,
    // {w: "majority"}: refused on every heartbeat while nothing is pinned,
    // a0 would stay without a vote for good.
    let mut members: Vec<ConfigMember> = (0..3).map(|i| voter(i, remote(i as u32))).collect();
    members.push(arbiter(3, remote(9)));
    let mut set = healthy(config(members), &remote(0));
    set.write_concern = ClusterWriteConcern::Implicit;
    let facts = vec![data(0, Some(empty_probe()))];
    let mut joining = input(1, facts, Observed::Configured(set));
    assert!(
        matches!(
            plan(&joining),
            Step::Wait {
                reason: WaitReason::ClusterWriteConcernNotSet {
                    from: DefaultW::One,
                    to: DefaultW::Majority,
                    ..
                }
            }
        ),
        "{:?}",
        plan(&joining)
    );
    if let Observed::Configured(set) = &mut joining.observed {
        set.write_concern = ClusterWriteConcern::Global { w: "1".into() };
    }
    let (_, change) = expect_reconfig(plan(&joining));
    assert_eq!(change, Change::AddMember { host: local(0) });
}

#[test]
fn a_local_member_still_newly_added_is_not_in_sync() {
    let (facts, mut set) = three_local_in_sync(0);
    assert_eq!(
        plan(&input(3, facts.clone(), Observed::Configured(set.clone()))),
        Step::InSync
    );
    set.config.members[2].newly_added = true;
    assert_eq!(
        plan(&input(3, facts, Observed::Configured(set))),
        wait(WaitReason::NewlyAddedMemberSyncing { host: local(2) })
    );
}
