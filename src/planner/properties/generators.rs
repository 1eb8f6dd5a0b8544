//! Random inputs: single planner inputs (configs, health, probes, desired
//! counts, addresses that moved) and the operations of a run (plans,
//! failures, elections, commits, spec and address changes).

use super::*;

/// One member of a random config: (cluster, index, votes, priority, hidden,
/// newlyAdded, healthy, state code).
pub(super) type MemberSpec = (usize, u32, bool, u8, bool, bool, bool, i32);

pub(super) fn arb_member() -> impl Strategy<Value = MemberSpec> {
    (
        prop::sample::select(vec![0usize, 0, 1, 2]),
        0u32..9,
        prop::bool::weighted(0.7),
        0u8..3,
        prop::bool::weighted(0.05),
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.85),
        prop::sample::select(vec![2, 2, 2, 2, 2, 3, 5, 9]),
    )
}

/// A config mongod could hold: member 0 a visible voter with priority 1, at
/// most 7 voters, priority 0 for non-voters and hidden members; the local
/// members (cluster 0) take indices 0, 1, 2, … in turn.
pub(super) fn build_config(
    specs: &[MemberSpec],
) -> (ReplicaSetConfig, BTreeMap<MemberAddress, MemberStatus>) {
    let mut members: Vec<ConfigMember> = Vec::new();
    let mut health = BTreeMap::new();
    let mut voters = 0;
    let mut local = 0;
    for (n, &(cluster, index, vote, priority, hidden, newly_added, healthy, state)) in
        specs.iter().enumerate()
    {
        let index = if cluster == 0 { local } else { index };
        let host = addr(VIPS[cluster], port_of(MemberSlot::Data(index)));
        if members.iter().any(|m| m.host == host) {
            continue;
        }
        local += u32::from(cluster == 0);
        let first = members.is_empty();
        let votes = u8::from((first || vote) && voters < 7);
        voters += usize::from(votes);
        let hidden = hidden && !first;
        let priority = if first {
            1.0
        } else if votes == 0 || hidden {
            0.0
        } else {
            f64::from(priority)
        };
        members.push(ConfigMember {
            id: 2 * n as i64,
            host: host.clone(),
            arbiter_only: false,
            votes,
            priority,
            hidden,
            tags: BTreeMap::new(),
            newly_added: newly_added && votes == 1 && !first,
        });
        let state = if healthy {
            MemberState::from_code(state)
        } else {
            MemberState::Down
        };
        // mongod reports a lag for the members it reaches.
        health.insert(host, member_status(state, healthy, healthy.then_some(0)));
    }
    let config = ReplicaSetConfig {
        set_name: SET.to_owned(),
        version: 7,
        term: Some(3),
        members,
        settings: ConfigSettings::from_desired(
            &ReplicaSetSettings::default(),
            Some(SET_ID.to_owned()),
        ),
    };
    (config, health)
}

/// What a member answers.
#[derive(Clone, Copy, Debug)]
pub(super) enum Answer {
    Nothing,
    NoConfig,
    ThisSet(MemberState),
    AnotherReplicaSetId,
    AnotherSetName,
    ConfigWithoutId,
}

impl Answer {
    /// A random answer from a 0–99 roll: before initiate nearly every member
    /// is empty; afterwards members in the config mostly answer as such, and
    /// the others are a mix of everything.
    fn from_roll(roll: u8, fresh: bool, in_config: bool) -> Answer {
        let table: &[(u8, Answer)] = if fresh {
            &[
                (85, Answer::NoConfig),
                (90, Answer::Nothing),
                (95, Answer::ThisSet(MemberState::Secondary)),
                (100, Answer::AnotherSetName),
            ]
        } else if in_config {
            &[
                (80, Answer::ThisSet(MemberState::Secondary)),
                (85, Answer::Nothing),
                (90, Answer::AnotherReplicaSetId),
                (95, Answer::ConfigWithoutId),
                (100, Answer::AnotherSetName),
            ]
        } else {
            &[
                (40, Answer::NoConfig),
                (60, Answer::ThisSet(MemberState::Removed)),
                (70, Answer::Nothing),
                (80, Answer::AnotherReplicaSetId),
                (90, Answer::ConfigWithoutId),
                (100, Answer::AnotherSetName),
            ]
        };
        table
            .iter()
            .find(|(limit, _)| roll < *limit)
            .map_or(Answer::Nothing, |(_, answer)| *answer)
    }

