//! FedState's control plane (`fedstate/fedstate` at commit `d28f763`),
//! reproduced from its source as pure functions over the objects it keeps in
//! the Karmada API server ([`crate::karmada::Objects`]). Each function names the Go
//! code it follows; nothing here is FedState's code.
//!
//! - [`MultiCloudMongoDB`] and [`admit`]: `api/v1alpha1/multicloudmongodb_types.go`
//!   and `multicloudmongodb_webhook.go` (defaults: image `mongo:3.6`, a root
//!   password of 8 random bytes in base64, and a `resource` default that panics
//!   the webhook, so a `MultiCloudMongoDB` without `spec.resource` is refused).
//! - labels: `pkg/driver/k8s/label.go`.
//! - the `MongoDB` payload ([`generate_mongo`]), Services and hostconf:
//!   `pkg/driver/k8s/obj.go`; the policies: `pkg/driver/karmada/obj.go`.
//! - one reconcile pass ([`Pass`]): the handler chain of
//!   `pkg/controller/multicloudmongodb/core.go` (GetScheduleStatus, VIPAllocator,
//!   ClusterScale, UpsertArbiter, HostConfigMap, MongoDependency, Mongo,
//!   Status), with `ScaleDownCleaner` and the `Ensure`/`Upsert*` helpers of
//!   `pkg/driver/k8s/client.go`.
//! - deletion ([`delete_external_resources`], [`garbage_collect`]):
//!   `controllers/multicloudmongodb_controller.go`.
//!
//! Where Go iterates a map, the order is drawn at random (the `config[]` of the
//! payload, the clusters of a scale-up); where FedState panics, the pass fails
//! with an error saying so.

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine;
use rand::seq::SliceRandom;
use rand::{Rng, RngCore};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};

use crate::karmada::{
    matches, ConfigMapTemplate, Kind, Labels, MongoDBTemplate, NodePorts, Objects, OverridePolicy,
    Overrider, PropagationPolicy, ResourceBinding, ResourceRef, ServiceTemplate,
    StaticClusterWeight,
};

/// The FedState commit this module follows.
pub const COMMIT: &str = "d28f763";

/// `app.kubernetes.io/instance` (label.go `LabelKeyInstance`).
pub const LABEL_INSTANCE: &str = "app.kubernetes.io/instance";
/// `app` (label.go `LabelKeyApp`).
pub const LABEL_APP: &str = "app";
/// label.go `ServicePP`.
pub const LABEL_SERVICE_PP: &str = "app.karmada.io/service-pp";
/// label.go `ConfigMapPP`.
pub const LABEL_CONFIGMAP_PP: &str = "app.karmada.io/configmap-pp";
/// label.go `CustomConfigMapPP`.
pub const LABEL_CUSTOM_CONFIGMAP_PP: &str = "app.karmada.io/custom-configmap-pp";
/// label.go `Arbiter`.
pub const LABEL_ARBITER: &str = "app.arbiter.io/instance";
/// label.go `Init`.
pub const LABEL_INIT: &str = "app.mongoinit.io/instance";
/// label.go `ClusterVip`.
pub const LABEL_CLUSTER_VIP: &str = "app.mongoclustervip.io/instance";
/// label.go `LabelClusterVipInstance`: the VIP label on each cluster's MongoDB.
pub const LABEL_CLUSTER_VIP_INSTANCE: &str = "app.multicloudmongodb.io/vip";
/// The webhook's default image (`defaultMongoImage`).
pub const DEFAULT_IMAGE: &str = "mongo:3.6";
/// `mgo.Arbiter`: the role FedState gives the arbiter's address.
pub const ARBITER_ROLE: &str = "ARBITER";

// ---------------------------------------------------------------------------
// api/v1alpha1/multicloudmongodb_types.go

/// A `MultiCloudMongoDB` as stored in the Karmada API server: metadata, the
/// `schedulerResult` annotation FedState's scheduler writes, spec and status.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MultiCloudMongoDB {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.labels`: FedState copies them onto everything it creates.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: Labels,
    /// The `schedulerResult` annotation: members per cluster (FedState's external
    /// scheduler writes it; the lab plays that scheduler). Its order breaks ties.
    #[serde(default)]
    pub scheduler_result: SchedulerResult,
    /// `spec`.
    #[serde(default)]
    pub spec: MultiCloudMongoDBSpec,
    /// `status`, written by FedState's control plane.
    #[serde(default)]
    pub status: MultiCloudMongoDBStatus,
}

/// `model.SchedulerResult` (pkg/model/scheduler.go).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct SchedulerResult {
    /// Members per cluster.
    #[serde(rename = "ClusterWithReplicaset", default)]
    pub cluster_with_replicaset: Vec<ClusterWithReplicaset>,
}

/// One cluster of the scheduler result.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterWithReplicaset {
    /// Cluster name.
    pub cluster: String,
    /// Members it hosts.
    pub replicaset: i32,
    /// Set by FedState on the cluster that hosts the arbiter.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub arbiter: bool,
}

/// `MultiCloudMongoDBSpec`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MultiCloudMongoDBSpec {
    /// `resource`: the mongod container's limits and requests.
    #[serde(default)]
    pub resource: ResourceSetting,
    /// `replicaset`: the total number of members.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicaset: Option<i32>,
    /// `auth`.
    #[serde(default)]
    pub auth: AuthSetting,
    /// `member` (unused by the control plane).
    #[serde(default)]
    pub member: MemberSetting,
    /// `imageSetting`.
    #[serde(default)]
    pub image_setting: ImageSetting,
    /// `storage`.
    #[serde(default)]
    pub storage: StorageSetting,
    /// `export`.
    #[serde(default)]
    pub export: ExportSetting,
    /// `config`.
    #[serde(default)]
    pub config: ConfigSetting,
    /// `scheduler`.
    #[serde(default)]
    pub scheduler: SchedulerSetting,
}

/// `ResourceSetting`: quantities as written.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSetting {
    /// `limits`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub limits: BTreeMap<String, String>,
    /// `requests`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub requests: BTreeMap<String, String>,
}

impl ResourceSetting {
    fn is_empty(&self) -> bool {
        self.limits.is_empty() && self.requests.is_empty()
    }
}

/// `AuthSetting`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AuthSetting {
    /// `rootPasswd`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_passwd: Option<String>,
}

/// `MemberSetting`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct MemberSetting {
    /// `memberConfigRef` (FedState's control plane never reads it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub member_config_ref: Option<String>,
}

/// `ImageSetting`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImageSetting {
    /// `image` (webhook default `mongo:3.6`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image: String,
    /// `imagePullPolicy` (not passed on by `GenerateMongo`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub image_pull_policy: String,
    /// `imagePullSecret` (not passed on by `GenerateMongo`).
    #[serde(default)]
    pub image_pull_secret: ImagePullSecretReference,
}

/// `ImagePullSecretReference`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullSecretReference {
    /// `user`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub user: String,
    /// `passwd`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub passwd: String,
}

/// `StorageSetting`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct StorageSetting {
    /// `storageClass` (not passed on by `GenerateMongo`).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub storage_class: String,
    /// `storageSize`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub storage_size: String,
}

/// `ExportSetting`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ExportSetting {
    /// `resource`.
    #[serde(default)]
    pub resource: ResourceSetting,
    /// `enable`.
    #[serde(default)]
    pub enable: bool,
}

/// `ConfigSetting`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ConfigSetting {
    /// `configSet`: a Go map, so its entries reach `config[]` in random order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_set: Option<BTreeMap<String, String>>,
    /// `configRef`: a ConfigMap in the control plane, propagated with the MongoDB.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_ref: Option<String>,
    /// `arbiter`.
    #[serde(default)]
    pub arbiter: bool,
}

/// `SchedulerSetting` (defaulted by the webhook; used by FedState's scheduler only).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerSetting {
    /// `schedulerName`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_name: Option<String>,
    /// `schedulerMode`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_mode: Option<String>,
}

/// `MultiCloudMongoDBStatus`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MultiCloudMongoDBStatus {
    /// `externalAddr`: every member's `VIP:nodePort`, comma-separated.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub external_addr: String,
    /// `state`: `Health`, `UnHealth` or `UnKnown`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// `result`: one entry per cluster, from the ResourceBinding.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub result: Vec<ServiceTopology>,
    /// `conditions`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ServerCondition>,
}

/// `ServiceTopology`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct ServiceTopology {
    /// `replicasetStatus`: the cluster's `currentInfo.members`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicaset_status: Option<i64>,
    /// `replicasetSpec`: the scheduler result's count.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicaset_spec: Option<i64>,
    /// `connectAddrWithRole`: the cluster's own members (and arbiter) by role.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub connect_addr_with_role: BTreeMap<String, String>,
    /// `cluster`.
    #[serde(default)]
    pub cluster: String,
    /// `state`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub state: String,
    /// `currentRevision`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub current_revision: String,
    /// `applied`.
    #[serde(default)]
    pub applied: bool,
}

