//! Stage `status` (pure): what the `MongoDB` status says after a reconcile pass.
//!
//! FedState's shape (`state`, `replset[]`, `currentInfo.members`, …) comes from the
//! replica set as observed; the standard conditions say what the operator is doing
//! and why, in words an on-call SRE can act on. A condition keeps its
//! `lastTransitionTime` unless its status flips, and nothing here depends on the
//! clock otherwise, so a pass that changes nothing writes nothing.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::api::{
    CurrentInfo, LocalMemberStatus, MongoDB, MongoDBStatus, MongoState, RecoveryStatus,
    ReplSetMemberStatus,
};
use crate::build::mongod_options::mongod_settings;
use crate::build::{self, names};
use crate::hostconf::MemberAddress;
use crate::member::MemberSlot;
use crate::observe::ObservedSet;
use crate::planner::{Step, WaitReason};
use crate::replset::MemberState;
use crate::roll::{self, RollStep};
use crate::validate::{InvalidInput, Validated};

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
}

impl ConditionType {
    /// The condition's `type`.
    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

/// The reasons status gives of its own (the others come from the planner's
/// step and from [`InvalidInput`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::IntoStaticStr)]
enum StatusReason {
    AllMembersReady,
    Initialized,
    NotInitialized,
    InSync,
    Idle,
    MembersUnhealthy,
    Healthy,
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
}

impl StatusReason {
    fn as_str(self) -> &'static str {
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

/// A local member as Kubernetes shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalMemberView {
    /// Which member.
    pub slot: MemberSlot,
    /// StatefulSet (and Service) name.
    pub stateful_set: String,
    /// Its Service's nodePort, when known.
    pub node_port: Option<i32>,
    /// `VIP:nodePort`, when known.
    pub host: Option<MemberAddress>,
    /// The revision its pod runs, when it has a pod.
    pub revision: Option<String>,
}

/// The local members status lists: every slot with a Service or a StatefulSet.
pub fn local_member_views(instance: &str, validated: &Validated) -> Vec<LocalMemberView> {
    let mut slots: Vec<MemberSlot> = validated
        .services
        .keys()
        .chain(validated.stateful_sets.keys())
        .copied()
        .collect();
    slots.sort();
    slots.dedup();
    slots
        .into_iter()
        .map(|slot| LocalMemberView {
            slot,
            stateful_set: names::slot(instance, slot),
            node_port: validated.services.get(&slot).and_then(|s| s.node_port),
            host: validated.address(slot),
            revision: validated
                .stateful_sets
                .get(&slot)
                .and_then(|s| s.pod.as_ref())
                .and_then(|pod| pod.revision.clone()),
        })
        .collect()
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
    /// Now, for conditions that flip.
    pub now: Time,
}

/// The status after this pass.
pub fn compute_status(input: &StatusInput) -> MongoDBStatus {
    let mongodb = input.mongodb;
    let previous = mongodb.status.clone().unwrap_or_default();
    let desired = mongodb.spec.members.max(0);
    let ready_local = ready_local_members(input);
    let view = replica_set_view(input, &previous, ready_local);
    let local_members = local_member_statuses(input);
    let initialized = input.observation.is_some() || previous.replica_set_id.is_some();
    let all_ready = ready_local == desired && !local_members.iter().any(|m| is_leaving(m, desired));
    let in_sync = matches!(input.step, Some(Step::InSync));
    let rolling = input.roll.is_some_and(|step| *step != RollStep::UpToDate);
    let refused = matches!(input.step, Some(Step::Refuse { .. }));
    let blocked = input.problem.is_some() || refused;

    let state = if input.paused {
        MongoState::Pause
    } else if blocked {
        MongoState::Error
    } else if in_sync && all_ready && has_primary(input) {
        MongoState::Running
    } else {
        MongoState::Reconciling
    };
    let running = state == MongoState::Running;

    let generation = mongodb.metadata.generation;
    let mut conditions = Vec::new();
    let mut set = |type_: ConditionType, status: bool, reason: &str, message: String| {
        let previous = &previous.conditions;
        conditions.push(next_condition(
            previous, type_, status, reason, message, generation, &input.now,
        ));
    };
    let (activity_reason, activity_message) = activity(input);
    let (ready_reason, ready_message) = if running {
        let message =
            format!("{ready_local}/{desired} local members are healthy in the replica set");
        (StatusReason::AllMembersReady.as_str(), message)
    } else {
        let message = format!("{ready_local}/{desired} local members ready: {activity_message}");
        (activity_reason, message)
    };
    set(ConditionType::Ready, running, ready_reason, ready_message);

    let initialized_reason = if initialized {
        StatusReason::Initialized
    } else {
        StatusReason::NotInitialized
    };
    let initialized_message = match (input.observation, &previous.replica_set_id) {
        (Some(observation), _) => format!(
            "replica set {} exists (config version {})",
            observation.config.set_name, observation.config.version
        ),
        (None, Some(id)) => format!("replica set {id} was initiated; no member answers now"),
        (None, None) => "no member of the replica set has a configuration yet".to_string(),
    };
    set(
        ConditionType::ReplicaSetInitialized,
        initialized,
        initialized_reason.as_str(),
        initialized_message,
    );

    let (sync_reason, sync_message) = if in_sync {
        let message = "this cluster's members match spec.members".to_string();
        (StatusReason::InSync.as_str(), message)
    } else {
        (activity_reason, activity_message.clone())
    };
    set(
        ConditionType::MembersInSync,
        in_sync,
        sync_reason,
        sync_message,
    );

    let progressing = !input.paused && !blocked && (!in_sync || rolling);
    let (progress_reason, progress_message) = match (progressing, input.roll) {
        (true, Some(roll)) if in_sync => (roll_reason(roll), roll.to_string()),
        (true, _) => (activity_reason, activity_message.clone()),
        (false, _) => (
            StatusReason::Idle.as_str(),
            "no change in progress".to_string(),
        ),
    };
    set(
        ConditionType::Progressing,
        progressing,
        progress_reason,
        progress_message,
    );

    let unhealthy = unhealthy_members(input.observation);
    let majority_lost = matches!(
        input.step,
        Some(Step::Wait {
            reason: WaitReason::VotingMajorityLost { .. }
        })
    );
    let (degraded_reason, degraded_message) = if blocked || majority_lost {
        (activity_reason, activity_message)
    } else if !unhealthy.is_empty() {
        let message = format!("members not healthy: {}", unhealthy.join(", "));
        (StatusReason::MembersUnhealthy.as_str(), message)
    } else if !input.apply_failures.is_empty() {
        let message = format!(
            "refused by the API server: {}",
            input.apply_failures.join("; ")
        );
        (StatusReason::ApplyFailed.as_str(), message)
    } else {
        let message = "every member of the replica set is healthy".to_string();
        (StatusReason::Healthy.as_str(), message)
    };
    let degraded =
        blocked || majority_lost || !unhealthy.is_empty() || !input.apply_failures.is_empty();
    set(
        ConditionType::Degraded,
        degraded,
        degraded_reason,
        degraded_message,
    );

    let credentials_from_spec = mongodb.spec.credentials_secret_ref.is_none();
    let (credentials_reason, credentials_message) = if credentials_from_spec {
        let message = "credentials are derived from spec.rootPassword (FedState fallback); \
                       prefer spec.credentialsSecretRef";
        (StatusReason::PlainTextRootPassword, message)
    } else {
        (
            StatusReason::CredentialsSecret,
            "credentials come from a Secret",
        )
    };
    set(
        ConditionType::CredentialsFromSpec,
        credentials_from_spec,
        credentials_reason.as_str(),
        credentials_message.to_string(),
    );

    let settings = mongod_settings(&mongodb.spec.config);
    let accepted = settings.refused.is_empty();
    let (config_reason, config_message) = if accepted {
        let message = format!(
            "{} spec.config settings passed to mongod",
            mongodb.spec.config.len()
        );
        (StatusReason::AllSettingsAccepted, message)
    } else {
        let refused: Vec<String> = settings.refused.iter().map(ToString::to_string).collect();
        let message = format!(
            "spec.config entries not passed to mongod: {}",
            refused.join("; ")
        );
        (StatusReason::SettingsRefused, message)
    };
    set(
        ConditionType::ConfigAccepted,
        accepted,
        config_reason.as_str(),
        config_message,
    );

    let (observed_reason, observed_message) = match (input.observation, &view.observed_at) {
        (Some(_), _) => (
            StatusReason::Observed,
            "the replica set was read this pass".to_string(),
        ),
        (None, Some(at)) => (
            StatusReason::ObservationStale,
            format!(
                "the replica set could not be read; replset, primary and currentInfo.members \
                 show the view observed at {}",
                at.0
            ),
        ),
        (None, None) => (
            StatusReason::NotObserved,
            "the replica set has not been read yet".to_string(),
        ),
    };
    set(
        ConditionType::ReplicaSetObserved,
        input.observation.is_some(),
        observed_reason.as_str(),
        observed_message,
    );

    let (settings_match, settings_reason, settings_message) = settings_condition(input);
    set(
        ConditionType::SettingsMatch,
        settings_match,
        settings_reason.as_str(),
        settings_message,
    );

    let applied = input.apply_failures.is_empty();
    let (applied_reason, applied_message) = if applied {
        (
            StatusReason::AllApplied,
            "every desired object is applied".to_string(),
        )
    } else {
        let message = format!(
            "refused by the API server: {}",
            input.apply_failures.join("; ")
        );
        (StatusReason::ApplyFailed, message)
    };
    set(
        ConditionType::ObjectsApplied,
        applied,
        applied_reason.as_str(),
        applied_message,
    );

    let previous_up_to_date = condition(Some(&previous), ConditionType::UpToDate);
    let (up_to_date, up_to_date_reason, up_to_date_message) =
        match (input.roll, previous_up_to_date) {
            (Some(roll), _) => (
                *roll == RollStep::UpToDate,
                roll_reason(roll),
                roll.to_string(),
            ),
            (None, Some(previous)) => (
                previous.status == "True",
                previous.reason.as_str(),
                previous.message.clone(),
            ),
            (None, None) => (
                false,
                StatusReason::Pending.as_str(),
                "pods are replaced once this cluster's members match the spec".to_string(),
            ),
        };
    set(
        ConditionType::UpToDate,
        up_to_date,
        up_to_date_reason,
        up_to_date_message,
    );

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
        state: Some(state),
        restart_state: Some(restart_state),
        feature_compatibility_version: input
            .feature_compatibility_version
            .clone()
            .or(previous.feature_compatibility_version),
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
        ready_members: Some(format!("{}/{desired}", view.ready_local)),
        local_members,
        recovery: input.recovery.clone().or(previous.recovery),
    }
}

