//! Unit tests of the roll planner: one case per rule.

use crate::api::TlsMode;
use std::collections::BTreeMap;

use super::*;
use crate::api::ReplicaSetSettings;
use crate::replset::{ConfigMember, ConfigSettings, MemberStatus, ReplicaSetConfig};

const NOW: i64 = 10_000_000;

fn address(cluster: u8, port: u16) -> MemberAddress {
    MemberAddress {
        host: format!("10.0.0.{cluster}"),
        port,
    }
}

/// Cluster 1 runs 30000 (the primary) and 30001; clusters 2 and 3 one each.
fn set() -> ObservedSet {
    let hosts = [
        address(1, 30000),
        address(1, 30001),
        address(2, 30000),
        address(3, 30000),
    ];
    ObservedSet {
        config: ReplicaSetConfig {
            set_name: "rs0".into(),
            version: 3,
            term: None,
            members: hosts
                .iter()
                .enumerate()
                .map(|(i, host)| ConfigMember {
                    id: i as i64,
                    host: host.clone(),
                    arbiter_only: false,
                    votes: 1,
                    priority: 1.0,
                    hidden: false,
                    tags: BTreeMap::new(),
                    newly_added: false,
                })
                .collect(),
            settings: ConfigSettings::from_desired(&ReplicaSetSettings::default(), None),
        },
        primary: Some(address(1, 30000)),
        members: hosts
            .iter()
            .enumerate()
            .map(|(i, host)| {
                let state = if i == 0 {
                    MemberState::Primary
                } else {
                    MemberState::Secondary
                };
                let status = MemberStatus {
                    id: i as i64,
                    healthy: true,
                    state,
                    sync_source: String::new(),
                    lag_secs: Some(0),
                    config_version: Some(3),
                    authentication_refused: false,
                };
                (host.clone(), status)
            })
            .collect(),
        config_committed: true,
        write_concern: Default::default(),
    }
}

fn pod(index: u32, revision: &str, state: MemberState) -> LocalPod {
    LocalPod {
        slot: MemberSlot::Data(index),
        address: address(1, 30000 + index as u16),
        desired_revision: "new".into(),
        desired_keyfile: None,
        desired_tls_mode: TlsStep::keyfile(TlsMode::Disabled),
        membership: None,
        pod: Some(PodFacts {
            uid: format!("uid-{index}"),
            revision: Some(revision.into()),
            keyfile: None,
            tls_mode: TlsStep::keyfile(TlsMode::Disabled),
            terminating: false,
        }),
        state: Some(state),
        version: Some("7.0.14".into()),
    }
}

/// Cluster 1's view: both its members outdated, nobody holds the lease.
fn input() -> RollInput {
    RollInput {
        local_vip: "10.0.0.1".into(),
        local: vec![
            pod(0, "old", MemberState::Primary),
            pod(1, "old", MemberState::Secondary),
        ],
        set: set(),
        lease: LeaseView::Free,
        reports: BTreeMap::new(),
        now_millis: NOW,
        rs_init: true,
        fcv: Some("7.0".into()),
        requested_fcv: None,
        step_down_held: None,
    }
}

fn ours(member: MemberAddress, primary: bool) -> LeaseView {
    LeaseView::Held(Lease::new(member, primary, NOW - 1_000))
}

#[test]
fn nothing_to_roll_when_every_pod_runs_its_revision() {
    let mut input = input();
    for member in &mut input.local {
        member.pod.as_mut().unwrap().revision = Some("new".into());
    }
    assert_eq!(plan_roll(&input), RollStep::UpToDate);
}

#[test]
fn a_secondary_is_restarted_before_the_primary() {
    let step = plan_roll(&input());
    let RollStep::Acquire { lease } = step else {
        panic!("{step:?}")
    };
    assert_eq!(lease.member, address(1, 30001));
    assert!(!lease.primary);
    assert_eq!(lease.expires_at_millis, NOW + LEASE_TTL_MILLIS);
}

#[test]
fn the_primary_waits_until_every_other_member_reports_up_to_date() {
    let mut input = input();
    input.local[1].pod.as_mut().unwrap().revision = Some("new".into());
    let up_to_date = MemberReport {
        up_to_date: true,
        version: None,
        revision: None,
        revision_since_millis: None,
        keyfile: None,
        tls_mode: None,
        membership: None,
    };
    let outdated = MemberReport {
        up_to_date: false,
        ..up_to_date.clone()
    };
    input.reports.insert(address(2, 30000), up_to_date.clone());
    input.reports.insert(address(3, 30000), outdated);
    assert_eq!(
        plan_roll(&input),
        RollStep::Wait {
            reason: RollWait::PrimaryRestartsLast {
                primary: address(1, 30000),
                member: address(3, 30000)
            }
        }
    );
    input.reports.insert(address(3, 30000), up_to_date);
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Acquire { lease } if lease.primary),
        "{step:?}"
    );
}

