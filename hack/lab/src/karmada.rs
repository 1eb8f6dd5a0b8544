//! What Karmada does with the objects FedState's control plane writes into the
//! Karmada API server: the objects themselves (resource templates, the
//! PropagationPolicies and OverridePolicies selecting them), the scheduling of a
//! divided `MongoDB` by static weights, each cluster's copy (the chart's Lua
//! `ReviseReplica`, then the OverridePolicies), propagation to the member
//! clusters (create, update, withdraw), and the ResourceBinding's
//! `aggregatedStatus` (the chart's Lua `ReflectStatus` and `InterpretHealth`)
//! with the template's status (`AggregateStatus`).
//!
//! Karmada's behaviour, from its source (`karmada-io/karmada`):
//! - static weights: `pkg/scheduler/core/spreadconstraint`/`division_algorithm`
//!   (`divideReplicasByStaticWeight`): each cluster gets
//!   `weight × replicas / Σweights` rounded down, the remainder goes one by one
//!   to the clusters by weight (descending), then name (`SortClusterByWeight`);
//!   a cluster left with 0 replicas receives nothing;
//! - a template leaves a cluster when its policy stops placing it there (the
//!   member object is deleted); deleting a PropagationPolicy leaves what it
//!   propagated in place; deleting a template withdraws it everywhere;
//! - the PropagationPolicy webhook fills in `resourceSelectors[].namespace`
//!   (`pkg/webhook/propagationpolicy/mutating.go`), so FedState's comparison of
//!   a freshly built policy with the stored one never finds them equal when
//!   FedState leaves that namespace out (it rewrites those policies every time);
//! - propagated objects carry `resourcetemplate.karmada.io/generation` (the
//!   template's generation), which the chart's `ReflectStatus` reads.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::{ApiResource, DeleteParams, DynamicObject, Patch, PatchParams};
use kube::Api;
use mongodb_member_operator::api::MongoDB;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use crate::controlplane::MemberCluster;
use crate::interpreter::Interpreter;

/// Labels (or any string map).
pub type Labels = BTreeMap<String, String>;

/// Field manager of what "Karmada" writes into member clusters.
pub const FIELD_MANAGER: &str = "karmada";
/// Label Karmada puts on what it propagates.
pub const MANAGED_LABEL: &str = "karmada.io/managed";
/// Annotation carrying the template's generation on every propagated object.
pub const TEMPLATE_GENERATION_ANNOTATION: &str = "resourcetemplate.karmada.io/generation";
/// The NodePort range of the Karmada API server, which allocates the nodePort of
/// every Service template (the member clusters then request that port).
pub const NODE_PORTS: std::ops::RangeInclusive<i32> = 30000..=32767;

/// The kinds FedState propagates.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1` Service.
    Service,
    /// `v1` ConfigMap.
    ConfigMap,
    /// `middleware.fedstate.io/v1alpha1` MongoDB.
    MongoDB,
}

impl Kind {
    fn api_resource(self) -> ApiResource {
        match self {
            Kind::Service => ApiResource::erase::<Service>(&()),
            Kind::ConfigMap => ApiResource::erase::<ConfigMap>(&()),
            Kind::MongoDB => ApiResource::erase::<MongoDB>(&()),
        }
    }

    /// Lower-case kind, as Karmada names bindings (`<name>-<kind>`).
    pub fn lower(self) -> &'static str {
        match self {
            Kind::Service => "service",
            Kind::ConfigMap => "configmap",
            Kind::MongoDB => "mongodb",
        }
    }
}

/// One resource template a policy selects.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ResourceRef {
    /// Kind.
    pub kind: Kind,
    /// Name (in the instance's namespace).
    pub name: String,
}

impl ResourceRef {
    /// `kind/name`.
    pub fn new(kind: Kind, name: impl Into<String>) -> Self {
        ResourceRef {
            kind,
            name: name.into(),
        }
    }
}

/// A Service template: FedState's `GenerateService`, with the nodePort the
/// Karmada API server allocated.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTemplate {
    /// `metadata.labels`.
    pub labels: Labels,
    /// `spec.selector`.
    pub selector: Labels,
    /// `spec.ports[0].nodePort`.
    pub node_port: i32,
}