/// `ServerCondition` (api/v1alpha1/condition.go).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct ServerCondition {
    /// `type`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `status`.
    pub status: String,
    /// `lastTransitionTime`.
    #[serde(default)]
    pub last_transition_time: String,
    /// `reason`.
    #[serde(default)]
    pub reason: String,
    /// `message`.
    #[serde(default)]
    pub message: String,
}

impl MultiCloudMongoDBStatus {
    /// `SetTypeCondition`: the time moves only when the status flips.
    fn set_condition(&mut self, type_: &str, status: &str, reason: &str, message: &str, now: &str) {
        match self.conditions.iter_mut().find(|c| c.type_ == type_) {
            Some(existing) => {
                if existing.status != status {
                    existing.status = status.to_string();
                    existing.last_transition_time = now.to_string();
                }
                existing.reason = reason.to_string();
                existing.message = message.to_string();
            }
            None => self.conditions.push(ServerCondition {
                type_: type_.to_string(),
                status: status.to_string(),
                last_transition_time: now.to_string(),
                reason: reason.to_string(),
                message: message.to_string(),
            }),
        }
    }
}

impl MultiCloudMongoDB {
    /// FedState's sample (`config/samples/middleware_v1alpha1_multicloudmongodb.yaml`)
    /// named `name` in `namespace`, for `members` per cluster (its scheduler
    /// result; the total is their sum). The image is left to the webhook's
    /// default, as the sample's own is a private copy of `mongo:3.6`.
    pub fn sample(name: &str, namespace: &str, members: &[(&str, i32)]) -> MultiCloudMongoDB {
        let quantities = |cpu: &str| {
            BTreeMap::from([
                ("cpu".to_string(), cpu.to_string()),
                ("memory".to_string(), "512Mi".to_string()),
            ])
        };
        MultiCloudMongoDB {
            name: name.to_string(),
            namespace: namespace.to_string(),
            labels: Labels::new(),
            scheduler_result: SchedulerResult {
                cluster_with_replicaset: members
                    .iter()
                    .map(|(cluster, replicaset)| ClusterWithReplicaset {
                        cluster: cluster.to_string(),
                        replicaset: *replicaset,
                        arbiter: false,
                    })
                    .collect(),
            },
            spec: MultiCloudMongoDBSpec {
                replicaset: Some(members.iter().map(|(_, n)| n).sum()),
                export: ExportSetting {
                    enable: false,
                    ..Default::default()
                },
                resource: ResourceSetting {
                    limits: quantities("2"),
                    requests: quantities("1"),
                },
                storage: StorageSetting {
                    storage_class: "managed-nfs-storage".to_string(),
                    storage_size: "1Gi".to_string(),
                },
                image_setting: ImageSetting {
                    image_pull_policy: "Always".to_string(),
                    ..Default::default()
                },
                ..Default::default()
            },
            status: MultiCloudMongoDBStatus::default(),
        }
    }

    /// The `schedulerResult` annotation's text.
    pub fn scheduler_annotation(&self) -> String {
        serde_json::to_string(&self.scheduler_result).unwrap_or_default()
    }

    /// The root password (after admission).
    pub fn root_password(&self) -> Option<&str> {
        self.spec.auth.root_passwd.as_deref()
    }
}

// ---------------------------------------------------------------------------
// api/v1alpha1/multicloudmongodb_webhook.go

/// `util.GenerateKey(8)`: 8 random bytes in standard base64 (12 characters,
/// possibly with `+`, `/` and a trailing `=`).
pub fn generate_root_password(rng: &mut impl RngCore) -> String {
    let mut bytes = [0u8; 8];
    rng.fill_bytes(&mut bytes);
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// What the Karmada API server stores for a `kubectl apply` of `object`
/// (`old`: the stored object, if any): fields the user did not set keep their
/// stored (webhook-defaulted) values, then FedState's mutating webhook
/// (`Default`) and, on update, its validating webhook (`ValidateUpdate`) run.
pub fn admit(
    mut object: MultiCloudMongoDB,
    old: Option<&MultiCloudMongoDB>,
    rng: &mut impl RngCore,
) -> Result<MultiCloudMongoDB, String> {
    if let Some(old) = old {
        if object.spec.auth.root_passwd.is_none() {
            object.spec.auth.root_passwd = old.spec.auth.root_passwd.clone();
        }
        if object.spec.scheduler.scheduler_name.is_none() {
            object.spec.scheduler.scheduler_name = old.spec.scheduler.scheduler_name.clone();
        }
        if object.spec.scheduler.scheduler_mode.is_none() {
            object.spec.scheduler.scheduler_mode = old.spec.scheduler.scheduler_mode.clone();
        }
        object.status = old.status.clone();
    }
    // Default()
    if object.spec.scheduler.scheduler_name.is_none() {
        object.spec.scheduler.scheduler_name = Some("multicloud-middleware-scheduler".into());
    }
    if object.spec.scheduler.scheduler_mode.is_none() {
        object.spec.scheduler.scheduler_mode = Some("Uniform".into());
    }
    if object.spec.auth.root_passwd.is_none() {
        object.spec.auth.root_passwd = Some(generate_root_password(rng));
    }
    if object.spec.resource.is_empty() {
        return Err(
            "FedState's mutating webhook panics on a MultiCloudMongoDB without \
                    spec.resource (its default calls resource.MustParse(\"500mi\"), not a \
                    quantity), so the API server refuses the object: set spec.resource"
                .into(),
        );
    }
    if object.spec.image_setting.image.is_empty() {
        object.spec.image_setting.image = DEFAULT_IMAGE.into();
    }
    // ValidateUpdate()
    if old.is_some() {
        match object.spec.replicaset {
            None => {
                return Err("FedState's validating webhook panics on an update without \
                            spec.replicaset"
                    .into())
            }
            Some(n) if n < 1 => {
                return Err(format!(
                    "number of replicas cannot be less than 1, name: {}",
                    object.name
                ))
            }
            _ => {}
        }
        if object.scheduler_result.cluster_with_replicaset.is_empty() {
            return Err(format!("not schedulerResult, name: {}", object.name));
        }
    }
    Ok(object)
}

// ---------------------------------------------------------------------------
// pkg/driver/k8s/label.go

fn merge(maps: &[&Labels]) -> Labels {
    let mut merged = Labels::new();
    for map in maps {
        merged.extend(map.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
    merged
}

fn one(key: &str, value: &str) -> Labels {
    Labels::from([(key.to_string(), value.to_string())])
}

/// `BaseLabel`: the MultiCloudMongoDB's labels plus `app.kubernetes.io/instance`.
pub fn base_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_INSTANCE, name)])
}

/// `GenerateServiceLabel`: base labels plus `app: <service>`.
pub fn service_label(labels: &Labels, name: &str, service: &str) -> Labels {
    merge(&[&base_label(labels, name), &one(LABEL_APP, service)])
}

/// `GenerateConfigMapLabel`: base labels plus `app: <name>`.
pub fn config_map_label(labels: &Labels, name: &str) -> Labels {
    merge(&[&base_label(labels, name), &one(LABEL_APP, name)])
}

/// `GenerateArbiterLabel`: the given labels plus `app: <service>`, and **no**
/// `app.kubernetes.io/instance`.
pub fn arbiter_label(labels: &Labels, service: &str) -> Labels {
    merge(&[labels, &one(LABEL_APP, service)])
}

fn service_pp_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_SERVICE_PP, name)])
}

fn config_map_pp_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_CONFIGMAP_PP, name)])
}

fn custom_config_map_pp_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_CUSTOM_CONFIGMAP_PP, name)])
}

fn init_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_INIT, name)])
}

fn cluster_vip_label(labels: &Labels, name: &str) -> Labels {
    merge(&[labels, &one(LABEL_CLUSTER_VIP, name)])
}

// ---------------------------------------------------------------------------
// pkg/driver/k8s/obj.go

/// `<name>-mongodb-<index>`.
pub fn member_service_name(name: &str, index: usize) -> String {
    format!("{name}-mongodb-{index}")
}

/// `<name>-mongodb-arbiter`.
pub fn arbiter_service_name(name: &str) -> String {
    format!("{name}-mongodb-arbiter")
}

/// `<name>-hostconf`.
pub fn hostconf_name(name: &str) -> String {
    format!("{name}-hostconf")
}

fn resource_json(resource: &ResourceSetting) -> Json {
    serde_json::to_value(resource).unwrap_or_else(|_| json!({}))
}

