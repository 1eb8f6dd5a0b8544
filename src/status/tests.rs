use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use strum::VariantNames;

use super::*;
use crate::api::{MongoDBSpec, MongoState, TlsMode};
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::planner::WaitReason;
use crate::replset::{ConfigSettings, MemberState, MemberStatus, ReplicaSetConfig};
use crate::tls::modes::{ModePlan, ModeStanding};
use crate::tls::rotation::FilesStanding;
use crate::tls::CheckedCertificate;

fn mongodb(members: i32) -> MongoDB {
    let spec: MongoDBSpec =
        serde_json::from_value(serde_json::json!({"members": members, "rootPassword": "x"}))
            .unwrap();
    let mut mongodb = MongoDB::new("demo", spec);
    mongodb.metadata.generation = Some(3);
    mongodb
}

fn host(port: u16) -> MemberAddress {
    MemberAddress {
        host: "127.0.10.1".into(),
        port,
    }
}

fn observation(states: &[(u16, MemberState, bool)]) -> ObservedSet {
    let members: BTreeMap<MemberAddress, MemberStatus> = states
        .iter()
        .enumerate()
        .map(|(i, (port, state, healthy))| {
            (
                host(*port),
                MemberStatus {
                    id: i as i64,
                    healthy: *healthy,
                    state: *state,
                    sync_source: String::new(),
                    lag_secs: Some(0),
                    config_version: Some(2),
                    authentication_refused: false,
                },
            )
        })
        .collect();
    ObservedSet {
        config: ReplicaSetConfig {
            set_name: "replset-0".into(),
            version: 2,
            term: Some(1),
            members: vec![],
            settings: ConfigSettings {
                election_timeout_millis: 10_000,
                heartbeat_interval_millis: 2_000,
                catch_up_timeout_millis: -1,
                chaining_allowed: true,
                replica_set_id: Some("65a000000000000000000001".into()),
            },
        },
        primary: states
            .iter()
            .find(|(_, s, _)| *s == MemberState::Primary)
            .map(|(p, _, _)| host(*p)),
        members,
        config_committed: true,
        write_concern: Default::default(),
    }
}

fn views(ports: &[u16]) -> Vec<LocalMemberView> {
    ports
        .iter()
        .enumerate()
        .map(|(i, port)| LocalMemberView {
            slot: MemberSlot::Data(i as u32),
            stateful_set: format!("demo-mongodb-{i}"),
            node_port: Some(i32::from(*port)),
            host: Some(host(*port)),
            revision: Some("abc".into()),
        })
        .collect()
}

fn at(seconds: i64) -> Time {
    Time(Timestamp::from_second(seconds).unwrap())
}

fn input<'a>(
    mongodb: &'a MongoDB,
    observation: Option<&'a ObservedSet>,
    local: &'a [LocalMemberView],
    step: Option<&'a Step>,
    now: Time,
) -> StatusInput<'a> {
    StatusInput {
        mongodb,
        paused: false,
        problem: None,
        tls: None,
        observation,
        local_members: local,
        step,
        roll: None,
        feature_compatibility_version: None,
        revision: Some("abc".into()),
        apply_failures: &[],
        recovery: None,
        forget_cluster: None,
        held_services: &[],
        growth: None,
        keyfile: None,
        now,
    }
}

/// The status after a pass that observed the set and planned `step`.
fn status_after(
    mongodb: &MongoDB,
    observed: &ObservedSet,
    local: &[LocalMemberView],
    step: &Step,
    now: Time,
) -> MongoDBStatus {
    compute_status(&input(mongodb, Some(observed), local, Some(step), now))
}

/// The status after a pass that found this cluster's members in sync.
fn in_sync_status(
    mongodb: &MongoDB,
    observed: &ObservedSet,
    local: &[LocalMemberView],
    now: Time,
) -> MongoDBStatus {
    status_after(mongodb, observed, local, &Step::InSync, now)
}

