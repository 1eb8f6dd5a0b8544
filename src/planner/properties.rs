//! Property tests of the planner, one per safety invariant of
//! `shared/design/replica-set-rules.md`, in two kinds:
//!
//! - **single inputs**: random configs, health, probes and desired counts; each
//!   returned step is checked against the invariant;
//! - **sequences**: the [`world`](super::world) model of several clusters, where
//!   every cluster's planner acts in turn, interleaved with failures, elections,
//!   commits and spec changes; every invariant is checked after every step, and
//!   fault-free runs must converge to `InSync` everywhere.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::tests::{addr, member_status, port_of, SET, SET_ID};
use super::world::{Event, World};
use super::*;
use crate::replset::{reconfig_problems, voting_changes};

const VIPS: [&str; 3] = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];

// ------------------------------------------------------------- the invariants

/// An invariant: `Err` says how `step` breaks it for `input`.
type Invariant = fn(&PlanInput, &Step) -> Result<(), String>;

const INVARIANTS: [(&str, Invariant); 11] = [
    (
        "one voting change per reconfig",
        one_voting_change_per_reconfig,
    ),
    ("never a forced reconfig", never_forced_reconfig),
    ("never a second initiate", never_second_initiate),
    ("never below a voting majority", never_below_voting_majority),
    (
        "never removes an unstepped primary",
        never_removes_an_unstepped_primary,
    ),
    ("never more than seven voters", never_more_than_seven_voters),
    (
        "no cluster gains a majority of the votes",
        no_cluster_gains_a_majority_of_votes,
    ),
    (
        "never deletes the StatefulSet or PVC of a member in the config",
        never_deletes_a_member_in_config,
    ),
    (
        "never adds a member of another set",
        never_adds_a_member_of_another_set,
    ),
    (
        "only this cluster's members change",
        only_local_members_change,
    ),
    (
        "one step per call, idempotent",
        one_step_per_call_and_idempotent,
    ),
];

fn observed_set(input: &PlanInput) -> Result<&ObservedSet, String> {
    match &input.observed {
        Observed::Configured(set) => Ok(set),
        Observed::Unreachable => Err("a config change without an observed config".to_owned()),
    }
}

fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

/// Invariant 1: at most one voting change, and only from a committed config
/// with a primary and no `newlyAdded` member.
fn one_voting_change_per_reconfig(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    let changes = voting_changes(&set.config, config);
    ensure(changes <= 1, || format!("{changes} voting changes"))?;
    ensure(set.primary.is_some(), || {
        "reconfig without a primary".to_owned()
    })?;
    ensure(set.config_committed, || "reconfig before commit".to_owned())?;
    ensure(!set.config.members.iter().any(|m| m.newly_added), || {
        "reconfig while a member is newlyAdded".to_owned()
    })
}

/// Invariant 2: a step cannot say `force` (the type has no such field); what
/// it sends is the observed config at version + 1 that mongod accepts
/// without force.
fn never_forced_reconfig(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    ensure(config.version == set.config.version + 1, || {
        format!("version {} after {}", config.version, set.config.version)
    })?;
    let problems = reconfig_problems(&set.config, config);
    ensure(problems.is_empty(), || {
        format!("mongod would reject: {problems:?}")
    })
}

/// Invariant 3: initiate only when nobody has a config, nothing is recorded,
/// in the rsInit cluster, with members that all answered without a config.
fn never_second_initiate(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Initiate { config } = step else {
        return Ok(());
    };
    ensure(input.rs_init, || {
        "initiate outside the rsInit cluster".to_owned()
    })?;
    ensure(input.known_replica_set_id.is_none(), || {
        "initiate with a recorded replicaSetId".to_owned()
    })?;
    ensure(input.observed == Observed::Unreachable, || {
        "initiate while a config is observed".to_owned()
    })?;
    let mut answers: BTreeMap<&MemberAddress, &MemberProbe> = input.remote_probes.iter().collect();
    answers.extend(input.local_members.iter().filter_map(|m| m.answer()));
    ensure(answers.values().all(|p| !p.has_config), || {
        "initiate while a member has a config".to_owned()
    })?;
    for m in &config.members {
        ensure(answers.get(&m.host).is_some_and(|p| !p.has_config), || {
            format!("{} is listed without answering", m.host)
        })?;
    }
    ensure(
        config.members.iter().any(|m| input.is_local(&m.host)),
        || "no local member to run replSetInitiate on".to_owned(),
    )
}

