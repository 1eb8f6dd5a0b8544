//! Objects a pass reads by name that carry no label of ours — hostconf and
//! the custom config ConfigMap, the Secrets a `MongoDB` names, FedState's
//! arbiter Service ([`ByName`]): read with one GET when a pass first needs
//! them, then kept ([`Cached::slim`]: without what no pass reads; as JSON,
//! [`super::packed`]) for as long as a metadata-only watch of their kind shows
//! the same `resourceVersion`.
//!
//! The watch keeps nothing of the objects no pass read, so what other
//! tenants keep in the cluster costs the operator no memory: each of their
//! changes is one small event, decoded and dropped. What a pass read costs one
//! GET per change of that object.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kube::api::PartialObjectMeta;
use kube::runtime::watcher::Event;
use kube::{Api, Resource};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::caches::{CacheWriter, Cached};
use super::packed::Packed;

/// How long an object no pass has read stays kept: far longer than the 30 s
/// between two passes of an instance at rest, so only what no instance
/// refers to any more is let go.
const UNREAD_FOR: Duration = Duration::from_secs(600);

/// Objects of kind `K` read by name, and what the watch last said of each.
pub struct ByName<K> {
    entries: Arc<Mutex<Entries<K>>>,
}

impl<K> Clone for ByName<K> {
    fn clone(&self) -> Self {
        ByName {
            entries: self.entries.clone(),
        }
    }
}

/// The watch's side of a [`ByName`]: it records what the metadata watch says
/// of every object a pass has read.
pub struct ByNameWriter<K> {
    entries: Arc<Mutex<Entries<K>>>,
}

/// An empty cache and its writer.
pub fn by_name<K>() -> (ByName<K>, ByNameWriter<K>) {
    let entries = Arc::new(Mutex::new(Entries::default()));
    (
        ByName {
            entries: entries.clone(),
        },
        ByNameWriter { entries },
    )
}

struct Entries<K> {
    by_key: HashMap<(String, String), Entry<K>>,
    last_swept: Option<Instant>,
}

impl<K> Default for Entries<K> {
    fn default() -> Self {
        Entries {
            by_key: HashMap::new(),
            last_swept: None,
        }
    }
}

/// One object a pass asked for.
struct Entry<K> {
    /// What the watch said of it since the first pass asked.
    seen: Seen,
    /// What the last GET answered (`None` inside: not found); `None` until
    /// a GET has answered.
    read: Option<Option<Read<K>>>,
    /// Whether the relist under way has listed it.
    relisted: bool,
    /// When a pass last asked for it.
    last_asked: Instant,
}

/// What the metadata watch last said of an object.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    /// Nothing since a pass first asked: the GET's answer stands.
    Unknown,
    /// It exists at this `resourceVersion`.
    Version(String),
    /// It is gone (deleted, or missing from a relist).
    Absent,
}

/// An object as a GET answered it: packed, and its `resourceVersion`.
struct Read<K> {
    version: Option<String>,
    object: Packed<K>,
}

impl<K: Serialize + DeserializeOwned> Entry<K> {
    /// The last GET's answer, while it still tells what the object is.
    fn current(&self) -> Option<Option<&Packed<K>>> {
        let read = self.read.as_ref()?;
        let fresh = match (&self.seen, read) {
            (Seen::Unknown, _) => true,
            (Seen::Version(version), Some(read)) => read.version.as_ref() == Some(version),
            (Seen::Absent, None) => true,
            _ => false,
        };
        fresh.then(|| read.as_ref().map(|read| &read.object))
    }
}

impl<K> ByName<K>
where
    K: Cached
        + Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + Serialize
        + DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    /// The object `name` of `namespace` (`None`: it does not exist): as last
    /// read, unless the watch has seen it change since, else read with one
    /// GET through `api`.
    pub async fn get(
        &self,
        api: &Api<K>,
        namespace: &str,
        name: &str,
    ) -> Result<Option<K>, kube::Error> {
        let key = (namespace.to_string(), name.to_string());
        {
            let mut entries = self.lock();
            let now = Instant::now();
            entries.sweep(now);
            let entry = entries.by_key.entry(key.clone()).or_insert(Entry {
                seen: Seen::Unknown,
                read: None,
                relisted: false,
                last_asked: now,
            });
            entry.last_asked = now;
            match entry.current() {
                Some(None) => return Ok(None),
                Some(Some(packed)) => {
                    if let Some(object) = packed.unpack() {
                        return Ok(Some(object));
                    }
                }
                None => {}
            }
        }
        // The entry exists while the GET runs, so a change the watch sees
        // meanwhile is recorded against it and the answer is not trusted.
        let read = api.get_opt(name).await?.map(|mut object| {
            object.slim();
            object
        });
        let packed = match &read {
            Some(object) => Packed::pack(object).map(|packed| {
                Some(Read {
                    version: object.meta().resource_version.clone(),
                    object: packed,
                })
            }),
            None => Some(None),
        };
        if let (Some(entry), Some(packed)) = (self.lock().by_key.get_mut(&key), packed) {
            entry.read = Some(packed);
        }
        Ok(read)
    }
}