/// The replica set as status shows it to the control plane.
struct ReplicaSetView {
    replset: Vec<ReplSetMemberStatus>,
    primary: Option<String>,
    ready_local: i32,
    observed_at: Option<Time>,
}

/// This pass's view when it read the set (with the time it was first seen as
/// it is), else the last one.
fn replica_set_view(
    input: &StatusInput,
    previous: &MongoDBStatus,
    ready_local: i32,
) -> ReplicaSetView {
    let Some(observation) = input.observation else {
        return ReplicaSetView {
            replset: previous.replset.clone(),
            primary: previous.primary.clone(),
            ready_local: previous.current_info.members,
            observed_at: previous.replica_set_observed_at.clone(),
        };
    };
    let replset = replset(Some(observation));
    let primary = observation.primary.as_ref().map(ToString::to_string);
    let unchanged = previous.replset == replset
        && previous.primary == primary
        && previous.current_info.members == ready_local;
    let observed_at = match &previous.replica_set_observed_at {
        Some(at) if unchanged => at.clone(),
        _ => input.now.clone(),
    };
    ReplicaSetView {
        replset,
        primary,
        ready_local,
        observed_at: Some(observed_at),
    }
}

/// Whether the set's settings are this cluster's `spec.replicaSetSettings`.
fn settings_condition(input: &StatusInput) -> (bool, StatusReason, String) {
    let spec = &input.mongodb.spec;
    let desired = &spec.replica_set_settings;
    let Some(observation) = input.observation else {
        let message = "the replica set has not been read this pass".to_string();
        return (true, StatusReason::NotObserved, message);
    };
    let actual = &observation.config.settings;
    if actual.matches(desired) {
        let message = "the replica set's settings are spec.replicaSetSettings".to_string();
        return (true, StatusReason::SettingsInPlace, message);
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
    (false, StatusReason::SettingsDiffer, message)
}

/// Whether this pass saw a primary in the set.
fn has_primary(input: &StatusInput) -> bool {
    input.observation.is_some_and(|o| o.primary.is_some())
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
        RollStep::Wait { reason } | RollStep::Renew { reason, .. } => reason.into(),
        other => other.into(),
    }
}

