//! Field sets for server-side apply: the paths an object sets, their
//! `FieldsV1` encoding in `metadata.managedFields`, and path-wise access
//! (read, remove) to objects.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value};

use crate::registry::{ListKind, ResourceType};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A map or struct field (`f:name`).
    Field(String),
    /// A list item by its key fields (`k:{"name":"x"}`), as compact JSON with sorted keys.
    Key(String),
    /// A set item by value (`v:"x"`), as compact JSON.
    Value(String),
}

/// A field path.
pub type FieldPath = Vec<PathElement>;

/// A set of field paths.
pub type FieldSet = BTreeSet<FieldPath>;

/// Which part of an object a write addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The main resource: everything except server-set metadata (and `status`
    /// when the resource has a status subresource).
    Main { exclude_status: bool },
    /// The status subresource: only `status`.
    Status,
}

const SERVER_METADATA: &[&str] = &[
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The field names of a path, with `[]` for list items (for merge-rule lookups).
pub fn names(path: &[PathElement]) -> Vec<String> {
    path.iter()
        .map(|e| match e {
            PathElement::Field(f) => f.clone(),
            _ => "[]".to_string(),
        })
        .collect()
}

/// The value of a list-map key field of an item; `protocol` defaults to `TCP`
/// as in the built-in kinds' schemas (ports are keyed by port and protocol).
pub fn key_value(item: &Value, key: &str) -> Option<Value> {
    item.get(key)
        .cloned()
        .or_else(|| (key == "protocol" && item.is_object()).then(|| Value::String("TCP".into())))
}

fn key_of(item: &Value, keys: &[String]) -> Option<String> {
    item.as_object()?;
    let mut m = BTreeMap::new();
    for k in keys {
        if let Some(v) = key_value(item, k) {
            m.insert(k.clone(), v);
        }
    }
    if m.is_empty() {
        return None;
    }
    serde_json::to_string(&m).ok()
}

/// The paths `obj` sets within `scope`.
pub fn fields_of(rt: &ResourceType, obj: &Value, scope: Scope) -> FieldSet {
    let mut out = FieldSet::new();
    let Some(map) = obj.as_object() else {
        return out;
    };
    for (k, v) in map {
        let keep = match scope {
            Scope::Status => k == "status",
            Scope::Main { exclude_status } => {
                k != "apiVersion" && k != "kind" && !(exclude_status && k == "status")
            }
        };
        if !keep {
            continue;
        }
        if k == "metadata" {
            if let Some(meta) = v.as_object() {
                for (mk, mv) in meta {
                    if !SERVER_METADATA.contains(&mk.as_str()) {
                        walk(
                            rt,
                            mv,
                            vec![
                                PathElement::Field(k.clone()),
                                PathElement::Field(mk.clone()),
                            ],
                            &mut out,
                        );
                    }
                }
            }
            continue;
        }
        walk(rt, v, vec![PathElement::Field(k.clone())], &mut out);
    }
    out
}

fn walk(rt: &ResourceType, v: &Value, path: FieldPath, out: &mut FieldSet) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, child) in m {
                let mut p = path.clone();
                p.push(PathElement::Field(k.clone()));
                walk(rt, child, p, out);
            }
        }
        Value::Array(items) if !items.is_empty() => match rt.list_kind(&names(&path)) {
            ListKind::Map(keys) if items.iter().all(|i| key_of(i, &keys).is_some()) => {
                for item in items {
                    let mut p = path.clone();
                    p.push(PathElement::Key(key_of(item, &keys).unwrap_or_default()));
                    out.insert(p.clone());
                    if let Some(m) = item.as_object() {
                        for (k, child) in m {
                            let mut cp = p.clone();
                            cp.push(PathElement::Field(k.clone()));
                            walk(rt, child, cp, out);
                        }
                    }
                }
            }
            ListKind::Set if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
                for item in items {
                    let mut p = path.clone();
                    p.push(PathElement::Value(item.to_string()));
                    out.insert(p);
                }
            }
            _ => {
                out.insert(path);
            }
        },
        _ => {
            out.insert(path);
        }
    }
}

fn item_matches(item: &Value, el: &PathElement) -> bool {
    match el {
        PathElement::Key(k) => {
            let Ok(Value::Object(keys)) = serde_json::from_str::<Value>(k) else {
                return false;
            };
            keys.iter()
                .all(|(kk, kv)| key_value(item, kk).as_ref() == Some(kv))
        }
        PathElement::Value(v) => serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item),
        PathElement::Field(_) => false,
    }
}

/// The value at `path`, if present.
pub fn get<'a>(obj: &'a Value, path: &[PathElement]) -> Option<&'a Value> {
    let mut cur = obj;
    for el in path {
        cur = match el {
            PathElement::Field(f) => cur.get(f.as_str())?,
            _ => cur.as_array()?.iter().find(|i| item_matches(i, el))?,
        };
    }
    Some(cur)
}

