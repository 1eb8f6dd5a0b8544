//! A disk that grows: a running 2+2+1 set's `spec.persistence.storage` goes
//! from FedState's 1Gi to 8Gi (a Karmada OverridePolicy, as a user would
//! write it). In a and b the StorageClass allows expansion: each claim is
//! expanded, each StatefulSet replaced with its pod left running, and the
//! volumes reach 8Gi with no pod restarted. In c the class does not: c says
//! the API server refused and changes nothing, until the class allows it.
//! A decrease is then refused. A w:"majority" writer runs throughout and
//! loses nothing.
//!
//! Lab 76.

use std::collections::BTreeMap;
use std::time::Duration;

use federation_sim::karmada::{Kind, OverridePolicy, Overrider, ResourceRef};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Patch, PatchParams, PostParams};
use kube::Api;
use serde_json::json;

use crate::harness::*;
use lab::lab::Lab;
use lab::observe::SetSampler;
use mongodb_member_operator::api::MongoDB;

const NAME: &str = "disk";
const SPLIT: &str = "a=2,b=2,c=1";
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
const CONDITION: &str = "VolumesMatchSpec";

/// The default StorageClass of cluster `index`, expandable or not.
async fn default_class(lab: &Lab, index: usize, expandable: bool) -> Outcome {
    let classes: Api<StorageClass> = Api::all(lab.clusters()[index].client.clone());
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "standard", "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "lab.example.com/volumes",
        "allowVolumeExpansion": expandable,
    }))
    .map_err(fail("StorageClass"))?;
    classes
        .create(&PostParams::default(), &class)
        .await
        .map_err(fail("create the StorageClass"))?;
    Ok(())
}

/// `spec.persistence.storage` of every cluster's `MongoDB`, by an OverridePolicy.
fn storage_policy(size: &str) -> OverridePolicy {
    OverridePolicy {
        labels: Default::default(),
        resource: ResourceRef::new(Kind::MongoDB, NAME),
        clusters: None,
        overrider: Overrider::AddPath {
            path: "/spec/persistence/storage".into(),
            value: json!(size),
        },
    }
}

/// Every member pod of the lab: its cluster and name, uid and restart count.
async fn pods(lab: &Lab) -> Result<BTreeMap<(usize, String), (String, i32)>, String> {
    let mut all = BTreeMap::new();
    for (index, cluster) in lab.clusters().iter().enumerate() {
        let api: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
        let listed = api.list(&Default::default()).await.map_err(fail("pods"))?;
        for pod in listed.items {
            let name = pod.metadata.name.clone().unwrap_or_default();
            if !name.starts_with(NAME) {
                continue;
            }
            let restarts = pod
                .status
                .and_then(|s| s.container_statuses)
                .unwrap_or_default()
                .iter()
                .map(|c| c.restart_count)
                .sum();
            all.insert(
                (index, name),
                (pod.metadata.uid.unwrap_or_default(), restarts),
            );
        }
    }
    Ok(all)
}

/// What cluster `index` shows of its claims and claim templates: their sizes.
async fn sizes(lab: &Lab, index: usize) -> Result<Vec<String>, String> {
    let client = lab.clusters()[index].client.clone();
    let claims: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), "default");
    let sets: Api<StatefulSet> = Api::namespaced(client, "default");
    let mut sizes = Vec::new();
    for claim in claims
        .list(&Default::default())
        .await
        .map_err(fail("claims"))?
    {
        let capacity = claim.status.and_then(|s| s.capacity).unwrap_or_default();
        sizes.push(format!(
            "claim {}: {}",
            claim.metadata.name.unwrap_or_default(),
            capacity.get("storage").map(|q| q.0.as_str()).unwrap_or("-")
        ));
    }
    for set in sets
        .list(&Default::default())
        .await
        .map_err(fail("StatefulSets"))?
    {
        let templates = set
            .spec
            .and_then(|s| s.volume_claim_templates)
            .unwrap_or_default();
        for template in templates {
            let requests = template
                .spec
                .and_then(|s| s.resources)
                .and_then(|r| r.requests);
            sizes.push(format!(
                "template {}: {}",
                set.metadata.name.clone().unwrap_or_default(),
                requests
                    .and_then(|r| r.get("storage").map(|q| q.0.clone()))
                    .unwrap_or_default()
            ));
        }
    }
    Ok(sizes)
}

