//! Forgetting a lost cluster, only on request (pure): what this cluster does
//! about an SRE's request (annotation [`crate::api::FORGET_CLUSTER_ANNOTATION`])
//! to remove from the set the members of a cluster that is gone for good.
//!
//! Each operator changes only its own members; the dead members of a lost
//! cluster therefore stay in the config, where they hold every roll and every
//! FCV raise and keep counting in the majority. A request changes that once:
//!
//! 1. **Check** — refused when the set cannot be read, when it lost its voting
//!    majority (that is a disaster recovery's case), when no member of the set
//!    is at that VIP, when one of them is the primary or answers heartbeats
//!    (the cluster is not lost), or when it is this cluster.
//! 2. **Record** — the cluster's members are written into the set as
//!    forgotten, *before* any is removed, so that none is re-added as it is
//!    should the cluster come back (phase `Removing`).
//! 3. **Remove** — the planner removes them, one safe reconfig per pass, with
//!    the rules of every removal ([`crate::planner::PlanInput::forgotten_cluster`]).
//! 4. **Done** — once no member at that VIP is left in the config.
//!
//! Every phase is decided from the set and the status recorded, so a pass
//! that crashes anywhere is taken up by the next. Done or refused, a request
//! is never looked at again.

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::api::{ForgetClusterPhase, ForgetClusterStatus, MongoDB, FORGET_CLUSTER_ANNOTATION};
use crate::hostconf::MemberAddress;
use crate::observe::ObservedSet;
use crate::planner::{Step, WaitReason};

/// A request to forget a cluster: the annotation's value.
#[derive(Clone, Debug, PartialEq)]
pub struct ForgetRequest<'a> {
    /// The whole value: names the request.
    pub request: &'a str,
    /// Its first word: the VIP of the cluster to forget.
    pub cluster: &'a str,
}

impl<'a> ForgetRequest<'a> {
    /// The request on `mongodb`, when its annotation is set and not blank.
    pub fn of(mongodb: &'a MongoDB) -> Option<Self> {
        let request = mongodb
            .metadata
            .annotations
            .as_ref()?
            .get(FORGET_CLUSTER_ANNOTATION)?
            .trim();
        let cluster = request.split_whitespace().next()?;
        let cluster = cluster
            .strip_prefix('[')
            .and_then(|c| c.strip_suffix(']'))
            .unwrap_or(cluster);
        Some(Self { request, cluster })
    }
}

/// The VIP whose members the planner removes this pass: the request's, once
/// its members are recorded as forgotten (phase `Removing`).
pub fn forgotten_cluster(mongodb: &MongoDB) -> Option<String> {
    let request = ForgetRequest::of(mongodb)?;
    mongodb
        .status
        .as_ref()?
        .forget_cluster
        .as_ref()
        .filter(|f| f.request == request.request && f.phase == ForgetClusterPhase::Removing)
        .map(|f| f.cluster.clone())
}

/// What the forget stage looks at.
#[derive(Clone, Debug)]
pub struct ForgetInput<'a> {
    /// The request, when there is one.
    pub request: Option<ForgetRequest<'a>>,
    /// The request recorded in status.
    pub recorded: Option<&'a ForgetClusterStatus>,
    /// The planner's step this pass.
    pub step: &'a Step,
    /// The replica set as read this pass.
    pub set: Option<&'a ObservedSet>,
    /// This cluster's VIP.
    pub local_vip: &'a str,
}

/// The one thing the forget stage does this pass.
#[derive(Clone, Debug, PartialEq)]
pub enum ForgetStep {
    /// No request, or one carried out or refused already, or its removals
    /// under way (the planner's).
    Idle,
    /// Write `members` into the set as forgotten through `primary`; the
    /// planner removes them from the next pass on.
    Record {
        primary: MemberAddress,
        members: Vec<MemberAddress>,
        from_version: i64,
    },
    /// A voting majority answers but no primary is elected yet: ask again.
    AwaitPrimary,
    /// No member of the cluster is left in the config.
    Finish,
    /// The request cannot be carried out.
    Refuse { reason: ForgetRefusal },
}

/// Why a request to forget a cluster is refused.
#[derive(Clone, Debug, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum ForgetRefusal {
    #[error("{cluster} is this cluster's own VIP: ask a surviving cluster to forget a lost one")]
    OwnCluster { cluster: String },
    #[error("the replica set could not be read: ask again once it can")]
    SetUnread,
    #[error(
        "the set lost its voting majority: no reconfig can be made without forcing one, which \
         is a disaster recovery's (kubectl mongodb recover, docs/disaster-recovery.md)"
    )]
    VotingMajorityLost,
    #[error(
        "no member of the set is at {cluster}; the set's members are at {}",
        clusters.join(", ")
    )]
    NothingToForget {
        cluster: String,
        clusters: Vec<String>,
    },
    #[error("{host} is the primary: its cluster is not lost")]
    PrimaryInCluster { host: MemberAddress },
    #[error(
        "{} still answer(s) heartbeats: the cluster is not lost; stop or fence it first, or \
         scale it to 0 through the control plane",
        list(hosts)
    )]
    ClusterAnswers { hosts: Vec<MemberAddress> },
}

