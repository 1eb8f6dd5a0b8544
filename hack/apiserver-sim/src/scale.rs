//! The `/scale` subresource (`autoscaling/v1` Scale) of StatefulSets,
//! Deployments and custom resources that declare it.

use serde_json::{json, Value};

use crate::registry::{ResourceType, ScalePaths};
use crate::table::json_path;

fn pointer(path: &str) -> String {
    path.trim_start_matches('.')
        .split('.')
        .fold(String::new(), |acc, seg| format!("{acc}/{seg}"))
}

fn selector_string(rt: &ResourceType, paths: &ScalePaths, obj: &Value) -> String {
    if let Some(p) = &paths.label_selector {
        return json_path(obj, p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
    }
    if rt.is_custom() {
        return String::new();
    }
    let mut parts: Vec<String> = obj
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default()))
                .collect()
        })
        .unwrap_or_default();
    parts.sort();
    parts.join(",")
}

/// The Scale view of an object.
pub fn to_scale(rt: &ResourceType, paths: &ScalePaths, obj: &Value) -> Value {
    let meta = &obj["metadata"];
    let mut m = json!({"name": meta["name"], "uid": meta["uid"], "resourceVersion": meta["resourceVersion"], "creationTimestamp": meta["creationTimestamp"]});
    if let Some(ns) = meta.get("namespace") {
        m["namespace"] = ns.clone();
    }
    let replicas = |p: &str| json_path(obj, p).and_then(Value::as_i64).unwrap_or(0);
    let mut status = json!({"replicas": replicas(&paths.status_replicas)});
    let selector = selector_string(rt, paths, obj);
    if !selector.is_empty() {
        status["selector"] = json!(selector);
    }
    json!({
        "kind": "Scale",
        "apiVersion": "autoscaling/v1",
        "metadata": m,
        "spec": {"replicas": replicas(&paths.spec_replicas)},
        "status": status,
    })
}

/// Writes a Scale's `spec.replicas` into the object.
pub fn set_replicas(paths: &ScalePaths, obj: &mut Value, replicas: i64) {
    let ptr = pointer(&paths.spec_replicas);
    let (parent, field) = ptr.rsplit_once('/').unwrap_or(("", "replicas"));
    let mut cur = &mut *obj;
    for seg in parent.split('/').filter(|s| !s.is_empty()) {
        if !cur.is_object() {
            *cur = json!({});
        }
        let Value::Object(m) = cur else { return };
        cur = m.entry(seg.to_string()).or_insert_with(|| json!({}));
    }
    if !cur.is_object() {
        *cur = json!({});
    }
    if let Some(o) = cur.as_object_mut() {
        o.insert(field.into(), json!(replicas));
    }
}