/// Removes the value at `path`; maps left empty by the removal are removed too.
pub fn remove(obj: &mut Value, path: &[PathElement]) {
    let Some((last, parent_path)) = path.split_last() else {
        return;
    };
    let mut cur = &mut *obj;
    for el in parent_path {
        let next = match el {
            PathElement::Field(f) => cur.get_mut(f.as_str()),
            _ => cur
                .as_array_mut()
                .and_then(|a| a.iter_mut().find(|i| item_matches(i, el))),
        };
        match next {
            Some(n) => cur = n,
            None => return,
        }
    }
    match last {
        PathElement::Field(f) => {
            if let Some(m) = cur.as_object_mut() {
                m.remove(f);
            }
        }
        el => {
            if let Some(a) = cur.as_array_mut() {
                a.retain(|i| !item_matches(i, el));
            }
        }
    }
    let now_empty = matches!(cur, Value::Object(m) if m.is_empty());
    if now_empty
        && parent_path.len() > 1
        && matches!(parent_path.last(), Some(PathElement::Field(_)))
    {
        remove(obj, parent_path);
    }
}

/// `.spec.containers[name="db"].image`, as server-side apply conflicts name fields.
pub fn display(path: &[PathElement]) -> String {
    let mut s = String::new();
    for el in path {
        match el {
            PathElement::Field(f) => {
                s.push('.');
                s.push_str(f);
            }
            PathElement::Key(k) => {
                let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                    Ok(Value::Object(m)) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                    _ => vec![k.clone()],
                };
                s.push_str(&format!("[{}]", parts.join(",")));
            }
            PathElement::Value(v) => s.push_str(&format!("[={v}]")),
        }
    }
    s
}

/// Encodes a set as `FieldsV1` (`{"f:spec":{"f:replicas":{}}}`, `.` marking a
/// path that is itself in the set and also has children).
pub fn to_fields_v1(set: &FieldSet) -> Value {
    let mut root = Map::new();
    for path in set {
        let mut cur = &mut root;
        for el in path {
            let key = match el {
                PathElement::Field(f) => format!("f:{f}"),
                PathElement::Key(k) => format!("k:{k}"),
                PathElement::Value(v) => format!("v:{v}"),
            };
            let entry = cur.entry(key).or_insert_with(|| Value::Object(Map::new()));
            cur = match entry.as_object_mut() {
                Some(m) => m,
                None => break,
            };
        }
    }
    mark_self(&mut root, &mut Vec::new(), set);
    Value::Object(root)
}

fn mark_self(node: &mut Map<String, Value>, path: &mut FieldPath, set: &FieldSet) {
    let keys: Vec<String> = node.keys().cloned().collect();
    for k in keys {
        let Some(el) = parse_element(&k) else {
            continue;
        };
        path.push(el);
        if let Some(Value::Object(child)) = node.get_mut(&k) {
            if !child.is_empty() {
                mark_self(child, path, set);
                if set.contains(path) {
                    child.insert(".".into(), Value::Object(Map::new()));
                }
            }
        }
        path.pop();
    }
}

fn parse_element(k: &str) -> Option<PathElement> {
    if let Some(f) = k.strip_prefix("f:") {
        Some(PathElement::Field(f.to_string()))
    } else if let Some(v) = k.strip_prefix("k:") {
        Some(PathElement::Key(normalize_json(v)))
    } else {
        k.strip_prefix("v:")
            .map(|v| PathElement::Value(normalize_json(v)))
    }
}

fn normalize_json(s: &str) -> String {
    serde_json::from_str::<Value>(s)
        .map(|v| v.to_string())
        .unwrap_or_else(|_| s.to_string())
}

/// Decodes `FieldsV1`.
pub fn from_fields_v1(v: &Value) -> FieldSet {
    let mut out = FieldSet::new();
    decode(v, &mut Vec::new(), &mut out);
    out
}

fn decode(v: &Value, path: &mut FieldPath, out: &mut FieldSet) {
    let Some(m) = v.as_object() else { return };
    if m.is_empty() && !path.is_empty() {
        out.insert(path.clone());
        return;
    }
    for (k, child) in m {
        if k == "." {
            out.insert(path.clone());
            continue;
        }
        if let Some(el) = parse_element(k) {
            path.push(el);
            decode(child, path, out);
            path.pop();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry::{Gvr, Registry};
    use serde_json::json;

    #[test]
    fn fields_v1_round_trips_with_list_items_marked_self() {
        let rt = Registry::new().get(&Gvr::core("pods")).unwrap();
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}},
            "spec": {"containers": [{"name": "c", "image": "i"}]}});
        let set = fields_of(
            &rt,
            &pod,
            Scope::Main {
                exclude_status: true,
            },
        );
        let v1 = to_fields_v1(&set);
        assert_eq!(
            v1,
            json!({"f:metadata": {"f:labels": {"f:a": {}}}, "f:spec": {"f:containers": {"k:{\"name\":\"c\"}": {".": {}, "f:image": {}, "f:name": {}}}}})
        );
        assert_eq!(from_fields_v1(&v1), set);
    }

    #[test]
    fn remove_by_key_and_prune_empty_maps() {
        let mut o = json!({"spec": {"list": [{"name": "a"}, {"name": "b"}]}, "metadata": {"labels": {"x": "1"}}});
        remove(
            &mut o,
            &[
                PathElement::Field("spec".into()),
                PathElement::Field("list".into()),
                PathElement::Key("{\"name\":\"a\"}".into()),
            ],
        );
        assert_eq!(o["spec"]["list"], json!([{"name": "b"}]));
        remove(
            &mut o,
            &[
                PathElement::Field("metadata".into()),
                PathElement::Field("labels".into()),
                PathElement::Field("x".into()),
            ],
        );
        assert_eq!(o["metadata"], json!({}));
    }
}