impl ForgetRefusal {
    /// A bounded PascalCase name (Event reason).
    pub fn reason(&self) -> &'static str {
        self.into()
    }
}

/// What to do about the request this pass.
pub fn plan_forget(input: &ForgetInput) -> ForgetStep {
    let Some(request) = &input.request else {
        return ForgetStep::Idle;
    };
    let recorded = input.recorded.filter(|r| r.request == request.request);
    match recorded.map(|r| r.phase) {
        Some(ForgetClusterPhase::Done | ForgetClusterPhase::Refused) => ForgetStep::Idle,
        Some(ForgetClusterPhase::Removing) => match input.set {
            Some(set) if members_at(set, request.cluster).is_empty() => ForgetStep::Finish,
            _ => ForgetStep::Idle,
        },
        None => match check(input, request.cluster) {
            Ok(step) => step,
            Err(reason) => ForgetStep::Refuse { reason },
        },
    }
}

/// A new request: refused, or the members to record.
fn check(input: &ForgetInput, cluster: &str) -> Result<ForgetStep, ForgetRefusal> {
    if cluster == input.local_vip {
        return Err(ForgetRefusal::OwnCluster {
            cluster: cluster.to_string(),
        });
    }
    let Some(set) = input.set else {
        return Err(ForgetRefusal::SetUnread);
    };
    if matches!(
        input.step,
        Step::Wait {
            reason: WaitReason::VotingMajorityLost { .. }
        }
    ) {
        return Err(ForgetRefusal::VotingMajorityLost);
    }
    let members = members_at(set, cluster);
    if members.is_empty() {
        let clusters: BTreeSet<String> = set
            .config
            .members
            .iter()
            .map(|m| m.host.host.clone())
            .collect();
        let clusters = clusters.into_iter().collect();
        return Err(ForgetRefusal::NothingToForget {
            cluster: cluster.to_string(),
            clusters,
        });
    }
    if let Some(primary) = set.primary.as_ref().filter(|p| members.contains(p)) {
        return Err(ForgetRefusal::PrimaryInCluster {
            host: primary.clone(),
        });
    }
    let answering: Vec<MemberAddress> = members
        .iter()
        .filter(|host| set.members.get(*host).is_some_and(|m| m.healthy))
        .cloned()
        .collect();
    if !answering.is_empty() {
        return Err(ForgetRefusal::ClusterAnswers { hosts: answering });
    }
    Ok(match &set.primary {
        Some(primary) => ForgetStep::Record {
            primary: primary.clone(),
            members,
            from_version: set.config.version,
        },
        None => ForgetStep::AwaitPrimary,
    })
}

/// The members of the config at `cluster`'s VIP.
fn members_at(set: &ObservedSet, cluster: &str) -> Vec<MemberAddress> {
    set.config
        .members
        .iter()
        .filter(|m| m.host.host == cluster)
        .map(|m| m.host.clone())
        .collect()
}

/// The status a step leaves, given the one recorded (`now`: this pass's time).
pub fn forget_status(
    request: Option<&ForgetRequest>,
    recorded: Option<&ForgetClusterStatus>,
    step: &ForgetStep,
    now: &Time,
) -> Option<ForgetClusterStatus> {
    let (Some(request), Some(phase)) = (request, phase_after(step)) else {
        return recorded.cloned();
    };
    let recorded = recorded.filter(|r| r.request == request.request);
    let mut status = recorded.cloned().unwrap_or_else(|| ForgetClusterStatus {
        request: request.request.to_string(),
        cluster: request.cluster.to_string(),
        phase,
        message: String::new(),
        members: Vec::new(),
        since: now.clone(),
    });
    match step {
        ForgetStep::Record { members, .. } => {
            status.members = members.iter().map(ToString::to_string).collect();
            status.message = format!(
                "removing {} from the set, one reconfig at a time; recorded in the set as \
                 forgotten, so none is re-added as it is if the cluster comes back",
                list(members)
            );
        }
        ForgetStep::Finish => {
            status.message = format!(
                "no member of {} is left in the config ({} removed); they are not \
                 re-added unless resynced from scratch",
                status.cluster,
                status.members.join(", ")
            );
        }
        ForgetStep::Refuse { reason } => {
            status.message = format!("refused: {reason}; this request is ignored from now on");
        }
        ForgetStep::Idle | ForgetStep::AwaitPrimary => {}
    }
    if status.phase != phase || recorded.is_none() {
        status.since = now.clone();
    }
    status.phase = phase;
    Some(status)
}

/// The phase a step leads to (`None`: the recorded one stays).
fn phase_after(step: &ForgetStep) -> Option<ForgetClusterPhase> {
    match step {
        ForgetStep::Idle | ForgetStep::AwaitPrimary => None,
        ForgetStep::Record { .. } => Some(ForgetClusterPhase::Removing),
        ForgetStep::Finish => Some(ForgetClusterPhase::Done),
        ForgetStep::Refuse { .. } => Some(ForgetClusterPhase::Refused),
    }
}

fn list(hosts: &[MemberAddress]) -> String {
    let hosts: Vec<String> = hosts.iter().map(ToString::to_string).collect();
    hosts.join(", ")
}

#[cfg(test)]
mod tests;
