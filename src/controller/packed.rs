//! The watch caches' storage: each object kept as the JSON of its slimmed
//! self ([`Packed`]) and decoded when a pass reads it. A decoded Kubernetes
//! object is several times its JSON — every label and annotation its own
//! strings in a B-tree, every absent field an inline `None` — and the cached
//! objects were most of the operator's memory with 1,000 instances (`lab
//! bench`, BENCHMARKS.md), while a pass reads only its own instance's few.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::{Arc, RwLock};

use kube::runtime::watcher::Event;
use kube::Resource;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::watch;

use super::caches::CacheWriter;

/// One object, as JSON.
pub struct Packed<K> {
    json: Box<[u8]>,
    kind: PhantomData<fn() -> K>,
}

impl<K: Serialize + DeserializeOwned> Packed<K> {
    /// `object` as JSON. Kubernetes objects always encode (their maps have
    /// string keys); `None` otherwise.
    pub fn pack(object: &K) -> Option<Self> {
        let json = serde_json::to_vec(object).ok()?.into_boxed_slice();
        Some(Packed {
            json,
            kind: PhantomData,
        })
    }

    /// The object again: what was packed always decodes; `None` otherwise.
    pub fn unpack(&self) -> Option<K> {
        serde_json::from_slice(&self.json).ok()
    }
}

/// A cache's key: namespace and name.
type Key = (String, String);

