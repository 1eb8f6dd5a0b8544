//! A stand-in for kube-controller-manager's PersistentVolume controller and a
//! CSI external-provisioner: each claim gets a PersistentVolume `pvc-<claim
//! uid>` made for it and is bound to it, as dynamic provisioning does it
//! (kubernetes-csi/external-provisioner `pkg/controller/controller.go`
//! `Provision`: the volume's name, `claimRef`, class, reclaim policy, access
//! modes, volume mode and capacity; kubernetes/kubernetes
//! `pkg/controller/volume/persistentvolume/pv_controller.go` `bind`:
//! `bindVolumeToClaim`, `updateVolumePhase` (`Bound`), `bindClaimToVolume`
//! (`spec.volumeName`, `pv.kubernetes.io/bind-completed`,
//! `pv.kubernetes.io/bound-by-controller`), `updateClaimStatus` (`Bound`, the
//! volume's capacity and access modes)). A volume whose claim is gone is
//! `Released`, and deleted when its reclaim policy is `Delete`
//! (`reclaimVolume`).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::api_errors::{is_gone, is_status};
use crate::cache::Cache;
use crate::faults::Faults;

const RESYNC: Duration = Duration::from_secs(5);

/// The CSI driver named for claims whose class is unknown (or unset): the
/// simulator binds them all the same.
pub const DEFAULT_DRIVER: &str = "csi.cluster-sim.local";
/// Set on a claim once the PV controller has bound it.
pub const ANN_BIND_COMPLETED: &str = "pv.kubernetes.io/bind-completed";
/// Set on a claim the PV controller bound (rather than one pre-bound by its writer).
pub const ANN_BOUND_BY_CONTROLLER: &str = "pv.kubernetes.io/bound-by-controller";
/// The provisioner that provisions (and resizes) a claim's volume.
pub const ANN_STORAGE_PROVISIONER: &str = "volume.kubernetes.io/storage-provisioner";
const ANN_BETA_STORAGE_PROVISIONER: &str = "volume.beta.kubernetes.io/storage-provisioner";
const ANN_PROVISIONED_BY: &str = "pv.kubernetes.io/provisioned-by";
const BETA_STORAGE_CLASS: &str = "volume.beta.kubernetes.io/storage-class";

/// Provisions, binds and reclaims volumes.
pub struct VolumeBinder {
    client: Client,
    cache: Cache,
    faults: watch::Receiver<Faults>,
}

/// A claim's class name (`GetPersistentVolumeClaimClass`: the beta annotation first).
pub fn claim_class(claim: &PersistentVolumeClaim) -> String {
    claim
        .annotations()
        .get(BETA_STORAGE_CLASS)
        .cloned()
        .or_else(|| claim.spec.as_ref()?.storage_class_name.clone())
        .unwrap_or_default()
}

impl VolumeBinder {
    /// A binder writing through `client`.
    pub fn new(client: Client, cache: Cache, faults: watch::Receiver<Faults>) -> Self {
        VolumeBinder {
            client,
            cache,
            faults,
        }
    }

