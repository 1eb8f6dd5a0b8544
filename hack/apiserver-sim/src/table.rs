//! `meta.k8s.io` Table responses (what `kubectl get` prints): a CRD's
//! `additionalPrinterColumns` (JSONPath subset `.a.b[0].c`, `date` columns as
//! ages) and kubectl-like columns for the built-in kinds.

use serde_json::{json, Value};

use crate::clock;
use crate::registry::{PrinterColumn, ResourceType};

/// What a Table row's `object` holds (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// PartialObjectMetadata (the default).
    Metadata,
    /// The full object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter.
    pub fn parse(s: Option<&str>) -> Self {
        match s {
            Some("None") => IncludeObject::None,
            Some("Object") => IncludeObject::Object,
            _ => IncludeObject::Metadata,
        }
    }
}

/// The metadata-only form of an object.
pub fn partial_metadata(obj: &Value, api_version: &str) -> Value {
    json!({
        "kind": "PartialObjectMetadata",
        "apiVersion": api_version,
        "metadata": obj.get("metadata").cloned().unwrap_or(json!({})),
    })
}

/// Evaluates a JSONPath of the subset `.a.b[0].c` (also `{.a.b}`).
pub fn json_path<'a>(obj: &'a Value, path: &str) -> Option<&'a Value> {
    let path = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut cur = obj;
    for seg in path.split('.').filter(|s| !s.is_empty()) {
        let (field, indexes) = match seg.find('[') {
            Some(i) => (&seg[..i], &seg[i..]),
            None => (seg, ""),
        };
        if !field.is_empty() {
            cur = cur.get(field)?;
        }
        for idx in indexes.split('[').filter(|s| !s.is_empty()) {
            let inner = idx
                .trim_end_matches(']')
                .trim_matches('\'')
                .trim_matches('"');
            cur = match inner.parse::<usize>() {
                Ok(i) => cur.get(i)?,
                Err(_) => cur.get(inner)?,
            };
        }
    }
    Some(cur)
}

fn cell(type_: &str, v: Option<&Value>) -> Value {
    match (type_, v) {
        (_, None) | (_, Some(Value::Null)) => Value::Null,
        ("date", Some(Value::String(s))) => json!(clock::age(s)),
        ("string", Some(Value::String(s))) => json!(s),
        ("string", Some(v)) if !v.is_object() && !v.is_array() => json!(v.to_string()),
        ("integer" | "number" | "boolean", Some(v)) if !v.is_object() && !v.is_array() => v.clone(),
        (_, Some(v)) => match v {
            Value::String(s) => json!(s),
            other => json!(other.to_string()),
        },
    }
}

fn column(name: &str, type_: &str, description: &str, priority: i64) -> Value {
    let mut c = json!({"name": name, "type": type_, "format": "", "description": description, "priority": priority});
    if name == "Name" {
        c["format"] = json!("name");
    }
    c
}

fn name_column() -> Value {
    column(
        "Name",
        "string",
        "Name must be unique within a namespace.",
        0,
    )
}

fn age_column() -> Value {
    column("Age", "string", "CreationTimestamp is a timestamp representing the server time when this object was created.", 0)
}

fn s<'a>(obj: &'a Value, pointer: &str) -> &'a str {
    obj.pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn none_if_empty(v: &str) -> Value {
    if v.is_empty() {
        json!("<none>")
    } else {
        json!(v)
    }
}

fn age(obj: &Value) -> Value {
    json!(clock::age(s(obj, "/metadata/creationTimestamp")))
}

fn count(obj: &Value, pointer: &str) -> usize {
    obj.pointer(pointer)
        .and_then(Value::as_object)
        .map(|m| m.len())
        .unwrap_or(0)
}

fn n(obj: &Value, pointer: &str) -> i64 {
    obj.pointer(pointer).and_then(Value::as_i64).unwrap_or(0)
}

type Columns = (Vec<Value>, fn(&Value) -> Vec<Value>);

