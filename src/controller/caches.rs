//! The watch caches (Kubernetes I/O, no request of their own): one store
//! per kind a pass reads or writes of what this operator owns or was
//! pointed at — the member Services (by the instance label), StatefulSets,
//! exporter Deployments, pods, their data claims and PodDisruptionBudgets (by
//! the managed-by label), and the metadata of the Secrets it writes — filled
//! by the controller's watches. A pass reads what an object refers to from
//! them instead of listing it, and `apply` compares with them so that it
//! writes only what differs.
//!
//! What a `MongoDB` names and no label of ours marks — hostconf, the custom
//! config ConfigMap, the Secrets, FedState's arbiter Service — is read by name
//! ([`ByName`]): one GET when a pass first needs it, kept while a
//! metadata-only watch of its kind shows it unchanged. The other objects of the
//! cluster are never kept, so they cost the operator no memory.
//!
//! The kinds a pass reads by instance (Services, StatefulSets, pods) are
//! also indexed by their instance label, kept by the same writer as the
//! store: a pass finds its instance's objects without looking at the others,
//! so its cost does not grow with the number of objects in the namespace.
//!
//! Objects are cached without what no pass reads ([`Cached::slim`]): their
//! `managedFields` and `kubectl apply`'s copy everywhere, and the spec and
//! status of pods (but their phase and conditions) and of StatefulSets; and
//! they are kept as JSON ([`super::packed`]), decoded when a pass reads them —
//! together the largest part of the operator's memory with 1,000 instances
//! (`lab bench`, BENCHMARKS.md).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, RwLock};

use futures::{Stream, TryStreamExt};
use k8s_openapi::api::apps::v1::{Deployment, StatefulSet, StatefulSetSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, PersistentVolumeClaim, PersistentVolumeClaimSpec, PersistentVolumeClaimStatus, Pod,
    PodStatus, Secret, Service,
};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PartialObjectMeta;
use kube::runtime::watcher::{self, Event};
use kube::runtime::WatchStreamExt;
use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;

use super::packed::{packed_store, PackedStore, PackedWriter};
pub use super::referenced::ByName;
use super::referenced::{by_name, ByNameWriter};
use crate::api::INSTANCE_LABEL;
use crate::build::labels::{MANAGED_BY_LABEL, MANAGER};

/// The stores, read by passes.
#[derive(Clone)]
pub struct Caches {
    /// The Services with an instance label: FedState's member Services and
    /// the operator's own.
    pub services: Indexed<Service>,
    /// Services read by name: FedState's arbiter Service, which carries no
    /// instance label.
    pub named_services: ByName<Service>,
    /// ConfigMaps read by name: hostconf and the custom config.
    pub config_maps: ByName<ConfigMap>,
    /// The StatefulSets this operator manages.
    pub stateful_sets: Indexed<StatefulSet>,
    /// The exporter Deployments this operator manages.
    pub deployments: Indexed<Deployment>,
    /// The pods of the StatefulSets this operator manages.
    pub pods: Indexed<Pod>,
    /// The data claims of the StatefulSets this operator manages.
    pub claims: Indexed<PersistentVolumeClaim>,
    /// The PodDisruptionBudgets this operator manages.
    pub pod_disruption_budgets: PackedStore<PodDisruptionBudget>,
    /// The metadata of the Secrets this operator writes (what `apply`
    /// compares with).
    pub secrets: PackedStore<PartialObjectMeta<Secret>>,
    /// Secrets read by name, data included: those a `MongoDB` names, and
    /// those the members mount.
    pub named_secrets: ByName<Secret>,
    synced: watch::Receiver<bool>,
}

