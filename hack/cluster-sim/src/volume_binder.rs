//! A stand-in for the PersistentVolume controller and a dynamic provisioner:
//! every PersistentVolumeClaim is reported `Bound` at once, with the capacity
//! and access modes it asked for. No PersistentVolume objects are created.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolumeClaim, PersistentVolumeClaimStatus};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::api_errors::is_status;
use crate::cache::Cache;
use crate::faults::Faults;

const RESYNC: Duration = Duration::from_secs(5);

/// Binds claims.
pub struct VolumeBinder {
    client: Client,
    cache: Cache,
    faults: watch::Receiver<Faults>,
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

    /// Binds unbound claims whenever something changes, until dropped.
    pub async fn run(mut self) {
        if self.cache.claims.wait_until_ready().await.is_err() {
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
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    async fn bind(&self, claim: &PersistentVolumeClaim) -> Result<(), kube::Error> {
        let bound = claim.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Bound");
        if bound || claim.metadata.deletion_timestamp.is_some() {
            return Ok(());
        }
        let spec = claim.spec.clone().unwrap_or_default();
        let capacity: Option<BTreeMap<_, _>> = spec
            .resources
            .and_then(|r| r.requests)
            .and_then(|r| r.get("storage").cloned())
            .map(|q| BTreeMap::from([("storage".to_string(), q)]));
        let status = PersistentVolumeClaimStatus {
            phase: Some("Bound".into()),
            access_modes: spec.access_modes,
            capacity,
            ..Default::default()
        };
        let api: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), &claim.namespace().unwrap_or_default());
        match api
            .patch_status(
                &claim.name_any(),
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": status })),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if is_status(&error, 404) => Ok(()),
            Err(error) => Err(error),
        }
    }
}
