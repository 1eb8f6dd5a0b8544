//! The roll planner: which local member's pod to replace next so that a change
//! of the pod's revision (image, resources, config, the content of the custom
//! config and credentials) reaches every member while **never more than one
//! member of the whole set is down for it**.
//!
//! Pure: no client, no async, no clock (`now` is an input). Member
//! StatefulSets use `OnDelete`; the controller replaces a pod only when
//! [`plan_roll`] says so, after the replica set's membership is in sync.
//!
//! The operators of different clusters share nothing but the replica set, so
//! the set-wide "one at a time" is a **lease**: one document in the set,
//! written with w:"majority", naming the member being restarted
//! (`docs/rolling-changes.md` says why this is safe). A cluster:
//!
//! 1. publishes, for each local member, whether its pod runs its StatefulSet's
//!    revision and which MongoDB version it runs (the member reports);
//! 2. takes the lease for one outdated local member — secondaries and the
//!    arbiter first, the primary last and only once every other member reports
//!    being up to date on the same revision (a cluster still on another one
//!    has most likely not got the change yet: waited for, at most
//!    [`REVISION_PROPAGATION_GRACE_MILLIS`]) — only while every member of the set is healthy
//!    (PRIMARY, SECONDARY or ARBITER), caught up, and no lease is held (or the
//!    held one expired);
//! 3. holding the lease (renewed by every step it takes), steps the member down
//!    if it is the primary and another member can take over (when none ever
//!    can, it restarts it without a step-down; a refused step-down is asked
//!    again only after a back-off), then replaces its pod, re-checking the
//!    set's health first and that a voting majority of the config stays up;
//! 4. releases the lease once the member answers on the new revision, healthy
//!    and caught up, as seen by itself and by the primary.

use std::collections::BTreeMap;
use std::fmt;

use crate::api::MongoDB;
use crate::hostconf::MemberAddress;
use crate::keyfile::{KeyFingerprint, KeysRun};
use crate::member::MemberSlot;
use crate::observe::{MemberProbe, ObservedSet};
use crate::replset::MemberState;
use crate::tls::modes::{ModesRun, TlsStep};
use crate::validate::Validated;
use peers::{keeps_a_shared_key, keeps_modes_adjacent, keeps_one_membership};

/// How long a lease lasts unless renewed. Every step of the holder renews it;
/// it expires only when the holder's operator is gone for that long.
pub const LEASE_TTL_MILLIS: i64 = 5 * 60 * 1000;
/// How far behind the primary a secondary may be and still count as caught up.
pub const CAUGHT_UP_LAG_SECS: i64 = 5;
/// How long the primary's restart waits, from its own new revision, for a
/// member whose cluster still publishes another revision: a change reaches
/// the clusters one after the other. Past it the difference is taken for a
/// deliberate per-cluster one and the primary goes.
pub const REVISION_PROPAGATION_GRACE_MILLIS: i64 = 60 * 1000;

/// The set-wide restart lease, as stored in the replica set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The member being restarted (its host is its cluster's VIP).
    pub member: MemberAddress,
    /// Whether it was the primary when the lease was taken.
    pub primary: bool,
    /// When the lease was taken (Unix milliseconds, the taker's clock): with
    /// `member`, the lease's identity for compare-and-swap.
    pub acquired_at_millis: i64,
    /// When the lease expires unless renewed (Unix milliseconds).
    pub expires_at_millis: i64,
}

impl Lease {
    /// A new lease for `member` taken at `now`.
    pub fn new(member: MemberAddress, primary: bool, now_millis: i64) -> Self {
        Lease {
            member,
            primary,
            acquired_at_millis: now_millis,
            expires_at_millis: now_millis + LEASE_TTL_MILLIS,
        }
    }

    /// Whether it expired at `now`.
    pub fn expired(&self, now_millis: i64) -> bool {
        now_millis >= self.expires_at_millis
    }
}

/// What a member's operator published about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemberReport {
    /// Whether its pod runs its StatefulSet's revision.
    pub up_to_date: bool,
    /// The MongoDB version it runs (`MAJOR.MINOR.PATCH`), when known.
    pub version: Option<String>,
    /// Its StatefulSet's revision (`None` from operators that predate it):
    /// the same in every cluster once a change has reached them all.
    pub revision: Option<String>,
    /// Since when (Unix milliseconds, the publisher's clock) it publishes
    /// that revision.
    pub revision_since_millis: Option<i64>,
    /// The fingerprints of the keys of the keyfile its pod runs (`None`: a
    /// pod built before keyfiles were the operator's, or an older operator).
    pub keyfile: Option<Vec<KeyFingerprint>>,
    /// The TLS mode and cluster authentication its pod runs (`None`: it
    /// has no pod).
    pub tls_mode: Option<TlsStep>,
    /// The cluster membership its certificate names (DC, O, OU: `None`:
    /// without TLS, or an older operator).
    pub membership: Option<String>,
}

