//! Shared informers: one list+watch per kind (pods, services, StatefulSets,
//! PersistentVolumeClaims, PersistentVolumes, StorageClasses, Endpoints, Deployments,
//! ReplicaSets, Secrets, ConfigMaps) through kube-runtime's reflector, like the shared
//! informer factory of kube-controller-manager, and a signal that fires on
//! every change so the control loops wake up.

use std::fmt::Debug;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet, StatefulSet};
use k8s_openapi::api::core::v1::{
    ConfigMap, Endpoints, PersistentVolume, PersistentVolumeClaim, Pod, Secret, Service,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Client, Resource};
use serde::de::DeserializeOwned;
use tokio::sync::watch;
use tokio::task::JoinSet;

/// Read-only caches of the cluster's objects.
#[derive(Clone)]
pub struct Cache {
    /// All pods.
    pub pods: Store<Pod>,
    /// All services.
    pub services: Store<Service>,
    /// All StatefulSets.
    pub stateful_sets: Store<StatefulSet>,
    /// All PersistentVolumeClaims.
    pub claims: Store<PersistentVolumeClaim>,
    /// All PersistentVolumes.
    pub volumes: Store<PersistentVolume>,
    /// All StorageClasses.
    pub storage_classes: Store<StorageClass>,
    /// All Endpoints.
    pub endpoints: Store<Endpoints>,
    /// All Deployments.
    pub deployments: Store<Deployment>,
    /// All ReplicaSets.
    pub replica_sets: Store<ReplicaSet>,
    /// All Secrets: what the kubelet refreshes running pods' Secret volumes
    /// from (its default `Watch` change detection strategy).
    pub secrets: Store<Secret>,
    /// All ConfigMaps, as [`Cache::secrets`].
    pub config_maps: Store<ConfigMap>,
    changes: watch::Receiver<u64>,
}

impl Cache {
    /// Starts the watches on `tasks`; the caches fill in the background.
    pub fn start(client: &Client, tasks: &mut JoinSet<()>) -> Cache {
        let (changed, changes) = watch::channel(0u64);
        Cache {
            pods: reflect(Api::all(client.clone()), changed.clone(), tasks),
            services: reflect(Api::all(client.clone()), changed.clone(), tasks),
            stateful_sets: reflect(Api::all(client.clone()), changed.clone(), tasks),
            claims: reflect(Api::all(client.clone()), changed.clone(), tasks),
            volumes: reflect(Api::all(client.clone()), changed.clone(), tasks),
            storage_classes: reflect(Api::all(client.clone()), changed.clone(), tasks),
            endpoints: reflect(Api::all(client.clone()), changed.clone(), tasks),
            deployments: reflect(Api::all(client.clone()), changed.clone(), tasks),
            replica_sets: reflect(Api::all(client.clone()), changed, tasks),
            // No control loop wakes for them: only the kubelet's periodic
            // refresh reads them.
            secrets: reflect(Api::all(client.clone()), watch::channel(0).0, tasks),
            config_maps: reflect(Api::all(client.clone()), watch::channel(0).0, tasks),
            changes,
        }
    }

    /// A receiver that is marked changed whenever any cached object changes.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.clone()
    }

    /// Waits until every cache holds its first complete list.
    pub async fn wait_until_ready(&self) -> anyhow::Result<()> {
        self.pods.wait_until_ready().await?;
        self.services.wait_until_ready().await?;
        self.stateful_sets.wait_until_ready().await?;
        self.claims.wait_until_ready().await?;
        self.volumes.wait_until_ready().await?;
        self.storage_classes.wait_until_ready().await?;
        self.endpoints.wait_until_ready().await?;
        self.deployments.wait_until_ready().await?;
        self.replica_sets.wait_until_ready().await?;
        self.secrets.wait_until_ready().await?;
        self.config_maps.wait_until_ready().await?;
        Ok(())
    }

    /// Waits (at most `timeout`) until `condition` holds on the cache: how a
    /// controller waits for its own writes to show up before acting again
    /// (kube-controller-manager's "expectations").
    pub async fn wait_for(&self, timeout: Duration, condition: impl Fn(&Cache) -> bool) -> bool {
        let mut changes = self.subscribe();
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            if condition(self) {
                return true;
            }
            match tokio::time::timeout_at(deadline, changes.changed()).await {
                Ok(Ok(())) => {}
                _ => return condition(self),
            }
        }
    }
}

fn reflect<K>(api: Api<K>, changed: watch::Sender<u64>, tasks: &mut JoinSet<()>) -> Store<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(
        writer,
        watcher(api, watcher::Config::default()).default_backoff(),
    );
    tasks.spawn(async move {
        let mut stream = std::pin::pin!(stream);
        while let Some(event) = stream.next().await {
            match event {
                Ok(_) => {
                    changed.send_modify(|n| *n = n.wrapping_add(1));
                }
                Err(error) => tracing::warn!(kind = %K::kind(&Default::default()), %error, "watch failed; retrying"),
            }
        }
    });
    reader
}