fn next_condition(
    previous: &[Condition],
    type_: ConditionType,
    status: bool,
    reason: &str,
    message: String,
    generation: Option<i64>,
    now: &Time,
) -> Condition {
    let status = if status { "True" } else { "False" }.to_string();
    let last_transition_time = previous
        .iter()
        .find(|c| c.type_ == type_.as_str() && c.status == status)
        .map(|c| c.last_transition_time.clone())
        .unwrap_or_else(|| now.clone());
    Condition {
        type_: type_.as_str().to_string(),
        status,
        reason: reason.to_string(),
        message,
        observed_generation: generation,
        last_transition_time,
    }
}

/// Local data members that are in the config and PRIMARY or SECONDARY.
fn ready_local_members(input: &StatusInput) -> i32 {
    let Some(observation) = input.observation else {
        return 0;
    };
    let ready = |host: &MemberAddress| {
        observation.members.get(host).is_some_and(|member| {
            member.healthy && matches!(member.state, MemberState::Primary | MemberState::Secondary)
        })
    };
    let count = input
        .local_members
        .iter()
        .filter(|m| matches!(m.slot, MemberSlot::Data(_)))
        .filter_map(|m| m.host.as_ref())
        .filter(|host| ready(host))
        .count();
    i32::try_from(count).unwrap_or(i32::MAX)
}

