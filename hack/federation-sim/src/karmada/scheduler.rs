//! Where Karmada places each template: a divided `MongoDB` by the static
//! weights of its policy (`pkg/scheduler/core/division_algorithm.go`,
//! `divideReplicasByStaticWeight`; the replicas from the chart's
//! `GetReplicas`), everything else where its policy's cluster affinity says.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::Result;
use serde::{Deserialize, Serialize};

use super::{mongodb_template_object, Kind, Objects, ResourceRef, StaticClusterWeight};
use crate::interpreter::Interpreter;

/// One entry of a ResourceBinding's `spec.clusters`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TargetCluster {
    /// Cluster.
    pub name: String,
    /// Its share of the replicas.
    pub replicas: i64,
}

/// Karmada's `divideReplicasByStaticWeight` over the clusters the policy's
/// affinity selects; clusters left with 0 replicas are dropped.
pub fn divide_by_static_weight(
    replicas: i64,
    clusters: &[String],
    weights: &[StaticClusterWeight],
) -> Vec<TargetCluster> {
    let mut matched: BTreeMap<&str, i64> = BTreeMap::new();
    for cluster in clusters {
        if let Some(rule) = weights.iter().find(|w| &w.cluster == cluster) {
            matched.insert(cluster, rule.weight);
        }
    }
    let mut sum: i64 = matched.values().sum();
    if sum == 0 {
        matched = clusters.iter().map(|c| (c.as_str(), 1)).collect();
        sum = matched.len() as i64;
    }
    if sum == 0 {
        return Vec::new();
    }
    let mut desired: BTreeMap<&str, i64> = matched
        .iter()
        .map(|(c, w)| (*c, w * replicas / sum))
        .collect();
    let allocated: i64 = desired.values().sum();
    let mut order: Vec<(&str, i64)> = matched.iter().map(|(c, w)| (*c, *w)).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    for i in 0..(replicas - allocated).max(0) as usize {
        if let Some(entry) = desired.get_mut(order[i % order.len()].0) {
            *entry += 1;
        }
    }
    desired
        .into_iter()
        .filter(|(_, r)| *r > 0)
        .map(|(name, replicas)| TargetCluster {
            name: name.to_string(),
            replicas,
        })
        .collect()
}

/// The scheduler's result for MongoDB `name`: the template's replicas (the
/// chart's `GetReplicas`) divided by the policy's static weights.
pub fn schedule_mongodb(
    objects: &Objects,
    namespace: &str,
    name: &str,
    interpreter: &Interpreter,
) -> Result<Vec<TargetCluster>> {
    let resource = ResourceRef::new(Kind::MongoDB, name);
    let (Some(template), Some(policy)) =
        (objects.mongodbs.get(name), objects.policy_for(&resource))
    else {
        return Ok(Vec::new());
    };
    let (replicas, _) =
        interpreter.get_replicas(&mongodb_template_object(namespace, name, template))?;
    Ok(match &policy.static_weights {
        Some(weights) => divide_by_static_weight(replicas, &policy.clusters, weights),
        // Duplicated: every cluster gets the whole template.
        None => policy
            .clusters
            .iter()
            .map(|c| TargetCluster {
                name: c.clone(),
                replicas,
            })
            .collect(),
    })
}

/// Where `resource` is propagated: `None` when no policy selects it (what was
/// propagated stays where it is).
pub fn placement(
    objects: &Objects,
    resource: &ResourceRef,
    mongodb_schedule: &BTreeMap<String, Vec<TargetCluster>>,
) -> Option<BTreeSet<String>> {
    let policy = objects.policy_for(resource)?;
    Some(match resource.kind {
        Kind::MongoDB => mongodb_schedule
            .get(&resource.name)
            .map(|s| s.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default(),
        _ => policy.clusters.iter().cloned().collect(),
    })
}