    fn probe(self) -> Option<MemberProbe> {
        let this = |state| MemberProbe {
            has_config: true,
            replica_set_id: Some(SET_ID.to_owned()),
            set_name: Some(SET.to_owned()),
            state: Some(state),
            me: None,
            too_stale: false,
        };
        match self {
            Answer::Nothing => None,
            Answer::NoConfig => Some(MemberProbe {
                has_config: false,
                replica_set_id: None,
                set_name: None,
                state: None,
                me: None,
                too_stale: false,
            }),
            Answer::ThisSet(state) => Some(this(state)),
            Answer::AnotherReplicaSetId => Some(MemberProbe {
                replica_set_id: Some("another-set".to_owned()),
                ..this(MemberState::Removed)
            }),
            Answer::AnotherSetName => Some(MemberProbe {
                set_name: Some("replset-9".to_owned()),
                ..this(MemberState::Removed)
            }),
            Answer::ConfigWithoutId => Some(MemberProbe {
                replica_set_id: None,
                ..this(MemberState::Removed)
            }),
        }
    }
}

/// Facts of one local index: (listed although unwanted, address known,
/// StatefulSet, pod running, answer roll, address roll).
pub(super) type FactsSpec = (bool, bool, bool, bool, u8, u8);

pub(super) fn arb_facts() -> impl Strategy<Value = FactsSpec> {
    (
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.97),
        prop::bool::weighted(0.95),
        prop::bool::weighted(0.9),
        0u8..100,
        0u8..100,
    )
}

/// What happened to a local member's address, and what its StatefulSet
/// records of its config entry.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum AddressRoll {
    /// Unchanged; its entry recorded (if the config holds one).
    Recorded,
    /// Unchanged; nothing recorded yet.
    Unrecorded,
    /// Its Service now has another nodePort; its old entry recorded.
    MovedRecorded,
    /// Another nodePort, before its entry was recorded.
    MovedUnrecorded,
    /// Unchanged, but the recorded `_id` is stale (another member's now).
    StaleRecord,
}

impl AddressRoll {
    fn from_roll(roll: u8) -> Self {
        match roll {
            0..=49 => AddressRoll::Recorded,
            50..=79 => AddressRoll::Unrecorded,
            80..=89 => AddressRoll::MovedRecorded,
            90..=94 => AddressRoll::MovedUnrecorded,
            _ => AddressRoll::StaleRecord,
        }
    }

    fn moved(self) -> bool {
        matches!(
            self,
            AddressRoll::MovedRecorded | AddressRoll::MovedUnrecorded
        )
    }
}

