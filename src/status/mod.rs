//! Stage `status` (pure): what the `MongoDB` status says after a reconcile pass.
//!
//! FedState's shape (`state`, `replset[]`, `currentInfo.members`, …) comes from the
//! replica set as observed; the standard conditions say what the operator is doing
//! and why, in words an on-call SRE can act on. Each condition is computed by a
//! function of its own from the [`StatusInput`], and [`compute_status`] assembles
//! them. A condition keeps its `lastTransitionTime` unless its status flips, and
//! nothing here depends on the clock otherwise, so a pass that changes nothing
//! writes nothing.

mod conditions;
mod members;
mod replica_set;
pub mod storage;
#[cfg(test)]
mod tests;
mod tls;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{CurrentInfo, ForgetClusterStatus, MongoDB, MongoDBStatus, RecoveryStatus};
use crate::build;
use crate::keyfile::KeyfileProgress;
use crate::observe::ObservedSet;
use crate::planner::Step;
use crate::roll::{self, RollStep};
use crate::service_hold::HeldService;
use crate::validate::InvalidInput;
use crate::volume_growth::Growth;

pub use members::{local_member_views, LocalMemberView};
pub use tls::{TlsReason, TlsSeen};

/// The conditions in status, each always present.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr, strum::VariantNames)]
pub enum ConditionType {
    /// Every local member is healthy in a replica set that matches the spec.
    Ready,
    /// The replica set has been initiated.
    ReplicaSetInitialized,
    /// This cluster's members match `spec.members`.
    MembersInSync,
    /// A change is being carried out.
    Progressing,
    /// Something needs attention: invalid input, a refusal, an unhealthy member.
    Degraded,
    /// Credentials come from FedState's plain-text `spec.rootPassword`.
    CredentialsFromSpec,
    /// Every `spec.config` entry is passed to mongod.
    ConfigAccepted,
    /// `spec.persistence.storage` holds mongod's oplog, journal and
    /// diagnostic data with room for data (4Gi or more).
    StorageSufficient,
    /// This pass read the replica set; False: the view in status is the last one read.
    ReplicaSetObserved,
    /// The set's settings are `spec.replicaSetSettings` (only the rsInit
    /// cluster writes them; the others report a difference here).
    SettingsMatch,
    /// Every desired object was applied this pass.
    ObjectsApplied,
    /// Every local member's pod runs its StatefulSet's revision and this
    /// cluster restarts nothing; False: what the roll does or waits for.
    UpToDate,
    /// Every local member's data claim, claim template and volume has
    /// `spec.persistence.storage`; False: the growth under way, or why not.
    VolumesMatchSpec,
    /// A member Service the control plane deleted is kept (by the operator's
    /// finalizer) because its member is, or may be, still in the set.
    MemberServicesHeld,
    /// Every member of the set runs the credentials Secret's key alone;
    /// False: where a new key's two phases stand, or who runs another key.
    KeyfileInPlace,
    /// With `spec.tls`: every local data member runs `spec.tls.mode`.
    #[strum(serialize = "TLSReady")]
    TlsReady,
}

impl ConditionType {
    /// The condition's `type`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// A condition of `status`, if it has it.
pub fn condition(status: Option<&MongoDBStatus>, type_: ConditionType) -> Option<&Condition> {
    status?
        .conditions
        .iter()
        .find(|c| c.type_ == type_.as_str())
}

/// The reason of condition `type_` in `status`, if it has one.
pub fn condition_reason(status: Option<&MongoDBStatus>, type_: ConditionType) -> Option<&str> {
    condition(status, type_).map(|c| c.reason.as_str())
}
/// Everything the status is computed from.
pub struct StatusInput<'a> {
    /// The object as read at the start of the pass (previous status included).
    pub mongodb: &'a MongoDB,
    /// `spec.pause` is set.
    pub paused: bool,
    /// Why the input could not be used, if it could not.
    pub problem: Option<&'a InvalidInput>,
    /// The replica set as observed this pass.
    pub observation: Option<&'a ObservedSet>,
    /// The local members.
    pub local_members: &'a [LocalMemberView],
    /// The planner's step this pass, when it got that far.
    pub step: Option<&'a Step>,
    /// Revision of the member pod template.
    pub revision: Option<String>,
    /// The roll's step this pass, when the roll was planned (the members
    /// match the spec and the pass is not paused or leaving).
    pub roll: Option<&'a RollStep>,
    /// The featureCompatibilityVersion read this pass.
    pub feature_compatibility_version: Option<String>,
    /// What the API server refused to apply this pass, one message each.
    pub apply_failures: &'a [String],
    /// The disaster recovery after this pass (`None`: as recorded before).
    pub recovery: Option<RecoveryStatus>,
    /// The forgetting of a lost cluster after this pass (`None`: as recorded
    /// before).
    pub forget_cluster: Option<ForgetClusterStatus>,
    /// The deleted member Services this pass kept.
    pub held_services: &'a [HeldService],
    /// What `grow` did this pass (`None`: not run: paused, leaving or invalid input).
    pub growth: Option<&'a Growth>,
    /// Where the keyfile stands (`None`: not known this pass).
    pub keyfile: Option<&'a KeyfileProgress>,
    /// What the pass saw of TLS (`None`: no `spec.tls`, or it stopped before).
    pub tls: Option<TlsSeen<'a>>,
    /// Now, for conditions that flip.
    pub now: Time,
}