/// The lab's upgrade once restarted the primary first: its cluster got the
/// change before the others, whose reports still said "up to date" (on the
/// old revision).
#[test]
fn the_primary_waits_for_the_clusters_that_still_publish_another_revision() {
    let mut input = input();
    input.local[1].pod.as_mut().unwrap().revision = Some("new".into());
    let report = |revision: &str, since: i64| MemberReport {
        up_to_date: true,
        version: None,
        revision: Some(revision.into()),
        revision_since_millis: Some(since),
        keyfile: None,
        tls_mode: None,
        membership: None,
    };
    let primary = input.local[0].clone();
    let own = primary.report(None, NOW);
    assert_eq!(own.revision.as_deref(), Some("new"));
    assert_eq!(own.revision_since_millis, Some(NOW));
    input.reports.insert(primary.address.clone(), own);
    input.reports.insert(address(1, 30001), report("new", NOW));
    input.reports.insert(address(2, 30000), report("new", NOW));
    input
        .reports
        .insert(address(3, 30000), report("old", NOW - 3_600_000));
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Wait { reason: RollWait::ChangeNotEverywhereYet { member, waited_secs: 0, .. } } if *member == address(3, 30000)),
        "{step:?}"
    );

    // Republished later, the report keeps since when it has had the revision:
    // past the grace, a difference that stays is taken for a deliberate one.
    let later = NOW + REVISION_PROPAGATION_GRACE_MILLIS;
    let own = primary.report(input.reports.get(&primary.address), later);
    assert_eq!(own.revision_since_millis, Some(NOW));
    input.now_millis = later;
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Acquire { lease } if lease.primary),
        "{step:?}"
    );

    // Once that cluster has the change, the primary goes at once.
    input.now_millis = NOW + 1_000;
    input
        .reports
        .insert(address(3, 30000), report("new", NOW + 500));
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Acquire { lease } if lease.primary),
        "{step:?}"
    );
}

#[test]
fn nothing_is_taken_while_a_member_is_down_lagging_or_syncing() {
    let mut down = input();
    down.set
        .members
        .get_mut(&address(2, 30000))
        .unwrap()
        .healthy = false;
    assert!(matches!(
        plan_roll(&down),
        RollStep::Wait {
            reason: RollWait::MemberNotHealthy { .. }
        }
    ));
    let mut lagging = input();
    lagging
        .set
        .members
        .get_mut(&address(3, 30000))
        .unwrap()
        .lag_secs = Some(CAUGHT_UP_LAG_SECS + 1);
    assert!(matches!(
        plan_roll(&lagging),
        RollStep::Wait {
            reason: RollWait::MemberLagging { lag_secs: 6, .. }
        }
    ));
    let mut syncing = input();
    syncing.set.config.members[3].newly_added = true;
    assert!(matches!(
        plan_roll(&syncing),
        RollStep::Wait {
            reason: RollWait::MemberSyncing { .. }
        }
    ));
    let mut no_primary = input();
    no_primary.set.primary = None;
    assert_eq!(
        plan_roll(&no_primary),
        RollStep::Wait {
            reason: RollWait::NoPrimary
        }
    );
}

#[test]
fn a_lease_held_elsewhere_is_waited_for_until_it_expires() {
    let mut input = input();
    let theirs = Lease::new(address(2, 30000), false, NOW - 1_000);
    input.lease = LeaseView::Held(theirs.clone());
    assert_eq!(
        plan_roll(&input),
        RollStep::Wait {
            reason: RollWait::LeaseHeldElsewhere {
                member: address(2, 30000)
            }
        }
    );
    input.now_millis = theirs.expires_at_millis;
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::TakeOver { held, lease, why: LeaseOver::Expired } if *held == theirs && lease.member == address(1, 30001)),
        "{step:?}"
    );
}