/// The stores' writers, one per watch.
pub struct Writers {
    pub services: IndexedWriter<Service>,
    pub named_services: ByNameWriter<Service>,
    pub config_maps: ByNameWriter<ConfigMap>,
    pub stateful_sets: IndexedWriter<StatefulSet>,
    pub deployments: IndexedWriter<Deployment>,
    pub pods: IndexedWriter<Pod>,
    pub claims: IndexedWriter<PersistentVolumeClaim>,
    pub pod_disruption_budgets: PackedWriter<PodDisruptionBudget>,
    pub secrets: (
        Managed<PackedWriter<PartialObjectMeta<Secret>>>,
        ByNameWriter<Secret>,
    ),
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
    let (services, services_writer) = indexed();
    let (named_services, named_services_writer) = by_name();
    let (config_maps, config_maps_writer) = by_name();
    let (stateful_sets, stateful_sets_writer) = indexed();
    let (deployments, deployments_writer) = indexed();
    let (pods, pods_writer) = indexed();
    let (claims, claims_writer) = indexed();
    let (pod_disruption_budgets, budgets_writer) = packed_store();
    let (secrets, secrets_writer) = packed_store();
    let (named_secrets, named_secrets_writer) = by_name();
    let (sender, synced) = watch::channel(false);
    let caches = Caches {
        services,
        named_services,
        config_maps,
        stateful_sets,
        deployments,
        pods,
        claims,
        pod_disruption_budgets,
        secrets,
        named_secrets,
        synced,
    };
    let writers = Writers {
        services: services_writer,
        named_services: named_services_writer,
        config_maps: config_maps_writer,
        stateful_sets: stateful_sets_writer,
        deployments: deployments_writer,
        pods: pods_writer,
        claims: claims_writer,
        pod_disruption_budgets: budgets_writer,
        secrets: (Managed(secrets_writer), named_secrets_writer),
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
    pub async fn wait_listed(&self) -> Result<(), watch::error::RecvError> {
        self.services.store.wait_until_ready().await?;
        self.stateful_sets.store.wait_until_ready().await?;
        self.deployments.store.wait_until_ready().await?;
        self.pods.store.wait_until_ready().await?;
        self.claims.store.wait_until_ready().await?;
        self.pod_disruption_budgets.wait_until_ready().await?;
        self.secrets.wait_until_ready().await
    }
}

/// What keeps a cache from a watch's events.
pub trait CacheWriter<K>: Send + 'static {
    /// Takes in one event of the watch.
    fn apply_watcher_event(&mut self, event: &Event<K>);
}

/// Both writers take in each event.
impl<K, A: CacheWriter<K>, B: CacheWriter<K>> CacheWriter<K> for (A, B) {
    fn apply_watcher_event(&mut self, event: &Event<K>) {
        self.0.apply_watcher_event(event);
        self.1.apply_watcher_event(event);
    }
}

/// A writer that keeps only the objects this operator manages (its
/// managed-by label): one that loses the label is let go, the others never
/// enter.
pub struct Managed<W>(W);

impl<K, W> CacheWriter<K> for Managed<W>
where
    K: Resource + Clone,
    W: CacheWriter<K>,
{
    fn apply_watcher_event(&mut self, event: &Event<K>) {
        let managed =
            |object: &K| object.labels().get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGER);
        match event {
            Event::Apply(object) if !managed(object) => {
                self.0.apply_watcher_event(&Event::Delete(object.clone()))
            }
            Event::InitApply(object) if !managed(object) => {}
            _ => self.0.apply_watcher_event(event),
        }
    }
}