/// `GenerateMongo`: the MongoDB spec FedState sends, with the **total** number
/// of members. Go's `encoding/json` of `MongoDBSpec`: `dbUserSpec`,
/// `imagePullSecret` and `persistence` are structs (always sent, `{}` when
/// empty); the exporter is `{enable, resources}`; `config[]` comes from the
/// `configSet` map in random order; no `imagePullPolicy`, no storage class, no
/// `memberConfigRef`, no `rsInit`/`arbiter` (those come from OverridePolicies).
pub fn generate_mongo(object: &MultiCloudMongoDB, rng: &mut impl Rng) -> Json {
    let spec = &object.spec;
    let mut mongo = json!({
        "type": "ReplicaSet",
        "resources": resource_json(&spec.resource),
        "persistence": if spec.storage.storage_size.is_empty() { json!({}) } else { json!({"storage": spec.storage.storage_size}) },
        "metricsExporterSpec": {"enable": spec.export.enable, "resources": resource_json(&spec.export.resource)},
        "dbUserSpec": {},
        "imagePullSecret": {},
    });
    let fields = mongo.as_object_mut().expect("object");
    if !spec.image_setting.image.is_empty() {
        fields.insert("image".into(), json!(spec.image_setting.image));
    }
    if let Some(password) = spec.auth.root_passwd.as_deref().filter(|p| !p.is_empty()) {
        fields.insert("rootPassword".into(), json!(password));
    }
    let members = spec.replicaset.unwrap_or_default();
    if members != 0 {
        fields.insert("members".into(), json!(members));
    }
    if let Some(reference) = &spec.config.config_ref {
        if !reference.is_empty() {
            fields.insert("customConfigRef".into(), json!(reference));
        }
    }
    if let Some(config_set) = &spec.config.config_set {
        let mut entries: Vec<Json> = config_set
            .iter()
            .map(|(name, value)| json!({"name": name, "value": value}))
            .collect();
        entries.shuffle(rng);
        if !entries.is_empty() {
            fields.insert("config".into(), Json::Array(entries));
        }
    }
    mongo
}

/// `GenerateConfigMap`'s data: both keys, each a `host:'VIP:nodePort'` per line
/// joined with `\n` (no trailing newline; `arbiters` empty when there is none).
pub fn hostconf_data(datas: &[String], arbiters: &[String]) -> BTreeMap<String, String> {
    BTreeMap::from([
        ("arbiters".to_string(), arbiters.join("\n")),
        ("datas".to_string(), datas.join("\n")),
    ])
}

fn host_line(vip: &str, node_port: i32) -> String {
    format!("host:'{vip}:{node_port}'")
}

// ---------------------------------------------------------------------------
// pkg/controller/multicloudmongodb/core.go

/// Lab-only departures from FedState, chosen per instance. None of them is
/// FedState's behaviour; the default is FedState's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Deviations {
    /// On a scale-up, keep every cluster on the member Services' policies.
    /// FedState rewrites each policy with only the clusters that scale up
    /// (`ClusterScaleHandler`), which withdraws the Services of every other
    /// cluster: off by default.
    #[serde(default)]
    pub keep_unchanged_clusters_on_scale_up: bool,
}

/// What one pass keeps between handlers (`MultiCloudDBParams`).
#[derive(Clone, Debug, Default)]
pub struct ChainParams {
    /// The scheduler result, sorted by members (descending; ties keep their order).
    pub scheduler: Vec<ClusterWithReplicaset>,
    /// VIP per cluster (the Karmada Cluster objects' `vip` label).
    pub cluster_to_vip: BTreeMap<String, String>,
    /// Clusters with members, in `scheduler` order.
    pub active: Vec<String>,
    /// The arbiter's cluster and its Service's nodePort.
    pub arbiter_map: BTreeMap<String, i32>,
    /// Services per cluster, as the hostconf handler saw their policies.
    pub service_name_with_cluster: BTreeMap<String, Vec<String>>,
}

/// One reconcile pass of FedState's handler chain over one MultiCloudMongoDB.
pub struct Pass<'a, R: Rng> {
    /// The MultiCloudMongoDB (its status is written back).
    pub object: &'a mut MultiCloudMongoDB,
    /// Its objects in the Karmada API server.
    pub objects: &'a mut Objects,
    /// The API server's nodePort allocator.
    pub node_ports: &'a mut NodePorts,
    /// Go's map order and the API server's port choices.
    pub rng: &'a mut R,
    /// Lab-only departures.
    pub deviations: &'a Deviations,
    /// The time conditions are stamped with.
    pub now: String,
    /// The chain's shared parameters.
    pub params: ChainParams,
    /// What the pass did, for people.
    pub log: Vec<String>,
    /// Conditions set by handlers, applied when the chain unwinds (Go `defer`).
    deferred: Vec<(String, String, String, String)>,
}

/// A pass between its handlers and its StatusHandler.
#[derive(Debug, Default)]
pub struct Suspended {
    params: ChainParams,
    /// What the pass did so far, for people.
    pub log: Vec<String>,
    deferred: Vec<(String, String, String, String)>,
}

/// How the part of the chain before the StatusHandler ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Handled {
    /// The StatusHandler is next (it reads the ResourceBinding).
    ReadStatus,
    /// The chain stopped (no replica in the scheduler result).
    Stopped,
}

impl<'a, R: Rng> Pass<'a, R> {
    /// A pass over `object` and its `objects`.
    pub fn new(
        object: &'a mut MultiCloudMongoDB,
        objects: &'a mut Objects,
        node_ports: &'a mut NodePorts,
        rng: &'a mut R,
        deviations: &'a Deviations,
        now: String,
    ) -> Self {
        Pass {
            object,
            objects,
            node_ports,
            rng,
            deviations,
            now,
            params: ChainParams::default(),
            log: Vec::new(),
            deferred: Vec::new(),
        }
    }

    /// Ends the pass for now, keeping what its StatusHandler needs (the I/O
    /// between the handlers and the StatusHandler happens without it).
    pub fn suspend(self) -> Suspended {
        Suspended {
            params: self.params,
            log: self.log,
            deferred: self.deferred,
        }
    }

    /// Takes a suspended pass up again.
    pub fn resume(
        object: &'a mut MultiCloudMongoDB,
        objects: &'a mut Objects,
        node_ports: &'a mut NodePorts,
        rng: &'a mut R,
        deviations: &'a Deviations,
        now: String,
        suspended: Suspended,
    ) -> Self {
        let mut pass = Pass::new(object, objects, node_ports, rng, deviations, now);
        pass.params = suspended.params;
        pass.log = suspended.log;
        pass.deferred = suspended.deferred;
        pass
    }

    fn name(&self) -> String {
        self.object.name.clone()
    }

    fn labels(&self) -> Labels {
        self.object.labels.clone()
    }

    fn defer_condition(&mut self, type_: &str, status: &str, reason: &str, message: String) {
        self.deferred.push((
            type_.to_string(),
            status.to_string(),
            reason.to_string(),
            message,
        ));
    }

    /// Applies the deferred conditions, innermost handler first.
    pub fn finish(&mut self) {
        for (type_, status, reason, message) in self.deferred.drain(..).rev() {
            self.object
                .status
                .set_condition(&type_, &status, &reason, &message, &self.now);
        }
    }

    /// The handlers up to (not including) the StatusHandler, given the VIP of
    /// every cluster. `Err` ends the pass (FedState requeues it).
    pub fn handle(&mut self, vips: &BTreeMap<String, String>) -> Result<Handled, String> {
        if !self.get_schedule_status()? {
            return Ok(Handled::Stopped);
        }
        self.params.cluster_to_vip = vips.clone();
        self.cluster_scale()?;
        self.upsert_arbiter()?;
        self.host_config_map()?;
        self.mongo_dependency()?;
        self.mongo()?;
        Ok(Handled::ReadStatus)
    }

    /// `GetScheduleStatusHandler`: false when the scheduler result asks for no member.
    fn get_schedule_status(&mut self) -> Result<bool, String> {
        let annotation = self.object.scheduler_annotation();
        self.params.scheduler = self.object.scheduler_result.cluster_with_replicaset.clone();
        self.defer_condition(
            "ServerScheduledResult",
            "True",
            "GetSchedulerSuccess",
            format!(
                "Get Scheduler Result From MultiCloudMongoDB Annotations Success ({}/{}): {annotation}",
                self.object.namespace, self.object.name
            ),
        );
        let total: i32 = self.params.scheduler.iter().map(|c| c.replicaset).sum();
        Ok(total != 0)
    }

    /// `sort.Slice` by members, descending. Below 12 elements Go sorts by
    /// insertion, which keeps ties in their order: so does a stable sort.
    fn sort_scheduler(&mut self) {
        self.params
            .scheduler
            .sort_by_key(|c| std::cmp::Reverse(c.replicaset));
    }

