//! The conditions of status, one function each, and FedState's `state`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use super::members::{any_leaving, ready_local_members};
use super::replica_set::{authentication_refused, has_primary, unhealthy_members};
use super::{condition, desired_members, ConditionType, StatusInput};
use crate::api::{MongoDB, MongoState};
use crate::build::mongod_options::mongod_settings;
use crate::keyfile::KeyfileProgress;
use crate::planner::{Step, WaitReason};
use crate::roll::RollStep;
use crate::service_hold::{HeldService, HoldReason};

/// The reasons status gives of its own (the others come from the planner's
/// step and from [`InvalidInput`](crate::validate::InvalidInput)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
pub(super) enum StatusReason {
    AllMembersReady,
    Initialized,
    NotInitialized,
    InSync,
    Idle,
    MembersUnhealthy,
    KeyfileMismatch,
    Healthy,
    StorageTooSmall,
    StorageSufficient,
    PlainTextRootPassword,
    CredentialsSecret,
    AllSettingsAccepted,
    SettingsRefused,
    Observed,
    ObservationStale,
    NotObserved,
    SettingsInPlace,
    SettingsDiffer,
    AllApplied,
    ApplyFailed,
    Paused,
    Pending,
    NoPrimary,
    NoServiceHeld,
}

impl StatusReason {
    pub(super) fn as_str(self) -> &'static str {
        self.into()
    }
}

/// What one condition says this pass, before its transition time is settled.
pub(super) struct Verdict<'a> {
    status: bool,
    reason: &'a str,
    message: String,
}

impl<'a> Verdict<'a> {
    pub(super) fn new(status: bool, reason: &'a str, message: impl Into<String>) -> Self {
        Verdict {
            status,
            reason,
            message: message.into(),
        }
    }

    /// The condition of type `type_`, keeping the `lastTransitionTime` it had
    /// in `previous` unless its status flips.
    pub(super) fn into_condition(
        self,
        type_: ConditionType,
        previous: &[Condition],
        generation: Option<i64>,
        now: &Time,
    ) -> Condition {
        let status = if self.status { "True" } else { "False" }.to_string();
        let last_transition_time = previous
            .iter()
            .find(|c| c.type_ == type_.as_str() && c.status == status)
            .map(|c| c.last_transition_time.clone())
            .unwrap_or_else(|| now.clone());
        Condition {
            type_: type_.as_str().to_string(),
            status,
            reason: self.reason.to_string(),
            message: self.message,
            observed_generation: generation,
            last_transition_time,
        }
    }
}

/// FedState's `state`: paused, stopped by invalid input or a refusal, running
/// (in sync, every local member ready, a primary), or still reconciling.
pub(super) fn state(input: &StatusInput) -> MongoState {
    let desired = desired_members(input);
    let all_ready = ready_local_members(input) == desired && !any_leaving(input);
    if input.paused {
        MongoState::Pause
    } else if blocked(input) {
        MongoState::Error
    } else if in_sync(input) && all_ready && has_primary(input) {
        MongoState::Running
    } else {
        MongoState::Reconciling
    }
}

/// `Ready`: every local member is healthy in a set that matches the spec.
pub(super) fn ready<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let ready_local = ready_local_members(input);
    let desired = desired_members(input);
    if state(input) == MongoState::Running {
        let message =
            format!("{ready_local}/{desired} local members are healthy in the replica set");
        return Verdict::new(true, StatusReason::AllMembersReady.as_str(), message);
    }
    let (reason, activity) = activity(input);
    let message = format!("{ready_local}/{desired} local members ready: {activity}");
    Verdict::new(false, reason, message)
}

/// `ReplicaSetInitialized`: this pass read the set's config, or an earlier
/// one recorded the set's id.
pub(super) fn replica_set_initialized<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let replica_set_id = input
        .mongodb
        .status
        .as_ref()
        .and_then(|s| s.replica_set_id.as_ref());
    match (input.observation, replica_set_id) {
        (Some(observation), _) => Verdict::new(
            true,
            StatusReason::Initialized.as_str(),
            format!(
                "replica set {} exists (config version {})",
                observation.config.set_name, observation.config.version
            ),
        ),
        (None, Some(id)) => Verdict::new(
            true,
            StatusReason::Initialized.as_str(),
            format!("replica set {id} was initiated; no member answers now"),
        ),
        (None, None) => Verdict::new(
            false,
            StatusReason::NotInitialized.as_str(),
            "no member of the replica set has a configuration yet",
        ),
    }
}

/// `MembersInSync`: the planner found this cluster's members as the spec
/// wants them.
pub(super) fn members_in_sync<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    if in_sync(input) {
        let message = "this cluster's members match spec.members";
        return Verdict::new(true, StatusReason::InSync.as_str(), message);
    }
    let (reason, message) = activity(input);
    Verdict::new(false, reason, message)
}