fn condition<'a>(status: &'a MongoDBStatus, type_: &str) -> &'a Condition {
    status.conditions.iter().find(|c| c.type_ == type_).unwrap()
}

#[test]
fn a_set_in_sync_with_every_local_member_healthy_is_running() {
    let mongodb = mongodb(2);
    let observed = observation(&[
        (30001, MemberState::Primary, true),
        (30002, MemberState::Secondary, true),
    ]);
    let local = views(&[30001, 30002]);
    let status = in_sync_status(&mongodb, &observed, &local, at(100));
    assert_eq!(status.state, Some(MongoState::Running));
    assert_eq!(status.current_info.members, 2);
    assert_eq!(status.ready_members.as_deref(), Some("2/2"));
    assert_eq!(status.primary.as_deref(), Some("127.0.10.1:30001"));
    assert_eq!(status.replset.len(), 2);
    assert_eq!(status.replset[0].state_str, "PRIMARY");
    assert_eq!(condition(&status, "Ready").status, "True");
    assert_eq!(condition(&status, "Ready").observed_generation, Some(3));
    assert_eq!(
        status.replica_set_id.as_deref(),
        Some("65a000000000000000000001")
    );
}

#[test]
fn a_roll_shows_in_restart_state_up_to_date_and_progressing_and_is_kept_between_rolls() {
    let mongodb = mongodb(2);
    let observed = observation(&[
        (30001, MemberState::Primary, true),
        (30002, MemberState::Secondary, true),
    ]);
    let local = views(&[30001, 30002]);
    let lease = roll::Lease::new(host(30001), true, 0);
    let restarting = RollStep::Renew {
        lease: lease.clone(),
        reason: roll::RollWait::MemberRestarting {
            member: host(30001),
        },
    };
    let mut rolling = input(
        &mongodb,
        Some(&observed),
        &local,
        Some(&Step::InSync),
        at(100),
    );
    rolling.roll = Some(&restarting);
    rolling.feature_compatibility_version = Some("7.0".into());
    let status = compute_status(&rolling);
    assert_eq!(status.restart_state.as_deref(), Some("PrimaryDeleted"));
    assert_eq!(status.feature_compatibility_version.as_deref(), Some("7.0"));
    let up_to_date = condition(&status, "UpToDate");
    assert_eq!(
        (up_to_date.status.as_str(), up_to_date.reason.as_str()),
        ("False", "MemberRestarting")
    );
    assert!(
        up_to_date
            .message
            .contains("127.0.10.1:30001 is restarting"),
        "{}",
        up_to_date.message
    );
    let progressing = condition(&status, "Progressing");
    assert_eq!(
        (progressing.status.as_str(), progressing.reason.as_str()),
        ("True", "MemberRestarting")
    );
    assert_eq!(status.local_members[0].revision.as_deref(), Some("abc"));

    // A pass that does not plan the roll (membership not in sync) keeps
    // what the last one said.
    let mut later = mongodb.clone();
    later.status = Some(status);
    let kept = compute_status(&input(&later, Some(&observed), &local, None, at(101)));
    assert_eq!(kept.restart_state.as_deref(), Some("PrimaryDeleted"));
    assert_eq!(condition(&kept, "UpToDate").reason, "MemberRestarting");
    assert_eq!(kept.feature_compatibility_version.as_deref(), Some("7.0"));

    let done = RollStep::UpToDate;
    let mut finished = input(
        &later,
        Some(&observed),
        &local,
        Some(&Step::InSync),
        at(102),
    );
    finished.roll = Some(&done);
    let status = compute_status(&finished);
    assert_eq!(status.restart_state.as_deref(), Some("NotInProcess"));
    assert_eq!(condition(&status, "UpToDate").status, "True");
    assert_eq!(condition(&status, "Progressing").status, "False");
}