/// One local member, as the roll sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalPod {
    /// Which member.
    pub slot: MemberSlot,
    /// Its host in the config.
    pub address: MemberAddress,
    /// The revision its StatefulSet's pod template carries.
    pub desired_revision: String,
    /// The fingerprints of the keys of the keyfile its template runs.
    pub desired_keyfile: Option<Vec<KeyFingerprint>>,
    /// The TLS mode and cluster authentication its template runs.
    pub desired_tls_mode: TlsStep,
    /// The cluster membership its certificate names.
    pub membership: Option<String>,
    /// Its pod, when one exists.
    pub pod: Option<PodFacts>,
    /// Its own state, as it answered when asked directly.
    pub state: Option<MemberState>,
    /// The MongoDB version it answered with, when it answered.
    pub version: Option<String>,
}

/// What is known of a member's pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodFacts {
    /// `metadata.uid`: a replacement is deleted with it as precondition.
    pub uid: String,
    /// The revision annotation it was created with.
    pub revision: Option<String>,
    /// The keyfile keys annotation it was created with.
    pub keyfile: Option<Vec<KeyFingerprint>>,
    /// The TLS mode and cluster authentication annotations it was created
    /// with (absent: disabled, keyFile).
    pub tls_mode: TlsStep,
    /// Whether it is being deleted.
    pub terminating: bool,
}

impl LocalPod {
    /// Whether its pod runs another revision than its StatefulSet's.
    pub fn outdated(&self) -> bool {
        self.pod.as_ref().is_some_and(|pod| {
            !pod.terminating && pod.revision.as_deref() != Some(&self.desired_revision)
        })
    }

    /// What this cluster publishes about it at `now`, given what it
    /// published before (which says since when it has had its revision).
    pub fn report(&self, previous: Option<&MemberReport>, now_millis: i64) -> MemberReport {
        let revision_since_millis = previous
            .filter(|p| p.revision.as_deref() == Some(&self.desired_revision))
            .and_then(|p| p.revision_since_millis)
            .unwrap_or(now_millis);
        MemberReport {
            up_to_date: self
                .pod
                .as_ref()
                .is_some_and(|pod| pod.revision.as_deref() == Some(&self.desired_revision)),
            version: self.version.clone(),
            revision: Some(self.desired_revision.clone()),
            revision_since_millis: Some(revision_since_millis),
            keyfile: self.pod.as_ref().and_then(|pod| pod.keyfile.clone()),
            tls_mode: self.pod.as_ref().map(|pod| pod.tls_mode),
            membership: self.membership.clone(),
        }
    }
}

/// The lease as read from the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LeaseView {
    /// No lease document: nobody is restarting.
    Free,
    /// Held (maybe expired).
    Held(Lease),
}

/// The roll's state shared through the replica set, as read from the primary.
#[derive(Clone, Debug, PartialEq)]
pub struct RollState {
    /// The lease.
    pub lease: LeaseView,
    /// Every member's report.
    pub reports: BTreeMap<MemberAddress, MemberReport>,
}

/// Everything the roll planner decides from.
#[derive(Clone, Debug, PartialEq)]
pub struct RollInput {
    /// This cluster's VIP: a lease for a member behind it is this cluster's.
    pub local_vip: String,
    /// This cluster's members that are in the config, in slot order.
    pub local: Vec<LocalPod>,
    /// The set as read from its primary.
    pub set: ObservedSet,
    /// The lease, read with readConcern "majority" from the primary.
    pub lease: LeaseView,
    /// What every member's operator published, by member.
    pub reports: BTreeMap<MemberAddress, MemberReport>,
    /// The current time (Unix milliseconds).
    pub now_millis: i64,
    /// Whether this cluster may change set-wide settings (the rsInit cluster).
    pub rs_init: bool,
    /// The set's featureCompatibilityVersion, when read.
    pub fcv: Option<String>,
    /// `spec.featureCompatibilityVersion`: the FCV to raise the set to.
    pub requested_fcv: Option<String>,
    /// A primary that refused to step down (262) and is not asked again
    /// before its back-off ends (the controller's memory, shared with the
    /// membership path).
    pub step_down_held: Option<MemberAddress>,
}