/// `Progressing`: the membership or the roll is changing something, and
/// nothing stops it.
pub(super) fn progressing<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let in_sync = in_sync(input);
    let rolling = input.roll.is_some_and(|step| *step != RollStep::UpToDate);
    let progressing = !input.paused && !blocked(input) && (!in_sync || rolling);
    match (progressing, input.roll) {
        (true, Some(roll)) if in_sync => Verdict::new(true, roll_reason(roll), roll.to_string()),
        (true, _) => {
            let (reason, message) = activity(input);
            Verdict::new(true, reason, message)
        }
        (false, _) => Verdict::new(false, StatusReason::Idle.as_str(), "no change in progress"),
    }
}

/// `Degraded`: invalid input, a refusal, a lost voting majority, a member too
/// stale to catch up, an unhealthy member or an object the API server
/// refused, in that order of precedence.
pub(super) fn degraded<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let needs_attention = matches!(
        input.step,
        Some(
            Step::Wait {
                reason: WaitReason::VotingMajorityLost { .. }
                    | WaitReason::TooStaleMemberWaitsForMajority { .. }
            } | Step::ResyncMember { .. }
        )
    );
    if blocked(input) || needs_attention {
        let (reason, message) = activity(input);
        return Verdict::new(true, reason, message);
    }
    let refused = authentication_refused(input.observation);
    if !refused.is_empty() {
        let message = format!(
            "internal authentication refused between the primary and {}: their keyfiles share \
             no key; compare the keyfile in each cluster's credentials Secret",
            refused.join(", ")
        );
        return Verdict::new(true, StatusReason::KeyfileMismatch.as_str(), message);
    }
    let unhealthy = unhealthy_members(input.observation);
    if !unhealthy.is_empty() {
        let message = format!("members not healthy: {}", unhealthy.join(", "));
        return Verdict::new(true, StatusReason::MembersUnhealthy.as_str(), message);
    }
    if !input.apply_failures.is_empty() {
        let message = format!(
            "refused by the API server: {}",
            input.apply_failures.join("; ")
        );
        return Verdict::new(true, StatusReason::ApplyFailed.as_str(), message);
    }
    let message = "every member of the replica set is healthy";
    Verdict::new(false, StatusReason::Healthy.as_str(), message)
}

/// `CredentialsFromSpec`: the credentials are derived from FedState's
/// plain-text `spec.rootPassword` rather than read from a Secret.
pub(super) fn credentials_from_spec<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    if input.mongodb.spec.credentials_secret_ref.is_none() {
        let message = "credentials are derived from spec.rootPassword (FedState fallback); \
                       prefer spec.credentialsSecretRef";
        return Verdict::new(true, StatusReason::PlainTextRootPassword.as_str(), message);
    }
    let message = "credentials come from a Secret";
    Verdict::new(false, StatusReason::CredentialsSecret.as_str(), message)
}

/// `ConfigAccepted`: every `spec.config` entry is passed to mongod; False
/// names the ones that are not.
pub(super) fn config_accepted<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let config = &input.mongodb.spec.config;
    let settings = mongod_settings(config);
    if settings.refused.is_empty() {
        let message = format!("{} spec.config settings passed to mongod", config.len());
        return Verdict::new(true, StatusReason::AllSettingsAccepted.as_str(), message);
    }
    let refused: Vec<String> = settings.refused.iter().map(ToString::to_string).collect();
    let message = format!(
        "spec.config entries not passed to mongod: {}",
        refused.join("; ")
    );
    Verdict::new(false, StatusReason::SettingsRefused.as_str(), message)
}

/// `ReplicaSetObserved`: this pass read the set; False says since when the
/// view in status is the last one read.
pub(super) fn replica_set_observed<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let observed_at = input
        .mongodb
        .status
        .as_ref()
        .and_then(|s| s.replica_set_observed_at.as_ref());
    match (input.observation, observed_at) {
        (Some(_), _) => Verdict::new(
            true,
            StatusReason::Observed.as_str(),
            "the replica set was read this pass",
        ),
        (None, Some(at)) => Verdict::new(
            false,
            StatusReason::ObservationStale.as_str(),
            format!(
                "the replica set could not be read; replset, primary and currentInfo.members \
                 show the view observed at {}",
                at.0
            ),
        ),
        (None, None) => Verdict::new(
            false,
            StatusReason::NotObserved.as_str(),
            "the replica set has not been read yet",
        ),
    }
}