#[test]
fn a_lease_for_a_member_the_committed_config_no_longer_holds_is_taken_over_at_once() {
    // Cluster 4's member held the lease when cluster 4 left the set: a
    // leaving cluster runs no roll, so nobody else would release it.
    let mut input = input();
    let gone = Lease::new(address(4, 30000), false, NOW - 1_000);
    input.lease = LeaseView::Held(gone.clone());
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::TakeOver { held, lease, why: LeaseOver::MemberLeftTheSet } if *held == gone && lease.member == address(1, 30001)),
        "{step:?}"
    );
    // A config not yet committed may still be replaced by one that holds it.
    input.set.config_committed = false;
    assert_eq!(
        plan_roll(&input),
        RollStep::Wait {
            reason: RollWait::LeaseHeldElsewhere {
                member: address(4, 30000)
            }
        }
    );
}

#[test]
fn holding_the_lease_the_pod_is_deleted_by_uid_once_the_set_is_healthy() {
    let mut input = input();
    input.lease = ours(address(1, 30001), false);
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Restart { slot: MemberSlot::Data(1), pod_uid, .. } if pod_uid == "uid-1"),
        "{step:?}"
    );
    input
        .set
        .members
        .get_mut(&address(3, 30000))
        .unwrap()
        .healthy = false;
    assert!(matches!(plan_roll(&input), RollStep::Renew { .. }));
}

#[test]
fn holding_the_lease_for_the_primary_it_is_stepped_down_first() {
    let mut input = input();
    input.local[1].pod.as_mut().unwrap().revision = Some("new".into());
    input.lease = ours(address(1, 30000), true);
    let step = plan_roll(&input);
    assert!(matches!(&step, RollStep::StepDown { primary, .. } if *primary == address(1, 30000)));
    assert_eq!(restart_state(&step), "PrimaryDeleted");
}

#[test]
fn a_restarted_member_removed_until_it_finds_itself_is_waited_for_and_said_so() {
    // mongod finds itself at its VIP:NodePort only once its Service routes to
    // the re-created pod (Ready): until then it answers REMOVED.
    let mut input = input();
    input.lease = ours(address(1, 30001), false);
    input.local[1].pod.as_mut().unwrap().revision = Some("new".into());
    input.local[1].state = Some(MemberState::Removed);
    let step = plan_roll(&input);
    let RollStep::Renew { reason, .. } = &step else {
        panic!("{step:?}");
    };
    let said = reason.to_string();
    assert!(
        said.contains("REMOVED") && said.contains("VIP:NodePort"),
        "{said}"
    );
}

#[test]
fn the_lease_is_released_only_once_the_member_answers_healthy_on_its_revision() {
    let mut input = input();
    input.lease = ours(address(1, 30001), false);
    // Re-created on the new revision, mongod not answering yet; the primary's
    // view still shows it healthy (heartbeats lag): not released.
    input.local[1].pod.as_mut().unwrap().revision = Some("new".into());
    input.local[1].state = None;
    let step = plan_roll(&input);
    assert!(
        matches!(
            &step,
            RollStep::Renew {
                reason: RollWait::MemberRestarting { .. },
                ..
            }
        ),
        "{step:?}"
    );
    assert_eq!(restart_state(&step), "SecondaryDeleted");
    // Answering SECONDARY, but the primary sees it lagging: not yet.
    input.local[1].state = Some(MemberState::Secondary);
    input
        .set
        .members
        .get_mut(&address(1, 30001))
        .unwrap()
        .lag_secs = Some(30);
    assert!(matches!(plan_roll(&input), RollStep::Renew { .. }));
    input
        .set
        .members
        .get_mut(&address(1, 30001))
        .unwrap()
        .lag_secs = Some(0);
    assert!(matches!(plan_roll(&input), RollStep::Release { .. }));
}

#[test]
fn a_restarted_member_its_peers_refuse_stops_the_roll_naming_both_clusters() {
    // Restarted on the new revision with a keyfile that shares no key with
    // the others': it answers, but the primary reports `authenticated: false`.
    let mut input = input();
    input.lease = ours(address(1, 30001), false);
    input.local[1].pod.as_mut().unwrap().revision = Some("new".into());
    let refused = |input: &mut RollInput, host: MemberAddress| {
        let status = input.set.members.get_mut(&host).unwrap();
        status.healthy = false;
        status.state = MemberState::Unknown;
        status.authentication_refused = true;
    };
    refused(&mut input, address(1, 30001));
    let step = plan_roll(&input);
    let RollStep::StopOnKeyfileMismatch { lease, reason } = &step else {
        panic!("{step:?}");
    };
    assert_eq!(lease.member, address(1, 30001));
    assert_eq!(<&str>::from(&step), "KeyfileMismatch");
    let said = reason.to_string();
    assert!(
        said.contains("cluster 10.0.0.1 shares no key with cluster 10.0.0.1"),
        "{said}"
    );

    // Another cluster's member refused: nothing is taken, and the wait says why.
    let mut input = self::input();
    refused(&mut input, address(3, 30000));
    let step = plan_roll(&input);
    let RollStep::Wait { reason } = &step else {
        panic!("{step:?}");
    };
    assert!(
        matches!(reason, RollWait::KeyfileMismatch { .. }),
        "{reason:?}"
    );
    assert!(reason.to_string().contains("cluster 10.0.0.3"), "{reason}");
}

