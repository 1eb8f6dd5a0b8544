//! The object store: one global integer resourceVersion, create/update/patch/
//! apply/delete with kube-apiserver's storage semantics (no-op writes keep the
//! resourceVersion, generation, status subresource split, finalizers,
//! ownerReference garbage collection, namespace termination, CRD registration),
//! a bounded change history per resource, and subscriptions. HTTP handlers and
//! in-process controllers use the same [`Store`] methods.
//!
//! This module holds the public types and the reads and writes of [`Store`];
//! `write` creates and updates objects (with admission), `deletion` deletes
//! them and collects garbage, `subscription` serves watches from `watch_cache`,
//! each resource's history, and `meta` reads and writes an object's metadata.

mod deletion;
mod meta;
mod subscription;
mod watch_cache;
mod write;

pub use subscription::{Subscription, WatchEvent};
pub use watch_cache::{HISTORY_LEN, WATCH_CHANNEL_LEN};

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Value};

use crate::apply::{self, server_side_apply};
use crate::conversion::{to_storage, to_view};
use crate::error::ApiError;
use crate::patch::{apply_patch, PatchType};
use crate::registry::{Gvr, Registry, ResourceType};
use crate::selectors::{FieldSelector, LabelSelector};
use meta::{meta_mut, meta_str};
use watch_cache::WatchCache;

/// Storage key of CustomResourceDefinitions.
const CRD_STORAGE: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Changed.
    Modified,
    /// Removed from storage.
    Deleted,
}

impl EventType {
    /// `ADDED`, `MODIFIED`, `DELETED`.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One committed change, in stored form.
#[derive(Debug, Clone)]
pub struct Change {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Storage key (`group/plural`).
    pub storage: String,
    /// What happened.
    pub kind: EventType,
    /// The object after the change (for deletes: its last state, with the delete's resourceVersion).
    pub object: Value,
    /// The object before the change, if it existed.
    pub old: Option<Value>,
}

/// Options of create, update and patch calls.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Field manager; defaults to `apiserver-sim` (HTTP: derived from the User-Agent).
    pub field_manager: Option<String>,
    /// Validate and compute the result without storing it.
    pub dry_run: bool,
    /// Write the status subresource.
    pub status: bool,
    /// Server-side apply: take ownership of conflicting fields.
    pub force: bool,
    /// `fieldValidation=Strict`: refuse unknown fields of custom resources (400)
    /// instead of pruning them silently.
    pub strict_fields: bool,
}

impl WriteOptions {
    /// Options for a write by `manager`.
    pub fn manager(manager: &str) -> Self {
        WriteOptions {
            field_manager: Some(manager.into()),
            ..Default::default()
        }
    }
    /// The same options, addressing the status subresource.
    pub fn status(mut self) -> Self {
        self.status = true;
        self
    }
    /// The same options with `force` (server-side apply).
    pub fn force(mut self) -> Self {
        self.force = true;
        self
    }
    fn manager_name(&self) -> String {
        self.field_manager
            .clone()
            .unwrap_or_else(|| "apiserver-sim".into())
    }
}

/// `propagationPolicy` of a delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Propagation {
    /// Dependents are deleted after the owner (the default).
    #[default]
    Background,
    /// The owner stays (with the `foregroundDeletion` finalizer) until its dependents are gone.
    Foreground,
    /// Dependents lose their ownerReference to the owner.
    Orphan,
}

/// Options of a delete.
#[derive(Debug, Clone, Default)]
pub struct DeleteOptions {
    /// Propagation policy.
    pub propagation: Propagation,
    /// Grace period (pods bound to a node terminate gracefully unless 0).
    pub grace_period_seconds: Option<i64>,
    /// Precondition on the uid.
    pub precondition_uid: Option<String>,
    /// Precondition on the resourceVersion.
    pub precondition_resource_version: Option<String>,
    /// Do not persist.
    pub dry_run: bool,
}

/// Options of a list.
#[derive(Debug, Clone, Default)]
pub struct ListOptions {
    /// `labelSelector`
    pub label_selector: Option<String>,
    /// `fieldSelector`
    pub field_selector: Option<String>,
    /// Page size.
    pub limit: Option<usize>,
    /// Continue token from a previous page.
    pub continue_token: Option<String>,
}

