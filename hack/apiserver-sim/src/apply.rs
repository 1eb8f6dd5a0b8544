//! Server-side apply and field ownership: `metadata.managedFields` bookkeeping
//! for every write (managers of `Update` operations own what they changed) and
//! the apply algorithm (conflicts, `force`, removal of fields a manager stopped
//! applying when nobody else owns them).

use serde_json::{json, Value};

use crate::clock;
use crate::fieldset::{self, FieldPath, FieldSet, Scope};
use crate::patch::{merge_structural, Mode};
use crate::registry::ResourceType;

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct ManagedEntry {
    /// Field manager name.
    pub manager: String,
    /// `Apply` or `Update`.
    pub operation: String,
    /// apiVersion the manager used.
    pub api_version: String,
    /// Last time the entry changed.
    pub time: String,
    /// `""` or `status`.
    pub subresource: String,
    /// Owned fields.
    pub fields: FieldSet,
}

impl ManagedEntry {
    fn same_owner(&self, manager: &str, operation: &str, subresource: &str) -> bool {
        self.manager == manager && self.operation == operation && self.subresource == subresource
    }
}

/// Reads `metadata.managedFields`.
pub fn read_managed(obj: &Value) -> Vec<ManagedEntry> {
    let Some(list) = obj
        .pointer("/metadata/managedFields")
        .and_then(Value::as_array)
    else {
        return vec![];
    };
    list.iter()
        .map(|e| {
            let s = |k: &str| {
                e.get(k)
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string()
            };
            ManagedEntry {
                manager: s("manager"),
                operation: s("operation"),
                api_version: s("apiVersion"),
                time: s("time"),
                subresource: s("subresource"),
                fields: e
                    .get("fieldsV1")
                    .map(fieldset::from_fields_v1)
                    .unwrap_or_default(),
            }
        })
        .collect()
}