    /// `ClusterScaleHandler`.
    fn cluster_scale(&mut self) -> Result<(), String> {
        self.sort_scheduler();
        self.params.active = self
            .params
            .scheduler
            .iter()
            .filter(|c| c.replicaset != 0)
            .map(|c| c.cluster.clone())
            .collect();
        let name = self.name();
        let mut scale_up: Vec<(String, i32)> = Vec::new();
        let mut scale_down: BTreeMap<String, i32> = BTreeMap::new();
        match self.objects.config_maps.get(&hostconf_name(&name)) {
            Some(hostconf) => {
                let datas = hostconf.data.get("datas").cloned().unwrap_or_default();
                let mut host_with_size: BTreeMap<String, i32> = BTreeMap::new();
                for line in datas.split('\n') {
                    let host = line
                        .split("host:'")
                        .nth(1)
                        .ok_or_else(|| {
                            format!(
                                "FedState panics reading hostconf line {line:?} (index out of range in ClusterScaleHandler)"
                            )
                        })?
                        .trim_end_matches('\'');
                    let address = host.split(':').next().unwrap_or_default();
                    for (cluster, vip) in &self.params.cluster_to_vip {
                        if address == vip {
                            *host_with_size.entry(cluster.clone()).or_default() += 1;
                        }
                    }
                }
                for entry in &self.params.scheduler {
                    let Some(have) = host_with_size.get(&entry.cluster) else {
                        if entry.replicaset > 0 {
                            scale_up.push((entry.cluster.clone(), entry.replicaset));
                        }
                        continue;
                    };
                    if entry.replicaset > *have {
                        scale_up.push((entry.cluster.clone(), entry.replicaset));
                    }
                    if entry.replicaset < *have {
                        scale_down.insert(entry.cluster.clone(), entry.replicaset);
                    }
                }
            }
            None => {
                for entry in &self.params.scheduler {
                    scale_up.push((entry.cluster.clone(), entry.replicaset));
                }
            }
        }
        let total = self.object.spec.replicaset.unwrap_or_default();
        if !scale_down.is_empty() {
            self.log.push(format!(
                "waiting for the clusters to scale down: {scale_down:?}"
            ));
            // Go's defer: set even when ScaleDownCleaner fails.
            let ok = self.object.status.result.iter().all(|r| {
                scale_down
                    .get(&r.cluster)
                    .is_none_or(|want| r.replicaset_status == Some(i64::from(*want)))
            });
            let mut outcome = Ok(());
            if ok {
                outcome = self.scale_down_cleaner();
            }
            match &outcome {
                Ok(()) => self.defer_condition(
                    "ServerWaitingScaleDown",
                    "True",
                    "WaitingMemberScaleDown",
                    format!("Waiting for member clusters to undergo capacity reduction SpecReplicaset: {total}"),
                ),
                Err(error) => self.defer_condition(
                    "ServerWaitingScaleDown",
                    "False",
                    "CheckFailed",
                    format!("Update PP and SVC and ConfigMap failed, err: {error}"),
                ),
            }
            return outcome;
        }
        self.defer_condition(
            "ServerCheck",
            "True",
            "CheckSuccess",
            format!("The number of member clusters is the same as the number of control plane copies, check, SpecReplicaset: {total}"),
        );
        // clustersToScaleUp is a Go map: its clusters come in random order.
        scale_up.shuffle(self.rng);
        if self.deviations.keep_unchanged_clusters_on_scale_up && !scale_up.is_empty() {
            // Lab-only: every cluster with members keeps its Services.
            scale_up = self
                .params
                .scheduler
                .iter()
                .map(|c| (c.cluster.clone(), c.replicaset))
                .collect();
        }
        // params.ServiceNameWithCluster is still empty here (HostConfigMapHandler
        // fills it later in the chain): every cluster that scales up is put on
        // the policies of Services 0..replicaset-1, and only those clusters.
        let mut upsert: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        for (cluster, replicaset) in &scale_up {
            for index in 0..(*replicaset).max(0) as usize {
                upsert.entry(index).or_default().push(cluster.clone());
            }
        }
        let most = self
            .params
            .scheduler
            .first()
            .map(|c| c.replicaset)
            .unwrap_or(0)
            .max(0) as usize;
        for index in 0..most {
            let Some(clusters) = upsert.get(&index).filter(|c| !c.is_empty()).cloned() else {
                continue;
            };
            let service = member_service_name(&name, index);
            let label = service_label(&self.labels(), &name, &service);
            self.ensure_service(&service, &label)?;
            let pp_label = service_pp_label(&label, &format!("{name}-service-pp"));
            self.upsert_policy(
                &format!("{service}-pp"),
                pp_label,
                ResourceRef::new(Kind::Service, &service),
                clusters,
                None,
            );
        }
        Ok(())
    }

    /// `k8s.Ensure` of a Service template: created when missing (the API server
    /// allocates its nodePort), left alone otherwise.
    fn ensure_service(&mut self, service: &str, labels: &Labels) -> Result<(), String> {
        if self.objects.services.contains_key(service) {
            return Ok(());
        }
        let node_port = self
            .node_ports
            .allocate(self.rng)
            .map_err(|e| e.to_string())?;
        self.objects.services.insert(
            service.to_string(),
            ServiceTemplate {
                labels: labels.clone(),
                selector: labels.clone(),
                node_port,
            },
        );
        self.log
            .push(format!("created Service {service} (nodePort {node_port})"));
        Ok(())
    }

    /// `UpsertPPEnsure`, as it behaves against Karmada: created when missing,
    /// rewritten otherwise (policies FedState builds without a selector namespace
    /// never compare equal with the stored ones; for the others the result is
    /// the same).
    fn upsert_policy(
        &mut self,
        policy: &str,
        labels: Labels,
        resource: ResourceRef,
        clusters: Vec<String>,
        static_weights: Option<Vec<StaticClusterWeight>>,
    ) {
        let new = PropagationPolicy {
            labels,
            resource,
            clusters,
            static_weights,
        };
        match self.objects.propagation_policies.get_mut(policy) {
            Some(existing) => {
                if existing.clusters != new.clusters
                    || existing.static_weights != new.static_weights
                {
                    self.log.push(format!(
                        "PropagationPolicy {policy}: clusters {:?}",
                        new.clusters
                    ));
                }
                *existing = new;
            }
            None => {
                self.log.push(format!(
                    "created PropagationPolicy {policy}: clusters {:?}",
                    new.clusters
                ));
                self.objects
                    .propagation_policies
                    .insert(policy.to_string(), new);
            }
        }
    }

    /// `UpsertOpEnsure`.
    fn upsert_override(&mut self, policy: &str, new: OverridePolicy) {
        if self.objects.override_policies.get(policy) != Some(&new) {
            self.log.push(format!(
                "OverridePolicy {policy}: clusters {:?}",
                new.clusters.as_deref().unwrap_or_default()
            ));
            self.objects
                .override_policies
                .insert(policy.to_string(), new);
        }
    }

    /// `k8s.ScaleDownCleaner`: every member Service whose nodePort no cluster's
    /// `status.result[].connectAddrWithRole` lists is deleted, and every member
    /// Service policy keeps only the clusters whose own members use it.
    fn scale_down_cleaner(&mut self) -> Result<(), String> {
        let name = self.name();
        let base = base_label(&self.labels(), &name);
        let listed: Vec<String> = self
            .objects
            .services
            .iter()
            .filter(|(_, s)| matches(&s.labels, &base))
            .map(|(n, _)| n.clone())
            .collect();
        let mut effective: BTreeSet<String> = BTreeSet::new();
        let mut service_with_cluster: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for result in &self.object.status.result {
            let mut used = BTreeSet::new();
            // A Go map: the first address without a Service ends the pass.
            let mut addresses: Vec<(&String, &String)> =
                result.connect_addr_with_role.iter().collect();
            addresses.shuffle(self.rng);
            for (address, role) in addresses {
                if role == ARBITER_ROLE {
                    continue;
                }
                let port: i32 = address
                    .split(':')
                    .nth(1)
                    .ok_or_else(|| format!("FedState panics splitting address {address:?}"))?
                    .parse()
                    .map_err(|e| format!("atoi port err: {e}"))?;
                let service = listed
                    .iter()
                    .find(|s| self.objects.services[*s].node_port == port)
                    .ok_or_else(|| {
                        "get svc by nodeport failed, err: not found service".to_string()
                    })?;
                effective.insert(service.clone());
                used.insert(service.clone());
            }
            service_with_cluster.insert(result.cluster.clone(), used);
        }
        for service in &listed {
            if !effective.contains(service) {
                self.objects.services.remove(service);
                self.log.push(format!("deleted Service {service}"));
            }
        }
        let pp_selector = service_pp_label(&self.labels(), &format!("{name}-service-pp"));
        let policies: Vec<(String, PropagationPolicy)> = self
            .objects
            .propagation_policies
            .iter()
            .filter(|(_, p)| matches(&p.labels, &pp_selector))
            .map(|(n, p)| (n.clone(), p.clone()))
            .collect();
        let mut keep: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for (policy_name, policy) in &policies {
            for cluster in &policy.clusters {
                if let Some(services) = service_with_cluster.get(cluster) {
                    for service in services {
                        if policy.resource.name == *service {
                            let clusters = keep.entry(policy_name.clone()).or_default();
                            if !clusters.contains(cluster) {
                                clusters.push(cluster.clone());
                            }
                        }
                    }
                }
            }
        }
        for (policy_name, policy) in policies {
            let wanted = keep.get(&policy_name).cloned().unwrap_or_default();
            let deleted = !keep.contains_key(&policy_name);
            if deleted {
                self.objects.propagation_policies.remove(&policy_name);
                self.log
                    .push(format!("deleted PropagationPolicy {policy_name}"));
            }
            if policy.clusters != wanted {
                if deleted {
                    // UpsertPPEnsure re-creates the deleted policy from the
                    // listed copy, resourceVersion and all: the API server
                    // refuses it and the pass ends here.
                    return Err(format!(
                        "upsert svcpp failed, err: creating PropagationPolicy {policy_name}: resourceVersion should not be set on objects to be created"
                    ));
                }
                self.log.push(format!(
                    "PropagationPolicy {policy_name}: clusters {:?} -> {wanted:?}",
                    policy.clusters
                ));
                if let Some(stored) = self.objects.propagation_policies.get_mut(&policy_name) {
                    stored.clusters = wanted;
                }
            }
        }
        Ok(())
    }