/// A page of objects.
#[derive(Debug, Clone)]
pub struct ObjectList {
    /// resourceVersion of the list.
    pub resource_version: u64,
    /// Objects, in served form.
    pub items: Vec<Value>,
    /// Token for the next page.
    pub continue_token: Option<String>,
    /// How many objects the next pages hold.
    pub remaining_item_count: Option<usize>,
}

/// The outcome of a delete.
#[derive(Debug, Clone)]
pub enum Deleted {
    /// Removed from storage; the last state.
    Gone(Value),
    /// Still present, being deleted (finalizers or graceful termination).
    Pending(Value),
}

type ObjKey = (String, String, String);

/// Who decides `managedFields` for a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ownership {
    /// The writer's manager takes the fields it changed (non-apply writes).
    Track,
    /// Already computed (server-side apply) or set explicitly by the client.
    Decided,
}

struct Inner {
    rv: u64,
    objects: BTreeMap<ObjKey, Value>,
    by_uid: HashMap<String, ObjKey>,
    /// Owners deleted with `propagationPolicy=Foreground` whose dependents the
    /// garbage collector has not yet taken on, with when it does (uid → due).
    foreground_due: BTreeMap<String, std::time::Instant>,
    /// Owners deleted with `propagationPolicy=Orphan` (held by the `orphan`
    /// finalizer) whose dependents the garbage collector has not yet orphaned.
    orphan_due: BTreeMap<String, std::time::Instant>,
    registry: Registry,
    /// Each resource's watch cache, by storage key (`group/plural`).
    watch_caches: HashMap<String, WatchCache>,
}

/// The store. Cheap to clone (shared).
#[derive(Clone)]
pub struct Store {
    inner: Arc<Mutex<Inner>>,
}

impl Default for Store {
    fn default() -> Self {
        Self::new()
    }
}

fn continue_token(rv: u64, ns: &str, name: &str) -> String {
    let raw = format!("{rv}\n{ns}\n{name}");
    raw.bytes().map(|b| format!("{b:02x}")).collect()
}

fn parse_continue(token: &str) -> Option<(u64, String, String)> {
    if !token.len().is_multiple_of(2) {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..token.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(token.get(i..i + 2)?, 16).ok())
        .collect();
    let s = String::from_utf8(bytes?).ok()?;
    let mut parts = s.splitn(3, '\n');
    Some((
        parts.next()?.parse().ok()?,
        parts.next()?.to_string(),
        parts.next()?.to_string(),
    ))
}

