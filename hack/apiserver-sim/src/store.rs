//! The object store: one global integer resourceVersion, create/update/patch/
//! apply/delete with kube-apiserver's storage semantics (no-op writes keep the
//! resourceVersion, generation, status subresource split, finalizers,
//! ownerReference garbage collection, namespace termination, CRD registration),
//! a bounded change history, and subscriptions. HTTP handlers and in-process
//! controllers use the same [`Store`] methods.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::{json, Map, Value};
use tokio::sync::broadcast;

use crate::apply::{self, server_side_apply};
use crate::clock;
use crate::conversion::{to_storage, to_view};
use crate::defaults;
use crate::error::ApiError;
use crate::patch::{apply_patch, PatchType};
use crate::registry::{types_from_crd, Gvr, Registry, ResourceType};
use crate::selectors::{FieldSelector, LabelSelector};

/// Storage key of CustomResourceDefinitions.
const CRD_STORAGE: &str = "apiextensions.k8s.io/customresourcedefinitions";

/// How many changes the store remembers for watch replay.
pub const HISTORY_LEN: usize = 1000;

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

impl Change {
    fn namespace(&self) -> &str {
        self.object
            .pointer("/metadata/namespace")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }
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
    registry: Registry,
    history: VecDeque<Arc<Change>>,
    /// Highest resourceVersion no longer in `history`.
    evicted_through: u64,
    sender: broadcast::Sender<Arc<Change>>,
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

fn meta_str<'a>(obj: &'a Value, field: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(field))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

/// `metadata` of an object, created (and the object made an object) if missing.
fn meta_mut(obj: &mut Value) -> &mut Map<String, Value> {
    if !obj.is_object() {
        *obj = json!({});
    }
    let Value::Object(o) = obj else {
        unreachable!("made an object above")
    };
    let meta = o.entry("metadata").or_insert_with(|| json!({}));
    if !meta.is_object() {
        *meta = json!({});
    }
    match meta {
        Value::Object(m) => m,
        _ => unreachable!("made an object above"),
    }
}

fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

fn random_suffix(n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = new_uid_seed();
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ALPHABET[(x % ALPHABET.len() as u64) as usize] as char
        })
        .collect()
}

fn new_uid_seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let c = COUNTER.fetch_add(1, Ordering::Relaxed);
    let mut x = t ^ c.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ 0x2545_F491_4F6C_DD1D;
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x | 1
}

fn new_uid() -> String {
    let (a, b) = (new_uid_seed(), new_uid_seed());
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0xfff,
        0x8000 | ((b >> 48) & 0x3fff),
        b & 0xffff_ffff_ffff
    )
}

fn valid_name(name: &str, label: bool) -> Result<(), String> {
    let max = if label { 63 } else { 253 };
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (!label && c == '.'));
    let ends_ok = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if !name.is_empty() && name.len() <= max && ok_chars && ends_ok {
        return Ok(());
    }
    Err(if label {
        format!("Invalid value: \"{name}\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character")
    } else {
        format!("Invalid value: \"{name}\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character")
    })
}

fn valid_path_segment_name(name: &str) -> Result<(), String> {
    if name == "." || name == ".." {
        return Err(format!("Invalid value: \"{name}\": may not be '{name}'"));
    }
    for bad in ["/", "%"] {
        if name.contains(bad) {
            return Err(format!(
                "Invalid value: \"{name}\": may not contain '{bad}'"
            ));
        }
    }
    Ok(())
}

/// Whether two stored objects differ in anything but managedFields timestamps and resourceVersion.
fn same_content(a: &Value, b: &Value) -> bool {
    fn normalized(v: &Value) -> Value {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            if let Some(Value::Array(mf)) = meta.get_mut("managedFields") {
                for e in mf {
                    if let Some(e) = e.as_object_mut() {
                        e.remove("time");
                    }
                }
            }
        }
        v
    }
    normalized(a) == normalized(b)
}