    /// `UpsertArbiterHandler`.
    fn upsert_arbiter(&mut self) -> Result<(), String> {
        let name = self.name();
        let service = arbiter_service_name(&name);
        let label = arbiter_label(&self.labels(), &service);
        let op_name = format!("{name}-arbiter");
        let pp_name = format!("{service}-pp");
        if self.object.spec.config.arbiter {
            let Some(first) = self.params.scheduler.first_mut() else {
                return Err("FedState panics: empty scheduler result".into());
            };
            first.arbiter = true;
            let cluster = first.cluster.clone();
            self.upsert_override(
                &op_name,
                OverridePolicy {
                    labels: label.clone(),
                    resource: ResourceRef::new(Kind::MongoDB, &name),
                    clusters: Some(vec![cluster.clone()]),
                    overrider: Overrider::AddPath {
                        path: "/spec/arbiter".into(),
                        value: json!(true),
                    },
                },
            );
            self.ensure_service(&service, &label)?;
            self.upsert_policy(
                &pp_name,
                one(LABEL_ARBITER, &name),
                ResourceRef::new(Kind::Service, &service),
                vec![cluster],
                None,
            );
        } else {
            if self.objects.override_policies.remove(&op_name).is_some() {
                self.log.push(format!("deleted OverridePolicy {op_name}"));
            }
            if self.objects.services.remove(&service).is_some() {
                self.log.push(format!("deleted Service {service}"));
            }
            if self.objects.propagation_policies.remove(&pp_name).is_some() {
                self.log
                    .push(format!("deleted PropagationPolicy {pp_name}"));
            }
            if let Some(hostconf) = self.objects.config_maps.get_mut(&hostconf_name(&name)) {
                hostconf.data.insert("arbiters".into(), String::new());
            }
        }
        Ok(())
    }

    /// `HostConfigMapHandler`: hostconf rebuilt from the member Services'
    /// policies (in name order, each policy's clusters in its order), plus the
    /// arbiter; propagated to the clusters with members.
    fn host_config_map(&mut self) -> Result<(), String> {
        let name = self.name();
        let pp_selector = service_pp_label(&self.labels(), &format!("{name}-service-pp"));
        let mut datas = Vec::new();
        let policies: Vec<PropagationPolicy> = self
            .objects
            .propagation_policies
            .values()
            .filter(|p| matches(&p.labels, &pp_selector))
            .cloned()
            .collect();
        for policy in policies {
            let service = self
                .objects
                .services
                .get(&policy.resource.name)
                .ok_or_else(|| format!("services \"{}\" not found", policy.resource.name))?;
            for cluster in &policy.clusters {
                let vip = self
                    .params
                    .cluster_to_vip
                    .get(cluster)
                    .cloned()
                    .unwrap_or_default();
                datas.push(host_line(&vip, service.node_port));
                self.params
                    .service_name_with_cluster
                    .entry(cluster.clone())
                    .or_default()
                    .push(policy.resource.name.clone());
            }
        }
        let mut arbiters = Vec::new();
        if self.object.spec.config.arbiter {
            let service_name = arbiter_service_name(&name);
            let service = self.objects.services.get(&service_name).ok_or_else(|| {
                format!("get arbiter svc failed, err: services \"{service_name}\" not found")
            })?;
            let cluster = self
                .params
                .scheduler
                .iter()
                .rev()
                .find(|c| c.arbiter)
                .map(|c| c.cluster.clone())
                .unwrap_or_default();
            let vip = self
                .params
                .cluster_to_vip
                .get(&cluster)
                .cloned()
                .unwrap_or_default();
            arbiters.push(host_line(&vip, service.node_port));
            self.params
                .arbiter_map
                .insert(cluster.clone(), service.node_port);
            self.params
                .service_name_with_cluster
                .entry(cluster)
                .or_default()
                .push(service_name);
        }
        let cm_name = hostconf_name(&name);
        let cm_label = config_map_label(&self.labels(), &name);
        let data = hostconf_data(&datas, &arbiters);
        match self.objects.config_maps.get_mut(&cm_name) {
            Some(existing) => {
                if existing.data != data {
                    self.log
                        .push(format!("hostconf: {}", data["datas"].replace('\n', " ")));
                    existing.data = data;
                }
            }
            None => {
                self.log.push(format!(
                    "created hostconf: {}",
                    data["datas"].replace('\n', " ")
                ));
                self.objects.config_maps.insert(
                    cm_name.clone(),
                    ConfigMapTemplate {
                        labels: cm_label.clone(),
                        data,
                        user_owned: false,
                    },
                );
            }
        }
        let pp_label = config_map_pp_label(&cm_label, &format!("{name}-configmap-pp"));
        let active = self.params.active.clone();
        self.upsert_policy(
            &format!("{cm_name}-pp"),
            pp_label,
            ResourceRef::new(Kind::ConfigMap, &cm_name),
            active,
            None,
        );
        Ok(())
    }

    /// `MongoDependencyHandler`: the `configRef` ConfigMap (a user's object in
    /// the control plane) propagated to the clusters with members.
    fn mongo_dependency(&mut self) -> Result<(), String> {
        let Some(reference) = self.object.spec.config.config_ref.clone() else {
            return Ok(());
        };
        let name = self.name();
        let found = self.objects.config_maps.get(&reference).ok_or_else(|| {
            format!(
                "can't get the configMap {reference}, {}: configmaps \"{reference}\" not found",
                self.object.namespace
            )
        })?;
        let label =
            custom_config_map_pp_label(&found.labels, &format!("{name}-custom-configmap-pp"));
        let active = self.params.active.clone();
        self.upsert_policy(
            &format!("{reference}-custom-configmap-pp"),
            label,
            ResourceRef::new(Kind::ConfigMap, &reference),
            active,
            None,
        );
        Ok(())
    }

    /// `MongoHandler`: the template (replaced only when its members or
    /// resources change, `EnsureMongoWithoutSetRef`), `rsInit` and the VIP
    /// labels by OverridePolicy, and the divided, weighted policy.
    fn mongo(&mut self) -> Result<(), String> {
        let name = self.name();
        let labels = base_label(&self.labels(), &name);
        let spec = generate_mongo(self.object, self.rng);
        match self.objects.mongodbs.get_mut(&name) {
            Some(existing) => {
                if existing.spec.get("members") != spec.get("members")
                    || existing.spec.get("resources") != spec.get("resources")
                {
                    existing.generation += 1;
                    self.log.push(format!(
                        "MongoDB template: members {} (generation {})",
                        spec["members"], existing.generation
                    ));
                    existing.spec = spec;
                    existing.labels = labels.clone();
                }
            }
            None => {
                self.log.push(format!(
                    "created MongoDB template: members {}",
                    spec["members"]
                ));
                self.objects.mongodbs.insert(
                    name.clone(),
                    MongoDBTemplate {
                        labels: labels.clone(),
                        spec,
                        generation: 1,
                        status: Json::Null,
                    },
                );
            }
        }
        let first = self
            .params
            .scheduler
            .first()
            .map(|c| c.cluster.clone())
            .ok_or_else(|| "FedState panics: empty scheduler result".to_string())?;
        self.upsert_override(
            &format!("{name}-init"),
            OverridePolicy {
                labels: init_label(&self.labels(), &name),
                resource: ResourceRef::new(Kind::MongoDB, &name),
                clusters: Some(vec![first]),
                overrider: Overrider::AddPath {
                    path: "/spec/rsInit".into(),
                    value: json!(true),
                },
            },
        );
        for cluster in self.params.active.clone() {
            let vip = self
                .params
                .cluster_to_vip
                .get(&cluster)
                .cloned()
                .unwrap_or_default();
            self.upsert_override(
                &format!("{name}-{cluster}-vip"),
                OverridePolicy {
                    labels: cluster_vip_label(&self.labels(), &name),
                    resource: ResourceRef::new(Kind::MongoDB, &name),
                    clusters: Some(vec![cluster.clone()]),
                    overrider: Overrider::AddLabels(one(LABEL_CLUSTER_VIP_INSTANCE, &vip)),
                },
            );
        }
        // GenerateMongoPP: weights in scheduler order, up to the first cluster
        // without members.
        let weights: Vec<StaticClusterWeight> = self
            .params
            .scheduler
            .iter()
            .take_while(|c| c.replicaset != 0)
            .map(|c| StaticClusterWeight {
                cluster: c.cluster.clone(),
                weight: i64::from(c.replicaset),
            })
            .collect();
        let active = self.params.active.clone();
        self.upsert_policy(
            &name,
            labels,
            ResourceRef::new(Kind::MongoDB, &name),
            active,
            Some(weights),
        );
        Ok(())
    }