/// A ConfigMap template.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct ConfigMapTemplate {
    /// `metadata.labels`.
    pub labels: Labels,
    /// `data`.
    pub data: BTreeMap<String, String>,
    /// A user's object (FedState's `spec.config.configRef`), not FedState's.
    #[serde(default)]
    pub user_owned: bool,
}

/// The MongoDB template (FedState's `GenerateMongo`), its generation and the
/// status Karmada aggregates onto it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MongoDBTemplate {
    /// `metadata.labels`.
    pub labels: Labels,
    /// `spec`, exactly as FedState sends it.
    pub spec: Json,
    /// `metadata.generation` in the Karmada API server.
    pub generation: i64,
    /// `status`, written by Karmada from `AggregateStatus`.
    #[serde(default)]
    pub status: Json,
}

/// One `staticWeightList` entry.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct StaticClusterWeight {
    /// The cluster (`targetCluster.clusterNames: [cluster]`).
    pub cluster: String,
    /// Its weight.
    pub weight: i64,
}

/// A PropagationPolicy selecting one template.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PropagationPolicy {
    /// `metadata.labels`.
    pub labels: Labels,
    /// `resourceSelectors[0]`.
    pub resource: ResourceRef,
    /// `placement.clusterAffinity.clusterNames`.
    pub clusters: Vec<String>,
    /// `placement.replicaScheduling` is Divided/Weighted with this
    /// `weightPreference.staticWeightList` (the MongoDB's policy only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_weights: Option<Vec<StaticClusterWeight>>,
}

/// What an OverridePolicy's rule does (FedState uses `add` only).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub enum Overrider {
    /// `labelsOverrider: [{operator: add, value}]`.
    AddLabels(Labels),
    /// `plaintext: [{path, operator: add, value}]`.
    AddPath {
        /// JSON pointer.
        path: String,
        /// Value.
        value: Json,
    },
}

/// An OverridePolicy with one rule.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct OverridePolicy {
    /// `metadata.labels`.
    pub labels: Labels,
    /// `resourceSelectors[0]`.
    pub resource: ResourceRef,
    /// `overrideRules[0].targetCluster.clusterNames`; `None`: every cluster.
    pub clusters: Option<Vec<String>>,
    /// `overrideRules[0].overriders`.
    pub overrider: Overrider,
}

/// The objects of one instance in the Karmada API server, by name (the API
/// server lists them in name order).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Objects {
    /// Service templates.
    pub services: BTreeMap<String, ServiceTemplate>,
    /// ConfigMap templates.
    pub config_maps: BTreeMap<String, ConfigMapTemplate>,
    /// MongoDB templates.
    pub mongodbs: BTreeMap<String, MongoDBTemplate>,
    /// PropagationPolicies.
    pub propagation_policies: BTreeMap<String, PropagationPolicy>,
    /// OverridePolicies.
    pub override_policies: BTreeMap<String, OverridePolicy>,
}

impl Objects {
    /// Whether the template `resource` exists.
    pub fn has_template(&self, resource: &ResourceRef) -> bool {
        match resource.kind {
            Kind::Service => self.services.contains_key(&resource.name),
            Kind::ConfigMap => self.config_maps.contains_key(&resource.name),
            Kind::MongoDB => self.mongodbs.contains_key(&resource.name),
        }
    }

    /// Every template, in propagation order: Services, FedState's ConfigMaps, the
    /// user's ConfigMaps, MongoDBs (the order FedState's handlers create them).
    pub fn templates(&self) -> Vec<ResourceRef> {
        let mut refs: Vec<ResourceRef> = self
            .services
            .keys()
            .map(|n| ResourceRef::new(Kind::Service, n))
            .collect();
        for user_owned in [false, true] {
            refs.extend(
                self.config_maps
                    .iter()
                    .filter(|(_, c)| c.user_owned == user_owned)
                    .map(|(n, _)| ResourceRef::new(Kind::ConfigMap, n)),
            );
        }
        refs.extend(
            self.mongodbs
                .keys()
                .map(|n| ResourceRef::new(Kind::MongoDB, n)),
        );
        refs
    }

