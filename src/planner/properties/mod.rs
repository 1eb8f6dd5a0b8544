//! Property tests of the planner, one per invariant of
//! `docs/replica-set-rules.md` (the test `invariant_<name>` checks the
//! invariant `<name>`, and the `INVARIANTS` table names each checker the same
//! way), in two kinds:
//!
//! - **single inputs**: random configs, health, probes and desired counts; each
//!   returned step is checked against the invariant;
//! - **sequences**: the [`world`](super::world) model of several clusters, where
//!   every cluster's planner acts in turn, interleaved with failures, elections,
//!   commits and spec changes; every invariant is checked after every step, and
//!   fault-free runs must converge to `InSync` everywhere.
//!
//! The checkers judge with their own small helpers and with mongod's rules as
//! [`world`](super::world) writes them again, never with the planner's or
//! `replset`'s helpers; the tests at the end show that each can reject a step.

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;

use super::tests::{addr, member_status, port_of, SET, SET_ID};
use super::world::{
    config_rule_breaks, electable, lists, reconfig_rule_breaks, voting_hosts, voting_ids, Event,
    World,
};
use super::*;
use crate::plan_input::entries_to_record;

const VIPS: [&str; 3] = ["10.0.0.1", "10.0.0.2", "10.0.0.3"];

// ------------------------------------------------------------- the invariants

/// An invariant: `Err` says how `step` breaks it for `input`.
type Invariant = fn(&PlanInput, &Step) -> Result<(), String>;

/// Every invariant of `docs/replica-set-rules.md`, by its name there.
const INVARIANTS: [(&str, Invariant); 13] = [
    (
        "one-voting-change-per-reconfig",
        one_voting_change_per_reconfig,
    ),
    (
        "reconfig-accepted-without-force",
        reconfig_accepted_without_force,
    ),
    ("never-initiate-twice", never_initiate_twice),
    (
        "keep-a-healthy-voting-majority",
        keep_a_healthy_voting_majority,
    ),
    (
        "step-down-before-removing-the-primary",
        step_down_before_removing_the_primary,
    ),
    ("config-within-mongodb-limits", config_within_mongodb_limits),
    (
        "no-cluster-gains-a-vote-majority",
        no_cluster_gains_a_vote_majority,
    ),
    (
        "never-delete-a-member-in-the-config",
        never_delete_a_member_in_the_config,
    ),
    (
        "never-add-a-member-of-another-set",
        never_add_a_member_of_another_set,
    ),
    ("only-local-members-change", only_local_members_change),
    ("one-entry-per-member", one_entry_per_member),
    (
        "settings-written-by-the-rs-init-cluster-only",
        settings_written_by_the_rs_init_cluster_only,
    ),
    ("same-input-same-step", same_input_same_step),
];

// The checkers judge from the raw fields of the input and the step, with the
// small helpers below and mongod's rules as `world` writes them again; none
// calls a helper of the planner or of `replset` (`is_local`, `is_wanted`,
// `facts`, `reconfig_problems`, `voting_changes`, `validate`, `majority` …),
// so a bug in one of those fails a property instead of hiding in it.

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

/// Whether `host` is in this cluster: its host part is the VIP (an IPv6 VIP
/// may be written in brackets).
fn host_is_local(input: &PlanInput, host: &MemberAddress) -> bool {
    let vip = input
        .local_vip
        .trim_start_matches('[')
        .trim_end_matches(']');
    host.host == vip
}

/// Whether the spec wants `slot`: data members `0..spec.members`, the arbiter
/// when `spec.arbiter`.
fn slot_wanted(input: &PlanInput, slot: MemberSlot) -> bool {
    match slot {
        MemberSlot::Data(index) => index < input.desired_members,
        MemberSlot::Arbiter => input.arbiter_wanted,
    }
}

/// The local members at `host`.
fn local_at<'a>(
    input: &'a PlanInput,
    host: &'a MemberAddress,
) -> impl Iterator<Item = &'a LocalMemberFacts> + 'a {
    input
        .local_members
        .iter()
        .filter(move |m| m.address.as_ref() == Some(host))
}

/// Whether the config entry `entry` is local member `member`: at its
/// address, recorded on its StatefulSet, or named by its answer's `me`.
fn stands_for(member: &LocalMemberFacts, entry: &ConfigMember) -> bool {
    member.address.as_ref() == Some(&entry.host)
        || member
            .recorded
            .as_ref()
            .is_some_and(|r| r.id == entry.id && r.host == entry.host)
        || member
            .probe
            .as_ref()
            .is_some_and(|p| p.me.as_ref() == Some(&entry.host))
}

/// Whether `host` is a local member this cluster no longer wants (by the
/// observed config's entry at `host`, or by its address).
fn leaving(input: &PlanInput, host: &MemberAddress) -> bool {
    let entry = match &input.observed {
        Observed::Configured(set) => set.config.members.iter().find(|m| &m.host == host),
        Observed::Unreachable => None,
    };
    input
        .local_members
        .iter()
        .filter(|m| !slot_wanted(input, m.slot))
        .any(|m| match entry {
            Some(entry) => stands_for(m, entry),
            None => m.address.as_ref() == Some(host),
        })
}