impl<K> ByName<K> {
    fn lock(&self) -> std::sync::MutexGuard<'_, Entries<K>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<K> Entries<K> {
    /// Lets go, at most once a minute, of what no pass asked for lately.
    fn sweep(&mut self, now: Instant) {
        if self
            .last_swept
            .is_some_and(|swept| now.duration_since(swept) < Duration::from_secs(60))
        {
            return;
        }
        self.last_swept = Some(now);
        self.by_key
            .retain(|_, entry| now.duration_since(entry.last_asked) < UNREAD_FOR);
    }
}

impl<K> CacheWriter<PartialObjectMeta<K>> for ByNameWriter<K>
where
    K: Send + Sync + 'static,
{
    fn apply_watcher_event(&mut self, event: &Event<PartialObjectMeta<K>>) {
        let mut entries = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let mut seen = |object: &PartialObjectMeta<K>, seen: Seen| {
            let meta = &object.metadata;
            let key = (
                meta.namespace.clone().unwrap_or_default(),
                meta.name.clone().unwrap_or_default(),
            );
            if let Some(entry) = entries.by_key.get_mut(&key) {
                entry.seen = seen;
                entry.relisted = true;
            }
        };
        match event {
            Event::Apply(object) | Event::InitApply(object) => {
                let version = object.metadata.resource_version.clone().unwrap_or_default();
                seen(object, Seen::Version(version));
            }
            Event::Delete(object) => seen(object, Seen::Absent),
            Event::Init => {
                for entry in entries.by_key.values_mut() {
                    entry.relisted = false;
                }
            }
            // What the relist did not list was deleted while the watch was
            // away: its Delete event is lost.
            Event::InitDone => {
                for entry in entries.by_key.values_mut() {
                    if !entry.relisted {
                        entry.seen = Seen::Absent;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
    use kube::ResourceExt;
    use serde_json::json;

    use super::*;
    use crate::build::fixtures::NAMESPACE;
    use crate::controller::test_cluster;

    fn gets(server: &apiserver_sim::ApiServerHandle) -> u64 {
        server
            .requests()
            .snapshot()
            .iter()
            .filter(|(key, _)| key.verb == "get" && key.resource == "configmaps")
            .map(|(_, n)| n)
            .sum()
    }

    /// What a metadata-only watch delivers of `config_map`.
    fn meta(config_map: &ConfigMap) -> PartialObjectMeta<ConfigMap> {
        PartialObjectMeta {
            types: None,
            metadata: config_map.metadata.clone(),
            _phantom: Default::default(),
        }
    }

    fn hostconf(line: &str) -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": "hostconf", "namespace": NAMESPACE},
            "data": {"datas": line},
        }))
        .unwrap()
    }

    fn data(read: &Option<ConfigMap>) -> Option<String> {
        read.as_ref()?.data.as_ref()?.get("datas").cloned()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_object_is_read_again_only_once_the_watch_shows_it_changed_or_gone() {
        let (server, client) = test_cluster::start().await;
        let api = Api::<ConfigMap>::namespaced(client, NAMESPACE);
        let (cache, mut writer) = by_name::<ConfigMap>();
        let get = || cache.get(&api, NAMESPACE, "hostconf");

        // Not there yet: read once, and known as missing until the watch
        // sees it.
        assert_eq!(get().await.unwrap(), None);
        assert_eq!(get().await.unwrap(), None);
        assert_eq!(gets(&server), 1);
        let created = api
            .create(&PostParams::default(), &hostconf("10.0.0.1:30001"))
            .await
            .unwrap();
        writer.apply_watcher_event(&Event::Apply(meta(&created)));
        assert_eq!(
            data(&get().await.unwrap()).as_deref(),
            Some("10.0.0.1:30001")
        );
        assert_eq!(
            data(&get().await.unwrap()).as_deref(),
            Some("10.0.0.1:30001")
        );
        assert_eq!(gets(&server), 2);

        // Changed: the pass before the watch's event reads what was read
        // (as from any watch cache); after it, the new object, once.
        let patch = Patch::Merge(json!({"data": {"datas": "10.0.0.1:30002"}}));
        let changed = api
            .patch("hostconf", &PatchParams::default(), &patch)
            .await
            .unwrap();
        assert_eq!(
            data(&get().await.unwrap()).as_deref(),
            Some("10.0.0.1:30001")
        );
        writer.apply_watcher_event(&Event::Apply(meta(&changed)));
        assert_eq!(
            data(&get().await.unwrap()).as_deref(),
            Some("10.0.0.1:30002")
        );
        assert_eq!(
            data(&get().await.unwrap()).as_deref(),
            Some("10.0.0.1:30002")
        );
        assert_eq!(gets(&server), 3);

        // Deleted while the watch was away: the relist does not list it.
        api.delete("hostconf", &DeleteParams::default())
            .await
            .unwrap();
        writer.apply_watcher_event(&Event::Init);
        writer.apply_watcher_event(&Event::InitDone);
        assert_eq!(get().await.unwrap(), None);
        assert_eq!(get().await.unwrap(), None);
        assert_eq!(gets(&server), 4);

        // Created again, then deleted with the watch looking.
        let created = api
            .create(&PostParams::default(), &hostconf("10.0.0.1:30003"))
            .await
            .unwrap();
        writer.apply_watcher_event(&Event::Apply(meta(&created)));
        assert_eq!(
            data(&get().await.unwrap()).as_deref(),
            Some("10.0.0.1:30003")
        );
        api.delete("hostconf", &DeleteParams::default())
            .await
            .unwrap();
        writer.apply_watcher_event(&Event::Delete(meta(&created)));
        assert_eq!(get().await.unwrap(), None);
        assert_eq!(gets(&server), 6);
    }

    #[test]
    fn an_answer_older_than_what_the_watch_saw_while_it_ran_is_not_kept() {
        // The GET went out before version 2 was written and answered after
        // the watch had delivered version 2.
        let old = || Read {
            version: Some("1".into()),
            object: Packed::pack(&ConfigMap::default()).unwrap(),
        };
        let entry = |seen, read| Entry::<ConfigMap> {
            seen,
            read,
            relisted: false,
            last_asked: Instant::now(),
        };
        let current = |e: Entry<ConfigMap>| e.current().map(|read| read.is_some());
        assert_eq!(
            current(entry(Seen::Version("2".into()), Some(Some(old())))),
            None
        );
        assert_eq!(
            current(entry(Seen::Version("1".into()), Some(Some(old())))),
            Some(true)
        );
        assert_eq!(current(entry(Seen::Unknown, Some(Some(old())))), Some(true));
        assert_eq!(current(entry(Seen::Absent, Some(Some(old())))), None);
        assert_eq!(current(entry(Seen::Absent, Some(None))), Some(false));
        assert_eq!(current(entry(Seen::Version("1".into()), Some(None))), None);
        assert_eq!(current(entry(Seen::Unknown, None)), None, "no answer yet");
    }

    #[test]
    fn what_no_pass_asked_for_lately_is_let_go() {
        let mut entries = Entries::<ConfigMap>::default();
        let start = Instant::now();
        for (name, asked) in [("old", start), ("recent", start + UNREAD_FOR)] {
            entries.by_key.insert(
                ("ns".into(), name.into()),
                Entry {
                    seen: Seen::Unknown,
                    read: Some(None),
                    relisted: false,
                    last_asked: asked,
                },
            );
        }
        entries.sweep(start + UNREAD_FOR + Duration::from_secs(1));
        let kept: Vec<&str> = entries.by_key.keys().map(|(_, n)| n.as_str()).collect();
        assert_eq!(kept, ["recent"]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn what_is_kept_of_a_read_object_is_what_a_pass_reads() {
        let (_server, client) = test_cluster::start().await;
        let api = Api::<ConfigMap>::namespaced(client, NAMESPACE);
        let applied = json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "hostconf", "namespace": NAMESPACE, "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": "{\"data\":{}}",
                "team": "db",
            }},
            "data": {"datas": "10.0.0.1:30001"},
        });
        let written = api
            .patch(
                "hostconf",
                &PatchParams::apply("kubectl"),
                &Patch::Apply(&applied),
            )
            .await
            .unwrap();
        assert!(written.metadata.managed_fields.is_some());
        let (cache, _writer) = by_name::<ConfigMap>();

        let read = cache
            .get(&api, NAMESPACE, "hostconf")
            .await
            .unwrap()
            .unwrap();

        assert_eq!(read.metadata.managed_fields, None);
        let annotations: Vec<&str> = read.annotations().keys().map(String::as_str).collect();
        assert_eq!(annotations, ["team"]);
        assert_eq!(data(&Some(read)).as_deref(), Some("10.0.0.1:30001"));
    }
}