/// Whether the change from `old` to `new` bumps metadata.generation.
fn spec_changed(rt: &ResourceType, old: &Value, new: &Value) -> bool {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(o) = v.as_object_mut() {
            o.remove("metadata");
            if rt.status_subresource || !rt.is_custom() {
                o.remove("status");
            }
        }
        v
    };
    strip(old) != strip(new)
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
        let (sender, _) = broadcast::channel(4096);
        let store = Store {
            inner: Arc::new(Mutex::new(Inner {
                rv: 0,
                objects: BTreeMap::new(),
                by_uid: HashMap::new(),
                registry: Registry::new(),
                history: VecDeque::new(),
                evicted_through: 0,
                sender,
            })),
        };
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

    /// Subscribes to changes of a resource (optionally one namespace) after
    /// resourceVersion `from` (`None`: from now on). 410 Expired if `from` is
    /// older than the history.
    pub fn subscribe(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
        from: Option<u64>,
    ) -> Result<Subscription, ApiError> {
        let inner = self.lock();
        let rt = inner.resource(gvr)?;
        let from = from.unwrap_or(inner.rv);
        if from < inner.evicted_through {
            return Err(ApiError::expired(format!(
                "too old resource version: {from} ({})",
                inner.evicted_through + 1
            )));
        }
        let pending = inner
            .history
            .iter()
            .filter(|c| c.rv > from)
            .cloned()
            .collect();
        Ok(Subscription {
            rt,
            namespace: namespace.map(String::from),
            pending,
            receiver: inner.sender.subscribe(),
            last_rv: from,
            seen_rv: from,
        })
    }

    /// Lists and subscribes atomically: the current objects (served form) and a
    /// subscription to every later change.
    pub fn list_and_subscribe(
        &self,
        gvr: &Gvr,
        namespace: Option<&str>,
    ) -> Result<(Vec<Value>, u64, Subscription), ApiError> {
        let inner = self.lock();
        let rt = inner.resource(gvr)?;
        let ns_filter = if rt.namespaced { namespace } else { None };
        let items = inner
            .objects
            .iter()
            .filter(|((s, ns, _), _)| *s == rt.storage && ns_filter.is_none_or(|n| n == ns))
            .map(|(_, o)| to_view(&rt, o))
            .collect();
        let sub = Subscription {
            rt,
            namespace: ns_filter.map(String::from),
            pending: VecDeque::new(),
            receiver: inner.sender.subscribe(),
            last_rv: inner.rv,
            seen_rv: inner.rv,
        };
        Ok((items, inner.rv, sub))
    }
}

/// A stream of changes to one resource, in served form.
pub struct Subscription {
    rt: Arc<ResourceType>,
    namespace: Option<String>,
    pending: VecDeque<Arc<Change>>,
    receiver: broadcast::Receiver<Arc<Change>>,
    last_rv: u64,
    seen_rv: u64,
}

/// A change as a watcher sees it.
#[derive(Debug, Clone)]
pub struct WatchEvent {
    /// ADDED / MODIFIED / DELETED.
    pub kind: EventType,
    /// The object (served form).
    pub object: Value,
    /// The object before the change (served form), if any.
    pub old: Option<Value>,
    /// resourceVersion of the change.
    pub rv: u64,
}

impl Subscription {
    /// The resource this subscription follows.
    pub fn resource(&self) -> &Arc<ResourceType> {
        &self.rt
    }

    /// The resourceVersion of the last event delivered (or the start point).
    pub fn last_resource_version(&self) -> u64 {
        self.last_rv
    }

    /// The resourceVersion up to which every change has been seen (for bookmarks).
    pub fn progress_rv(&self) -> u64 {
        self.seen_rv.max(self.last_rv)
    }

    /// Whether a change ends this subscription: the deletion of the CRD serving its kind.
    fn ended_by(&self, c: &Change) -> bool {
        c.kind == EventType::Deleted
            && c.storage == CRD_STORAGE
            && c.rv > self.last_rv
            && self.rt.crd.as_deref().is_some_and(|crd| {
                c.object.pointer("/metadata/name").and_then(Value::as_str) == Some(crd)
            })
    }

