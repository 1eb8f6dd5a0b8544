//! Writes: create (generated names, namespace checks, defaults), admission
//! (built-in validation, custom resource schemas, CRD establishment), and
//! update (optimistic concurrency, status subresource split, managedFields,
//! generation, no-op writes keeping the resourceVersion).

use std::sync::Arc;

use serde_json::{json, Value};

use super::meta::{
    finalizers, meta_mut, meta_str, new_uid, new_uid_seed, random_suffix, same_content,
    spec_changed, valid_name, valid_path_segment_name,
};
use super::watch_cache::WatchCache;
use super::{EventType, Inner, ObjKey, Ownership, WriteOptions};
use crate::apply;
use crate::clock;
use crate::defaults;
use crate::error::ApiError;
use crate::registry::{types_from_crd, ResourceType};

/// The storage key of `storage.k8s.io/v1` StorageClasses.
const STORAGE_CLASSES: &str = "storage.k8s.io/storageclasses";

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

    pub(super) fn create(
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
        let crd_types = self.admit(rt, &mut obj, None, opts)?;
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
            // A new CRD's kind gets a watch cache starting now, as its Cacher
            // starts from a list at the current resourceVersion.
            if let Some(cr) = types.first() {
                self.watch_caches
                    .insert(cr.storage.clone(), WatchCache::new(self.rv));
            }
            self.registry.register_crd(&name, types);
        }
        Ok(obj)
    }

    /// Admission: CRD validation and establishment, custom resource schemas,
    /// and the built-in kinds' validation with the admission plugins modelled
    /// (DefaultStorageClass, PersistentVolumeClaimResize).
    /// Returns the kinds a CRD serves when `obj` is one.
    fn admit(
        &self,
        rt: &ResourceType,
        obj: &mut Value,
        old: Option<&Value>,
        opts: &WriteOptions,
    ) -> Result<Option<Vec<Arc<ResourceType>>>, ApiError> {
        let strict_fields = opts.strict_fields;
        let name = meta_str(obj, "name").to_string();
        let claim = !rt.is_custom() && rt.kind == "PersistentVolumeClaim";
        if claim {
            if let Some(e) = crate::validation::persistent_volume_claim_quantity_error(obj) {
                return Err(ApiError::bad_request(format!(
                    "PersistentVolumeClaim in version \"{}\" cannot be handled as a PersistentVolumeClaim: {e}",
                    rt.version
                )));
            }
            if old.is_none() && !opts.status {
                self.default_storage_class(obj);
            }
        }
        if !rt.is_custom() {
            let causes = crate::validation::validate_builtin(&rt.kind, obj, old);
            if !causes.is_empty() {
                return Err(ApiError::invalid(&rt.group, &rt.kind, &name, &causes));
            }
        }
        if let (true, Some(old), false) = (claim, old, opts.status) {
            self.admit_claim_resize(rt, obj, old)?;
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

    /// The StorageClasses marked default (`storageclass.kubernetes.io/is-default-class`
    /// or its beta key `"true"`), newest first, then by name, as
    /// kubernetes/kubernetes `pkg/volume/util/storageclass.go` `GetDefaultClass`
    /// sorts them.
    fn default_storage_class_name(&self) -> Option<String> {
        let mut defaults: Vec<(&str, &str)> = self
            .objects
            .iter()
            .filter(|((storage, _, _), _)| storage == STORAGE_CLASSES)
            .filter(|(_, class)| {
                [
                    "storageclass.kubernetes.io/is-default-class",
                    "storageclass.beta.kubernetes.io/is-default-class",
                ]
                .iter()
                .any(|key| {
                    class
                        .pointer("/metadata/annotations")
                        .and_then(|a| a.get(*key))
                        .and_then(Value::as_str)
                        == Some("true")
                })
            })
            .map(|((_, _, name), class)| (meta_str(class, "creationTimestamp"), name.as_str()))
            .collect();
        defaults.sort_by(|a, b| b.0.cmp(a.0).then_with(|| a.1.cmp(b.1)));
        defaults.first().map(|(_, name)| name.to_string())
    }

    /// The DefaultStorageClass admission plugin (kubernetes/kubernetes
    /// `plugin/pkg/admission/storage/storageclass/setdefault/admission.go`
    /// `claimDefaulterPlugin.Admit`, on create only): a claim that names no class
    /// (no `spec.storageClassName`, not even `""`, and no beta annotation) gets
    /// the default class, if there is one.
    fn default_storage_class(&self, claim: &mut Value) {
        let has_class = claim
            .pointer("/spec/storageClassName")
            .is_some_and(|c| !c.is_null())
            || claim
                .pointer("/metadata/annotations")
                .and_then(|a| a.get(crate::validation::BETA_STORAGE_CLASS_ANNOTATION))
                .is_some();
        if has_class {
            return;
        }
        if let (Some(class), Some(spec)) = (
            self.default_storage_class_name(),
            claim.get_mut("spec").and_then(Value::as_object_mut),
        ) {
            spec.insert("storageClassName".into(), json!(class));
        }
    }

    /// The PersistentVolumeClaimResize admission plugin (kubernetes/kubernetes
    /// `plugin/pkg/admission/storage/persistentvolume/resize/admission.go`
    /// `persistentVolumeClaimResize.Validate` and `allowResize`), on the main
    /// resource only: a larger `spec.resources.requests.storage` needs a bound
    /// claim whose class (the beta annotation, else `spec.storageClassName`) is
    /// unchanged, exists and has `allowVolumeExpansion: true`. Refusals are 403s.
    fn admit_claim_resize(
        &self,
        rt: &ResourceType,
        new: &Value,
        old: &Value,
    ) -> Result<(), ApiError> {
        use crate::validation::{quantity_at, BETA_STORAGE_CLASS_ANNOTATION};
        let zero = crd_admission::quantity::Quantity::from_i64(0);
        let size = |v: &Value| {
            quantity_at(v, "/spec/resources/requests/storage").unwrap_or_else(|| zero.clone())
        };
        if size(new) <= size(old) {
            return Ok(());
        }
        let name = meta_str(new, "name");
        let refuse = |why: &str| {
            Err(ApiError::forbidden_resource(
                &rt.group, &rt.plural, name, why,
            ))
        };
        if old.pointer("/status/phase").and_then(Value::as_str) != Some("Bound") {
            return refuse("Only bound persistent volume claims can be expanded");
        }
        let class = |v: &Value| -> String {
            v.pointer("/metadata/annotations")
                .and_then(|a| a.get(BETA_STORAGE_CLASS_ANNOTATION))
                .or_else(|| v.pointer("/spec/storageClassName"))
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string()
        };
        let (new_class, old_class) = (class(new), class(old));
        let allowed = !new_class.is_empty()
            && new_class == old_class
            && self
                .objects
                .get(&(STORAGE_CLASSES.to_string(), String::new(), new_class))
                .and_then(|sc| sc.get("allowVolumeExpansion"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
        if !allowed {
            return refuse("only dynamically provisioned pvc can be resized and the storageclass that provisions the pvc must support resize");
        }
        Ok(())
    }

    pub(super) fn update_from_body(
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

    pub(super) fn commit_update(
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
        let crd_types = self.admit(rt, &mut new, Some(&old), opts)?;
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
}
