//! The mutating steps kube-apiserver applies to a custom resource before it is
//! validated: pruning of unknown fields, dropping `null`s of non-nullable
//! fields without a default, and applying `default`s.

use serde_json::Value;

use crate::schema::Node;

/// Fields every resource root (and every embedded resource) keeps.
const META_FIELDS: [&str; 3] = ["apiVersion", "kind", "metadata"];

/// Drops every field the schema does not know, returning their paths
/// (`spec.foo`, `spec.list[0].bar`) as kube-apiserver reports unknown fields.
pub(crate) fn prune_root(obj: &mut Value, root: &Node) -> Vec<String> {
    let mut unknown = Vec::new();
    prune(obj, Some(root), true, "", &mut unknown);
    unknown
}

fn join(parent: &str, key: &str) -> String {
    if parent.is_empty() {
        key.to_string()
    } else {
        format!("{parent}.{key}")
    }
}

fn prune(
    x: &mut Value,
    s: Option<&Node>,
    is_resource: bool,
    path: &str,
    unknown: &mut Vec<String>,
) {
    if let Some(s) = s {
        if s.preserve_unknown_fields {
            skip_prune(x, s, is_resource, path, unknown);
            return;
        }
    }
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                for k in map.keys() {
                    unknown.push(join(path, k));
                }
                map.clear();
                return;
            };
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let Some(v) = map.get_mut(&k) else { continue };
                if is_resource && keeps_meta_field(&k, v) {
                    continue;
                }
                let child = join(path, &k);
                if let Some(prop) = s.properties.get(&k) {
                    prune(v, Some(prop), prop.embedded_resource, &child, unknown);
                } else if let Some(ap) = &s.additional_properties {
                    prune(v, Some(ap), ap.embedded_resource, &child, unknown);
                } else {
                    unknown.push(child);
                    map.remove(&k);
                }
            }
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            let embedded = item_schema.is_some_and(|i| i.embedded_resource);
            for (i, v) in items.iter_mut().enumerate() {
                prune(v, item_schema, embedded, &format!("{path}[{i}]"), unknown);
            }
        }
        _ => {}
    }
}

/// `apiVersion` and `kind` strings and a `metadata` object stay at a resource
/// root whatever the schema says.
fn keeps_meta_field(key: &str, v: &Value) -> bool {
    match key {
        "apiVersion" | "kind" => v.is_string(),
        "metadata" => v.is_object(),
        _ => false,
    }
}

/// Under `x-kubernetes-preserve-unknown-fields` unknown fields stay, but the
/// fields the schema does specify are pruned by their own schemas.
fn skip_prune(x: &mut Value, s: &Node, is_resource: bool, path: &str, unknown: &mut Vec<String>) {
    match x {
        Value::Object(map) => {
            for (k, v) in map.iter_mut() {
                if is_resource && META_FIELDS.contains(&k.as_str()) {
                    continue;
                }
                let child = join(path, k);
                if let Some(prop) = s.properties.get(k) {
                    prune(v, Some(prop), prop.embedded_resource, &child, unknown);
                } else if let Some(ap) = &s.additional_properties {
                    prune(v, Some(ap), ap.embedded_resource, &child, unknown);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, v) in items.iter_mut().enumerate() {
                    skip_prune(
                        v,
                        item_schema,
                        item_schema.embedded_resource,
                        &format!("{path}[{i}]"),
                        unknown,
                    );
                }
            }
        }
        _ => {}
    }
}

/// Removes `null` values of fields that are neither nullable nor defaulted
/// (`PruneNonNullableNullsWithoutDefaults`).
pub(crate) fn drop_non_nullable_nulls(x: &mut Value, s: &Node) {
    match x {
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for k in keys {
                let schema = s.properties.get(&k).or(s.additional_properties.as_deref());
                let Some(schema) = schema else { continue };
                let drop = matches!(map.get(&k), Some(Value::Null))
                    && schema.default.is_none()
                    && !schema.nullable;
                if drop {
                    map.remove(&k);
                } else if let Some(v) = map.get_mut(&k) {
                    drop_non_nullable_nulls(v, schema);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for v in items.iter_mut() {
                    drop_non_nullable_nulls(v, item_schema);
                }
            }
        }
        _ => {}
    }
}

/// Applies `default`s: an absent field (or a `null` one that is not nullable)
/// whose schema has a default gets it, and defaulting continues inside every
/// present or defaulted value. An absent object without a default of its own
/// stays absent, so the defaults below it are not applied.
pub(crate) fn apply_defaults(x: &mut Value, s: &Node) {
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(default) = &prop.default else {
                    continue;
                };
                let missing = match map.get(k) {
                    None => true,
                    Some(Value::Null) => !prop.nullable,
                    Some(_) => false,
                };
                if missing {
                    map.insert(k.clone(), default.clone());
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply_defaults(v, prop);
                } else if let Some(ap) = s.additional_properties.as_deref() {
                    if v.is_null() && !ap.nullable {
                        if let Some(d) = &ap.default {
                            *v = d.clone();
                        }
                    }
                    apply_defaults(v, ap);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for v in items.iter_mut() {
                    if v.is_null() && !item_schema.nullable {
                        if let Some(d) = &item_schema.default {
                            *v = d.clone();
                        }
                    }
                    apply_defaults(v, item_schema);
                }
            }
        }
        _ => {}
    }
}
