//! replSetStepDown as mongod runs it (mongodb/mongo
//! `src/mongo/db/repl/replication_coordinator_impl.cpp` `stepDown`,
//! `src/mongo/db/repl/topology_coordinator.cpp` `prepareForStepDownAttempt`,
//! `tryToStartStepDown`, `isSafeToStepDown`, `chooseElectionHandoffCandidate`).
//!
//! The attempt starts by making the primary refuse writes (its leader mode
//! becomes "attempting step-down": `isWritablePrimary` false, writes 10107) and
//! killing the operations that wrote (a write waiting for its write concern ends
//! with 11602). It then waits up to `secondaryCatchUpPeriodSecs` until a
//! majority has the primary's last applied optime AND an electable secondary
//! (not an arbiter, priority > 0, SECONDARY) has it too. On success it steps
//! down and hands the election to the highest-priority such secondary; on
//! timeout it answers 262 and, being primary still, accepts writes again.

use crate::commands::{num, secs, CmdResult};
use crate::config::ReplSetConfig;
use crate::error::{self, fail, CmdError};
use crate::member::{Member, MemberState};
use crate::network::Network;
use crate::repl_commands::truthy;
use bson::{doc, DateTime, Document};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Ends a step-down attempt however the command ends (answered, failed, or
/// its connection dropped): mongod's `abortFn` puts the leader mode back.
struct AttemptGuard<'a>(&'a Member);

impl Drop for AttemptGuard<'_> {
    fn drop(&mut self) {
        let mut inner = self.0.lock();
        if inner.stepping_down {
            inner.stepping_down = false;
            self.0.bump_topology(&mut inner);
        }
    }
}

pub(crate) async fn step_down(member: &Arc<Member>, body: &Document) -> CmdResult {
    let net = member
        .network()
        .ok_or_else(|| CmdError::new(error::COMMAND_FAILED, "network is shutting down"))?;
    if member.state() != MemberState::Primary {
        return fail(
            error::NOT_WRITABLE_PRIMARY,
            "not primary so can't step down",
        );
    }
    let force = body.get("force").map(truthy).unwrap_or(false);
    // A missing, non-numeric or zero period means 60 s, as in mongod.
    let step_down_secs = num(body.get("replSetStepDown"))
        .filter(|s| *s != 0.0)
        .unwrap_or(60.0);
    let catch_up_secs =
        num(body.get("secondaryCatchUpPeriodSecs")).unwrap_or(if force { 0.0 } else { 10.0 });
    if !(step_down_secs >= 0.0 && catch_up_secs >= 0.0) {
        return fail(
            error::BAD_VALUE,
            "stepdown period and secondaryCatchUpPeriodSecs must be non-negative",
        );
    }
    if !force && step_down_secs <= catch_up_secs {
        return fail(
            error::BAD_VALUE,
            "stepdown period must be longer than secondaryCatchUpPeriodSecs",
        );
    }
    let cfg = member.config().ok_or_else(|| {
        CmdError::new(
            error::NOT_YET_INITIALIZED,
            "no replset config has been received",
        )
    })?;
    let started = Instant::now();
    let wait_until = started + secs(catch_up_secs);
    let step_down_until = started + secs(step_down_secs);
    let period = secs(step_down_secs);
    let _attempt = begin_attempt(member)?;
    let term_at_start = member.disk().term;
    loop {
        if member.state() != MemberState::Primary || member.disk().term != term_at_start {
            return fail(
                error::PRIMARY_STEPPED_DOWN,
                "While waiting for secondaries to catch up before stepping down, this node \
                 decided to step down for other reasons",
            );
        }
        let now = Instant::now();
        if now >= step_down_until {
            return fail(
                error::EXCEEDED_TIME_LIMIT,
                "By the time we were ready to step down, we were already past the time we \
                 were supposed to step down until",
            );
        }
        let force_now = force && now >= wait_until;
        if force_now || is_safe_to_step_down(member, &net, &cfg) {
            let successor = handoff_candidate(member, &net, &cfg);
            {
                let mut inner = member.lock();
                member.step_down_locked(&mut inner, Some(period));
            }
            if !force {
                if let Some(peer) = successor {
                    peer.request_step_up();
                }
            }
            return Ok(doc! {});
        }
        // Checked after one attempt at least, so that a catch-up period of 0
        // can still succeed.
        if now >= wait_until {
            return fail(error::EXCEEDED_TIME_LIMIT, format!(
                "No electable secondaries caught up as of {}. Please use the replSetStepDown command with the argument {{force: true}} to force node to step down.",
                DateTime::now().try_to_rfc3339_string().unwrap_or_default()));
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// mongod's `prepareForStepDownAttempt` and the kill of conflicting
/// operations: one attempt at a time (117), writes refused from now on, and
/// writes waiting for their write concern interrupted.
fn begin_attempt(member: &Member) -> Result<AttemptGuard<'_>, CmdError> {
    let mut inner = member.lock();
    if inner.stepping_down {
        return fail(
            error::CONFLICTING_OPERATION_IN_PROGRESS,
            "This node is already in the process of stepping down",
        );
    }
    if inner.state != MemberState::Primary {
        return fail(error::NOT_WRITABLE_PRIMARY, "This node is not a primary.");
    }
    inner.stepping_down = true;
    inner.role_generation += 1;
    member.bump_topology(&mut inner);
    Ok(AttemptGuard(member))
}

/// `TopologyCoordinator::isSafeToStepDown`: nothing written in this term yet,
/// or a majority (the write majority of the data-bearing voters) has the last
/// applied optime and some other member is caught up and electable.
fn is_safe_to_step_down(member: &Member, net: &Network, cfg: &ReplSetConfig) -> bool {
    let (last_applied, term) = {
        let disk = member.disk();
        (disk.last_optime(), disk.term)
    };
    if last_applied.t != term {
        return true;
    }
    member.majority_has(net, cfg, last_applied)
        && !caught_up_electable(member, net, cfg, last_applied).is_empty()
}

/// The other members that are electable (`_getUnelectableReason`: not an
/// arbiter, priority > 0, SECONDARY) and have `last_applied`, with their
/// priority, in config order.
fn caught_up_electable(
    member: &Member,
    net: &Network,
    cfg: &ReplSetConfig,
    last_applied: crate::state::OpTime,
) -> Vec<(f64, Arc<Member>)> {
    let me = member.self_host();
    cfg.members
        .iter()
        .filter(|m| Some(&m.host) != me.as_ref() && m.is_electable())
        .filter_map(|m| Some((m.priority, net.dial(member, &m.host)?)))
        .filter(|(_, peer)| {
            peer.state() == MemberState::Secondary && peer.last_optime() >= last_applied
        })
        .collect()
}

/// `chooseElectionHandoffCandidate`: the caught-up electable member of the
/// highest priority, the first in config order on a tie.
fn handoff_candidate(member: &Member, net: &Network, cfg: &ReplSetConfig) -> Option<Arc<Member>> {
    let last_applied = member.disk().last_optime();
    caught_up_electable(member, net, cfg, last_applied)
        .into_iter()
        .fold(
            None,
            |best: Option<(f64, Arc<Member>)>, (priority, peer)| match &best {
                Some((top, _)) if *top >= priority => best,
                _ => Some((priority, peer)),
            },
        )
        .map(|(_, peer)| peer)
}