impl Store {
    /// An empty store with the built-in kinds and the usual namespaces.
    pub fn new() -> Self {
        let store = Store {
            inner: Arc::new(Mutex::new(Inner {
                rv: 0,
                objects: BTreeMap::new(),
                by_uid: HashMap::new(),
                foreground_due: BTreeMap::new(),
                orphan_due: BTreeMap::new(),
                registry: Registry::new(),
                watch_caches: HashMap::new(),
            })),
        };
        deletion::start_garbage_collector(Arc::downgrade(&store.inner));
        for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
            let r = store.create(
                &Gvr::core("namespaces"),
                None,
                json!({"metadata": {"name": ns}}),
                &WriteOptions::manager("kube-apiserver"),
            );
            debug_assert!(r.is_ok());
        }
        store
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The current (latest) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.lock().rv
    }

    /// A snapshot of the served kinds.
    pub fn registry(&self) -> Registry {
        self.lock().registry.clone()
    }

    /// The served resource at `gvr`, or 404.
    pub fn resource(&self, gvr: &Gvr) -> Result<Arc<ResourceType>, ApiError> {
        self.lock()
            .registry
            .get(gvr)
            .ok_or_else(ApiError::no_such_resource)
    }

    /// The resource serving `kind` at `api_version` (`apps/v1`, `StatefulSet`),
    /// e.g. to create objects from manifests.
    pub fn gvr_for(&self, api_version: &str, kind: &str) -> Option<Gvr> {
        self.lock()
            .registry
            .by_kind(api_version, kind)
            .map(|r| r.gvr())
    }

    /// Gets one object.
    pub fn get(&self, gvr: &Gvr, namespace: Option<&str>, name: &str) -> Result<Value, ApiError> {
        let inner = self.lock();
        let rt = inner.resource(gvr)?;
        let key = inner.key(&rt, namespace, name)?;
        inner
            .objects
            .get(&key)
            .map(|o| to_view(&rt, o))
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))
    }

    /// Lists objects (all namespaces when `namespace` is `None`), sorted by namespace and name.
    pub fn list(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        opts: &ListOptions,
    ) -> Result<ObjectList, ApiError> {
        let inner = self.lock();
        let rt = inner.resource(gvr)?;
        let labels = LabelSelector::parse(opts.label_selector.as_deref().unwrap_or(""))?;
        let fields = FieldSelector::parse(opts.field_selector.as_deref().unwrap_or(""), &rt.kind)?;
        let (list_rv, after) = match opts.continue_token.as_deref().filter(|t| !t.is_empty()) {
            Some(t) => {
                let (rv, ns, name) = parse_continue(t)
                    .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
                (rv, Some((ns, name)))
            }
            None => (inner.rv, None),
        };
        let ns_filter = if rt.namespaced { namespace } else { None };
        let matching: Vec<(&ObjKey, &Value)> = inner
            .objects
            .iter()
            .filter(|((s, ns, _), _)| *s == rt.storage && ns_filter.is_none_or(|n| n == ns))
            .filter(|((_, ns, name), _)| {
                after
                    .as_ref()
                    .is_none_or(|(ans, aname)| (ns, name) > (ans, aname))
            })
            .filter(|(_, o)| labels.matches(o) && fields.matches(o))
            .collect();
        let take = opts
            .limit
            .filter(|l| *l > 0)
            .unwrap_or(usize::MAX)
            .min(matching.len());
        let items = matching[..take]
            .iter()
            .map(|(_, o)| to_view(&rt, o))
            .collect();
        let remaining = matching.len() - take;
        let continue_token = (remaining > 0).then(|| {
            let (_, ns, name) = matching[take - 1].0;
            continue_token(list_rv, ns, name)
        });
        Ok(ObjectList {
            resource_version: list_rv,
            items,
            continue_token,
            remaining_item_count: (remaining > 0).then_some(remaining),
        })
    }

    /// Creates an object (`metadata.generateName` supported).
    pub fn create(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let rt = inner.resource(gvr)?;
        let stored = inner.create(
            &rt,
            namespace,
            to_storage(&rt, &obj),
            opts,
            Ownership::Track,
        )?;
        Ok(to_view(&rt, &stored))
    }

    /// Replaces an object (PUT), with optimistic concurrency on `metadata.resourceVersion` when set.
    pub fn update(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        obj: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let rt = inner.resource(gvr)?;
        let key = inner.key(&rt, namespace, name)?;
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        let body = to_storage(&rt, &obj);
        let body_name = meta_str(&body, "name");
        if !body_name.is_empty() && body_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({body_name}) does not match the name on the URL ({name})"
            )));
        }
        let stored = inner.update_from_body(&rt, &key, old, body, opts, Ownership::Track)?;
        Ok(to_view(&rt, &stored))
    }

    /// Patches an object (merge, JSON, strategic merge, or server-side apply).
    pub fn patch(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        kind: PatchType,
        body: &Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        if kind == PatchType::Apply {
            return self.apply(gvr, namespace, name, body.clone(), opts);
        }
        let mut inner = self.lock();
        let rt = inner.resource(gvr)?;
        let key = inner.key(&rt, namespace, name)?;
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        let mut view = to_view(&rt, &old);
        apply_patch(&rt, &mut view, kind, body)?;
        if meta_str(&view, "name") != name {
            return Err(ApiError::bad_request(
                "metadata.name: the name of the object cannot be changed by a patch",
            ));
        }
        let stored = inner.update_from_body(
            &rt,
            &key,
            old,
            to_storage(&rt, &view),
            opts,
            Ownership::Track,
        )?;
        Ok(to_view(&rt, &stored))
    }

    /// Server-side apply: creates the object if missing; `opts.field_manager` is required.
    pub fn apply(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        applied: Value,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let manager = opts
            .field_manager
            .clone()
            .filter(|m| !m.is_empty())
            .ok_or_else(|| {
                ApiError::bad_request(
                    "PATCH requests with apply-patch+yaml content type must specify a fieldManager",
                )
            })?;
        let mut inner = self.lock();
        let rt = inner.resource(gvr)?;
        if !applied.is_object() {
            return Err(ApiError::bad_request("apply patches must be objects"));
        }
        for field in ["apiVersion", "kind"] {
            if applied
                .get(field)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .is_empty()
            {
                return Err(ApiError::bad_request(format!(
                    "{field} must be set in an apply configuration"
                )));
            }
        }
        if applied.get("apiVersion").and_then(Value::as_str) != Some(&rt.api_version())
            || applied.get("kind").and_then(Value::as_str) != Some(&rt.kind)
        {
            return Err(ApiError::bad_request(format!(
                "the apiVersion and kind of the apply configuration must be {} {}",
                rt.api_version(),
                rt.kind
            )));
        }
        // As in kube-apiserver, an apply configuration may leave the name out: the
        // URL names the object (kube-rs status patches do this).
        let applied_name = meta_str(&applied, "name");
        if !applied_name.is_empty() && applied_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({applied_name}) does not match the name on the URL ({name})"
            )));
        }
        let key = inner.key(&rt, namespace, name)?;
        let applied = to_storage(&rt, &applied);
        let conflict =
            |c: apply::Conflicts| ApiError::apply_conflict(&rt.group, &rt.plural, name, &c);
        match inner.objects.get(&key).cloned() {
            None => {
                if opts.status {
                    return Err(ApiError::not_found(&rt.group, &rt.plural, name));
                }
                let mut skeleton = json!({"apiVersion": rt.storage_api_version, "kind": rt.kind, "metadata": {"name": name}});
                if let Some(ns) = namespace.filter(|_| rt.namespaced) {
                    skeleton["metadata"]["namespace"] = json!(ns);
                }
                let merged =
                    server_side_apply(&rt, &skeleton, &applied, &manager, opts.force, false)
                        .map_err(conflict)?;
                let created = inner.create(&rt, namespace, merged, opts, Ownership::Decided)?;
                Ok(to_view(&rt, &created))
            }
            Some(old) => {
                let merged =
                    server_side_apply(&rt, &old, &applied, &manager, opts.force, opts.status)
                        .map_err(conflict)?;
                let mut body = merged;
                let applied_rv = meta_str(&applied, "resourceVersion");
                meta_mut(&mut body).insert(
                    "resourceVersion".into(),
                    json!(if applied_rv.is_empty() {
                        meta_str(&old, "resourceVersion").to_string()
                    } else {
                        applied_rv.to_string()
                    }),
                );
                let stored =
                    inner.update_from_body(&rt, &key, old, body, opts, Ownership::Decided)?;
                Ok(to_view(&rt, &stored))
            }
        }
    }

    /// Reads the `/scale` subresource (`autoscaling/v1` Scale).
    pub fn get_scale(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<Value, ApiError> {
        let rt = self.resource(gvr)?;
        let paths = rt.scale.clone().ok_or_else(ApiError::no_such_resource)?;
        let obj = self.get(gvr, namespace, name)?;
        Ok(crate::scale::to_scale(&rt, &paths, &obj))
    }

    /// Writes the `/scale` subresource: `change` edits the current Scale
    /// (a patch or a replacement); its `spec.replicas` is written to the object.
    pub fn update_scale(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        change: impl FnOnce(&mut Value) -> Result<(), ApiError>,
        opts: &WriteOptions,
    ) -> Result<Value, ApiError> {
        let mut inner = self.lock();
        let rt = inner.resource(gvr)?;
        let paths = rt.scale.clone().ok_or_else(ApiError::no_such_resource)?;
        let key = inner.key(&rt, namespace, name)?;
        let old = inner
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(&rt.group, &rt.plural, name))?;
        let mut scale = crate::scale::to_scale(&rt, &paths, &to_view(&rt, &old));
        change(&mut scale)?;
        let scale_rv = meta_str(&scale, "resourceVersion");
        if !scale_rv.is_empty() && scale_rv != meta_str(&old, "resourceVersion") {
            return Err(ApiError::stale(&rt.group, &rt.plural, name));
        }
        let replicas = scale
            .pointer("/spec/replicas")
            .and_then(Value::as_i64)
            .ok_or_else(|| {
                ApiError::invalid(
                    "autoscaling",
                    "Scale",
                    name,
                    &[("spec.replicas".into(), "Required value".into())],
                )
            })?;
        if replicas < 0 {
            return Err(ApiError::invalid(
                "autoscaling",
                "Scale",
                name,
                &[(
                    "spec.replicas".into(),
                    format!("Invalid value: {replicas}: must be greater than or equal to 0"),
                )],
            ));
        }
        let mut body = to_view(&rt, &old);
        crate::scale::set_replicas(&paths, &mut body, replicas);
        let stored = inner.update_from_body(
            &rt,
            &key,
            old,
            to_storage(&rt, &body),
            &WriteOptions {
                status: false,
                ..opts.clone()
            },
            Ownership::Track,
        )?;
        Ok(crate::scale::to_scale(&rt, &paths, &to_view(&rt, &stored)))
    }

    /// Deletes an object (finalizers, graceful pod termination and propagation honoured).
    pub fn delete(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        name: &str,
        opts: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let mut inner = self.lock();
        let rt = inner.resource(gvr)?;
        let key = inner.key(&rt, namespace, name)?;
        let out = inner.delete(&rt, &key, opts)?;
        Ok(match out {
            Deleted::Gone(v) => Deleted::Gone(to_view(&rt, &v)),
            Deleted::Pending(v) => Deleted::Pending(to_view(&rt, &v)),
        })
    }

    /// Deletes every object matching `opts` in a namespace (or cluster-wide); returns the deleted ones.
    pub fn delete_collection(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        list: &ListOptions,
        opts: &DeleteOptions,
    ) -> Result<Vec<Value>, ApiError> {
        let items = self
            .list(
                gvr,
                namespace,
                &ListOptions {
                    limit: None,
                    continue_token: None,
                    ..list.clone()
                },
            )?
            .items;
        let mut out = Vec::new();
        for item in items {
            let name = meta_str(&item, "name").to_string();
            let ns = meta_str(&item, "namespace").to_string();
            match self.delete(
                gvr,
                Some(ns.as_str()).filter(|n| !n.is_empty()),
                &name,
                opts,
            ) {
                Ok(Deleted::Gone(v)) | Ok(Deleted::Pending(v)) => out.push(v),
                Err(e) if e.code == 404 => {}
                Err(e) => return Err(e),
            }
        }
        Ok(out)
    }
}