#[test]
fn a_lost_voting_majority_is_degraded_naming_the_members_gone() {
    let mongodb = mongodb(2);
    let observed = observation(&[
        (30001, MemberState::Secondary, true),
        (30002, MemberState::Down, false),
    ]);
    let local = views(&[30001, 30002]);
    let step = Step::Wait {
        reason: WaitReason::VotingMajorityLost {
            lost: vec![host(30002)],
            voters: 2,
        },
    };
    let status = status_after(&mongodb, &observed, &local, &step, at(100));
    let degraded = condition(&status, "Degraded");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "VotingMajorityLost")
    );
    assert!(
        degraded.message.contains("127.0.10.1:30002"),
        "{}",
        degraded.message
    );
    assert_eq!(condition(&status, "Ready").reason, "VotingMajorityLost");
}

#[test]
fn a_refused_step_is_an_error_with_its_reason_in_conditions() {
    let mongodb = mongodb(1);
    let observed = observation(&[(30001, MemberState::Primary, true)]);
    let local = views(&[30001]);
    let step = Step::Refuse {
        reason: crate::planner::Refusal::NothingToInitiate,
    };
    let status = status_after(&mongodb, &observed, &local, &step, at(100));
    assert_eq!(status.state, Some(MongoState::Error));
    let degraded = condition(&status, "Degraded");
    assert_eq!(degraded.status, "True");
    assert_eq!(degraded.reason, "NothingToInitiate");
    assert!(degraded.message.contains("refused"));
}

#[test]
fn conditions_keep_their_transition_time_until_they_flip() {
    let mut mongodb = mongodb(1);
    let observed = observation(&[(30001, MemberState::Primary, true)]);
    let local = views(&[30001]);
    let first = in_sync_status(&mongodb, &observed, &local, at(100));
    mongodb.status = Some(first.clone());
    let second = in_sync_status(&mongodb, &observed, &local, at(200));
    assert_eq!(
        first, second,
        "a pass that changes nothing must write nothing"
    );
    mongodb.status = Some(second);
    let down = observation(&[(30001, MemberState::Secondary, true)]);
    let third = compute_status(&input(
        &mongodb,
        Some(&down),
        &local,
        Some(&Step::Wait {
            reason: crate::planner::WaitReason::NoPrimary,
        }),
        at(300),
    ));
    assert_eq!(condition(&third, "Ready").status, "False");
    assert_eq!(condition(&third, "Ready").last_transition_time, at(300));
    assert_eq!(
        condition(&third, "ReplicaSetInitialized").last_transition_time,
        at(100)
    );
}

#[test]
fn pause_and_problems_are_reported_as_such() {
    let mongodb = mongodb(1);
    let mut paused = input(&mongodb, None, &[], None, at(1));
    paused.paused = true;
    assert_eq!(compute_status(&paused).state, Some(MongoState::Pause));
    let problem = InvalidInput::HostconfMissing {
        name: "demo-hostconf".into(),
    };
    let mut failed = input(&mongodb, None, &[], None, at(1));
    failed.problem = Some(&problem);
    let status = compute_status(&failed);
    assert_eq!(status.state, Some(MongoState::Error));
    assert_eq!(condition(&status, "Ready").reason, "HostconfMissing");
    assert_eq!(condition(&status, "ReplicaSetInitialized").status, "False");
    assert!(condition(&status, "Degraded")
        .message
        .contains("ConfigMap demo-hostconf"));
}