prop_compose! {
    pub(super) fn arb_input()(
        fresh in prop::bool::weighted(0.25),
        members in prop::collection::vec(arb_member(), 1..14),
        primary in prop::option::weighted(0.9, 0usize..14),
        committed in prop::bool::weighted(0.9),
        stepped_down in prop::option::weighted(0.2, 0usize..14),
        known_id in any::<bool>(),
        known_before_seen in prop::bool::weighted(0.1),
        desired_change in prop::sample::select(vec![-2i64, -1, 0, 0, 0, 0, 1, 1, 2]),
        fresh_desired in 0u32..6,
        rs_init in prop::bool::weighted(0.8),
        facts in prop::collection::vec(arb_facts(), 9),
        remote in prop::collection::vec(0u8..100, 6),
        pinned_to_zero in prop::option::weighted(0.15, 0u32..9),
        new_timeout in prop::bool::weighted(0.2),
        pvc_delete in any::<bool>(),
        hidden_in_hostconf in prop::option::weighted(0.1, 0u32..9),
        write_concern in prop::sample::select(vec![
            ClusterWriteConcern::Implicit,
            ClusterWriteConcern::Global { w: "majority".into() },
            ClusterWriteConcern::Global { w: "majority".into() },
            ClusterWriteConcern::NotSetBefore50,
        ]),
    ) -> PlanInput {
        let (config, mut members) = build_config(&members);
        let vip = VIPS[0];
        let local_in_config = config.members.iter().filter(|m| m.host.host == vip).count();
        let desired = if fresh {
            fresh_desired
        } else {
            u32::try_from((local_in_config as i64 + desired_change).max(0)).unwrap_or_default()
        };
        let primary = primary
            .map(|p| config.members[p % config.members.len()].host.clone())
            .filter(|p| config.members.iter().any(|m| &m.host == p && electable(m)));
        for (host, health) in members.iter_mut() {
            if Some(host) == primary.as_ref() {
                *health = member_status(MemberState::Primary, true, Some(0));
            } else if health.state == MemberState::Primary {
                health.state = MemberState::Secondary;
            }
        }
        let stepped_down_recently =
            stepped_down.map(|p| config.members[p % config.members.len()].host.clone());
        let local_members = facts
            .iter()
            .enumerate()
            .filter_map(|(index, &(listed, address_known, sts, running, roll, address_roll))| {
                let slot = MemberSlot::Data(index as u32);
                let old_address = addr(vip, port_of(slot));
                let entry = config.members.iter().find(|m| m.host == old_address);
                let in_config = !fresh && entry.is_some();
                let address_roll = AddressRoll::from_roll(address_roll);
                let address = if address_roll.moved() {
                    addr(vip, port_of(slot) + 1000)
                } else {
                    old_address
                };
                let recorded = entry.filter(|_| sts).and_then(|e| match address_roll {
                    AddressRoll::Recorded | AddressRoll::MovedRecorded => Some(RecordedEntry {
                        id: e.id,
                        host: e.host.clone(),
                    }),
                    AddressRoll::StaleRecord => Some(RecordedEntry {
                        id: e.id + 100,
                        host: e.host.clone(),
                    }),
                    AddressRoll::Unrecorded | AddressRoll::MovedUnrecorded => None,
                });
                let relevant = listed || (index as u32) < desired || in_config;
                let running = sts && running;
                relevant.then(|| LocalMemberFacts {
                    slot,
                    address: address_known.then_some(address),
                    stateful_set_exists: sts,
                    stateful_set_deleting: false,
                    pod_running: running,
                    probe: if running { Answer::from_roll(roll, fresh, in_config).probe() } else { None },
                    recorded,
                })
            })
            .collect();
        let remote_probes: BTreeMap<MemberAddress, MemberProbe> = remote
            .iter()
            .enumerate()
            .filter_map(|(n, &roll)| {
                let address = addr(VIPS[1 + n % 2], port_of(MemberSlot::Data(n as u32 / 2)));
                Answer::from_roll(roll, fresh, false).probe().map(|p| (address, p))
            })
            .collect();
        let mut listed: BTreeSet<MemberAddress> =
            (0..desired).map(|i| addr(vip, port_of(MemberSlot::Data(i)))).collect();
        if !fresh {
            listed.extend(config.members.iter().map(|m| m.host.clone()).filter(|h| h.host != vip));
        }
        listed.extend(remote_probes.keys().cloned());
        let hostconf = HostConf {
            members: listed
                .into_iter()
                .map(|address| HostConfMember {
                    votes: pinned_to_zero
                        .filter(|&i| address == addr(vip, port_of(MemberSlot::Data(i))))
                        .map(|_| 0),
                    hidden: hidden_in_hostconf
                        .is_some_and(|i| address == addr(vip, port_of(MemberSlot::Data(i)))),
                    address,
                    arbiter: false,
                    priority: None,
                    tags: BTreeMap::new(),
                })
                .collect(),
        };
        let mut settings = ReplicaSetSettings::default();
        if new_timeout {
            settings.election_timeout_millis = 30_000;
        }
        let observed = if fresh {
            Observed::Unreachable
        } else {
            Observed::Configured(ObservedSet {
                config,
                config_committed: committed && primary.is_some(),
                write_concern,
                primary,
                members,
            })
        };
        PlanInput {
            local_vip: vip.to_owned(),
            set_name: SET.to_owned(),
            desired_members: desired,
            arbiter_wanted: false,
            rs_init,
            settings,
            pvc_policy: if pvc_delete { PvcPolicy::Delete } else { PvcPolicy::Retain },
            known_replica_set_id: (if fresh { known_before_seen } else { known_id })
                .then(|| SET_ID.to_owned()),
            hostconf,
            local_members,
            remote_probes,
            observed,
            stepped_down_recently,
            step_down_held: None,
            dropped_members: DroppedMembers::Read(Vec::new()),
            forgotten_cluster: None,
        }
    }
}

