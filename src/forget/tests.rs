//! Unit tests of forgetting a lost cluster: only on request, refused while
//! the cluster is not lost, recorded before anything is removed, done once.

use std::collections::BTreeMap;

use super::*;
use crate::api::ReplicaSetSettings;
use crate::build::fixtures::mongodb;
use crate::replset::{
    ClusterWriteConcern, ConfigMember, ConfigSettings, MemberState, MemberStatus, ReplicaSetConfig,
};

const A: &str = "10.0.0.1";
const C: &str = "10.0.0.3";

fn host(vip: &str, port: u16) -> MemberAddress {
    MemberAddress::parse(&format!("{vip}:{port}")).unwrap()
}

/// a=2, b=2, c=1, all voters; a0 primary; `c_alive`: whether c0 answers.
fn set(c_alive: bool) -> ObservedSet {
    let hosts = [
        host(A, 30001),
        host(A, 30002),
        host("10.0.0.2", 30001),
        host("10.0.0.2", 30002),
        host(C, 30001),
    ];
    let members: Vec<ConfigMember> = hosts
        .iter()
        .enumerate()
        .map(|(id, host)| ConfigMember {
            id: id as i64,
            host: host.clone(),
            arbiter_only: false,
            votes: 1,
            priority: 1.0,
            hidden: false,
            tags: BTreeMap::new(),
            newly_added: false,
        })
        .collect();
    let statuses = members
        .iter()
        .map(|m| {
            let alive = m.host.host != C || c_alive;
            let state = match (alive, m.id) {
                (false, _) => MemberState::Down,
                (true, 0) => MemberState::Primary,
                (true, _) => MemberState::Secondary,
            };
            let status = MemberStatus {
                id: m.id,
                healthy: alive,
                state,
                sync_source: String::new(),
                lag_secs: None,
                config_version: Some(9),
                authentication_refused: false,
            };
            (m.host.clone(), status)
        })
        .collect();
    ObservedSet {
        config: ReplicaSetConfig {
            set_name: "replset-0".into(),
            version: 9,
            term: Some(2),
            members,
            settings: ConfigSettings::from_desired(
                &ReplicaSetSettings::default(),
                Some("65f0".into()),
            ),
        },
        primary: Some(host(A, 30001)),
        members: statuses,
        config_committed: true,
        write_concern: ClusterWriteConcern::Global {
            w: "majority".into(),
        },
    }
}

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::from_second(1_700_000_000).unwrap())
}

struct Case {
    value: Option<&'static str>,
    recorded: Option<ForgetClusterStatus>,
    step: Step,
    set: Option<ObservedSet>,
}

impl Case {
    fn c_lost() -> Self {
        Case {
            value: Some("10.0.0.3 c lost in the fire"),
            recorded: None,
            step: Step::Wait {
                reason: WaitReason::NoPrimary,
            },
            set: Some(set(false)),
        }
    }

    fn request(&self) -> Option<ForgetRequest<'static>> {
        self.value.map(|request| ForgetRequest {
            request,
            cluster: request.split_whitespace().next().unwrap(),
        })
    }

    /// Plans, and records the outcome in status as the controller does.
    fn pass(&mut self) -> ForgetStep {
        let request = self.request();
        let step = plan_forget(&ForgetInput {
            request: request.clone(),
            recorded: self.recorded.as_ref(),
            step: &self.step,
            set: self.set.as_ref(),
            local_vip: A,
        });
        self.recorded = forget_status(request.as_ref(), self.recorded.as_ref(), &step, &now());
        step
    }

    fn refusal(&mut self) -> &'static str {
        match self.pass() {
            ForgetStep::Refuse { reason } => reason.reason(),
            other => panic!("not refused: {other:?}"),
        }
    }
}

#[test]
fn the_request_names_the_cluster_by_its_first_word() {
    let mut mongodb = mongodb();
    assert_eq!(ForgetRequest::of(&mongodb), None);
    mongodb.metadata.annotations = Some(BTreeMap::from([(
        FORGET_CLUSTER_ANNOTATION.to_string(),
        "  [fd00::3]  lost, ticket 9 ".to_string(),
    )]));
    let request = ForgetRequest::of(&mongodb).unwrap();
    assert_eq!(request.cluster, "fd00::3");
    assert_eq!(request.request, "[fd00::3]  lost, ticket 9");
    assert_eq!(forgotten_cluster(&mongodb), None, "not taken up yet");
}

