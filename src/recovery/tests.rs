//! Unit tests of the disaster-recovery decisions: only on request, reported
//! before it is forced, forced once, never again.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use super::*;
use crate::api::ReplicaSetSettings;
use crate::replset::{
    ClusterWriteConcern, ConfigMember, ConfigSettings, MemberState, MemberStatus,
};

fn host(vip: &str, port: u16) -> MemberAddress {
    MemberAddress::parse(&format!("{vip}:{port}")).unwrap()
}

fn a(port: u16) -> MemberAddress {
    host("10.0.0.1", port)
}

fn b(port: u16) -> MemberAddress {
    host("10.0.0.2", port)
}

fn member(id: i64, host: MemberAddress, arbiter: bool) -> ConfigMember {
    ConfigMember {
        id,
        host,
        arbiter_only: arbiter,
        votes: 1,
        priority: if arbiter { 0.0 } else { 1.0 },
        hidden: false,
        tags: BTreeMap::new(),
        newly_added: false,
    }
}

/// Five voters: a0, a1 answer; b0, b1 and b's arbiter do not.
fn lost_set() -> ObservedSet {
    let members = vec![
        member(0, a(30001), false),
        member(1, a(30002), false),
        member(2, b(30001), false),
        member(3, b(30002), false),
        member(4, b(30010), true),
    ];
    let statuses = members
        .iter()
        .map(|m| {
            let alive = m.host.host == "10.0.0.1";
            let status = MemberStatus {
                id: m.id,
                healthy: alive,
                state: if alive {
                    MemberState::Secondary
                } else {
                    MemberState::Down
                },
                sync_source: String::new(),
                lag_secs: None,
                config_version: Some(7),
                authentication_refused: false,
            };
            (m.host.clone(), status)
        })
        .collect();
    ObservedSet {
        config: ReplicaSetConfig {
            set_name: "replset-0".into(),
            version: 7,
            term: Some(3),
            members,
            settings: ConfigSettings::from_desired(
                &ReplicaSetSettings::default(),
                Some("65f0".into()),
            ),
        },
        primary: None,
        members: statuses,
        config_committed: false,
        write_concern: ClusterWriteConcern::Global {
            w: "majority".into(),
        },
    }
}