#[test]
fn a_lease_of_ours_for_a_member_no_longer_in_the_config_is_released() {
    let mut input = input();
    input.lease = ours(address(1, 30009), false);
    assert!(matches!(plan_roll(&input), RollStep::Release { .. }));
}

#[test]
fn the_fcv_is_raised_only_once_every_data_member_runs_the_release_on_an_up_to_date_pod() {
    let mut input = input();
    for member in &mut input.local {
        member.pod.as_mut().unwrap().revision = Some("new".into());
    }
    input.requested_fcv = Some("8.0".into());
    let report = |version: &str, up_to_date| MemberReport {
        up_to_date,
        version: Some(version.into()),
        revision: Some("new".into()),
        revision_since_millis: Some(NOW),
        keyfile: None,
        tls_mode: None,
        membership: None,
    };
    let hosts = [
        address(1, 30000),
        address(1, 30001),
        address(2, 30000),
        address(3, 30000),
    ];
    for host in &hosts {
        input.reports.insert(host.clone(), report("8.0.3", true));
    }
    input
        .reports
        .insert(address(3, 30000), report("7.0.14", true));
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Wait { reason: RollWait::FeatureCompatibilityWaits { member, .. } } if *member == address(3, 30000)),
        "{step:?}"
    );
    input
        .reports
        .insert(address(3, 30000), report("8.0.3", false));
    assert!(matches!(plan_roll(&input), RollStep::Wait { .. }));
    input
        .reports
        .insert(address(3, 30000), report("8.0.3", true));
    assert_eq!(
        plan_roll(&input),
        RollStep::RaiseFeatureCompatibility {
            version: "8.0".into()
        }
    );
    // Only the rsInit cluster raises it; never lowered.
    input.rs_init = false;
    assert_eq!(plan_roll(&input), RollStep::UpToDate);
    input.rs_init = true;
    input.fcv = Some("8.0".into());
    assert_eq!(plan_roll(&input), RollStep::UpToDate);
    input.requested_fcv = Some("7.0".into());
    assert!(matches!(
        plan_roll(&input),
        RollStep::Wait {
            reason: RollWait::FeatureCompatibilityLowerNotApplied { .. }
        }
    ));
}

#[test]
fn an_outdated_member_that_is_down_is_restarted_when_it_is_the_only_one_down() {
    // A keyfile changed in one cluster only: its member, restarted onto it,
    // cannot rejoin (DOWN). Once the keyfile is put back its pod is outdated
    // again; a roll that waited for every member, that one included, to be
    // healthy would renew its lease forever and leave the member down.
    let mut input = input();
    input.lease = ours(address(1, 30001), false);
    let down = input.set.members.get_mut(&address(1, 30001)).unwrap();
    down.healthy = false;
    down.state = MemberState::Down;
    input.local[1].state = None;
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Restart { slot: MemberSlot::Data(1), pod_uid, .. } if pod_uid == "uid-1"),
        "{step:?}"
    );
    // Without the lease, it is taken for that member.
    input.lease = LeaseView::Free;
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Acquire { lease } if lease.member == address(1, 30001)),
        "{step:?}"
    );
    // Another member down as well: nothing is restarted.
    input
        .set
        .members
        .get_mut(&address(3, 30000))
        .unwrap()
        .healthy = false;
    assert!(matches!(plan_roll(&input), RollStep::Wait { .. }));
    input.lease = ours(address(1, 30001), false);
    assert!(matches!(plan_roll(&input), RollStep::Renew { .. }));
}

/// Cluster 1 holds the lease for its outdated primary; its secondary is up to
/// date.
fn primary_to_restart() -> RollInput {
    let mut input = input();
    input.local[1].pod.as_mut().unwrap().revision = Some("new".into());
    input.lease = ours(address(1, 30000), true);
    input
}

fn only_electable(input: &mut RollInput, host: &MemberAddress) {
    for m in &mut input.set.config.members {
        if &m.host != host {
            m.priority = 0.0;
        }
    }
}