    /// Binds unbound claims and reclaims released volumes whenever something
    /// changes, until dropped.
    pub async fn run(mut self) {
        if self.cache.wait_until_ready().await.is_err() {
            return;
        }
        let mut changes = self.cache.subscribe();
        loop {
            if !self.faults.borrow().cluster_lost {
                for claim in self.cache.claims.state() {
                    if let Err(error) = self.bind(&claim).await {
                        tracing::warn!(claim = %claim.name_any(), %error, "could not bind claim");
                    }
                }
                if let Err(error) = self.reclaim().await {
                    tracing::warn!(%error, "could not reclaim volumes");
                }
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    /// Whether StorageClass `name` exists in the API server though the cache
    /// has not seen it yet.
    async fn class_may_exist(&self, name: &str) -> Result<bool, kube::Error> {
        let classes: Api<StorageClass> = Api::all(self.client.clone());
        Ok(classes.get_opt(name).await?.is_some())
    }

    async fn bind(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        if bound || claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let (Some(namespace), Some(uid)) = (claim.namespace(), claim.uid()) else {
            return Ok(());
        };
        let claims: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), &namespace);
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        let spec = claim.spec.clone().unwrap_or_default();
        let mut volume_name = spec.volume_name.clone().unwrap_or_default();
        if volume_name.is_empty() {
            // Provisioning, then `bindClaimToVolume`.
            volume_name = format!("pvc-{uid}");
            let class_name = claim_class(claim);
            let class = self
                .cache
                .storage_classes
                .state()
                .into_iter()
                .find(|c| c.name_any() == class_name);
            if class.is_none()
                && !class_name.is_empty()
                && self.class_may_exist(&class_name).await?
            {
                // Named but not seen yet: the provisioner retries once it
                // can read the class (`Provision` fails "storageclass not found").
                return Ok(());
            }
            let driver = class
                .as_ref()
                .map(|c| c.provisioner.clone())
                .unwrap_or_else(|| DEFAULT_DRIVER.to_string());
            let key = kube::runtime::reflector::ObjectRef::new(&volume_name);
            if self.cache.volumes.get(&key).is_none() {
                let capacity = spec
                    .resources
                    .as_ref()
                    .and_then(|r| r.requests.as_ref())
                    .and_then(|r| r.get("storage").cloned());
                let filesystem = spec.volume_mode.as_deref() != Some("Block");
                let volume: PersistentVolume = serde_json::from_value(json!({
                    "apiVersion": "v1", "kind": "PersistentVolume",
                    "metadata": {"name": volume_name, "annotations": {ANN_PROVISIONED_BY: driver}},
                    "spec": {
                        "capacity": capacity.map(|q| BTreeMap::from([("storage".to_string(), q)])),
                        "accessModes": spec.access_modes,
                        "volumeMode": spec.volume_mode.clone().unwrap_or_else(|| "Filesystem".into()),
                        "storageClassName": (!class_name.is_empty()).then_some(class_name),
                        "persistentVolumeReclaimPolicy": class.as_ref().and_then(|c| c.reclaim_policy.clone()).unwrap_or_else(|| "Delete".into()),
                        "mountOptions": class.as_ref().and_then(|c| c.mount_options.clone()),
                        "claimRef": {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                            "namespace": namespace, "name": claim.name_any(), "uid": uid,
                            "resourceVersion": claim.resource_version()},
                        "csi": {"driver": driver, "volumeHandle": volume_name,
                            "fsType": filesystem.then_some("ext4")}
                    }
                }))
                .map_err(kube::Error::SerdeError)?;
                match volumes.create(&PostParams::default(), &volume).await {
                    Ok(_) => {}
                    Err(error) if is_status(&error, 409) => {}
                    Err(error) => return Err(error),
                }
            }
            let patch = json!({
                "metadata": {
                    "resourceVersion": claim.resource_version(),
                    "annotations": {
                        ANN_BIND_COMPLETED: "yes",
                        ANN_BOUND_BY_CONTROLLER: "yes",
                        ANN_STORAGE_PROVISIONER: driver,
                        ANN_BETA_STORAGE_PROVISIONER: driver,
                    }
                },
                "spec": {"volumeName": volume_name}
            });
            match claims
                .patch(
                    &claim.name_any(),
                    &PatchParams::default(),
                    &Patch::Merge(patch),
                )
                .await
            {
                Ok(_) => {}
                // Gone or changed meanwhile: the next round sees it as it is.
                Err(error) if is_gone(&error) => return Ok(()),
                Err(error) => return Err(error),
            }
        }
        // `updateVolumePhase`, then `updateClaimStatus` from the volume.
        let volume = match volumes.get_opt(&volume_name).await? {
            Some(volume) => volume,
            None => return Ok(()), // a volume named by the claim's writer, not there (yet)
        };
        if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Bound") {
            volumes
                .patch_status(
                    &volume_name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"status": {"phase": "Bound"}})),
                )
                .await?;
        }
        let volume_spec = volume.spec.unwrap_or_default();
        let status = json!({"status": {
            "phase": "Bound",
            "accessModes": volume_spec.access_modes,
            "capacity": volume_spec.capacity,
        }});
        match claims
            .patch_status(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(status),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if is_status(&error, 404) => Ok(()),
            Err(error) => Err(error),
        }
    }

    /// Volumes whose claim is gone: `Released`; deleted with reclaim policy `Delete`.
    async fn reclaim(&self) -> Result<(), kube::Error> {
        let claims: HashSet<String> = self
            .cache
            .claims
            .state()
            .iter()
            .filter_map(|c| c.uid())
            .collect();
        let volumes: Api<PersistentVolume> = Api::all(self.client.clone());
        for volume in self.cache.volumes.state() {
            if volume.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let spec = volume.spec.clone().unwrap_or_default();
            let Some(claim_uid) = spec.claim_ref.as_ref().and_then(|r| r.uid.clone()) else {
                continue;
            };
            if claims.contains(&claim_uid) {
                continue;
            }
            // The claims cache may lag behind: ask the API server before letting go.
            let claim_ref = spec.claim_ref.clone().unwrap_or_default();
            let claims_api: Api<PersistentVolumeClaim> = Api::namespaced(
                self.client.clone(),
                claim_ref.namespace.as_deref().unwrap_or_default(),
            );
            let current = claims_api
                .get_opt(claim_ref.name.as_deref().unwrap_or_default())
                .await?;
            if current.is_some_and(|c| c.uid().as_deref() == Some(claim_uid.as_str())) {
                continue;
            }
            let name = volume.name_any();
            if spec.persistent_volume_reclaim_policy.as_deref() == Some("Delete") {
                let params = DeleteParams {
                    preconditions: Some(Preconditions {
                        uid: volume.uid(),
                        resource_version: None,
                    }),
                    ..Default::default()
                };
                match volumes.delete(&name, &params).await {
                    Ok(_) => {}
                    Err(error) if is_gone(&error) => {}
                    Err(error) => return Err(error),
                }
            } else if volume.status.as_ref().and_then(|s| s.phase.as_deref()) != Some("Released") {
                volumes
                    .patch_status(
                        &name,
                        &PatchParams::default(),
                        &Patch::Merge(json!({"status": {"phase": "Released"}})),
                    )
                    .await?;
            }
        }
        Ok(())
    }
}