fn majority_lost() -> Step {
    Step::Wait {
        reason: WaitReason::VotingMajorityLost {
            lost: vec![b(30001), b(30002), b(30010)],
            voters: 5,
        },
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
}

struct Case {
    request: Option<&'static str>,
    recorded: Option<RecoveryStatus>,
    step: Step,
    set: ObservedSet,
    local: Vec<MemberAddress>,
}

impl Case {
    fn lost() -> Self {
        Case {
            request: Some("b burnt down"),
            recorded: None,
            step: majority_lost(),
            set: lost_set(),
            local: vec![a(30001), a(30002)],
        }
    }

    fn plan(&self) -> RecoveryStep {
        plan_recovery(&RecoveryInput {
            request: self.request,
            recorded: self.recorded.as_ref(),
            step: &self.step,
            set: Some(&self.set),
            local_answering: &self.local,
        })
    }

    /// Plans, and records the outcome in status as the controller does.
    fn pass(&mut self) -> RecoveryStep {
        let step = self.plan();
        self.recorded = recovery_status(self.request, self.recorded.as_ref(), &step, &now());
        step
    }
}

#[test]
fn without_a_request_nothing_is_ever_forced() {
    let mut case = Case::lost();
    case.request = None;
    assert_eq!(case.pass(), RecoveryStep::Idle);
    assert_eq!(case.recorded, None);
}

#[test]
fn a_request_is_reported_first_then_forced_once_then_recorded_then_ignored() {
    let mut case = Case::lost();
    let RecoveryStep::Report { plan } = case.pass() else {
        panic!("the first pass reports");
    };
    assert_eq!(plan.keeping, [a(30001), a(30002)]);
    assert_eq!(plan.dropping, [b(30001), b(30002), b(30010)]);
    assert_eq!(plan.from_version, 7);
    assert_eq!(plan.config.version, 8);
    assert_eq!(plan.config.settings.replica_set_id.as_deref(), Some("65f0"));
    let recorded = case.recorded.clone().unwrap();
    assert_eq!(recorded.phase, RecoveryPhase::Planned);
    assert_eq!(
        recorded.dropping,
        ["10.0.0.2:30001", "10.0.0.2:30002", "10.0.0.2:30010"]
    );

    let RecoveryStep::Force { plan: forced, on } = case.pass() else {
        panic!("the second pass forces what was reported");
    };
    assert_eq!(forced, plan);
    assert_eq!(on, a(30001));
    assert_eq!(case.recorded.as_ref().unwrap().phase, RecoveryPhase::Forced);

    // The forced config in place, no primary elected yet.
    case.step = Step::Wait {
        reason: WaitReason::NoPrimary,
    };
    case.set.config = forced.config.clone();
    case.set.config.version = 20_008;
    case.set.members.retain(|h, _| h.host == "10.0.0.1");
    assert_eq!(case.pass(), RecoveryStep::AwaitPrimary);
    case.set.primary = Some(a(30002));
    assert_eq!(case.pass(), RecoveryStep::Record { primary: a(30002) });
    assert_eq!(case.recorded.as_ref().unwrap().phase, RecoveryPhase::Done);

    // Ever after, even if the majority is lost again: ignored.
    case.step = majority_lost();
    case.set = lost_set();
    assert_eq!(case.pass(), RecoveryStep::Idle);
    assert_eq!(case.recorded.as_ref().unwrap().phase, RecoveryPhase::Done);
}

#[test]
fn a_plan_that_changed_since_it_was_reported_is_reported_again_not_forced() {
    let mut case = Case::lost();
    assert!(matches!(case.pass(), RecoveryStep::Report { .. }));
    // b's arbiter answers again: the plan would keep it.
    let arbiter = case.set.members.get_mut(&b(30010)).unwrap();
    arbiter.healthy = true;
    arbiter.state = MemberState::Arbiter;
    let RecoveryStep::Report { plan } = case.pass() else {
        panic!("a changed plan is reported again");
    };
    assert!(plan.keeping.contains(&b(30010)));
    assert!(matches!(case.pass(), RecoveryStep::Force { .. }));
}

#[test]
fn a_request_while_a_majority_answers_is_refused_for_good() {
    let mut case = Case::lost();
    case.step = Step::InSync;
    let RecoveryStep::Refuse { reason } = case.pass() else {
        panic!("refused");
    };
    assert_eq!(reason, RecoveryRefusal::MajorityNotLost);
    assert_eq!(
        case.recorded.as_ref().unwrap().phase,
        RecoveryPhase::Refused
    );
    // The same request left on the object never forces anything later.
    case.step = majority_lost();
    assert_eq!(case.pass(), RecoveryStep::Idle);
    // A new request (another reason) is considered afresh.
    case.request = Some("b burnt down, for real");
    assert!(matches!(case.pass(), RecoveryStep::Report { .. }));
}

#[test]
fn a_cluster_without_a_surviving_member_or_anything_electable_refuses() {
    let mut case = Case::lost();
    case.local = vec![b(30001)];
    assert_eq!(
        case.plan(),
        RecoveryStep::Refuse {
            reason: RecoveryRefusal::NoLocalSurvivor
        }
    );
    let mut case = Case::lost();
    for m in case
        .set
        .config
        .members
        .iter_mut()
        .filter(|m| m.host.host == "10.0.0.1")
    {
        m.priority = 0.0;
    }
    assert!(matches!(
        case.plan(),
        RecoveryStep::Refuse {
            reason: RecoveryRefusal::NothingElectable { .. }
        }
    ));
}

#[test]
fn a_force_whose_status_was_not_written_is_recognised_and_not_repeated() {
    let mut case = Case::lost();
    let RecoveryStep::Report { plan } = case.pass() else {
        panic!("reported");
    };
    // The force went through but the pass died before status said so.
    case.set.config = plan.config.clone();
    case.set.config.version = 31_000;
    case.set.members.retain(|h, _| h.host == "10.0.0.1");
    case.step = Step::Wait {
        reason: WaitReason::NoPrimary,
    };
    assert_eq!(case.pass(), RecoveryStep::AwaitPrimary);
    case.set.primary = Some(a(30001));
    assert!(matches!(case.pass(), RecoveryStep::Record { .. }));
}

#[test]
fn without_a_cluster_write_concern_an_arbiter_that_would_change_the_default_is_dropped() {
    // a0, a1 and b's arbiter answer: keeping the arbiter would take the
    // implicit default from {w: "majority"} (4 data voters of 5) to {w: 1}
    // (2 of 3), which mongod refuses even forced while none is set.
    let mut case = Case::lost();
    let arbiter = case.set.members.get_mut(&b(30010)).unwrap();
    arbiter.healthy = true;
    arbiter.state = MemberState::Arbiter;
    let RecoveryStep::Report { plan } = case.pass() else {
        panic!("reported");
    };
    assert!(plan.keeping.contains(&b(30010)), "kept with one pinned");
    for unpinned in [ClusterWriteConcern::Implicit, ClusterWriteConcern::Unknown] {
        let mut case = Case::lost();
        case.set.write_concern = unpinned;
        let arbiter = case.set.members.get_mut(&b(30010)).unwrap();
        arbiter.healthy = true;
        arbiter.state = MemberState::Arbiter;
        let RecoveryStep::Report { plan } = case.pass() else {
            panic!("reported");
        };
        assert_eq!(plan.keeping, vec![a(30001), a(30002)]);
        assert!(plan.dropping.contains(&b(30010)));
    }
}

#[test]
fn a_forced_config_that_would_change_the_default_anyway_is_refused_not_forced_forever() {
    // {a0, a1, b0, b's arbiter} is {w: 1} (3 data voters of 4); a0 and a1
    // survive without the arbiter, {w: "majority"}: mongod would refuse the
    // forced config, so it is refused here, once.
    let mut case = Case::lost();
    case.set.write_concern = ClusterWriteConcern::Implicit;
    case.set.config.members.retain(|m| m.host != b(30002));
    case.set.members.remove(&b(30002));
    let RecoveryStep::Refuse { reason } = case.pass() else {
        panic!("refused");
    };
    assert_eq!(reason.reason(), "WriteConcernWouldChange");
}
