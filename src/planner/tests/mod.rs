//! The planner's rules, one example each, by topic, and the fixtures they
//! share.

mod additions;
mod existing_set;
mod forgotten;
mod initiate;
mod inputs;
mod member_data;
mod member_settings;
mod readdress;
mod removals;
mod steps;
mod votes;
mod write_concern;

use std::collections::BTreeMap;

use super::*;
use crate::api::{PvcPolicy, ReplicaSetSettings};
use crate::hostconf::{HostConf, HostConfMember, MemberAddress};
use crate::member::{MemberSlot, RecordedEntry};
use crate::observe::{DroppedMember, DroppedMembers, MemberProbe, Observed, ObservedSet};
use crate::replset::{
    voting_changes, ConfigMember, ConfigProblem, ConfigSettings, MemberState, MemberStatus,
    ReplicaSetConfig,
};

pub(super) const SET: &str = "rs0";
pub(super) const SET_ID: &str = "5f0000000000000000000001";
const VIP: &str = "10.0.0.1";
const OTHER_VIP: &str = "10.0.0.2";
const THIRD_VIP: &str = "10.0.0.3";

pub(super) fn addr(vip: &str, port: u16) -> MemberAddress {
    MemberAddress {
        host: vip.to_owned(),
        port,
    }
}

pub(super) fn port_of(slot: MemberSlot) -> u16 {
    match slot {
        MemberSlot::Data(index) => 30000 + index as u16,
        MemberSlot::Arbiter => 31000,
    }
}

fn local(index: u32) -> MemberAddress {
    addr(VIP, port_of(MemberSlot::Data(index)))
}

fn remote(index: u32) -> MemberAddress {
    addr(OTHER_VIP, port_of(MemberSlot::Data(index)))
}

fn third(index: u32) -> MemberAddress {
    addr(THIRD_VIP, port_of(MemberSlot::Data(index)))
}

fn empty_probe() -> MemberProbe {
    MemberProbe {
        has_config: false,
        replica_set_id: None,
        set_name: None,
        state: None,
        me: None,
        too_stale: false,
    }
}

fn member_probe(replica_set_id: &str, state: MemberState) -> MemberProbe {
    MemberProbe {
        has_config: true,
        replica_set_id: Some(replica_set_id.to_owned()),
        set_name: Some(SET.to_owned()),
        state: Some(state),
        me: None,
        too_stale: false,
    }
}

fn running(slot: MemberSlot, probe: Option<MemberProbe>) -> LocalMemberFacts {
    LocalMemberFacts {
        slot,
        address: Some(addr(VIP, port_of(slot))),
        stateful_set_exists: true,
        stateful_set_deleting: false,
        pod_running: true,
        probe,
        recorded: None,
    }
}

fn data(index: u32, probe: Option<MemberProbe>) -> LocalMemberFacts {
    running(MemberSlot::Data(index), probe)
}

fn voter(id: i64, host: MemberAddress) -> ConfigMember {
    ConfigMember {
        id,
        host,
        arbiter_only: false,
        votes: 1,
        priority: 1.0,
        hidden: false,
        tags: BTreeMap::new(),
        newly_added: false,
    }
}

fn non_voter(id: i64, host: MemberAddress) -> ConfigMember {
    ConfigMember {
        votes: 0,
        priority: 0.0,
        ..voter(id, host)
    }
}

fn config(members: Vec<ConfigMember>) -> ReplicaSetConfig {
    ReplicaSetConfig {
        set_name: SET.to_owned(),
        version: 5,
        term: Some(2),
        members,
        settings: ConfigSettings::from_desired(
            &ReplicaSetSettings::default(),
            Some(SET_ID.to_owned()),
        ),
    }
}

/// Every member healthy; `primary` is PRIMARY, the others SECONDARY (arbiters
/// ARBITER); the config is committed.
fn healthy(config: ReplicaSetConfig, primary: &MemberAddress) -> ObservedSet {
    let members = config
        .members
        .iter()
        .map(|m| {
            let state = if &m.host == primary {
                MemberState::Primary
            } else if m.arbiter_only {
                MemberState::Arbiter
            } else {
                MemberState::Secondary
            };
            let health = member_status(state, true, Some(0));
            (m.host.clone(), health)
        })
        .collect();
    ObservedSet {
        config,
        primary: Some(primary.clone()),
        members,
        config_committed: true,
        write_concern: Default::default(),
    }
}

fn hostconf(addresses: &[MemberAddress]) -> HostConf {
    HostConf {
        members: addresses
            .iter()
            .map(|a| HostConfMember {
                address: a.clone(),
                arbiter: a.port == port_of(MemberSlot::Arbiter),
                votes: None,
                priority: None,
                hidden: false,
                tags: BTreeMap::new(),
            })
            .collect(),
    }
}

fn input(desired: u32, local_members: Vec<LocalMemberFacts>, observed: Observed) -> PlanInput {
    let mut listed: Vec<MemberAddress> = (0..desired).map(local).collect();
    if let Observed::Configured(set) = &observed {
        listed.extend(
            set.config
                .members
                .iter()
                .map(|m| m.host.clone())
                .filter(|h| h.host != VIP),
        );
    }
    PlanInput {
        local_vip: VIP.to_owned(),
        set_name: SET.to_owned(),
        desired_members: desired,
        arbiter_wanted: false,
        rs_init: true,
        settings: ReplicaSetSettings::default(),
        pvc_policy: PvcPolicy::Retain,
        known_replica_set_id: match observed {
            Observed::Configured(_) => Some(SET_ID.to_owned()),
            Observed::Unreachable => None,
        },
        hostconf: hostconf(&listed),
        local_members,
        remote_probes: BTreeMap::new(),
        observed,
        stepped_down_recently: None,
        step_down_held: None,
        dropped_members: DroppedMembers::Read(Vec::new()),
        forgotten_cluster: None,
    }
}

/// A member as `replSetGetStatus` reports it, with what the planner does not read left empty.
pub(super) fn member_status(
    state: MemberState,
    healthy: bool,
    lag_secs: Option<i64>,
) -> MemberStatus {
    MemberStatus {
        id: 0,
        healthy,
        state,
        sync_source: String::new(),
        lag_secs,
        config_version: None,
        authentication_refused: false,
    }
}

/// Three local members 0..3 in the config, 0 primary, plus `remote` voters.
fn three_local_in_sync(remote_voters: u32) -> (Vec<LocalMemberFacts>, ObservedSet) {
    let mut members: Vec<ConfigMember> = (0..3).map(|i| voter(i64::from(i), local(i))).collect();
    members.extend((0..remote_voters).map(|i| voter(10 + i64::from(i), remote(i))));
    let facts = (0..3)
        .map(|i| data(i, Some(member_probe(SET_ID, MemberState::Secondary))))
        .collect();
    (facts, healthy(config(members), &local(0)))
}

fn expect_reconfig(step: Step) -> (ReplicaSetConfig, Change) {
    match step {
        Step::Reconfig { config, change } => (config, change),
        other => panic!("expected a reconfig, got {other:?}"),
    }
}

fn expect_initiate(step: Step) -> ReplicaSetConfig {
    match step {
        Step::Initiate { config, .. } => config,
        other => panic!("expected an initiate, got {other:?}"),
    }
}

fn hosts(config: &ReplicaSetConfig) -> Vec<(i64, MemberAddress, u8)> {
    config
        .members
        .iter()
        .map(|m| (m.id, m.host.clone(), m.votes))
        .collect()
}