/// One thing that happens in a run.
#[derive(Clone, Debug)]
pub(super) enum Op {
    /// A cluster's controller plans and executes one step.
    Plan {
        cluster: usize,
    },
    /// A cluster's controller plans now and executes later, after other
    /// things happened (a stale view).
    PlanLater {
        cluster: usize,
    },
    /// The late step of a cluster is executed.
    ExecuteLate {
        cluster: usize,
    },
    Event(Event),
}

pub(super) const CLUSTERS: usize = 3;

pub(super) fn arb_op() -> impl Strategy<Value = Op> {
    let cluster = 0..CLUSTERS;
    prop_oneof![
        8 => cluster.clone().prop_map(|cluster| Op::Plan { cluster }),
        1 => cluster.clone().prop_map(|cluster| Op::PlanLater { cluster }),
        1 => cluster.clone().prop_map(|cluster| Op::ExecuteLate { cluster }),
        1 => (cluster.clone(), arb_slot()).prop_map(|(cluster, slot)| Op::Event(Event::PodDown { cluster, slot })),
        2 => (cluster.clone(), arb_slot()).prop_map(|(cluster, slot)| Op::Event(Event::PodUp { cluster, slot })),
        2 => (0usize..8).prop_map(|pick| Op::Event(Event::Elect { pick })),
        1 => (0usize..8).prop_map(|pick| Op::Event(Event::Failover { pick })),
        3 => Just(Op::Event(Event::Commit)),
        2 => Just(Op::Event(Event::ClearNewlyAdded)),
        1 => Just(Op::Event(Event::StepDownPeriodEnds)),
        1 => (cluster.clone(), 0u32..5).prop_map(|(cluster, desired)| Op::Event(Event::SetDesired { cluster, desired })),
        1 => (cluster.clone(), prop::bool::weighted(0.3)).prop_map(|(cluster, wanted)| Op::Event(Event::SetArbiter { cluster, wanted })),
        1 => (cluster.clone(), prop::sample::select(vec![10_000i64, 20_000])).prop_map(|(cluster, millis)| Op::Event(Event::SetElectionTimeout { cluster, millis })),
        1 => (cluster.clone(), arb_slot(), 32_000u16..32_004).prop_map(|(cluster, slot, port)| Op::Event(Event::MoveNodePort { cluster, slot, port })),
        1 => cluster.clone().prop_map(|cluster| Op::Event(Event::MoveVip { cluster })),
        1 => (cluster.clone(), arb_slot()).prop_map(|(cluster, slot)| Op::Event(Event::LoseVolume { cluster, slot })),
        1 => cluster.prop_map(|cluster| Op::Event(Event::Recreate { cluster })),
    ]
}

pub(super) fn arb_slot() -> impl Strategy<Value = MemberSlot> {
    prop_oneof![
        5 => (0u32..5).prop_map(MemberSlot::Data),
        1 => Just(MemberSlot::Arbiter),
    ]
}

pub(super) fn arb_desired() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(0u32..5, CLUSTERS)
        .prop_filter("someone initiates", |d| d.iter().any(|&n| n > 0))
}

pub(super) fn arb_pvc_policy() -> impl Strategy<Value = PvcPolicy> {
    prop_oneof![Just(PvcPolicy::Retain), Just(PvcPolicy::Delete)]
}
