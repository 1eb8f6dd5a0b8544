//! The watch caches (Kubernetes I/O, no request of their own): one reflector
//! store per kind a pass reads or writes — Services, ConfigMaps,
//! StatefulSets, pods, PodDisruptionBudgets and Secrets' metadata — filled by
//! the controller's watches. A pass reads what an object refers to from them
//! instead of listing it, and `apply` compares with them so that it writes
//! only what differs. Secrets' data is never cached: a pass GETs the one
//! Secret it needs.

use std::sync::Arc;

use futures::Stream;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::PartialObjectMeta;
use kube::runtime::reflector::{self, store::Writer, ObjectRef, Store};
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use tokio::sync::watch;

/// The stores, read by passes.
#[derive(Clone)]
pub struct Caches {
    /// Every Service of the watched namespaces (the propagated member
    /// Services carry no label of ours).
    pub services: Store<Service>,
    /// Every ConfigMap of the watched namespaces (hostconf, custom config).
    pub config_maps: Store<ConfigMap>,
    /// The StatefulSets this operator manages.
    pub stateful_sets: Store<StatefulSet>,
    /// The pods of the StatefulSets this operator manages.
    pub pods: Store<Pod>,
    /// The PodDisruptionBudgets this operator manages.
    pub pod_disruption_budgets: Store<PodDisruptionBudget>,
    /// Every Secret's metadata (never its data).
    pub secrets: Store<PartialObjectMeta<Secret>>,
    synced: watch::Receiver<bool>,
}

/// The stores' writers, one per watch.
pub struct Writers {
    pub services: Writer<Service>,
    pub config_maps: Writer<ConfigMap>,
    pub stateful_sets: Writer<StatefulSet>,
    pub pods: Writer<Pod>,
    pub pod_disruption_budgets: Writer<PodDisruptionBudget>,
    pub secrets: Writer<PartialObjectMeta<Secret>>,
}

/// Tells the passes that every store has been listed once.
pub struct Synced(watch::Sender<bool>);

impl Synced {
    /// Every store is listed: passes may read them.
    pub fn set(&self) {
        self.0.send_replace(true);
    }
}

/// Empty stores, their writers, and the switch that says they are synced.
pub fn caches() -> (Caches, Writers, Synced) {
    let (services, services_writer) = reflector::store();
    let (config_maps, config_maps_writer) = reflector::store();
    let (stateful_sets, stateful_sets_writer) = reflector::store();
    let (pods, pods_writer) = reflector::store();
    let (pod_disruption_budgets, budgets_writer) = reflector::store();
    let (secrets, secrets_writer) = reflector::store();
    let (sender, synced) = watch::channel(false);
    let caches = Caches {
        services,
        config_maps,
        stateful_sets,
        pods,
        pod_disruption_budgets,
        secrets,
        synced,
    };
    let writers = Writers {
        services: services_writer,
        config_maps: config_maps_writer,
        stateful_sets: stateful_sets_writer,
        pods: pods_writer,
        pod_disruption_budgets: budgets_writer,
        secrets: secrets_writer,
    };
    (caches, writers, Synced(sender))
}

impl Caches {
    /// Waits until every store has been listed once (at start only).
    pub async fn wait_synced(&self) {
        let mut synced = self.synced.clone();
        // The sender lives as long as the controller: an error means it is
        // shutting down, and the pass has nothing to wait for then.
        let _ = synced.wait_for(|synced| *synced).await;
    }

    /// Waits until each store has been listed once. Each store's readiness
    /// is awaited by this one waiter only (kube-runtime wakes one waiter).
    pub async fn wait_listed(&self) -> Result<(), reflector::store::WriterDropped> {
        self.services.wait_until_ready().await?;
        self.config_maps.wait_until_ready().await?;
        self.stateful_sets.wait_until_ready().await?;
        self.pods.wait_until_ready().await?;
        self.pod_disruption_budgets.wait_until_ready().await?;
        self.secrets.wait_until_ready().await
    }
}

/// The objects of `api` selected by `config`, kept in `writer`'s store: a
/// stream of every object that changed (deleted ones included), for the
/// controller to map to the `MongoDB` objects to look at.
pub fn reflect<K>(
    writer: Writer<K>,
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    watcher(api, config)
        .default_backoff()
        .reflect(writer)
        .touched_objects()
}

/// The object `name` in `namespace`, as cached.
pub fn named<K>(store: &Store<K>, namespace: &str, name: &str) -> Option<Arc<K>>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    store.get(&ObjectRef::new(name).within(namespace))
}

/// The cached objects of `namespace` whose label `key` is `value`.
pub fn labelled<K>(store: &Store<K>, namespace: &str, key: &str, value: &str) -> Vec<K>
where
    K: Resource + Clone + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    store
        .state()
        .iter()
        .filter(|object| object.namespace().as_deref() == Some(namespace))
        .filter(|object| object.labels().get(key).map(String::as_str) == Some(value))
        .map(|object| object.as_ref().clone())
        .collect()
}

/// What says whether a cached object still is as this operator last wrote it:
/// its `generation` where the kind has one (status updates leave it alone),
/// otherwise its `resourceVersion`.
pub fn write_marker<K: Resource>(object: &K) -> Option<String> {
    let meta = object.meta();
    match meta.generation {
        Some(generation) => Some(format!("generation {generation}")),
        None => meta
            .resource_version
            .as_ref()
            .map(|version| format!("resourceVersion {version}")),
    }
}