    /// The first policy (by name) selecting `resource`.
    pub fn policy_for(&self, resource: &ResourceRef) -> Option<&PropagationPolicy> {
        self.propagation_policies
            .values()
            .find(|p| &p.resource == resource)
    }
}

/// Whether `labels` carry every entry of `selector` (a label selector's `matchLabels`).
pub fn matches(labels: &Labels, selector: &Labels) -> bool {
    selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The Karmada API server's nodePort allocator: a random free port of the range.
#[derive(Clone, Debug, Default)]
pub struct NodePorts {
    /// Ports already taken by a Service template.
    pub used: BTreeSet<i32>,
}

impl NodePorts {
    /// A free port, marked used.
    pub fn allocate(&mut self, rng: &mut impl Rng) -> Result<i32> {
        let free: Vec<i32> = NODE_PORTS.filter(|p| !self.used.contains(p)).collect();
        if free.is_empty() {
            bail!("the Karmada API server has no free nodePort");
        }
        let port = free[rng.random_range(0..free.len())];
        self.used.insert(port);
        Ok(port)
    }
}

/// One entry of a ResourceBinding's `spec.clusters`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct TargetCluster {
    /// Cluster.
    pub name: String,
    /// Its share of the replicas.
    pub replicas: i64,
}

/// Karmada's `divideReplicasByStaticWeight` over the clusters the policy's
/// affinity selects; clusters left with 0 replicas are dropped.
pub fn divide_by_static_weight(
    replicas: i64,
    clusters: &[String],
    weights: &[StaticClusterWeight],
) -> Vec<TargetCluster> {
    let mut matched: BTreeMap<&str, i64> = BTreeMap::new();
    for cluster in clusters {
        if let Some(rule) = weights.iter().find(|w| &w.cluster == cluster) {
            matched.insert(cluster, rule.weight);
        }
    }
    let mut sum: i64 = matched.values().sum();
    if sum == 0 {
        matched = clusters.iter().map(|c| (c.as_str(), 1)).collect();
        sum = matched.len() as i64;
    }
    if sum == 0 {
        return Vec::new();
    }
    let mut desired: BTreeMap<&str, i64> = matched
        .iter()
        .map(|(c, w)| (*c, w * replicas / sum))
        .collect();
    let allocated: i64 = desired.values().sum();
    let mut order: Vec<(&str, i64)> = matched.iter().map(|(c, w)| (*c, *w)).collect();
    order.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    for i in 0..(replicas - allocated).max(0) as usize {
        if let Some(entry) = desired.get_mut(order[i % order.len()].0) {
            *entry += 1;
        }
    }
    desired
        .into_iter()
        .filter(|(_, r)| *r > 0)
        .map(|(name, replicas)| TargetCluster {
            name: name.to_string(),
            replicas,
        })
        .collect()
}

/// The MongoDB template `name` as the Karmada API server holds it.
pub fn mongodb_template_object(namespace: &str, name: &str, template: &MongoDBTemplate) -> Json {
    let mut object = json!({
        "apiVersion": "middleware.fedstate.io/v1alpha1",
        "kind": "MongoDB",
        "metadata": {"name": name, "namespace": namespace, "generation": template.generation, "labels": template.labels},
        "spec": template.spec,
    });
    if !template.status.is_null() {
        object["status"] = template.status.clone();
    }
    object
}

/// The scheduler's result for MongoDB `name`: the template's replicas (the
/// chart's `GetReplicas`) divided by the policy's static weights.
pub fn schedule_mongodb(
    objects: &Objects,
    namespace: &str,
    name: &str,
    interpreter: &Interpreter,
) -> Result<Vec<TargetCluster>> {
    let resource = ResourceRef::new(Kind::MongoDB, name);
    let (Some(template), Some(policy)) =
        (objects.mongodbs.get(name), objects.policy_for(&resource))
    else {
        return Ok(Vec::new());
    };
    let (replicas, _) =
        interpreter.get_replicas(&mongodb_template_object(namespace, name, template))?;
    Ok(match &policy.static_weights {
        Some(weights) => divide_by_static_weight(replicas, &policy.clusters, weights),
        // Duplicated: every cluster gets the whole template.
        None => policy
            .clusters
            .iter()
            .map(|c| TargetCluster {
                name: c.clone(),
                replicas,
            })
            .collect(),
    })
}

