//! Disaster recovery, only on request (pure): what this cluster does about an
//! SRE's request (annotation [`crate::api::RECOVERY_ANNOTATION`]) to recover a
//! replica set that lost a majority of its voters.
//!
//! The planner never forces anything: without a voting majority it reports
//! `VotingMajorityLost` and changes nothing. A request changes that once:
//!
//! 1. **Report** — the forced config is planned from the config a surviving
//!    member holds: it keeps the members that still answer heartbeats and
//!    drops the others — and the arbiter, when keeping it would change the
//!    implicit default write concern with no cluster-wide one set, which
//!    mongod 5.0+ refuses even forced. The plan goes to status (`recovery`, phase
//!    `Planned`) and to an Event *before* anything is done.
//! 2. **Force** — on a later pass, if the set still lacks a voting majority
//!    and the plan is the one reported, a forced `replSetReconfig` is sent to
//!    a local member the plan keeps (phase `Forced`).
//! 3. **Record** — once the set has a primary again, the recovery is
//!    written into the set (who was dropped), so that the clusters that come
//!    back never re-add their old members as they are (phase `Done`).
//!
//! A request that cannot be carried out (a voting majority answers, no local
//! member survives, nothing electable would be kept) is **Refused**. Done or
//! refused, a request is never looked at again: a recovery needs a new
//! request (another reason), so a stale annotation can never force anything.

use std::fmt;

use crate::api::{RecoveryPhase, RecoveryStatus};
use crate::hostconf::MemberAddress;
use crate::observe::ObservedSet;
use crate::planner::{Step, WaitReason};
use crate::replset::{ClusterWriteConcern, ConfigMember, DefaultW, ReplicaSetConfig};

/// What the recovery stage looks at.
#[derive(Clone, Debug)]
pub struct RecoveryInput<'a> {
    /// The request: the annotation's value, when it is set and not blank.
    pub request: Option<&'a str>,
    /// The recovery recorded in status.
    pub recorded: Option<&'a RecoveryStatus>,
    /// The planner's step this pass.
    pub step: &'a Step,
    /// The replica set as read this pass.
    pub set: Option<&'a ObservedSet>,
    /// This cluster's members that answered this pass with a config, in
    /// slot order: those a forced reconfig can be sent to.
    pub local_answering: &'a [MemberAddress],
}

/// A forced reconfig: from which config, to which.
#[derive(Clone, Debug, PartialEq)]
pub struct ForcedRecovery {
    /// The version of the config it starts from.
    pub from_version: i64,
    /// The forced config: the surviving members, version `from_version + 1`
    /// (mongod raises a forced config's version further on its own).
    pub config: ReplicaSetConfig,
    /// The members kept.
    pub keeping: Vec<MemberAddress>,
    /// The members dropped.
    pub dropping: Vec<MemberAddress>,
}

impl fmt::Display for ForcedRecovery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a forced reconfig from config version {} keeps {} and drops {}",
            self.from_version,
            list(&self.keeping),
            list(&self.dropping)
        )
    }
}

/// The one thing the recovery stage does this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum RecoveryStep {
    /// No request, or the request was carried out or refused already.
    Idle,
    /// Report the plan (status and Event); force it on a later pass.
    Report { plan: ForcedRecovery },
    /// Send the forced reconfig to `on`, a local member the plan keeps.
    Force {
        plan: ForcedRecovery,
        on: MemberAddress,
    },
    /// Forced: wait for the set to elect a primary to record it with.
    AwaitPrimary,
    /// Write the recovery into the set through `primary`.
    Record { primary: MemberAddress },
    /// The request cannot be carried out.
    Refuse { reason: RecoveryRefusal },
}

/// Why a request is refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum RecoveryRefusal {
    #[error(
        "a majority of the voters answers (or the set could not be read): a primary can be \
         elected without forcing anything"
    )]
    MajorityNotLost,
    #[error(
        "no member of this cluster that the forced config would keep answers: ask on a \
         cluster whose members survived"
    )]
    NoLocalSurvivor,
    #[error(
        "the surviving members ({}) hold no electable voter: a forced config of them \
         could never elect a primary",
        list(keeping)
    )]
    NothingElectable { keeping: Vec<MemberAddress> },
    #[error(
        "the forced config of the surviving members would change the implicit default write \
         concern from {from} to {to}, and no cluster-wide write concern is set: mongod 5.0+ \
         refuses that even forced (docs/disaster-recovery.md, Arbiters)"
    )]
    WriteConcernWouldChange { from: DefaultW, to: DefaultW },
}

