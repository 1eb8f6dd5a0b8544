//! The objects of one instance in the Karmada API server, as the stand-in
//! keeps them: resource templates, PropagationPolicies
//! (`pkg/apis/policy/v1alpha1/propagation_types.go`, one resource selector, a
//! cluster affinity and, for the `MongoDB`, static weights) and
//! OverridePolicies (`override_types.go`, one rule); and the API server's
//! nodePort allocation for Service templates.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::api::ApiResource;
use mongodb_member_operator::api::MongoDB;
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

/// Labels (or any string map).
pub type Labels = BTreeMap<String, String>;

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
    pub(super) fn api_resource(self) -> ApiResource {
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