/// Invariant 4: one member at a time, and the resulting config keeps a
/// majority of healthy voters (a joining member counts, it just answered).
fn never_below_voting_majority(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    let before: BTreeSet<&MemberAddress> = set.config.members.iter().map(|m| &m.host).collect();
    let after: BTreeSet<&MemberAddress> = config.members.iter().map(|m| &m.host).collect();
    let changed = before.symmetric_difference(&after).count();
    ensure(changed <= 1, || {
        format!("{changed} members added or removed at once")
    })?;
    let healthy = config
        .voters()
        .filter(|m| {
            !before.contains(&m.host)
                || set
                    .members
                    .get(&m.host)
                    .is_some_and(|h| h.healthy && h.state.can_vote())
        })
        .count();
    ensure(healthy >= config.majority(), || {
        format!("{healthy} healthy voters, {} needed", config.majority())
    })
}

/// Invariant 5: the primary is stepped down, never removed; a step-down is
/// sent to the observed primary.
fn never_removes_an_unstepped_primary(input: &PlanInput, step: &Step) -> Result<(), String> {
    match step {
        Step::Reconfig { config, .. } => {
            let set = observed_set(input)?;
            let primary = set.primary.as_ref().ok_or("reconfig without a primary")?;
            ensure(config.contains(primary), || {
                format!("removes primary {primary}")
            })
        }
        Step::StepDown { primary, .. } => {
            let set = observed_set(input)?;
            ensure(set.primary.as_ref() == Some(primary), || {
                format!("steps down {primary}, which is not the primary")
            })?;
            ensure(input.is_local(primary), || {
                "steps down a remote member".to_owned()
            })
        }
        _ => Ok(()),
    }
}

/// Invariant 6: ≤ 7 voters, ≤ 50 members, non-voters/hidden/arbiters at
/// priority 0 — every config sent passes the config rules.
fn never_more_than_seven_voters(_: &PlanInput, step: &Step) -> Result<(), String> {
    let config = match step {
        Step::Initiate { config } | Step::Reconfig { config, .. } => config,
        _ => return Ok(()),
    };
    ensure(config.voting_member_count() <= 7, || {
        format!("{} voters", config.voting_member_count())
    })?;
    ensure(config.members.len() <= 50, || {
        format!("{} members", config.members.len())
    })?;
    let problems = config.validate();
    ensure(problems.is_empty(), || {
        format!("invalid config: {problems:?}")
    })
}

/// How many clusters (distinct VIPs) hostconf spans.
fn clusters_in_hostconf(input: &PlanInput) -> usize {
    let vips: BTreeSet<&str> = input
        .hostconf
        .members
        .iter()
        .map(|m| m.address.host.as_str())
        .collect();
    vips.len()
}

/// The VIP whose members hold more than half of the config's votes, if any.
fn majority_cluster(config: &ReplicaSetConfig) -> Option<String> {
    let mut votes: BTreeMap<&str, usize> = BTreeMap::new();
    for m in config.members.iter().filter(|m| m.votes > 0) {
        *votes.entry(m.host.host.as_str()).or_default() += 1;
    }
    let total: usize = votes.values().sum();
    votes
        .into_iter()
        .find(|&(_, n)| n * 2 > total)
        .map(|(vip, _)| vip.to_owned())
}

/// Invariant 8: with three clusters or more in hostconf, a step that gives a
/// vote (initiate, or a reconfig after which some host votes that did not)
/// leaves no cluster holding a majority of the votes — unless one already
/// held it in the observed config: votes are never taken away, only diluted.
fn no_cluster_gains_a_majority_of_votes(input: &PlanInput, step: &Step) -> Result<(), String> {
    if clusters_in_hostconf(input) < 3 {
        return Ok(());
    }
    let voters = |c: &ReplicaSetConfig| -> BTreeSet<MemberAddress> {
        c.members
            .iter()
            .filter(|m| m.votes > 0)
            .map(|m| m.host.clone())
            .collect()
    };
    let config = match step {
        Step::Initiate { config } => config,
        Step::Reconfig { config, .. } => {
            let old = &observed_set(input)?.config;
            if voters(config).is_subset(&voters(old)) || majority_cluster(old).is_some() {
                return Ok(());
            }
            config
        }
        _ => return Ok(()),
    };
    ensure(majority_cluster(config).is_none(), || {
        format!(
            "cluster {:?} holds a majority of the votes of {:?}",
            majority_cluster(config),
            voters(config)
        )
    })
}