impl RollInput {
    /// The keys every member of the config runs, as reported.
    pub fn keys_run(&self) -> KeysRun {
        self.set
            .config
            .members
            .iter()
            .map(|m| {
                let keys = self.reports.get(&m.host).and_then(|r| r.keyfile.clone());
                (m.host.clone(), keys)
            })
            .collect()
    }

    /// The TLS mode every member of the config runs, as reported.
    pub fn modes_run(&self) -> ModesRun {
        self.set
            .config
            .members
            .iter()
            .map(|m| {
                let mode = self.reports.get(&m.host).and_then(|r| r.tls_mode);
                (m.host.clone(), mode)
            })
            .collect()
    }

    /// The roll planner's input: the local members the config holds (by their
    /// address: the roll runs only once the membership is in sync), their pods and
    /// what they answered, the desired revision, and the shared roll state.
    pub fn from_observation(
        mongodb: &MongoDB,
        validated: &Validated,
        observed: RollObservation<'_>,
        desired: DesiredPods<'_>,
        now_millis: i64,
    ) -> Self {
        let RollObservation {
            set,
            probes,
            versions,
            shared,
            fcv,
        } = observed;
        let local = validated
            .stateful_sets
            .iter()
            .filter_map(|(slot, facts)| {
                let address = validated.address(*slot)?;
                set.config.member(&address)?;
                Some(LocalPod {
                    slot: *slot,
                    state: probes.get(&address).and_then(|p| p.state),
                    version: versions.get(&address).cloned(),
                    address,
                    desired_revision: desired.revision.to_owned(),
                    desired_keyfile: desired.keyfile.map(<[_]>::to_vec),
                    desired_tls_mode: desired.tls_mode,
                    membership: desired.membership.map(str::to_owned),
                    pod: facts.pod.clone(),
                })
            })
            .collect();
        Self {
            local_vip: validated.vip.clone(),
            local,
            set: set.clone(),
            lease: shared.lease,
            reports: shared.reports,
            now_millis,
            rs_init: mongodb.spec.rs_init,
            fcv,
            requested_fcv: mongodb.spec.feature_compatibility_version.clone(),
            step_down_held: None,
        }
    }
}

/// What the local members' template runs.
#[derive(Clone, Copy, Debug)]
pub struct DesiredPods<'a> {
    /// Its revision.
    pub revision: &'a str,
    /// The fingerprints of its keyfile's keys.
    pub keyfile: Option<&'a [KeyFingerprint]>,
    /// Its TLS mode and cluster authentication.
    pub tls_mode: TlsStep,
    /// The cluster membership its certificate names.
    pub membership: Option<&'a str>,
}

/// What the roll stage read for the roll planner.
pub struct RollObservation<'a> {
    /// The set as read from its primary.
    pub set: &'a ObservedSet,
    /// What each member asked directly answered.
    pub probes: &'a BTreeMap<MemberAddress, MemberProbe>,
    /// The server version of each local member that answered.
    pub versions: &'a BTreeMap<MemberAddress, String>,
    /// The lease and the member reports.
    pub shared: RollState,
    /// The featureCompatibilityVersion, when read.
    pub fcv: Option<String>,
}

/// The one roll step of a pass.
#[derive(Clone, Debug, PartialEq, strum::IntoStaticStr, strum::VariantNames)]
pub enum RollStep {
    /// Every local member runs its revision and this cluster holds no lease.
    #[strum(serialize = "PodsOnRevision")]
    UpToDate,
    /// Take the free lease for this member.
    #[strum(serialize = "TakingRestartLease")]
    Acquire { lease: Lease },
    /// Replace the lease `held` with `lease`: `held` expired, or its member
    /// left the set.
    #[strum(serialize = "TakingOverExpiredLease")]
    TakeOver {
        held: Lease,
        lease: Lease,
        why: LeaseOver,
    },
    /// Renew the lease, then step the primary down (it is restarted next).
    #[strum(serialize = "SteppingDownForRestart")]
    StepDown {
        lease: Lease,
        primary: MemberAddress,
    },
    /// Renew the lease, then delete the member's pod (precondition: its uid);
    /// the StatefulSet controller re-creates it on the new revision.
    /// `caveat`: what this restart costs that a restart normally does not
    /// (said in a Warning Event).
    #[strum(serialize = "RestartingMember")]
    Restart {
        lease: Lease,
        slot: MemberSlot,
        pod_uid: String,
        caveat: Option<RestartCaveat>,
    },
    /// The member is back on its revision: renew, nothing else.
    #[strum(serialize = "RenewingRestartLease")]
    Renew { lease: Lease, reason: RollWait },
    /// The member is back, healthy and caught up: release the lease.
    #[strum(serialize = "ReleasingRestartLease")]
    Release { lease: Lease },
    /// The restarted member's peers refuse its internal authentication
    /// ([`RollWait::KeyfileMismatch`]): waiting changes nothing, so the
    /// lease is released with a Warning Event and the roll stops there. It
    /// goes on once the keyfiles agree: the fix is a new pod template, which
    /// restarts the member again.
    #[strum(serialize = "KeyfileMismatch")]
    StopOnKeyfileMismatch { lease: Lease, reason: RollWait },
    /// Every member runs the requested release and no pod is outdated: raise
    /// the featureCompatibilityVersion.
    #[strum(serialize = "RaisingFeatureCompatibilityVersion")]
    RaiseFeatureCompatibility { version: String },
    /// An outdated member waits.
    Wait { reason: RollWait },
}

