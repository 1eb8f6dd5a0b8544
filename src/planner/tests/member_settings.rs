//! hostconf's votes, priority, hidden and tags of a member already in the set
//! are applied to its entry, one member per reconfig.

use super::*;

/// Three local members in sync (0 primary) and two remote voters, with
/// hostconf's entry of each listed host changed by `hint`.
fn with_hints(hint: impl Fn(&mut HostConfMember)) -> PlanInput {
    let (facts, set) = three_local_in_sync(2);
    let mut input = input(3, facts, Observed::Configured(set));
    input.hostconf.members.iter_mut().for_each(hint);
    input
}

fn observed_config(input: &PlanInput) -> ReplicaSetConfig {
    match &input.observed {
        Observed::Configured(set) => set.config.clone(),
        Observed::Unreachable => panic!("no set observed"),
    }
}

#[test]
fn a_priority_hostconf_changed_is_applied_to_an_existing_member() {
    let input = with_hints(|m| {
        if m.address == local(1) {
            m.priority = Some(5.0);
        }
    });
    let old = observed_config(&input);
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::UpdateMember { host: local(1) });
    let member = config.member(&local(1)).expect("kept");
    assert_eq!((member.votes, member.priority), (1, 5.0));
    assert_eq!(config.version, old.version + 1);
    assert_eq!(voting_changes(&old, &config), 0);
}

#[test]
fn hidden_and_tags_hostconf_changed_are_applied_and_a_hidden_member_keeps_its_vote() {
    let input = with_hints(|m| {
        if m.address == local(2) {
            m.hidden = true;
            m.tags = BTreeMap::from([("site".to_owned(), "east".to_owned())]);
        }
    });
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::UpdateMember { host: local(2) });
    let member = config.member(&local(2)).expect("kept");
    assert_eq!(
        (member.votes, member.priority, member.hidden),
        (1, 0.0, true)
    );
    assert_eq!(member.tags.get("site").map(String::as_str), Some("east"));
}

#[test]
fn members_pinned_to_zero_votes_lose_their_votes_one_per_reconfig() {
    let mut input = with_hints(|m| {
        if m.address == local(1) || m.address == local(2) {
            m.votes = Some(0);
        }
    });
    let old = observed_config(&input);
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::UpdateMember { host: local(1) });
    let member = config.member(&local(1)).expect("kept");
    assert_eq!((member.votes, member.priority), (0, 0.0));
    assert_eq!(voting_changes(&old, &config), 1);

    input.observed = Observed::Configured(healthy(config, &local(0)));
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::UpdateMember { host: local(2) });
    input.observed = Observed::Configured(healthy(config, &local(0)));
    assert_eq!(plan(&input), Step::InSync);
}

#[test]
fn a_vote_is_not_taken_while_too_few_voters_would_be_healthy() {
    let mut input = with_hints(|m| {
        if m.address == local(2) {
            m.votes = Some(0);
        }
    });
    let Observed::Configured(set) = &mut input.observed else {
        unreachable!()
    };
    for host in [remote(0), remote(1)] {
        set.members
            .insert(host, member_status(MemberState::Down, false, None));
    }
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::NotEnoughHealthyVoters {
                healthy: 2,
                needed: 3
            }
        }
    );
}

#[test]
fn the_primary_steps_down_before_hostconf_makes_it_unelectable() {
    let input = with_hints(|m| {
        if m.address == local(0) {
            m.priority = Some(0.0);
        }
    });
    assert_eq!(plan(&input).reason(), "StepDown");
}

#[test]
fn the_primary_changes_last_and_only_to_a_successor_hostconf_keeps_electable() {
    // Every local member is to be hidden: the secondaries first; the primary
    // then has no successor that stays electable (the remote voters are down).
    let mut input = with_hints(|m| {
        if m.address.host == VIP {
            m.hidden = true;
        }
    });
    let (config, change) = expect_reconfig(plan(&input));
    assert_eq!(change, Change::UpdateMember { host: local(1) });
    let (config, _) = expect_reconfig(plan(&PlanInput {
        observed: Observed::Configured(healthy(config, &local(0))),
        ..input.clone()
    }));
    let mut set = healthy(config, &local(0));
    for host in [remote(0), remote(1)] {
        set.members
            .insert(host, member_status(MemberState::Down, false, None));
    }
    input.observed = Observed::Configured(set);
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::NoElectableSecondary { primary: local(0) }
        }
    );
}

#[test]
fn hostconf_settings_of_other_clusters_members_are_left_to_their_cluster() {
    let input = with_hints(|m| {
        if m.address == remote(0) {
            m.priority = Some(3.0);
        }
    });
    assert_eq!(plan(&input), Step::InSync);
}
