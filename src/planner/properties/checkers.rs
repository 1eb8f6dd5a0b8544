//! The invariants of `docs/replica-set-rules.md`, one checker each, judged
//! with their own small helpers and with mongod's rules as the world model
//! writes them, never with the planner's or `replset`'s helpers.

use super::*;

/// An invariant: `Err` says how `step` breaks it for `input`.
pub(super) type Invariant = fn(&PlanInput, &Step) -> Result<(), String>;

/// Every invariant of `docs/replica-set-rules.md`, by its name there.
pub(super) const INVARIANTS: [(&str, Invariant); 14] = [
    (
        "an-emptied-member-never-votes",
        an_emptied_member_never_votes,
    ),
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

pub(super) fn observed_set(input: &PlanInput) -> Result<&ObservedSet, String> {
    match &input.observed {
        Observed::Configured(set) => Ok(set),
        Observed::Unreachable => Err("a config change without an observed config".to_owned()),
    }
}

pub(super) fn ensure(ok: bool, why: impl FnOnce() -> String) -> Result<(), String> {
    if ok {
        Ok(())
    } else {
        Err(why())
    }
}

/// Whether `host` is in this cluster: its host part is the VIP (an IPv6 VIP
/// may be written in brackets).
pub(super) fn host_is_local(input: &PlanInput, host: &MemberAddress) -> bool {
    let vip = input
        .local_vip
        .trim_start_matches('[')
        .trim_end_matches(']');
    host.host == vip
}

/// Whether the spec wants `slot`: data members `0..spec.members`, the arbiter
/// when `spec.arbiter`.
pub(super) fn slot_wanted(input: &PlanInput, slot: MemberSlot) -> bool {
    match slot {
        MemberSlot::Data(index) => index < input.desired_members,
        MemberSlot::Arbiter => input.arbiter_wanted,
    }
}

/// The local members at `host`.
pub(super) fn local_at<'a>(
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
pub(super) fn stands_for(member: &LocalMemberFacts, entry: &ConfigMember) -> bool {
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
pub(super) fn leaving(input: &PlanInput, host: &MemberAddress) -> bool {
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
pub(super) fn answers(input: &PlanInput) -> BTreeMap<&MemberAddress, &MemberProbe> {
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
pub(super) fn state_counts_towards_majority(state: MemberState) -> bool {
    use MemberState::*;
    match state {
        Primary | Secondary | Arbiter => true,
        Recovering | Startup2 | Rollback | Startup | Unknown | Down | Removed => false,
    }
}

pub(super) fn votes_of(config: &ReplicaSetConfig) -> usize {
    config.members.iter().filter(|m| m.votes > 0).count()
}

/// The config a step sends, if any.
pub(super) fn config_sent(step: &Step) -> Option<&ReplicaSetConfig> {
    match step {
        Step::Initiate { config, .. } | Step::Reconfig { config, .. } => Some(config),
        _ => None,
    }
}

/// `one-voting-change-per-reconfig`: at most one member (by `_id`, as mongod
/// counts) gains or loses a vote, and only from a committed config with a
/// primary and no `newlyAdded` member.
pub(super) fn one_voting_change_per_reconfig(input: &PlanInput, step: &Step) -> Result<(), String> {
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
pub(super) fn reconfig_accepted_without_force(
    input: &PlanInput,
    step: &Step,
) -> Result<(), String> {
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
    })?;
    // As mongod installs it: a voter with a new `_id` is `newlyAdded`.
    let mut installed = config.clone();
    for m in installed.members.iter_mut() {
        m.newly_added |=
            m.votes > 0 && !m.arbiter_only && !set.config.members.iter().any(|o| o.id == m.id);
    }
    ensure(
        set.write_concern != ClusterWriteConcern::Implicit
            || implicit_majority(&set.config) == implicit_majority(&installed),
        || "103: it changes the implicit default write concern and none is set".to_owned(),
    )
}

/// `never-initiate-twice`: initiate only in the rsInit cluster, with no
/// recorded replicaSetId and no observed config, when no member that answered
/// holds a config; it lists only members that answered without one, at least
/// one of them local.
pub(super) fn never_initiate_twice(input: &PlanInput, step: &Step) -> Result<(), String> {
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
pub(super) fn keep_a_healthy_voting_majority(input: &PlanInput, step: &Step) -> Result<(), String> {
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
pub(super) fn step_down_before_removing_the_primary(
    input: &PlanInput,
    step: &Step,
) -> Result<(), String> {
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
            // Leaving, or about to be made unelectable by hostconf (no vote,
            // hidden, priority 0), which mongod refuses for the primary.
            let unelectable_by_hostconf = input.hostconf.members.iter().any(|m| {
                &m.address == primary && (m.votes == Some(0) || m.hidden || m.priority == Some(0.0))
            });
            ensure(leaving(input, primary) || unelectable_by_hostconf, || {
                format!("steps down {primary}, which is neither leaving nor made unelectable")
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
pub(super) fn config_within_mongodb_limits(input: &PlanInput, step: &Step) -> Result<(), String> {
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
pub(super) fn clusters_in_hostconf(input: &PlanInput) -> usize {
    let vips: BTreeSet<&str> = input
        .hostconf
        .members
        .iter()
        .map(|m| m.address.host.as_str())
        .collect();
    vips.len()
}

/// The VIP whose members hold more than half of the config's votes, if any.
pub(super) fn majority_cluster(config: &ReplicaSetConfig) -> Option<String> {
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
pub(super) fn no_cluster_gains_a_vote_majority(
    input: &PlanInput,
    step: &Step,
) -> Result<(), String> {
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
pub(super) fn never_delete_a_member_in_the_config(
    input: &PlanInput,
    step: &Step,
) -> Result<(), String> {
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
pub(super) fn holds_entry(config: &ReplicaSetConfig, recorded: &RecordedEntry) -> bool {
    config
        .members
        .iter()
        .any(|m| m.id == recorded.id && m.host == recorded.host)
}

/// `one-entry-per-member`: a config sent holds at most one entry for each
/// local member — the one at its address, the one recorded as it, or the one
/// it says it is.
pub(super) fn one_entry_per_member(input: &PlanInput, step: &Step) -> Result<(), String> {
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
pub(super) fn never_add_a_member_of_another_set(
    input: &PlanInput,
    step: &Step,
) -> Result<(), String> {
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
pub(super) fn settings_written_by_the_rs_init_cluster_only(
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
pub(super) fn only_local_members_change(input: &PlanInput, step: &Step) -> Result<(), String> {
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
pub(super) fn same_input_same_step(input: &PlanInput, step: &Step) -> Result<(), String> {
    let again = plan(&input.clone());
    ensure(&again == step, || format!("{step:?} then {again:?}"))
}

/// `an-emptied-member-never-votes`: while local voters answer empty (no
/// config, or in initial sync by their own answer or the set's), every
/// reconfig but a readdress takes the vote of one of them (one voting change
/// per reconfig) and gives none back.
pub(super) fn an_emptied_member_never_votes(input: &PlanInput, step: &Step) -> Result<(), String> {
    let (Some(config), Ok(set)) = (config_sent(step), observed_set(input)) else {
        return Ok(());
    };
    if matches!(
        step,
        Step::Reconfig {
            change: Change::ReaddressMember { .. },
            ..
        }
    ) {
        return Ok(());
    }
    let mut emptied_voters = Vec::new();
    for member in &input.local_members {
        let Some(entry) = member.entry_in(&set.config) else {
            continue;
        };
        let empty = member
            .probe
            .as_ref()
            .is_some_and(|p| !p.has_config || p.state == Some(MemberState::Startup2))
            || set
                .members
                .get(&entry.host)
                .is_some_and(|s| s.healthy && s.state == MemberState::Startup2);
        if empty && !entry.arbiter_only && set.primary.as_ref() != Some(&entry.host) {
            emptied_voters.push((entry.id, entry.votes > 0 && !entry.newly_added));
        }
    }
    let votes_now = |id: i64| config.members.iter().any(|m| m.id == id && m.votes > 0);
    if let Some((id, _)) = emptied_voters
        .iter()
        .find(|(id, voted)| !voted && votes_now(*id))
    {
        return Err(format!("_id {id} answers empty and is given a vote"));
    }
    let voting: Vec<i64> = emptied_voters
        .iter()
        .filter(|(_, v)| *v)
        .map(|(id, _)| *id)
        .collect();
    ensure(
        voting.is_empty() || voting.iter().any(|id| !votes_now(*id)),
        || format!("_ids {voting:?} answer empty and keep their votes"),
    )
}

pub(super) fn check_all(input: &PlanInput, step: &Step) -> Result<(), String> {
    for (name, invariant) in INVARIANTS {
        invariant(input, step).map_err(|why| format!("{name}: {why}\nstep: {step:?}"))?;
    }
    Ok(())
}