#[test]
fn a_pass_that_cannot_read_the_set_keeps_the_last_view_and_says_it_is_stale() {
    // FedState deletes every member Service whose nodePort no cluster's
    // replset lists, and Karmada's health check reads currentInfo.members:
    // a blank view after an election or a timeout would cost members.
    let mut mongodb = mongodb(2);
    let observed = observation(&[
        (30001, MemberState::Primary, true),
        (30002, MemberState::Secondary, true),
    ]);
    let local = views(&[30001, 30002]);
    let seen = in_sync_status(&mongodb, &observed, &local, at(100));
    assert_eq!(seen.replica_set_observed_at, Some(at(100)));
    assert_eq!(condition(&seen, "ReplicaSetObserved").status, "True");
    mongodb.status = Some(seen.clone());
    let again = in_sync_status(&mongodb, &observed, &local, at(200));
    assert_eq!(again, seen, "the same view observed again changes nothing");
    mongodb.status = Some(again);

    let wait = Step::Wait {
        reason: crate::planner::WaitReason::NoPrimary,
    };
    let blind = compute_status(&input(&mongodb, None, &local, Some(&wait), at(300)));
    assert_eq!(blind.replset, seen.replset);
    assert_eq!(blind.primary, seen.primary);
    assert_eq!(blind.current_info.members, 2);
    assert_eq!(blind.replica_set_observed_at, Some(at(100)));
    let stale = condition(&blind, "ReplicaSetObserved");
    assert_eq!(
        (stale.status.as_str(), stale.reason.as_str()),
        ("False", "ObservationStale")
    );
    assert!(
        stale.message.contains("1970-01-01T00:01:40Z"),
        "{}",
        stale.message
    );

    let problem = InvalidInput::HostconfMissing {
        name: "demo-hostconf".into(),
    };
    let mut failed = input(&mongodb, None, &[], None, at(400));
    failed.problem = Some(&problem);
    let failed = compute_status(&failed);
    assert_eq!(
        failed.replset, seen.replset,
        "an input problem does not blank the view either"
    );
    assert_eq!(failed.current_info.members, 2);
}

#[test]
fn replication_lag_moving_by_a_few_seconds_writes_nothing() {
    // Each status write triggers another pass: a lag that moves by a
    // second on most passes kept an idle instance busy.
    let mut mongodb = mongodb(2);
    let local = views(&[30001, 30002]);
    let with_lag = |lag: i64| {
        let mut observed = observation(&[
            (30001, MemberState::Primary, true),
            (30002, MemberState::Secondary, true),
        ]);
        observed.members.get_mut(&host(30002)).unwrap().lag_secs = Some(lag);
        observed
    };
    let first = compute_status(&input(
        &mongodb,
        Some(&with_lag(1)),
        &local,
        Some(&Step::InSync),
        at(1),
    ));
    mongodb.status = Some(first.clone());
    for lag in [0, 2, 5, 9] {
        let next = compute_status(&input(
            &mongodb,
            Some(&with_lag(lag)),
            &local,
            Some(&Step::InSync),
            at(2),
        ));
        assert_eq!(next, first, "lag {lag}");
    }
    let behind = compute_status(&input(
        &mongodb,
        Some(&with_lag(30)),
        &local,
        Some(&Step::InSync),
        at(3),
    ));
    assert_eq!(
        behind.local_members[1].lag_seconds,
        Some(30),
        "a real change is written"
    );
}

#[test]
fn settings_that_differ_from_the_set_are_reported() {
    let mut mongodb = mongodb(1);
    let observed = observation(&[(30001, MemberState::Primary, true)]);
    let local = views(&[30001]);
    let same = in_sync_status(&mongodb, &observed, &local, at(1));
    assert_eq!(condition(&same, "SettingsMatch").status, "True");
    mongodb.spec.replica_set_settings.election_timeout_millis = 30_000;
    let differ = in_sync_status(&mongodb, &observed, &local, at(2));
    let settings = condition(&differ, "SettingsMatch");
    assert_eq!(
        (settings.status.as_str(), settings.reason.as_str()),
        ("False", "SettingsDiffer")
    );
    assert!(
        settings
            .message
            .contains("only the rsInit cluster writes them"),
        "{}",
        settings.message
    );
}

#[test]
fn a_set_without_a_primary_is_never_running() {
    // Every local member healthy, but no primary: the set takes no writes.
    let mongodb = mongodb(2);
    let observed = observation(&[
        (30001, MemberState::Secondary, true),
        (30002, MemberState::Secondary, true),
    ]);
    let local = views(&[30001, 30002]);
    let status = in_sync_status(&mongodb, &observed, &local, at(1));
    assert_eq!(status.state, Some(MongoState::Reconciling));
    let ready = condition(&status, "Ready");
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "NoPrimary")
    );
}

