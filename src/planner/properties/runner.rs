//! Runs of the world model: every cluster's planner acts in turn, each step
//! is checked against every invariant, and a run that converges is checked
//! for the desired membership.

use std::collections::btree_map::Entry;

use super::*;

/// Plans for `cluster`, checking every invariant on the step.
pub(super) fn plan_checked(world: &mut World, cluster: usize) -> Result<(PlanInput, Step), String> {
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
pub(super) type StepCounts = BTreeMap<&'static str, usize>;

/// Runs `ops`, checking the invariants after every one.
pub(super) fn run(world: &mut World, ops: &[Op]) -> Result<StepCounts, String> {
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
pub(super) fn converge(world: &mut World, rounds: usize) -> Result<usize, String> {
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
pub(super) fn balanced_voter_count(members: &[MemberAddress]) -> usize {
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
pub(super) fn check_converged(world: &World) -> Result<(), String> {
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