/// What an outdated member, or the held lease, waits for.
#[derive(
    Clone, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames,
)]
pub enum RollWait {
    /// Another cluster's member is restarting.
    #[error("{member} (another cluster's member) is restarting")]
    LeaseHeldElsewhere { member: MemberAddress },
    /// A member of the set is not PRIMARY, SECONDARY or ARBITER.
    #[error("{member} is {state}, not healthy")]
    MemberNotHealthy {
        member: MemberAddress,
        state: String,
    },
    /// A secondary is too far behind the primary.
    #[error("{member} is {lag_secs} s behind the primary")]
    MemberLagging {
        member: MemberAddress,
        lag_secs: i64,
    },
    /// A newly added member is still syncing.
    #[error("{member} is newly added and still syncing")]
    MemberSyncing { member: MemberAddress },
    /// The set has no primary.
    #[error("the replica set has no primary")]
    NoPrimary,
    /// The primary reports a member whose heartbeats are refused internal
    /// authentication (`authenticated: false`): the keyfile it runs shares
    /// no key with the primary's.
    #[error(
        "{member} and the primary {primary} refuse each other's internal authentication: the \
         keyfile of cluster {} shares no key with cluster {}'s; compare the keyfile in each \
         cluster's credentials Secret (docs/runbook.md)",
        member.host,
        primary.host
    )]
    KeyfileMismatch {
        member: MemberAddress,
        primary: MemberAddress,
    },
    /// Restarting the member onto its template's keyfile would leave it
    /// sharing no key with `peer` (or `peer` has not reported its keys): the
    /// keyfile is planned again from what the members run.
    #[error(
        "{member} waits to restart onto its new keyfile: {peer} runs none of its keys, or has \
         not reported which it runs"
    )]
    KeyfileWouldShareNoKey {
        member: MemberAddress,
        peer: MemberAddress,
    },
    /// Restarting the member onto its template's TLS mode would leave it two
    /// steps from `peer`'s (or `peer` has not reported its mode): the mode
    /// is planned again from what the members run.
    #[error(
        "{member} waits to restart at TLS mode {mode}: {peer} runs {}, two steps away",
        peer_mode.map_or_else(|| "a mode not reported yet".to_string(), |m| m.to_string())
    )]
    TlsModesWouldSpanTwoSteps {
        member: MemberAddress,
        mode: TlsStep,
        peer: MemberAddress,
        peer_mode: Option<TlsStep>,
    },
    /// Restarting the member onto x.509 membership would meet `peer`, whose
    /// certificate names another membership (or none reported): mongod
    /// takes a peer's certificate only when their subjects agree on DC, O
    /// and OU.
    #[error(
        "{member} waits to restart at TLS mode {mode}: its certificate names {membership:?}, \
         {peer}'s {}",
        peer_membership.as_deref().map_or_else(|| "none reported".to_string(), |m| format!("{m:?}"))
    )]
    X509MembershipDiffers {
        member: MemberAddress,
        mode: TlsStep,
        membership: String,
        peer: MemberAddress,
        peer_membership: Option<String>,
    },
    /// The restarted member is not back yet.
    #[error("{member} is restarting")]
    MemberRestarting { member: MemberAddress },
    /// The restarted member runs but is REMOVED: mongod finds itself at its
    /// `VIP:NodePort` only by connecting to it, which works once the member
    /// Service routes to the re-created pod (Ready); a heartbeat re-checks.
    #[error(
        "{member} restarted and is REMOVED until it finds itself at its VIP:NodePort: mongod \
         connects to that address, which the member Service routes to the pod once it is \
         Ready; if it lasts, the pod cannot reach its own VIP:NodePort (hairpin traffic, \
         docs/runbook.md)"
    )]
    MemberFindingItself { member: MemberAddress },
    /// The primary is restarted last, once every other member is up to date.
    #[error("the primary {primary} restarts last; {member} is not up to date yet")]
    PrimaryRestartsLast {
        primary: MemberAddress,
        member: MemberAddress,
    },
    /// The primary is restarted last: another member's cluster has not got
    /// the change yet (it publishes another revision).
    #[error(
        "the primary {primary} restarts last; {member}'s cluster has not got the change yet \
         (it publishes revision {revision}; waited {waited_secs} s of at most {} s)",
        REVISION_PROPAGATION_GRACE_MILLIS / 1000
    )]
    ChangeNotEverywhereYet {
        primary: MemberAddress,
        member: MemberAddress,
        revision: String,
        waited_secs: i64,
    },
    /// The featureCompatibilityVersion is raised once every member runs the
    /// requested release on an up-to-date pod.
    #[error("featureCompatibilityVersion {requested} waits for {member}: {why}")]
    FeatureCompatibilityWaits {
        requested: String,
        member: MemberAddress,
        why: String,
    },
    /// The primary refused to step down (262: no electable secondary caught
    /// up within the catch-up period); it is asked again after a back-off,
    /// never at the roll's pace (each try refuses writes while it waits).
    #[error("the primary {primary} refused to step down (no electable secondary caught up); asked again after a back-off")]
    StepDownRefused { primary: MemberAddress },
    /// Restarting the member would leave fewer than a voting majority of the
    /// config up (the config or the members' health changed since the
    /// restart was planned, e.g. another cluster's member removed).
    #[error("restarting {member} would leave {up} voting members up, a majority needs {needed}")]
    VotingMajorityWouldBeLost {
        member: MemberAddress,
        up: usize,
        needed: usize,
    },
    /// The featureCompatibilityVersion is only ever raised.
    #[error("spec.featureCompatibilityVersion {requested} is below the set's {fcv}: the operator only raises it")]
    FeatureCompatibilityLowerNotApplied { requested: String, fcv: String },
}

