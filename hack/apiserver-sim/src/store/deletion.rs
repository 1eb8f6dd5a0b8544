//! Deletion: preconditions, graceful pod termination, finalizers, propagation
//! (background and foreground garbage collection, orphaning), and the cleanup
//! that follows a removal (a terminating namespace's contents, a CRD's objects).
//!
//! Foreground deletion is asynchronous, as kube-apiserver and the garbage
//! collector controller do it: the delete call only sets `deletionTimestamp`
//! and the `foregroundDeletion` finalizer; the collector
//! ([`start_garbage_collector`]) deletes the dependents a moment later and
//! removes the finalizer once none is left.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::meta::{finalizers, meta_mut, meta_str, owner_uids};
use super::{
    DeleteOptions, Deleted, EventType, Inner, ObjKey, Ownership, Propagation, WriteOptions,
    CRD_STORAGE,
};
use crate::clock;
use crate::error::ApiError;
use crate::registry::ResourceType;

/// How long after a foreground delete the garbage collector takes on the
/// owner's dependents (it learns of the owner's `deletionTimestamp` from its
/// informers, then works through its queue).
const FOREGROUND_GC_DELAY: Duration = Duration::from_millis(200);
/// How often the garbage collector looks for work.
const GC_PERIOD: Duration = Duration::from_millis(20);

/// Runs the store's garbage collector on a thread of its own until the store
/// is dropped: each owner deleted in the foreground has its dependents deleted
/// once due, then loses its `foregroundDeletion` finalizer when none is left.
pub(super) fn start_garbage_collector(inner: Weak<Mutex<Inner>>) {
    std::thread::Builder::new()
        .name("apiserver-sim-gc".into())
        .spawn(move || loop {
            std::thread::sleep(GC_PERIOD);
            let Some(inner) = inner.upgrade() else {
                return;
            };
            inner
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .collect_foreground_due();
        })
        .expect("spawning the garbage collector thread");
}