/// Where `resource` is propagated: `None` when no policy selects it (what was
/// propagated stays where it is).
pub fn placement(
    objects: &Objects,
    resource: &ResourceRef,
    mongodb_schedule: &BTreeMap<String, Vec<TargetCluster>>,
) -> Option<BTreeSet<String>> {
    let policy = objects.policy_for(resource)?;
    Some(match resource.kind {
        Kind::MongoDB => mongodb_schedule
            .get(&resource.name)
            .map(|s| s.iter().map(|t| t.name.clone()).collect())
            .unwrap_or_default(),
        _ => policy.clusters.iter().cloned().collect(),
    })
}

/// JSON-patch `add` at `path` (object members only, as FedState's paths are).
fn json_pointer_add(object: &mut Json, path: &str, value: Json) -> Result<()> {
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

/// One entry of a ResourceBinding's `status.aggregatedStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct AggregatedStatusItem {
    /// Cluster.
    pub cluster_name: String,
    /// `ReflectStatus` of the member object; `None` until it is observed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Json>,
    /// The member object exists.
    pub applied: bool,
    /// `Healthy`, `Unhealthy` (from `InterpretHealth`) or `Unknown`.
    pub health: String,
}

/// The ResourceBinding `<name>-mongodb` as FedState's StatusHandler reads it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceBinding {
    /// `metadata.name`.
    pub name: String,
    /// `spec.clusters`.
    pub clusters: Vec<TargetCluster>,
    /// `status.aggregatedStatus`, by cluster name.
    pub aggregated_status: Vec<AggregatedStatusItem>,
}

/// What Karmada has done so far for one instance: where each template is
/// propagated (its Works) and what it last wrote there.
#[derive(Clone, Debug, Default)]
pub struct Bindings {
    /// Clusters holding each template.
    pub works: BTreeMap<ResourceRef, BTreeSet<String>>,
    /// The MongoDB templates' scheduling results.
    pub schedules: BTreeMap<String, Vec<TargetCluster>>,
    /// The object last written per (template, cluster), and the member object's
    /// generation then (MongoDB only; 0 otherwise).
    applied: BTreeMap<(ResourceRef, String), (Json, i64)>,
}

