//! Promotions, and votes spread across clusters so that none holds a
//! majority (`no-cluster-gains-a-vote-majority`).

use super::*;

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
    // Nothing to promote; the member in initial sync is waited on.
    assert_eq!(
        plan(&input),
        Step::Wait {
            reason: WaitReason::MemberResyncing { host: local(2) }
        }
    );
}

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

/// Two local voters and one in each other cluster, and the local arbiter
/// answering, empty, to join: its vote would make this cluster 3 of 5.
pub(super) fn an_arbiter_whose_vote_would_give_its_cluster_a_majority() -> PlanInput {
    let (mut facts, mut set) = three_local_in_sync(1);
    set.config.members.retain(|m| m.host != local(2));
    set.config.members.push(voter(20, third(0)));
    let set = healthy(set.config, &local(0));
    facts.truncate(2);
    facts.push(running(MemberSlot::Arbiter, Some(empty_probe())));
    let mut input = input(2, facts, Observed::Configured(set));
    input.arbiter_wanted = true;
    input
}

#[test]
fn refuses_an_arbiter_whose_vote_would_give_its_cluster_a_majority() {
    assert_eq!(
        plan(&an_arbiter_whose_vote_would_give_its_cluster_a_majority()),
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
