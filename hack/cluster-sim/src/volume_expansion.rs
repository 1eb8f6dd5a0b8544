//! Online expansion of a bound claim's volume, by the three components that do
//! it in Kubernetes, each writing what the real one writes, in its order:
//!
//! 1. kube-controller-manager's expand controller (kubernetes/kubernetes
//!    `pkg/controller/volume/expand/expand_controller.go` `syncHandler`): it has
//!    no plugin for a CSI volume (`FindExpandablePluginBySpec` fails), so it
//!    only records a Warning `ExternalExpanding` event, "waiting for an external
//!    controller to expand this PVC" (the `volume.kubernetes.io/storage-resizer`
//!    annotation is for migrated in-tree volumes only).
//! 2. The CSI external-resizer (kubernetes-csi/external-resizer
//!    `pkg/controller/controller.go` `syncPVC`, `pvcNeedResize`;
//!    `pkg/controller/expand_and_recover.go` `expandAndRecover`,
//!    `callResizeOnPlugin`; `pkg/controller/resize_status.go`), as it works with
//!    RecoverVolumeExpansionFailure (beta and on since 1.32, GA in 1.34): when
//!    `spec.resources.requests.storage` exceeds `status.capacity.storage` of a
//!    Bound claim, `markControllerResizeInProgress` (condition `Resizing`,
//!    `status.allocatedResources.storage` = the new size,
//!    `status.allocatedResourceStatuses.storage` = `ControllerResizeInProgress`,
//!    a `Resizing` event), ControllerExpandVolume, `updatePVCapacity` (the
//!    volume's `spec.capacity.storage`), then, the driver needing a file system
//!    resize on the node, `markForPendingNodeExpansion` (condition
//!    `FileSystemResizePending` added, `NodeResizePending`, a
//!    `FileSystemResizeRequired` event).
//! 3. The kubelet's volume manager (`pkg/volume/util/operationexecutor/node_expander.go`
//!    `NodeExpander.expandOnPlugin`; `pkg/volume/util/resize_util.go`
//!    `MarkNodeExpansionInProgress`, `MarkFSResizeFinished`): once a pod of
//!    this node that is not finished uses the claim, `NodeResizeInProgress`,
//!    NodeExpandVolume, `FileSystemResizeSuccessful` events on the pod and the
//!    claim, then `status.capacity.storage` = the volume's capacity, the
//!    storage entry of `allocatedResourceStatuses` gone and the resize
//!    conditions removed (`allocatedResources` stays).
//!
//! Status writes carry the resourceVersion they were computed from, as
//! `PatchClaim`/`PatchPVCStatus` add it: a stale cache makes them fail and
//! the next round starts from the current claim.