impl RecoveryRefusal {
    /// A bounded PascalCase name (Event reason).
    pub fn reason(&self) -> &'static str {
        self.into()
    }
}

/// What to do about the request this pass.
pub fn plan_recovery(input: &RecoveryInput) -> RecoveryStep {
    let Some(request) = input.request else {
        return RecoveryStep::Idle;
    };
    let recorded = input.recorded.filter(|r| r.request == request);
    match recorded.map(|r| r.phase) {
        Some(RecoveryPhase::Done | RecoveryPhase::Refused) => RecoveryStep::Idle,
        Some(RecoveryPhase::Forced) => record(input),
        Some(RecoveryPhase::Planned) if recorded.is_some_and(|r| forced_already(r, input.set)) => {
            record(input)
        }
        Some(RecoveryPhase::Planned) => match forced_recovery(input) {
            Ok((plan, on)) if recorded.is_some_and(|r| reported(r, &plan)) => {
                RecoveryStep::Force { plan, on }
            }
            Ok((plan, _)) => RecoveryStep::Report { plan },
            Err(reason) => RecoveryStep::Refuse { reason },
        },
        None => match forced_recovery(input) {
            Ok((plan, _)) => RecoveryStep::Report { plan },
            Err(reason) => RecoveryStep::Refuse { reason },
        },
    }
}

/// Once forced: record it when the set has a primary.
fn record(input: &RecoveryInput) -> RecoveryStep {
    match input.set.and_then(|set| set.primary.clone()) {
        Some(primary) => RecoveryStep::Record { primary },
        None => RecoveryStep::AwaitPrimary,
    }
}

/// Whether the planned reconfig is in place already (forced by a pass that
/// could not record it): a newer config of exactly the members kept.
fn forced_already(recorded: &RecoveryStatus, set: Option<&ObservedSet>) -> bool {
    let (Some(set), Some(from)) = (set, recorded.from_config_version) else {
        return false;
    };
    let mut hosts: Vec<String> = set
        .config
        .members
        .iter()
        .map(|m| m.host.to_string())
        .collect();
    hosts.sort();
    let mut keeping = recorded.keeping.clone();
    keeping.sort();
    set.config.version > from && hosts == keeping
}

/// Whether `plan` is the plan `recorded` reported.
fn reported(recorded: &RecoveryStatus, plan: &ForcedRecovery) -> bool {
    recorded.from_config_version == Some(plan.from_version)
        && recorded.keeping == strings(&plan.keeping)
        && recorded.dropping == strings(&plan.dropping)
}

/// The forced config and the local member to send it to, when the set lost
/// its voting majority and a local member survives.
fn forced_recovery(
    input: &RecoveryInput,
) -> Result<(ForcedRecovery, MemberAddress), RecoveryRefusal> {
    let (
        Step::Wait {
            reason: WaitReason::VotingMajorityLost { .. },
        },
        Some(set),
    ) = (input.step, input.set)
    else {
        return Err(RecoveryRefusal::MajorityNotLost);
    };
    let healthy = |host: &MemberAddress| set.members.get(host).is_some_and(|m| m.healthy);
    let arbiter_flips = arbiter_would_change_write_concern(set, &healthy);
    let survives = |m: &ConfigMember| healthy(&m.host) && !(m.arbiter_only && arbiter_flips);
    let (kept, dropped): (Vec<_>, Vec<_>) = set.config.members.iter().partition(|m| survives(m));
    let keeping: Vec<MemberAddress> = kept.iter().map(|m| m.host.clone()).collect();
    let dropping: Vec<MemberAddress> = dropped.iter().map(|m| m.host.clone()).collect();
    let Some(on) = input
        .local_answering
        .iter()
        .find(|local| keeping.contains(local))
        .cloned()
    else {
        return Err(RecoveryRefusal::NoLocalSurvivor);
    };
    if !kept
        .iter()
        .any(|m| m.votes > 0 && m.priority > 0.0 && !m.arbiter_only && !m.hidden)
    {
        return Err(RecoveryRefusal::NothingElectable { keeping });
    }
    let mut config = set.config.clone();
    config.version += 1;
    config.term = None;
    config.members.retain(|m| survives(m));
    for member in &mut config.members {
        member.newly_added = false;
    }
    let (from, to) = (
        set.config.implicit_default_write_concern(),
        config.implicit_default_write_concern(),
    );
    if no_cluster_write_concern(set) && from != to {
        return Err(RecoveryRefusal::WriteConcernWouldChange { from, to });
    }
    let plan = ForcedRecovery {
        from_version: set.config.version,
        config,
        keeping,
        dropping,
    };
    Ok((plan, on))
}

