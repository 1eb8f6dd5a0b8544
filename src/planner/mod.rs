//! The replica-set planner: from facts observed in this cluster and through the
//! replica set, the **one** next step towards the desired membership.
//!
//! Pure: no client, no async, no clock. The controller gathers a [`PlanInput`]
//! (Kubernetes objects, hostconf, what each member answered, the config read
//! from the primary), calls [`plan`], executes the returned [`Step`] and plans
//! again on its next pass. Every step is computed from the live config, so a
//! crash between two steps is harmless (`docs/replica-set-rules.md`,
//! `same-input-same-step`).
//!
//! The rules, and the invariants named below, are written down in
//! `docs/replica-set-rules.md`; each invariant has a property test of the same
//! name in `planner/properties.rs`.
//!
//! - Only this cluster's members (host = this cluster's VIP) are added, promoted
//!   or removed; other clusters' members are only counted
//!   (`only-local-members-change`).
//! - **Initiate** only in the `rsInit` cluster, only when no replica-set id is
//!   recorded, no member that answered has a config, every desired local member
//!   answers, and a majority of hostconf's data members answered
//!   (`never-initiate-twice`).
//! - Every **reconfig** starts from the observed config, raises its version by
//!   one, makes at most one voting change, passes
//!   [`reconfig_problems`], and is planned only
//!   with a primary, a majority-committed config and no `newlyAdded` member. The
//!   step cannot express `force` (`one-voting-change-per-reconfig`,
//!   `reconfig-accepted-without-force`, `config-within-mongodb-limits`).
//! - Order of work: delete the StatefulSets of members already out of the config
//!   (`never-delete-a-member-in-the-config`), then remove unwanted members
//!   (highest index first, the arbiter last; step a primary down first, once a
//!   healthy electable secondary that stays in the set can take over:
//!   `step-down-before-removing-the-primary`), then add wanted members (index
//!   order, the arbiter last; never one holding another set:
//!   `never-add-a-member-of-another-set`), then promote non-voters, then bring
//!   `settings` in line.
//! - **Votes**: at most seven members vote; a member pinned to 0 votes in
//!   hostconf never does. When hostconf spans at least three clusters
//!   (distinct VIPs), a member is given a vote — at initiate, on joining, on
//!   promotion — only if afterwards its cluster holds no majority of the
//!   voters, arbiters counted with their cluster (`no-cluster-gains-a-vote-majority`,
//!   [`cluster_holds_no_majority`]). Initiate hands the votes round-robin
//!   across clusters and keeps the longest balanced run of that order; it
//!   waits while only one cluster's members could vote. A member that may not
//!   vote joins with votes 0 and priority 0 and is promoted once other
//!   clusters have added voters; an arbiter, which cannot join without a
//!   vote, is refused. With one or two clusters votes stay first-come (local
//!   members first at initiate): two sites cannot be balanced (one holds a
//!   majority or they tie), so losing a site may need the manual forced
//!   reconfig however the votes are split.
//!   A cluster holding a majority of the votes gives one non-primary vote up
//!   when a healthy non-voter of another cluster could take it
//!   (`rebalance_votes`, one voting change per reconfig); without such
//!   a member (after removals, say) it keeps its majority (*What is not
//!   enforced* in the same document).
//! - A reconfig whose resulting config would have fewer healthy voters than a
//!   majority of its voters is refused (removal) or waited on (addition,
//!   promotion, settings) (`keep-a-healthy-voting-majority`).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::ops::ControlFlow::{self, Break, Continue};

use crate::api::{MongoDB, PvcPolicy, ReplicaSetSettings};
use crate::hostconf::{HostConf, HostConfMember, MemberAddress};
use crate::replset::{
    cluster_holds_no_majority, reconfig_problems, ConfigMember, ConfigProblem, ConfigSettings,
    MemberState, MemberStatus, ReplicaSetConfig, MAX_MEMBERS, MAX_VOTERS,
    MIN_CLUSTERS_FOR_VOTE_BALANCE,
};

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod world;

/// `stepDownSecs` sent with `replSetStepDown`: how long the old primary stays
/// unelectable.
pub const STEP_DOWN_SECS: u32 = 60;
/// `secondaryCatchUpPeriodSecs` sent with `replSetStepDown`.
pub const SECONDARY_CATCH_UP_PERIOD_SECS: u32 = 10;

/// Which member of this cluster a Service/StatefulSet pair is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberSlot {
    /// Data-bearing member `<name>-mongodb-<index>`.
    Data(u32),
    /// The arbiter `<name>-mongodb-arbiter`.
    Arbiter,
}

impl fmt::Display for MemberSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberSlot::Data(index) => write!(f, "member {index}"),
            MemberSlot::Arbiter => f.write_str("the arbiter"),
        }
    }
}

/// How many members this cluster wants: `spec.members` and `spec.arbiter`, or
/// nothing while the object is being deleted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wanted {
    /// Data members wanted here (slots `0..members`).
    pub members: u32,
    /// Whether the arbiter is wanted here.
    pub arbiter: bool,
}

impl Wanted {
    /// What `mongodb` asks for; nothing when `leaving`.
    pub fn of(mongodb: &MongoDB, leaving: bool) -> Self {
        if leaving {
            return Wanted {
                members: 0,
                arbiter: false,
            };
        }
        Wanted {
            members: u32::try_from(mongodb.spec.members).unwrap_or(0),
            arbiter: mongodb.spec.arbiter,
        }
    }

    /// Whether `slot` is wanted.
    pub fn wants(&self, slot: MemberSlot) -> bool {
        match slot {
            MemberSlot::Data(index) => index < self.members,
            MemberSlot::Arbiter => self.arbiter,
        }
    }

    /// The wanted slots: data members by index, then the arbiter.
    pub fn slots(&self) -> impl Iterator<Item = MemberSlot> {
        (0..self.members)
            .map(MemberSlot::Data)
            .chain(self.arbiter.then_some(MemberSlot::Arbiter))
    }
}

/// Everything the planner looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanInput {
    /// This cluster's VIP: the host part of every local member's address.
    pub local_vip: String,
    /// The replica-set name (`--replSet`).
    pub set_name: String,
    /// `spec.members`: how many data members this cluster hosts (indices
    /// `0..desired_members`).
    pub desired_members: u32,
    /// `spec.arbiter`: whether this cluster hosts the arbiter.
    pub arbiter_wanted: bool,
    /// `spec.rsInit`: whether this cluster may initiate the set.
    pub rs_init: bool,
    /// The replica-set settings the spec asks for.
    pub settings: ReplicaSetSettings,
    /// What happens to the PVC of a member that left the set.
    pub pvc_policy: PvcPolicy,
    /// The `replicaSetId` recorded in status. Once recorded the set exists and is
    /// never initiated again.
    pub known_replica_set_id: Option<String>,
    /// Every member of the whole set, as the control plane lists it.
    pub hostconf: HostConf,
    /// One entry per local slot that is wanted, still has a StatefulSet, or is
    /// still in the config.
    pub local_members: Vec<LocalMemberFacts>,
    /// What members of other clusters answered when asked directly (used for
    /// initiate only). A member absent from the map did not answer.
    pub remote_probes: BTreeMap<MemberAddress, MemberProbe>,
    /// The replica set as seen through hostconf's seed list.
    pub observed: Observed,
    /// A member this controller asked to step down and that may still be
    /// handing over (kept by the controller for about `stepDownSecs`).
    pub stepped_down_recently: Option<MemberAddress>,
    /// A primary that refused to step down (no electable secondary caught up)
    /// and whose next try the controller holds back (growing delays).
    pub step_down_held: Option<MemberAddress>,
    /// The members disaster recoveries forced out of the set, as recorded in
    /// it; read only when [`PlanInput::needs_dropped_members`] says so.
    pub dropped_members: DroppedMembers,
}

/// The members forced out of the set by disaster recoveries
/// ([`crate::recovery`]), as recorded in the set.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum DroppedMembers {
    /// Not read: no local member needed it.
    #[default]
    NotRead,
    /// They could not be read (no primary, or it did not answer).
    Unreadable,
    /// As read from the set.
    Read(Vec<DroppedMember>),
}

/// A member a disaster recovery dropped.
#[derive(Clone, Debug, PartialEq)]
pub struct DroppedMember {
    /// Its host in the config the recovery started from.
    pub host: MemberAddress,
    /// Which recovery: where, when and why it was asked for.
    pub recovery: String,
}