fn is_leaving(member: &LocalMemberStatus, desired: i32) -> bool {
    member.index >= desired
}

/// How far a member's replication lag must move before status shows the new
/// value: every status write triggers another pass, and a lag that moves by a
/// second on most passes would keep an idle instance busy.
const LAG_TOLERANCE_SECS: i64 = 10;

/// The lag status shows: the previous value while the new one is within
/// [`LAG_TOLERANCE_SECS`] of it, else the new one.
fn steady_lag(previous: Option<i64>, observed: Option<i64>) -> Option<i64> {
    match (previous, observed) {
        (Some(previous), Some(observed)) if (observed - previous).abs() < LAG_TOLERANCE_SECS => {
            Some(previous)
        }
        _ => observed,
    }
}

/// The lag status showed for `slot` before this pass.
fn previous_lag(input: &StatusInput, slot: MemberSlot) -> Option<i64> {
    let index = slot_index(slot);
    let previous = input.mongodb.status.as_ref()?;
    previous
        .local_members
        .iter()
        .find(|m| m.index == index)?
        .lag_seconds
}

/// The index status gives a slot (-1 for the arbiter).
fn slot_index(slot: MemberSlot) -> i32 {
    match slot {
        MemberSlot::Data(index) => i32::try_from(index).unwrap_or(i32::MAX),
        MemberSlot::Arbiter => -1,
    }
}

fn local_member_statuses(input: &StatusInput) -> Vec<LocalMemberStatus> {
    input
        .local_members
        .iter()
        .map(|view| {
            let observed = view
                .host
                .as_ref()
                .and_then(|host| input.observation.and_then(|o| o.members.get(host)));
            LocalMemberStatus {
                index: slot_index(view.slot),
                stateful_set: view.stateful_set.clone(),
                pod: format!("{}-0", view.stateful_set),
                node_port: view.node_port,
                host: view.host.as_ref().map(ToString::to_string),
                role: match (input.observation, observed) {
                    (_, Some(member)) => member.state.as_str().to_string(),
                    (Some(_), None) => "NotInConfig".to_string(),
                    (None, None) => "Unknown".to_string(),
                },
                lag_seconds: steady_lag(
                    previous_lag(input, view.slot),
                    observed.and_then(|m| m.lag_secs),
                ),
                revision: view.revision.clone(),
            }
        })
        .collect()
}