/// The objects of `api` selected by `config`, kept by `writer`: a stream of
/// every object that changed (deleted ones included), for the controller to
/// map to the `MongoDB` objects to look at.
pub fn reflect<K>(
    mut writer: impl CacheWriter<K>,
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send + 'static
where
    K: Cached + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone + Send + Sync,
{
    watcher::watcher(api, config)
        .default_backoff()
        .modify(K::slim)
        .map_ok(move |event| {
            writer.apply_watcher_event(&event);
            event
        })
        .touched_objects()
}

/// The annotation `kubectl apply` writes: a copy of the whole object (of a
/// Secret, its data too), which no pass reads.
const LAST_APPLIED_ANNOTATION: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// A kind the controller caches, and what of it no pass reads.
pub trait Cached: Resource {
    /// Removes, before the object is cached, what no pass reads: its
    /// `managedFields` (as large as the fields they describe) and `kubectl
    /// apply`'s copy of it, and more for some kinds.
    fn slim(&mut self) {
        slim_metadata(self.meta_mut());
    }
}

/// Removes from `metadata` what no pass reads of any kind.
fn slim_metadata(metadata: &mut ObjectMeta) {
    metadata.managed_fields = None;
    if let Some(annotations) = metadata.annotations.as_mut() {
        annotations.remove(LAST_APPLIED_ANNOTATION);
    }
}

impl Cached for Service {}
impl Cached for ConfigMap {}
impl Cached for Secret {}
impl Cached for PodDisruptionBudget {}
impl Cached for PartialObjectMeta<Secret> {}
impl Cached for PartialObjectMeta<ConfigMap> {}
impl Cached for PartialObjectMeta<Service> {}
impl Cached for crate::api::MongoDB {}

/// A pass reads a member pod's metadata, phase and conditions (`validate`).
impl Cached for Pod {
    fn slim(&mut self) {
        slim_metadata(&mut self.metadata);
        self.spec = None;
        self.status = self.status.take().map(|status| PodStatus {
            phase: status.phase,
            conditions: status.conditions,
            ..PodStatus::default()
        });
    }
}

/// A pass reads a member StatefulSet's metadata (`validate`, and `apply`'s
/// write marker, its generation) and its claim templates' storage requests
/// (`grow`).
impl Cached for StatefulSet {
    fn slim(&mut self) {
        slim_metadata(&mut self.metadata);
        self.spec = self.spec.take().map(|spec| StatefulSetSpec {
            volume_claim_templates: spec
                .volume_claim_templates
                .map(|templates| templates.into_iter().map(slim_claim).collect()),
            ..StatefulSetSpec::default()
        });
        self.status = None;
    }
}

/// A pass reads a data claim's size: requested, reached, and its conditions (`grow`).
impl Cached for PersistentVolumeClaim {
    fn slim(&mut self) {
        let claim = std::mem::take(self);
        *self = slim_claim(claim);
    }
}

/// A claim with its metadata (without `managedFields`), its storage request,
/// capacity and conditions only.
fn slim_claim(mut claim: PersistentVolumeClaim) -> PersistentVolumeClaim {
    slim_metadata(&mut claim.metadata);
    PersistentVolumeClaim {
        metadata: claim.metadata,
        spec: claim.spec.map(|spec| PersistentVolumeClaimSpec {
            resources: spec.resources,
            ..PersistentVolumeClaimSpec::default()
        }),
        status: claim.status.map(|status| PersistentVolumeClaimStatus {
            capacity: status.capacity,
            conditions: status.conditions,
            phase: status.phase,
            ..PersistentVolumeClaimStatus::default()
        }),
    }
}

/// A pass reads an exporter Deployment's metadata only (`apply`'s write
/// marker, and which ones are no longer wanted).
impl Cached for Deployment {
    fn slim(&mut self) {
        slim_metadata(&mut self.metadata);
        self.spec = None;
        self.status = None;
    }
}

/// A store and the index of its objects by instance label.
pub struct Indexed<K> {
    /// Every object, by name.
    pub store: PackedStore<K>,
    index: Arc<RwLock<InstanceIndex>>,
}

impl<K> Clone for Indexed<K> {
    fn clone(&self) -> Self {
        Indexed {
            store: self.store.clone(),
            index: self.index.clone(),
        }
    }
}

/// The writer of an [`Indexed`] store: the store's writer, and the index kept
/// from the same events.
pub struct IndexedWriter<K> {
    writer: PackedWriter<K>,
    index: Arc<RwLock<InstanceIndex>>,
    /// The index being rebuilt by a (re)list: it replaces the index when the
    /// list is done, as the store's own buffer does.
    relisting: Option<InstanceIndex>,
}

/// An empty indexed store and its writer.
fn indexed<K>() -> (Indexed<K>, IndexedWriter<K>) {
    let (store, writer) = packed_store();
    let index = Arc::new(RwLock::new(InstanceIndex::default()));
    let indexed = Indexed {
        store,
        index: index.clone(),
    };
    let writer = IndexedWriter {
        writer,
        index,
        relisting: None,
    };
    (indexed, writer)
}

impl<K> CacheWriter<K> for IndexedWriter<K>
where
    K: Resource + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn apply_watcher_event(&mut self, event: &Event<K>) {
        self.writer.apply_watcher_event(event);
        let mut index = self.index.write().unwrap_or_else(|p| p.into_inner());
        match event {
            Event::Apply(object) => index.insert(object),
            Event::Delete(object) => index.remove(object),
            Event::Init => self.relisting = Some(InstanceIndex::default()),
            Event::InitApply(object) => self
                .relisting
                .get_or_insert_with(InstanceIndex::default)
                .insert(object),
            Event::InitDone => *index = self.relisting.take().unwrap_or_default(),
        }
    }
}