/// `SettingsMatch`: the set's settings are this cluster's
/// `spec.replicaSetSettings`; only the rsInit cluster writes them, so the
/// others report a difference here.
pub(super) fn settings_match<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let spec = &input.mongodb.spec;
    let desired = &spec.replica_set_settings;
    let Some(observation) = input.observation else {
        let message = "the replica set has not been read this pass";
        return Verdict::new(true, StatusReason::NotObserved.as_str(), message);
    };
    let actual = &observation.config.settings;
    if actual.matches(desired) {
        let message = "the replica set's settings are spec.replicaSetSettings";
        return Verdict::new(true, StatusReason::SettingsInPlace.as_str(), message);
    }
    let writer = if spec.rs_init {
        "this rsInit cluster is bringing them in line"
    } else {
        "only the rsInit cluster writes them; this cluster changes nothing"
    };
    let message = format!(
        "spec.replicaSetSettings (electionTimeoutMillis {}, heartbeatIntervalMillis {}, \
         catchUpTimeoutMillis {}, chainingAllowed {}) differ from the replica set's \
         ({}, {}, {}, {}): {writer}",
        desired.election_timeout_millis,
        desired.heartbeat_interval_millis,
        desired.catch_up_timeout_millis,
        desired.chaining_allowed,
        actual.election_timeout_millis,
        actual.heartbeat_interval_millis,
        actual.catch_up_timeout_millis,
        actual.chaining_allowed,
    );
    Verdict::new(false, StatusReason::SettingsDiffer.as_str(), message)
}

/// `ObjectsApplied`: the API server took every desired object this pass.
pub(super) fn objects_applied<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    if input.apply_failures.is_empty() {
        let message = "every desired object is applied";
        return Verdict::new(true, StatusReason::AllApplied.as_str(), message);
    }
    let message = format!(
        "refused by the API server: {}",
        input.apply_failures.join("; ")
    );
    Verdict::new(false, StatusReason::ApplyFailed.as_str(), message)
}

/// `UpToDate`: what the roll planned this pass; a pass that did not plan it
/// keeps what the last one said.
pub(super) fn up_to_date<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let mongodb: &'a MongoDB = input.mongodb;
    let previous = condition(mongodb.status.as_ref(), ConditionType::UpToDate);
    match (input.roll, previous) {
        (Some(roll), _) => Verdict::new(
            *roll == RollStep::UpToDate,
            roll_reason(roll),
            roll.to_string(),
        ),
        (None, Some(previous)) => Verdict::new(
            previous.status == "True",
            previous.reason.as_str(),
            previous.message.clone(),
        ),
        (None, None) => Verdict::new(
            false,
            StatusReason::Pending.as_str(),
            "pods are replaced once this cluster's members match the spec",
        ),
    }
}

/// Whether the planner found the membership as the spec wants it.
fn in_sync(input: &StatusInput) -> bool {
    matches!(input.step, Some(Step::InSync))
}

/// Whether invalid input or a refusal stops the pass.
fn blocked(input: &StatusInput) -> bool {
    input.problem.is_some() || matches!(input.step, Some(Step::Refuse { .. }))
}

/// The reason and message of what the pass is doing or stuck on.
fn activity(input: &StatusInput) -> (&'static str, String) {
    if input.paused {
        let message = "spec.pause is set: no change is made".to_string();
        return (StatusReason::Paused.as_str(), message);
    }
    if let Some(problem) = input.problem {
        return (problem.reason(), problem.to_string());
    }
    match input.step {
        Some(Step::InSync) if !has_primary(input) => {
            let message = "the replica set has no primary: writes are refused".to_string();
            (StatusReason::NoPrimary.as_str(), message)
        }
        Some(step) => (step.reason(), step.to_string()),
        None => {
            let message = "the replica set has not been observed yet".to_string();
            (StatusReason::Pending.as_str(), message)
        }
    }
}

/// The bounded reason of a roll step: what the roll waits for, or does.
fn roll_reason(step: &RollStep) -> &'static str {
    match step {
        RollStep::Wait { reason }
        | RollStep::Renew { reason, .. }
        | RollStep::StopOnKeyfileMismatch { reason, .. } => reason.into(),
        other => other.into(),
    }
}

/// `MemberServicesHeld`: the deleted member Services kept for their members,
/// each with its member and why.
pub(super) fn member_services_held<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let held = input.held_services;
    let Some(first) = held.first() else {
        return Verdict::new(
            false,
            StatusReason::NoServiceHeld.as_str(),
            "no deleted member Service is held",
        );
    };
    let reason = held
        .iter()
        .find(|h| h.reason == HoldReason::MemberInReplicaSet)
        .unwrap_or(first)
        .reason
        .into();
    let lines: Vec<String> = held.iter().map(HeldService::describe).collect();
    Verdict::new(true, reason, lines.join("; "))
}

/// `KeyfileInPlace`: where the keyfile stands, once the keys every member
/// runs were read; otherwise the condition as it was (or `KeysRunUnknown`).
pub(super) fn keyfile_in_place<'a>(input: &StatusInput<'a>) -> Verdict<'a> {
    let progress = match (
        input.keyfile,
        condition(input.mongodb.status.as_ref(), ConditionType::KeyfileInPlace),
    ) {
        (Some(progress), _) => progress.clone(),
        (None, Some(c)) => return Verdict::new(c.status == "True", &c.reason, c.message.clone()),
        (None, None) => KeyfileProgress::keys_run_unknown(),
    };
    let reason: &'static str = progress.reason.into();
    Verdict::new(progress.in_place, reason, progress.message)
}