fn replset(observation: Option<&ObservedSet>) -> Vec<ReplSetMemberStatus> {
    let Some(observation) = observation else {
        return Vec::new();
    };
    let mut members: Vec<ReplSetMemberStatus> = observation
        .members
        .iter()
        .map(|(host, member)| ReplSetMemberStatus {
            id: member.id,
            name: host.to_string(),
            health: if member.healthy { 1.0 } else { 0.0 },
            state: member.state.code(),
            state_str: member.state.as_str().to_string(),
            sync_source_host: member.sync_source.clone(),
        })
        .collect();
    members.sort_by_key(|m| m.id);
    members
}

fn unhealthy_members(observation: Option<&ObservedSet>) -> Vec<String> {
    observation
        .map(|o| {
            o.members
                .iter()
                .filter(|(_, m)| !m.healthy)
                .map(|(host, m)| format!("{host} ({})", m.state))
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::api::MongoDBSpec;
    use crate::replset::MemberStatus;
    use crate::replset::{ConfigSettings, ReplicaSetConfig};
    use k8s_openapi::jiff::Timestamp;

    fn mongodb(members: i32) -> MongoDB {
        let spec: MongoDBSpec =
            serde_json::from_value(serde_json::json!({"members": members, "rootPassword": "x"}))
                .unwrap();
        let mut mongodb = MongoDB::new("demo", spec);
        mongodb.metadata.generation = Some(3);
        mongodb
    }

    fn host(port: u16) -> MemberAddress {
        MemberAddress {
            host: "127.0.10.1".into(),
            port,
        }
    }

    fn observation(states: &[(u16, MemberState, bool)]) -> ObservedSet {
        let members: BTreeMap<MemberAddress, MemberStatus> = states
            .iter()
            .enumerate()
            .map(|(i, (port, state, healthy))| {
                (
                    host(*port),
                    MemberStatus {
                        id: i as i64,
                        healthy: *healthy,
                        state: *state,
                        sync_source: String::new(),
                        lag_secs: Some(0),
                        config_version: Some(2),
                    },
                )
            })
            .collect();
        ObservedSet {
            config: ReplicaSetConfig {
                set_name: "replset-0".into(),
                version: 2,
                term: Some(1),
                members: vec![],
                settings: ConfigSettings {
                    election_timeout_millis: 10_000,
                    heartbeat_interval_millis: 2_000,
                    catch_up_timeout_millis: -1,
                    chaining_allowed: true,
                    replica_set_id: Some("65a000000000000000000001".into()),
                },
            },
            primary: states
                .iter()
                .find(|(_, s, _)| *s == MemberState::Primary)
                .map(|(p, _, _)| host(*p)),
            members,
            config_committed: true,
        }
    }

    fn views(ports: &[u16]) -> Vec<LocalMemberView> {
        ports
            .iter()
            .enumerate()
            .map(|(i, port)| LocalMemberView {
                slot: MemberSlot::Data(i as u32),
                stateful_set: format!("demo-mongodb-{i}"),
                node_port: Some(i32::from(*port)),
                host: Some(host(*port)),
                revision: Some("abc".into()),
            })
            .collect()
    }

    fn at(seconds: i64) -> Time {
        Time(Timestamp::from_second(seconds).unwrap())
    }

    fn input<'a>(
        mongodb: &'a MongoDB,
        observation: Option<&'a ObservedSet>,
        local: &'a [LocalMemberView],
        step: Option<&'a Step>,
        now: Time,
    ) -> StatusInput<'a> {
        StatusInput {
            mongodb,
            paused: false,
            problem: None,
            observation,
            local_members: local,
            step,
            roll: None,
            feature_compatibility_version: None,
            revision: Some("abc".into()),
            apply_failures: &[],
            recovery: None,
            now,
        }
    }

    fn condition<'a>(status: &'a MongoDBStatus, type_: &str) -> &'a Condition {
        status.conditions.iter().find(|c| c.type_ == type_).unwrap()
    }

    #[test]
    fn a_set_in_sync_with_every_local_member_healthy_is_running() {
        let mongodb = mongodb(2);
        let observed = observation(&[
            (30001, MemberState::Primary, true),
            (30002, MemberState::Secondary, true),
        ]);
        let local = views(&[30001, 30002]);
        let status = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(100),
        ));
        assert_eq!(status.state, Some(MongoState::Running));
        assert_eq!(status.current_info.members, 2);
        assert_eq!(status.ready_members.as_deref(), Some("2/2"));
        assert_eq!(status.primary.as_deref(), Some("127.0.10.1:30001"));
        assert_eq!(status.replset.len(), 2);
        assert_eq!(status.replset[0].state_str, "PRIMARY");
        assert_eq!(condition(&status, "Ready").status, "True");
        assert_eq!(condition(&status, "Ready").observed_generation, Some(3));
        assert_eq!(
            status.replica_set_id.as_deref(),
            Some("65a000000000000000000001")
        );
    }

    #[test]
    fn a_roll_shows_in_restart_state_up_to_date_and_progressing_and_is_kept_between_rolls() {
        let mongodb = mongodb(2);
        let observed = observation(&[
            (30001, MemberState::Primary, true),
            (30002, MemberState::Secondary, true),
        ]);
        let local = views(&[30001, 30002]);
        let lease = roll::Lease::new(host(30001), true, 0);
        let restarting = RollStep::Renew {
            lease: lease.clone(),
            reason: roll::RollWait::MemberRestarting {
                member: host(30001),
            },
        };
        let mut rolling = input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(100),
        );
        rolling.roll = Some(&restarting);
        rolling.feature_compatibility_version = Some("7.0".into());
        let status = compute_status(&rolling);
        assert_eq!(status.restart_state.as_deref(), Some("PrimaryDeleted"));
        assert_eq!(status.feature_compatibility_version.as_deref(), Some("7.0"));
        let up_to_date = condition(&status, "UpToDate");
        assert_eq!(
            (up_to_date.status.as_str(), up_to_date.reason.as_str()),
            ("False", "MemberRestarting")
        );
        assert!(
            up_to_date
                .message
                .contains("127.0.10.1:30001 is restarting"),
            "{}",
            up_to_date.message
        );
        let progressing = condition(&status, "Progressing");
        assert_eq!(
            (progressing.status.as_str(), progressing.reason.as_str()),
            ("True", "MemberRestarting")
        );
        assert_eq!(status.local_members[0].revision.as_deref(), Some("abc"));

        // A pass that does not plan the roll (membership not in sync) keeps
        // what the last one said.
        let mut later = mongodb.clone();
        later.status = Some(status);
        let kept = compute_status(&input(&later, Some(&observed), &local, None, at(101)));
        assert_eq!(kept.restart_state.as_deref(), Some("PrimaryDeleted"));
        assert_eq!(condition(&kept, "UpToDate").reason, "MemberRestarting");
        assert_eq!(kept.feature_compatibility_version.as_deref(), Some("7.0"));

        let done = RollStep::UpToDate;
        let mut finished = input(
            &later,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(102),
        );
        finished.roll = Some(&done);
        let status = compute_status(&finished);
        assert_eq!(status.restart_state.as_deref(), Some("NotInProcess"));
        assert_eq!(condition(&status, "UpToDate").status, "True");
        assert_eq!(condition(&status, "Progressing").status, "False");
    }

    #[test]
    fn a_lost_voting_majority_is_degraded_naming_the_members_gone() {
        let mongodb = mongodb(2);
        let observed = observation(&[
            (30001, MemberState::Secondary, true),
            (30002, MemberState::Down, false),
        ]);
        let local = views(&[30001, 30002]);
        let step = Step::Wait {
            reason: WaitReason::VotingMajorityLost {
                lost: vec![host(30002)],
                voters: 2,
            },
        };
        let status = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&step),
            at(100),
        ));
        let degraded = condition(&status, "Degraded");
        assert_eq!(
            (degraded.status.as_str(), degraded.reason.as_str()),
            ("True", "VotingMajorityLost")
        );
        assert!(
            degraded.message.contains("127.0.10.1:30002"),
            "{}",
            degraded.message
        );
        assert_eq!(condition(&status, "Ready").reason, "VotingMajorityLost");
    }

    #[test]
    fn a_refused_step_is_an_error_with_its_reason_in_conditions() {
        let mongodb = mongodb(1);
        let observed = observation(&[(30001, MemberState::Primary, true)]);
        let local = views(&[30001]);
        let step = Step::Refuse {
            reason: crate::planner::Refusal::NothingToInitiate,
        };
        let status = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&step),
            at(100),
        ));
        assert_eq!(status.state, Some(MongoState::Error));
        let degraded = condition(&status, "Degraded");
        assert_eq!(degraded.status, "True");
        assert_eq!(degraded.reason, "NothingToInitiate");
        assert!(degraded.message.contains("refused"));
    }

    #[test]
    fn conditions_keep_their_transition_time_until_they_flip() {
        let mut mongodb = mongodb(1);
        let observed = observation(&[(30001, MemberState::Primary, true)]);
        let local = views(&[30001]);
        let first = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(100),
        ));
        mongodb.status = Some(first.clone());
        let second = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(200),
        ));
        assert_eq!(
            first, second,
            "a pass that changes nothing must write nothing"
        );
        mongodb.status = Some(second);
        let down = observation(&[(30001, MemberState::Secondary, true)]);
        let third = compute_status(&input(
            &mongodb,
            Some(&down),
            &local,
            Some(&Step::Wait {
                reason: crate::planner::WaitReason::NoPrimary,
            }),
            at(300),
        ));
        assert_eq!(condition(&third, "Ready").status, "False");
        assert_eq!(condition(&third, "Ready").last_transition_time, at(300));
        assert_eq!(
            condition(&third, "ReplicaSetInitialized").last_transition_time,
            at(100)
        );
    }

    #[test]
    fn pause_and_problems_are_reported_as_such() {
        let mongodb = mongodb(1);
        let mut paused = input(&mongodb, None, &[], None, at(1));
        paused.paused = true;
        assert_eq!(compute_status(&paused).state, Some(MongoState::Pause));
        let problem = InvalidInput::HostconfMissing {
            name: "demo-hostconf".into(),
        };
        let mut failed = input(&mongodb, None, &[], None, at(1));
        failed.problem = Some(&problem);
        let status = compute_status(&failed);
        assert_eq!(status.state, Some(MongoState::Error));
        assert_eq!(condition(&status, "Ready").reason, "HostconfMissing");
        assert_eq!(condition(&status, "ReplicaSetInitialized").status, "False");
        assert!(condition(&status, "Degraded")
            .message
            .contains("ConfigMap demo-hostconf"));
    }

    #[test]
    fn a_pass_that_cannot_read_the_set_keeps_the_last_view_and_says_it_is_stale() {
        // FedState deletes every member Service whose nodePort no cluster's
        // replset lists, and Karmada's health check reads currentInfo.members:
        // a blank view after an election or a timeout would cost members.
        let mut mongodb = mongodb(2);
        let observed = observation(&[
            (30001, MemberState::Primary, true),
            (30002, MemberState::Secondary, true),
        ]);
        let local = views(&[30001, 30002]);
        let seen = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(100),
        ));
        assert_eq!(seen.replica_set_observed_at, Some(at(100)));
        assert_eq!(condition(&seen, "ReplicaSetObserved").status, "True");
        mongodb.status = Some(seen.clone());
        let again = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(200),
        ));
        assert_eq!(again, seen, "the same view observed again changes nothing");
        mongodb.status = Some(again);

        let wait = Step::Wait {
            reason: crate::planner::WaitReason::NoPrimary,
        };
        let blind = compute_status(&input(&mongodb, None, &local, Some(&wait), at(300)));
        assert_eq!(blind.replset, seen.replset);
        assert_eq!(blind.primary, seen.primary);
        assert_eq!(blind.current_info.members, 2);
        assert_eq!(blind.replica_set_observed_at, Some(at(100)));
        let stale = condition(&blind, "ReplicaSetObserved");
        assert_eq!(
            (stale.status.as_str(), stale.reason.as_str()),
            ("False", "ObservationStale")
        );
        assert!(
            stale.message.contains("1970-01-01T00:01:40Z"),
            "{}",
            stale.message
        );

        let problem = InvalidInput::HostconfMissing {
            name: "demo-hostconf".into(),
        };
        let mut failed = input(&mongodb, None, &[], None, at(400));
        failed.problem = Some(&problem);
        let failed = compute_status(&failed);
        assert_eq!(
            failed.replset, seen.replset,
            "an input problem does not blank the view either"
        );
        assert_eq!(failed.current_info.members, 2);
    }

    #[test]
    fn replication_lag_moving_by_a_few_seconds_writes_nothing() {
        // Each status write triggers another pass: a lag that moves by a
        // second on most passes kept an idle instance busy.
        let mut mongodb = mongodb(2);
        let local = views(&[30001, 30002]);
        let with_lag = |lag: i64| {
            let mut observed = observation(&[
                (30001, MemberState::Primary, true),
                (30002, MemberState::Secondary, true),
            ]);
            observed.members.get_mut(&host(30002)).unwrap().lag_secs = Some(lag);
            observed
        };
        let first = compute_status(&input(
            &mongodb,
            Some(&with_lag(1)),
            &local,
            Some(&Step::InSync),
            at(1),
        ));
        mongodb.status = Some(first.clone());
        for lag in [0, 2, 5, 9] {
            let next = compute_status(&input(
                &mongodb,
                Some(&with_lag(lag)),
                &local,
                Some(&Step::InSync),
                at(2),
            ));
            assert_eq!(next, first, "lag {lag}");
        }
        let behind = compute_status(&input(
            &mongodb,
            Some(&with_lag(30)),
            &local,
            Some(&Step::InSync),
            at(3),
        ));
        assert_eq!(
            behind.local_members[1].lag_seconds,
            Some(30),
            "a real change is written"
        );
    }

    #[test]
    fn settings_that_differ_from_the_set_are_reported() {
        let mut mongodb = mongodb(1);
        let observed = observation(&[(30001, MemberState::Primary, true)]);
        let local = views(&[30001]);
        let same = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(1),
        ));
        assert_eq!(condition(&same, "SettingsMatch").status, "True");
        mongodb.spec.replica_set_settings.election_timeout_millis = 30_000;
        let differ = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(2),
        ));
        let settings = condition(&differ, "SettingsMatch");
        assert_eq!(
            (settings.status.as_str(), settings.reason.as_str()),
            ("False", "SettingsDiffer")
        );
        assert!(
            settings
                .message
                .contains("only the rsInit cluster writes them"),
            "{}",
            settings.message
        );
    }

    #[test]
    fn a_set_without_a_primary_is_never_running() {
        // Seen in the demo: Running 2/2 while the set had no primary.
        let mongodb = mongodb(2);
        let observed = observation(&[
            (30001, MemberState::Secondary, true),
            (30002, MemberState::Secondary, true),
        ]);
        let local = views(&[30001, 30002]);
        let status = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(1),
        ));
        assert_eq!(status.state, Some(MongoState::Reconciling));
        let ready = condition(&status, "Ready");
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", "NoPrimary")
        );
    }

    #[test]
    fn refused_config_entries_are_named_in_a_condition() {
        let mut mongodb = mongodb(1);
        let accepted = compute_status(&input(&mongodb, None, &[], None, at(1)));
        assert_eq!(condition(&accepted, "ConfigAccepted").status, "True");
        mongodb.spec.config = vec![crate::api::ConfigVar {
            name: "LOG_LEVEL".into(),
            value: "info".into(),
        }];
        let refused = compute_status(&input(&mongodb, None, &[], None, at(2)));
        let config = condition(&refused, "ConfigAccepted");
        assert_eq!(
            (config.status.as_str(), config.reason.as_str()),
            ("False", "SettingsRefused")
        );
        assert!(
            config.message.contains("LOG_LEVEL (not a setting"),
            "{}",
            config.message
        );
    }

    #[test]
    fn members_above_spec_still_in_the_set_keep_the_instance_reconciling() {
        let mongodb = mongodb(1);
        let observed = observation(&[
            (30001, MemberState::Primary, true),
            (30002, MemberState::Secondary, true),
        ]);
        let local = views(&[30001, 30002]);
        let status = compute_status(&input(
            &mongodb,
            Some(&observed),
            &local,
            Some(&Step::InSync),
            at(1),
        ));
        assert_eq!(status.state, Some(MongoState::Reconciling));
        assert_eq!(status.local_members[1].role, "SECONDARY");
    }
}