/// Propagates every template of `objects` to the member clusters as Karmada
/// would: withdraws what its policy no longer places somewhere, writes what
/// changed. Returns `cluster/Kind/name created|updated|deleted` lines.
pub async fn sync(
    clusters: &[MemberCluster],
    namespace: &str,
    objects: &Objects,
    bindings: &mut Bindings,
    interpreter: &Interpreter,
) -> Result<Vec<String>> {
    bindings.schedules.clear();
    for name in objects.mongodbs.keys() {
        bindings.schedules.insert(
            name.clone(),
            schedule_mongodb(objects, namespace, name, interpreter)?,
        );
    }
    let mut done = Vec::new();
    let mut templates = objects.templates();
    // Templates gone from the API server: withdrawn everywhere.
    templates.extend(
        bindings
            .works
            .keys()
            .filter(|r| !objects.has_template(r))
            .cloned()
            .collect::<Vec<_>>(),
    );
    for resource in templates {
        let previous = bindings.works.get(&resource).cloned().unwrap_or_default();
        let desired = if objects.has_template(&resource) {
            placement(objects, &resource, &bindings.schedules).unwrap_or_else(|| previous.clone())
        } else {
            BTreeSet::new()
        };
        for cluster_name in previous.difference(&desired) {
            let cluster = member(clusters, cluster_name)?;
            let api = Api::<DynamicObject>::namespaced_with(
                cluster.client.clone(),
                namespace,
                &resource.kind.api_resource(),
            );
            match api.delete(&resource.name, &DeleteParams::default()).await {
                Ok(_) => done.push(format!(
                    "{cluster_name}/{:?}/{} deleted",
                    resource.kind, resource.name
                )),
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(error) => {
                    return Err(error).with_context(|| {
                        format!(
                            "withdrawing {:?} {} from cluster {cluster_name}",
                            resource.kind, resource.name
                        )
                    })
                }
            }
            bindings
                .applied
                .remove(&(resource.clone(), cluster_name.clone()));
            bindings
                .works
                .entry(resource.clone())
                .or_default()
                .remove(cluster_name);
        }
        for cluster_name in &desired {
            let cluster = member(clusters, cluster_name)?;
            let rendered = render_member_object(
                namespace,
                objects,
                &resource,
                cluster_name,
                &bindings.schedules,
                interpreter,
            )?;
            let key = (resource.clone(), cluster_name.clone());
            if bindings.applied.get(&key).map(|(o, _)| o) == Some(&rendered) {
                continue;
            }
            let api = Api::<DynamicObject>::namespaced_with(
                cluster.client.clone(),
                namespace,
                &resource.kind.api_resource(),
            );
            let written = api
                .patch(
                    &resource.name,
                    &PatchParams::apply(FIELD_MANAGER).force(),
                    &Patch::Apply(&rendered),
                )
                .await
                .with_context(|| {
                    format!(
                        "propagating {:?} {} to cluster {cluster_name}",
                        resource.kind, resource.name
                    )
                })?;
            let verb = if bindings.applied.contains_key(&key) {
                "updated"
            } else {
                "applied"
            };
            done.push(format!(
                "{cluster_name}/{:?}/{} {verb}",
                resource.kind, resource.name
            ));
            bindings.applied.insert(
                key,
                (rendered, written.metadata.generation.unwrap_or_default()),
            );
            bindings
                .works
                .entry(resource.clone())
                .or_default()
                .insert(cluster_name.clone());
        }
        if bindings
            .works
            .get(&resource)
            .is_some_and(BTreeSet::is_empty)
        {
            bindings.works.remove(&resource);
        }
    }
    Ok(done)
}

fn member<'a>(clusters: &'a [MemberCluster], name: &str) -> Result<&'a MemberCluster> {
    clusters
        .iter()
        .find(|c| c.name == name)
        .ok_or_else(|| anyhow!("no member cluster {name}"))
}

/// Reads the ResourceBinding of MongoDB `name`: every scheduled cluster's object,
/// through the chart's `ReflectStatus` and `InterpretHealth`. A member object
/// edited or deleted behind Karmada's back is written again at the next sync
/// (Karmada's execution controller does the same).
pub async fn read_binding(
    clusters: &[MemberCluster],
    namespace: &str,
    name: &str,
    bindings: &mut Bindings,
    interpreter: &Interpreter,
) -> Result<ResourceBinding> {
    let targets = bindings.schedules.get(name).cloned().unwrap_or_default();
    let resource = ResourceRef::new(Kind::MongoDB, name);
    let mut items = Vec::new();
    for target in &targets {
        let cluster = member(clusters, &target.name)?;
        let api = Api::<DynamicObject>::namespaced_with(
            cluster.client.clone(),
            namespace,
            &Kind::MongoDB.api_resource(),
        );
        let observed = api
            .get_opt(name)
            .await
            .with_context(|| format!("reading MongoDB {name} in cluster {}", target.name))?;
        let key = (resource.clone(), target.name.clone());
        let Some(observed) = observed else {
            bindings.applied.remove(&key);
            items.push(AggregatedStatusItem {
                cluster_name: target.name.clone(),
                status: None,
                applied: false,
                health: "Unknown".into(),
            });
            continue;
        };
        if let Some((_, generation)) = bindings.applied.get(&key) {
            if observed.metadata.generation.unwrap_or_default() != *generation
                && observed.metadata.deletion_timestamp.is_none()
            {
                bindings.applied.remove(&key);
            }
        }
        let observed = serde_json::to_value(&observed)?;
        let status = interpreter.reflect_status(&observed)?;
        let health = if interpreter.interpret_health(&observed)? {
            "Healthy"
        } else {
            "Unhealthy"
        };
        items.push(AggregatedStatusItem {
            cluster_name: target.name.clone(),
            status: Some(status),
            applied: true,
            health: health.into(),
        });
    }
    items.sort_by(|a, b| a.cluster_name.cmp(&b.cluster_name));
    Ok(ResourceBinding {
        name: format!("{name}-mongodb"),
        clusters: targets,
        aggregated_status: items,
    })
}