/// What is known about one local member.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalMemberFacts {
    /// Which member.
    pub slot: MemberSlot,
    /// `VIP:nodePort`, from its Service, or as recorded on its StatefulSet once
    /// the Service is gone; `None` when neither tells.
    pub address: Option<MemberAddress>,
    /// Whether its StatefulSet exists.
    pub stateful_set_exists: bool,
    /// Whether its pod is running.
    pub pod_running: bool,
    /// What it answered when asked directly at its address (`None`: no answer).
    pub probe: Option<MemberProbe>,
    /// The config entry it was last seen as, recorded on its StatefulSet: how
    /// it is recognised after its address changed (its Service recreated with
    /// another nodePort, or the VIP changed).
    pub recorded: Option<RecordedEntry>,
}

/// A config entry as recorded on a member's StatefulSet: its `_id` and the
/// host it had then. Both must match for an entry to be taken as the
/// member's: an `_id` alone could have been given to another member since.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct RecordedEntry {
    /// The member's `_id` in the config.
    pub id: i64,
    /// Its host in the config.
    pub host: MemberAddress,
}

/// `<_id>@<host>`, as on the StatefulSet.
impl fmt::Display for RecordedEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}@{}", self.id, self.host)
    }
}

/// Why a recorded entry could not be read back.
#[derive(Debug, thiserror::Error)]
#[error("not `<_id>@<host:port>`: {0:?}")]
pub struct RecordedEntryInvalid(String);

impl std::str::FromStr for RecordedEntry {
    type Err = RecordedEntryInvalid;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let invalid = || RecordedEntryInvalid(text.to_owned());
        let (id, host) = text.split_once('@').ok_or_else(invalid)?;
        Ok(RecordedEntry {
            id: id.parse().map_err(|_| invalid())?,
            host: MemberAddress::parse(host).map_err(|_| invalid())?,
        })
    }
}

/// What a member answered when asked directly about its replica-set state.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberProbe {
    /// Whether it holds a replica-set config (a REMOVED member does; code 94
    /// NotYetInitialized means it does not).
    pub has_config: bool,
    /// The `replicaSetId` of the config it holds, when it could tell.
    pub replica_set_id: Option<String>,
    /// The replica-set name it runs with, when it could tell.
    pub set_name: Option<String>,
    /// Its own replication state, when it could tell.
    pub state: Option<MemberState>,
    /// The host it goes by in its config (`hello`'s `me`), when it found
    /// itself there: mongod keeps that entry until it installs a new config,
    /// even after its address changed.
    pub me: Option<MemberAddress>,
}

/// The replica set as observed through the seed list.
// One value per reconcile: boxing the config would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// No member answered with a config. Whether a config exists anywhere is
    /// decided from the probes, never assumed from this.
    Unreachable,
    /// A member answered with the set's status and config.
    Configured(ObservedSet),
}

/// The replica set's config and status.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedSet {
    /// The current config, read from the primary when there is one (with
    /// `newlyAdded` flags included).
    pub config: ReplicaSetConfig,
    /// The current primary.
    pub primary: Option<MemberAddress>,
    /// `replSetGetStatus` per member.
    pub members: BTreeMap<MemberAddress, MemberStatus>,
    /// Whether the primary reports the current config majority-committed. Must
    /// be `false` when there is no primary to ask.
    pub config_committed: bool,
}

/// The one thing to do next.
#[derive(Clone, Debug, PartialEq, strum::IntoStaticStr, strum::VariantNames)]
pub enum Step {
    /// `replSetInitiate` with this config, sent to `on`: a local member listed
    /// in it that can be elected (mongod refuses an initiate received by an
    /// arbiter, a non-voter, a priority-0 or a hidden member with code 93).
    Initiate {
        config: ReplicaSetConfig,
        on: MemberAddress,
    },
    /// `replSetReconfig` (never `force`: the step has no way to say it) with this
    /// full config, whose version is the observed one + 1.
    Reconfig {
        config: ReplicaSetConfig,
        change: Change,
    },
    /// `replSetStepDown` on the primary.
    StepDown {
        primary: MemberAddress,
        step_down_secs: u32,
        secondary_catch_up_period_secs: u32,
    },
    /// Delete the StatefulSet of a member that is out of the config; delete its
    /// PVC as well when `delete_pvc`.
    DeleteStatefulSet { slot: MemberSlot, delete_pvc: bool },
    /// Nothing can safely be done now; plan again later.
    Wait { reason: WaitReason },
    /// The desired change is unsafe or impossible without a human.
    Refuse { reason: Refusal },
    /// The replica set matches what this cluster wants.
    InSync,
}

/// What a reconfig changes.
#[derive(Clone, Debug, PartialEq, strum::IntoStaticStr, strum::VariantNames)]
pub enum Change {
    AddMember {
        host: MemberAddress,
    },
    PromoteMember {
        host: MemberAddress,
    },
    DemoteMember {
        host: MemberAddress,
    },
    RemoveMember {
        host: MemberAddress,
    },
    /// The member's address changed: its entry keeps its `_id`, votes and
    /// priority, and takes the new host.
    ReaddressMember {
        from: MemberAddress,
        to: MemberAddress,
    },
    UpdateSettings,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::AddMember { host } => write!(f, "add {host}"),
            Change::PromoteMember { host } => write!(f, "give {host} a vote"),
            Change::DemoteMember { host } => write!(
                f,
                "take {host}'s vote, so that another cluster can take one"
            ),
            Change::RemoveMember { host } => write!(f, "remove {host}"),
            Change::ReaddressMember { from, to } => {
                write!(f, "change the host of the member at {from} to {to}")
            }
            Change::UpdateSettings => f.write_str("update the replica-set settings"),
        }
    }
}

impl Step {
    /// A bounded PascalCase name (Event reason, metric label): the variant's
    /// name, or for a reconfig, a wait or a refusal the name of its
    /// [`Change`], [`WaitReason`] or [`Refusal`].
    pub fn reason(&self) -> &'static str {
        match self {
            Step::Reconfig { change, .. } => change.into(),
            Step::Wait { reason } => reason.reason(),
            Step::Refuse { reason } => reason.reason(),
            step => step.into(),
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Initiate { config, on } => write!(
                f,
                "initiate replica set {} with {} members on {on}",
                config.set_name,
                config.members.len()
            ),
            Step::Reconfig { config, change } => {
                write!(f, "{change} (config version {})", config.version)
            }
            Step::StepDown { primary, .. } => write!(f, "step primary {primary} down"),
            Step::DeleteStatefulSet { slot, delete_pvc } => write!(
                f,
                "delete the StatefulSet of {slot}{}",
                if *delete_pvc {
                    " and its PVC"
                } else {
                    ", keeping its PVC"
                }
            ),
            Step::Wait { reason } => write!(f, "waiting: {reason}"),
            Step::Refuse { reason } => write!(f, "refused: {reason}"),
            Step::InSync => f.write_str("the replica set is in sync"),
        }
    }
}