impl Inner {
    /// Deletes the dependents of every foreground-deleted owner that is due.
    fn collect_foreground_due(&mut self) {
        let now = Instant::now();
        let due: Vec<String> = self
            .foreground_due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in due {
            self.foreground_due.remove(&uid);
            self.delete_dependents(&uid);
            self.finish_foreground(&uid);
        }
        let due: Vec<String> = self
            .orphan_due
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(uid, _)| uid.clone())
            .collect();
        for uid in due {
            self.orphan_due.remove(&uid);
            self.orphan_dependents(&uid);
            self.finish_orphan(&uid);
        }
    }

    /// The garbage collector's `attemptToOrphan` after `orphanDependents`:
    /// removes the owner's `orphan` finalizer, which removes the owner once no
    /// other finalizer holds it.
    fn finish_orphan(&mut self, owner_uid: &str) {
        let Some(key) = self.by_uid.get(owner_uid).cloned() else {
            return;
        };
        let Some(owner) = self.objects.get(&key).cloned() else {
            return;
        };
        if !finalizers(&owner).iter().any(|f| f == "orphan") {
            return;
        }
        let mut new = owner.clone();
        if let Some(Value::Array(fs)) = meta_mut(&mut new).get_mut("finalizers") {
            fs.retain(|f| f != "orphan");
            if fs.is_empty() {
                meta_mut(&mut new).remove("finalizers");
            }
        }
        if let Some(rt) = self.type_of_storage(&key.0) {
            let _ = self.commit_update(
                &rt,
                &key,
                owner,
                new,
                &WriteOptions::manager("generic-garbage-collector"),
                Ownership::Track,
            );
        }
    }

    fn set_deleting(&mut self, key: &ObjKey, grace: i64, extra_finalizer: Option<&str>) -> Value {
        let Some(old) = self.objects.get(key).cloned() else {
            return Value::Null;
        };
        let mut new = old.clone();
        let already = !meta_str(&old, "deletionTimestamp").is_empty();
        let meta = meta_mut(&mut new);
        if !already {
            meta.insert("deletionTimestamp".into(), json!(clock::rfc3339_in(grace)));
            meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
            if let Some(gen) = meta.get("generation").and_then(Value::as_i64) {
                meta.insert("generation".into(), json!(gen + 1));
            }
        }
        if let Some(f) = extra_finalizer {
            let list = meta.entry("finalizers").or_insert_with(|| json!([]));
            if let Some(a) = list.as_array_mut() {
                if !a.contains(&json!(f)) {
                    a.push(json!(f));
                }
            }
        }
        if new == old {
            return old;
        }
        self.rv += 1;
        meta_mut(&mut new).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key.clone(), new.clone());
        self.emit(EventType::Modified, &key.0, new.clone(), Some(old));
        new
    }

    pub(super) fn delete(
        &mut self,
        rt: &Arc<ResourceType>,
        key: &ObjKey,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let name = key.2.clone();
        let obj = self
            .objects
            .get(key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &name))?;
        if let Some(uid) = &opts.precondition_uid {
            if uid != meta_str(&obj, "uid") {
                return Err(ApiError::conflict(
                    &rt.group,
                    &rt.plural,
                    &name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {}",
                        meta_str(&obj, "uid")
                    ),
                ));
            }
        }
        if let Some(rv) = &opts.precondition_resource_version {
            if rv != meta_str(&obj, "resourceVersion") {
                return Err(ApiError::conflict(&rt.group, &rt.plural, &name, &format!(
                    "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {}",
                    meta_str(&obj, "resourceVersion")
                )));
            }
        }
        if opts.dry_run {
            return Ok(Deleted::Gone(obj));
        }
        let uid = meta_str(&obj, "uid").to_string();
        if rt.kind == "Pod" && !rt.is_custom() {
            let bound = !obj
                .pointer("/spec/nodeName")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .is_empty();
            let phase = obj
                .pointer("/status/phase")
                .and_then(Value::as_str)
                .unwrap_or_default();
            let terminal = phase == "Succeeded" || phase == "Failed";
            let grace = opts
                .grace_period_seconds
                .or_else(|| {
                    obj.pointer("/spec/terminationGracePeriodSeconds")
                        .and_then(Value::as_i64)
                })
                .unwrap_or(30);
            if bound && !terminal && grace > 0 {
                return Ok(Deleted::Pending(self.set_deleting(key, grace, None)));
            }
        }
        match opts.propagation {
            // As with Foreground, the call only marks the owner, here with the
            // `orphan` finalizer (`deletionFinalizersForGarbageCollection`); the
            // collector strips the dependents' references, then the finalizer.
            Propagation::Orphan if rt.kind != "Namespace" || rt.is_custom() => {
                let pending = self.set_deleting(key, 0, Some("orphan"));
                let due = Instant::now() + FOREGROUND_GC_DELAY;
                self.orphan_due.entry(uid).or_insert(due);
                return Ok(Deleted::Pending(pending));
            }
            Propagation::Orphan => self.orphan_dependents(&uid),
            Propagation::Foreground if self.has_dependents(&uid) => {
                let pending = self.set_deleting(key, 0, Some("foregroundDeletion"));
                let due = Instant::now() + FOREGROUND_GC_DELAY;
                self.foreground_due.entry(uid).or_insert(due);
                return Ok(Deleted::Pending(pending));
            }
            _ => {}
        }
        if rt.kind == "Namespace" && !rt.is_custom() {
            let pending = self.set_deleting(key, 0, None);
            if let Some(status) = self
                .objects
                .get_mut(key)
                .and_then(|n| n.get_mut("status"))
                .and_then(Value::as_object_mut)
            {
                status.insert("phase".into(), json!("Terminating"));
            }
            let contents: Vec<ObjKey> = self
                .objects
                .keys()
                .filter(|k| !k.1.is_empty() && k.1 == name)
                .cloned()
                .collect();
            for k in contents {
                if let Some(crt) = self.type_of_storage(&k.0) {
                    let _ = self.delete(
                        &crt,
                        &k,
                        &DeleteOptions {
                            grace_period_seconds: Some(0),
                            ..Default::default()
                        },
                    );
                }
            }
            self.finish_namespace(&name);
            return Ok(match self.objects.get(key) {
                Some(_) => Deleted::Pending(pending),
                None => Deleted::Gone(pending),
            });
        }
        if !finalizers(&obj).is_empty() {
            return Ok(Deleted::Pending(self.set_deleting(key, 0, None)));
        }
        self.remove(key)
            .map(Deleted::Gone)
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, &name))
    }

    /// Removes an object from storage and runs what follows: garbage
    /// collection of dependents, foreground owners, namespace and CRD cleanup.
    pub(super) fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        let cr_storage = (key.0 == CRD_STORAGE)
            .then(|| self.objects.get(key))
            .flatten()
            .and_then(|crd| {
                let group = crd.pointer("/spec/group").and_then(Value::as_str)?;
                let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str)?;
                Some(format!("{group}/{plural}"))
            });
        // A CRD's objects go first (their watchers see them deleted), then the CRD.
        if let Some(storage) = &cr_storage {
            let crs: Vec<ObjKey> = self
                .objects
                .keys()
                .filter(|k| &k.0 == storage)
                .cloned()
                .collect();
            for k in crs {
                self.remove(&k);
            }
        }
        let mut obj = self.objects.remove(key)?;
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        let uid = meta_str(&obj, "uid").to_string();
        self.by_uid.remove(&uid);
        self.emit(EventType::Deleted, &key.0, obj.clone(), None);
        if key.0 == CRD_STORAGE {
            self.registry.unregister_crd(&key.2);
            // Its kind's watch cache stops: the channel closes and its watches end.
            if let Some(storage) = &cr_storage {
                self.watch_caches.remove(storage);
            }
        }
        self.delete_dependents(&uid);
        let owners: Vec<String> = owner_uids(&obj);
        for owner in owners {
            self.finish_foreground(&owner);
        }
        if !key.1.is_empty() {
            self.finish_namespace(&key.1.clone());
        }
        Some(obj)
    }

    fn dependents(&self, uid: &str) -> Vec<ObjKey> {
        if uid.is_empty() {
            return vec![];
        }
        self.objects
            .iter()
            .filter(|(_, o)| owner_uids(o).iter().any(|u| u == uid))
            .map(|(k, _)| k.clone())
            .collect()
    }

    fn has_dependents(&self, uid: &str) -> bool {
        !self.dependents(uid).is_empty()
    }

    /// Background garbage collection: dependents whose owners are all gone are
    /// deleted; dependents with another live owner lose the reference.
    fn delete_dependents(&mut self, owner_uid: &str) {
        for k in self.dependents(owner_uid) {
            let Some(dep) = self.objects.get(&k).cloned() else {
                continue;
            };
            let live_owner = owner_uids(&dep)
                .iter()
                .any(|u| u != owner_uid && self.by_uid.contains_key(u));
            if live_owner {
                self.drop_owner_ref(&k, owner_uid);
            } else if let Some(rt) = self.type_of_storage(&k.0) {
                let _ = self.delete(&rt, &k, &DeleteOptions::default());
            }
        }
    }

    fn orphan_dependents(&mut self, owner_uid: &str) {
        for k in self.dependents(owner_uid) {
            self.drop_owner_ref(&k, owner_uid);
        }
    }

    fn drop_owner_ref(&mut self, key: &ObjKey, owner_uid: &str) {
        let Some(old) = self.objects.get(key).cloned() else {
            return;
        };
        let mut new = old.clone();
        let meta = meta_mut(&mut new);
        if let Some(Value::Array(refs)) = meta.get_mut("ownerReferences") {
            refs.retain(|r| r.get("uid").and_then(Value::as_str) != Some(owner_uid));
            if refs.is_empty() {
                meta.remove("ownerReferences");
            }
        }
        if let Some(rt) = self.type_of_storage(&key.0) {
            let _ = self.commit_update(
                &rt,
                key,
                old,
                new,
                &WriteOptions::manager("generic-garbage-collector"),
                Ownership::Track,
            );
        }
    }

    /// Removes the `foregroundDeletion` finalizer of a deleting owner once no dependent blocks it.
    fn finish_foreground(&mut self, owner_uid: &str) {
        let Some(key) = self.by_uid.get(owner_uid).cloned() else {
            return;
        };
        let Some(owner) = self.objects.get(&key).cloned() else {
            return;
        };
        if meta_str(&owner, "deletionTimestamp").is_empty()
            || !finalizers(&owner).iter().any(|f| f == "foregroundDeletion")
        {
            return;
        }
        if self.has_dependents(owner_uid) {
            return;
        }
        let mut new = owner.clone();
        if let Some(Value::Array(fs)) = meta_mut(&mut new).get_mut("finalizers") {
            fs.retain(|f| f != "foregroundDeletion");
        }
        if let Some(rt) = self.type_of_storage(&key.0) {
            let _ = self.commit_update(
                &rt,
                &key,
                owner,
                new,
                &WriteOptions::manager("generic-garbage-collector"),
                Ownership::Track,
            );
        }
    }

    /// Removes a terminating namespace once it is empty.
    fn finish_namespace(&mut self, ns: &str) {
        let key = ("/namespaces".to_string(), String::new(), ns.to_string());
        let terminating = self
            .objects
            .get(&key)
            .is_some_and(|n| !meta_str(n, "deletionTimestamp").is_empty());
        if terminating
            && !self.objects.keys().any(|k| k.1 == ns)
            && finalizers(&self.objects[&key]).is_empty()
        {
            self.remove(&key);
        }
    }
}