/// Why a lease another cluster holds is over before it is released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LeaseOver {
    /// Its holder did not renew it in time: that operator is gone.
    #[error("it expired unrenewed")]
    Expired,
    /// The committed config no longer holds its member.
    #[error("its member left the set")]
    MemberLeftTheSet,
}

/// What a restart costs beyond one member down, said in a Warning Event.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames,
)]
pub enum RestartCaveat {
    /// The primary restarts without a step-down: no other member can be
    /// elected (it is the only member, or every other one is an arbiter, or
    /// has priority 0, is hidden or does not vote), so mongod would refuse
    /// the step-down (262) after refusing writes for its catch-up period.
    /// The set has no primary until it is back.
    #[strum(serialize = "RestartingPrimaryWithoutStepDown")]
    #[error("no other member can be elected: the primary restarts without a step-down, and the set has no primary until it is back")]
    NoPossibleSuccessor,
    /// The config has two voters: the one left up is no majority, so the
    /// set has no primary until the member is back.
    #[strum(serialize = "RestartingOneOfTwoVoters")]
    #[error("the config has two voters: while it restarts the other is no majority, and the set has no primary until it is back (add a third voter, e.g. an arbiter, to avoid this)")]
    TwoVoters,
}

impl fmt::Display for RollStep {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RollStep::UpToDate => write!(f, "every local member runs its revision"),
            RollStep::Acquire { lease } => write!(f, "take the restart lease for {}", lease.member),
            RollStep::TakeOver { held, lease, why } => write!(
                f,
                "take the restart lease for {} over from {} ({why})",
                lease.member, held.member
            ),
            RollStep::StepDown { primary, .. } => {
                write!(f, "step {primary} down before its restart")
            }
            RollStep::Restart {
                slot,
                lease,
                caveat,
                ..
            } => {
                write!(f, "restart {slot} ({}) on its new revision", lease.member)?;
                match caveat {
                    Some(caveat) => write!(f, ": {caveat}"),
                    None => Ok(()),
                }
            }
            RollStep::Renew { reason, .. } => write!(f, "wait: {reason}"),
            RollStep::Release { lease } => {
                write!(f, "release the restart lease: {} is back", lease.member)
            }
            RollStep::StopOnKeyfileMismatch { reason, .. } => {
                write!(f, "release the restart lease and stop: {reason}")
            }
            RollStep::RaiseFeatureCompatibility { version } => {
                write!(f, "raise the featureCompatibilityVersion to {version}")
            }
            RollStep::Wait { reason } => write!(f, "wait: {reason}"),
        }
    }
}

