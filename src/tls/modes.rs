//! The TLS mode a cluster's members are built with, moved set-wide one step
//! at a time, and the invariant every restart keeps: across the whole set the
//! highest mode and the lowest are never more than one step apart
//! ([`restart_keeps_modes_adjacent`], checked by the roll before each
//! restart).
//!
//! Members of adjacent modes talk: one at `preferTLS` or `requireTLS` dials
//! its peers over TLS, one at `disabled` or `allowTLS` in plain text
//! (mongod's `net.tls.mode`); `disabled` refuses TLS, `requireTLS` refuses
//! plain, the two middle modes take both. Two steps apart, one of them
//! refuses what the other dials (`disabled` and `preferTLS`, `allowTLS` and
//! `requireTLS`). Each step is a restart of every member through the roll
//! (one member of the set down at a time, the primary last): mongod's
//! `setParameter tlsMode` moves up only and is lost when the container
//! restarts, which a pod's own arguments are not.

use std::collections::BTreeMap;
use std::fmt;

use crate::api::{ClusterAuthMode, TlsMode};
use crate::hostconf::MemberAddress;

/// What a member runs of TLS, as one rung of the ladder the set climbs one
/// rung at a time: the four modes, then, at `requireTLS`, the cluster
/// authentication modes that use certificates. Two members one rung apart
/// talk: `sendKeyFile` accepts the certificate `sendX509` sends, `sendX509`
/// the keyfile `sendKeyFile` sends (mongod's `ClusterAuthMode`); two apart,
/// one refuses what the other sends (`keyFile` a certificate, `x509` a
/// keyfile).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct TlsStep {
    /// `--tlsMode`.
    pub mode: TlsMode,
    /// `--clusterAuthMode`; other than `keyFile` only at `requireTLS`.
    pub auth: ClusterAuthMode,
}

impl TlsStep {
    /// The rung of `mode` with keyfiles.
    pub const fn keyfile(mode: TlsMode) -> TlsStep {
        TlsStep {
            mode,
            auth: ClusterAuthMode::KeyFile,
        }
    }

    /// The rung of `mode` and `auth` (`auth` dropped below `requireTLS`,
    /// which the API refuses).
    pub fn of(mode: TlsMode, auth: ClusterAuthMode) -> TlsStep {
        match mode {
            TlsMode::RequireTls => TlsStep { mode, auth },
            _ => TlsStep::keyfile(mode),
        }
    }
}

impl From<TlsMode> for TlsStep {
    fn from(mode: TlsMode) -> TlsStep {
        TlsStep::keyfile(mode)
    }
}

/// `requireTLS`, or `requireTLS/x509` with a cluster authentication mode.
impl fmt::Display for TlsStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.auth {
            ClusterAuthMode::KeyFile => f.write_str(self.mode.as_str()),
            auth => write!(f, "{}/{}", self.mode.as_str(), auth.as_str()),
        }
    }
}

/// The step every member of the config runs, as its operator reported it
/// (`None`: not reported).
pub type ModesRun = BTreeMap<MemberAddress, Option<TlsStep>>;

/// Where a cluster's mode stands, for condition `TLSReady`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
pub enum ModeStanding {
    /// Every member of the set runs the spec's mode.
    InPlace,
    /// The set moves towards the spec's mode: the members named do not run
    /// this cluster's template yet (restarts under way here or elsewhere).
    Stepping,
    /// The members' modes have not been read since the operator started.
    ModesUnknown,
}

/// What a cluster's members are to run, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModePlan {
    /// The mode of the template.
    pub template: TlsStep,
    /// Where it stands.
    pub standing: ModeStanding,
    /// The members the next step waits for (with `WaitingForPeers`).
    pub waiting_for: Vec<(MemberAddress, Option<TlsStep>)>,
}

/// The mode one step from `from` towards `to` (`from` when they are equal).
pub fn step_towards(from: TlsStep, to: TlsStep) -> TlsStep {
    let index = rank(from);
    let next = match rank(to).cmp(&index) {
        std::cmp::Ordering::Greater => index + 1,
        std::cmp::Ordering::Less => index - 1,
        std::cmp::Ordering::Equal => index,
    };
    MODES[next]
}