fn builtin_columns(kind: &str) -> Columns {
    match kind {
        "Pod" => (
            vec![
                name_column(),
                column("Ready", "string", "The aggregate readiness state of this pod for accepting traffic.", 0),
                column("Status", "string", "The aggregate status of the containers in this pod.", 0),
                column("Restarts", "string", "The number of times the containers in this pod have been restarted.", 0),
                age_column(),
                column("IP", "string", "IP address allocated to the pod.", 1),
                column("Node", "string", "Name of the node this pod is running on.", 1),
            ],
            |o| {
                let total = o.pointer("/spec/containers").and_then(Value::as_array).map(Vec::len).unwrap_or(0);
                let statuses = o.pointer("/status/containerStatuses").and_then(Value::as_array).cloned().unwrap_or_default();
                let ready = statuses.iter().filter(|c| c["ready"] == json!(true)).count();
                let restarts: i64 = statuses.iter().map(|c| c["restartCount"].as_i64().unwrap_or(0)).sum();
                let status = if !s(o, "/metadata/deletionTimestamp").is_empty() { "Terminating" } else { s(o, "/status/phase") };
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(format!("{ready}/{total}")),
                    json!(status),
                    json!(restarts.to_string()),
                    age(o),
                    none_if_empty(s(o, "/status/podIP")),
                    none_if_empty(s(o, "/spec/nodeName")),
                ]
            },
        ),
        "Service" => (
            vec![
                name_column(),
                column("Type", "string", "The type of the service.", 0),
                column("Cluster-IP", "string", "The cluster IP of the service.", 0),
                column("External-IP", "string", "The external IP of the service.", 0),
                column("Port(s)", "string", "The ports of the service.", 0),
                age_column(),
                column("Selector", "string", "The selector of the service.", 1),
            ],
            |o| {
                let ports: Vec<String> = o
                    .pointer("/spec/ports")
                    .and_then(Value::as_array)
                    .map(|ps| {
                        ps.iter()
                            .map(|p| {
                                let proto = p["protocol"].as_str().unwrap_or("TCP");
                                match p.get("nodePort").and_then(Value::as_i64) {
                                    Some(np) => format!("{}:{np}/{proto}", p["port"]),
                                    None => format!("{}/{proto}", p["port"]),
                                }
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                let selector: Vec<String> = o
                    .pointer("/spec/selector")
                    .and_then(Value::as_object)
                    .map(|m| m.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect())
                    .unwrap_or_default();
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/spec/type")),
                    none_if_empty(s(o, "/spec/clusterIP")),
                    json!("<none>"),
                    none_if_empty(&ports.join(",")),
                    age(o),
                    none_if_empty(&selector.join(",")),
                ]
            },
        ),
        "StatefulSet" => (
            vec![name_column(), column("Ready", "string", "Number of the pod with ready state.", 0), age_column()],
            |o| vec![json!(s(o, "/metadata/name")), json!(format!("{}/{}", n(o, "/status/readyReplicas"), n(o, "/spec/replicas"))), age(o)],
        ),
        "Deployment" => (
            vec![
                name_column(),
                column("Ready", "string", "Number of the pod with ready state.", 0),
                column("Up-to-date", "string", "Total number of non-terminated pods targeted by this deployment that have the desired template spec.", 0),
                column("Available", "string", "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.", 0),
                age_column(),
            ],
            |o| {
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(format!("{}/{}", n(o, "/status/readyReplicas"), n(o, "/spec/replicas"))),
                    json!(n(o, "/status/updatedReplicas")),
                    json!(n(o, "/status/availableReplicas")),
                    age(o),
                ]
            },
        ),
        "ReplicaSet" => (
            vec![
                name_column(),
                column("Desired", "integer", "Number of desired pods.", 0),
                column("Current", "integer", "Number of actually running pods.", 0),
                column("Ready", "integer", "Number of ready pods.", 0),
                age_column(),
            ],
            |o| {
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(n(o, "/spec/replicas")),
                    json!(n(o, "/status/replicas")),
                    json!(n(o, "/status/readyReplicas")),
                    age(o),
                ]
            },
        ),
        "Namespace" => (
            vec![name_column(), column("Status", "string", "The status of the namespace", 0), age_column()],
            |o| vec![json!(s(o, "/metadata/name")), json!(s(o, "/status/phase")), age(o)],
        ),
        "ConfigMap" => (
            vec![name_column(), column("Data", "string", "Number of data entries.", 0), age_column()],
            |o| vec![json!(s(o, "/metadata/name")), json!(count(o, "/data") + count(o, "/binaryData")), age(o)],
        ),
        "Secret" => (
            vec![name_column(), column("Type", "string", "The type of the secret", 0), column("Data", "string", "Number of data entries.", 0), age_column()],
            |o| vec![json!(s(o, "/metadata/name")), json!(s(o, "/type")), json!(count(o, "/data")), age(o)],
        ),
        "PersistentVolumeClaim" => (
            vec![
                name_column(),
                column("Status", "string", "The status of the claim.", 0),
                column("Volume", "string", "The volume bound to the claim.", 0),
                column("Capacity", "string", "The capacity of the volume.", 0),
                column("Access Modes", "string", "The access modes of the volume.", 0),
                column("StorageClass", "string", "The storage class of the claim.", 0),
                age_column(),
            ],
            |o| {
                let modes: Vec<&str> = o
                    .pointer("/status/accessModes")
                    .and_then(Value::as_array)
                    .map(|a| a.iter().filter_map(Value::as_str).map(|m| match m {
                        "ReadWriteOnce" => "RWO",
                        "ReadOnlyMany" => "ROX",
                        "ReadWriteMany" => "RWX",
                        "ReadWriteOncePod" => "RWOP",
                        other => other,
                    }).collect())
                    .unwrap_or_default();
                vec![
                    json!(s(o, "/metadata/name")),
                    json!(s(o, "/status/phase")),
                    json!(s(o, "/spec/volumeName")),
                    json!(s(o, "/status/capacity/storage")),
                    json!(modes.join(",")),
                    none_if_empty(s(o, "/spec/storageClassName")),
                    age(o),
                ]
            },
        ),
        "Event" => (
            vec![
                column("Last Seen", "string", "Time when last event occurred.", 0),
                column("Type", "string", "Type of this event.", 0),
                column("Reason", "string", "Reason is why the action was taken.", 0),
                column("Object", "string", "The object that this event is about.", 0),
                column("Message", "string", "A human-readable description of the status of this operation.", 0),
                column("Name", "string", "Name must be unique within a namespace.", 1),
            ],
            |o| {
                let last = [s(o, "/lastTimestamp"), s(o, "/eventTime"), s(o, "/deprecatedLastTimestamp"), s(o, "/metadata/creationTimestamp")]
                    .into_iter()
                    .find(|t| !t.is_empty())
                    .unwrap_or_default();
                let (kind, name) = match o.get("involvedObject").or_else(|| o.get("regarding")) {
                    Some(r) => (r["kind"].as_str().unwrap_or_default().to_lowercase(), r["name"].as_str().unwrap_or_default().to_string()),
                    None => (String::new(), String::new()),
                };
                let msg = if o.get("message").is_some() { s(o, "/message") } else { s(o, "/note") };
                vec![json!(clock::age(last)), json!(s(o, "/type")), json!(s(o, "/reason")), json!(format!("{kind}/{name}")), json!(msg), json!(s(o, "/metadata/name"))]
            },
        ),
        "Lease" => (
            vec![name_column(), column("Holder", "string", "The holder of the lease.", 0), age_column()],
            |o| vec![json!(s(o, "/metadata/name")), json!(s(o, "/spec/holderIdentity")), age(o)],
        ),
        "PodDisruptionBudget" => (
            vec![
                name_column(),
                column("Min Available", "string", "The minimum number of pods that must be available.", 0),
                column("Max Unavailable", "string", "The maximum number of pods that may be unavailable.", 0),
                column("Allowed Disruptions", "integer", "Number of pod disruptions that are currently allowed.", 0),
                age_column(),
            ],
            |o| {
                let show = |p: &str| match o.pointer(p) {
                    Some(Value::String(v)) => json!(v),
                    Some(v) if !v.is_null() => json!(v.to_string()),
                    _ => json!("N/A"),
                };
                vec![json!(s(o, "/metadata/name")), show("/spec/minAvailable"), show("/spec/maxUnavailable"), json!(n(o, "/status/disruptionsAllowed")), age(o)]
            },
        ),
        "CustomResourceDefinition" => (
            vec![name_column(), column("Created At", "date", "CreationTimestamp of the CustomResourceDefinition.", 0)],
            |o| vec![json!(s(o, "/metadata/name")), json!(s(o, "/metadata/creationTimestamp"))],
        ),
        _ => (vec![name_column(), age_column()], |o| vec![json!(s(o, "/metadata/name")), age(o)]),
    }
}