#[test]
fn refused_config_entries_are_named_in_a_condition() {
    let mut mongodb = mongodb(1);
    let accepted = compute_status(&input(&mongodb, None, &[], None, at(1)));
    assert_eq!(condition(&accepted, "ConfigAccepted").status, "True");
    mongodb.spec.config = vec![crate::api::ConfigVar {
        name: "LOG_LEVEL".into(),
        value: "info".into(),
    }];
    let refused = compute_status(&input(&mongodb, None, &[], None, at(2)));
    let config = condition(&refused, "ConfigAccepted");
    assert_eq!(
        (config.status.as_str(), config.reason.as_str()),
        ("False", "SettingsRefused")
    );
    assert!(
        config.message.contains("LOG_LEVEL (not a setting"),
        "{}",
        config.message
    );
}

#[test]
fn members_above_spec_still_in_the_set_keep_the_instance_reconciling() {
    let mongodb = mongodb(1);
    let observed = observation(&[
        (30001, MemberState::Primary, true),
        (30002, MemberState::Secondary, true),
    ]);
    let local = views(&[30001, 30002]);
    let status = in_sync_status(&mongodb, &observed, &local, at(1));
    assert_eq!(status.state, Some(MongoState::Reconciling));
    assert_eq!(status.local_members[1].role, "SECONDARY");
}

fn in_place(mode: TlsMode) -> ModePlan {
    ModePlan {
        template: mode.into(),
        standing: ModeStanding::InPlace,
        waiting_for: Vec::new(),
    }
}

fn with_tls(mut mongodb: MongoDB, mode: TlsMode) -> MongoDB {
    mongodb.spec.tls = Some(crate::api::TlsSettings {
        mode,
        certificate_secret_ref: None,
        allow_connections_without_certificates: false,
        cluster_auth_mode: Default::default(),
    });
    mongodb
}

#[test]
fn every_condition_type_is_reported_once_in_declaration_order() {
    let with_tls_disabled = with_tls(mongodb(1), TlsMode::Disabled);
    let modes = BTreeMap::new();
    let plan = in_place(TlsMode::Disabled);
    let seen = TlsSeen {
        mode: TlsMode::Disabled.into(),
        plan: &plan,
        certificate: None,
        modes: &modes,
        files: None,
    };
    let status = compute_status(&StatusInput {
        tls: Some(seen),
        ..input(&with_tls_disabled, None, &[], None, at(1))
    });
    let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
    assert_eq!(types, ConditionType::VARIANTS);

    let without_tls = mongodb(1);
    let status = compute_status(&input(&without_tls, None, &[], None, at(1)));
    assert!(status.conditions.iter().all(|c| c.type_ != "TLSReady"));
    assert_eq!(status.tls, None);
}