/// Why the planner waits.
#[derive(Clone, Debug, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum WaitReason {
    #[error("the replica set has no primary")]
    NoPrimary,
    #[error("the current config is not yet committed by a majority")]
    ConfigNotCommitted,
    #[error("newly added member {host} is still syncing")]
    NewlyAddedMemberSyncing { host: MemberAddress },
    #[error("the pod of {slot} is not running")]
    PodNotRunning { slot: MemberSlot },
    #[error("the address of {slot} is not known yet (no Service nodePort)")]
    MemberAddressUnknown { slot: MemberSlot },
    #[error("{slot} does not answer at {host}")]
    MemberNotAnswering {
        slot: MemberSlot,
        host: MemberAddress,
    },
    #[error("{host} holds a replica-set config but did not tell its replicaSetId")]
    MemberIdentityUnknown { host: MemberAddress },
    #[error("waiting for a new primary after {old_primary} stepped down")]
    WaitingForNewPrimary { old_primary: MemberAddress },
    #[error(
        "primary {primary} refused to step down: no electable secondary that stays is caught \
         up{}; asking again later",
        least_lag_secs.map(|l| format!(" (the closest is {l} s behind)")).unwrap_or_default()
    )]
    StepDownRefused {
        primary: MemberAddress,
        least_lag_secs: Option<i64>,
    },
    #[error(
        "primary {primary} now answers at {now_at}; its peers lose it at its old host and \
         elect another primary before its host is changed"
    )]
    PrimaryAddressChanged {
        primary: MemberAddress,
        now_at: MemberAddress,
    },
    #[error(
        "no healthy electable secondary that stays in the set (listed in hostconf) \
         can take over from primary {primary}"
    )]
    NoElectableSecondary { primary: MemberAddress },
    #[error("only {healthy} healthy voters, {needed} needed for a majority after the change")]
    NotEnoughHealthyVoters { healthy: usize, needed: usize },
    #[error(
        "{} of {voters} voters do not answer ({}): no primary can be elected; the operator \
         changes nothing until a majority is back (restore the lost members, or recover the \
         set by hand with a forced reconfig)",
        lost.len(),
        lost.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    VotingMajorityLost {
        lost: Vec<MemberAddress>,
        voters: usize,
    },
    #[error("replica set {replica_set_id} exists but no member answered")]
    ReplicaSetUnreachable { replica_set_id: String },
    #[error("{host} already has a replica-set config, but the set could not be read")]
    ExistingConfigUnreadable { host: MemberAddress },
    #[error("waiting for the rsInit cluster to initiate the replica set")]
    AwaitingInitiate,
    #[error("{answered} of hostconf's data members answered, {needed} needed to initiate")]
    TooFewMembersAnswering { answered: usize, needed: usize },
    #[error(
        "no member of cluster {vip} answered: the set is initiated only once every \
         cluster in hostconf has answered without a config"
    )]
    ClusterNotAnswering { vip: String },
    #[error(
        "only members of cluster {vip} could vote in the initial config, which would \
         give it a majority of the votes; waiting for members of other clusters to answer"
    )]
    VotersInOneCluster { vip: String },
    #[error(
        "{host} holds a replica-set config but is not in the set's: whether a disaster \
         recovery dropped it could not be read from the set yet"
    )]
    DroppedMembersUnreadable { host: MemberAddress },
}

impl WaitReason {
    /// A bounded PascalCase name (Event and condition reason): the variant's
    /// name.
    pub fn reason(&self) -> &'static str {
        self.into()
    }
}

/// Why the planner refuses; each needs a human (or a spec change).
#[derive(Clone, Debug, PartialEq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames)]
pub enum Refusal {
    #[error(
        "removing {host} would leave {healthy} healthy voters, fewer than the \
         {needed} a majority needs"
    )]
    WouldBreakVotingMajority {
        host: MemberAddress,
        healthy: usize,
        needed: usize,
    },
    #[error(
        "{host} holds data of replica set {member_replica_set_id}, not of \
         {replica_set_id}; it is not added"
    )]
    MemberHoldsAnotherReplicaSet {
        host: MemberAddress,
        member_replica_set_id: String,
        replica_set_id: String,
    },
    #[error("{host} runs replica set {member_set_name}, not {set_name}")]
    MemberSetNameMismatch {
        host: MemberAddress,
        member_set_name: String,
        set_name: String,
    },
    #[error("the replica set found is named {observed}, not {desired}")]
    SetNameMismatch { observed: String, desired: String },
    #[error("the replica set found has replicaSetId {observed}, but status recorded {recorded}")]
    ReplicaSetIdMismatch { observed: String, recorded: String },
    #[error("the resulting config would be invalid: {}", join(problems))]
    InvalidConfig { problems: Vec<ConfigProblem> },
    #[error("the replica set already has {MAX_MEMBERS} members; {host} cannot join")]
    TooManyMembers { host: MemberAddress },
    #[error("the replica set already has {MAX_VOTERS} voters; arbiter {host} needs a vote")]
    NoVoteForArbiter { host: MemberAddress },
    #[error(
        "arbiter {host} needs a vote, which would give its cluster a majority of the votes; \
         other clusters must add voters first"
    )]
    ArbiterVoteWouldGiveClusterMajority { host: MemberAddress },
    #[error("this cluster wants no member, so it has nothing to initiate")]
    NothingToInitiate,
    #[error(
        "no member of this cluster could be elected in the initial config (arbiter, \
         votes 0, priority 0 or hidden), and mongod refuses an initiate sent to one"
    )]
    NoElectableLocalMember,
    #[error(
        "{host} is in the config with this cluster's VIP, but no Service or \
         StatefulSet of this instance has that address"
    )]
    UnaccountedLocalMember { host: MemberAddress },
    #[error(
        "the StatefulSet of {slot} is no longer wanted but its address is unknown, \
         so it cannot be shown to be out of the config"
    )]
    StatefulSetAddressUnknown { slot: MemberSlot },
    #[error(
        "{slot} is no longer wanted and not in the config at its address, but it never \
         recorded its entry and cannot tell it now, while the config holds {entry}, which \
         hostconf does not list and no member accounts for: it may be that member under an \
         old address, so its StatefulSet is kept"
    )]
    DepartureUnproven {
        slot: MemberSlot,
        entry: MemberAddress,
    },
    #[error(
        "{host} was dropped from the set by a disaster recovery ({recovery}) and still holds \
         its data from before, which may have diverged: it is not re-added as it is. To \
         resync it from scratch, delete its PersistentVolumeClaim and its pod \
         (docs/disaster-recovery.md)"
    )]
    DroppedByRecovery {
        host: MemberAddress,
        recovery: String,
    },
}

impl Refusal {
    /// A bounded PascalCase name (Event and condition reason): the variant's
    /// name.
    pub fn reason(&self) -> &'static str {
        self.into()
    }
}

fn join(problems: &[ConfigProblem]) -> String {
    problems
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// The one next step for this cluster.
///
/// Inside, each stage returns [`ControlFlow::Break`] with the step as soon as
/// it has one (work, a wait or a refusal); when every stage continues, the
/// set is in sync.
pub fn plan(input: &PlanInput) -> Step {
    match &input.observed {
        Observed::Unreachable => match plan_initiate(input) {
            Continue((config, on)) => Step::Initiate { config, on },
            Break(step) => step,
        },
        Observed::Configured(set) => match plan_membership(input, set) {
            Continue(()) => Step::InSync,
            Break(step) => step,
        },
    }
}

fn wait(reason: WaitReason) -> Step {
    Step::Wait { reason }
}

fn refuse(reason: Refusal) -> Step {
    Step::Refuse { reason }
}

impl PlanInput {
    fn wanted(&self) -> Wanted {
        Wanted {
            members: self.desired_members,
            arbiter: self.arbiter_wanted,
        }
    }

    fn is_wanted(&self, slot: MemberSlot) -> bool {
        self.wanted().wants(slot)
    }

    /// Wanted slots in addition order: data members by index, then the arbiter.
    fn wanted_slots(&self) -> Vec<MemberSlot> {
        self.wanted().slots().collect()
    }

    /// The facts of a slot (the first entry, should the controller send two).
    fn facts(&self, slot: MemberSlot) -> Option<&LocalMemberFacts> {
        self.local_members.iter().find(|m| m.slot == slot)
    }

    fn is_local(&self, host: &MemberAddress) -> bool {
        let vip = self
            .local_vip
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(&self.local_vip);
        host.host == vip
    }

    /// Whether `host` is the config host of a local member this cluster no
    /// longer wants.
    fn is_leaving(&self, config: &ReplicaSetConfig, host: &MemberAddress) -> bool {
        self.local_members
            .iter()
            .filter(|m| !self.is_wanted(m.slot))
            .any(|m| m.entry_in(config).is_some_and(|e| &e.host == host))
    }

    /// A config entry at this cluster's VIP that no local member is
    /// (`docs/replica-set-rules.md`, `only-local-members-change`): perhaps one
    /// of them under an address it had before its entry was recorded.
    fn unaccounted_local_entry<'c>(
        &self,
        config: &'c ReplicaSetConfig,
    ) -> Option<&'c ConfigMember> {
        let accounted = self.accounted_ids(config);
        config
            .members
            .iter()
            .find(|m| self.is_local(&m.host) && !accounted.contains(&m.id))
    }

    /// The `_id`s of the entries of `config` that local members are.
    fn accounted_ids(&self, config: &ReplicaSetConfig) -> BTreeSet<i64> {
        self.local_members
            .iter()
            .filter_map(|m| m.entry_in(config))
            .map(|e| e.id)
            .collect()
    }

    fn hint(&self, host: &MemberAddress) -> Option<&HostConfMember> {
        self.hostconf.members.iter().find(|m| &m.address == host)
    }

    /// How many clusters (distinct VIPs) hostconf spans.
    fn cluster_count(&self) -> usize {
        self.hostconf
            .members
            .iter()
            .map(|m| &m.address.host)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Whether the planner needs [`PlanInput::dropped_members`]: a wanted local
    /// member answers with a config but is not in the set's (it would be
    /// added, unless a disaster recovery dropped it).
    pub fn needs_dropped_members(&self) -> bool {
        let Observed::Configured(set) = &self.observed else {
            return false;
        };
        self.wanted_slots().into_iter().any(|slot| {
            self.facts(slot).is_some_and(|facts| {
                facts.probe.as_ref().is_some_and(|p| p.has_config)
                    && facts.entry_in(&set.config).is_none()
            })
        })
    }

    /// Whether `host` may be given a vote on top of `config`'s voters: fewer
    /// than seven vote (`config-within-mongodb-limits`), and afterwards its
    /// cluster holds no majority (`docs/replica-set-rules.md`,
    /// `no-cluster-gains-a-vote-majority`).
    fn vote_is_free(&self, config: &ReplicaSetConfig, host: &MemberAddress) -> bool {
        config.voting_member_count() < MAX_VOTERS
            && cluster_holds_no_majority(
                config.voters().map(|m| &m.host).chain([host]),
                &host.host,
                self.cluster_count(),
            )
    }
}