/// Invariant 10: a StatefulSet (and PVC) is deleted only for an unwanted
/// member whose address is known and absent from a committed config.
fn never_deletes_a_member_in_config(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::DeleteStatefulSet { slot, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    ensure(set.primary.is_some() && set.config_committed, || {
        "deletes without a primary's committed config".to_owned()
    })?;
    ensure(!input.is_wanted(*slot), || format!("deletes wanted {slot}"))?;
    let address = input
        .facts(*slot)
        .and_then(|f| f.address.as_ref())
        .ok_or("deletes a member whose address is unknown")?;
    ensure(!set.config.contains(address), || {
        format!("deletes {address}, still in the config")
    })
}

/// Invariant 11: a member joins only when it answered with no config or with
/// this set's replicaSetId and name.
fn never_adds_a_member_of_another_set(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    let set_id = set.config.settings.replica_set_id.as_ref();
    for joined in config
        .members
        .iter()
        .filter(|m| !set.config.contains(&m.host))
    {
        let probe = input
            .local_members
            .iter()
            .filter(|m| m.pod_running)
            .filter_map(|m| m.answer())
            .find(|(a, _)| *a == &joined.host)
            .map(|(_, p)| p)
            .ok_or_else(|| format!("adds {} without its answer", joined.host))?;
        ensure(probe.set_name.as_ref().is_none_or(|n| n == SET), || {
            format!("adds {} of another set name", joined.host)
        })?;
        ensure(
            !probe.has_config
                || (probe.replica_set_id.is_some() && probe.replica_set_id.as_ref() == set_id),
            || format!("adds {} holding another replica set", joined.host),
        )?;
    }
    Ok(())
}

/// Only this cluster's members are added, removed, promoted or stepped down.
fn only_local_members_change(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    let remote = |c: &ReplicaSetConfig| -> Vec<ConfigMember> {
        let mut members: Vec<ConfigMember> = c
            .members
            .iter()
            .filter(|m| !input.is_local(&m.host))
            .cloned()
            .collect();
        members.sort_by(|a, b| a.host.cmp(&b.host));
        members
    };
    ensure(remote(&set.config) == remote(config), || {
        "a remote member changed".to_owned()
    })
}

/// Invariant 9: the same input gives the same step.
fn one_step_per_call_and_idempotent(input: &PlanInput, step: &Step) -> Result<(), String> {
    let again = plan(&input.clone());
    ensure(&again == step, || format!("{step:?} then {again:?}"))
}

fn check_all(input: &PlanInput, step: &Step) -> Result<(), String> {
    for (name, invariant) in INVARIANTS {
        invariant(input, step).map_err(|why| format!("{name}: {why}\nstep: {step:?}"))?;
    }
    Ok(())
}

// ---------------------------------------------------------- random single inputs

/// One member of a random config: (cluster, index, votes, priority, hidden,
/// newlyAdded, healthy, state code).
type MemberSpec = (usize, u32, bool, u8, bool, bool, bool, i32);

fn arb_member() -> impl Strategy<Value = MemberSpec> {
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
fn build_config(specs: &[MemberSpec]) -> (ReplicaSetConfig, BTreeMap<MemberAddress, MemberStatus>) {
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
        health.insert(host, member_status(state, healthy, None));
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
enum Answer {
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
        };
        match self {
            Answer::Nothing => None,
            Answer::NoConfig => Some(MemberProbe {
                has_config: false,
                replica_set_id: None,
                set_name: None,
                state: None,
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
/// StatefulSet, pod running, answer roll).
type FactsSpec = (bool, bool, bool, bool, u8);

fn arb_facts() -> impl Strategy<Value = FactsSpec> {
    (
        prop::bool::weighted(0.03),
        prop::bool::weighted(0.97),
        prop::bool::weighted(0.95),
        prop::bool::weighted(0.9),
        0u8..100,
    )
}

prop_compose! {
    fn arb_input()(
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
            .filter(|p| config.member(p).is_some_and(ConfigMember::is_electable));
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
            .filter_map(|(index, &(listed, address_known, sts, running, roll))| {
                let slot = MemberSlot::Data(index as u32);
                let address = addr(vip, port_of(slot));
                let in_config = !fresh && config.contains(&address);
                let relevant = listed || (index as u32) < desired || in_config;
                let running = sts && running;
                relevant.then(|| LocalMemberFacts {
                    slot,
                    address: address_known.then_some(address),
                    stateful_set_exists: sts,
                    pod_running: running,
                    probe: if running { Answer::from_roll(roll, fresh, in_config).probe() } else { None },
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
                    address,
                    arbiter: false,
                    priority: None,
                    hidden: false,
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
        }
    }
}

fn single_input_config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(single_input_config())]

    #[test]
    fn invariant_one_voting_change_per_reconfig(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(one_voting_change_per_reconfig(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_forced_reconfig(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_forced_reconfig(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_second_initiate(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_second_initiate(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_below_voting_majority(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_below_voting_majority(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_removes_an_unstepped_primary(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_removes_an_unstepped_primary(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_more_than_seven_voters(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_more_than_seven_voters(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_deletes_statefulset_or_pvc_of_a_member_in_config(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_deletes_a_member_in_config(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_adds_a_member_holding_another_replica_set(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_adds_a_member_of_another_set(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_only_this_clusters_members_change(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(only_local_members_change(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_one_step_per_call_and_idempotent(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(one_step_per_call_and_idempotent(&input, &step), Ok(()));
    }
}

proptest! {
    // Only a few random inputs give a vote from a config where no cluster holds
    // a majority (about 1 in 20): more cases than the other single inputs.
    #![proptest_config(ProptestConfig {
        cases: 1024,
        ..ProptestConfig::default()
    })]

    #[test]
    fn invariant_no_cluster_holds_a_majority_of_votes(input in arb_input()) {
        prop_assume!(clusters_in_hostconf(&input) >= 3);
        let step = plan(&input);
        prop_assert_eq!(no_cluster_gains_a_majority_of_votes(&input, &step), Ok(()));
    }
}

// ------------------------------------------------------------------- sequences

/// One thing that happens in a run.
#[derive(Clone, Debug)]
enum Op {
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

const CLUSTERS: usize = 3;

fn arb_op() -> impl Strategy<Value = Op> {
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
        1 => (cluster, prop::bool::weighted(0.3)).prop_map(|(cluster, wanted)| Op::Event(Event::SetArbiter { cluster, wanted })),
    ]
}

fn arb_slot() -> impl Strategy<Value = MemberSlot> {
    prop_oneof![
        5 => (0u32..5).prop_map(MemberSlot::Data),
        1 => Just(MemberSlot::Arbiter),
    ]
}

fn arb_desired() -> impl Strategy<Value = Vec<u32>> {
    prop::collection::vec(0u32..5, CLUSTERS)
        .prop_filter("someone initiates", |d| d.iter().any(|&n| n > 0))
}

fn arb_pvc_policy() -> impl Strategy<Value = PvcPolicy> {
    prop_oneof![Just(PvcPolicy::Retain), Just(PvcPolicy::Delete)]
}

/// Plans for `cluster`, checking every invariant on the step.
fn plan_checked(world: &mut World, cluster: usize) -> Result<(PlanInput, Step), String> {
    world.build_stateful_sets(cluster);
    let input = world.input_for(cluster);
    let step = plan(&input);
    check_all(&input, &step)?;
    if let Step::Initiate { .. } = step {
        ensure(
            world.set.is_none() && world.nodes.values().all(|n| n.holds.is_none()),
            || "initiate while the set exists".to_owned(),
        )?;
    }
    if let Step::DeleteStatefulSet {
        slot: MemberSlot::Data(index),
        ..
    } = step
    {
        let address = world.address(cluster, MemberSlot::Data(index));
        ensure(
            world
                .set
                .as_ref()
                .is_none_or(|s| !s.config.contains(&address)),
            || format!("deletes {address}, which is in the live config"),
        )?;
    }
    world.record_status(cluster);
    Ok((input, step))
}

/// How many steps of each kind (by [`Step::reason`]) a run planned.
type StepCounts = BTreeMap<&'static str, usize>;

/// Runs `ops`, checking the invariants after every one.
fn run(world: &mut World, ops: &[Op]) -> Result<StepCounts, String> {
    let mut late: BTreeMap<usize, Step> = BTreeMap::new();
    let mut counts = StepCounts::new();
    for (n, op) in ops.iter().enumerate() {
        let context = |why: String| format!("op {n} {op:?}: {why}");
        match *op {
            Op::Plan { cluster } if late.contains_key(&cluster) => {
                // A controller runs one reconcile at a time: the late step first.
                if let Some(step) = late.remove(&cluster) {
                    let _rejected = world.execute(cluster, &step);
                }
            }
            Op::Plan { cluster } => {
                let (_, step) = plan_checked(world, cluster).map_err(context)?;
                *counts.entry(step.reason()).or_default() += 1;
                // Planned from a current view, mongod must accept the step.
                world
                    .execute(cluster, &step)
                    .map_err(|why| context(format!("{step:?} rejected: {why}")))?;
            }
            Op::PlanLater { cluster } => {
                if let Entry::Vacant(pending) = late.entry(cluster) {
                    let (_, step) = plan_checked(world, cluster).map_err(context)?;
                    *counts.entry(step.reason()).or_default() += 1;
                    pending.insert(step);
                }
            }
            Op::ExecuteLate { cluster } => {
                if let Some(step) = late.remove(&cluster) {
                    // A stale step may be rejected by mongod (another cluster
                    // changed the config first); it must never do harm.
                    let _rejected = world.execute(cluster, &step);
                }
            }
            Op::Event(ref event) => world.apply_event(event),
        }
        world.check_invariants().map_err(context)?;
    }
    Ok(counts)
}

/// Plans round-robin with the set settling between rounds, until every
/// cluster reports `InSync`; `Err` if that takes more than `rounds`.
fn converge(world: &mut World, rounds: usize) -> Result<usize, String> {
    for round in 0..rounds {
        let mut all_in_sync = true;
        for cluster in 0..world.clusters.len() {
            let (_, step) = plan_checked(world, cluster)?;
            if step != Step::InSync {
                all_in_sync = false;
            }
            world
                .execute(cluster, &step)
                .map_err(|why| format!("{step:?} rejected: {why}"))?;
            world.check_invariants()?;
            world.settle();
            world.check_invariants()?;
        }
        if all_in_sync {
            return Ok(round);
        }
        world.apply_event(&Event::StepDownPeriodEnds);
        world.settle();
    }
    let steps: Vec<String> = (0..world.clusters.len())
        .map(|c| plan(&world.input_for(c)).to_string())
        .collect();
    Err(format!(
        "no convergence in {rounds} rounds; last steps: {steps:?}"
    ))
}

/// How many of `members` vote once a run converged from scratch: with fewer
/// than three clusters min(7, n); from three on the largest total of at most
/// seven in which no cluster holds more than half — a cluster contributes at
/// most half of the total and at most its own members.
fn balanced_voter_count(members: &[MemberAddress]) -> usize {
    let mut per_cluster: BTreeMap<&str, usize> = BTreeMap::new();
    for m in members {
        *per_cluster.entry(m.host.as_str()).or_default() += 1;
    }
    let most = members.len().min(7);
    if per_cluster.len() < 3 {
        return most;
    }
    (0..=most)
        .rev()
        .find(|&total| {
            let room: usize = per_cluster.values().map(|&n| n.min(total / 2)).sum();
            room >= total
        })
        .unwrap_or(0)
}

/// Fault-free convergence: the config holds exactly the desired members. When
/// no cluster holds a majority of the votes (or fewer than three clusters
/// exist) the voters number [`balanced_voter_count`]. A cluster can still hold
/// a majority after removals (votes are never taken away); then no non-voter
/// may be left that could take a vote: seven vote, or the vote would give its
/// own cluster a majority.
fn check_converged(world: &World) -> Result<(), String> {
    let set = world.set.as_ref().ok_or("no replica set")?;
    let mut hosts: Vec<MemberAddress> = set.config.members.iter().map(|m| m.host.clone()).collect();
    hosts.sort();
    let desired = world.desired_addresses();
    ensure(hosts == desired, || {
        format!("config {hosts:?}, desired {desired:?}")
    })?;
    let voters = set.config.voting_member_count();
    let clusters: BTreeSet<&str> = desired.iter().map(|a| a.host.as_str()).collect();
    match majority_cluster(&set.config) {
        Some(vip) if clusters.len() >= 3 => {
            let votes_of = |vip: &str| {
                set.config
                    .members
                    .iter()
                    .filter(|m| m.votes > 0 && m.host.host == vip)
                    .count()
            };
            let promotable = set.config.members.iter().find(|m| {
                m.votes == 0 && voters < 7 && (votes_of(&m.host.host) + 1) * 2 <= voters + 1
            });
            ensure(promotable.is_none(), || {
                format!("{promotable:?} could vote; cluster {vip} holds a majority")
            })?;
        }
        _ => {
            let expected = balanced_voter_count(&desired);
            ensure(voters == expected, || {
                format!(
                    "{voters} voters for {} members, {expected} expected",
                    desired.len()
                )
            })?;
        }
    }
    let leftover = world
        .nodes
        .iter()
        .find(|(a, n)| n.stateful_set && !desired.contains(a));
    ensure(leftover.is_none(), || {
        format!("StatefulSet left behind: {leftover:?}")
    })
}

/// Enough rounds for up to 15 members to join or leave one at a time.
const ROUNDS: usize = 60;

fn sequence_config() -> ProptestConfig {
    ProptestConfig {
        cases: 96,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(sequence_config())]

    #[test]
    fn invariants_hold_after_every_step_of_random_runs(
        desired in arb_desired(),
        arbiter in any::<bool>(),
        pvc_policy in arb_pvc_policy(),
        ops in prop::collection::vec(arb_op(), 1..120),
    ) {
        let mut world = World::new(&desired, arbiter, pvc_policy);
        let outcome = run(&mut world, &ops);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
    }

    #[test]
    fn fault_free_runs_converge_to_in_sync_with_the_desired_members(
        desired in arb_desired(),
        arbiter in any::<bool>(),
        pvc_policy in arb_pvc_policy(),
        changes in prop::collection::vec(prop::collection::vec(0u32..6, CLUSTERS), 0..4),
    ) {
        let mut world = World::new(&desired, arbiter, pvc_policy);
        let outcome = converge(&mut world, ROUNDS);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
        prop_assert_eq!(check_converged(&world), Ok(()));
        for counts in changes.iter().filter(|c| c.iter().any(|&n| n > 0)) {
            for (cluster, &desired) in counts.iter().enumerate() {
                world.apply_event(&Event::SetDesired { cluster, desired });
            }
            let outcome = converge(&mut world, ROUNDS);
            prop_assert!(outcome.is_ok(), "{:?}", outcome);
            prop_assert_eq!(check_converged(&world), Ok(()));
        }
    }

    #[test]
    fn runs_with_faults_converge_once_the_faults_heal(
        desired in arb_desired(),
        arbiter in any::<bool>(),
        pvc_policy in arb_pvc_policy(),
        ops in prop::collection::vec(arb_op(), 1..80),
    ) {
        let mut world = World::new(&desired, arbiter, pvc_policy);
        let outcome = run(&mut world, &ops);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
        if world.set.is_none() {
            // Only the rsInit cluster initiates, and only with members of its own.
            if let Some(cluster) = world.clusters.iter().position(|c| c.rs_init && c.desired == 0) {
                world.apply_event(&Event::SetDesired { cluster, desired: 1 });
            }
        } else if world.clusters.iter().all(|c| c.desired == 0) {
            world.apply_event(&Event::SetDesired { cluster: 0, desired: 1 });
        }
        // An arbiter wanted once seven members vote is refused for good
        // (NoVoteForArbiter): the control plane takes it back.
        for cluster in 0..CLUSTERS {
            let address = world.address(cluster, MemberSlot::Arbiter);
            let in_config = world.set.as_ref().is_some_and(|s| s.config.contains(&address));
            if world.clusters[cluster].arbiter && !in_config {
                world.apply_event(&Event::SetArbiter { cluster, wanted: false });
            }
        }
        for cluster in 0..CLUSTERS {
            let slots = (0..6).map(MemberSlot::Data).chain([MemberSlot::Arbiter]);
            for slot in slots {
                world.apply_event(&Event::PodUp { cluster, slot });
            }
        }
        let outcome = converge(&mut world, ROUNDS);
        prop_assert!(outcome.is_ok(), "{:?}", outcome);
        prop_assert_eq!(check_converged(&world), Ok(()));
    }
}

#[test]
fn a_three_cluster_federation_initiates_grows_and_shrinks_to_in_sync() {
    let mut world = World::new(&[3, 2, 2], true, PvcPolicy::Retain);
    assert_eq!(converge(&mut world, ROUNDS).map(|_| ()), Ok(()));
    assert_eq!(check_converged(&world), Ok(()));
    assert_eq!(world.initiations, 1);

    // 7 of 8 vote (the arbiter's cluster 3, the others 2 each). Grow to 9
    // members and the arbiter: the newcomers join without a vote.
    world.apply_event(&Event::SetDesired {
        cluster: 1,
        desired: 4,
    });
    world.apply_event(&Event::SetDesired {
        cluster: 2,
        desired: 2,
    });
    assert_eq!(converge(&mut world, ROUNDS).map(|_| ()), Ok(()));
    assert_eq!(check_converged(&world), Ok(()));

    // Shrink the initiating cluster to nothing: its primary steps down first.
    world.apply_event(&Event::SetDesired {
        cluster: 0,
        desired: 0,
    });
    assert_eq!(converge(&mut world, ROUNDS).map(|_| ()), Ok(()));
    assert_eq!(check_converged(&world), Ok(()));
}

/// Guards the generators: random single inputs must reach every kind of step,
/// or the invariant tests above would prove little.
#[test]
fn random_inputs_reach_every_kind_of_step() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = arb_input();
    let mut seen: BTreeMap<&'static str, usize> = BTreeMap::new();
    for _ in 0..3000 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        *seen.entry(plan(&tree.current()).reason()).or_default() += 1;
    }
    eprintln!("{seen:?}");
    for kind in [
        "Initiate",
        "AddMember",
        "PromoteMember",
        "RemoveMember",
        "UpdateSettings",
        "StepDown",
        "DeleteStatefulSet",
        "InSync",
        "WouldBreakVotingMajority",
        "MemberHoldsAnotherReplicaSet",
        "NoPrimary",
        "WaitingForNewPrimary",
    ] {
        assert!(seen.contains_key(kind), "no {kind} in {seen:?}");
    }
}

/// Guards the sequence generator: random runs must reach every kind of
/// membership step, or the sequence properties would prove little.
#[test]
fn random_runs_reach_every_kind_of_membership_step() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = (
        arb_desired(),
        any::<bool>(),
        arb_pvc_policy(),
        prop::collection::vec(arb_op(), 1..120),
    );
    let mut seen = StepCounts::new();
    for _ in 0..200 {
        let Ok(tree) = strategy.new_tree(&mut runner) else {
            continue;
        };
        let (desired, arbiter, pvc_policy, ops) = tree.current();
        let mut world = World::new(&desired, arbiter, pvc_policy);
        for (kind, count) in run(&mut world, &ops).unwrap_or_default() {
            *seen.entry(kind).or_default() += count;
        }
    }
    eprintln!("{seen:?}");
    for kind in [
        "Initiate",
        "AddMember",
        "PromoteMember",
        "RemoveMember",
        "StepDown",
        "DeleteStatefulSet",
        "WaitingForNewPrimary",
        "InSync",
    ] {
        assert!(seen.contains_key(kind), "no {kind} in {seen:?}");
    }
}