/// FedState's `restartState`, from the step: the lease this cluster holds says
/// whether a secondary or the primary is being restarted.
pub fn restart_state(step: &RollStep) -> &'static str {
    let lease = match step {
        RollStep::StepDown { lease, .. }
        | RollStep::Restart { lease, .. }
        | RollStep::Renew { lease, .. } => lease,
        _ => return "NotInProcess",
    };
    if lease.primary {
        "PrimaryDeleted"
    } else {
        "SecondaryDeleted"
    }
}

/// The one next roll step.
pub fn plan_roll(input: &RollInput) -> RollStep {
    if let LeaseView::Held(lease) = &input.lease {
        if let Some(member) = input.local.iter().find(|m| m.address == lease.member) {
            return continue_restart(input, lease, member);
        }
        if lease.member.host == input.local_vip {
            // Ours, for a member no longer in the config (removed meanwhile).
            return RollStep::Release {
                lease: lease.clone(),
            };
        }
    }
    let Some(candidate) = next_to_restart(input) else {
        return feature_compatibility(input);
    };
    let is_primary = input.set.primary.as_ref() == Some(&candidate.address);
    if is_primary {
        if let Some(member) = first_outdated_elsewhere(input, &candidate.address) {
            return RollStep::Wait {
                reason: RollWait::PrimaryRestartsLast {
                    primary: candidate.address.clone(),
                    member,
                },
            };
        }
        if let Some(reason) = change_not_everywhere_yet(input, candidate) {
            return RollStep::Wait { reason };
        }
    }
    if let Err(reason) = set_healthy_but(input, Some(&candidate.address)) {
        return RollStep::Wait { reason };
    }
    if let Err(reason) = keeps_a_shared_key(input, candidate) {
        return RollStep::Wait { reason };
    }
    if let Err(reason) = keeps_modes_adjacent(input, candidate) {
        return RollStep::Wait { reason };
    }
    if let Err(reason) = keeps_one_membership(input, candidate) {
        return RollStep::Wait { reason };
    }
    let lease = Lease::new(candidate.address.clone(), is_primary, input.now_millis);
    match &input.lease {
        LeaseView::Free => RollStep::Acquire { lease },
        LeaseView::Held(held) if held.expired(input.now_millis) => RollStep::TakeOver {
            held: held.clone(),
            lease,
            why: LeaseOver::Expired,
        },
        LeaseView::Held(held) if outlived(input, held) => RollStep::TakeOver {
            held: held.clone(),
            lease,
            why: LeaseOver::MemberLeftTheSet,
        },
        LeaseView::Held(held) => RollStep::Wait {
            reason: RollWait::LeaseHeldElsewhere {
                member: held.member.clone(),
            },
        },
    }
}

/// With every local pod up to date: in the rsInit cluster, the raise of the
/// featureCompatibilityVersion when asked and every data member of the set
/// runs the requested release on an up-to-date pod and nobody is restarting.
fn feature_compatibility(input: &RollInput) -> RollStep {
    let (Some(requested), Some(fcv)) = (&input.requested_fcv, &input.fcv) else {
        return RollStep::UpToDate;
    };
    let (Some(wanted), Some(current)) = (release(requested), release(fcv)) else {
        return RollStep::UpToDate;
    };
    if wanted == current || !input.rs_init {
        return RollStep::UpToDate;
    }
    if wanted < current {
        return RollStep::Wait {
            reason: RollWait::FeatureCompatibilityLowerNotApplied {
                requested: requested.clone(),
                fcv: fcv.clone(),
            },
        };
    }
    let waits = |member: &MemberAddress, why: String| RollStep::Wait {
        reason: RollWait::FeatureCompatibilityWaits {
            requested: requested.clone(),
            member: member.clone(),
            why,
        },
    };
    for entry in input.set.config.members.iter().filter(|m| !m.arbiter_only) {
        let report = input.reports.get(&entry.host);
        let runs = report.and_then(|r| r.version.as_deref());
        match (report, runs.and_then(release)) {
            (None, _) => return waits(&entry.host, "no report from its cluster".into()),
            (Some(r), _) if !r.up_to_date => {
                return waits(&entry.host, "its pod is outdated".into())
            }
            (_, Some(runs)) if runs >= wanted => {}
            _ => {
                let why = format!("it runs {}", runs.unwrap_or("an unknown version"));
                return waits(&entry.host, why);
            }
        }
    }
    if let Err(reason) = set_healthy_but(input, None) {
        return RollStep::Wait { reason };
    }
    if let LeaseView::Held(lease) = &input.lease {
        if !outlived(input, lease) {
            let reason = RollWait::LeaseHeldElsewhere {
                member: lease.member.clone(),
            };
            return RollStep::Wait { reason };
        }
    }
    RollStep::RaiseFeatureCompatibility {
        version: requested.clone(),
    }
}