/// The status after this pass.
pub fn compute_status(input: &StatusInput) -> MongoDBStatus {
    let mongodb = input.mongodb;
    let previous = mongodb.status.clone().unwrap_or_default();
    let generation = mongodb.metadata.generation;
    let view = replica_set::view(input, &previous, members::ready_local_members(input));
    let verdicts = [
        (ConditionType::Ready, conditions::ready(input)),
        (
            ConditionType::ReplicaSetInitialized,
            conditions::replica_set_initialized(input),
        ),
        (
            ConditionType::MembersInSync,
            conditions::members_in_sync(input),
        ),
        (ConditionType::Progressing, conditions::progressing(input)),
        (ConditionType::Degraded, conditions::degraded(input)),
        (
            ConditionType::CredentialsFromSpec,
            conditions::credentials_from_spec(input),
        ),
        (
            ConditionType::ConfigAccepted,
            conditions::config_accepted(input),
        ),
        (
            ConditionType::StorageSufficient,
            storage::storage_sufficient(input),
        ),
        (
            ConditionType::ReplicaSetObserved,
            conditions::replica_set_observed(input),
        ),
        (
            ConditionType::SettingsMatch,
            conditions::settings_match(input),
        ),
        (
            ConditionType::ObjectsApplied,
            conditions::objects_applied(input),
        ),
        (ConditionType::UpToDate, conditions::up_to_date(input)),
        (
            ConditionType::VolumesMatchSpec,
            storage::volumes_match_spec(input),
        ),
        (
            ConditionType::MemberServicesHeld,
            conditions::member_services_held(input),
        ),
        (
            ConditionType::KeyfileInPlace,
            conditions::keyfile_in_place(input),
        ),
    ];
    let tls_ready = tls::tls_ready(input).map(|verdict| (ConditionType::TlsReady, verdict));
    let conditions = verdicts
        .into_iter()
        .chain(tls_ready)
        .map(|(type_, verdict)| {
            verdict.into_condition(type_, &previous.conditions, generation, &input.now)
        })
        .collect();
    let restart_state = match input.roll {
        Some(roll) => roll::restart_state(roll).to_string(),
        None => previous
            .restart_state
            .clone()
            .unwrap_or_else(|| roll::restart_state(&RollStep::UpToDate).to_string()),
    };
    let db_user = &mongodb.spec.db_user_spec;
    let db_user_password_fingerprint = db_user
        .password
        .as_deref()
        .filter(|_| db_user.enable)
        .map(build::fingerprint);
    let observed_config = input.observation.map(|o| &o.config);
    MongoDBStatus {
        state: Some(conditions::state(input)),
        restart_state: Some(restart_state),
        feature_compatibility_version: input
            .feature_compatibility_version
            .clone()
            .or(previous.feature_compatibility_version),
        default_write_concern: input
            .observation
            .and_then(replica_set::default_write_concern)
            .or(previous.default_write_concern),
        replset: view.replset,
        replica_set_observed_at: view.observed_at,
        current_revision: input.revision.clone().or(previous.current_revision),
        current_info: CurrentInfo {
            members: view.ready_local,
            db_user_password_fingerprint,
        },
        conditions,
        observed_generation: generation,
        primary: view.primary,
        config_version: observed_config
            .map(|c| c.version)
            .or(previous.config_version),
        replica_set_id: observed_config
            .and_then(|c| c.settings.replica_set_id.clone())
            .or(previous.replica_set_id),
        ready_members: Some(format!("{}/{}", view.ready_local, desired_members(input))),
        local_members: members::local_member_statuses(input),
        recovery: input.recovery.clone().or(previous.recovery),
        forget_cluster: input.forget_cluster.clone().or(previous.forget_cluster),
        tls: tls::tls_status(input, previous.tls),
    }
}

/// The number of members `spec.members` asks of this cluster.
fn desired_members(input: &StatusInput) -> i32 {
    input.mongodb.spec.members.max(0)
}