fn key_of<K: Resource>(object: &K) -> Key {
    let meta = object.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The objects of kind `K` a watch keeps, by namespace and name, read by
/// passes.
pub struct PackedStore<K> {
    objects: Arc<RwLock<HashMap<Key, Packed<K>>>>,
    listed: watch::Receiver<bool>,
}

impl<K> Clone for PackedStore<K> {
    fn clone(&self) -> Self {
        PackedStore {
            objects: self.objects.clone(),
            listed: self.listed.clone(),
        }
    }
}

/// The watch's side of a [`PackedStore`]. A (re)list is gathered apart and
/// replaces the objects when it is done, as kube-runtime's reflector does:
/// what it no longer lists was deleted while the watch was away.
pub struct PackedWriter<K> {
    objects: Arc<RwLock<HashMap<Key, Packed<K>>>>,
    relisting: Option<HashMap<Key, Packed<K>>>,
    listed: watch::Sender<bool>,
}

/// An empty store and its writer.
pub fn packed_store<K>() -> (PackedStore<K>, PackedWriter<K>) {
    let objects = Arc::new(RwLock::new(HashMap::new()));
    let (sender, listed) = watch::channel(false);
    let store = PackedStore {
        objects: objects.clone(),
        listed,
    };
    let writer = PackedWriter {
        objects,
        relisting: None,
        listed: sender,
    };
    (store, writer)
}

impl<K: Serialize + DeserializeOwned> PackedStore<K> {
    /// The object `name` of `namespace`, as cached.
    pub fn get(&self, namespace: &str, name: &str) -> Option<K> {
        let key = (namespace.to_string(), name.to_string());
        self.read().get(&key)?.unpack()
    }

    /// The names of the objects cached in `namespace`.
    pub fn names_in(&self, namespace: &str) -> Vec<String> {
        self.read()
            .keys()
            .filter(|(ns, _)| ns == namespace)
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// Waits until the watch has listed once. `Err`: the writer is gone (the
    /// operator is stopping).
    pub async fn wait_until_ready(&self) -> Result<(), watch::error::RecvError> {
        let mut listed = self.listed.clone();
        listed.wait_for(|listed| *listed).await.map(|_| ())
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<Key, Packed<K>>> {
        self.objects.read().unwrap_or_else(|p| p.into_inner())
    }
}

impl<K> CacheWriter<K> for PackedWriter<K>
where
    K: Resource + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    fn apply_watcher_event(&mut self, event: &Event<K>) {
        let mut objects = self.objects.write().unwrap_or_else(|p| p.into_inner());
        match event {
            Event::Apply(object) => match Packed::pack(object) {
                Some(packed) => {
                    objects.insert(key_of(object), packed);
                }
                None => {
                    objects.remove(&key_of(object));
                }
            },
            Event::Delete(object) => {
                objects.remove(&key_of(object));
            }
            Event::Init => self.relisting = Some(HashMap::new()),
            Event::InitApply(object) => {
                let relisting = self.relisting.get_or_insert_with(HashMap::new);
                if let Some(packed) = Packed::pack(object) {
                    relisting.insert(key_of(object), packed);
                }
            }
            Event::InitDone => {
                *objects = self.relisting.take().unwrap_or_default();
                objects.shrink_to_fit();
                self.listed.send_replace(true);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use k8s_openapi::api::core::v1::Pod;
    use serde_json::json;

    use super::*;
    use crate::controller::caches::Cached;

    fn pod(name: &str, phase: &str) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": "7",
                         "labels": {"app.kubernetes.io/instance": "demo"},
                         "annotations": {"middleware.fedstate.io/member-host": "127.0.0.1:30001"}},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}]},
        }))
        .unwrap()
    }

    #[test]
    fn a_packed_object_unpacks_to_itself() {
        let mut set: StatefulSet = serde_json::from_value(json!({
            "metadata": {"name": "demo-mongodb-0", "namespace": "ns", "generation": 3,
                         "creationTimestamp": "2026-11-28T09:12:15Z",
                         "ownerReferences": [{"apiVersion": "v1", "kind": "MongoDB", "name": "demo",
                                              "uid": "m", "controller": true}]},
            "spec": {"selector": {}, "template": {},
                     "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                               "spec": {"resources": {"requests": {"storage": "1Gi"}}}}]},
        }))
        .unwrap();
        set.slim();
        let packed = Packed::pack(&set).unwrap();
        assert_eq!(packed.unpack(), Some(set));
        let pod = pod("demo-mongodb-0-0", "Running");
        assert_eq!(Packed::pack(&pod).unwrap().unpack(), Some(pod));
    }

    #[test]
    fn the_store_follows_the_watch_and_a_relist_replaces_it() {
        let (store, mut writer) = packed_store::<Pod>();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(pod("a", "Pending")));
        assert_eq!(store.get("ns", "a"), None, "a list is kept once it is done");
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(store.get("ns", "a"), Some(pod("a", "Pending")));
        writer.apply_watcher_event(&Event::Apply(pod("a", "Running")));
        writer.apply_watcher_event(&Event::Apply(pod("b", "Running")));
        assert_eq!(store.get("ns", "a"), Some(pod("a", "Running")));
        let mut names = store.names_in("ns");
        names.sort();
        assert_eq!(names, ["a", "b"]);
        assert!(store.names_in("other").is_empty());
        writer.apply_watcher_event(&Event::Delete(pod("a", "Running")));
        assert_eq!(store.get("ns", "a"), None);
        // b was deleted while the watch was away: the relist does not list it.
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitApply(pod("c", "Running")));
        assert_eq!(store.get("ns", "b"), Some(pod("b", "Running")));
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(store.get("ns", "b"), None);
        assert_eq!(store.get("ns", "c"), Some(pod("c", "Running")));
    }

    #[tokio::test]
    async fn the_store_is_ready_once_listed() {
        let (store, mut writer) = packed_store::<Pod>();
        let waiting = tokio::spawn({
            let store = store.clone();
            async move { store.wait_until_ready().await }
        });
        writer.apply_watcher_event(&Event::Init);
        assert!(!waiting.is_finished());
        writer.apply_watcher_event(&Event::InitDone);
        assert!(waiting.await.unwrap().is_ok());
        drop(writer);
        assert!(
            store.wait_until_ready().await.is_ok(),
            "listed stays listed"
        );
    }
}
