//! `kubectl mongodb forget-cluster` (pure): what the plugin tells the SRE
//! before it asks one surviving cluster's operator to forget a lost cluster,
//! when it refuses to ask, and the phases it follows afterwards
//! (`docs/disaster-recovery.md`).
//!
//! The dry run comes from the surviving cluster's `status.replset`: the
//! members at the lost cluster's VIP, which its operator would remove, and
//! the members it keeps. The operator checks again on its own (phase
//! `Removing`, or `Refused`); the plugin only asks. It refuses to ask when a
//! member at that VIP is still up (the cluster is not lost), when the set
//! lost its voting majority (that is `recover`'s case), when no member is at
//! that VIP, or while another request is under way.

use std::fmt;

use crate::api::{ForgetClusterPhase, ForgetClusterStatus, MongoDB, FORGET_CLUSTER_ANNOTATION};
use crate::status::{condition, ConditionType};

use super::list;

/// The reason a lost voting majority is reported with.
const MAJORITY_LOST: &str = "VotingMajorityLost";

/// The annotation's value: the VIP, then why (it names the request, so that
/// the same cluster can be asked about again after a refusal).
pub fn request(cluster: &str, reason: &str) -> String {
    format!("{cluster} {}", reason.trim())
}

/// What asking cluster `context` to forget `cluster` would do, as its status
/// tells.
#[derive(Clone, Debug, PartialEq)]
pub struct DryRun {
    /// The cluster asked.
    pub context: String,
    /// The VIP of the cluster to forget.
    pub cluster: String,
    /// The config version the cluster asked last saw.
    pub config_version: Option<i64>,
    /// The members at that VIP (`host (state)`): removed.
    pub removing: Vec<String>,
    /// The others: kept.
    pub keeping: Vec<String>,
}

/// Why the plugin does not ask.
#[derive(Clone, Debug, PartialEq)]
pub enum Refusal {
    /// The cluster's operator has not reported yet.
    NoStatus { context: String },
    /// No member of the set is at that VIP.
    NotInSet {
        context: String,
        cluster: String,
        clusters: Vec<String>,
    },
    /// Members at that VIP are up: the cluster is not lost.
    ClusterAnswers {
        context: String,
        cluster: String,
        up: Vec<String>,
    },
    /// The set lost its voting majority: `recover`'s case.
    MajorityLost { context: String },
    /// Another request is being carried out.
    OtherInProgress {
        context: String,
        request: String,
        phase: ForgetClusterPhase,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NoStatus { context } => write!(
                f,
                "cluster {context} has no status yet: its operator has not reported; nothing asked"
            ),
            Refusal::NotInSet {
                context,
                cluster,
                clusters,
            } => write!(
                f,
                "cluster {context} sees no member of the set at {cluster}; the set's members are \
                 at {} (the host part of each member, as `kubectl mongodb status` shows them); \
                 nothing asked",
                list(clusters)
            ),
            Refusal::ClusterAnswers {
                context,
                cluster,
                up,
            } => write!(
                f,
                "cluster {context} sees members at {cluster} up ({}): that cluster is not lost; \
                 stop or fence it first, or scale it to 0 through the control plane; nothing \
                 asked",
                list(up)
            ),
            Refusal::MajorityLost { context } => write!(
                f,
                "cluster {context} reports {MAJORITY_LOST}: no reconfig can be made without \
                 forcing one; that is `kubectl mongodb recover` (docs/disaster-recovery.md); \
                 nothing asked"
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

/// The dry run of asking `context` (whose object is `mongodb`) to forget
/// the cluster at VIP `cluster`, or why the plugin refuses to ask.
pub fn dry_run(context: &str, mongodb: &MongoDB, cluster: &str) -> Result<DryRun, Refusal> {
    let context = context.to_string();
    let Some(status) = mongodb.status.as_ref() else {
        return Err(Refusal::NoStatus { context });
    };
    if let Some(forgetting) = status
        .forget_cluster
        .as_ref()
        .filter(|f| f.phase == ForgetClusterPhase::Removing)
    {
        return Err(Refusal::OtherInProgress {
            context,
            request: forgetting.request.clone(),
            phase: forgetting.phase,
        });
    }
    let degraded = condition(Some(status), ConditionType::Degraded);
    if degraded.is_some_and(|c| c.status == "True" && c.reason == MAJORITY_LOST) {
        return Err(Refusal::MajorityLost { context });
    }
    let at_cluster = |name: &str| name.rsplit_once(':').is_some_and(|(vip, _)| vip == cluster);
    let (removing, keeping): (Vec<_>, Vec<_>) =
        status.replset.iter().partition(|m| at_cluster(&m.name));
    if removing.is_empty() {
        let mut clusters: Vec<String> = keeping
            .iter()
            .filter_map(|m| m.name.rsplit_once(':').map(|(vip, _)| vip.to_string()))
            .collect();
        clusters.sort();
        clusters.dedup();
        return Err(Refusal::NotInSet {
            context,
            cluster: cluster.to_string(),
            clusters,
        });
    }
    let up: Vec<String> = removing
        .iter()
        .filter(|m| m.health >= 1.0)
        .map(|m| format!("{} ({})", m.name, m.state_str))
        .collect();
    if !up.is_empty() {
        return Err(Refusal::ClusterAnswers {
            context,
            cluster: cluster.to_string(),
            up,
        });
    }
    let described = |members: &[&crate::api::ReplSetMemberStatus]| {
        members
            .iter()
            .map(|m| format!("{} ({})", m.name, m.state_str))
            .collect()
    };
    Ok(DryRun {
        context,
        cluster: cluster.to_string(),
        config_version: status.config_version,
        removing: described(&removing),
        keeping: described(&keeping),
    })
}

impl fmt::Display for DryRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let version = self
            .config_version
            .map_or("?".to_string(), |v| v.to_string());
        writeln!(
            f,
            "cluster {} would forget cluster {}: remove its members from the set, one safe \
             reconfig at a time, as its status.replset shows them now (config version \
             {version}; the operator checks again):\n  remove: {}\n  keep:   {}",
            self.context,
            self.cluster,
            list(&self.removing),
            list(&self.keeping)
        )?;
        write!(
            f,
            "they are recorded in the set first, and kept out as they are if the cluster comes \
             back (to bring one back, delete its PersistentVolumeClaim and pod: it resyncs from \
             scratch). Use this only for a cluster lost for good."
        )
    }
}

/// The question asked on a terminal without `--yes`.
pub fn question(context: &str, name: &str, cluster: &str) -> String {
    format!("Ask cluster {context}'s operator to remove {cluster}'s members from {name}? [y/N] ")
}

/// The merge patch that asks: the annotation, with the request as its value.
pub fn annotation_patch(request: &str) -> serde_json::Value {
    serde_json::json!({ "metadata": { "annotations": { FORGET_CLUSTER_ANNOTATION: request } } })
}

/// The forgetting of this request in `mongodb`'s status, once its operator
/// took it up.
pub fn progress<'a>(mongodb: &'a MongoDB, request: &str) -> Option<&'a ForgetClusterStatus> {
    mongodb
        .status
        .as_ref()?
        .forget_cluster
        .as_ref()
        .filter(|f| f.request == request)
}

/// One line per phase, in the operator's words.
pub fn phase_line(forgetting: &ForgetClusterStatus) -> String {
    format!("{:?}: {}", forgetting.phase, forgetting.message)
}

#[cfg(test)]
mod tests;
