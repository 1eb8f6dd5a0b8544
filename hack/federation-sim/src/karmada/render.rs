//! The copy of a template Karmada writes into one member cluster: the chart's
//! `ReviseReplica` with the cluster's share (`pkg/controllers/binding/common.go`,
//! `ensureWork`), then the OverridePolicies in name order
//! (`pkg/util/overridemanager/overridemanager.go`: `plaintext` as a JSON
//! patch, `labelsOverrider` in `labelannotationoverrider.go`), then Karmada's
//! own labels and annotations.

use std::collections::BTreeMap;

use anyhow::{anyhow, Context, Result};
use serde_json::{json, Value as Json};

use super::{Kind, Objects, Overrider, ResourceRef, TargetCluster};
use crate::interpreter::Interpreter;

/// Label Karmada puts on what it propagates.
pub const MANAGED_LABEL: &str = "karmada.io/managed";
/// Annotation carrying the template's generation on every propagated object.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "resourcetemplate.karmada.io/generation";
/// JSON-patch `add` at `path` (object members only, as FedState's paths are).
pub(super) fn json_pointer_add(object: &mut Json, path: &str, value: Json) -> Result<()> {
    let tokens: Vec<String> = path
        .strip_prefix('/')
        .ok_or_else(|| anyhow!("JSON pointer {path:?} does not start with /"))?
        .split('/')
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let (last, parents) = tokens
        .split_last()
        .ok_or_else(|| anyhow!("empty JSON pointer"))?;
    let mut cursor = object;
    for token in parents {
        // RFC 6902: an array is entered by index, as Karmada's plaintext
        // overrider (a JSON patch) does.
        let next = match cursor {
            Json::Array(items) => token.parse::<usize>().ok().and_then(|i| items.get_mut(i)),
            other => other.get_mut(token.as_str()),
        };
        cursor = next.ok_or_else(|| anyhow!("{path}: no member {token:?} to add under"))?;
    }
    cursor
        .as_object_mut()
        .ok_or_else(|| anyhow!("{path}: parent is not an object"))?
        .insert(last.clone(), value);
    Ok(())
}

/// Karmada's own labels and annotations on a propagated object.
fn karmada_metadata(
    object: &mut Json,
    namespace: &str,
    resource: &ResourceRef,
    cluster: &str,
    policy: Option<&str>,
    template_generation: i64,
) {
    let metadata = object["metadata"]
        .as_object_mut()
        .expect("rendered objects have metadata");
    let labels = metadata.entry("labels").or_insert_with(|| json!({}));
    labels[MANAGED_LABEL] = json!("true");
    let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
    let binding = format!("{}-{}", resource.name, resource.kind.lower());
    annotations[TEMPLATE_GENERATION_ANNOTATION] = json!(template_generation.to_string());
    annotations["resourcebinding.karmada.io/name"] = json!(binding);
    annotations["resourcebinding.karmada.io/namespace"] = json!(namespace);
    annotations["work.karmada.io/name"] = json!(binding);
    annotations["work.karmada.io/namespace"] = json!(format!("karmada-es-{cluster}"));
    if let Some(policy) = policy {
        annotations["propagationpolicy.karmada.io/name"] = json!(policy);
        annotations["propagationpolicy.karmada.io/namespace"] = json!(namespace);
    }
}

/// The copy of `resource` Karmada writes into `cluster`.
pub fn render_member_object(
    namespace: &str,
    objects: &Objects,
    resource: &ResourceRef,
    cluster: &str,
    mongodb_schedule: &BTreeMap<String, Vec<TargetCluster>>,
    interpreter: &Interpreter,
) -> Result<Json> {
    let name = resource.name.as_str();
    let policy = objects
        .propagation_policies
        .iter()
        .find(|(_, p)| &p.resource == resource)
        .map(|(n, _)| n.as_str());
    let (mut object, generation) = match resource.kind {
        Kind::Service => {
            let service = objects
                .services
                .get(name)
                .ok_or_else(|| anyhow!("no Service template {name}"))?;
            (
                json!({
                    "apiVersion": "v1", "kind": "Service",
                    "metadata": {"name": name, "namespace": namespace, "labels": service.labels},
                    "spec": {
                        "type": "NodePort",
                        "selector": service.selector,
                        "ports": [{"name": "mongo", "protocol": "TCP", "port": 27017, "targetPort": 27017, "nodePort": service.node_port}],
                    },
                }),
                1,
            )
        }
        Kind::ConfigMap => {
            let config_map = objects
                .config_maps
                .get(name)
                .ok_or_else(|| anyhow!("no ConfigMap template {name}"))?;
            (
                json!({
                    "apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": name, "namespace": namespace, "labels": config_map.labels},
                    "data": config_map.data,
                }),
                1,
            )
        }
        Kind::MongoDB => {
            let template = objects
                .mongodbs
                .get(name)
                .ok_or_else(|| anyhow!("no MongoDB template {name}"))?;
            let mut object = json!({
                "apiVersion": "middleware.fedstate.io/v1alpha1", "kind": "MongoDB",
                "metadata": {"name": name, "namespace": namespace, "labels": template.labels},
                "spec": template.spec,
            });
            let share = mongodb_schedule
                .get(name)
                .and_then(|s| s.iter().find(|t| t.name == cluster))
                .map(|t| t.replicas)
                .ok_or_else(|| anyhow!("MongoDB {name} is not scheduled to cluster {cluster}"))?;
            if objects
                .policy_for(resource)
                .is_some_and(|p| p.static_weights.is_some())
            {
                object = interpreter.revise_replica(&object, share)?;
            }
            (object, template.generation)
        }
    };
    // OverridePolicies, in name order (equal implicit priority).
    for (policy_name, op) in &objects.override_policies {
        if &op.resource != resource {
            continue;
        }
        if let Some(clusters) = &op.clusters {
            if !clusters.iter().any(|c| c == cluster) {
                continue;
            }
        }
        match &op.overrider {
            Overrider::AddLabels(labels) => {
                let target = object["metadata"]
                    .as_object_mut()
                    .expect("metadata")
                    .entry("labels")
                    .or_insert_with(|| json!({}));
                for (k, v) in labels {
                    target[k] = json!(v);
                }
            }
            Overrider::AddPath { path, value } => {
                json_pointer_add(&mut object, path, value.clone())
                    .with_context(|| format!("OverridePolicy {policy_name}"))?
            }
        }
    }
    karmada_metadata(
        &mut object,
        namespace,
        resource,
        cluster,
        policy,
        generation,
    );
    Ok(object)
}