/// Writes `metadata.managedFields` (removing it when empty).
pub fn write_managed(obj: &mut Value, entries: &[ManagedEntry]) {
    let list: Vec<Value> = entries
        .iter()
        .filter(|e| !e.fields.is_empty())
        .map(|e| {
            let mut v = json!({
                "manager": e.manager,
                "operation": e.operation,
                "apiVersion": e.api_version,
                "time": e.time,
                "fieldsType": "FieldsV1",
                "fieldsV1": fieldset::to_fields_v1(&e.fields),
            });
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    if let Some(meta) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        if list.is_empty() {
            meta.remove("managedFields");
        } else {
            meta.insert("managedFields".into(), Value::Array(list));
        }
    }
}

/// The field scope of a write to `rt` (main resource or `status`).
pub fn scope_for(rt: &ResourceType, status: bool) -> Scope {
    if status {
        Scope::Status
    } else {
        Scope::Main {
            exclude_status: rt.status_subresource,
        }
    }
}

fn scope_matches(entry: &ManagedEntry, status: bool) -> bool {
    (entry.subresource == "status") == status
}

fn is_leaf(set: &FieldSet, p: &FieldPath) -> bool {
    !set.range(p.clone()..)
        .nth(1)
        .is_some_and(|q| q.starts_with(p))
}

/// Ownership after a non-apply write by `manager`: it takes the fields whose
/// values it changed; fields that disappeared are dropped from every manager.
pub fn track_update(
    rt: &ResourceType,
    old: Option<&Value>,
    new: &mut Value,
    manager: &str,
    status: bool,
) {
    let scope = scope_for(rt, status);
    let new_set = fieldset::fields_of(rt, new, scope);
    let (mut entries, old_set) = match old {
        Some(o) => (read_managed(o), fieldset::fields_of(rt, o, scope)),
        None => (vec![], FieldSet::new()),
    };
    let changed: FieldSet = new_set
        .iter()
        .filter(|p| match old {
            Some(o) => {
                !old_set.contains(*p)
                    || (is_leaf(&new_set, p) && fieldset::get(o, p) != fieldset::get(new, p))
            }
            None => true,
        })
        .cloned()
        .collect();
    let removed: FieldSet = old_set.difference(&new_set).cloned().collect();
    let subresource = if status { "status" } else { "" };
    for e in entries.iter_mut() {
        if !scope_matches(e, status) {
            continue;
        }
        e.fields.retain(|p| !removed.contains(p));
        if !e.same_owner(manager, "Update", subresource) {
            e.fields.retain(|p| !changed.contains(p));
        }
    }
    if !changed.is_empty() {
        match entries
            .iter_mut()
            .find(|e| e.same_owner(manager, "Update", subresource))
        {
            Some(e) => {
                e.fields.extend(changed);
                e.time = clock::now_rfc3339();
                e.api_version = rt.api_version();
            }
            None => entries.push(ManagedEntry {
                manager: manager.to_string(),
                operation: "Update".into(),
                api_version: rt.api_version(),
                time: clock::now_rfc3339(),
                subresource: subresource.into(),
                fields: changed,
            }),
        }
    }
    write_managed(new, &entries);
}

/// The outcome of an apply that found conflicts: `(manager, field)` pairs.
pub type Conflicts = Vec<(String, String)>;

/// Server-side apply of `applied` by `manager` over `live` (an empty object when
/// creating). Returns the new object with its managedFields, or the conflicts.
pub fn server_side_apply(
    rt: &ResourceType,
    live: &Value,
    applied: &Value,
    manager: &str,
    force: bool,
    status: bool,
) -> Result<Value, Conflicts> {
    let scope = scope_for(rt, status);
    let subresource = if status { "status" } else { "" };
    let applied_set = fieldset::fields_of(rt, applied, scope);
    let mut entries = read_managed(live);

    let mut conflicts = Conflicts::new();
    for e in entries.iter_mut() {
        if !scope_matches(e, status) || e.same_owner(manager, "Apply", subresource) {
            continue;
        }
        let clashing: Vec<FieldPath> = e
            .fields
            .intersection(&applied_set)
            .filter(|p| {
                is_leaf(&applied_set, p) && fieldset::get(live, p) != fieldset::get(applied, p)
            })
            .cloned()
            .collect();
        if force {
            e.fields.retain(|p| !clashing.contains(p));
        } else {
            conflicts.extend(
                clashing
                    .iter()
                    .map(|p| (e.manager.clone(), fieldset::display(p))),
            );
        }
    }
    if !conflicts.is_empty() {
        return Err(conflicts);
    }

    let previous: FieldSet = entries
        .iter()
        .find(|e| e.same_owner(manager, "Apply", subresource))
        .map(|e| e.fields.clone())
        .unwrap_or_default();
    let mut merged = live.clone();
    let mut scoped = applied.clone();
    if let Some(o) = scoped.as_object_mut() {
        o.remove("apiVersion");
        o.remove("kind");
        if let Some(meta) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("managedFields");
            meta.remove("resourceVersion");
        }
        match scope {
            Scope::Status => o.retain(|k, _| k == "status"),
            Scope::Main {
                exclude_status: true,
            } => {
                o.remove("status");
            }
            Scope::Main {
                exclude_status: false,
            } => {}
        }
    }
    merge_structural(rt, &mut merged, &scoped, &mut Vec::new(), Mode::Apply);

    let others_own = |p: &FieldPath| {
        entries.iter().any(|e| {
            !e.same_owner(manager, "Apply", subresource)
                && e.fields.iter().any(|q| q.starts_with(p))
        })
    };
    let mut stale: Vec<&FieldPath> = previous
        .difference(&applied_set)
        .filter(|p| !others_own(p))
        .collect();
    // Outermost first: an associative list's item goes whole (removing its
    // key field first would leave the rest of it behind, keyless), and what
    // lies under a removed path goes with it.
    stale.sort_by_key(|p| p.len());
    let mut removed: Vec<&FieldPath> = Vec::new();
    for p in stale {
        let gone = removed.iter().any(|r| p.starts_with(r));
        if !gone && !applied_set.iter().any(|q| q.starts_with(p)) {
            fieldset::remove(&mut merged, p);
            removed.push(p);
        }
    }

    match entries
        .iter_mut()
        .find(|e| e.same_owner(manager, "Apply", subresource))
    {
        Some(e) => {
            if e.fields != applied_set {
                e.time = clock::now_rfc3339();
            }
            e.fields = applied_set;
            e.api_version = rt.api_version();
        }
        None => entries.push(ManagedEntry {
            manager: manager.to_string(),
            operation: "Apply".into(),
            api_version: rt.api_version(),
            time: clock::now_rfc3339(),
            subresource: subresource.into(),
            fields: applied_set,
        }),
    }
    write_managed(&mut merged, &entries);
    Ok(merged)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Gvr, Registry};
    use serde_json::json;

    fn cm_type() -> std::sync::Arc<ResourceType> {
        Registry::new().get(&Gvr::core("configmaps")).unwrap()
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": data})
    }

    #[test]
    fn apply_records_ownership_and_removes_fields_no_longer_applied() {
        let rt = cm_type();
        let live = json!({"metadata": {"name": "c"}});
        let v1 = server_side_apply(
            &rt,
            &live,
            &cm(json!({"a": "1", "b": "2"})),
            "m1",
            false,
            false,
        )
        .unwrap();
        assert_eq!(v1["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(
            v1["metadata"]["managedFields"][0]["fieldsV1"],
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        let v2 = server_side_apply(&rt, &v1, &cm(json!({"a": "1"})), "m1", false, false).unwrap();
        assert_eq!(v2["data"], json!({"a": "1"}));
    }

    /// structured-merge-diff removes an associative list's item that no
    /// manager owns any more as a whole: its key fields and the others.
    #[test]
    fn an_item_no_longer_applied_leaves_its_list_whole() {
        let rt = Registry::new().get(&Gvr::core("pods")).unwrap();
        let pod = |mounts: Value| {
            json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                   "spec": {"containers": [{"name": "c", "image": "i", "volumeMounts": mounts}]}})
        };
        let live = json!({"metadata": {"name": "p"}});
        let both = json!([
            {"name": "data", "mountPath": "/data"},
            {"name": "tls", "mountPath": "/etc/tls", "readOnly": true},
        ]);
        let v1 = server_side_apply(&rt, &live, &pod(both), "m", false, false).unwrap();
        let one = json!([{"name": "data", "mountPath": "/data"}]);
        let v2 = server_side_apply(&rt, &v1, &pod(one.clone()), "m", false, false).unwrap();
        assert_eq!(v2["spec"]["containers"][0]["volumeMounts"], one);
    }

    #[test]
    fn apply_conflicts_name_the_other_manager_unless_forced() {
        let rt = cm_type();
        let live = json!({"metadata": {"name": "c"}});
        let v1 = server_side_apply(&rt, &live, &cm(json!({"a": "1"})), "m1", false, false).unwrap();
        let err =
            server_side_apply(&rt, &v1, &cm(json!({"a": "2"})), "m2", false, false).unwrap_err();
        assert_eq!(err, vec![("m1".to_string(), ".data.a".to_string())]);
        // Same value: shared ownership, no conflict.
        let shared =
            server_side_apply(&rt, &v1, &cm(json!({"a": "1"})), "m2", false, false).unwrap();
        assert_eq!(read_managed(&shared).len(), 2);
        // Forced: m2 takes the field; m1 loses it (and its now-empty entry).
        let forced =
            server_side_apply(&rt, &v1, &cm(json!({"a": "2"})), "m2", true, false).unwrap();
        assert_eq!(forced["data"]["a"], "2");
        let managers: Vec<String> = read_managed(&forced)
            .into_iter()
            .map(|e| e.manager)
            .collect();
        assert_eq!(managers, vec!["m2"]);
    }

    #[test]
    fn fields_owned_by_another_manager_survive_when_an_applier_drops_them() {
        let rt = cm_type();
        let live = json!({"metadata": {"name": "c"}});
        let v1 = server_side_apply(&rt, &live, &cm(json!({"a": "1"})), "m1", false, false).unwrap();
        let v2 = server_side_apply(&rt, &v1, &cm(json!({"a": "1"})), "m2", false, false).unwrap();
        let v3 = server_side_apply(&rt, &v2, &cm(json!({})), "m1", false, false).unwrap();
        assert_eq!(v3["data"]["a"], "1");
    }

    #[test]
    fn updates_take_ownership_of_changed_fields() {
        let rt = cm_type();
        let live = json!({"metadata": {"name": "c"}});
        let v1 = server_side_apply(&rt, &live, &cm(json!({"a": "1"})), "m1", false, false).unwrap();
        let mut v2 = v1.clone();
        v2["data"]["a"] = json!("9");
        track_update(&rt, Some(&v1), &mut v2, "editor", false);
        let entries = read_managed(&v2);
        assert_eq!(entries.len(), 1);
        assert_eq!(entries[0].manager, "editor");
        assert_eq!(entries[0].operation, "Update");
    }
}