impl<K> Indexed<K>
where
    K: Resource + Serialize + DeserializeOwned,
{
    /// The cached objects of `namespace` labelled with `instance`: looked up
    /// in the index, so only that instance's objects are read.
    pub fn of_instance(&self, namespace: &str, instance: &str) -> Vec<K> {
        let names = self
            .index
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .names(namespace, instance);
        names
            .iter()
            .filter_map(|name| self.store.get(namespace, name))
            // The store may be a step ahead of the index (both are written by
            // one event, the store first): trust the object's own label.
            .filter(|object| {
                object.labels().get(INSTANCE_LABEL).map(String::as_str) == Some(instance)
            })
            .collect()
    }
}

/// Names of objects by (namespace, instance label), and the label each
/// object was indexed under (to move or drop it when it changes).
#[derive(Default)]
struct InstanceIndex {
    names: HashMap<(String, String), BTreeSet<String>>,
    instance_of: HashMap<(String, String), String>,
}

impl InstanceIndex {
    fn insert<K: Resource>(&mut self, object: &K) {
        self.remove(object);
        let (Some(namespace), Some(instance)) =
            (object.namespace(), object.labels().get(INSTANCE_LABEL))
        else {
            return;
        };
        let name = object.name_any();
        self.names
            .entry((namespace.clone(), instance.clone()))
            .or_default()
            .insert(name.clone());
        self.instance_of.insert((namespace, name), instance.clone());
    }

    fn remove<K: Resource>(&mut self, object: &K) {
        let Some(namespace) = object.namespace() else {
            return;
        };
        let name = object.name_any();
        let Some(instance) = self.instance_of.remove(&(namespace.clone(), name.clone())) else {
            return;
        };
        let key = (namespace, instance);
        if let Some(names) = self.names.get_mut(&key) {
            names.remove(&name);
            if names.is_empty() {
                self.names.remove(&key);
            }
        }
    }