impl Inner {
    fn type_of_storage(&self, storage: &str) -> Option<Arc<ResourceType>> {
        self.registry.all().find(|r| r.storage == storage).cloned()
    }

    fn resource(&self, gvr: &Gvr) -> Result<Arc<ResourceType>, ApiError> {
        self.registry
            .get(gvr)
            .ok_or_else(ApiError::no_such_resource)
    }

    fn key(
        &self,
        rt: &ResourceType,
        namespace: Option<&str>,
        name: &str,
    ) -> Result<ObjKey, ApiError> {
        let ns = if rt.namespaced {
            namespace
                .filter(|n| !n.is_empty())
                .ok_or_else(|| ApiError::bad_request("the namespace of the object must be set"))?
        } else {
            ""
        };
        Ok((rt.storage.clone(), ns.to_string(), name.to_string()))
    }

    /// The watch cache of `storage`. A built-in resource's cache starts with
    /// the store, so it holds every change since resourceVersion 0.
    fn watch_cache(&mut self, storage: &str) -> &mut WatchCache {
        self.watch_caches
            .entry(storage.to_string())
            .or_insert_with(|| WatchCache::new(0))
    }

    fn emit(&mut self, kind: EventType, storage: &str, object: Value, old: Option<Value>) {
        let change = Arc::new(Change {
            rv: self.rv,
            storage: storage.to_string(),
            kind,
            object,
            old,
        });
        self.watch_cache(storage).push(change);
    }
}
