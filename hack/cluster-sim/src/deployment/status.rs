//! The Deployment's status and conditions (upstream `sync.go`
//! `calculateStatus`, `progress.go`, `util/deployment_util.go` conditions).

use k8s_openapi::api::apps::v1::{Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use serde_json::json;

use crate::controller_ref::omit_zero;

use super::*;

pub(super) fn now() -> Time {
    let now = Timestamp::now();
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

pub(super) fn new_condition(
    type_: &str,
    status: &str,
    reason: &str,
    message: String,
) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(now()),
        last_transition_time: Some(now()),
    }
}

pub(super) fn get_condition<'a>(
    status: Option<&'a DeploymentStatus>,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

pub(super) fn status_mut(d: &mut Deployment) -> &mut DeploymentStatus {
    d.status.get_or_insert_with(Default::default)
}

/// `SetDeploymentCondition`: no change for the same status and reason; the
/// transition time kept for the same status.
pub(super) fn set_condition(status: &mut DeploymentStatus, mut condition: DeploymentCondition) {
    if let Some(current) = get_condition(Some(status), &condition.type_) {
        if current.status == condition.status && current.reason == condition.reason {
            return;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != condition.type_);
    conditions.push(condition);
}

pub(super) fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
    }
}

/// `checkPausedConditions`: `Progressing` Unknown while paused, and when resumed.
pub(super) fn check_paused_conditions(d: &mut Deployment) {
    if !has_progress_deadline(d) {
        return;
    }
    let reason = get_condition(d.status.as_ref(), "Progressing").and_then(|c| c.reason.clone());
    if reason.as_deref() == Some(TIMED_OUT) {
        return;
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let paused_condition = reason.as_deref() == Some(PAUSED);
    if paused && !paused_condition {
        let condition = new_condition(
            "Progressing",
            "Unknown",
            PAUSED,
            "Deployment is paused".into(),
        );
        set_condition(status_mut(d), condition);
    } else if !paused && paused_condition {
        let condition = new_condition(
            "Progressing",
            "Unknown",
            RESUMED,
            "Deployment is resumed".into(),
        );
        set_condition(status_mut(d), condition);
    }
}

/// `calculateStatus`: the counts over all ReplicaSets (`updatedReplicas`
/// from the new one) and the `Available` condition.
pub(super) fn calculate_status(
    all: &[ReplicaSet],
    new: Option<&ReplicaSet>,
    d: &Deployment,
) -> DeploymentStatus {
    let available: i32 = all.iter().map(available_replicas).sum();
    let total: i32 = all.iter().map(spec_replicas).sum();
    let current = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(all.iter().map(status_replicas).sum()),
        updated_replicas: Some(new.map(status_replicas).unwrap_or(0)),
        ready_replicas: Some(all.iter().map(ready_replicas).sum()),
        available_replicas: Some(available),
        unavailable_replicas: Some((total - available).max(0)),
        collision_count: current.collision_count,
        conditions: current.conditions,
        terminating_replicas: None,
    };
    let condition = if available >= replicas(d) - max_unavailable(d) {
        new_condition(
            "Available",
            "True",
            MINIMUM_REPLICAS_AVAILABLE,
            "Deployment has minimum availability.".into(),
        )
    } else {
        new_condition(
            "Available",
            "False",
            MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.".into(),
        )
    };
    set_condition(&mut status, condition);
    status
}

pub(super) fn counter(value: Option<i32>) -> i32 {
    value.unwrap_or(0)
}

/// `DeploymentComplete`.
pub(super) fn deployment_complete(d: &Deployment, status: Option<&DeploymentStatus>) -> bool {
    let Some(status) = status else {
        return false;
    };
    let desired = replicas(d);
    counter(status.updated_replicas) == desired
        && counter(status.replicas) == desired
        && counter(status.available_replicas) == desired
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: more updated, ready or available replicas, or
/// fewer old ones, than the status last written.
pub(super) fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let old_old = counter(old.replicas) - counter(old.updated_replicas);
    let new_old = counter(new.replicas) - counter(new.updated_replicas);
    counter(new.updated_replicas) > counter(old.updated_replicas)
        || new_old < old_old
        || counter(new.ready_replicas) > counter(old.ready_replicas)
        || counter(new.available_replicas) > counter(old.available_replicas)
}