    fn names(&self, namespace: &str, instance: &str) -> Vec<String> {
        self.names
            .get(&(namespace.to_string(), instance.to_string()))
            .map(|names| names.iter().cloned().collect())
            .unwrap_or_default()
    }
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn pod(namespace: &str, name: &str, instance: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace, "labels": {INSTANCE_LABEL: instance}},
        }))
        .unwrap()
    }

    fn names_of(pods: &Indexed<Pod>, namespace: &str, instance: &str) -> Vec<String> {
        let mut names: Vec<String> = pods
            .of_instance(namespace, instance)
            .iter()
            .map(|pod| pod.name_any())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn slim_objects_keep_what_a_pass_reads() {
        let mut pod: Pod = serde_json::from_value(json!({
            "metadata": {"name": "demo-mongodb-0-0", "uid": "u", "annotations": {"a": "b"},
                         "managedFields": [{"manager": "kubelet"}]},
            "spec": {"containers": [{"name": "mongod", "image": "mongo:7.0"}]},
            "status": {"phase": "Running", "podIP": "10.0.0.1",
                       "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap();
        pod.slim();
        let kept = serde_json::to_value(&pod).unwrap();
        assert_eq!(
            kept,
            json!({
                "apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "demo-mongodb-0-0", "uid": "u", "annotations": {"a": "b"}},
                "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
            })
        );
        let mut set: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "demo-mongodb-0", "generation": 3, "annotations": {"a": "b"},
                         "ownerReferences": [{"apiVersion": "v1", "kind": "MongoDB", "name": "demo", "uid": "m"}]},
            "spec": {"selector": {"matchLabels": {"app": "x"}}, "serviceName": "demo", "template": {"spec": {"containers": []}},
                     "volumeClaimTemplates": [{"metadata": {"name": "data", "labels": {"l": "v"}},
                                               "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}]},
            "status": {"replicas": 1},
        }))
        .unwrap();
        set.slim();
        assert_eq!(
            serde_json::to_value(&set.spec).unwrap(),
            json!({"selector": {}, "template": {},
                   "volumeClaimTemplates": [{"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                             "metadata": {"name": "data", "labels": {"l": "v"}},
                                             "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]}),
            "only the claim templates' storage requests are kept"
        );
        assert!(set.status.is_none());
        let mut claim: PersistentVolumeClaim = serde_json::from_value(json!({
            "metadata": {"name": "data-demo-mongodb-0-0", "managedFields": [{"manager": "m"}]},
            "spec": {"accessModes": ["ReadWriteOnce"], "volumeName": "pv-1", "resources": {"requests": {"storage": "8Gi"}}},
            "status": {"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "1Gi"},
                       "conditions": [{"type": "FileSystemResizePending", "status": "True"}]},
        }))
        .unwrap();
        claim.slim();
        assert_eq!(
            serde_json::to_value(&claim).unwrap(),
            json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                   "metadata": {"name": "data-demo-mongodb-0-0"},
                   "spec": {"resources": {"requests": {"storage": "8Gi"}}},
                   "status": {"phase": "Bound", "capacity": {"storage": "1Gi"},
                              "conditions": [{"type": "FileSystemResizePending", "status": "True"}]}})
        );
        assert_eq!(set.metadata.generation, Some(3));
        assert_eq!(set.owner_references().len(), 1);
        assert_eq!(set.annotations().get("a").map(String::as_str), Some("b"));
    }

    #[test]
    fn an_instances_objects_are_found_through_the_index_as_the_watch_changes_them() {
        let (pods, mut writer) = indexed::<Pod>();
        writer.apply_watcher_event(&Event::Init);
        for object in [
            pod("ns", "a-0", "a"),
            pod("ns", "a-1", "a"),
            pod("ns", "b-0", "b"),
            pod("other", "a-0", "a"),
        ] {
            writer.apply_watcher_event(&Event::InitApply(object));
        }
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(names_of(&pods, "ns", "a"), ["a-0", "a-1"]);
        assert_eq!(names_of(&pods, "other", "a"), ["a-0"]);

        // Relabelled: found under its new instance only.
        writer.apply_watcher_event(&Event::Apply(pod("ns", "a-1", "b")));
        assert_eq!(names_of(&pods, "ns", "a"), ["a-0"]);
        assert_eq!(names_of(&pods, "ns", "b"), ["a-1", "b-0"]);

        writer.apply_watcher_event(&Event::Delete(pod("ns", "b-0", "b")));
        assert_eq!(names_of(&pods, "ns", "b"), ["a-1"]);

        // A relist (after a lost watch) replaces the index: what it no
        // longer lists is gone, and the old index serves until it is done.
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(pod("ns", "a-2", "a")));
        assert_eq!(names_of(&pods, "ns", "a"), ["a-0"]);
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(names_of(&pods, "ns", "a"), ["a-2"]);
        assert!(names_of(&pods, "ns", "b").is_empty());
        assert!(names_of(&pods, "other", "a").is_empty());
    }

    #[test]
    fn only_the_secrets_this_operator_manages_are_kept() {
        let (store, writer) = packed_store::<PartialObjectMeta<Secret>>();
        let mut writer = Managed(writer);
        let secret = |name: &str, managed: bool| -> PartialObjectMeta<Secret> {
            let labels = match managed {
                true => json!({MANAGED_BY_LABEL: MANAGER}),
                false => json!({"app": "other"}),
            };
            serde_json::from_value(json!({
                "apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
                "metadata": {"name": name, "namespace": "ns", "labels": labels},
            }))
            .unwrap()
        };
        let names = || {
            let mut names = store.names_in("ns");
            names.sort();
            names
        };
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(secret("ours", true)));
        writer.apply_watcher_event(&Event::InitApply(secret("theirs", false)));
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(names(), ["ours"]);
        writer.apply_watcher_event(&Event::Apply(secret("helm-release", false)));
        writer.apply_watcher_event(&Event::Apply(secret("keyfile", true)));
        assert_eq!(names(), ["keyfile", "ours"]);
        // One that loses the label is let go.
        writer.apply_watcher_event(&Event::Apply(secret("ours", false)));
        assert_eq!(names(), ["keyfile"]);
    }
}