/// Whether `lease` names a member the committed config no longer holds: its
/// cluster took it out of the set (a scale to 0, the object deleted), and a
/// cluster that leaves runs no roll to release the lease. That member's
/// restart can take no member of the set down, so the lease protects nothing
/// and is taken over at once instead of being waited for until it expires.
fn outlived(input: &RollInput, lease: &Lease) -> bool {
    input.set.config_committed && !input.set.config.contains(&lease.member)
}

/// `MAJOR.MINOR[.PATCH…]` as `(major, minor)`.
fn release(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split('.');
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The step for a member this cluster holds the lease for.
fn continue_restart(input: &RollInput, lease: &Lease, member: &LocalPod) -> RollStep {
    let lease = lease.clone();
    if member.outdated() {
        if let Err(reason) = set_healthy_but(input, Some(&member.address)) {
            return RollStep::Renew { lease, reason };
        }
        if let Err(reason) = majority_stays_up(&input.set, &member.address) {
            return RollStep::Renew { lease, reason };
        }
        let mut caveat = two_voters(&input.set, &member.address);
        if input.set.primary.as_ref() == Some(&member.address) {
            let primary = member.address.clone();
            if !input
                .set
                .config
                .members
                .iter()
                .any(|m| m.host != primary && m.is_electable())
            {
                caveat = Some(RestartCaveat::NoPossibleSuccessor);
            } else if input.step_down_held.as_ref() == Some(&primary) {
                let reason = RollWait::StepDownRefused { primary };
                return RollStep::Renew { lease, reason };
            } else if input.set.has_electable_successor(&primary, |_| true) {
                return RollStep::StepDown { lease, primary };
            } else {
                // An electable member exists but is not a healthy secondary
                // right now: wait for it rather than asking mongod to wait.
                let reason = RollWait::MemberNotHealthy {
                    member: primary,
                    state: "PRIMARY without an electable secondary".to_owned(),
                };
                return RollStep::Renew { lease, reason };
            }
        }
        let pod_uid = member
            .pod
            .as_ref()
            .map(|p| p.uid.clone())
            .unwrap_or_default();
        return RollStep::Restart {
            lease,
            slot: member.slot,
            pod_uid,
            caveat,
        };
    }
    let member_address = member.address.clone();
    let restarting = if member.state == Some(MemberState::Removed) {
        RollWait::MemberFindingItself {
            member: member_address,
        }
    } else {
        RollWait::MemberRestarting {
            member: member_address,
        }
    };
    let answers_healthy = matches!(
        member.state,
        Some(MemberState::Primary | MemberState::Secondary | MemberState::Arbiter)
    );
    let seen = member_healthy(input, &member.address);
    if let Err(reason @ RollWait::KeyfileMismatch { .. }) = seen {
        return RollStep::StopOnKeyfileMismatch { lease, reason };
    }
    let back =
        member.pod.as_ref().is_some_and(|p| !p.terminating) && answers_healthy && seen.is_ok();
    if back {
        RollStep::Release { lease }
    } else {
        RollStep::Renew {
            lease,
            reason: restarting,
        }
    }
}

/// The local member to restart next: an outdated secondary or arbiter first,
/// by slot; the primary only when it is the last one.
fn next_to_restart(input: &RollInput) -> Option<&LocalPod> {
    let outdated = || input.local.iter().filter(|m| m.outdated());
    let primary = input.set.primary.as_ref();
    outdated()
        .find(|m| Some(&m.address) != primary)
        .or_else(|| outdated().next())
}

/// A member of the config, other than `primary`, that its cluster reports as
/// not up to date.
fn first_outdated_elsewhere(input: &RollInput, primary: &MemberAddress) -> Option<MemberAddress> {
    input
        .set
        .config
        .members
        .iter()
        .map(|m| &m.host)
        .filter(|host| *host != primary)
        .find(|host| input.reports.get(*host).is_some_and(|r| !r.up_to_date))
        .cloned()
}

/// A member of the config, other than the outdated `primary`, whose cluster
/// publishes another revision than `primary`'s, while the grace since
/// `primary`'s own revision was first published lasts: that cluster has most
/// likely not got the change yet, and its member would restart after the
/// primary (one election more).
fn change_not_everywhere_yet(input: &RollInput, primary: &LocalPod) -> Option<RollWait> {
    let desired = &primary.desired_revision;
    let since = input
        .reports
        .get(&primary.address)
        .filter(|own| own.revision.as_ref() == Some(desired))
        .and_then(|own| own.revision_since_millis)
        .unwrap_or(input.now_millis);
    let waited = input.now_millis.saturating_sub(since);
    if waited >= REVISION_PROPAGATION_GRACE_MILLIS {
        return None;
    }
    input
        .set
        .config
        .members
        .iter()
        .filter(|m| m.host != primary.address)
        .find_map(|m| {
            let revision = input.reports.get(&m.host)?.revision.as_ref()?;
            (revision != desired).then(|| RollWait::ChangeNotEverywhereYet {
                primary: primary.address.clone(),
                member: m.host.clone(),
                revision: revision.clone(),
                waited_secs: waited / 1000,
            })
        })
}

/// Every member of the config (but `restarting`) is healthy and caught up,
/// and there is a primary: restarting `restarting` then takes at most one
/// member down, even when it is down already. An outdated member that is down (its
/// pod restarted onto a revision it cannot rejoin with, e.g. a keyfile the set
/// does not share) is replaced once its revision is fixed, instead of waiting
/// for itself forever.
fn set_healthy_but(input: &RollInput, restarting: Option<&MemberAddress>) -> Result<(), RollWait> {
    if input.set.primary.is_none() {
        return Err(RollWait::NoPrimary);
    }
    input
        .set
        .config
        .members
        .iter()
        .filter(|m| Some(&m.host) != restarting)
        .try_for_each(|m| member_healthy(input, &m.host))
}

/// The roll never leaves fewer than a voting majority of the config up:
/// restarting `member`, a voter, needs a majority of the config's voters up
/// without it. Configs of one or two voters cannot keep one through any
/// voter's restart; those restarts carry a [`RestartCaveat`] instead.
pub fn majority_stays_up(set: &ObservedSet, member: &MemberAddress) -> Result<(), RollWait> {
    let voters: Vec<&MemberAddress> = set
        .config
        .members
        .iter()
        .filter(|m| m.is_voter() && !m.newly_added)
        .map(|m| &m.host)
        .collect();
    if !voters.contains(&member) || voters.len() <= 2 {
        return Ok(());
    }
    let needed = voters.len() / 2 + 1;
    let up = voters
        .iter()
        .filter(|host| **host != member)
        .filter(|host| {
            set.members
                .get(**host)
                .is_some_and(|s| s.counts_towards_majority())
        })
        .count();
    if up >= needed {
        Ok(())
    } else {
        Err(RollWait::VotingMajorityWouldBeLost {
            member: member.clone(),
            up,
            needed,
        })
    }
}

/// [`RestartCaveat::TwoVoters`] when `member` is one of a config's two voters.
fn two_voters(set: &ObservedSet, member: &MemberAddress) -> Option<RestartCaveat> {
    let voters: Vec<_> = set
        .config
        .members
        .iter()
        .filter(|m| m.is_voter() && !m.newly_added)
        .collect();
    (voters.len() == 2 && voters.iter().any(|m| &m.host == member))
        .then_some(RestartCaveat::TwoVoters)
}

/// One member is PRIMARY, SECONDARY or ARBITER, not newly added, and caught up.
fn member_healthy(input: &RollInput, member: &MemberAddress) -> Result<(), RollWait> {
    let entry = input.set.config.members.iter().find(|m| &m.host == member);
    if entry.is_some_and(|m| m.newly_added) {
        return Err(RollWait::MemberSyncing {
            member: member.clone(),
        });
    }
    let Some(status) = input.set.members.get(member) else {
        return Err(RollWait::MemberNotHealthy {
            member: member.clone(),
            state: "not reported".to_owned(),
        });
    };
    if let (true, Some(primary)) = (status.authentication_refused, &input.set.primary) {
        return Err(RollWait::KeyfileMismatch {
            member: member.clone(),
            primary: primary.clone(),
        });
    }
    if !status.counts_towards_majority() {
        let state = if status.healthy {
            format!("{:?}", status.state).to_uppercase()
        } else {
            "DOWN".to_owned()
        };
        return Err(RollWait::MemberNotHealthy {
            member: member.clone(),
            state,
        });
    }
    match status.lag_secs {
        Some(lag_secs)
            if lag_secs > CAUGHT_UP_LAG_SECS && status.state == MemberState::Secondary =>
        {
            Err(RollWait::MemberLagging {
                member: member.clone(),
                lag_secs,
            })
        }
        _ => Ok(()),
    }
}

mod peers;
#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