/// The template's status as Karmada writes it back: the chart's `AggregateStatus`.
pub fn aggregate(
    namespace: &str,
    name: &str,
    template: &MongoDBTemplate,
    binding: &ResourceBinding,
    interpreter: &Interpreter,
) -> Result<Json> {
    let items: Vec<Json> = binding
        .aggregated_status
        .iter()
        .map(serde_json::to_value)
        .collect::<serde_json::Result<_>>()?;
    let aggregated = interpreter
        .aggregate_status(&mongodb_template_object(namespace, name, template), &items)?;
    Ok(aggregated.get("status").cloned().unwrap_or(Json::Null))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn weights(list: &[(&str, i64)]) -> Vec<StaticClusterWeight> {
        list.iter()
            .map(|(c, w)| StaticClusterWeight {
                cluster: c.to_string(),
                weight: *w,
            })
            .collect()
    }

    fn clusters(names: &[&str]) -> Vec<String> {
        names.iter().map(|n| n.to_string()).collect()
    }

    fn shares(targets: &[TargetCluster]) -> Vec<(&str, i64)> {
        targets
            .iter()
            .map(|t| (t.name.as_str(), t.replicas))
            .collect()
    }

    #[test]
    fn static_weights_equal_to_the_split_give_the_split() {
        let result = divide_by_static_weight(
            5,
            &clusters(&["a", "b", "c"]),
            &weights(&[("a", 2), ("b", 2), ("c", 1)]),
        );
        assert_eq!(shares(&result), [("a", 2), ("b", 2), ("c", 1)]);
    }

    #[test]
    fn the_remainder_goes_by_weight_then_name_and_empty_shares_are_dropped() {
        let result = divide_by_static_weight(
            7,
            &clusters(&["a", "b", "c"]),
            &weights(&[("a", 2), ("b", 2), ("c", 1)]),
        );
        assert_eq!(shares(&result), [("a", 3), ("b", 3), ("c", 1)]);
        let result = divide_by_static_weight(
            2,
            &clusters(&["a", "b", "c"]),
            &weights(&[("c", 1), ("b", 1), ("a", 1)]),
        );
        assert_eq!(shares(&result), [("a", 1), ("b", 1)]);
        let unweighted = divide_by_static_weight(3, &clusters(&["a", "b"]), &[]);
        assert_eq!(shares(&unweighted), [("a", 2), ("b", 1)]);
    }

    /// FedState's objects for a 2+2+1 set with an arbiter, and the lab's
    /// replica-set timeouts as one more OverridePolicy.
    fn federation() -> Objects {
        use crate::fedstate::{admit, MultiCloudMongoDB, Pass};
        use rand::SeedableRng;
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        let mut object = admit(
            MultiCloudMongoDB::sample("demo", "default", &[("a", 2), ("b", 2), ("c", 1)]),
            None,
            &mut rng,
        )
        .unwrap();
        object.spec.config.arbiter = true;
        let mut objects = Objects::default();
        let vips: BTreeMap<String, String> =
            [("a", "127.9.1.1"), ("b", "127.9.2.1"), ("c", "127.9.3.1")]
                .iter()
                .map(|(c, v)| (c.to_string(), v.to_string()))
                .collect();
        let mut ports = NodePorts::default();
        let deviations = Default::default();
        let mut pass = Pass::new(
            &mut object,
            &mut objects,
            &mut ports,
            &mut rng,
            &deviations,
            String::new(),
        );
        pass.handle(&vips).unwrap();
        objects.override_policies.insert(
            "demo-lab-replica-set-settings".into(),
            OverridePolicy {
                labels: Labels::new(),
                resource: ResourceRef::new(Kind::MongoDB, "demo"),
                clusters: None,
                overrider: Overrider::AddPath {
                    path: "/spec/replicaSetSettings".into(),
                    value: json!({"electionTimeoutMillis": 2000}),
                },
            },
        );
        objects
    }

    #[test]
    fn each_cluster_gets_its_share_through_the_charts_lua_and_fedstates_overrides() {
        let interpreter = Interpreter::from_checkout().unwrap();
        let objects = federation();
        assert_eq!(
            objects.mongodbs["demo"].spec["members"], 5,
            "the template has the total"
        );
        let schedule = schedule_mongodb(&objects, "default", "demo", &interpreter).unwrap();
        assert_eq!(shares(&schedule), [("a", 2), ("b", 2), ("c", 1)]);
        let schedules = BTreeMap::from([("demo".to_string(), schedule)]);
        let resource = ResourceRef::new(Kind::MongoDB, "demo");
        let render = |cluster: &str| {
            render_member_object(
                "default",
                &objects,
                &resource,
                cluster,
                &schedules,
                &interpreter,
            )
            .unwrap()
        };
        let a = render("a");
        assert_eq!(a["spec"]["members"], 2);
        assert_eq!(a["spec"]["rsInit"], true);
        assert_eq!(a["spec"]["arbiter"], true);
        assert_eq!(
            a["spec"]["replicaSetSettings"]["electionTimeoutMillis"],
            2000
        );
        assert_eq!(
            a["metadata"]["labels"]["app.multicloudmongodb.io/vip"],
            "127.9.1.1"
        );
        assert_eq!(
            a["metadata"]["labels"]["app.kubernetes.io/instance"],
            "demo"
        );
        assert_eq!(
            a["metadata"]["annotations"][TEMPLATE_GENERATION_ANNOTATION],
            "1"
        );
        let c = render("c");
        assert_eq!(c["spec"]["members"], 1);
        assert_eq!(c["spec"].get("rsInit"), None);
        assert_eq!(c["spec"].get("arbiter"), None);
        assert_eq!(c["spec"]["imagePullSecret"], json!({}));
        assert_eq!(
            c["metadata"]["labels"]["app.multicloudmongodb.io/vip"],
            "127.9.3.1"
        );
        assert!(render_member_object(
            "default",
            &objects,
            &resource,
            "d",
            &schedules,
            &interpreter
        )
        .is_err());

        let service = render_member_object(
            "default",
            &objects,
            &ResourceRef::new(Kind::Service, "demo-mongodb-arbiter"),
            "a",
            &schedules,
            &interpreter,
        )
        .unwrap();
        assert_eq!(service["spec"]["type"], "NodePort");
        assert_eq!(
            service["spec"]["ports"][0]["nodePort"],
            objects.services["demo-mongodb-arbiter"].node_port
        );
        assert_eq!(
            service["metadata"]["labels"].get("app.kubernetes.io/instance"),
            None
        );
        let placed = placement(
            &objects,
            &ResourceRef::new(Kind::Service, "demo-mongodb-arbiter"),
            &schedules,
        );
        assert_eq!(placed, Some(BTreeSet::from(["a".to_string()])));
    }

    #[test]
    fn plaintext_add_creates_or_replaces_a_member() {
        let mut object = json!({"spec": {"members": 2}});
        json_pointer_add(&mut object, "/spec/rsInit", json!(true)).unwrap();
        json_pointer_add(&mut object, "/spec/members", json!(3)).unwrap();
        assert_eq!(object, json!({"spec": {"members": 3, "rsInit": true}}));
        assert!(json_pointer_add(&mut object, "/status/x", json!(1)).is_err());
        // Into an array element, by index (a Service's port).
        let mut service = json!({"spec": {"ports": [{"port": 27017, "nodePort": 31001}]}});
        json_pointer_add(&mut service, "/spec/ports/0/nodePort", json!(31002)).unwrap();
        assert_eq!(service["spec"]["ports"][0]["nodePort"], json!(31002));
        assert!(json_pointer_add(&mut service, "/spec/ports/1/nodePort", json!(1)).is_err());
    }
}