    fn accept(&mut self, c: &Arc<Change>) -> Option<WatchEvent> {
        self.seen_rv = self.seen_rv.max(c.rv);
        if c.rv <= self.last_rv || c.storage != self.rt.storage {
            return None;
        }
        if self.rt.namespaced
            && self
                .namespace
                .as_deref()
                .is_some_and(|n| n != c.namespace())
        {
            return None;
        }
        self.last_rv = c.rv;
        Some(WatchEvent {
            kind: c.kind,
            object: to_view(&self.rt, &c.object),
            old: c.old.as_ref().map(|o| to_view(&self.rt, o)),
            rv: c.rv,
        })
    }

    /// The next change. `Err(410 Expired)` if this subscriber fell too far
    /// behind; `Ok(None)` when the store is gone.
    pub async fn next(&mut self) -> Result<Option<WatchEvent>, ApiError> {
        while let Some(c) = self.pending.pop_front() {
            if self.ended_by(&c) {
                return Ok(None);
            }
            if let Some(e) = self.accept(&c) {
                return Ok(Some(e));
            }
        }
        loop {
            match self.receiver.recv().await {
                Ok(c) => {
                    if self.ended_by(&c) {
                        return Ok(None);
                    }
                    if let Some(e) = self.accept(&c) {
                        return Ok(Some(e));
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    return Err(ApiError::expired("the watch fell behind the event history"));
                }
                Err(broadcast::error::RecvError::Closed) => return Ok(None),
            }
        }
    }
}

impl Inner {
    /// Cluster IP and node-port allocation for core Services.
    fn allocate_service(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        old: Option<&Value>,
    ) -> Result<(), ApiError> {
        if rt.storage != "/services" {
            return Ok(());
        }
        let me = (
            meta_str(obj, "namespace").to_string(),
            meta_str(obj, "name").to_string(),
        );
        let others: Vec<&Value> = self
            .objects
            .iter()
            .filter(|((s, ns, name), _)| {
                s == "/services" && (ns.as_str(), name.as_str()) != (me.0.as_str(), me.1.as_str())
            })
            .map(|(_, o)| o)
            .collect();
        crate::services::allocate(obj, old, &others, new_uid_seed())
    }

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

    fn emit(&mut self, kind: EventType, storage: &str, object: Value, old: Option<Value>) {
        let change = Arc::new(Change {
            rv: self.rv,
            storage: storage.to_string(),
            kind,
            object,
            old,
        });
        self.history.push_back(change.clone());
        while self.history.len() > HISTORY_LEN {
            if let Some(c) = self.history.pop_front() {
                self.evicted_through = c.rv;
            }
        }
        let _ = self.sender.send(change);
    }