/// Every answer a member gave when asked directly, local and remote.
fn answers(input: &PlanInput) -> BTreeMap<&MemberAddress, &MemberProbe> {
    let mut answers: BTreeMap<&MemberAddress, &MemberProbe> = input.remote_probes.iter().collect();
    for m in &input.local_members {
        if let (Some(address), Some(probe)) = (&m.address, &m.probe) {
            answers.insert(address, probe);
        }
    }
    answers
}

/// Whether a member in this state takes part in elections.
/// mongod counts a voter towards a healthy majority only when it is up and
/// PRIMARY, SECONDARY or ARBITER (not while syncing, recovering or rolling back).
fn state_counts_towards_majority(state: MemberState) -> bool {
    use MemberState::*;
    match state {
        Primary | Secondary | Arbiter => true,
        Recovering | Startup2 | Rollback | Startup | Unknown | Down | Removed => false,
    }
}

fn votes_of(config: &ReplicaSetConfig) -> usize {
    config.members.iter().filter(|m| m.votes > 0).count()
}

/// The config a step sends, if any.
fn config_sent(step: &Step) -> Option<&ReplicaSetConfig> {
    match step {
        Step::Initiate { config, .. } | Step::Reconfig { config, .. } => Some(config),
        _ => None,
    }
}

/// `one-voting-change-per-reconfig`: at most one member (by `_id`, as mongod
/// counts) gains or loses a vote, and only from a committed config with a
/// primary and no `newlyAdded` member.
fn one_voting_change_per_reconfig(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    let before = voting_ids(&set.config);
    let after = voting_ids(config);
    let changed: Vec<_> = before.symmetric_difference(&after).collect();
    ensure(changed.len() <= 1, || {
        format!("{} voting changes: {changed:?}", changed.len())
    })?;
    ensure(set.primary.is_some(), || {
        "reconfig without a primary".to_owned()
    })?;
    ensure(set.config_committed, || "reconfig before commit".to_owned())?;
    ensure(!set.config.members.iter().any(|m| m.newly_added), || {
        "reconfig while a member is newlyAdded".to_owned()
    })
}

/// `reconfig-accepted-without-force`: a step cannot say `force` (the type has
/// no such field); what it sends is the observed config at version + 1, sent
/// with a primary and a committed config, that passes mongod's non-forced
/// reconfig rules, keeping the primary in the set and electable.
fn reconfig_accepted_without_force(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    ensure(config.version == set.config.version + 1, || {
        format!("version {} after {}", config.version, set.config.version)
    })?;
    ensure(set.config_committed, || {
        "308: the observed config is not committed".to_owned()
    })?;
    let primary = set.primary.as_ref().ok_or("10107: no primary")?;
    let kept = config.members.iter().find(|m| &m.host == primary);
    ensure(kept.is_some_and(electable), || {
        format!(
            "primary {primary} would not be electable in {:?}",
            config.members
        )
    })?;
    let breaks = reconfig_rule_breaks(&set.config, config);
    ensure(breaks.is_empty(), || {
        format!("mongod would reject it without force: {breaks:?}")
    })
}

/// `never-initiate-twice`: initiate only in the rsInit cluster, with no
/// recorded replicaSetId and no observed config, when no member that answered
/// holds a config; it lists only members that answered without one, at least
/// one of them local.
fn never_initiate_twice(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Initiate { config, on } = step else {
        return Ok(());
    };
    ensure(host_is_local(input, on), || {
        format!("replSetInitiate sent to {on}, not a member of this cluster")
    })?;
    ensure(
        config.members.iter().any(|m| &m.host == on && electable(m)),
        || format!("replSetInitiate sent to {on}, which cannot be elected: mongod answers 93"),
    )?;
    ensure(input.rs_init, || {
        "initiate outside the rsInit cluster".to_owned()
    })?;
    let silent = input.hostconf.members.iter().find(|m| {
        !host_is_local(input, &m.address)
            && !input.remote_probes.keys().any(|a| a.host == m.address.host)
    });
    ensure(silent.is_none(), || {
        format!(
            "initiate while cluster {:?} has not answered",
            silent.map(|m| &m.address.host)
        )
    })?;
    ensure(input.known_replica_set_id.is_none(), || {
        "initiate with a recorded replicaSetId".to_owned()
    })?;
    ensure(input.observed == Observed::Unreachable, || {
        "initiate while a config is observed".to_owned()
    })?;
    let answers = answers(input);
    ensure(answers.values().all(|p| !p.has_config), || {
        "initiate while a member has a config".to_owned()
    })?;
    for m in &config.members {
        ensure(answers.get(&m.host).is_some_and(|p| !p.has_config), || {
            format!("{} is listed without answering", m.host)
        })?;
    }
    ensure(
        config.members.iter().any(|m| host_is_local(input, &m.host)),
        || "no local member to run replSetInitiate on".to_owned(),
    )
}

