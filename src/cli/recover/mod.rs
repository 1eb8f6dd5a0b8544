//! `kubectl mongodb recover` (pure): what the plugin tells the SRE before it
//! asks one cluster's operator for a disaster recovery, when it refuses to
//! ask, and the phases it follows afterwards (`docs/disaster-recovery.md`).
//!
//! The dry run comes from the chosen cluster's status: condition `Degraded`
//! with reason `VotingMajorityLost` names the voters gone, which is what a
//! forced reconfig from that cluster drops; `status.replset` shows the
//! members that still answer, which it keeps. The operator's own plan
//! (`status.recovery`, phase `Planned`) is what counts; the plugin only asks.
//! It refuses to ask when the cluster does not report a lost voting
//! majority, when this very request was answered already (the operator
//! ignores a request it has seen: ask with another reason), or while another
//! request is under way.

use std::fmt;

use crate::api::{MongoDB, RecoveryPhase, RecoveryStatus, RECOVERY_ANNOTATION};
use crate::status::{condition, ConditionType};

use super::list;

/// The reason a lost voting majority is reported with.
const MAJORITY_LOST: &str = "VotingMajorityLost";

/// Checks `--reason`: it names the request, so it must not be blank.
pub fn parse_reason(reason: &str) -> Result<String, String> {
    if reason.trim().is_empty() {
        Err(
            "the reason must not be empty: say why, e.g. \"clusters b and c lost, ticket 4711\""
                .into(),
        )
    } else {
        Ok(reason.to_string())
    }
}

/// What asking cluster `context` for recovery would do, as its status tells.
#[derive(Clone, Debug, PartialEq)]
pub struct DryRun {
    /// The cluster asked.
    pub context: String,
    /// Why the set needs it: the `VotingMajorityLost` message (the voters
    /// gone), or the recovery's message when it is under way already.
    pub lost: String,
    /// The config version the cluster last saw.
    pub config_version: Option<i64>,
    /// The members that answer (`host (state)`): a forced config keeps them.
    pub keeping: Vec<String>,
    /// The members that do not: a forced config drops them.
    pub dropping: Vec<String>,
    /// This request is on the object already: follow it, do not ask again.
    pub already_asked: bool,
}

/// Why the plugin does not ask.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// The cluster's operator has not reported yet.
    NoStatus { context: String },
    /// The cluster does not report a lost voting majority.
    MajorityNotLost { context: String, degraded: String },
    /// This request was carried out or refused already; the operator ignores it.
    AlreadyAnswered {
        context: String,
        phase: RecoveryPhase,
        message: String,
    },
    /// Another request is being carried out.
    OtherInProgress {
        context: String,
        request: String,
        phase: RecoveryPhase,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoStatus { context } => write!(
                f,
                "cluster {context} has no status yet: its operator has not reported; nothing asked"
            ),
            Refusal::MajorityNotLost { context, degraded } => write!(
                f,
                "cluster {context} does not report {MAJORITY_LOST} ({degraded}); a forced reconfig \
                 is only for a set that lost a majority of its voters; nothing asked"
            ),
            Refusal::AlreadyAnswered {
                context,
                phase,
                message,
            } => write!(
                f,
                "cluster {context} answered this request already ({phase:?}: {message}); its \
                 operator never looks at a request twice: ask with another reason; nothing asked"
            ),
            Refusal::OtherInProgress {
                context,
                request,
                phase,
            } => write!(
                f,
                "cluster {context} is carrying out another request (\"{request}\", {phase:?}): \
                 follow it with `kubectl mongodb status`; nothing asked"
            ),
        }
    }
}

/// The dry run of asking `context` (whose object is `mongodb`) for a
/// recovery with `reason`, or why the plugin refuses to ask.
pub fn dry_run(context: &str, mongodb: &MongoDB, reason: &str) -> Result<DryRun, Refusal> {
    let context = context.to_string();
    let Some(status) = mongodb.status.as_ref() else {
        return Err(Refusal::NoStatus { context });
    };
    let asked = mongodb
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(RECOVERY_ANNOTATION))
        .is_some_and(|value| value == reason);
    let mut under_way = None;
    if let Some(recovery) = &status.recovery {
        let answered = matches!(recovery.phase, RecoveryPhase::Done | RecoveryPhase::Refused);
        match (recovery.request == reason, answered) {
            (true, true) => {
                return Err(Refusal::AlreadyAnswered {
                    context,
                    phase: recovery.phase,
                    message: recovery.message.clone(),
                })
            }
            (true, false) => under_way = Some(recovery.message.clone()),
            (false, false) => {
                return Err(Refusal::OtherInProgress {
                    context,
                    request: recovery.request.clone(),
                    phase: recovery.phase,
                })
            }
            (false, true) => {}
        }
    }
    let degraded = condition(Some(status), ConditionType::Degraded);
    let lost = match (degraded, under_way) {
        (_, Some(message)) => message,
        (Some(c), None) if c.status == "True" && c.reason == MAJORITY_LOST => c.message.clone(),
        (c, None) => {
            let degraded = c.map_or("no Degraded condition".to_string(), |c| {
                format!("Degraded {} {}: {}", c.status, c.reason, c.message)
            });
            return Err(Refusal::MajorityNotLost { context, degraded });
        }
    };
    let (up, down): (Vec<_>, Vec<_>) = status.replset.iter().partition(|m| m.health >= 1.0);
    Ok(DryRun {
        context,
        lost,
        config_version: status.config_version,
        keeping: up
            .iter()
            .map(|m| format!("{} ({})", m.name, m.state_str))
            .collect(),
        dropping: down.iter().map(|m| m.name.clone()).collect(),
        already_asked: asked,
    })
}

impl fmt::Display for DryRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let version = self
            .config_version
            .map_or("?".to_string(), |v| v.to_string());
        writeln!(
            f,
            "cluster {} reports {MAJORITY_LOST} (config version {version}):\n  {}",
            self.context, self.lost
        )?;
        writeln!(
            f,
            "a forced reconfig from {} would, as its status.replset shows now (the operator's plan \
             in status.recovery is what counts):\n  keep: {}\n  drop: {}",
            self.context,
            list(&self.keeping),
            list(&self.dropping)
        )?;
        write!(
            f,
            "writes acknowledged only by the dropped members are lost, and if they are alive \
             behind a partition two primaries can take writes: make sure the lost clusters are \
             down or fenced first."
        )
    }
}

/// The question asked on a terminal without `--yes`.
pub fn question(context: &str, name: &str) -> String {
    format!("Ask cluster {context}'s operator to force this reconfig of {name}? [y/N] ")
}

/// Whether an answer to [`question`] is yes.
pub fn confirmed(answer: &str) -> bool {
    matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes")
}

/// The merge patch that asks: the annotation, with the reason as its value.
pub fn annotation_patch(reason: &str) -> serde_json::Value {
    serde_json::json!({ "metadata": { "annotations": { RECOVERY_ANNOTATION: reason } } })
}

/// The recovery of this request in `mongodb`'s status, once its operator
/// took it up.
pub fn progress<'a>(mongodb: &'a MongoDB, reason: &str) -> Option<&'a RecoveryStatus> {
    mongodb
        .status
        .as_ref()?
        .recovery
        .as_ref()
        .filter(|r| r.request == reason)
}

/// One line per phase, in the operator's words (which name what it keeps
/// and drops).
pub fn phase_line(recovery: &RecoveryStatus) -> String {
    format!("{:?}: {}", recovery.phase, recovery.message)
}

#[cfg(test)]
mod tests;