fn custom_columns(cols: &[PrinterColumn]) -> Vec<PrinterColumn> {
    if cols.is_empty() {
        vec![PrinterColumn {
            name: "Age".into(),
            type_: "date".into(),
            json_path: ".metadata.creationTimestamp".into(),
            description: String::new(),
            priority: 0,
        }]
    } else {
        cols.to_vec()
    }
}

/// Renders objects (served form) as a Table.
pub fn table(
    rt: &ResourceType,
    items: &[Value],
    list_meta: Value,
    table_version: &str,
    include: IncludeObject,
) -> Value {
    let meta_api = format!("meta.k8s.io/{table_version}");
    let row_object = |o: &Value| match include {
        IncludeObject::None => Value::Null,
        IncludeObject::Metadata => partial_metadata(o, &meta_api),
        IncludeObject::Object => o.clone(),
    };
    let (columns, rows): (Vec<Value>, Vec<Value>) = if rt.is_custom() {
        let cols = custom_columns(&rt.printer_columns);
        let mut defs = vec![name_column()];
        defs.extend(cols.iter().map(|c| {
            let t = if c.type_ == "date" {
                "date"
            } else {
                c.type_.as_str()
            };
            column(&c.name, t, &c.description, c.priority)
        }));
        let rows = items
            .iter()
            .map(|o| {
                let mut cells = vec![json!(s(o, "/metadata/name"))];
                cells.extend(
                    cols.iter()
                        .map(|c| cell(&c.type_, json_path(o, &c.json_path))),
                );
                json!({"cells": cells, "object": row_object(o)})
            })
            .collect();
        (defs, rows)
    } else {
        let (defs, cells_of) = builtin_columns(&rt.kind);
        let rows = items
            .iter()
            .map(|o| json!({"cells": cells_of(o), "object": row_object(o)}))
            .collect();
        (defs, rows)
    };
    let rows: Vec<Value> = rows
        .into_iter()
        .map(|mut r| {
            if r["object"].is_null() {
                if let Some(m) = r.as_object_mut() {
                    m.remove("object");
                }
            }
            r
        })
        .collect();
    json!({"kind": "Table", "apiVersion": meta_api, "metadata": list_meta, "columnDefinitions": columns, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_path_subset() {
        let o = json!({"status": {"members": [{"name": "a"}], "phase": "Ready"}, "metadata": {"labels": {"x.y/z": "1"}}});
        assert_eq!(json_path(&o, ".status.phase"), Some(&json!("Ready")));
        assert_eq!(json_path(&o, ".status.members[0].name"), Some(&json!("a")));
        assert_eq!(json_path(&o, "{.status.phase}"), Some(&json!("Ready")));
        assert_eq!(
            json_path(&o, ".metadata.labels['x.y/z']"),
            None,
            "quoted keys with dots are outside the subset"
        );
        assert_eq!(json_path(&o, ".status.missing"), None);
    }
}