    /// `StatusHandler`: the MultiCloudMongoDB's status from the ResourceBinding
    /// `<name>-mongodb` (`None`: not created yet).
    pub fn status(&mut self, binding: Option<&ResourceBinding>) -> Result<(), String> {
        let Some(binding) = binding else {
            self.defer_condition(
                "ServerReady",
                "False",
                "ServerReady",
                format!("Service Dispatch Failed And NotReady For External Service, Err: resourcebindings.work.karmada.io \"{}-mongodb\" not found", self.object.name),
            );
            return Err(format!(
                "Get ResourceBinding Failed: {}-mongodb not found",
                self.object.name
            ));
        };
        let status = &mut self.object.status;
        status.state = "UnKnown".into();
        let mut active = Vec::new();
        for cluster in &self.params.active {
            if !active.contains(cluster) {
                active.push(cluster.clone());
            }
        }
        if binding.aggregated_status.len() < active.len() {
            status.result = self
                .params
                .scheduler
                .iter()
                .map(|c| ServiceTopology {
                    replicaset_status: Some(0),
                    replicaset_spec: Some(i64::from(c.replicaset)),
                    connect_addr_with_role: BTreeMap::new(),
                    cluster: c.cluster.clone(),
                    state: "Unknown".into(),
                    current_revision: "Unknown".into(),
                    applied: false,
                })
                .collect();
            self.defer_condition(
                "ServerReady",
                "False",
                "ServerReady",
                "Service Dispatch Failed And NotReady For External Service".into(),
            );
            return Ok(());
        }
        let mut result: Vec<ServiceTopology> = Vec::new();
        let mut external = Vec::new();
        let mut healthy = 0;
        for (i, item) in binding.aggregated_status.iter().enumerate() {
            let Some(reflected) = &item.status else {
                continue;
            };
            let reflected: MongoStatusAsFedStateReadsIt = serde_json::from_value(reflected.clone())
                .map_err(|e| format!("Unmarshal MongoStatus Failed, Err: {e}"))?;
            let spec = self
                .params
                .scheduler
                .iter()
                .filter(|c| c.cluster == item.cluster_name)
                .map(|c| i64::from(c.replicaset))
                .next_back()
                .unwrap_or(0);
            result.push(ServiceTopology {
                replicaset_status: Some(reflected.current_info.members),
                replicaset_spec: Some(spec),
                connect_addr_with_role: BTreeMap::new(),
                cluster: item.cluster_name.clone(),
                state: reflected.state.clone(),
                current_revision: reflected.current_revision.clone(),
                applied: item.applied,
            });
            let vip = self
                .params
                .cluster_to_vip
                .get(&item.cluster_name)
                .cloned()
                .unwrap_or_default();
            // Result[i]: indexed by the binding's item, not by the result's.
            let index_out_of_range = || {
                format!(
                    "FedState panics: StatusHandler indexes status.result by the ResourceBinding item ({i}), and a cluster without status came first"
                )
            };
            if let Some(port) = self.params.arbiter_map.get(&item.cluster_name) {
                result
                    .get_mut(i)
                    .ok_or_else(index_out_of_range)?
                    .connect_addr_with_role
                    .insert(join_host_port(&vip, *port), ARBITER_ROLE.into());
            }
            for member in &reflected.replset {
                if member.name.contains(vip.as_str()) {
                    result
                        .get_mut(i)
                        .ok_or_else(index_out_of_range)?
                        .connect_addr_with_role
                        .insert(member.name.clone(), member.state_str.clone());
                    external.push(member.name.clone());
                }
            }
            if reflected.state == "Running" {
                healthy += 1;
            }
        }
        status.result = result;
        status.external_addr = external.join(",");
        if healthy == binding.aggregated_status.len() {
            status.state = "Health".into();
            self.defer_condition(
                "ServerReady",
                "True",
                "ServerReady",
                "Service Dispatch Successful And Ready For External Service".into(),
            );
        } else {
            status.state = "UnHealth".into();
            self.defer_condition(
                "ServerReady",
                "False",
                "ServerReady",
                "Service Dispatch Failed And NotReady For External Service".into(),
            );
        }
        Ok(())
    }
}

/// `net.JoinHostPort`.
fn join_host_port(host: &str, port: i32) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The fields of FedState's `MongoDBStatus` its StatusHandler reads from a
/// ResourceBinding item (Go's decoder ignores every other field).
#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct MongoStatusAsFedStateReadsIt {
    #[serde(default)]
    state: String,
    #[serde(default)]
    current_revision: String,
    #[serde(default)]
    current_info: CurrentInfo,
    #[serde(default)]
    replset: Vec<ReplSetMember>,
}

#[derive(Deserialize, Default, Debug)]
struct CurrentInfo {
    #[serde(default)]
    members: i64,
}

#[derive(Deserialize, Default, Debug)]
#[serde(rename_all = "camelCase")]
struct ReplSetMember {
    #[serde(default)]
    name: String,
    #[serde(default)]
    state_str: String,
}

/// `k8s.DeleteObjByLabel`: every object of `kind` whose labels match `selector`.
fn delete_by_label<T>(
    objects: &mut BTreeMap<String, T>,
    kind: &str,
    selector: &Labels,
    deleted: &mut Vec<String>,
    labels: impl Fn(&T) -> &Labels,
) {
    objects.retain(|name, object| {
        let hit = matches(labels(object), selector);
        if hit {
            deleted.push(format!("{kind} {name}"));
        }
        !hit
    });
}

/// `deleteExternalResources`, in its order: PropagationPolicies (by the base
/// labels, the arbiter's, the custom ConfigMap's), Services and ConfigMaps
/// with the base labels, the MongoDB, the OverridePolicies (base, VIP, init).
/// The arbiter Service carries no `app.kubernetes.io/instance` and stays until
/// [`garbage_collect`]. Returns what was deleted.
pub fn delete_external_resources(object: &MultiCloudMongoDB, objects: &mut Objects) -> Vec<String> {
    let name = &object.name;
    let base = base_label(&object.labels, name);
    let vip = cluster_vip_label(&object.labels, name);
    let init = init_label(&object.labels, name);
    let arbiter_pp = one(LABEL_ARBITER, name);
    let custom_pp = one(
        LABEL_CUSTOM_CONFIGMAP_PP,
        &format!("{name}-custom-configmap-pp"),
    );
    let mut deleted = Vec::new();
    for selector in [&base, &arbiter_pp, &custom_pp] {
        delete_by_label(
            &mut objects.propagation_policies,
            "PropagationPolicy",
            selector,
            &mut deleted,
            |p| &p.labels,
        );
    }
    delete_by_label(&mut objects.services, "Service", &base, &mut deleted, |s| {
        &s.labels
    });
    delete_by_label(
        &mut objects.config_maps,
        "ConfigMap",
        &base,
        &mut deleted,
        |c| &c.labels,
    );
    delete_by_label(&mut objects.mongodbs, "MongoDB", &base, &mut deleted, |m| {
        &m.labels
    });
    for selector in [&base, &vip, &init] {
        delete_by_label(
            &mut objects.override_policies,
            "OverridePolicy",
            selector,
            &mut deleted,
            |o| &o.labels,
        );
    }
    deleted
}