/// Whether keeping the surviving arbiters in the forced config would change
/// the implicit default write concern while no cluster-wide one is set: mongod
/// 5.0+ refuses such a config, forced or not (`_doReplSetReconfig`), so the
/// arbiters are dropped then; without them the implicit default stays
/// `{w: "majority"}` if it was (no arbiter left).
fn arbiter_would_change_write_concern(
    set: &ObservedSet,
    healthy: &impl Fn(&MemberAddress) -> bool,
) -> bool {
    let mut keeping_all = set.config.clone();
    keeping_all.members.retain(|m| healthy(&m.host));
    for member in &mut keeping_all.members {
        member.newly_added = false;
    }
    no_cluster_write_concern(set)
        && keeping_all.members.iter().any(|m| m.arbiter_only)
        && ClusterWriteConcern::Implicit.refuses_change(&set.config, &keeping_all)
}

/// Whether mongod may refuse a forced config for changing its implicit
/// default write concern: 5.0+ with none set, or not known to be set (it
/// could not be read without a primary).
fn no_cluster_write_concern(set: &ObservedSet) -> bool {
    matches!(
        set.write_concern,
        ClusterWriteConcern::Implicit | ClusterWriteConcern::Unknown
    )
}

/// The status a step leaves, given the one recorded (`now`: this pass's time).
pub fn recovery_status(
    request: Option<&str>,
    recorded: Option<&RecoveryStatus>,
    step: &RecoveryStep,
    now: &k8s_openapi::apimachinery::pkg::apis::meta::v1::Time,
) -> Option<RecoveryStatus> {
    let (Some(request), Some(phase)) = (request, phase_after(step)) else {
        return recorded.cloned();
    };
    let recorded = recorded.filter(|r| r.request == request);
    let mut status = recorded.cloned().unwrap_or_else(|| RecoveryStatus {
        request: request.to_string(),
        phase,
        message: String::new(),
        from_config_version: None,
        keeping: Vec::new(),
        dropping: Vec::new(),
        forced_on: None,
        since: now.clone(),
    });
    match step {
        RecoveryStep::Report { plan } => {
            status.from_config_version = Some(plan.from_version);
            status.keeping = strings(&plan.keeping);
            status.dropping = strings(&plan.dropping);
            status.message = format!("planned: {plan}; forced on the next pass unless the set recovers or the plan changes");
        }
        RecoveryStep::Force { plan, on } => {
            status.forced_on = Some(on.to_string());
            status.message =
                format!("forced on {on}: {plan}; recorded in the set once it has a primary");
        }
        RecoveryStep::Record { .. } => {
            status.message = format!(
                "done: the set was forced to {} and the recovery is recorded in it; members it \
                 dropped ({}) are not re-added unless resynced from scratch",
                status.keeping.join(", "),
                status.dropping.join(", ")
            );
        }
        RecoveryStep::Refuse { reason } => {
            status.message = format!("refused: {reason}; this request is ignored from now on");
        }
        RecoveryStep::Idle | RecoveryStep::AwaitPrimary => {}
    }
    if status.phase != phase || recorded.is_none() {
        status.since = now.clone();
    }
    status.phase = phase;
    Some(status)
}

/// The phase a step leads to (`None`: the recorded one stays).
fn phase_after(step: &RecoveryStep) -> Option<RecoveryPhase> {
    match step {
        RecoveryStep::Idle | RecoveryStep::AwaitPrimary => None,
        RecoveryStep::Report { .. } => Some(RecoveryPhase::Planned),
        RecoveryStep::Force { .. } => Some(RecoveryPhase::Forced),
        RecoveryStep::Record { .. } => Some(RecoveryPhase::Done),
        RecoveryStep::Refuse { .. } => Some(RecoveryPhase::Refused),
    }
}

fn strings(hosts: &[MemberAddress]) -> Vec<String> {
    hosts.iter().map(ToString::to_string).collect()
}

fn list(hosts: &[MemberAddress]) -> String {
    if hosts.is_empty() {
        return "nothing".to_string();
    }
    strings(hosts).join(", ")
}

#[cfg(test)]
mod tests;