#[test]
fn tls_is_ready_once_every_local_member_runs_the_mode_and_warns_before_expiry() {
    let mongodb = with_tls(mongodb(2), TlsMode::RequireTls);
    let local = views(&[30001, 30002]);
    let certificate = CheckedCertificate {
        not_before: 0,
        not_after: 100 * 86_400,
        subject: "CN=m,O=lab".into(),
    };
    let plan = in_place(TlsMode::RequireTls);
    let status_with = |modes: &BTreeMap<MemberAddress, TlsMode>, now: i64| {
        let seen = TlsSeen {
            mode: TlsMode::RequireTls.into(),
            plan: &plan,
            certificate: Some(&certificate),
            modes,
            files: None,
        };
        compute_status(&StatusInput {
            tls: Some(seen),
            ..input(&mongodb, None, &local, None, at(now))
        })
    };
    let tls_ready = |status: &MongoDBStatus| {
        let c = condition(status, "TLSReady").clone();
        (c.status, c.reason, c.message)
    };
    let one = BTreeMap::from([(host(30001), TlsMode::RequireTls)]);
    let (ready, reason, message) = tls_ready(&status_with(&one, 86_400));
    assert_eq!(
        (ready.as_str(), reason.as_str()),
        ("False", "TLSWaitingForMembers")
    );
    assert!(
        message.contains(&format!("{} did not say", host(30002))),
        "{message}"
    );

    let both = BTreeMap::from([
        (host(30001), TlsMode::RequireTls),
        (host(30002), TlsMode::RequireTls),
    ]);
    let status = status_with(&both, 86_400);
    assert_eq!(tls_ready(&status).1, "TLSReady");
    assert_eq!(status.local_members[1].tls_mode, Some(TlsMode::RequireTls));
    let shown = status.tls.unwrap();
    assert_eq!(shown.subject, "CN=m,O=lab");
    assert_eq!(shown.not_after, at(100 * 86_400));

    let (ready, reason, _) = tls_ready(&status_with(&both, 90 * 86_400));
    assert_eq!(
        (ready.as_str(), reason.as_str()),
        ("True", "TLSCertificateExpiring")
    );
}

#[test]
fn a_too_stale_member_is_degraded_saying_it_waits_to_be_resynced() {
    let mongodb = mongodb(3);
    let observed = observation(&[
        (30001, MemberState::Primary, true),
        (30002, MemberState::Recovering, false),
        (30003, MemberState::Down, false),
    ]);
    let local = views(&[30001, 30002, 30003]);
    let step = Step::Wait {
        reason: WaitReason::TooStaleMemberWaitsForMajority {
            host: host(30002),
            healthy: 1,
            needed: 2,
        },
    };
    let status = status_after(&mongodb, &observed, &local, &step, at(100));
    let degraded = condition(&status, "Degraded");
    assert_eq!(
        (degraded.status.as_str(), degraded.reason.as_str()),
        ("True", "TooStaleMemberWaitsForMajority")
    );
    assert!(
        degraded.message.contains("too stale"),
        "{}",
        degraded.message
    );
}

#[test]
fn a_disk_under_4gi_is_reported_with_what_to_set() {
    let mut small = mongodb(1);
    small.spec.persistence.storage =
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("1Gi".into());
    let status = compute_status(&input(&small, None, &[], None, at(100)));
    let storage = condition(&status, "StorageSufficient");
    assert_eq!(
        (storage.status.as_str(), storage.reason.as_str()),
        ("False", "StorageTooSmall")
    );
    assert!(storage.message.contains("990 MB") && storage.message.contains("4Gi or more"));

    let mut large = small.clone();
    large.spec.persistence.storage =
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("8Gi".into());
    let status = compute_status(&input(&large, None, &[], None, at(100)));
    let storage = condition(&status, "StorageSufficient");
    assert_eq!(
        (storage.status.as_str(), storage.reason.as_str()),
        ("True", "StorageSufficient")
    );
}

#[test]
fn held_member_services_are_named_with_their_member_and_why() {
    use crate::hostconf::MemberAddress;
    use crate::service_hold::{HeldService, HoldReason};
    let object = mongodb(1);
    let status = compute_status(&input(&object, None, &[], None, at(100)));
    let none = condition(&status, "MemberServicesHeld");
    assert_eq!(
        (none.status.as_str(), none.reason.as_str()),
        ("False", "NoServiceHeld")
    );

    let held = [
        HeldService {
            name: "demo-mongodb-1".into(),
            address: None,
            reason: HoldReason::MembershipUnknown,
        },
        HeldService {
            name: "demo-mongodb-0".into(),
            address: Some(MemberAddress {
                host: "127.0.0.1".into(),
                port: 30001,
            }),
            reason: HoldReason::MemberInReplicaSet,
        },
    ];
    let mut holding = input(&object, None, &[], None, at(100));
    holding.held_services = &held;
    let status = compute_status(&holding);
    let held_condition = condition(&status, "MemberServicesHeld");
    assert_eq!(
        (
            held_condition.status.as_str(),
            held_condition.reason.as_str()
        ),
        ("True", "MemberInReplicaSet")
    );
    assert!(held_condition
        .message
        .contains("Service demo-mongodb-0 (127.0.0.1:30001) was deleted and is held"));
    assert!(held_condition
        .message
        .contains("Service demo-mongodb-1 was deleted"));
}