/// Kubernetes' garbage collector once the finalizer is gone: everything FedState
/// created with the MultiCloudMongoDB as owner (all but the MongoDB template
/// and the user's ConfigMaps). Returns what was deleted.
pub fn garbage_collect(objects: &mut Objects) -> Vec<String> {
    let mut deleted: Vec<String> = objects
        .services
        .keys()
        .map(|n| format!("Service {n}"))
        .collect();
    objects.services.clear();
    objects.config_maps.retain(|n, c| {
        if !c.user_owned {
            deleted.push(format!("ConfigMap {n}"));
        }
        c.user_owned
    });
    deleted.extend(
        objects
            .propagation_policies
            .keys()
            .map(|n| format!("PropagationPolicy {n}")),
    );
    objects.propagation_policies.clear();
    deleted.extend(
        objects
            .override_policies
            .keys()
            .map(|n| format!("OverridePolicy {n}")),
    );
    objects.override_policies.clear();
    deleted
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const VIPS: [(&str, &str); 4] = [
        ("a", "127.9.1.1"),
        ("b", "127.9.2.1"),
        ("c", "127.9.3.1"),
        ("d", "127.9.4.1"),
    ];

    fn vips() -> BTreeMap<String, String> {
        VIPS.iter()
            .map(|(c, v)| (c.to_string(), v.to_string()))
            .collect()
    }

    fn admitted(members: &[(&str, i32)]) -> MultiCloudMongoDB {
        admit(
            MultiCloudMongoDB::sample("demo", "default", members),
            None,
            &mut StdRng::seed_from_u64(1),
        )
        .unwrap()
    }

    /// A pass's result and log (ignored by the passes that only set a scene).
    struct Outcome(Result<Handled, String>, #[allow(dead_code)] Vec<String>);

    /// One instance's control-plane state, passed through FedState's handlers.
    struct Federation {
        object: MultiCloudMongoDB,
        objects: Objects,
        ports: NodePorts,
        rng: StdRng,
        deviations: Deviations,
    }

    impl Federation {
        fn new(object: MultiCloudMongoDB) -> Self {
            Federation {
                object,
                objects: Objects::default(),
                ports: NodePorts::default(),
                rng: StdRng::seed_from_u64(7),
                deviations: Deviations::default(),
            }
        }

        fn pass(&mut self, binding: Option<&ResourceBinding>) -> Outcome {
            let mut pass = Pass::new(
                &mut self.object,
                &mut self.objects,
                &mut self.ports,
                &mut self.rng,
                &self.deviations,
                "2026-01-01T00:00:00Z".into(),
            );
            let mut outcome = pass.handle(&vips());
            if outcome == Ok(Handled::ReadStatus) {
                if let Err(error) = pass.status(binding) {
                    outcome = Err(error);
                }
            }
            pass.finish();
            Outcome(outcome, pass.log)
        }

        fn scale(&mut self, members: &[(&str, i32)]) {
            let mut next = MultiCloudMongoDB::sample("demo", "default", members);
            next.spec.config = self.object.spec.config.clone();
            self.object = admit(next, Some(&self.object), &mut self.rng).unwrap();
        }

        fn port(&self, index: usize) -> i32 {
            self.objects.services[&member_service_name("demo", index)].node_port
        }

        fn service_clusters(&self, index: usize) -> Vec<String> {
            let mut clusters = self.objects.propagation_policies
                [&format!("{}-pp", member_service_name("demo", index))]
                .clusters
                .clone();
            clusters.sort();
            clusters
        }

        fn hostconf(&self) -> &BTreeMap<String, String> {
            &self.objects.config_maps["demo-hostconf"].data
        }

        /// The status every cluster reports when `members` per cluster are in
        /// the set (FedState's StatusHandler reads `currentInfo.members`,
        /// `state` and `replset`).
        fn binding(&self, local: &[(&str, usize)]) -> ResourceBinding {
            let mut replset = Vec::new();
            for (cluster, count) in local {
                for index in 0..*count {
                    replset.push(json!({"name": format!("{}:{}", vips()[*cluster], self.port(index)), "stateStr": "SECONDARY"}));
                }
            }
            ResourceBinding {
                name: "demo-mongodb".into(),
                clusters: vec![],
                aggregated_status: local
                    .iter()
                    .map(|(cluster, count)| crate::karmada::AggregatedStatusItem {
                        cluster_name: cluster.to_string(),
                        status: Some(json!({"state": "Running", "currentInfo": {"members": count}, "replset": replset})),
                        applied: true,
                        health: "Healthy".into(),
                    })
                    .collect(),
            }
        }
    }

    #[test]
    fn the_webhook_defaults_image_and_root_password_and_refuses_what_fedstate_refuses() {
        let object = admitted(&[("a", 1)]);
        assert_eq!(object.spec.image_setting.image, "mongo:3.6");
        let password = object.root_password().unwrap();
        assert_eq!(password.len(), 12, "8 bytes in base64");
        assert!(password.ends_with('='));
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(password)
                .unwrap()
                .len(),
            8
        );
        assert_eq!(
            object.spec.scheduler.scheduler_mode.as_deref(),
            Some("Uniform")
        );

        let again = admit(
            MultiCloudMongoDB::sample("demo", "default", &[("a", 2)]),
            Some(&object),
            &mut StdRng::seed_from_u64(2),
        )
        .unwrap();
        assert_eq!(
            again.root_password(),
            object.root_password(),
            "kept on update"
        );

        let mut no_resource = MultiCloudMongoDB::sample("demo", "default", &[("a", 1)]);
        no_resource.spec.resource = ResourceSetting::default();
        assert!(admit(no_resource, None, &mut StdRng::seed_from_u64(1))
            .unwrap_err()
            .contains("500mi"));
        let mut no_result = MultiCloudMongoDB::sample("demo", "default", &[]);
        no_result.spec.replicaset = Some(1);
        assert!(
            admit(no_result, Some(&object), &mut StdRng::seed_from_u64(1))
                .unwrap_err()
                .contains("not schedulerResult")
        );
    }

    #[test]
    fn the_payload_is_fedstates_generate_mongo() {
        let mut object = admitted(&[("a", 2), ("b", 2), ("c", 1)]);
        object.spec.auth.root_passwd = Some("s3cr3t+/AA==".into());
        object.spec.config.config_set = Some(BTreeMap::from([("LOG_LEVEL".into(), "info".into())]));
        object.spec.config.config_ref = Some("my-custom-mongo-conf".into());
        let payload = generate_mongo(&object, &mut StdRng::seed_from_u64(1));
        assert_eq!(
            payload,
            json!({
                "type": "ReplicaSet",
                "members": 5,
                "image": "mongo:3.6",
                "rootPassword": "s3cr3t+/AA==",
                "resources": {"limits": {"cpu": "2", "memory": "512Mi"}, "requests": {"cpu": "1", "memory": "512Mi"}},
                "persistence": {"storage": "1Gi"},
                "metricsExporterSpec": {"enable": false, "resources": {}},
                "dbUserSpec": {},
                "imagePullSecret": {},
                "customConfigRef": "my-custom-mongo-conf",
                "config": [{"name": "LOG_LEVEL", "value": "info"}],
            })
        );
    }

    #[test]
    fn config_entries_come_in_go_map_order() {
        let mut object = admitted(&[("a", 1)]);
        object.spec.config.config_set = Some(
            ["a", "b", "c", "d", "e"]
                .iter()
                .map(|k| (format!("setParameter.{k}"), "1".to_string()))
                .collect(),
        );
        let orders: BTreeSet<String> = (0..20)
            .map(|seed| {
                generate_mongo(&object, &mut StdRng::seed_from_u64(seed))["config"].to_string()
            })
            .collect();
        assert!(
            orders.len() > 1,
            "the order changes from one payload to the next"
        );
    }

    #[test]
    fn creation_makes_services_hostconf_and_the_template_in_fedstates_shape() {
        let mut federation = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
        federation.object.labels = Labels::from([("team".into(), "db".into())]);
        federation.object.spec.config.arbiter = true;
        let Outcome(outcome, _) = federation.pass(None);
        assert!(outcome.unwrap_err().contains("demo-mongodb not found"));
        let objects = &federation.objects;
        assert_eq!(
            objects.services.keys().collect::<Vec<_>>(),
            ["demo-mongodb-0", "demo-mongodb-1", "demo-mongodb-arbiter"]
        );
        assert_eq!(federation.service_clusters(0), ["a", "b", "c"]);
        assert_eq!(federation.service_clusters(1), ["a", "b"]);
        let member = &objects.services["demo-mongodb-1"];
        assert_eq!(
            member.labels,
            Labels::from([
                ("app".into(), "demo-mongodb-1".into()),
                ("app.kubernetes.io/instance".into(), "demo".into()),
                ("team".into(), "db".into()),
            ])
        );
        assert_eq!(member.selector, member.labels);
        let arbiter = &objects.services["demo-mongodb-arbiter"];
        assert_eq!(
            arbiter.labels,
            Labels::from([
                ("app".into(), "demo-mongodb-arbiter".into()),
                ("team".into(), "db".into()),
            ]),
            "the arbiter Service has no app.kubernetes.io/instance"
        );
        assert_ne!(federation.port(0), federation.port(1));
        // hostconf: both keys, no trailing newline, the arbiter on the cluster
        // with most members (a, first of the tie).
        let hostconf = federation.hostconf();
        let mut datas: Vec<&str> = hostconf["datas"].split('\n').collect();
        datas.sort();
        let mut expected = vec![
            format!("host:'127.9.1.1:{}'", federation.port(0)),
            format!("host:'127.9.2.1:{}'", federation.port(0)),
            format!("host:'127.9.3.1:{}'", federation.port(0)),
            format!("host:'127.9.1.1:{}'", federation.port(1)),
            format!("host:'127.9.2.1:{}'", federation.port(1)),
        ];
        expected.sort();
        assert_eq!(datas, expected);
        assert!(!hostconf["datas"].ends_with('\n'));
        assert_eq!(
            hostconf["arbiters"],
            format!("host:'127.9.1.1:{}'", arbiter.node_port)
        );
        let template = &objects.mongodbs["demo"];
        assert_eq!(template.spec["members"], 5);
        assert_eq!(
            template.labels,
            Labels::from([
                ("app.kubernetes.io/instance".into(), "demo".into()),
                ("team".into(), "db".into())
            ])
        );
        let weights = objects.propagation_policies["demo"]
            .static_weights
            .clone()
            .unwrap();
        assert_eq!(
            weights
                .iter()
                .map(|w| (w.cluster.as_str(), w.weight))
                .collect::<Vec<_>>(),
            [("a", 2), ("b", 2), ("c", 1)]
        );
        let ops = &objects.override_policies;
        assert_eq!(ops["demo-init"].clusters, Some(vec!["a".to_string()]));
        assert_eq!(ops["demo-arbiter"].clusters, Some(vec!["a".to_string()]));
        assert_eq!(
            ops["demo-b-vip"].overrider,
            Overrider::AddLabels(one(LABEL_CLUSTER_VIP_INSTANCE, "127.9.2.1"))
        );
    }

    #[test]
    fn rs_init_and_the_arbiter_follow_the_cluster_with_most_members_every_pass() {
        let mut federation = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
        federation.object.spec.config.arbiter = true;
        federation.pass(None);
        let before = federation.binding(&[("a", 2), ("b", 2), ("c", 1)]);
        federation.pass(Some(&before)).0.unwrap();
        federation.scale(&[("a", 1), ("b", 2), ("c", 1)]);
        federation.pass(Some(&before)).0.unwrap();
        let ops = &federation.objects.override_policies;
        assert_eq!(ops["demo-init"].clusters, Some(vec!["b".to_string()]));
        assert_eq!(ops["demo-arbiter"].clusters, Some(vec!["b".to_string()]));
        assert_eq!(
            federation.objects.propagation_policies["demo-mongodb-arbiter-pp"].clusters,
            ["b"]
        );
    }

    #[test]
    fn scale_down_waits_for_current_members_then_drops_services_by_node_port() {
        let mut federation = Federation::new(admitted(&[("a", 3), ("b", 2), ("c", 1)]));
        federation.pass(None);
        federation.pass(Some(&federation.binding(&[("a", 3), ("b", 2), ("c", 1)])));
        let port2 = federation.port(2);
        federation.scale(&[("a", 1), ("b", 2), ("c", 1)]);

        // a still reports 3 members: nothing is deleted, the template shrinks.
        let Outcome(outcome, _) =
            federation.pass(Some(&federation.binding(&[("a", 3), ("b", 2), ("c", 1)])));
        outcome.unwrap();
        assert_eq!(federation.objects.mongodbs["demo"].spec["members"], 4);
        assert_eq!(federation.service_clusters(1), ["a", "b"]);
        assert!(federation.hostconf()["datas"].contains(&format!("127.9.1.1:{port2}")));

        // a's members 1 and 2 left the set. The pass that reads it from the
        // binding still decides on the previous pass's status.result.
        let shrunk = federation.binding(&[("a", 1), ("b", 2), ("c", 1)]);
        federation.pass(Some(&shrunk)).0.unwrap();
        assert!(federation.objects.services.contains_key("demo-mongodb-2"));
        // The next one cleans up: Service 2 (no cluster uses its nodePort)
        // goes, a leaves Service 1's policy; the deleted policy ends the pass
        // (FedState re-creates it with its resourceVersion).
        let Outcome(outcome, _) = federation.pass(Some(&shrunk));
        assert!(outcome
            .unwrap_err()
            .contains("resourceVersion should not be set"));
        assert!(!federation.objects.services.contains_key("demo-mongodb-2"));
        assert!(!federation
            .objects
            .propagation_policies
            .contains_key("demo-mongodb-2-pp"));
        assert_eq!(federation.service_clusters(1), ["b"]);
        assert!(
            federation.hostconf()["datas"].contains(&format!("127.9.1.1:{port2}")),
            "not rebuilt yet"
        );

        // The next pass rebuilds hostconf.
        let Outcome(outcome, _) =
            federation.pass(Some(&federation.binding(&[("a", 1), ("b", 2), ("c", 1)])));
        outcome.unwrap();
        let datas = &federation.hostconf()["datas"];
        assert_eq!(datas.lines().count(), 4);
        assert!(!datas.contains(&format!(":{port2}'")));
        assert!(!datas.contains(&format!("127.9.1.1:{}", federation.port(1))));
    }

    #[test]
    fn scale_to_zero_withdraws_mongodb_and_hostconf_then_services_once_the_cluster_left_the_binding(
    ) {
        let mut federation = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
        federation.pass(None);
        federation.pass(Some(&federation.binding(&[("a", 2), ("b", 2), ("c", 1)])));
        federation.scale(&[("a", 2), ("b", 2), ("c", 0)]);
        // c still in the binding, reporting 1 member.
        let Outcome(outcome, _) =
            federation.pass(Some(&federation.binding(&[("a", 2), ("b", 2), ("c", 1)])));
        outcome.unwrap();
        let policies = &federation.objects.propagation_policies;
        assert_eq!(
            policies["demo"].clusters,
            ["a", "b"],
            "MongoDB withdrawn from c"
        );
        assert_eq!(
            policies["demo-hostconf-pp"].clusters,
            ["a", "b"],
            "hostconf withdrawn from c, same pass"
        );
        assert_eq!(
            federation.service_clusters(0),
            ["a", "b", "c"],
            "Services wait"
        );
        // Karmada dropped c from the binding: once status.result has no c,
        // FedState no longer waits for it.
        let without_c = federation.binding(&[("a", 2), ("b", 2)]);
        federation.pass(Some(&without_c)).0.unwrap();
        assert_eq!(federation.service_clusters(0), ["a", "b", "c"]);
        let Outcome(outcome, _) = federation.pass(Some(&without_c));
        outcome.unwrap();
        assert_eq!(federation.service_clusters(0), ["a", "b"]);
        assert_eq!(federation.hostconf()["datas"].lines().count(), 4);
    }

    #[test]
    fn a_scale_down_before_any_status_deletes_every_member_service() {
        // FedState checks the clusters that shrink against status.result; with
        // no result yet (the binding was never read) every check passes and
        // ScaleDownCleaner finds no Service in use.
        let mut federation = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
        federation.pass(None);
        federation.scale(&[("a", 1), ("b", 2), ("c", 1)]);
        let Outcome(outcome, _) = federation.pass(None);
        assert!(outcome.is_err());
        assert!(federation.objects.services.is_empty());
    }

    #[test]
    fn a_partial_scale_up_rewrites_service_policies_with_only_the_growing_clusters() {
        let mut federation = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
        federation.pass(None);
        federation.pass(Some(&federation.binding(&[("a", 2), ("b", 2), ("c", 1)])));
        federation.scale(&[("a", 3), ("b", 2), ("c", 2)]);
        federation.pass(Some(&federation.binding(&[("a", 2), ("b", 2), ("c", 1)])));
        // FedState's ClusterScaleHandler: b does not grow, so it loses its Services.
        assert_eq!(federation.service_clusters(0), ["a", "c"]);
        assert_eq!(federation.service_clusters(1), ["a", "c"]);
        assert_eq!(federation.service_clusters(2), ["a"]);
        assert!(!federation.hostconf()["datas"].contains("127.9.2.1"));

        let mut corrected = Federation::new(admitted(&[("a", 2), ("b", 2), ("c", 1)]));
        corrected.deviations.keep_unchanged_clusters_on_scale_up = true;
        corrected.pass(None);
        corrected.scale(&[("a", 3), ("b", 2), ("c", 2)]);
        corrected.pass(None);
        assert_eq!(corrected.service_clusters(0), ["a", "b", "c"]);
        assert_eq!(corrected.service_clusters(1), ["a", "b", "c"]);
        assert_eq!(corrected.service_clusters(2), ["a"]);
        assert_eq!(corrected.hostconf()["datas"].lines().count(), 7);
    }

    #[test]
    fn status_is_read_from_the_binding_as_fedstate_reads_it() {
        let mut federation = Federation::new(admitted(&[("a", 2), ("b", 1)]));
        federation.object.spec.config.arbiter = true;
        federation.pass(None);
        let binding = federation.binding(&[("a", 2), ("b", 1)]);
        federation.pass(Some(&binding)).0.unwrap();
        let status = &federation.object.status;
        assert_eq!(status.state, "Health");
        assert_eq!(status.result.len(), 2);
        assert_eq!(status.result[0].replicaset_status, Some(2));
        let arbiter_port = federation.objects.services["demo-mongodb-arbiter"].node_port;
        assert_eq!(
            status.result[0].connect_addr_with_role[&format!("127.9.1.1:{arbiter_port}")],
            "ARBITER"
        );
        assert_eq!(status.external_addr.split(',').count(), 3);
        let types: Vec<&str> = status.conditions.iter().map(|c| c.type_.as_str()).collect();
        assert_eq!(
            types,
            ["ServerReady", "ServerCheck", "ServerScheduledResult"]
        );
    }

    #[test]
    fn deletion_goes_in_fedstates_order_and_the_arbiter_service_waits_for_garbage_collection() {
        let mut federation = Federation::new(admitted(&[("a", 1), ("b", 1)]));
        federation.object.spec.config.arbiter = true;
        federation.pass(None);
        let deleted = delete_external_resources(&federation.object, &mut federation.objects);
        let kinds: Vec<&str> = deleted
            .iter()
            .map(|d| d.split(' ').next().unwrap())
            .collect();
        let first = |kind: &str| kinds.iter().position(|k| *k == kind).unwrap();
        assert!(first("PropagationPolicy") < first("Service"));
        assert!(first("Service") < first("ConfigMap"));
        assert!(first("ConfigMap") < first("MongoDB"));
        assert!(first("MongoDB") < first("OverridePolicy"));
        assert_eq!(
            federation.objects.services.keys().collect::<Vec<_>>(),
            ["demo-mongodb-arbiter"]
        );
        let collected = garbage_collect(&mut federation.objects);
        assert!(collected.contains(&"Service demo-mongodb-arbiter".to_string()));
        assert_eq!(federation.objects, Objects::default());
    }
}