/// `DeploymentTimedOut`: no progress for `progressDeadlineSeconds`.
pub(super) fn deployment_timed_out(d: &Deployment, new: &DeploymentStatus) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(condition) = get_condition(Some(new), "Progressing") else {
        return false;
    };
    match condition.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => return false,
        Some(TIMED_OUT) => return true,
        _ => {}
    }
    let deadline = d
        .spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .unwrap_or(0);
    condition
        .last_update_time
        .as_ref()
        .is_some_and(|from| from.0.as_second() + i64::from(deadline) < Timestamp::now().as_second())
}

/// `syncRolloutStatus`: `calculateStatus`, then the `Progressing` condition
/// (complete, progressing, or timed out past `progressDeadlineSeconds`) and
/// the ReplicaSets' `ReplicaFailure`.
pub(super) fn sync_rollout_status(
    all: &[ReplicaSet],
    new: Option<&ReplicaSet>,
    d: &Deployment,
) -> DeploymentStatus {
    let mut status = calculate_status(all, new, d);
    if !has_progress_deadline(d) {
        remove_condition(&mut status, "Progressing");
    }
    let current = get_condition(d.status.as_ref(), "Progressing").cloned();
    let complete_before = counter(status.replicas) == counter(status.updated_replicas)
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    if has_progress_deadline(d) && !complete_before {
        let name = d.name_any();
        if deployment_complete(d, Some(&status)) {
            let message = match new {
                Some(new) => format!(
                    "ReplicaSet \"{}\" has successfully progressed.",
                    new.name_any()
                ),
                None => format!("Deployment \"{name}\" has successfully progressed."),
            };
            set_condition(
                &mut status,
                new_condition("Progressing", "True", NEW_RS_AVAILABLE, message),
            );
        } else if deployment_progressing(d, &status) {
            let message = match new {
                Some(new) => format!("ReplicaSet \"{}\" is progressing.", new.name_any()),
                None => format!("Deployment \"{name}\" is progressing."),
            };
            let mut condition = new_condition("Progressing", "True", REPLICA_SET_UPDATED, message);
            if let Some(current) = &current {
                if current.status == "True" {
                    condition.last_transition_time = current.last_transition_time.clone();
                }
                remove_condition(&mut status, "Progressing");
            }
            set_condition(&mut status, condition);
        } else if deployment_timed_out(d, &status) {
            let message = match new {
                Some(new) => format!(
                    "ReplicaSet \"{}\" has timed out progressing.",
                    new.name_any()
                ),
                None => format!("Deployment \"{name}\" has timed out progressing."),
            };
            set_condition(
                &mut status,
                new_condition("Progressing", "False", TIMED_OUT, message),
            );
        }
    }
    // `getReplicaFailures`: the new ReplicaSet's failure first.
    let failure = new
        .into_iter()
        .chain(all.iter())
        .flat_map(|s| {
            s.status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default()
        })
        .find(|c| c.type_ == "ReplicaFailure");
    match failure {
        Some(c) => set_condition(
            &mut status,
            DeploymentCondition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                message: c.message,
                last_update_time: c.last_transition_time.clone(),
                last_transition_time: c.last_transition_time,
            },
        ),
        None => remove_condition(&mut status, "ReplicaFailure"),
    }
    status
}

/// The status as a merge patch: every field named, zero counters and an
/// empty condition list removed (`omitempty`).
pub(super) fn status_patch(status: &DeploymentStatus) -> serde_json::Value {
    let conditions = status.conditions.clone().unwrap_or_default();
    json!({"status": {
        "observedGeneration": omit_zero(status.observed_generation.unwrap_or(0)),
        "replicas": omit_zero(counter(status.replicas)),
        "updatedReplicas": omit_zero(counter(status.updated_replicas)),
        "readyReplicas": omit_zero(counter(status.ready_replicas)),
        "availableReplicas": omit_zero(counter(status.available_replicas)),
        "unavailableReplicas": omit_zero(counter(status.unavailable_replicas)),
        "collisionCount": status.collision_count,
        "conditions": if conditions.is_empty() { serde_json::Value::Null } else { json!(conditions) },
    }})
}
