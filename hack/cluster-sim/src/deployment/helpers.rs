//! The Deployment controller's arithmetic and bookkeeping, as upstream's
//! `pkg/controller/deployment/util/deployment_util.go` has it: strategy,
//! replica counts, surge and unavailability, annotations, template hashes.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;

use crate::pod_facts::is_terminal;

use super::*;

/// The rollout strategy (`spec.strategy.type`, `RollingUpdate` when unset as
/// the API server defaults it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Strategy {
    RollingUpdate,
    Recreate,
    Unknown(String),
}

pub(super) fn strategy_type(d: &Deployment) -> Strategy {
    match d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
    {
        None | Some("RollingUpdate") => Strategy::RollingUpdate,
        Some("Recreate") => Strategy::Recreate,
        Some(other) => Strategy::Unknown(other.to_string()),
    }
}

/// `spec.replicas` (defaulted to 1).
pub(super) fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub(super) fn spec_replicas(set: &ReplicaSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

pub(super) fn status_replicas(set: &ReplicaSet) -> i32 {
    set.status.as_ref().map(|s| s.replicas).unwrap_or(0)
}

pub(super) fn ready_replicas(set: &ReplicaSet) -> i32 {
    set.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

pub(super) fn available_replicas(set: &ReplicaSet) -> i32 {
    set.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

pub(super) fn template_of(set: &ReplicaSet) -> PodTemplateSpec {
    set.spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default()
}

/// `old` followed by `new` (`append(oldRSs, newRS)`, a nil new one left out).
pub(super) fn with_new(old: &[ReplicaSet], new: Option<&ReplicaSet>) -> Vec<ReplicaSet> {
    old.iter().chain(new).cloned().collect()
}

/// `ReplicaSetsByCreationTimestamp`: older first, then by name.
pub(super) fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let created = |s: &ReplicaSet| s.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// The revision annotation of a ReplicaSet (0 when absent or unreadable).
pub(super) fn revision(set: &ReplicaSet) -> i64 {
    set.annotations()
        .get(REVISION_ANNOTATION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

pub(super) fn int_annotation(set: &ReplicaSet, key: &str) -> Option<i32> {
    set.annotations().get(key)?.parse().ok()
}

/// `intstr.GetValueFromIntOrPercent`: a number, or a percentage of `total`
/// rounded up or down (anything else is refused by validation: 0).
pub(super) fn int_or_percent(value: &IntOrString, total: i32, round_up: bool) -> i32 {
    match value {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let Some(percent) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return 0;
            };
            let scaled = percent * i64::from(total);
            let value = if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            };
            i32::try_from(value).unwrap_or(0)
        }
    }
}

/// `ResolveFenceposts`: (maxSurge, maxUnavailable) for `spec.replicas`; both
/// zero makes maxUnavailable 1. Unset values are the API defaults, 25%.
pub(super) fn resolve_fenceposts(d: &Deployment) -> (i32, i32) {
    let rolling = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.clone())
        .unwrap_or_default();
    let default = IntOrString::String("25%".into());
    let desired = replicas(d);
    let surge = int_or_percent(
        rolling.max_surge.as_ref().unwrap_or(&default),
        desired,
        true,
    );
    let unavailable = int_or_percent(
        rolling.max_unavailable.as_ref().unwrap_or(&default),
        desired,
        false,
    );
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// `MaxSurge`.
pub(super) fn max_surge(d: &Deployment) -> i32 {
    if strategy_type(d) != Strategy::RollingUpdate {
        return 0;
    }
    resolve_fenceposts(d).0
}

/// `MaxUnavailable`.
pub(super) fn max_unavailable(d: &Deployment) -> i32 {
    if strategy_type(d) != Strategy::RollingUpdate || replicas(d) == 0 {
        return 0;
    }
    resolve_fenceposts(d).1.min(replicas(d))
}

/// `NewRSNewReplicas`: how far the new ReplicaSet may grow now.
pub(super) fn new_rs_new_replicas(d: &Deployment, all: &[ReplicaSet], new: &ReplicaSet) -> i32 {
    let desired = replicas(d);
    match strategy_type(d) {
        Strategy::RollingUpdate => {
            let current: i32 = all.iter().map(spec_replicas).sum();
            let max_total = desired + max_surge(d);
            if current >= max_total {
                return spec_replicas(new);
            }
            let scale_up = (max_total - current).min(desired - spec_replicas(new));
            spec_replicas(new) + scale_up
        }
        _ => desired,
    }
}

/// `IsSaturated`: the new ReplicaSet holds every replica, all available.
pub(super) fn is_saturated(d: &Deployment, new: Option<&ReplicaSet>) -> bool {
    let Some(new) = new else {
        return false;
    };
    let desired = replicas(d);
    int_annotation(new, DESIRED_REPLICAS_ANNOTATION) == Some(desired)
        && spec_replicas(new) == desired
        && available_replicas(new) == desired
}

/// `FindActiveOrLatest`: the only active ReplicaSet, or the newest when none
/// is active; none when several are.
pub(super) fn find_active_or_latest(
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
) -> Option<ReplicaSet> {
    let mut old = old.to_vec();
    old.sort_by(|a, b| by_creation(b, a));
    let active: Vec<ReplicaSet> = with_new(&old, new)
        .into_iter()
        .filter(|s| spec_replicas(s) > 0)
        .collect();
    match active.len() {
        0 => new.cloned().or_else(|| old.first().cloned()),
        1 => active.into_iter().next(),
        _ => None,
    }
}

/// `GetProportion` / `getReplicaSetFraction`.
pub(super) fn get_proportion(set: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    let size = spec_replicas(set);
    if size == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if replicas(d) == 0 {
        -size
    } else {
        let deployment_replicas = replicas(d) + max_surge(d);
        let annotated = int_annotation(set, MAX_REPLICAS_ANNOTATION)
            .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
        if annotated == 0 {
            return 0;
        }
        let new_size = f64::from(size) * f64::from(deployment_replicas) / f64::from(annotated);
        new_size.round() as i32 - size
    };
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// `ReplicasAnnotationsNeedUpdate`.
pub(super) fn replicas_annotations_need_update(set: &ReplicaSet, desired: i32, max: i32) -> bool {
    int_annotation(set, DESIRED_REPLICAS_ANNOTATION) != Some(desired)
        || int_annotation(set, MAX_REPLICAS_ANNOTATION) != Some(max)
}

/// `SetNewReplicaSetAnnotations`: the Deployment's annotations (but the
/// skipped ones), the revision if it grows (the former one kept in the
/// revision history), and for a set about to be created the replica
/// annotations. Whether anything changed.
pub(super) fn set_new_rs_annotations(
    d: &Deployment,
    set: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let mut changed = false;
    let annotations = set.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (key, value) in d.annotations() {
        if ANNOTATIONS_TO_SKIP.contains(&key.as_str()) || annotations.get(key) == Some(value) {
            continue;
        }
        annotations.insert(key.clone(), value.clone());
        changed = true;
    }
    let old_revision = annotations.get(REVISION_ANNOTATION).cloned();
    let old_number = match old_revision.as_deref() {
        None | Some("") => 0,
        Some(text) => match text.parse::<i64>() {
            Ok(n) => n,
            Err(_) => return false,
        },
    };
    if old_number < new_revision {
        annotations.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
        changed = true;
        if let Some(old_revision) = old_revision.filter(|r| !r.is_empty()) {
            let history = annotations
                .get(REVISION_HISTORY_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            let mut revisions: Vec<String> = history
                .split(',')
                .filter(|r| !r.is_empty())
                .map(String::from)
                .collect();
            revisions.push(old_revision);
            while revisions.join(",").len() > MAX_REVISION_HISTORY_CHARS && revisions.len() > 1 {
                revisions.remove(0);
            }
            annotations.insert(REVISION_HISTORY_ANNOTATION.into(), revisions.join(","));
        }
    }
    if !exists {
        let desired = replicas(d);
        let max = desired + max_surge(d);
        for (key, value) in [
            (DESIRED_REPLICAS_ANNOTATION, desired),
            (MAX_REPLICAS_ANNOTATION, max),
        ] {
            if annotations.get(key) != Some(&value.to_string()) {
                annotations.insert(key.into(), value.to_string());
                changed = true;
            }
        }
    }
    changed
}

/// `SetDeploymentRevision` (in memory; written by `write_deployment`).
pub(super) fn set_deployment_revision(d: &mut Deployment, revision: &str) {
    d.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(REVISION_ANNOTATION.into(), revision.to_string());
}

pub(super) fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .is_some_and(|s| s != i32::MAX)
}

pub(super) fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .filter(|l| *l != i32::MAX)
}

/// `oldPodsRunning`: an old ReplicaSet still counts pods, or one of its pods
/// has not finished (terminating ones included).
pub(super) fn old_pods_running(
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
    pod_map: &HashMap<String, Vec<Arc<Pod>>>,
) -> bool {
    if old.iter().map(status_replicas).sum::<i32>() > 0 {
        return true;
    }
    let new_uid = new.and_then(|n| n.uid());
    pod_map
        .iter()
        .filter(|(uid, _)| Some(uid.as_str()) != new_uid.as_deref())
        .any(|(_, pods)| pods.iter().any(|p| !is_terminal(p)))
}

/// FNV-1a (32 bits) over the template's JSON, then the collision count as
/// 8 little-endian bytes, rendered with `rand.SafeEncodeString`'s alphabet:
/// `controller.ComputeHash`'s construction, over JSON rather than Go's
/// `DeepHashObject` output, so the value differs from a real cluster's.
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if let Some(count) = collision_count {
        bytes.extend_from_slice(&u64::from(count as u32).to_le_bytes());
    }
    let hash = bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// A template as JSON without the hash label, nulls and empty lists, and
/// with empty label/annotation maps left out: Go's semantic equality treats
/// nil and empty slices and maps alike.
pub(super) fn comparable(template: &PodTemplateSpec) -> serde_json::Value {
    fn prune(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for child in map.values_mut() {
                    prune(child);
                }
                map.retain(|key, child| match child {
                    serde_json::Value::Null => false,
                    serde_json::Value::Array(a) => !a.is_empty(),
                    serde_json::Value::Object(o) => {
                        !(o.is_empty()
                            && matches!(key.as_str(), "labels" | "annotations" | "metadata"))
                    }
                    _ => true,
                });
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(prune),
            _ => {}
        }
    }
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    let mut value = serde_json::to_value(&template).unwrap_or_default();
    prune(&mut value);
    value
}

/// `EqualIgnoreHash`.
pub(super) fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    comparable(a) == comparable(b)
}