fn volumes_are(mongodb: &MongoDB, reason: &str) -> bool {
    reason_is(mongodb, CONDITION, reason)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_sets_storage_grows_from_1gi_to_8gi_without_a_restart() {
    scenario(76, 3, async |lab| {
        for (index, expandable) in [(0, true), (1, true), (2, false)] {
            default_class(lab, index, expandable).await?;
        }
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request(NAME, SPLIT))
            .await
            .map_err(fail("apply"))?;
        ready(lab, NAME, SPLIT).await?;
        let hosts = hosts_of(lab, 0, NAME).await?;
        let first = config(lab, NAME, &hosts).await?;
        let writer = TimedMajorityWriter::start(lab, NAME, &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(10, Duration::from_secs(60)).await?;
        }
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);
        let before = pods(lab).await?;

        // 8Gi everywhere: a and b grow, c's class refuses.
        control_plane
            .apply_override_policy("default", NAME, "disk-storage", storage_policy("8Gi"))
            .await
            .map_err(fail("the storage policy"))?;
        for index in 0..2 {
            until_in(lab, index, NAME, "the volumes at 8Gi", |m| {
                volumes_are(m, "VolumesInPlace") && m.spec.persistence.storage.0 == "8Gi"
            })
            .await?;
        }
        let refused = until_in(lab, 2, NAME, "c's expansion refused", |m| {
            volumes_are(m, "StorageChangeRefused")
        })
        .await?;
        let message = condition_message(&refused, CONDITION);
        if !message.contains("storageclass") {
            return Err(format!("c's refusal does not say why: {message}"));
        }
        if sizes(lab, 2).await?.iter().any(|s| s.ends_with("8Gi")) {
            return Err("c changed something although its class refused".into());
        }

        // c's class allows expansion now: c grows too.
        let classes: Api<StorageClass> = Api::all(lab.clusters()[2].client.clone());
        classes
            .patch(
                "standard",
                &PatchParams::default(),
                &Patch::Merge(json!({"allowVolumeExpansion": true})),
            )
            .await
            .map_err(fail("allow expansion in c"))?;
        until_in(lab, 2, NAME, "c's volumes at 8Gi", |m| {
            volumes_are(m, "VolumesInPlace")
        })
        .await?;
        for index in 0..3 {
            let sizes = sizes(lab, index).await?;
            if sizes.is_empty() || sizes.iter().any(|s| !s.ends_with(": 8Gi")) {
                return Err(format!("cluster {index}: not every volume is 8Gi: {sizes:?}"));
            }
        }
        let after = pods(lab).await?;
        if after != before {
            return Err(format!("pods were replaced or restarted: {before:?} -> {after:?}"));
        }
        let grown = config(lab, NAME, &hosts).await?;
        if version(&grown) != version(&first) {
            return Err("the replica-set config changed while the disks grew".into());
        }

        // A decrease is refused and changes nothing.
        control_plane
            .apply_override_policy("default", NAME, "disk-storage", storage_policy("4Gi"))
            .await
            .map_err(fail("the smaller storage"))?;
        until_in(lab, 0, NAME, "the decrease refused", |m| {
            volumes_are(m, "StorageDecreaseRefused")
        })
        .await?;
        if sizes(lab, 0).await?.iter().any(|s| !s.ends_with(": 8Gi")) {
            return Err("a volume changed after a refused decrease".into());
        }
        let reasons = event_reasons_in(lab, 0, NAME).await?;
        for expected in ["ClaimExpanded", "ClaimTemplateReplaced"] {
            if !reasons.iter().any(|r| r == expected) {
                return Err(format!("a published no {expected} Event: {reasons:?}"));
            }
        }

        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        eprintln!(
            "{} samples; {acknowledged} majority writes acknowledged, none lost; c refused: {message}",
            samples.len()
        );
        one_primary_per_term(&samples)
    })
    .await;
}

/// The message of condition `type_` of `mongodb`.
fn condition_message(mongodb: &MongoDB, type_: &str) -> String {
    mongodb
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == type_))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}
