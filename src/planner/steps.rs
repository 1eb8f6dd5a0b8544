//! What the planner returns: the one [`Step`] to take, the [`Change`] a
//! reconfig makes, and why it waits ([`WaitReason`]) or refuses
//! ([`Refusal`]). Each has a bounded PascalCase name for Events, condition
//! reasons and metric labels, and a sentence for humans.

use std::fmt;

use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::replset::{ConfigProblem, DefaultW, ReplicaSetConfig, MAX_MEMBERS, MAX_VOTERS};

/// `stepDownSecs` sent with `replSetStepDown`: how long the old primary stays
/// unelectable.
pub const STEP_DOWN_SECS: u32 = 60;
/// `secondaryCatchUpPeriodSecs` sent with `replSetStepDown`.
pub const SECONDARY_CATCH_UP_PERIOD_SECS: u32 = 10;

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
    /// `setDefaultRWConcern` on `primary`, a local member: pins the implicit
    /// default write concern mongod itself would apply to the set hostconf
    /// lists as the cluster-wide one, so that no reconfig is refused for
    /// changing it.
    SetClusterWriteConcern { primary: MemberAddress, w: DefaultW },
    /// `replSetStepDown` on the primary.
    StepDown {
        primary: MemberAddress,
        step_down_secs: u32,
        secondary_catch_up_period_secs: u32,
    },
    /// Delete the StatefulSet of a member that is out of the config; delete its
    /// PVC as well when `delete_pvc`.
    DeleteStatefulSet { slot: MemberSlot, delete_pvc: bool },
    /// Delete the PVC and the pod of a member too stale to catch up, so that
    /// it comes back empty and resyncs from scratch (its StatefulSet stays).
    ResyncMember {
        slot: MemberSlot,
        host: MemberAddress,
    },
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
    /// A voter held at priority 0 (mongod's PSA rule) gets its priority.
    RaisePriority {
        host: MemberAddress,
    },
    /// A secondary held at priority 0 while another cluster's arbiter
    /// leaves: without it, mongod's PSA rule refuses the arbiter's removal.
    HoldPriority {
        host: MemberAddress,
    },
    DemoteMember {
        host: MemberAddress,
    },
    /// The member answers empty (a lost volume) while its entry votes: its
    /// vote goes until it is SECONDARY again.
    SilenceEmptiedMember {
        host: MemberAddress,
    },
    RemoveMember {
        host: MemberAddress,
    },
    /// A member of a lost cluster an SRE asked this cluster to forget.
    RemoveForgottenMember {
        host: MemberAddress,
    },
    /// A non-voting entry at this cluster's VIP that no local member
    /// accounts for and nobody answers at.
    RemoveUnaccountedEntry {
        host: MemberAddress,
    },
    /// The member's address changed: its entry keeps its `_id`, votes and
    /// priority, and takes the new host.
    ReaddressMember {
        from: MemberAddress,
        to: MemberAddress,
    },
    /// A member's votes (taken only), priority, hidden or tags brought to
    /// what hostconf lists for it.
    UpdateMember {
        host: MemberAddress,
    },
    UpdateSettings,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Change::AddMember { host } => write!(f, "add {host}"),
            Change::PromoteMember { host } => write!(f, "give {host} a vote"),
            Change::RaisePriority { host } => write!(f, "give voter {host} its priority"),
            Change::HoldPriority { host } => write!(
                f,
                "give {host} priority 0 while an arbiter leaves (mongod's PSA rule)"
            ),
            Change::DemoteMember { host } => write!(
                f,
                "take {host}'s vote, so that another cluster can take one"
            ),
            Change::SilenceEmptiedMember { host } => write!(
                f,
                "take {host}'s vote until it is SECONDARY: it lost its data and \
                 would vote for any candidate while it resyncs"
            ),
            Change::RemoveMember { host } => write!(f, "remove {host}"),
            Change::RemoveForgottenMember { host } => {
                write!(
                    f,
                    "remove {host}, a member of a cluster forgotten on request"
                )
            }
            Change::RemoveUnaccountedEntry { host } => write!(
                f,
                "remove {host}: a non-voter at this cluster's VIP that no member here \
                 accounts for and nobody answers at"
            ),
            Change::ReaddressMember { from, to } => {
                write!(f, "change the host of the member at {from} to {to}")
            }
            Change::UpdateMember { host } => write!(
                f,
                "bring {host}'s votes, priority, hidden and tags to hostconf's"
            ),
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
            Step::SetClusterWriteConcern { primary, w } => write!(
                f,
                "set the cluster-wide default write concern to {w} on {primary}"
            ),
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
            Step::ResyncMember { slot, host } => write!(
                f,
                "resync {slot} ({host}) from scratch: it is too stale to catch up, \
                 so its PVC and pod are deleted"
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
    #[error("{host} joined without a vote and catches up before it is given one")]
    MemberCatchingUpForVote { host: MemberAddress },
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
        "primary {primary} refused to step down: no electable secondary is caught up{}; \
         asking again later",
        least_lag_secs.map(|l| format!(" (the closest is {l} s behind)")).unwrap_or_default()
    )]
    StepDownRefused {
        primary: MemberAddress,
        /// The lag of mongod's closest candidate ([`ObservedSet::successor_lags`]).
        ///
        /// [`ObservedSet::successor_lags`]: crate::observe::ObservedSet::successor_lags
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
    #[error(
        "an arbiter can leave only once {secondary} is held at priority 0 by its cluster \
         (mongod's PSA rule)"
    )]
    SecondaryNotYetHeldForPsa { secondary: MemberAddress },
    #[error("only {healthy} healthy voters, {needed} needed for a majority after the change")]
    NotEnoughHealthyVoters { healthy: usize, needed: usize },
    #[error("{host} resyncs from scratch without its vote; it gets it back once SECONDARY")]
    MemberResyncing { host: MemberAddress },
    #[error(
        "{host} is too stale to catch up; it is resynced once {needed} healthy voters \
         answer without it ({healthy} now)"
    )]
    TooStaleMemberWaitsForMajority {
        host: MemberAddress,
        healthy: usize,
        needed: usize,
    },
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
    #[error(
        "{change} would change the implicit default write concern from {from} to {to}, \
         which mongod refuses while no cluster-wide write concern is set: waiting for the \
         operator of the cluster whose member is the primary to set it"
    )]
    ClusterWriteConcernNotSet {
        change: String,
        from: DefaultW,
        to: DefaultW,
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
        "the member at {from} now answers at {to}, which the config still names for \
         _id {holder}: mongod keeps a host's _id across a reconfig, so its entry cannot \
         follow while that one stays (nodePorts exchanged between members?); give the \
         Services their nodePorts back"
    )]
    NewAddressHeldByAnotherEntry {
        from: MemberAddress,
        to: MemberAddress,
        holder: i64,
    },
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
    #[error(
        "{host} was removed from the set with its cluster, forgotten on request ({forgotten}), \
         and still holds its data from then: it is not re-added as it is. To bring it back, \
         delete its PersistentVolumeClaim and its pod: it rejoins and resyncs from scratch \
         (docs/disaster-recovery.md)"
    )]
    ForgottenWithItsCluster {
        host: MemberAddress,
        forgotten: String,
    },
    #[error(
        "mongod refused to {change} (103): the new config would change the implicit default \
         write concern and no cluster-wide write concern is set. The operator of the \
         cluster whose member is the primary sets one; to do it by hand, run \
         setDefaultRWConcern on the primary (docs/replica-set-rules.md, Write concern and PSA)"
    )]
    ImplicitWriteConcernWouldChange { change: String },
    #[error(
        "mongod refused to {change} (103): the new config is primary-secondary-arbiter with \
         both data members electable while the old one has a single writable voter (mongod's \
         PSA rule); the operator gives the new voter priority 0 first and its priority in a \
         second reconfig (docs/replica-set-rules.md, Write concern and PSA)"
    )]
    PsaSecondaryWouldBeElectable { change: String },
    #[error(
        "mongod refused to {change} (103: {message}); the config did not move meanwhile, so \
         this is no race with another cluster: the change is tried again in 30 s"
    )]
    ReconfigRefused { change: String, message: String },
    #[error(
        "{on} could not find itself among {hosts} (NodeNotFound 74): mongod proves a host is \
         itself by connecting to it, so the pod must reach its own VIP:NodePort through its \
         member Service (hairpin traffic). Check from the pod that it connects to its own \
         VIP:NodePort (docs/install-helm.md, \"Hairpin traffic\"); the initiate is tried \
         again meanwhile. mongod said: {message}"
    )]
    MemberCannotReachItself {
        on: MemberAddress,
        hosts: String,
        message: String,
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
