//! OpenAPI v3 documents: the `/openapi/v3` index and one document per
//! group/version with each kind's schema (`x-kubernetes-group-version-kind`),
//! custom resources' CRD schemas included, and PATCH operations that declare
//! the `fieldValidation` parameter (kubectl then validates server-side).
//! Built-in kinds get a permissive schema (unknown fields preserved).

use serde_json::{json, Map, Value};

use crate::registry::{Registry, ResourceType};

fn package(group: &str) -> String {
    match group {
        "" => "io.k8s.api.core.v1".into(),
        "apiextensions.k8s.io" => "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.v1".into(),
        g if g.ends_with(".k8s.io") => format!(
            "io.k8s.api.{}.v1",
            g.trim_end_matches(".k8s.io").replace('.', "")
        ),
        "apps" | "policy" => format!("io.k8s.api.{group}.v1"),
        g => g.split('.').rev().collect::<Vec<_>>().join("."),
    }
}

/// Name of a kind's schema in `components.schemas`.
pub fn schema_name(r: &ResourceType) -> String {
    if r.is_custom() {
        format!("{}.{}.{}", package(&r.group), r.version, r.kind)
    } else {
        format!("{}.{}", package(&r.group), r.kind)
    }
}

fn gvk(r: &ResourceType) -> Value {
    json!({"group": r.group, "version": r.version, "kind": r.kind})
}

fn kind_schema(r: &ResourceType) -> Value {
    let mut schema = match &r.schema {
        Some(s) => s.clone(),
        None => json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
    };
    if let Some(o) = schema.as_object_mut() {
        let props = o.entry("properties").or_insert_with(|| json!({}));
        if let Some(p) = props.as_object_mut() {
            p.insert("apiVersion".into(), json!({"type": "string", "description": "APIVersion defines the versioned schema of this representation of an object."}));
            p.insert("kind".into(), json!({"type": "string", "description": "Kind is a string value representing the REST resource this object represents."}));
            p.insert("metadata".into(), json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true, "description": "Standard object's metadata."}));
        }
        o.insert("x-kubernetes-group-version-kind".into(), json!([gvk(r)]));
    }
    schema
}

fn query_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "description": description, "schema": {"type": "string", "uniqueItems": true}})
}

fn operation(r: &ResourceType, action: &str, schema_ref: &str, writes: bool) -> Value {
    let mut params = vec![query_param(
        "pretty",
        "If 'true', then the output is pretty printed.",
    )];
    if writes {
        params.push(query_param(
            "dryRun",
            "When present, indicates that modifications should not be persisted.",
        ));
        params.push(query_param("fieldManager", "fieldManager is a name associated with the actor or entity that is making these changes."));
        params.push(query_param("fieldValidation", "fieldValidation instructs the server on how to handle objects in the request containing unknown or duplicate fields."));
    }
    if action == "patch" {
        params.push(json!({"name": "force", "in": "query", "description": "Force is going to \"force\" Apply requests.", "schema": {"type": "boolean", "uniqueItems": true}}));
    }
    json!({
        "operationId": format!("{action}{}", r.kind),
        "parameters": params,
        "responses": {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}},
        "x-kubernetes-action": action,
        "x-kubernetes-group-version-kind": gvk(r),
    })
}

/// The document for one group/version, if served.
pub fn group_version_doc(registry: &Registry, group: &str, version: &str) -> Option<Value> {
    let types: Vec<_> = registry
        .all()
        .filter(|r| r.group == group && r.version == version)
        .collect();
    if types.is_empty() {
        return None;
    }
    let prefix = if group.is_empty() {
        "/api/v1".to_string()
    } else {
        format!("/apis/{group}/{version}")
    };
    let mut schemas = Map::new();
    let mut paths = Map::new();
    for r in types {
        let name = schema_name(r);
        let schema_ref = format!("#/components/schemas/{name}");
        schemas.insert(name, kind_schema(r));
        let base = if r.namespaced {
            format!("{prefix}/namespaces/{{namespace}}/{}", r.plural)
        } else {
            format!("{prefix}/{}", r.plural)
        };
        paths.insert(
            base.clone(),
            json!({"get": operation(r, "list", &schema_ref, false), "post": operation(r, "post", &schema_ref, true)}),
        );
        paths.insert(
            format!("{base}/{{name}}"),
            json!({
                "get": operation(r, "get", &schema_ref, false),
                "put": operation(r, "put", &schema_ref, true),
                "patch": operation(r, "patch", &schema_ref, true),
                "delete": operation(r, "delete", &schema_ref, false),
            }),
        );
    }
    Some(json!({
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": format!("v1.{}.0", crate::discovery::KUBE_MINOR)},
        "paths": paths,
        "components": {"schemas": schemas},
    }))
}

fn fnv_hash(s: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= b as u64;
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016X}")
}

/// `/openapi/v3`: every group/version with a content-hashed URL.
pub fn index(registry: &Registry) -> Value {
    let mut paths = Map::new();
    for (group, versions) in registry.groups() {
        for v in versions {
            let Some(doc) = group_version_doc(registry, &group, &v) else {
                continue;
            };
            let rel = if group.is_empty() {
                format!("api/{v}")
            } else {
                format!("apis/{group}/{v}")
            };
            let hash = fnv_hash(&doc.to_string());
            paths.insert(
                rel.clone(),
                json!({"serverRelativeURL": format!("/openapi/v3/{rel}?hash={hash}")}),
            );
        }
    }
    json!({"paths": paths})
}