    fn create(
        &mut self,
        rt: &Arc<ResourceType>,
        namespace: Option<&str>,
        mut obj: Value,
        opts: &WriteOptions,
        ownership: Ownership,
    ) -> Result<Value, ApiError> {
        if !obj.is_object() {
            return Err(ApiError::bad_request("the request body must be an object"));
        }
        let body_ns = meta_str(&obj, "namespace").to_string();
        let ns = if rt.namespaced {
            let ns = namespace
                .map(String::from)
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| body_ns.clone());
            if ns.is_empty() {
                return Err(ApiError::bad_request(
                    "the namespace of the object must be set",
                ));
            }
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            ns
        } else {
            String::new()
        };
        let mut name = meta_str(&obj, "name").to_string();
        if name.is_empty() {
            let prefix = meta_str(&obj, "generateName").to_string();
            if prefix.is_empty() {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    "",
                    &[(
                        "metadata.name".into(),
                        "Required value: name or generateName is required".into(),
                    )],
                ));
            }
            name = format!("{prefix}{}", random_suffix(5));
        }
        let label_names = matches!(rt.kind.as_str(), "Namespace" | "Service");
        // RBAC objects' names are path segments (`system:discovery`), as
        // `ValidateRBACName` (`path.IsValidPathSegmentName`) checks them.
        let checked = if rt.group == "rbac.authorization.k8s.io" && !rt.is_custom() {
            valid_path_segment_name(&name)
        } else {
            valid_name(&name, label_names)
        };
        if let Err(m) = checked {
            return Err(ApiError::invalid(
                &rt.group,
                &rt.kind,
                &name,
                &[("metadata.name".into(), m)],
            ));
        }
        if rt.namespaced {
            match self.objects.get(&("/namespaces".to_string(), String::new(), ns.clone())) {
                None => return Err(ApiError::not_found("", "namespaces", &ns)),
                Some(n) if !meta_str(n, "deletionTimestamp").is_empty() => {
                    return Err(ApiError::forbidden(format!(
                        "{} \"{name}\" is forbidden: unable to create new content in namespace {ns} because it is being terminated",
                        crate::error::qualified(&rt.group, &rt.plural)
                    )))
                }
                Some(_) => {}
            }
        }
        let key = (rt.storage.clone(), ns.clone(), name.clone());
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(&rt.group, &rt.plural, &name));
        }
        let meta = meta_mut(&mut obj);
        meta.insert("name".into(), json!(name));
        if rt.namespaced {
            meta.insert("namespace".into(), json!(ns));
        } else {
            meta.remove("namespace");
        }
        for f in [
            "uid",
            "resourceVersion",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            meta.remove(f);
        }
        meta.insert("uid".into(), json!(new_uid()));
        meta.insert("creationTimestamp".into(), json!(clock::now_rfc3339()));
        meta.remove("generation");
        if rt.tracks_generation() {
            meta.insert("generation".into(), json!(1));
        }
        if ownership == Ownership::Track {
            meta.remove("managedFields");
        }
        if rt.status_subresource {
            if let Some(o) = obj.as_object_mut() {
                o.remove("status");
                if let Some(s) = defaults::initial_status(&rt.kind) {
                    o.insert("status".into(), s);
                }
            }
        }
        if !rt.is_custom() {
            defaults::apply_defaults(&rt.kind, &mut obj);
        }
        self.allocate_service(rt, &mut obj, None)?;
        let crd_types = self.admit(rt, &mut obj, None, opts.strict_fields)?;
        if ownership == Ownership::Track {
            apply::track_update(rt, None, &mut obj, &opts.manager_name(), false);
        }
        if opts.dry_run {
            return Ok(obj);
        }
        self.rv += 1;
        meta_mut(&mut obj).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.by_uid
            .insert(meta_str(&obj, "uid").to_string(), key.clone());
        self.objects.insert(key, obj.clone());
        self.emit(EventType::Added, &rt.storage, obj.clone(), None);
        if let Some(types) = crd_types {
            self.registry.register_crd(&name, types);
        }
        Ok(obj)
    }

    /// Admission: CRD validation and establishment, custom resource schemas.
    /// Returns the kinds a CRD serves when `obj` is one.
    fn admit(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        old: Option<&Value>,
        strict_fields: bool,
    ) -> Result<Option<Vec<Arc<ResourceType>>>, ApiError> {
        let name = meta_str(obj, "name").to_string();
        if !rt.is_custom() {
            let causes = crate::validation::validate_builtin(&rt.kind, obj, old);
            if !causes.is_empty() {
                return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &causes));
            }
        }
        if let Some(adm) = &rt.admission {
            let unknown = adm.admit(&rt.kind, &rt.group, &name, obj, old)?;
            if strict_fields && !unknown.is_empty() {
                let fields: Vec<String> = unknown
                    .iter()
                    .map(|f| format!("unknown field \"{f}\""))
                    .collect();
                return Err(ApiError::bad_request(format!(
                    "{kind} in version \"{}\" cannot be handled as a {kind}: strict decoding error: {}",
                    rt.version,
                    fields.join(", "),
                    kind = rt.kind
                )));
            }
        }
        if rt.kind == "CustomResourceDefinition" && rt.group == "apiextensions.k8s.io" {
            let types = types_from_crd(obj)
                .map_err(|errs| ApiError::invalid(&rt.group, &rt.kind, &name, &errs))?;
            let names = obj.pointer("/spec/names").cloned().unwrap_or(json!({}));
            let stored: Vec<Value> = obj
                .pointer("/spec/versions")
                .and_then(Value::as_array)
                .map(|vs| {
                    vs.iter()
                        .filter(|v| v["storage"] == json!(true))
                        .map(|v| v["name"].clone())
                        .collect()
                })
                .unwrap_or_default();
            let now = clock::now_rfc3339();
            let old_status = old.and_then(|o| o.get("status")).cloned();
            let status = match old_status {
                Some(s) if s.get("acceptedNames") == Some(&names) => s,
                _ => json!({
                    "acceptedNames": names,
                    "conditions": [
                        {"type": "NamesAccepted", "status": "True", "reason": "NoConflicts", "message": "no conflicts found", "lastTransitionTime": now},
                        {"type": "Established", "status": "True", "reason": "InitialNamesAccepted", "message": "the initial names have been accepted", "lastTransitionTime": now}
                    ],
                    "storedVersions": stored,
                }),
            };
            if let Some(o) = obj.as_object_mut() {
                o.insert("status".into(), status);
            }
            return Ok(Some(types));
        }
        Ok(None)
    }

    fn update_from_body(
        &mut self,
        rt: &Arc<ResourceType>,
        key: &ObjKey,
        old: Value,
        body: Value,
        opts: &WriteOptions,
        ownership: Ownership,
    ) -> Result<Value, ApiError> {
        let name = key.2.clone();
        if !body.is_object() {
            return Err(ApiError::bad_request("the request body must be an object"));
        }
        let body_rv = meta_str(&body, "resourceVersion");
        if !body_rv.is_empty() && body_rv != meta_str(&old, "resourceVersion") {
            return Err(ApiError::stale(&rt.group, &rt.plural, &name));
        }
        let body_ns = meta_str(&body, "namespace");
        if rt.namespaced && !body_ns.is_empty() && body_ns != key.1 {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let old_managed = old
            .pointer("/metadata/managedFields")
            .cloned()
            .unwrap_or(json!([]));
        let explicit_managed = match body.pointer("/metadata/managedFields") {
            Some(Value::Array(a))
                if ownership == Ownership::Track
                    && !a.is_empty()
                    && Value::Array(a.clone()) != old_managed =>
            {
                Some(a.clone())
            }
            _ => None,
        };
        let mut new = if opts.status {
            let mut n = old.clone();
            if let Some(o) = n.as_object_mut() {
                match body.get("status") {
                    Some(s) => o.insert("status".into(), s.clone()),
                    None => o.remove("status"),
                };
            }
            if ownership == Ownership::Decided {
                if let Some(mf) = body.pointer("/metadata/managedFields") {
                    meta_mut(&mut n).insert("managedFields".into(), mf.clone());
                }
            }
            n
        } else {
            let mut n = body;
            let old_meta = old
                .get("metadata")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            let meta = meta_mut(&mut n);
            for f in [
                "name",
                "namespace",
                "uid",
                "creationTimestamp",
                "generation",
                "deletionTimestamp",
                "deletionGracePeriodSeconds",
            ] {
                match old_meta.get(f) {
                    Some(v) => meta.insert(f.into(), v.clone()),
                    None => meta.remove(f),
                };
            }
            if ownership == Ownership::Track {
                match old_meta.get("managedFields") {
                    Some(v) => meta.insert("managedFields".into(), v.clone()),
                    None => meta.remove("managedFields"),
                };
            }
            if rt.status_subresource {
                if let Some(o) = n.as_object_mut() {
                    match old.get("status") {
                        Some(s) => o.insert("status".into(), s.clone()),
                        None => o.remove("status"),
                    };
                }
            }
            n
        };
        meta_mut(&mut new).insert(
            "resourceVersion".into(),
            json!(meta_str(&old, "resourceVersion")),
        );
        let ownership = match explicit_managed {
            // A client replacing managedFields (kubectl's client-side → server-side apply
            // migration; `[{}]` clears them) is taken at its word.
            Some(entries) => {
                let entries: Vec<Value> = entries
                    .into_iter()
                    .filter(|e| e.as_object().is_some_and(|o| !o.is_empty()))
                    .collect();
                let meta = meta_mut(&mut new);
                if entries.is_empty() {
                    meta.remove("managedFields");
                } else {
                    meta.insert("managedFields".into(), Value::Array(entries));
                }
                Ownership::Decided
            }
            None => ownership,
        };
        if !rt.is_custom() {
            defaults::apply_defaults(&rt.kind, &mut new);
        }
        self.commit_update(rt, key, old, new, opts, ownership)
    }

    fn commit_update(
        &mut self,
        rt: &Arc<ResourceType>,
        key: &ObjKey,
        old: Value,
        mut new: Value,
        opts: &WriteOptions,
        ownership: Ownership,
    ) -> Result<Value, ApiError> {
        let name = key.2.clone();
        let deleting = !meta_str(&old, "deletionTimestamp").is_empty();
        if deleting {
            let before = finalizers(&old);
            if finalizers(&new).iter().any(|f| !before.contains(f)) {
                return Err(ApiError::invalid(
                    &rt.group,
                    &rt.kind,
                    &name,
                    &[(
                        "metadata.finalizers".into(),
                        "Forbidden: no new finalizers can be added if the object is being deleted"
                            .into(),
                    )],
                ));
            }
        }
        self.allocate_service(rt, &mut new, Some(&old))?;
        let crd_types = self.admit(rt, &mut new, Some(&old), opts.strict_fields)?;
        if ownership == Ownership::Track {
            apply::track_update(rt, Some(&old), &mut new, &opts.manager_name(), opts.status);
        }
        if rt.tracks_generation() && spec_changed(rt, &old, &new) {
            let gen = old
                .pointer("/metadata/generation")
                .and_then(Value::as_i64)
                .unwrap_or(1);
            meta_mut(&mut new).insert("generation".into(), json!(gen + 1));
        }
        if same_content(&old, &new) {
            return Ok(old);
        }
        if opts.dry_run {
            return Ok(new);
        }
        if deleting && finalizers(&new).is_empty() {
            self.objects.insert(key.clone(), new);
            return match self.remove(key) {
                Some(gone) => Ok(gone),
                None => Err(ApiError::internal("object vanished during update")),
            };
        }
        self.rv += 1;
        meta_mut(&mut new).insert("resourceVersion".into(), json!(self.rv.to_string()));
        self.objects.insert(key.clone(), new.clone());
        self.emit(EventType::Modified, &rt.storage, new.clone(), Some(old));
        if let Some(types) = crd_types {
            self.registry.register_crd(&name, types);
        }
        Ok(new)
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

    fn delete(
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
            Propagation::Orphan => self.orphan_dependents(&uid),
            Propagation::Foreground if self.has_dependents(&uid) => {
                let pending = self.set_deleting(key, 0, Some("foregroundDeletion"));
                self.delete_dependents(&uid);
                self.finish_foreground(&uid);
                return Ok(match self.objects.get(key) {
                    Some(_) => Deleted::Pending(pending),
                    None => Deleted::Gone(pending),
                });
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
    fn remove(&mut self, key: &ObjKey) -> Option<Value> {
        if key.0 == CRD_STORAGE {
            // A CRD's objects go first (their watchers see them deleted), then the CRD.
            let storage = self.objects.get(key).and_then(|crd| {
                let group = crd.pointer("/spec/group").and_then(Value::as_str)?;
                let plural = crd.pointer("/spec/names/plural").and_then(Value::as_str)?;
                Some(format!("{group}/{plural}"))
            });
            if let Some(storage) = storage {
                let crs: Vec<ObjKey> = self
                    .objects
                    .keys()
                    .filter(|k| k.0 == storage)
                    .cloned()
                    .collect();
                for k in crs {
                    self.remove(&k);
                }
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

fn owner_uids(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|refs| {
            refs.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default()
}
