//! The `MultiCloudMongoDB` as FedState defines it:
//! `api/v1alpha1/multicloudmongodb_types.go` (spec and status),
//! `api/v1alpha1/condition.go` (`ServerCondition`, `SetTypeCondition`) and
//! `pkg/model/scheduler.go` (the scheduler result FedState's external scheduler
//! writes into an annotation).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::karmada::Labels;

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
    pub(super) fn is_empty(&self) -> bool {
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
    pub(super) fn set_condition(
        &mut self,
        type_: &str,
        status: &str,
        reason: &str,
        message: &str,
        now: &str,
    ) {
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