impl LocalMemberFacts {
    /// The member's answer, only when its address is known (it was asked there).
    fn answer(&self) -> Option<(&MemberAddress, &MemberProbe)> {
        self.address.as_ref().zip(self.probe.as_ref())
    }

    /// The entry of `config` that is this member: the one recorded on its
    /// StatefulSet (same `_id` and host) when the config still holds it, else
    /// the one it says it is (`hello`'s `me`), else the one at its address.
    /// The address comes last: after two members' addresses were swapped, it
    /// would name the other one's entry.
    pub fn entry_in<'c>(&self, config: &'c ReplicaSetConfig) -> Option<&'c ConfigMember> {
        let recorded = self.recorded.as_ref().and_then(|recorded| {
            config
                .members
                .iter()
                .find(|m| m.id == recorded.id && m.host == recorded.host)
        });
        let says = || {
            let me = self.probe.as_ref()?.me.as_ref()?;
            config.member(me)
        };
        recorded
            .or_else(says)
            .or_else(|| self.address.as_ref().and_then(|a| config.member(a)))
    }
}

// ---------------------------------------------------------------- initiate

/// The initial config, when this cluster may initiate: never a second time
/// (`docs/replica-set-rules.md`, `never-initiate-twice`).
fn plan_initiate(input: &PlanInput) -> ControlFlow<Step, (ReplicaSetConfig, MemberAddress)> {
    if let Some(id) = &input.known_replica_set_id {
        return Break(wait(WaitReason::ReplicaSetUnreachable {
            replica_set_id: id.clone(),
        }));
    }
    for (host, probe) in input.local_members.iter().filter_map(|m| m.answer()) {
        check_set_name(input, host, probe)?;
    }
    let local_answers = input.local_members.iter().filter_map(|m| m.answer());
    let remote_answers = input.remote_probes.iter();
    if let Some((host, _)) = local_answers
        .chain(remote_answers)
        .find(|(_, probe)| probe.has_config)
    {
        return Break(wait(WaitReason::ExistingConfigUnreadable {
            host: host.clone(),
        }));
    }
    if !input.rs_init {
        return Break(wait(WaitReason::AwaitingInitiate));
    }

    let mut local = Vec::new();
    for slot in input.wanted_slots() {
        let (address, _) = ready_to_join(input, slot)?;
        local.push((address.clone(), slot == MemberSlot::Arbiter));
    }
    if local.is_empty() {
        return Break(refuse(Refusal::NothingToInitiate));
    }
    local.sort();

    let data_members: Vec<&MemberAddress> =
        input.hostconf.data_members().map(|m| &m.address).collect();
    let answered_locally = |host: &MemberAddress| local.iter().any(|(a, _)| a == host);
    let answered = data_members
        .iter()
        .filter(|&&host| answered_locally(host) || input.remote_probes.contains_key(host))
        .count();
    let needed = data_members.len() / 2 + 1;
    if answered < needed {
        return Break(wait(WaitReason::TooFewMembersAnswering {
            answered,
            needed,
        }));
    }
    // A majority answering could be this cluster alone, cut off from the
    // others while they run the set (`never-initiate-twice`).
    let silent_cluster = input
        .hostconf
        .members
        .iter()
        .map(|m| &m.address)
        .filter(|a| !input.is_local(a))
        .find(|a| {
            !input
                .remote_probes
                .keys()
                .any(|answered| answered.host == a.host)
        });
    if let Some(silent) = silent_cluster {
        return Break(wait(WaitReason::ClusterNotAnswering {
            vip: silent.host.clone(),
        }));
    }

    let mut remote: Vec<(MemberAddress, bool)> = input
        .hostconf
        .members
        .iter()
        .filter(|m| !input.is_local(&m.address) && !answered_locally(&m.address))
        .filter(|m| {
            input.remote_probes.get(&m.address).is_some_and(|p| {
                !p.has_config && p.set_name.as_ref().is_none_or(|n| n == &input.set_name)
            })
        })
        .map(|m| (m.address.clone(), m.arbiter))
        .collect();
    remote.sort();
    let listed: Vec<(MemberAddress, bool)> = local.into_iter().chain(remote).collect();

    let voters = initial_voters(input, &listed)?;
    let members = (0..)
        .zip(listed)
        .map(|(id, (host, arbiter))| {
            let may_vote = voters.contains(&host);
            new_member(input, id, host, arbiter, may_vote)
        })
        .collect();
    let config = ReplicaSetConfig {
        set_name: input.set_name.clone(),
        version: 1,
        term: None,
        members,
        settings: ConfigSettings::from_desired(&input.settings, None),
    };
    let problems = config.validate();
    if !problems.is_empty() {
        return Break(refuse(Refusal::InvalidConfig { problems }));
    }
    let electable_local = config
        .members
        .iter()
        .find(|m| input.is_local(&m.host) && m.is_electable());
    let Some(on) = electable_local.map(|m| m.host.clone()) else {
        return Break(refuse(Refusal::NoElectableLocalMember));
    };
    Continue((config, on))
}

/// The members of the initial config (`listed`: address and whether it is an
/// arbiter, in `_id` order) that are given a vote: at most seven, never one
/// pinned to 0 votes.
///
/// With fewer than three clusters in hostconf the votes are first-come:
/// arbiters first (they cannot exist without one), then in `listed` order.
/// From three clusters on they go round-robin across clusters — the arbiter's
/// cluster first, then by VIP; within a cluster its arbiter first, then in
/// `listed` order — and the longest run of that order in which no cluster
/// holds a majority gets them (`docs/replica-set-rules.md`,
/// `no-cluster-gains-a-vote-majority`). A single cluster can never be
/// balanced: then initiate waits for members of other clusters.
fn initial_voters(
    input: &PlanInput,
    listed: &[(MemberAddress, bool)],
) -> ControlFlow<Step, BTreeSet<MemberAddress>> {
    let candidates = listed
        .iter()
        .filter(|(host, arbiter)| *arbiter || input.hint(host).and_then(|h| h.votes) != Some(0));
    let clusters = input.cluster_count();
    if clusters < MIN_CLUSTERS_FOR_VOTE_BALANCE {
        let (arbiters, data): (Vec<_>, Vec<_>) = candidates.partition(|(_, arbiter)| *arbiter);
        let first_come = arbiters.into_iter().chain(data).take(MAX_VOTERS);
        return Continue(first_come.map(|(host, _)| host.clone()).collect());
    }

    let mut queues: BTreeMap<&str, Vec<&(MemberAddress, bool)>> = BTreeMap::new();
    for candidate in candidates {
        queues
            .entry(candidate.0.host.as_str())
            .or_default()
            .push(candidate);
    }
    let mut queues: Vec<Vec<&(MemberAddress, bool)>> = queues.into_values().collect();
    // Stable sorts: the arbiter first in its cluster, and its cluster first.
    for queue in &mut queues {
        queue.sort_by_key(|(_, arbiter)| !*arbiter);
    }
    queues.sort_by_key(|queue| !queue.first().is_some_and(|(_, arbiter)| *arbiter));
    let rounds = queues.iter().map(Vec::len).max().unwrap_or(0);
    let order: Vec<&MemberAddress> = (0..rounds)
        .flat_map(|round| queues.iter().filter_map(move |queue| queue.get(round)))
        .map(|(host, _)| host)
        .collect();

    let balanced = |voters: &[&MemberAddress]| {
        voters
            .iter()
            .all(|v| cluster_holds_no_majority(voters.iter().copied(), &v.host, clusters))
    };
    let longest = (0..=order.len().min(MAX_VOTERS))
        .rev()
        .find(|&n| balanced(&order[..n]))
        .unwrap_or(0);
    if let (0, Some(first)) = (longest, order.first()) {
        return Break(wait(WaitReason::VotersInOneCluster {
            vip: first.host.clone(),
        }));
    }
    Continue(order[..longest].iter().map(|&host| host.clone()).collect())
}