#[test]
fn a_lost_cluster_is_recorded_then_removed_by_the_planner_then_done_once() {
    let mut case = Case::c_lost();
    let ForgetStep::Record {
        primary,
        members,
        from_version,
    } = case.pass()
    else {
        panic!("not recorded");
    };
    assert_eq!(
        (primary, members, from_version),
        (host(A, 30001), vec![host(C, 30001)], 9)
    );
    let recorded = case.recorded.clone().unwrap();
    assert_eq!(recorded.phase, ForgetClusterPhase::Removing);
    assert_eq!(recorded.cluster, C);
    assert_eq!(recorded.members, ["10.0.0.3:30001"]);

    // The annotation and the phase tell the planner which VIP to remove.
    let mut mongodb = mongodb();
    let annotations = BTreeMap::from([(
        FORGET_CLUSTER_ANNOTATION.to_string(),
        case.value.unwrap().to_string(),
    )]);
    mongodb.metadata.annotations = Some(annotations);
    mongodb.status = Some(crate::api::MongoDBStatus {
        forget_cluster: Some(recorded),
        ..Default::default()
    });
    assert_eq!(forgotten_cluster(&mongodb).as_deref(), Some(C));

    // While c0 is in the config, nothing more; a crashed pass changes nothing.
    assert_eq!(case.pass(), ForgetStep::Idle);
    case.set = None;
    assert_eq!(case.pass(), ForgetStep::Idle);

    // Removed: done, once.
    let mut removed = set(false);
    removed.config.members.retain(|m| m.host.host != C);
    case.set = Some(removed);
    assert_eq!(case.pass(), ForgetStep::Finish);
    assert_eq!(
        case.recorded.as_ref().unwrap().phase,
        ForgetClusterPhase::Done
    );
    assert_eq!(case.pass(), ForgetStep::Idle);
    mongodb.status.as_mut().unwrap().forget_cluster = case.recorded.clone();
    assert_eq!(
        forgotten_cluster(&mongodb),
        None,
        "done: nothing more to remove"
    );
}

#[test]
fn a_cluster_that_answers_or_holds_the_primary_is_not_forgotten() {
    let mut case = Case::c_lost();
    case.set = Some(set(true));
    assert_eq!(case.refusal(), "ClusterAnswers");
    assert!(case
        .recorded
        .as_ref()
        .unwrap()
        .message
        .contains("10.0.0.3:30001"));
    // Refused once, the request is never looked at again.
    case.set = Some(set(false));
    assert_eq!(case.pass(), ForgetStep::Idle);

    let mut case = Case::c_lost();
    let mut c_primary = set(true);
    c_primary.primary = Some(host(C, 30001));
    case.set = Some(c_primary);
    assert_eq!(case.refusal(), "PrimaryInCluster");
}

#[test]
fn without_a_voting_majority_or_a_set_it_is_refused_as_recovery_s_case() {
    let mut case = Case::c_lost();
    case.step = Step::Wait {
        reason: WaitReason::VotingMajorityLost {
            lost: vec![host(C, 30001)],
            voters: 5,
        },
    };
    assert_eq!(case.refusal(), "VotingMajorityLost");

    let mut case = Case::c_lost();
    case.set = None;
    assert_eq!(case.refusal(), "SetUnread");
}

#[test]
fn an_unknown_vip_or_this_cluster_s_own_is_refused_naming_the_set_s_clusters() {
    let mut case = Case::c_lost();
    case.value = Some("10.0.0.9");
    assert_eq!(case.refusal(), "NothingToForget");
    let message = &case.recorded.as_ref().unwrap().message;
    assert!(
        message.contains("10.0.0.1, 10.0.0.2, 10.0.0.3"),
        "{message}"
    );

    let mut case = Case::c_lost();
    case.value = Some("10.0.0.1 mistake");
    assert_eq!(case.refusal(), "OwnCluster");
}

#[test]
fn without_a_primary_it_waits_and_records_nothing() {
    let mut case = Case::c_lost();
    case.set.as_mut().unwrap().primary = None;
    assert_eq!(case.pass(), ForgetStep::AwaitPrimary);
    assert_eq!(case.recorded, None);
}