#[test]
fn the_primary_is_stepped_down_when_an_electable_secondary_is_healthy() {
    let input = primary_to_restart();
    assert!(
        matches!(plan_roll(&input), RollStep::StepDown { primary, .. } if primary == address(1, 30000))
    );
}

#[test]
fn a_primary_no_member_can_succeed_restarts_once_without_a_step_down() {
    let mut input = primary_to_restart();
    only_electable(&mut input, &address(1, 30000));
    let step = plan_roll(&input);
    assert!(
        matches!(
            &step,
            RollStep::Restart {
                slot: MemberSlot::Data(0),
                caveat: Some(RestartCaveat::NoPossibleSuccessor),
                ..
            }
        ),
        "{step:?}"
    );
    // A one-member set alike.
    let mut input = primary_to_restart();
    input.set.config.members.truncate(1);
    input
        .set
        .members
        .retain(|host, _| *host == address(1, 30000));
    input.local.truncate(1);
    assert!(matches!(
        plan_roll(&input),
        RollStep::Restart {
            caveat: Some(RestartCaveat::NoPossibleSuccessor),
            ..
        }
    ));
}

#[test]
fn a_primary_that_refused_to_step_down_is_not_asked_again_before_its_back_off() {
    let mut input = primary_to_restart();
    input.step_down_held = Some(address(1, 30000));
    let step = plan_roll(&input);
    assert!(
        matches!(
            &step,
            RollStep::Renew {
                reason: RollWait::StepDownRefused { .. },
                ..
            }
        ),
        "{step:?}"
    );
}

#[test]
fn a_restart_that_would_leave_no_voting_majority_up_waits() {
    let mut set = set();
    for host in [address(2, 30000), address(3, 30000)] {
        set.members.get_mut(&host).unwrap().healthy = false;
    }
    assert_eq!(
        majority_stays_up(&set, &address(1, 30001)),
        Err(RollWait::VotingMajorityWouldBeLost {
            member: address(1, 30001),
            up: 1,
            needed: 3,
        })
    );
    // A member without a vote never costs the majority.
    set.config.members[1].votes = 0;
    set.config.members[1].priority = 0.0;
    assert_eq!(majority_stays_up(&set, &address(1, 30001)), Ok(()));
}

#[test]
fn a_restart_in_a_two_voter_set_says_what_it_costs() {
    let mut input = input();
    input.lease = ours(address(1, 30001), false);
    input.set.config.members.truncate(2);
    input.set.members.retain(|host, _| host.host == "10.0.0.1");
    let step = plan_roll(&input);
    assert!(
        matches!(
            &step,
            RollStep::Restart {
                caveat: Some(RestartCaveat::TwoVoters),
                ..
            }
        ),
        "{step:?}"
    );
}

#[test]
fn a_member_moves_to_x509_membership_only_with_peers_naming_its_membership() {
    let require = TlsStep::keyfile(TlsMode::RequireTls);
    let send_key_file = TlsStep::of(
        TlsMode::RequireTls,
        crate::api::ClusterAuthMode::SendKeyFile,
    );
    let mut input = input();
    input.local[0].pod.as_mut().unwrap().revision = Some("new".into());
    for member in &mut input.local {
        member.desired_tls_mode = send_key_file;
        member.membership = Some("O=lab,OU=tls".into());
        member.pod.as_mut().unwrap().tls_mode = require;
    }
    let report = |membership: &str| MemberReport {
        up_to_date: true,
        version: None,
        revision: Some("new".into()),
        revision_since_millis: Some(0),
        keyfile: None,
        tls_mode: Some(require),
        membership: Some(membership.into()),
    };
    input
        .reports
        .insert(address(1, 30000), report("O=lab,OU=tls"));
    input
        .reports
        .insert(address(2, 30000), report("O=lab,OU=tls"));
    input
        .reports
        .insert(address(3, 30000), report("O=elsewhere"));
    let step = plan_roll(&input);
    assert!(
        matches!(
            &step,
            RollStep::Wait {
                reason: RollWait::X509MembershipDiffers { peer, .. }
            } if *peer == address(3, 30000)
        ),
        "{step:?}"
    );
    input
        .reports
        .insert(address(3, 30000), report("O=lab,OU=tls"));
    let step = plan_roll(&input);
    assert!(
        matches!(&step, RollStep::Acquire { lease } if lease.member == address(1, 30001)),
        "{step:?}"
    );
}