/// A member as it joins: a vote when `may_vote` and hostconf does not pin it
/// to 0; priority from hostconf or 1 for a visible voter, else 0. An arbiter
/// always votes with priority 0.
fn new_member(
    input: &PlanInput,
    id: i64,
    host: MemberAddress,
    arbiter: bool,
    may_vote: bool,
) -> ConfigMember {
    let hint = input.hint(&host);
    if arbiter {
        return ConfigMember {
            id,
            host,
            arbiter_only: true,
            votes: 1,
            priority: 0.0,
            hidden: false,
            tags: BTreeMap::new(),
            newly_added: false,
        };
    }
    let hidden = hint.is_some_and(|h| h.hidden);
    let votes = u8::from(may_vote && hint.and_then(|h| h.votes) != Some(0));
    ConfigMember {
        id,
        host,
        arbiter_only: false,
        votes,
        priority: voter_priority(votes, hidden, hint),
        hidden,
        tags: hint.map(|h| h.tags.clone()).unwrap_or_default(),
        newly_added: false,
    }
}

fn voter_priority(votes: u8, hidden: bool, hint: Option<&HostConfMember>) -> f64 {
    if votes == 0 || hidden {
        0.0
    } else {
        hint.and_then(|h| h.priority).unwrap_or(1.0)
    }
}

/// A wanted local member that runs and answers at its address.
fn ready_to_join(
    input: &PlanInput,
    slot: MemberSlot,
) -> ControlFlow<Step, (&MemberAddress, &MemberProbe)> {
    let Some(facts) = input.facts(slot) else {
        return Break(wait(WaitReason::PodNotRunning { slot }));
    };
    let Some(address) = facts.address.as_ref() else {
        return Break(wait(WaitReason::MemberAddressUnknown { slot }));
    };
    if !facts.stateful_set_exists || !facts.pod_running {
        return Break(wait(WaitReason::PodNotRunning { slot }));
    }
    let Some(probe) = facts.probe.as_ref() else {
        return Break(wait(WaitReason::MemberNotAnswering {
            slot,
            host: address.clone(),
        }));
    };
    Continue((address, probe))
}

fn check_set_name(
    input: &PlanInput,
    host: &MemberAddress,
    probe: &MemberProbe,
) -> ControlFlow<Step> {
    match &probe.set_name {
        Some(name) if name != &input.set_name => Break(refuse(Refusal::MemberSetNameMismatch {
            host: host.clone(),
            member_set_name: name.clone(),
            set_name: input.set_name.clone(),
        })),
        _ => Continue(()),
    }
}

// ------------------------------------------------------ an existing replica set

fn plan_membership(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let config = &set.config;
    if config.set_name != input.set_name {
        return Break(refuse(Refusal::SetNameMismatch {
            observed: config.set_name.clone(),
            desired: input.set_name.clone(),
        }));
    }
    if let (Some(observed), Some(recorded)) =
        (&config.settings.replica_set_id, &input.known_replica_set_id)
    {
        if observed != recorded {
            return Break(refuse(Refusal::ReplicaSetIdMismatch {
                observed: observed.clone(),
                recorded: recorded.clone(),
            }));
        }
    }
    check_voting_majority(set)?;
    delete_departed(input, set)?;
    // A member whose address moved counts as down until its entry follows,
    // also one that is leaving: it takes part in the majority its removal and
    // the others' need.
    readdress_members(input, set)?;
    remove_unwanted(input, set)?;
    // A wanted member that is not ready yet holds up neither the next one,
    // nor promotions, nor settings; its wait is reported once nothing else is
    // left to do.
    let waiting_member = add_wanted(input, set)?;
    promote_non_voters(input, set)?;
    rebalance_votes(input, set)?;
    update_settings(input, set)?;
    report_leftovers(input, set)?;
    match waiting_member {
        Some(wait) => Break(wait),
        None => Continue(()),
    }
}

/// Without a primary, whether a majority of the voters still answers
/// heartbeats: if not, no primary can be elected, and the loss is reported
/// with the voters gone; nothing is changed (`docs/replica-set-rules.md`,
/// `reconfig-accepted-without-force`).
fn check_voting_majority(set: &ObservedSet) -> ControlFlow<Step> {
    if set.primary.is_some() {
        return Continue(());
    }
    let voters: Vec<&MemberAddress> = set
        .config
        .members
        .iter()
        .filter(|m| m.votes > 0 && !m.newly_added)
        .map(|m| &m.host)
        .collect();
    let mut lost: Vec<MemberAddress> = voters
        .iter()
        .filter(|host| !set.members.get(**host).is_some_and(|m| m.healthy))
        .map(|host| (*host).clone())
        .collect();
    if (voters.len() - lost.len()) * 2 > voters.len() {
        return Continue(());
    }
    lost.sort();
    Break(wait(WaitReason::VotingMajorityLost {
        lost,
        voters: voters.len(),
    }))
}

/// Deletes the StatefulSet of an unwanted member once the primary's committed
/// config shows it out of the set (`docs/replica-set-rules.md`,
/// `never-delete-a-member-in-the-config`).
fn delete_departed(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let departed = input.local_members.iter().find(|m| {
        !input.is_wanted(m.slot)
            && m.stateful_set_exists
            && m.address.is_some()
            && m.entry_in(&set.config).is_none()
    });
    let Some(departed) = departed else {
        return Continue(());
    };
    // Absent at its address is proof enough only for a member that recorded
    // its entry (and whose recorded `_id` is gone, or stands for a member
    // hostconf lists or a local member is), says who it is, or answers that
    // it holds no config; otherwise an entry nobody lists nor accounts for
    // may be it under an old address (readdressed after its last record).
    let accounted = input.accounted_ids(&set.config);
    let unlisted = |m: &&ConfigMember| input.hint(&m.host).is_none() && !accounted.contains(&m.id);
    let recorded_proves = departed.recorded.as_ref().is_some_and(|recorded| {
        !set.config
            .members
            .iter()
            .any(|m| m.id == recorded.id && unlisted(&m))
    });
    let knows_itself = recorded_proves
        || departed
            .probe
            .as_ref()
            .is_some_and(|p| p.me.is_some() || !p.has_config);
    if !knows_itself {
        if let Some(entry) = set.config.members.iter().find(unlisted) {
            return Break(refuse(Refusal::DepartureUnproven {
                slot: departed.slot,
                entry: entry.host.clone(),
            }));
        }
    }
    if set.primary.is_none() {
        return Break(wait(WaitReason::NoPrimary));
    }
    if !set.config_committed {
        return Break(wait(WaitReason::ConfigNotCommitted));
    }
    Break(Step::DeleteStatefulSet {
        slot: departed.slot,
        delete_pvc: input.pvc_policy == PvcPolicy::Delete,
    })
}

/// What must hold before any reconfig: a primary, a committed config, and no
/// member still flagged `newlyAdded` (`docs/replica-set-rules.md`,
/// `one-voting-change-per-reconfig`).
fn check_reconfig_allowed(set: &ObservedSet) -> ControlFlow<Step, &MemberAddress> {
    let Some(primary) = set.primary.as_ref() else {
        return Break(wait(WaitReason::NoPrimary));
    };
    if !set.config_committed {
        return Break(wait(WaitReason::ConfigNotCommitted));
    }
    if let Some(m) = set.config.members.iter().find(|m| m.newly_added) {
        return Break(wait(WaitReason::NewlyAddedMemberSyncing {
            host: m.host.clone(),
        }));
    }
    Continue(primary)
}