#[test]
fn tls_stepping_names_whom_the_step_waits_for() {
    let mongodb = with_tls(mongodb(1), TlsMode::RequireTls);
    let local = views(&[30001]);
    let remote = MemberAddress::parse("10.0.0.2:30001").unwrap();
    let modes = BTreeMap::new();
    let reason = |plan: ModePlan| {
        let seen = TlsSeen {
            mode: TlsMode::RequireTls.into(),
            plan: &plan,
            certificate: None,
            modes: &modes,
            files: None,
        };
        let status = compute_status(&StatusInput {
            tls: Some(seen),
            ..input(&mongodb, None, &local, None, at(1))
        });
        let c = condition(&status, "TLSReady").clone();
        (c.status, c.reason, c.message)
    };
    let stepping = |waiting_for| ModePlan {
        template: TlsMode::PreferTls.into(),
        standing: ModeStanding::Stepping,
        waiting_for,
    };
    let (ready, why, message) = reason(stepping(vec![(
        host(30001),
        Some(TlsMode::AllowTls.into()),
    )]));
    assert_eq!((ready.as_str(), why.as_str()), ("False", "TLSStepping"));
    assert!(
        message.contains(&format!("{} runs allowTLS", host(30001))),
        "{message}"
    );
    let (_, why, message) = reason(stepping(vec![(remote.clone(), None)]));
    assert_eq!(why, "TLSWaitingForPeers");
    assert!(message.contains("10.0.0.2:30001 not reported"), "{message}");
    let unknown = ModePlan {
        template: TlsMode::AllowTls.into(),
        standing: ModeStanding::ModesUnknown,
        waiting_for: Vec::new(),
    };
    assert_eq!(reason(unknown).1, "TLSModesUnknown");
}

#[test]
fn tls_names_held_files_before_the_mode_and_a_member_loading_its_certificate() {
    let mongodb = with_tls(mongodb(1), TlsMode::RequireTls);
    let local = views(&[30001]);
    let modes = BTreeMap::from([(host(30001), TlsMode::RequireTls)]);
    let reason = |plan: ModePlan, files: FilesStanding| {
        let seen = TlsSeen {
            mode: TlsMode::RequireTls.into(),
            plan: &plan,
            certificate: None,
            modes: &modes,
            files: Some(&files),
        };
        let status = compute_status(&StatusInput {
            tls: Some(seen),
            ..input(&mongodb, None, &local, None, at(1))
        });
        let c = condition(&status, "TLSReady").clone();
        (c.status, c.reason, c.message)
    };
    let held = FilesStanding::Held {
        why: "10.0.0.2:30001 refuses the certificate as a peer's".into(),
    };
    let stepping = ModePlan {
        template: TlsMode::PreferTls.into(),
        standing: ModeStanding::Stepping,
        waiting_for: vec![],
    };
    let (ready, why, message) = reason(stepping, held);
    assert_eq!(
        (ready.as_str(), why.as_str()),
        ("False", "TLSCertificateHeld")
    );
    assert!(message.contains("10.0.0.2:30001 refuses"), "{message}");

    let rotating = FilesStanding::Rotating {
        member: host(30001),
        why: "it still serves the previous certificate".into(),
    };
    let (ready, why, message) = reason(in_place(TlsMode::RequireTls), rotating);
    assert_eq!(
        (ready.as_str(), why.as_str()),
        ("False", "TLSCertificateRotating")
    );
    assert!(message.starts_with(&host(30001).to_string()), "{message}");
}