/// The mode this cluster's template runs: the mode nearest `desired` within
/// one step of every mode reported, so that each restart onto it keeps the
/// set within one step; the set moves one step at a time as the members
/// farthest behind catch up. Before any report is read, the mode the
/// members are `built` with, or `desired` for a new set.
pub fn plan_mode(desired: TlsStep, built: Option<TlsStep>, run: Option<&ModesRun>) -> ModePlan {
    let known: Vec<TlsStep> = run.into_iter().flatten().filter_map(|(_, m)| *m).collect();
    let template = match (known.iter().min(), known.iter().max(), built) {
        (Some(lowest), Some(highest), _) => {
            let floor = rank(*highest).saturating_sub(1);
            let ceiling = (rank(*lowest) + 1).min(MODES.len() - 1);
            MODES[rank(desired).clamp(floor, ceiling)]
        }
        (_, _, Some(built)) => built,
        _ => desired,
    };
    let Some(run) = run else {
        return ModePlan {
            template,
            standing: ModeStanding::ModesUnknown,
            waiting_for: Vec::new(),
        };
    };
    let waiting_for: Vec<(MemberAddress, Option<TlsStep>)> = run
        .iter()
        .filter(|(_, mode)| **mode != Some(template))
        .map(|(member, mode)| (member.clone(), *mode))
        .collect();
    let standing = if template == desired && waiting_for.is_empty() {
        ModeStanding::InPlace
    } else {
        ModeStanding::Stepping
    };
    ModePlan {
        template,
        standing,
        waiting_for,
    }
}

/// Whether restarting `member` at `mode` keeps every mode of the set within
/// one step: every other member of `run` reported, and within one step of
/// `mode` and of each other. `Err`: the first member in the way, with the
/// mode reported for it.
pub fn restart_keeps_modes_adjacent(
    member: &MemberAddress,
    mode: TlsStep,
    run: &ModesRun,
) -> Result<(), (MemberAddress, Option<TlsStep>)> {
    let others = run.iter().filter(|(other, _)| *other != member);
    let mut lowest = mode;
    let mut highest = mode;
    for (other, reported) in others {
        let Some(reported) = reported else {
            return Err((other.clone(), None));
        };
        lowest = lowest.min(*reported);
        highest = highest.max(*reported);
        if rank(highest) - rank(lowest) > 1 {
            return Err((other.clone(), Some(*reported)));
        }
    }
    Ok(())
}

/// Whether this pass's MongoDB clients use TLS: not while any member of the
/// set runs, or is built to run, `disabled` (it refuses TLS); every other
/// mode takes TLS. Before any report is read, TLS only for a template at
/// `requireTLS` (the other modes take plain connections).
pub fn clients_use_tls(template: TlsStep, built: Option<TlsStep>, run: Option<&ModesRun>) -> bool {
    let built = built.unwrap_or(template);
    let disabled = |step: &TlsStep| step.mode == TlsMode::Disabled;
    match run {
        Some(run) => {
            !disabled(&template)
                && !disabled(&built)
                && run.values().all(|m| !m.as_ref().is_some_and(disabled))
        }
        None => template.mode == TlsMode::RequireTls && built.mode == TlsMode::RequireTls,
    }
}

/// The ladder, weakest first.
const MODES: [TlsStep; 7] = [
    TlsStep::keyfile(TlsMode::Disabled),
    TlsStep::keyfile(TlsMode::AllowTls),
    TlsStep::keyfile(TlsMode::PreferTls),
    TlsStep::keyfile(TlsMode::RequireTls),
    TlsStep {
        mode: TlsMode::RequireTls,
        auth: ClusterAuthMode::SendKeyFile,
    },
    TlsStep {
        mode: TlsMode::RequireTls,
        auth: ClusterAuthMode::SendX509,
    },
    TlsStep {
        mode: TlsMode::RequireTls,
        auth: ClusterAuthMode::X509,
    },
];

fn rank(step: TlsStep) -> usize {
    MODES.iter().position(|m| *m == step).unwrap_or(0)
}

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