/// Removes the unwanted member with the highest index (the arbiter last),
/// stepping it down first when it is the primary (`docs/replica-set-rules.md`,
/// `step-down-before-removing-the-primary`).
fn remove_unwanted(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let mut unwanted: Vec<(&LocalMemberFacts, &MemberAddress)> = input
        .local_members
        .iter()
        .filter(|m| !input.is_wanted(m.slot))
        .filter_map(|m| m.entry_in(&set.config).map(|e| (m, &e.host)))
        .collect();
    unwanted.sort_by_key(|(m, _)| match m.slot {
        MemberSlot::Data(index) => (false, std::cmp::Reverse(index)),
        MemberSlot::Arbiter => (true, std::cmp::Reverse(0)),
    });
    let Some(&(leaving, host)) = unwanted.first() else {
        return Continue(());
    };
    if is_torn_down(input, set) {
        return Continue(());
    }

    if input.stepped_down_recently.as_ref() == Some(host)
        && set.primary.as_ref().is_none_or(|p| p == host)
    {
        return Break(wait(WaitReason::WaitingForNewPrimary {
            old_primary: host.clone(),
        }));
    }
    let primary = check_reconfig_allowed(set)?;
    if primary == host && leaving.address.as_ref() != Some(host) {
        // Asked to step down at its old host, it would not answer.
        return Break(wait(WaitReason::PrimaryAddressChanged {
            primary: host.clone(),
            now_at: leaving.address.clone().unwrap_or_else(|| host.clone()),
        }));
    }
    if primary == host {
        // A successor must stay in the set: stepping down in favour of a member
        // that is leaving too only moves the problem (two clusters shrinking at
        // once would hand the primary back and forth).
        let stays =
            |h: &MemberAddress| input.hint(h).is_some() && !input.is_leaving(&set.config, h);
        let successor = set.config.members.iter().any(|m| {
            &m.host != host
                && m.is_electable()
                && !m.newly_added
                && stays(&m.host)
                && set
                    .members
                    .get(&m.host)
                    .is_some_and(|h| h.healthy && h.state == MemberState::Secondary)
        });
        if !successor {
            return Break(wait(WaitReason::NoElectableSecondary {
                primary: host.clone(),
            }));
        }
        if input.step_down_held.as_ref() == Some(host) {
            // It refused (no electable secondary caught up); asking again at
            // once would refuse writes again while mongod waits.
            let least_lag_secs = set
                .config
                .members
                .iter()
                .filter(|m| &m.host != host && m.is_electable() && stays(&m.host))
                .filter_map(|m| set.members.get(&m.host).and_then(|s| s.lag_secs))
                .min();
            return Break(wait(WaitReason::StepDownRefused {
                primary: host.clone(),
                least_lag_secs,
            }));
        }
        return Break(Step::StepDown {
            primary: host.clone(),
            step_down_secs: STEP_DOWN_SECS,
            secondary_catch_up_period_secs: SECONDARY_CATCH_UP_PERIOD_SECS,
        });
    }

    let mut config = next_version(&set.config);
    config.members.retain(|m| &m.host != host);
    let (healthy, needed) = healthy_voters_after(&config, set, None);
    if healthy < needed {
        return Break(refuse(Refusal::WouldBreakVotingMajority {
            host: host.clone(),
            healthy,
            needed,
        }));
    }
    Break(checked_reconfig(
        &set.config,
        config,
        Change::RemoveMember { host: host.clone() },
    ))
}

/// Whether the set is being torn down: every member of the config is a local
/// member that is leaving, and hostconf lists no member of another cluster.
/// No successor will ever stay, so the members are not removed one by one
/// (the last one, the primary, could never be): they go with their
/// StatefulSets.
fn is_torn_down(input: &PlanInput, set: &ObservedSet) -> bool {
    set.config
        .members
        .iter()
        .all(|m| input.is_leaving(&set.config, &m.host))
        && input
            .hostconf
            .members
            .iter()
            .all(|m| input.is_local(&m.address))
}

/// Gives a local member whose address changed (its Service recreated
/// with another nodePort, or the VIP changed) its new host in the entry it
/// already has: same `_id`, votes and priority, so no voting change and never
/// a second entry for one mongod (`docs/replica-set-rules.md`,
/// `one-entry-per-member`). The member must answer at its new address as a
/// member that may be in this set. The primary's own entry waits: its peers
/// cannot reach it at the old host and elect another primary first.
fn readdress_members(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let set_id = set.config.settings.replica_set_id.as_ref();
    for facts in &input.local_members {
        let slot = facts.slot;
        let (Some(address), Some(entry)) = (facts.address.as_ref(), facts.entry_in(&set.config))
        else {
            continue;
        };
        if &entry.host == address {
            continue;
        }
        let Continue((host, probe)) = ready_to_join(input, slot) else {
            continue;
        };
        check_set_name(input, host, probe)?;
        check_same_replica_set(host, probe, set_id)?;
        let primary = check_reconfig_allowed(set)?;
        if primary == &entry.host {
            return Break(wait(WaitReason::PrimaryAddressChanged {
                primary: entry.host.clone(),
                now_at: host.clone(),
            }));
        }
        let mut config = next_version(&set.config);
        for m in config.members.iter_mut().filter(|m| m.id == entry.id) {
            m.host = host.clone();
        }
        check_healthy_majority(&config, set, Some(host))?;
        return Break(checked_reconfig(
            &set.config,
            config,
            Change::ReaddressMember {
                from: entry.host.clone(),
                to: host.clone(),
            },
        ));
    }
    Continue(())
}