/// `keep-a-healthy-voting-majority`: one member (by `_id`) added or removed at a time,
/// and the voters of the config sent that are healthy (observed healthy in a
/// voting state, or joining after answering just now) are a majority of them.
fn keep_a_healthy_voting_majority(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    let ids = |c: &ReplicaSetConfig| -> BTreeSet<i64> { c.members.iter().map(|m| m.id).collect() };
    let changed = ids(&set.config).symmetric_difference(&ids(config)).count();
    ensure(changed <= 1, || {
        format!("{changed} members added or removed at once")
    })?;
    let before: BTreeSet<&MemberAddress> = set.config.members.iter().map(|m| &m.host).collect();
    let healthy = |host: &MemberAddress| {
        if before.contains(host) {
            set.members
                .get(host)
                .is_some_and(|s| s.healthy && state_counts_towards_majority(s.state))
        } else {
            local_at(input, host).any(|m| m.pod_running && m.probe.is_some())
        }
    };
    let voters = votes_of(config);
    let healthy_voters = config
        .members
        .iter()
        .filter(|m| m.votes > 0 && healthy(&m.host))
        .count();
    ensure(2 * healthy_voters > voters, || {
        format!("{healthy_voters} of {voters} voters healthy, no majority")
    })
}

/// `step-down-before-removing-the-primary`: no reconfig drops the observed
/// primary; a step-down goes to the observed primary, a local member that is
/// leaving, once a healthy electable SECONDARY that stays can take over.
fn step_down_before_removing_the_primary(input: &PlanInput, step: &Step) -> Result<(), String> {
    match step {
        Step::Reconfig { config, .. } => {
            let set = observed_set(input)?;
            let primary = set.primary.as_ref().ok_or("reconfig without a primary")?;
            ensure(lists(config, primary), || {
                format!("removes primary {primary}")
            })
        }
        Step::StepDown { primary, .. } => {
            let set = observed_set(input)?;
            ensure(set.primary.as_ref() == Some(primary), || {
                format!("steps down {primary}, which is not the primary")
            })?;
            ensure(host_is_local(input, primary), || {
                "steps down a remote member".to_owned()
            })?;
            ensure(leaving(input, primary), || {
                format!("steps down {primary}, which is not leaving")
            })?;
            let listed = |h: &MemberAddress| input.hostconf.members.iter().any(|m| &m.address == h);
            let successor = set.config.members.iter().find(|m| {
                &m.host != primary
                    && electable(m)
                    && !m.newly_added
                    && listed(&m.host)
                    && !leaving(input, &m.host)
                    && set
                        .members
                        .get(&m.host)
                        .is_some_and(|s| s.healthy && s.state == MemberState::Secondary)
            });
            ensure(successor.is_some(), || {
                format!("steps down {primary} with no healthy electable secondary that stays")
            })
        }
        _ => Ok(()),
    }
}

