//! An existing set as a whole: its identity, its settings, a lost voting
//! majority, and in sync.

use super::*;

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
fn only_the_rs_init_cluster_writes_the_set_wide_settings() {
    // Were every cluster to write them, a spec patched in one cluster only
    // would make the clusters revert each other's settings without end.
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
fn refuses_an_unaccounted_local_member_that_answers_or_votes() {
    // A voter nobody accounts for (it may be a local member under an old
    // address): refused.
    let (facts, mut set) = three_local_in_sync(2);
    set.config.members.push(voter(30, local(9)));
    let refused = Step::Refuse {
        reason: Refusal::UnaccountedLocalMember { host: local(9) },
    };
    let voting = input(3, facts.clone(), Observed::Configured(set.clone()));
    assert_eq!(plan(&voting), refused);

    // A non-voter that answers heartbeats: refused too.
    set.config.members.last_mut().unwrap().votes = 0;
    set.config.members.last_mut().unwrap().priority = 0.0;
    let healthy = member_status(MemberState::Secondary, true, Some(0));
    set.members.insert(local(9), healthy);
    let answering = input(3, facts.clone(), Observed::Configured(set.clone()));
    assert_eq!(plan(&answering), refused);

    // A non-voter nobody answers at (added where its Service no longer
    // pointed): removed, a change no majority depends on.
    set.members.remove(&local(9));
    let (config, change) = expect_reconfig(plan(&input(3, facts, Observed::Configured(set))));
    assert_eq!(change, Change::RemoveUnaccountedEntry { host: local(9) });
    assert!(!config.contains(&local(9)));
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