/// Adds the first wanted member (index order, the arbiter last) that is not in
/// the config yet and runs and answers as a member that may join. A member not
/// ready yet is passed over; the first such wait is returned for the caller to
/// report once nothing else can be done.
fn add_wanted(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step, Option<Step>> {
    let set_id = set
        .config
        .settings
        .replica_set_id
        .as_ref()
        .or(input.known_replica_set_id.as_ref());
    let mut first_wait = None;
    for slot in input.wanted_slots() {
        let Some(facts) = input.facts(slot) else {
            first_wait.get_or_insert(wait(WaitReason::PodNotRunning { slot }));
            continue;
        };
        let Some(address) = facts.address.as_ref() else {
            first_wait.get_or_insert(wait(WaitReason::MemberAddressUnknown { slot }));
            continue;
        };
        if set.config.contains(address) || facts.entry_in(&set.config).is_some() {
            continue;
        }
        let (host, probe) = match ready_to_join(input, slot) {
            Continue(ready) => ready,
            Break(not_ready) => {
                first_wait.get_or_insert(not_ready);
                continue;
            }
        };
        check_set_name(input, host, probe)?;
        check_not_dropped(input, host, probe)?;
        check_same_replica_set(host, probe, set_id)?;
        // A member of this set that is not in the config under its address may
        // be in it under an address it had before its entry was recorded:
        // adding it again would give one mongod two entries.
        if let Some(entry) = input.unaccounted_local_entry(&set.config) {
            if probe.has_config {
                return Break(refuse(Refusal::UnaccountedLocalMember {
                    host: entry.host.clone(),
                }));
            }
        }
        check_reconfig_allowed(set)?;
        if set.config.members.len() >= MAX_MEMBERS {
            return Break(refuse(Refusal::TooManyMembers { host: host.clone() }));
        }
        let arbiter = slot == MemberSlot::Arbiter;
        let may_vote = input.vote_is_free(&set.config, host);
        if arbiter && !may_vote {
            let host = host.clone();
            let reason = if set.config.voting_member_count() >= MAX_VOTERS {
                Refusal::NoVoteForArbiter { host }
            } else {
                Refusal::ArbiterVoteWouldGiveClusterMajority { host }
            };
            return Break(refuse(reason));
        }
        let mut config = next_version(&set.config);
        let member = new_member(
            input,
            set.config.smallest_unused_id(),
            host.clone(),
            arbiter,
            may_vote,
        );
        config.members.push(member);
        check_healthy_majority(&config, set, Some(host))?;
        return Break(checked_reconfig(
            &set.config,
            config,
            Change::AddMember { host: host.clone() },
        ));
    }
    Continue(first_wait)
}

/// A member a disaster recovery dropped joins only once resynced from scratch
/// (it holds no config then): its data may have diverged
/// (`docs/disaster-recovery.md`).
fn check_not_dropped(
    input: &PlanInput,
    host: &MemberAddress,
    probe: &MemberProbe,
) -> ControlFlow<Step> {
    if !probe.has_config {
        return Continue(());
    }
    let dropped = match &input.dropped_members {
        DroppedMembers::Read(dropped) => dropped,
        DroppedMembers::NotRead | DroppedMembers::Unreadable => {
            return Break(wait(WaitReason::DroppedMembersUnreadable {
                host: host.clone(),
            }));
        }
    };
    let is_it = |d: &&DroppedMember| &d.host == host || probe.me.as_ref() == Some(&d.host);
    match dropped.iter().find(is_it) {
        Some(d) => Break(refuse(Refusal::DroppedByRecovery {
            host: host.clone(),
            recovery: d.recovery.clone(),
        })),
        None => Continue(()),
    }
}

/// A member that holds a config may join only with this set's `replicaSetId`
/// (`docs/replica-set-rules.md`, `never-add-a-member-of-another-set`); one
/// that holds none joins and re-syncs.
fn check_same_replica_set(
    host: &MemberAddress,
    probe: &MemberProbe,
    set_id: Option<&String>,
) -> ControlFlow<Step> {
    match (&probe.replica_set_id, set_id) {
        (Some(member_id), Some(set_id)) if member_id != set_id => {
            Break(refuse(Refusal::MemberHoldsAnotherReplicaSet {
                host: host.clone(),
                member_replica_set_id: member_id.clone(),
                replica_set_id: set_id.clone(),
            }))
        }
        (Some(_), Some(_)) => Continue(()),
        _ if probe.has_config => Break(wait(WaitReason::MemberIdentityUnknown {
            host: host.clone(),
        })),
        _ => Continue(()),
    }
}

/// Gives a vote to the first wanted local non-voter that is a healthy
/// SECONDARY, hostconf does not pin to 0 votes, and may vote: fewer than seven
/// vote and the vote leaves its cluster without a majority (checked again on
/// every pass, so a non-voter is promoted once other clusters added voters).
fn promote_non_voters(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    for slot in input.wanted_slots() {
        let Some(member) = input.facts(slot).and_then(|f| f.entry_in(&set.config)) else {
            continue;
        };
        let host = &member.host;
        let hint = input.hint(host);
        let secondary = set
            .members
            .get(host)
            .is_some_and(|h| h.healthy && h.state == MemberState::Secondary);
        if member.votes > 0
            || member.arbiter_only
            || hint.and_then(|h| h.votes) == Some(0)
            || !secondary
            || !input.vote_is_free(&set.config, host)
        {
            continue;
        }
        check_reconfig_allowed(set)?;
        let mut config = next_version(&set.config);
        for m in config.members.iter_mut().filter(|m| &m.host == host) {
            m.votes = 1;
            m.priority = voter_priority(1, m.hidden, hint);
        }
        check_healthy_majority(&config, set, Some(host))?;
        return Break(checked_reconfig(
            &set.config,
            config,
            Change::PromoteMember { host: host.clone() },
        ));
    }
    Continue(())
}

/// Gives up one of this cluster's votes while it holds a majority of them and
/// a member of another cluster could take that vote (a healthy non-voting
/// SECONDARY that hostconf does not pin to 0, whose vote would then be free):
/// a config written from a stale hostconf that listed only this cluster would
/// otherwise keep every vote forever. One voting change per reconfig: the
/// other cluster promotes its member on its next pass (`docs/replica-set-rules.md`,
/// `no-cluster-gains-a-vote-majority`). Never the primary's vote.
fn rebalance_votes(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    let voters = || set.config.voters().map(|m| &m.host);
    let clusters = input.cluster_count();
    if cluster_holds_no_majority(voters(), &input.local_vip, clusters) {
        return Continue(());
    }
    let candidate = set
        .config
        .members
        .iter()
        .filter(|m| !input.is_local(&m.host) && m.votes == 0 && !m.arbiter_only && !m.hidden)
        .filter(|m| input.hint(&m.host).is_some_and(|h| h.votes != Some(0)))
        .find(|m| {
            set.members
                .get(&m.host)
                .is_some_and(|h| h.healthy && h.state == MemberState::Secondary)
        });
    let Some(candidate) = candidate else {
        return Continue(());
    };
    let give_up = set.config.members.iter().rev().find(|m| {
        input.is_local(&m.host)
            && m.votes > 0
            && !m.arbiter_only
            && Some(&m.host) != set.primary.as_ref()
    });
    let Some(give_up) = give_up else {
        return Continue(());
    };
    let mut config = next_version(&set.config);
    for m in config.members.iter_mut().filter(|m| m.host == give_up.host) {
        m.votes = 0;
        m.priority = 0.0;
    }
    if !input.vote_is_free(&config, &candidate.host) {
        return Continue(());
    }
    check_reconfig_allowed(set)?;
    check_healthy_majority(&config, set, None)?;
    Break(checked_reconfig(
        &set.config,
        config,
        Change::DemoteMember {
            host: give_up.host.clone(),
        },
    ))
}

/// Brings `settings` to the spec's values, keeping `replicaSetId` — in the
/// rsInit cluster only: the settings belong to the whole set, and two clusters
/// whose specs differ (a propagation lag, an override) would otherwise revert
/// each other without end (`docs/replica-set-rules.md`,
/// `settings-written-by-the-rs-init-cluster-only`). The others report the
/// difference in status.
fn update_settings(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    if !input.rs_init || set.config.settings.matches(&input.settings) {
        return Continue(());
    }
    check_reconfig_allowed(set)?;
    let mut config = next_version(&set.config);
    config.settings =
        ConfigSettings::from_desired(&input.settings, set.config.settings.replica_set_id.clone());
    check_healthy_majority(&config, set, None)?;
    Break(checked_reconfig(
        &set.config,
        config,
        Change::UpdateSettings,
    ))
}

/// What this cluster cannot fix on its own: a local-VIP host in the config that
/// no local member accounts for (`docs/replica-set-rules.md`,
/// `only-local-members-change`), and an unwanted StatefulSet whose address is
/// unknown (`never-delete-a-member-in-the-config`).
fn report_leftovers(input: &PlanInput, set: &ObservedSet) -> ControlFlow<Step> {
    if let Some(m) = input.unaccounted_local_entry(&set.config) {
        return Break(refuse(Refusal::UnaccountedLocalMember {
            host: m.host.clone(),
        }));
    }
    if let Some(m) = input
        .local_members
        .iter()
        .find(|m| !input.is_wanted(m.slot) && m.stateful_set_exists && m.address.is_none())
    {
        return Break(refuse(Refusal::StatefulSetAddressUnknown { slot: m.slot }));
    }
    Continue(())
}

/// The observed config with its version raised by one, ready to be changed
/// (`docs/replica-set-rules.md`, `reconfig-accepted-without-force`).
fn next_version(config: &ReplicaSetConfig) -> ReplicaSetConfig {
    ReplicaSetConfig {
        version: config.version.saturating_add(1),
        ..config.clone()
    }
}

/// Healthy voters in `config` (by the observed health; `joining` counts as
/// healthy since it just answered), and how many a majority of its voters needs
/// (`docs/replica-set-rules.md`, `keep-a-healthy-voting-majority`).
fn healthy_voters_after(
    config: &ReplicaSetConfig,
    set: &ObservedSet,
    joining: Option<&MemberAddress>,
) -> (usize, usize) {
    let healthy = config
        .voters()
        .filter(|m| {
            Some(&m.host) == joining
                || set
                    .members
                    .get(&m.host)
                    .is_some_and(MemberStatus::counts_towards_majority)
        })
        .count();
    (healthy, config.majority())
}

/// Waits unless the healthy voters of `config` are a majority
/// (`keep-a-healthy-voting-majority`).
fn check_healthy_majority(
    config: &ReplicaSetConfig,
    set: &ObservedSet,
    joining: Option<&MemberAddress>,
) -> ControlFlow<Step> {
    let (healthy, needed) = healthy_voters_after(config, set, joining);
    if healthy < needed {
        return Break(wait(WaitReason::NotEnoughHealthyVoters { healthy, needed }));
    }
    Continue(())
}

/// The reconfig step, or a refusal naming what mongod would reject
/// (`docs/replica-set-rules.md`: `reconfig-accepted-without-force`,
/// `one-voting-change-per-reconfig`, `config-within-mongodb-limits`).
fn checked_reconfig(old: &ReplicaSetConfig, config: ReplicaSetConfig, change: Change) -> Step {
    let problems = reconfig_problems(old, &config);
    if problems.is_empty() {
        Step::Reconfig { config, change }
    } else {
        refuse(Refusal::InvalidConfig { problems })
    }
}

#[cfg(test)]
mod reason_names {
    //! The reasons are derived from the variant names (strum); these tests pin
    //! that down, one sample of every variant.

    use strum::VariantNames;

    use super::*;

    fn host() -> MemberAddress {
        MemberAddress {
            host: "10.0.0.1".to_owned(),
            port: 30000,
        }
    }

    fn is_pascal_case_ascii(name: &str) -> bool {
        name.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && name.chars().all(|c| c.is_ascii_alphanumeric())
    }

    /// Every sample's reason is its expected name, the names are exactly the
    /// enum's variants, and all are PascalCase ASCII.
    fn check(samples: &[(&'static str, &'static str)], variants: &[&str]) {
        for (reason, expected) in samples {
            assert_eq!(reason, expected);
            assert!(is_pascal_case_ascii(reason), "{reason}");
        }
        let mut named: Vec<&str> = samples.iter().map(|(reason, _)| *reason).collect();
        let mut variants = variants.to_vec();
        named.sort_unstable();
        variants.sort_unstable();
        assert_eq!(named, variants, "one sample per variant");
    }

    #[test]
    fn every_wait_reason_is_its_variant_name() {
        let slot = MemberSlot::Data(1);
        let samples = [
            (WaitReason::NoPrimary, "NoPrimary"),
            (WaitReason::ConfigNotCommitted, "ConfigNotCommitted"),
            (
                WaitReason::NewlyAddedMemberSyncing { host: host() },
                "NewlyAddedMemberSyncing",
            ),
            (WaitReason::PodNotRunning { slot }, "PodNotRunning"),
            (
                WaitReason::MemberAddressUnknown { slot },
                "MemberAddressUnknown",
            ),
            (
                WaitReason::MemberNotAnswering { slot, host: host() },
                "MemberNotAnswering",
            ),
            (
                WaitReason::MemberIdentityUnknown { host: host() },
                "MemberIdentityUnknown",
            ),
            (
                WaitReason::WaitingForNewPrimary {
                    old_primary: host(),
                },
                "WaitingForNewPrimary",
            ),
            (
                WaitReason::StepDownRefused {
                    primary: host(),
                    least_lag_secs: Some(12),
                },
                "StepDownRefused",
            ),
            (
                WaitReason::PrimaryAddressChanged {
                    primary: host(),
                    now_at: host(),
                },
                "PrimaryAddressChanged",
            ),
            (
                WaitReason::NoElectableSecondary { primary: host() },
                "NoElectableSecondary",
            ),
            (
                WaitReason::NotEnoughHealthyVoters {
                    healthy: 1,
                    needed: 2,
                },
                "NotEnoughHealthyVoters",
            ),
            (
                WaitReason::ReplicaSetUnreachable {
                    replica_set_id: "id".to_owned(),
                },
                "ReplicaSetUnreachable",
            ),
            (
                WaitReason::VotingMajorityLost {
                    lost: vec![host()],
                    voters: 3,
                },
                "VotingMajorityLost",
            ),
            (
                WaitReason::ExistingConfigUnreadable { host: host() },
                "ExistingConfigUnreadable",
            ),
            (WaitReason::AwaitingInitiate, "AwaitingInitiate"),
            (
                WaitReason::TooFewMembersAnswering {
                    answered: 1,
                    needed: 2,
                },
                "TooFewMembersAnswering",
            ),
            (
                WaitReason::ClusterNotAnswering {
                    vip: "10.0.0.2".to_owned(),
                },
                "ClusterNotAnswering",
            ),
            (
                WaitReason::VotersInOneCluster {
                    vip: "10.0.0.1".to_owned(),
                },
                "VotersInOneCluster",
            ),
            (
                WaitReason::DroppedMembersUnreadable { host: host() },
                "DroppedMembersUnreadable",
            ),
        ];
        let reasons: Vec<(&'static str, &'static str)> = samples
            .into_iter()
            .map(|(reason, name)| {
                assert_eq!(
                    Step::Wait {
                        reason: reason.clone()
                    }
                    .reason(),
                    name
                );
                (reason.reason(), name)
            })
            .collect();
        check(&reasons, WaitReason::VARIANTS);
    }

    #[test]
    fn every_refusal_is_its_variant_name() {
        let text = || "x".to_owned();
        let samples = [
            (
                Refusal::WouldBreakVotingMajority {
                    host: host(),
                    healthy: 1,
                    needed: 2,
                },
                "WouldBreakVotingMajority",
            ),
            (
                Refusal::MemberHoldsAnotherReplicaSet {
                    host: host(),
                    member_replica_set_id: text(),
                    replica_set_id: text(),
                },
                "MemberHoldsAnotherReplicaSet",
            ),
            (
                Refusal::MemberSetNameMismatch {
                    host: host(),
                    member_set_name: text(),
                    set_name: text(),
                },
                "MemberSetNameMismatch",
            ),
            (
                Refusal::SetNameMismatch {
                    observed: text(),
                    desired: text(),
                },
                "SetNameMismatch",
            ),
            (
                Refusal::ReplicaSetIdMismatch {
                    observed: text(),
                    recorded: text(),
                },
                "ReplicaSetIdMismatch",
            ),
            (
                Refusal::InvalidConfig {
                    problems: vec![ConfigProblem::NoVoters],
                },
                "InvalidConfig",
            ),
            (Refusal::TooManyMembers { host: host() }, "TooManyMembers"),
            (
                Refusal::NoVoteForArbiter { host: host() },
                "NoVoteForArbiter",
            ),
            (
                Refusal::ArbiterVoteWouldGiveClusterMajority { host: host() },
                "ArbiterVoteWouldGiveClusterMajority",
            ),
            (Refusal::NothingToInitiate, "NothingToInitiate"),
            (Refusal::NoElectableLocalMember, "NoElectableLocalMember"),
            (
                Refusal::UnaccountedLocalMember { host: host() },
                "UnaccountedLocalMember",
            ),
            (
                Refusal::StatefulSetAddressUnknown {
                    slot: MemberSlot::Arbiter,
                },
                "StatefulSetAddressUnknown",
            ),
            (
                Refusal::DepartureUnproven {
                    slot: MemberSlot::Arbiter,
                    entry: host(),
                },
                "DepartureUnproven",
            ),
            (
                Refusal::DroppedByRecovery {
                    host: host(),
                    recovery: "forced in cluster 10.0.0.9".to_owned(),
                },
                "DroppedByRecovery",
            ),
        ];
        let reasons: Vec<(&'static str, &'static str)> = samples
            .into_iter()
            .map(|(reason, name)| {
                assert_eq!(
                    Step::Refuse {
                        reason: reason.clone()
                    }
                    .reason(),
                    name
                );
                (reason.reason(), name)
            })
            .collect();
        check(&reasons, Refusal::VARIANTS);
    }

    #[test]
    fn every_step_and_change_is_named_by_its_variant() {
        let config = ReplicaSetConfig {
            set_name: "rs0".to_owned(),
            version: 1,
            term: None,
            members: Vec::new(),
            settings: ConfigSettings::from_desired(&ReplicaSetSettings::default(), None),
        };
        let changes = [
            (Change::AddMember { host: host() }, "AddMember"),
            (Change::PromoteMember { host: host() }, "PromoteMember"),
            (Change::DemoteMember { host: host() }, "DemoteMember"),
            (Change::RemoveMember { host: host() }, "RemoveMember"),
            (
                Change::ReaddressMember {
                    from: host(),
                    to: host(),
                },
                "ReaddressMember",
            ),
            (Change::UpdateSettings, "UpdateSettings"),
        ];
        let reasons: Vec<(&'static str, &'static str)> = changes
            .into_iter()
            .map(|(change, name)| {
                let step = Step::Reconfig {
                    config: config.clone(),
                    change,
                };
                (step.reason(), name)
            })
            .collect();
        check(&reasons, Change::VARIANTS);

        // The steps that name themselves; a reconfig, a wait and a refusal are
        // named by what they carry (above).
        let steps = [
            (
                Step::Initiate {
                    config: config.clone(),
                    on: host(),
                },
                "Initiate",
            ),
            (
                Step::StepDown {
                    primary: host(),
                    step_down_secs: STEP_DOWN_SECS,
                    secondary_catch_up_period_secs: SECONDARY_CATCH_UP_PERIOD_SECS,
                },
                "StepDown",
            ),
            (
                Step::DeleteStatefulSet {
                    slot: MemberSlot::Data(0),
                    delete_pvc: false,
                },
                "DeleteStatefulSet",
            ),
            (Step::InSync, "InSync"),
        ];
        let mut named = Vec::new();
        for (step, name) in steps {
            assert_eq!(step.reason(), name);
            named.push(name);
        }
        named.extend(["Reconfig", "Wait", "Refuse"]);
        named.sort_unstable();
        let mut variants = Step::VARIANTS.to_vec();
        variants.sort_unstable();
        assert_eq!(named, variants, "one sample per variant");
    }
}