use std::collections::{BTreeMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use crd_admission::quantity::Quantity;
use k8s_openapi::api::core::v1::{
    PersistentVolume, PersistentVolumeClaim, PersistentVolumeClaimCondition, Pod,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::{json, Value};
use tokio::sync::watch;

use crate::api_errors::{is_gone, is_status};
use crate::cache::Cache;
use crate::events::EventSink;
use crate::faults::Faults;
use crate::pod_facts::is_terminal;

const RESYNC: Duration = Duration::from_secs(5);
/// How long ControllerExpandVolume takes (the storage backend's API call).
const CONTROLLER_EXPAND_TIME: Duration = Duration::from_millis(500);
/// How long NodeExpandVolume takes (growing the file system).
const NODE_EXPAND_TIME: Duration = Duration::from_millis(500);

const RESIZING: &str = "Resizing";
const FS_RESIZE_PENDING: &str = "FileSystemResizePending";
/// `knownResizeConditions`.
const RESIZE_CONDITIONS: [&str; 4] = [
    RESIZING,
    FS_RESIZE_PENDING,
    "ControllerResizeError",
    "NodeResizeError",
];

fn storage_of(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Option<(Quantity, String)> {
    let text = map?.get("storage")?.0.clone();
    Quantity::parse(&text).ok().map(|q| (q, text))
}

fn request(claim: &PersistentVolumeClaim) -> Option<(Quantity, String)> {
    storage_of(claim.spec.as_ref()?.resources.as_ref()?.requests.as_ref())
}

fn capacity(claim: &PersistentVolumeClaim) -> Option<(Quantity, String)> {
    storage_of(claim.status.as_ref()?.capacity.as_ref())
}

fn allocated(claim: &PersistentVolumeClaim) -> Option<(Quantity, String)> {
    storage_of(claim.status.as_ref()?.allocated_resources.as_ref())
}

fn resize_status(claim: &PersistentVolumeClaim) -> String {
    claim
        .status
        .as_ref()
        .and_then(|s| s.allocated_resource_statuses.as_ref())
        .and_then(|m| m.get("storage").cloned())
        .unwrap_or_default()
}

fn volume_capacity(volume: &PersistentVolume) -> Option<(Quantity, String)> {
    storage_of(volume.spec.as_ref()?.capacity.as_ref())
}

fn conditions(claim: &PersistentVolumeClaim) -> Vec<PersistentVolumeClaimCondition> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default()
}

/// `MergeResizeConditionsOfPVC`: other conditions stay; a resize condition is
/// replaced by a new one of its type, kept (`keep_old`) or dropped; the new
/// ones not yet present are appended.
fn merge_resize_conditions(
    old: Vec<PersistentVolumeClaimCondition>,
    new: Vec<PersistentVolumeClaimCondition>,
    keep_old: bool,
) -> Vec<PersistentVolumeClaimCondition> {
    let mut pending: Vec<Option<PersistentVolumeClaimCondition>> =
        new.into_iter().map(Some).collect();
    let mut result = Vec::new();
    for condition in old {
        if !RESIZE_CONDITIONS.contains(&condition.type_.as_str()) {
            result.push(condition);
            continue;
        }
        match pending
            .iter_mut()
            .find(|n| n.as_ref().is_some_and(|n| n.type_ == condition.type_))
        {
            Some(replacement) => result.extend(replacement.take()),
            None if keep_old => result.push(condition),
            None => {}
        }
    }
    result.extend(pending.into_iter().flatten());
    result
}

fn condition(type_: &str, message: Option<&str>) -> PersistentVolumeClaimCondition {
    PersistentVolumeClaimCondition {
        type_: type_.into(),
        status: "True".into(),
        last_transition_time: Some(Time(Timestamp::now())),
        message: message.map(String::from),
        ..Default::default()
    }
}

/// A merge patch of the claim's status, conditional on `claim`'s resourceVersion.
async fn patch_claim_status(
    client: &Client,
    claim: &PersistentVolumeClaim,
    status: Value,
) -> Result<Option<PersistentVolumeClaim>, kube::Error> {
    let api: Api<PersistentVolumeClaim> =
        Api::namespaced(client.clone(), &claim.namespace().unwrap_or_default());
    let patch =
        json!({"metadata": {"resourceVersion": claim.resource_version()}, "status": status});
    match api
        .patch_status(
            &claim.name_any(),
            &PatchParams::default(),
            &Patch::Merge(patch),
        )
        .await
    {
        Ok(updated) => Ok(Some(updated)),
        // Gone, or changed since the cache saw it: the next round starts over.
        Err(error) if is_gone(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

/// The expand controller and the CSI external-resizer of the cluster (one
/// resizer, answering for every driver).
pub struct VolumeResizer {
    client: Client,
    cache: Cache,
    resizer_events: EventSink,
    expand_events: EventSink,
    faults: watch::Receiver<Faults>,
    /// (claim uid, requested size) the expand controller has reported on.
    announced: Mutex<HashSet<(String, String)>>,
}

impl VolumeResizer {
    /// A resizer writing through `client`.
    pub fn new(
        client: Client,
        cache: Cache,
        faults: watch::Receiver<Faults>,
        node_name: &str,
    ) -> Self {
        VolumeResizer {
            resizer_events: EventSink::new(client.clone(), "external-resizer", node_name),
            expand_events: EventSink::new(client.clone(), "volume_expand", node_name),
            client,
            cache,
            faults,
            announced: Mutex::new(HashSet::new()),
        }
    }

    /// Expands claims whenever something changes, until dropped.
    pub async fn run(mut self) {
        if self.cache.wait_until_ready().await.is_err() {
            return;
        }
        let mut changes = self.cache.subscribe();
        loop {
            if !self.faults.borrow().cluster_lost {
                for claim in self.cache.claims.state() {
                    if let Err(error) = self.sync(&claim).await {
                        tracing::warn!(claim = %claim.name_any(), %error, "could not expand claim");
                    }
                }
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    async fn sync(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        // `pvcNeedResize`: Bound, with a volume, asking for more than it has.
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        if !bound || volume_name.is_empty() || claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let (Some((requested, requested_text)), Some((current, _))) =
            (request(claim), capacity(claim))
        else {
            return Ok(());
        };
        if requested <= current {
            return Ok(());
        }
        let Some(volume) = self
            .cache
            .volumes
            .get(&kube::runtime::reflector::ObjectRef::new(&volume_name))
        else {
            return Ok(());
        };
        // `pvCanBeExpanded`: the volume is bound to this claim.
        let claim_ref = volume.spec.as_ref().and_then(|s| s.claim_ref.as_ref());
        if claim_ref.and_then(|r| r.uid.as_deref()) != claim.uid().as_deref() {
            return Ok(());
        }
        if volume.spec.as_ref().and_then(|s| s.csi.as_ref()).is_none() {
            return Ok(());
        }
        // The expand controller leaves a CSI volume to the external resizer.
        let announcement = (claim.uid().unwrap_or_default(), requested_text.clone());
        if self
            .announced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(announcement)
        {
            self.expand_events.warning(
                claim.object_ref(&()),
                "ExternalExpanding",
                "Resize",
                "waiting for an external controller to expand this PVC".into(),
            );
        }
        // `expandAndRecover`.
        let Some((volume_size, _)) = volume_capacity(&volume) else {
            return Ok(());
        };
        let status = resize_status(claim);
        let allocated = allocated(claim);
        let mut new_size = (requested.clone(), requested_text);
        if volume_size < requested {
            match status.as_str() {
                "NodeResizeInfeasible" | "ControllerResizeInProgress" => {
                    if let Some(a) = allocated.clone() {
                        new_size = a;
                    }
                }
                "NodeResizePending" | "NodeResizeInProgress" => {
                    if let Some(a) = allocated.clone() {
                        new_size = a;
                    }
                    // Let the node finish the expansion it has started.
                    if volume_size >= new_size.0 {
                        return Ok(());
                    }
                }
                _ => {}
            }
        } else {
            match status.as_str() {
                "NodeResizeInProgress" | "NodeResizePending" => return Ok(()),
                "NodeResizeInfeasible"
                | "ControllerResizeInProgress"
                | "ControllerResizeInfeasible" => {
                    if let Some(a) = allocated.clone() {
                        new_size = a;
                    }
                }
                _ => match allocated.clone() {
                    Some(a) if status.is_empty() => new_size = a,
                    _ => {
                        if conditions(claim)
                            .iter()
                            .any(|c| c.type_ == FS_RESIZE_PENDING && c.status == "True")
                        {
                            return Ok(());
                        }
                    }
                },
            }
        }
        let update_status = allocated.as_ref().is_none_or(|a| a.0 != new_size.0);
        // `markControllerResizeInProgress`.
        let mut status_patch = json!({
            "conditions": merge_resize_conditions(conditions(claim), vec![condition(RESIZING, None)], !update_status),
            "allocatedResources": {"storage": new_size.1},
        });
        if update_status {
            status_patch["allocatedResourceStatuses"] =
                json!({"storage": "ControllerResizeInProgress"});
        }
        let Some(claim) = patch_claim_status(&self.client, claim, status_patch).await? else {
            return Ok(());
        };
        self.resizer_events.normal(
            claim.object_ref(&()),
            "Resizing",
            "Resize",
            format!("External resizer is resizing volume {volume_name}"),
        );
        // ControllerExpandVolume, then `updatePVCapacity`.
        tokio::time::sleep(CONTROLLER_EXPAND_TIME).await;
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        match volumes
            .patch(
                &volume_name,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"capacity": {"storage": new_size.1}}})),
            )
            .await
        {
            Ok(_) => {}
            Err(error) if is_status(&error, 404) => return Ok(()),
            Err(error) => return Err(error),
        }
        // The driver needs the node to grow the file system: `markForPendingNodeExpansion`.
        let status_patch = json!({
            "conditions": merge_resize_conditions(
                conditions(&claim),
                vec![condition(FS_RESIZE_PENDING, Some("Waiting for user to (re-)start a pod to finish file system resize of volume on node."))],
                true,
            ),
            "allocatedResourceStatuses": {"storage": "NodeResizePending"},
        });
        if patch_claim_status(&self.client, &claim, status_patch)
            .await?
            .is_some()
        {
            self.resizer_events.normal(
                claim.object_ref(&()),
                "FileSystemResizeRequired",
                "Resize",
                "Require file system resize of volume on node".into(),
            );
        }
        Ok(())
    }
}

/// The kubelet's side of an expansion: growing the file system of a volume a
/// pod of this node uses.
pub struct NodeVolumeExpander {
    client: Client,
    cache: Cache,
    events: EventSink,
    faults: watch::Receiver<Faults>,
    node_name: String,
}

impl NodeVolumeExpander {
    /// The expander of node `node_name`, writing through `client`.
    pub fn new(
        client: Client,
        cache: Cache,
        faults: watch::Receiver<Faults>,
        node_name: &str,
    ) -> Self {
        NodeVolumeExpander {
            events: EventSink::new(client.clone(), "kubelet", node_name),
            client,
            cache,
            faults,
            node_name: node_name.to_string(),
        }
    }

    /// Expands file systems whenever something changes, until dropped.
    pub async fn run(mut self) {
        if self.cache.wait_until_ready().await.is_err() {
            return;
        }
        let mut changes = self.cache.subscribe();
        loop {
            if !self.faults.borrow().cluster_lost {
                for claim in self.cache.claims.state() {
                    if let Err(error) = self.sync(&claim).await {
                        tracing::warn!(claim = %claim.name_any(), %error, "could not expand the file system");
                    }
                }
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    /// A pod of this node, not finished, with a volume from `claim`.
    fn user(&self, claim: &PersistentVolumeClaim) -> Option<std::sync::Arc<Pod>> {
        let name = claim.name_any();
        self.cache.pods.state().into_iter().find(|pod| {
            pod.namespace() == claim.namespace()
                && pod.spec.as_ref().and_then(|s| s.node_name.as_deref())
                    == Some(self.node_name.as_str())
                && !is_terminal(pod)
                && pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.volumes.as_ref())
                    .is_some_and(|vs| {
                        vs.iter().any(|v| {
                            v.persistent_volume_claim
                                .as_ref()
                                .is_some_and(|c| c.claim_name == name)
                        })
                    })
        })
    }

    async fn sync(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let volume_name = claim
            .spec
            .as_ref()
            .and_then(|s| s.volume_name.clone())
            .unwrap_or_default();
        if volume_name.is_empty() || claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        // `runPreCheck`: the resizer left the expansion to the node.
        let status = resize_status(claim);
        if status != "NodeResizePending" && status != "NodeResizeInProgress" {
            return Ok(());
        }
        let Some(volume) = self
            .cache
            .volumes
            .get(&kube::runtime::reflector::ObjectRef::new(&volume_name))
        else {
            return Ok(());
        };
        let (Some((volume_size, volume_text)), current) =
            (volume_capacity(&volume), capacity(claim))
        else {
            return Ok(());
        };
        if current.is_some_and(|(c, _)| c >= volume_size) {
            return Ok(());
        }
        let Some(pod) = self.user(claim) else {
            return Ok(()); // offline: the file system grows when a pod mounts it
        };
        let Some(claim) = patch_claim_status(
            &self.client,
            claim,
            json!({"allocatedResourceStatuses": {"storage": "NodeResizeInProgress"}}),
        )
        .await?
        else {
            return Ok(());
        };
        tokio::time::sleep(NODE_EXPAND_TIME).await;
        let message = format!(
            "MountVolume.NodeExpandVolume succeeded for volume {volume_name:?} {}",
            self.node_name
        );
        self.events.normal(
            pod.object_ref(&()),
            "FileSystemResizeSuccessful",
            "Resize",
            message.clone(),
        );
        self.events.normal(
            claim.object_ref(&()),
            "FileSystemResizeSuccessful",
            "Resize",
            message,
        );
        // `MarkFSResizeFinished`.
        let others = claim
            .status
            .as_ref()
            .and_then(|s| s.allocated_resource_statuses.as_ref())
            .is_some_and(|m| m.keys().any(|k| k != "storage"));
        let remaining = merge_resize_conditions(conditions(&claim), vec![], false);
        let status_patch = json!({
            "capacity": {"storage": volume_text},
            "allocatedResourceStatuses": if others { json!({"storage": null}) } else { Value::Null },
            "conditions": if remaining.is_empty() { Value::Null } else { json!(remaining) },
        });
        patch_claim_status(&self.client, &claim, status_patch).await?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(type_: &str) -> PersistentVolumeClaimCondition {
        PersistentVolumeClaimCondition {
            type_: type_.into(),
            status: "True".into(),
            ..Default::default()
        }
    }

    fn types(conditions: &[PersistentVolumeClaimCondition]) -> Vec<&str> {
        conditions.iter().map(|c| c.type_.as_str()).collect()
    }

    #[test]
    fn resize_conditions_are_replaced_kept_or_dropped_and_others_stay() {
        let old = vec![named("Other"), named(RESIZING)];
        let merged = merge_resize_conditions(old.clone(), vec![named(FS_RESIZE_PENDING)], true);
        assert_eq!(types(&merged), ["Other", RESIZING, FS_RESIZE_PENDING]);
        let merged = merge_resize_conditions(old.clone(), vec![named(FS_RESIZE_PENDING)], false);
        assert_eq!(types(&merged), ["Other", FS_RESIZE_PENDING]);
        let mut newer = named(RESIZING);
        newer.message = Some("again".into());
        let merged = merge_resize_conditions(old, vec![newer], false);
        assert_eq!(types(&merged), ["Other", RESIZING]);
        assert_eq!(merged[1].message.as_deref(), Some("again"));
        assert_eq!(
            types(&merge_resize_conditions(merged, vec![], false)),
            ["Other"]
        );
    }
}