/// `config-within-mongodb-limits`: every config sent passes MongoDB's config
/// rules (≤ 7 voters, ≤ 50 members, priority 0 for non-voters, hidden members
/// and arbiters …); an initiate's has version 1 and the set's name.
fn config_within_mongodb_limits(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Some(config) = config_sent(step) else {
        return Ok(());
    };
    if let Step::Initiate { .. } = step {
        ensure(config.version == 1, || {
            format!("initiate with version {}", config.version)
        })?;
        ensure(config.set_name == input.set_name, || {
            format!("initiate of set {}", config.set_name)
        })?;
    }
    let breaks = config_rule_breaks(config);
    ensure(breaks.is_empty(), || format!("invalid config: {breaks:?}"))
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

/// `no-cluster-gains-a-vote-majority`: with three clusters or more in
/// hostconf, a step that gives a vote (initiate, or a reconfig after which
/// some member, known by its `_id`, votes that did not) leaves no cluster
/// holding a majority of the votes — unless one already held it in the
/// observed config: votes are taken away only to be given to another cluster,
/// and may be diluted. A readdressed entry keeps its `_id` and its vote: it
/// gives none, even when its new host is another VIP.
fn no_cluster_gains_a_vote_majority(input: &PlanInput, step: &Step) -> Result<(), String> {
    if clusters_in_hostconf(input) < 3 {
        return Ok(());
    }
    let config = match step {
        Step::Initiate { config, .. } => config,
        Step::Reconfig { config, .. } => {
            let old = &observed_set(input)?.config;
            if voting_ids(config).is_subset(&voting_ids(old)) || majority_cluster(old).is_some() {
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
            voting_hosts(config)
        )
    })
}

/// `never-delete-a-member-in-the-config`: a StatefulSet (and PVC) is deleted
/// only for a slot the spec no longer wants, whose address is known and
/// absent from a committed config read with a primary.
fn never_delete_a_member_in_the_config(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::DeleteStatefulSet { slot, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    ensure(set.primary.is_some() && set.config_committed, || {
        "deletes without a primary's committed config".to_owned()
    })?;
    ensure(!slot_wanted(input, *slot), || {
        format!("deletes wanted {slot}")
    })?;
    let mut addresses = input
        .local_members
        .iter()
        .filter(|m| m.slot == *slot)
        .map(|m| m.address.as_ref());
    let address = addresses
        .next()
        .flatten()
        .ok_or("deletes a member whose address is unknown")?;
    ensure(!lists(&set.config, address), || {
        format!("deletes {address}, still in the config")
    })?;
    let recorded = input
        .local_members
        .iter()
        .filter(|m| m.slot == *slot)
        .find_map(|m| m.recorded.as_ref());
    ensure(
        !recorded.is_some_and(|r| holds_entry(&set.config, r)),
        || format!("deletes {slot}, still in the config as {recorded:?}"),
    )
}

/// Whether `config` holds the recorded entry: same `_id` and host.
fn holds_entry(config: &ReplicaSetConfig, recorded: &RecordedEntry) -> bool {
    config
        .members
        .iter()
        .any(|m| m.id == recorded.id && m.host == recorded.host)
}

/// `one-entry-per-member`: a config sent holds at most one entry for each
/// local member — the one at its address, the one recorded as it, or the one
/// it says it is.
fn one_entry_per_member(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Some(config) = config_sent(step) else {
        return Ok(());
    };
    for member in &input.local_members {
        let entries: Vec<i64> = config
            .members
            .iter()
            .filter(|e| stands_for(member, e))
            .map(|e| e.id)
            .collect();
        ensure(entries.len() <= 1, || {
            format!("{} has {} entries: {entries:?}", member.slot, entries.len())
        })?;
    }
    Ok(())
}

/// `never-add-a-member-of-another-set`: a member joins only when it is a local
/// member whose pod runs and that answered with no config, or with this set's
/// name and replicaSetId.
fn never_add_a_member_of_another_set(input: &PlanInput, step: &Step) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    let set = observed_set(input)?;
    let set_id = set.config.settings.replica_set_id.as_ref();
    for joined in config
        .members
        .iter()
        .filter(|m| !lists(&set.config, &m.host))
    {
        let probe = local_at(input, &joined.host)
            .filter(|m| m.pod_running)
            .find_map(|m| m.probe.as_ref())
            .ok_or_else(|| format!("adds {} without its answer", joined.host))?;
        ensure(
            probe.set_name.as_ref().is_none_or(|n| n == &input.set_name),
            || format!("adds {} of another set name", joined.host),
        )?;
        ensure(
            !probe.has_config
                || (probe.replica_set_id.is_some() && probe.replica_set_id.as_ref() == set_id),
            || format!("adds {} holding another replica set", joined.host),
        )?;
    }
    Ok(())
}

/// `settings-written-by-the-rs-init-cluster-only`: a reconfig planned outside
/// the rsInit cluster sends the observed settings unchanged.
fn settings_written_by_the_rs_init_cluster_only(
    input: &PlanInput,
    step: &Step,
) -> Result<(), String> {
    let Step::Reconfig { config, .. } = step else {
        return Ok(());
    };
    if input.rs_init {
        return Ok(());
    }
    let old = &observed_set(input)?.config.settings;
    let new = &config.settings;
    let same = (
        old.election_timeout_millis,
        old.heartbeat_interval_millis,
        old.catch_up_timeout_millis,
        old.chaining_allowed,
    ) == (
        new.election_timeout_millis,
        new.heartbeat_interval_millis,
        new.catch_up_timeout_millis,
        new.chaining_allowed,
    );
    ensure(same, || {
        format!("a cluster other than rsInit changed the settings: {old:?} → {new:?}")
    })
}

/// `only-local-members-change`: a reconfig leaves every remote member as
/// observed (an entry that stands for a local member is local, whatever its
/// host), and a step-down targets a local member.
fn only_local_members_change(input: &PlanInput, step: &Step) -> Result<(), String> {
    match step {
        Step::Reconfig { config, .. } => {
            let set = observed_set(input)?;
            let recorded_as_local =
                |m: &ConfigMember| input.local_members.iter().any(|l| stands_for(l, m));
            let remote = |c: &ReplicaSetConfig| -> Vec<ConfigMember> {
                let mut members: Vec<ConfigMember> = c
                    .members
                    .iter()
                    .filter(|m| !host_is_local(input, &m.host) && !recorded_as_local(m))
                    .cloned()
                    .collect();
                members.sort_by(|a, b| a.host.cmp(&b.host));
                members
            };
            ensure(remote(&set.config) == remote(config), || {
                "a remote member changed".to_owned()
            })
        }
        Step::StepDown { primary, .. } => ensure(host_is_local(input, primary), || {
            format!("steps down remote {primary}")
        }),
        _ => Ok(()),
    }
}

/// `same-input-same-step`: planning again on the same input gives the same
/// step.
fn same_input_same_step(input: &PlanInput, step: &Step) -> Result<(), String> {
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
            me: None,
        };
        match self {
            Answer::Nothing => None,
            Answer::NoConfig => Some(MemberProbe {
                has_config: false,
                replica_set_id: None,
                set_name: None,
                state: None,
                me: None,
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
type FactsSpec = (bool, bool, bool, bool, u8, u8);

fn arb_facts() -> impl Strategy<Value = FactsSpec> {
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
enum AddressRoll {
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
            step_down_held: None,
            dropped_members: DroppedMembers::Read(Vec::new()),
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
    fn invariant_reconfig_accepted_without_force(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(reconfig_accepted_without_force(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_initiate_twice(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_initiate_twice(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_keep_a_healthy_voting_majority(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(keep_a_healthy_voting_majority(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_step_down_before_removing_the_primary(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(step_down_before_removing_the_primary(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_config_within_mongodb_limits(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(config_within_mongodb_limits(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_delete_a_member_in_the_config(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_delete_a_member_in_the_config(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_never_add_a_member_of_another_set(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(never_add_a_member_of_another_set(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_only_local_members_change(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(only_local_members_change(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_one_entry_per_member(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(one_entry_per_member(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_settings_written_by_the_rs_init_cluster_only(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(settings_written_by_the_rs_init_cluster_only(&input, &step), Ok(()));
    }

    #[test]
    fn invariant_same_input_same_step(input in arb_input()) {
        let step = plan(&input);
        prop_assert_eq!(same_input_same_step(&input, &step), Ok(()));
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
    fn invariant_no_cluster_gains_a_vote_majority(input in arb_input()) {
        prop_assume!(clusters_in_hostconf(&input) >= 3);
        let step = plan(&input);
        prop_assert_eq!(no_cluster_gains_a_vote_majority(&input, &step), Ok(()));
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
        1 => (cluster.clone(), prop::bool::weighted(0.3)).prop_map(|(cluster, wanted)| Op::Event(Event::SetArbiter { cluster, wanted })),
        1 => (cluster.clone(), prop::sample::select(vec![10_000i64, 20_000])).prop_map(|(cluster, millis)| Op::Event(Event::SetElectionTimeout { cluster, millis })),
        1 => (cluster.clone(), arb_slot(), 32_000u16..32_004).prop_map(|(cluster, slot, port)| Op::Event(Event::MoveNodePort { cluster, slot, port })),
        1 => cluster.clone().prop_map(|cluster| Op::Event(Event::MoveVip { cluster })),
        1 => cluster.prop_map(|cluster| Op::Event(Event::Recreate { cluster })),
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
    if let Step::DeleteStatefulSet { slot, .. } = step {
        let entry = world.set.as_ref().and_then(|s| {
            s.owners
                .iter()
                .find(|(_, owner)| **owner == (cluster, slot))
        });
        ensure(entry.is_none(), || {
            format!("deletes {slot}, which is in the live config as _id {entry:?}")
        })?;
    }
    world.record_entries(cluster, entries_to_record(&input));
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
/// a majority after removals when no member of another cluster could take a
/// vote; then no non-voter may be left that could take one: seven vote, or the
/// vote would give its own cluster a majority.
fn check_converged(world: &World) -> Result<(), String> {
    let set = world.set.as_ref().ok_or("no replica set")?;
    let mut hosts: Vec<MemberAddress> = set.config.members.iter().map(|m| m.host.clone()).collect();
    hosts.sort();
    let desired = world.desired_addresses();
    ensure(hosts == desired, || {
        format!("config {hosts:?}, desired {desired:?}")
    })?;
    let voters = votes_of(&set.config);
    let clusters: BTreeSet<&str> = desired.iter().map(|a| a.host.as_str()).collect();
    match majority_cluster(&set.config) {
        Some(vip) if clusters.len() >= 3 => {
            let votes_in = |vip: &str| {
                set.config
                    .members
                    .iter()
                    .filter(|m| m.votes > 0 && m.host.host == vip)
                    .count()
            };
            let promotable = set.config.members.iter().find(|m| {
                m.votes == 0 && voters < 7 && (votes_in(&m.host.host) + 1) * 2 <= voters + 1
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
    // The set-wide settings are the rsInit cluster's, whatever the others ask.
    let rs_init = world
        .clusters
        .iter()
        .find(|c| c.rs_init)
        .ok_or("no rsInit cluster")?;
    let timeout = set.config.settings.election_timeout_millis;
    ensure(timeout == rs_init.election_timeout_millis, || {
        format!(
            "electionTimeoutMillis {timeout}, the rsInit cluster asks {}",
            rs_init.election_timeout_millis
        )
    })?;
    let leftover = world
        .nodes
        .iter()
        .find(|((c, slot), n)| n.stateful_set && !desired.contains(&world.address(*c, *slot)));
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
            let in_config = world.set.as_ref().is_some_and(|s| lists(&s.config, &address));
            if world.clusters[cluster].arbiter && !in_config {
                world.apply_event(&Event::SetArbiter { cluster, wanted: false });
            }
        }
        // Addresses that moved under a majority of the voters at once leave
        // the set without a primary: only a forced reconfig (an SRE's
        // disaster recovery, never the operator's) or moving them back helps.
        // So does a member added at an address that moved between the plan
        // and the reconfig: it stays `newlyAdded` where nobody answers, and
        // the planner waits on it (`docs/replica-set-rules.md`, *What is not
        // enforced*). The control plane moves them back; other moves are the
        // planner's to follow.
        if !world.voters_reachable() || world.newly_added_unreachable() {
            world.restore_addresses();
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
        "ReaddressMember",
        "UnaccountedLocalMember",
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
        "ReaddressMember",
        "InSync",
    ] {
        assert!(seen.contains_key(kind), "no {kind} in {seen:?}");
    }
}

// ---------------------------------------------- the checkers can say no

/// Each checker rejects a step that breaks its invariant: a checker that
/// accepts everything would let every property above pass.
mod checkers_reject_bad_steps {
    use super::*;

    fn local(index: u32) -> MemberAddress {
        addr(VIPS[0], port_of(MemberSlot::Data(index)))
    }

    fn remote(cluster: usize) -> MemberAddress {
        addr(VIPS[cluster], port_of(MemberSlot::Data(0)))
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

    fn this_set() -> MemberProbe {
        MemberProbe {
            has_config: true,
            replica_set_id: Some(SET_ID.to_owned()),
            set_name: Some(SET.to_owned()),
            state: Some(MemberState::Secondary),
            me: None,
        }
    }

    fn empty() -> MemberProbe {
        MemberProbe {
            has_config: false,
            replica_set_id: None,
            set_name: None,
            state: None,
            me: None,
        }
    }

    fn running(index: u32, probe: MemberProbe) -> LocalMemberFacts {
        LocalMemberFacts {
            slot: MemberSlot::Data(index),
            address: Some(local(index)),
            stateful_set_exists: true,
            pod_running: true,
            probe: Some(probe),
            recorded: None,
        }
    }

    /// Three clusters; the config holds local members 0 (primary) and 1 and
    /// one member of each other cluster, all voting and healthy. This cluster
    /// wants a third member, which runs and answered empty: the planner adds
    /// it without a vote (with one, this cluster would hold 3 of 5).
    fn fixture() -> PlanInput {
        let hosts = [local(0), local(1), remote(1), remote(2)];
        let config = ReplicaSetConfig {
            set_name: SET.to_owned(),
            version: 7,
            term: Some(3),
            members: (0..)
                .zip(hosts.iter().cloned())
                .map(|(id, h)| voter(id, h))
                .collect(),
            settings: ConfigSettings::from_desired(
                &ReplicaSetSettings::default(),
                Some(SET_ID.to_owned()),
            ),
        };
        let members = hosts
            .iter()
            .map(|h| {
                let state = if *h == local(0) {
                    MemberState::Primary
                } else {
                    MemberState::Secondary
                };
                (h.clone(), member_status(state, true, Some(0)))
            })
            .collect();
        let listed = hosts.iter().cloned().chain([local(2)]);
        PlanInput {
            local_vip: VIPS[0].to_owned(),
            set_name: SET.to_owned(),
            desired_members: 3,
            arbiter_wanted: false,
            rs_init: true,
            settings: ReplicaSetSettings::default(),
            pvc_policy: PvcPolicy::Retain,
            known_replica_set_id: Some(SET_ID.to_owned()),
            hostconf: HostConf {
                members: listed
                    .map(|address| HostConfMember {
                        address,
                        arbiter: false,
                        votes: None,
                        priority: None,
                        hidden: false,
                        tags: BTreeMap::new(),
                    })
                    .collect(),
            },
            local_members: vec![
                running(0, this_set()),
                running(1, this_set()),
                running(2, empty()),
            ],
            remote_probes: BTreeMap::new(),
            observed: Observed::Configured(ObservedSet {
                config,
                primary: Some(local(0)),
                members,
                config_committed: true,
            }),
            stepped_down_recently: None,
            step_down_held: None,
            dropped_members: DroppedMembers::Read(Vec::new()),
        }
    }

    fn set_of(input: &mut PlanInput) -> &mut ObservedSet {
        match &mut input.observed {
            Observed::Configured(set) => set,
            Observed::Unreachable => unreachable!("the fixture has a set"),
        }
    }

    /// The observed config at the next version, changed by `edit`.
    fn reconfig(input: &PlanInput, edit: impl FnOnce(&mut ReplicaSetConfig)) -> Step {
        let Observed::Configured(set) = &input.observed else {
            unreachable!("the fixture has a set");
        };
        let mut config = set.config.clone();
        config.version += 1;
        edit(&mut config);
        Step::Reconfig {
            config,
            change: Change::UpdateSettings,
        }
    }

    fn add_local_2_voting(config: &mut ReplicaSetConfig) {
        config.members.push(voter(4, local(2)));
    }

    fn add_local_2_passive(config: &mut ReplicaSetConfig) {
        config.members.push(ConfigMember {
            votes: 0,
            priority: 0.0,
            ..voter(4, local(2))
        });
    }

    fn rejects(invariant: Invariant, input: &PlanInput, step: &Step) {
        assert!(invariant(input, step).is_err(), "accepted {step:?}");
    }

    #[test]
    fn the_fixture_plans_a_step_every_checker_accepts() {
        let input = fixture();
        let step = plan(&input);
        let Step::Reconfig { config, change } = &step else {
            panic!("{step:?}");
        };
        assert_eq!(change, &Change::AddMember { host: local(2) });
        assert_eq!(config.members.last().map(|m| m.votes), Some(0));
        assert_eq!(check_all(&input, &step), Ok(()));
    }

    #[test]
    fn host_is_local_compares_with_the_vip_without_brackets() {
        let mut input = fixture();
        assert!(host_is_local(&input, &local(0)));
        assert!(!host_is_local(&input, &remote(1)));
        input.local_vip = "[fd00::1]".to_owned();
        assert!(host_is_local(&input, &addr("fd00::1", 30000)));
    }

    #[test]
    fn two_voting_changes_are_rejected() {
        let input = fixture();
        let two = reconfig(&input, |c| {
            add_local_2_voting(c);
            c.members.retain(|m| m.host != remote(2));
        });
        rejects(one_voting_change_per_reconfig, &input, &two);
        rejects(reconfig_accepted_without_force, &input, &two);
        assert!(reconfig_rule_breaks(
            &observed_set(&input).unwrap().config,
            config_sent(&two).unwrap()
        )
        .iter()
        .any(|b| b.contains("2 voting changes")));
    }

    #[test]
    fn a_reconfig_before_commit_is_rejected() {
        let mut input = fixture();
        set_of(&mut input).config_committed = false;
        let add = reconfig(&input, add_local_2_passive);
        rejects(one_voting_change_per_reconfig, &input, &add);
        rejects(reconfig_accepted_without_force, &input, &add);
    }

    #[test]
    fn a_reconfig_mongod_needs_force_for_is_rejected() {
        let input = fixture();
        let skipped_version = reconfig(&input, |c| c.version += 1);
        let changed_id = reconfig(&input, |c| c.members[1].id = 9);
        let other_set = reconfig(&input, |c| {
            c.settings.replica_set_id = Some("other".to_owned())
        });
        let unelectable_primary = reconfig(&input, |c| c.members[0].priority = 0.0);
        for step in [skipped_version, changed_id, other_set, unelectable_primary] {
            rejects(reconfig_accepted_without_force, &input, &step);
        }
    }

    #[test]
    fn a_second_initiate_is_rejected() {
        let input = fixture();
        let config = observed_set(&input).unwrap().config.clone();
        let again = Step::Initiate {
            config: ReplicaSetConfig {
                version: 1,
                ..config
            },
            on: addr(VIPS[0], 30000),
        };
        rejects(never_initiate_twice, &input, &again);
        // Nothing observed, but member 0 answered with a config.
        let mut unseen = fixture();
        unseen.observed = Observed::Unreachable;
        unseen.known_replica_set_id = None;
        rejects(never_initiate_twice, &unseen, &again);
    }

    #[test]
    fn a_reconfig_without_a_healthy_voting_majority_is_rejected() {
        let mut input = fixture();
        for host in [remote(1), remote(2)] {
            set_of(&mut input)
                .members
                .insert(host, member_status(MemberState::Down, false, None));
        }
        // Without member 1, the voters are 0 (healthy) and the two remote ones (down).
        let remove = reconfig(&input, |c| c.members.retain(|m| m.host != local(1)));
        rejects(keep_a_healthy_voting_majority, &input, &remove);
        let two_at_once = reconfig(&fixture(), |c| c.members.truncate(2));
        rejects(keep_a_healthy_voting_majority, &fixture(), &two_at_once);
    }

    #[test]
    fn removing_or_wrongly_stepping_down_the_primary_is_rejected() {
        let mut input = fixture();
        let remove_primary = reconfig(&input, |c| c.members.retain(|m| m.host != local(0)));
        rejects(
            step_down_before_removing_the_primary,
            &input,
            &remove_primary,
        );
        let step_down = |primary| Step::StepDown {
            primary,
            step_down_secs: STEP_DOWN_SECS,
            secondary_catch_up_period_secs: SECONDARY_CATCH_UP_PERIOD_SECS,
        };
        // Not the primary; then the primary, but it stays wanted.
        rejects(
            step_down_before_removing_the_primary,
            &input,
            &step_down(local(1)),
        );
        rejects(
            step_down_before_removing_the_primary,
            &input,
            &step_down(local(0)),
        );
        // The primary leaves, but nobody that stays is a healthy secondary.
        input.desired_members = 0;
        for host in [local(1), remote(1), remote(2)] {
            set_of(&mut input)
                .members
                .insert(host, member_status(MemberState::Down, false, None));
        }
        rejects(
            step_down_before_removing_the_primary,
            &input,
            &step_down(local(0)),
        );
    }

    #[test]
    fn a_config_beyond_mongodb_limits_is_rejected() {
        let input = fixture();
        let eight_voters = reconfig(&input, |c| {
            c.members = (0..8u16)
                .map(|i| voter(i64::from(i), addr(VIPS[usize::from(i) % 3], 30000 + i)))
                .collect();
        });
        rejects(config_within_mongodb_limits, &input, &eight_voters);
        let passive_with_priority = reconfig(&input, |c| {
            c.members.push(ConfigMember {
                votes: 0,
                ..voter(4, local(2))
            })
        });
        rejects(config_within_mongodb_limits, &input, &passive_with_priority);
        let hidden_with_priority = reconfig(&input, |c| c.members[1].hidden = true);
        rejects(config_within_mongodb_limits, &input, &hidden_with_priority);
        assert!(config_rule_breaks(config_sent(&eight_voters).unwrap())
            .contains(&"8 voters".to_owned()));
    }

    #[test]
    fn a_vote_giving_a_cluster_the_majority_is_rejected() {
        let input = fixture();
        let third_local_voter = reconfig(&input, add_local_2_voting);
        rejects(no_cluster_gains_a_vote_majority, &input, &third_local_voter);
    }

    #[test]
    fn deleting_a_member_still_in_the_config_is_rejected() {
        let mut input = fixture();
        let delete = Step::DeleteStatefulSet {
            slot: MemberSlot::Data(1),
            delete_pvc: true,
        };
        rejects(never_delete_a_member_in_the_config, &input, &delete);
        // Unwanted now, but still in the config.
        input.desired_members = 1;
        rejects(never_delete_a_member_in_the_config, &input, &delete);
    }

    #[test]
    fn deleting_a_readdressed_member_still_in_the_config_is_rejected() {
        let mut input = fixture();
        // Member 1 now answers at another nodePort; the config holds it at
        // its old host, as recorded on its StatefulSet.
        input.desired_members = 1;
        input.local_members[1].address = Some(addr(VIPS[0], 31001));
        input.local_members[1].recorded = Some(RecordedEntry {
            id: 1,
            host: local(1),
        });
        let delete = Step::DeleteStatefulSet {
            slot: MemberSlot::Data(1),
            delete_pvc: true,
        };
        rejects(never_delete_a_member_in_the_config, &input, &delete);
    }

    #[test]
    fn a_second_entry_for_a_readdressed_member_is_rejected() {
        let mut input = fixture();
        let moved = addr(VIPS[0], 31001);
        input.local_members[1].address = Some(moved.clone());
        input.local_members[1].recorded = Some(RecordedEntry {
            id: 1,
            host: local(1),
        });
        let added_again = reconfig(&input, |c| c.members.push(voter(4, moved.clone())));
        rejects(one_entry_per_member, &input, &added_again);
        let readdressed = reconfig(&input, |c| c.members[1].host = moved.clone());
        assert_eq!(one_entry_per_member(&input, &readdressed), Ok(()));
        assert_eq!(one_voting_change_per_reconfig(&input, &readdressed), Ok(()));
        assert_eq!(only_local_members_change(&input, &readdressed), Ok(()));
    }

    #[test]
    fn adding_a_member_of_another_set_is_rejected() {
        let mut input = fixture();
        input.local_members[2].probe = Some(MemberProbe {
            replica_set_id: Some("another-set".to_owned()),
            ..this_set()
        });
        let add = reconfig(&input, add_local_2_passive);
        rejects(never_add_a_member_of_another_set, &input, &add);
        input.local_members[2].probe = Some(MemberProbe {
            set_name: Some("replset-9".to_owned()),
            has_config: false,
            replica_set_id: None,
            state: None,
            me: None,
        });
        rejects(never_add_a_member_of_another_set, &input, &add);
    }

    #[test]
    fn changing_a_remote_member_is_rejected() {
        let input = fixture();
        let remote_priority = reconfig(&input, |c| c.members[2].priority = 2.0);
        rejects(only_local_members_change, &input, &remote_priority);
        let remote_step_down = Step::StepDown {
            primary: remote(1),
            step_down_secs: STEP_DOWN_SECS,
            secondary_catch_up_period_secs: SECONDARY_CATCH_UP_PERIOD_SECS,
        };
        rejects(only_local_members_change, &input, &remote_step_down);
    }

    #[test]
    fn settings_changed_outside_the_rs_init_cluster_are_rejected() {
        let mut input = fixture();
        input.rs_init = false;
        let settings = reconfig(&input, |c| c.settings.election_timeout_millis = 30_000);
        rejects(
            settings_written_by_the_rs_init_cluster_only,
            &input,
            &settings,
        );
        input.rs_init = true;
        assert_eq!(
            settings_written_by_the_rs_init_cluster_only(&input, &settings),
            Ok(())
        );
    }

    #[test]
    fn another_step_for_the_same_input_is_rejected() {
        rejects(same_input_same_step, &fixture(), &Step::InSync);
    }

    #[test]
    fn the_model_of_mongod_refuses_what_mongod_refuses() {
        let mut world = World::new(&[2, 1, 1], false, PvcPolicy::Retain);
        assert_eq!(converge(&mut world, ROUNDS).map(|_| ()), Ok(()));
        let live = world.set.as_ref().map(|s| s.config.clone()).unwrap();
        // Two voters of other clusters removed at once.
        let mut two = live.clone();
        two.version += 1;
        two.members.retain(|m| m.host.host == VIPS[0]);
        let step = Step::Reconfig {
            config: two,
            change: Change::UpdateSettings,
        };
        assert!(world.execute(0, &step).is_err());
        let again = Step::Initiate {
            config: ReplicaSetConfig {
                version: 1,
                ..live.clone()
            },
            on: addr(VIPS[0], 30000),
        };
        assert!(world.execute(0, &again).is_err());
        assert_eq!(world.set.as_ref().map(|s| &s.config), Some(&live));
    }
}
