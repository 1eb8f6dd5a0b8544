//! The `MongoDB` custom resource (`middleware.fedstate.io/v1alpha1`): the API the
//! control plane (FedState's or any other) writes into each member cluster, and the
//! status this operator reports back.
//!
//! The spec accepts every field of FedState's data-plane `MongoDB`, with FedState's
//! defaults and immutability rules expressed as schema defaults and CEL
//! `x-kubernetes-validations` (so the API server refuses a bad object with a clear
//! message), plus this operator's extensions (credentials Secret, replica-set name,
//! PVC policy, replica-set settings). The status keeps FedState's shape, which its
//! control plane parses, and adds standard conditions and per-member facts. Nothing
//! in the status is ever a secret.
//!
//! Every doc comment here becomes the `kubectl explain` text of its field.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    Affinity, PodSecurityContext, Toleration, TopologySpreadConstraint,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The API group of the `MongoDB` kind.
pub const GROUP: &str = "middleware.fedstate.io";
/// Label carrying this cluster's VIP on the `MongoDB` object (set by the control plane).
pub const VIP_LABEL: &str = "app.multicloudmongodb.io/vip";
/// Label every object of an instance carries: `app.kubernetes.io/instance: <name>`.
pub const INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// Default replica-set name (FedState uses `replset-0`).
pub const DEFAULT_REPLSET_NAME: &str = "replset-0";
/// Default mongod image: a supported release (FedState's `mongo:3.6` is refused in status).
pub const DEFAULT_IMAGE: &str = "mongo:7.0";
/// The annotation by which an SRE asks this cluster's operator for an
/// explicit disaster recovery (a forced reconfig keeping the members that
/// still answer); its value is the reason, and names the request: a request
/// is carried out or refused once, and ignored afterwards
/// (`docs/disaster-recovery.md`).
pub const RECOVERY_ANNOTATION: &str = "middleware.fedstate.io/disaster-recovery";
/// The annotation by which an SRE asks this cluster's operator to forget a
/// cluster lost for good: remove its members from the set, one safe reconfig
/// at a time, and keep them out should they come back. Its value is the lost
/// cluster's VIP, then optionally a reason; it names the request, carried
/// out or refused once (`docs/disaster-recovery.md`).
pub const FORGET_CLUSTER_ANNOTATION: &str = "middleware.fedstate.io/forget-cluster";

/// What a Kubernetes quantity looks like (`1Gi`, `500m`, `1.5`, `2e9`): the
/// pattern controller-gen gives every `resource.Quantity`, so that the API
/// server refuses `lots` instead of the operator building a PVC or a pod that
/// cannot exist.
pub const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
/// A Kubernetes object name (RFC 1123 subdomain), as Secrets and ConfigMaps have.
pub const OBJECT_NAME_PATTERN: &str =
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// An object name, or empty.
pub const OPTIONAL_OBJECT_NAME_PATTERN: &str =
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$";
/// A key of a Secret's or ConfigMap's data.
pub const DATA_KEY_PATTERN: &str = r"^[-._a-zA-Z0-9]+$";

/// Desired state of the MongoDB members hosted in this cluster, and of the
/// cross-cluster replica set they belong to.
// kube's printcolumn(...) lists repeat `type_ = "string"`, which clippy takes
// for a duplicated attribute.
#[allow(clippy::duplicated_attributes)]
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "middleware.fedstate.io",
    version = "v1alpha1",
    kind = "MongoDB",
    plural = "mongodbs",
    singular = "mongodb",
    shortname = "mdb",
    category = "fedstate",
    namespaced,
    status = "MongoDBStatus",
    doc = "A MongoDB replica set spanning the member clusters of a federation; this object describes the members hosted in this cluster.",
    printcolumn(
        name = "State",
        type_ = "string",
        json_path = ".status.state",
        description = "Running, Pause, Reconciling, Error or Unknown"
    ),
    printcolumn(
        name = "Members",
        type_ = "string",
        json_path = ".status.readyMembers",
        description = "local members ready in the replica set / desired"
    ),
    printcolumn(
        name = "Primary",
        type_ = "string",
        json_path = ".status.primary",
        description = "host of the replica set's primary"
    ),
    printcolumn(
        name = "Restart",
        type_ = "string",
        json_path = ".status.restartState",
        description = "NotInProcess, or SecondaryDeleted / PrimaryDeleted while this cluster restarts a member for a roll"
    ),
    printcolumn(
        name = "Age",
        type_ = "date",
        json_path = ".metadata.creationTimestamp"
    )
)]
#[x_kube(
    validation = Rule::new("has(self.credentialsSecretRef) || (has(self.rootPassword) && self.rootPassword != '')").message("set spec.credentialsSecretRef (preferred) or spec.rootPassword (an empty rootPassword is none)"),
    validation = Rule::new("!has(oldSelf.memberConfigRef) || (has(self.memberConfigRef) && self.memberConfigRef == oldSelf.memberConfigRef)").message("spec.memberConfigRef is immutable once set"),
    validation = Rule::new("!has(oldSelf.rootPassword) || (has(self.rootPassword) && self.rootPassword == oldSelf.rootPassword)").message("spec.rootPassword is immutable once set: every cluster derives the shared keyfile from it"),
    validation = Rule::new("has(self.customConfigRef) == has(oldSelf.customConfigRef) && (!has(self.customConfigRef) || self.customConfigRef == oldSelf.customConfigRef)").message("spec.customConfigRef is immutable"),
)]
#[serde(rename_all = "camelCase")]
pub struct MongoDBSpec {
    /// How many members of the replica set this cluster hosts (the control plane
    /// rewrites it per cluster). Member `i` runs in StatefulSet
    /// `<name>-mongodb-<i>` behind the propagated Service of the same name. When it
    /// shrinks, the members with the highest indexes leave the replica set first.
    #[serde(default = "default_members")]
    #[schemars(range(min = 0, max = 50))]
    pub members: i32,

    /// Name of the ConfigMap ("hostconf") listing every member of the replica set
    /// as `VIP:NodePort`. Empty means `<name>-hostconf`. Immutable once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = OPTIONAL_OBJECT_NAME_PATTERN))]
    pub member_config_ref: Option<String>,

    /// True on exactly one cluster: the one allowed to initiate the replica set,
    /// and only when no reachable member already has a replica-set configuration.
    #[serde(default)]
    pub rs_init: bool,

    /// True on the cluster that hosts the replica set's arbiter, if any.
    #[serde(default)]
    pub arbiter: bool,

    /// Deployment type. Only `ReplicaSet` exists. Immutable.
    #[serde(rename = "type", default = "default_type")]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.type is immutable"))]
    pub type_: DeploymentType,

    /// mongod container image. Any image is accepted here (FedState's default is
    /// `mongo:3.6`); the operator refuses releases older than 4.4.2 in status
    /// (state `Error`, reason `UnsupportedMongoDBVersion`): they lack the
    /// safe-reconfig semantics (newlyAdded, one voting change per reconfig) it
    /// relies on.
    #[serde(default = "default_image")]
    #[schemars(length(min = 1))]
    pub image: String,

    /// Image pull policy of the mongod and exporter containers.
    #[serde(default = "default_pull_policy")]
    pub image_pull_policy: PullPolicy,

    /// Registry credentials (FedState field). When both `username` and
    /// `password` are set, the operator turns them into a
    /// `kubernetes.io/dockerconfigjson` Secret used as the pods' image pull
    /// secret; otherwise (FedState always sends `{}`) there is none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_pull_secret: Option<ImagePullSecretSpec>,

    /// CPU and memory of each mongod container.
    #[serde(default = "default_resources")]
    pub resources: ResourceSetting,

    /// Persistent storage of each member's data. `storage` may grow (each
    /// claim is expanded, each StatefulSet's claim template replaced without
    /// restarting its pod); a smaller one is refused in status;
    /// `storageClassName` is immutable.
    #[serde(default)]
    pub persistence: PersistenceSpec,

    /// Scheduling and security settings merged into each member pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod_spec: Option<MemberPodSpec>,

    /// mongod configuration-file settings, each named by its dotted path and
    /// passed to mongod as its command-line option, in the order of their
    /// names: `net.compression.compressors`, `net.maxIncomingConnections`,
    /// `operationProfiling.slowOpSampleRate`, `operationProfiling.slowOpThresholdMs`,
    /// `replication.oplogSizeMB`, `storage.wiredTiger.collectionConfig.blockCompressor`,
    /// `storage.wiredTiger.engineConfig.cacheSizeGB`, `systemLog.quiet`, and
    /// `setParameter.<name>` for the server parameters `cursorTimeoutMillis`,
    /// `diagnosticDataCollectionEnabled`, `logLevel`,
    /// `maxTransactionLockRequestTimeoutMillis`, `minSnapshotHistoryWindowInSeconds`,
    /// `notablescan`, `transactionLifetimeLimitSeconds` and `ttlMonitorEnabled`.
    /// Any other entry (FedState's sample `LOG_LEVEL`, a parameter mongod does not
    /// know, a setting the operator owns such as `replSet` or `keyFile`, a value out
    /// of range, a name given twice) is never passed to mongod, which would refuse
    /// to start; it is reported in the `ConfigAccepted` condition and a Warning
    /// Event. Other settings go in the ConfigMap of `customConfigRef`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 64))]
    #[x_kube(validation = Rule::new("self.all(c, !c.name.matches('^(net\\\\.)?(tls|ssl)') && !c.name.matches('^setParameter\\\\.(tls|ssl)') && c.name != 'security.clusterAuthMode')").message("TLS is set with spec.tls, not spec.config"))]
    pub config: Vec<ConfigVar>,

    /// Name of a ConfigMap whose key `mongod.yaml` holds extra mongod
    /// configuration, mounted and passed with `--config`. Immutable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253), regex(pattern = OBJECT_NAME_PATTERN))]
    pub custom_config_ref: Option<String>,

    /// FedState's plain-text root password. Deprecated fallback: when no
    /// `credentialsSecretRef` is given, the operator derives the keyfile and the
    /// root user's Secret from it (identically in every cluster) and reports a
    /// warning condition. Prefer `credentialsSecretRef`. Immutable once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub root_password: Option<String>,

    /// Reference to a Secret, propagated identically to every cluster, holding
    /// the replica set's keyfile and the root user's name and password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_secret_ref: Option<CredentialsSecretRef>,

    /// Optional application database user (FedState field).
    #[serde(default)]
    pub db_user_spec: DbUserSpec,

    /// Optional Prometheus exporter, one per member beside it (FedState field).
    #[serde(default)]
    pub metrics_exporter_spec: MetricsExporterSpec,

    /// Stop every change to this instance (Kubernetes objects and replica set)
    /// until set back to false. Status keeps being reported.
    #[serde(default)]
    pub pause: bool,

    /// Name of the replica set (`--replSet`). Must be the same in every cluster.
    /// Immutable.
    #[serde(default = "default_replset_name")]
    #[schemars(length(min = 1, max = 64), regex(pattern = r"^[A-Za-z0-9_-]+$"))]
    #[x_kube(validation = Rule::new("self == oldSelf").message("spec.replSetName is immutable"))]
    pub repl_set_name: String,

    /// What happens to the PVC of a member removed from the replica set after its
    /// StatefulSet is deleted: `Retain` (default) keeps the data, `Delete` removes it.
    #[serde(default)]
    pub removed_member_pvc_policy: PvcPolicy,

    /// Replica-set `settings` applied at initiate and kept in step by reconfig.
    /// Sites far apart need longer timeouts than MongoDB's defaults.
    #[serde(default)]
    pub replica_set_settings: ReplicaSetSettings,

    /// TLS on every connection to and between the members, and the
    /// certificate they serve. Absent: no TLS, as before (the pods are built
    /// exactly as without the field).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSettings>,

    /// The featureCompatibilityVersion to raise the set to (`"8.0"`), once every
    /// member in every cluster runs that release and no pod is outdated; the
    /// rsInit cluster's operator raises it. Unset: the FCV is never changed.
    /// The image moves one release past the FCV at most.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9]+\.[0-9]+$"))]
    pub feature_compatibility_version: Option<String>,
}

/// FedState's `type` field.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum DeploymentType {
    /// A replica set.
    #[default]
    ReplicaSet,
}

/// Kubernetes image pull policy.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum PullPolicy {
    /// Always pull.
    Always,
    /// Pull when the image is missing on the node.
    #[default]
    IfNotPresent,
    /// Never pull.
    Never,
}

impl PullPolicy {
    /// The Kubernetes spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PullPolicy::Always => "Always",
            PullPolicy::IfNotPresent => "IfNotPresent",
            PullPolicy::Never => "Never",
        }
    }
}

/// What to do with a removed member's PVC.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, Default)]
pub enum PvcPolicy {
    /// Keep the PVC (and the data) after the member left the replica set.
    #[default]
    Retain,
    /// Delete the PVC once the member has left the replica set and its
    /// StatefulSet is gone.
    Delete,
}

/// Registry credentials for pulling the images.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImagePullSecretSpec {
    /// Registry user name.
    #[serde(default)]
    pub username: String,
    /// Registry password.
    #[serde(default)]
    pub password: String,
    /// Registry host the credentials are for.
    #[serde(default = "default_registry")]
    pub registry: String,
}

impl MongoDBSpec {
    /// The registry credentials when complete: FedState sends `imagePullSecret:
    /// {}` for none, and uses them only when both user and password are set.
    pub fn registry_credentials(&self) -> Option<&ImagePullSecretSpec> {
        self.image_pull_secret
            .as_ref()
            .filter(|r| !r.username.is_empty() && !r.password.is_empty())
    }
}

/// CPU and memory limits and requests (Kubernetes quantities).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct ResourceSetting {
    /// Upper bounds, e.g. `cpu: "1"`, `memory: 1Gi`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("additionalProperties" = quantity_schema()))]
    pub limits: BTreeMap<String, Quantity>,
    /// Guaranteed amounts, used for scheduling.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("additionalProperties" = quantity_schema()))]
    pub requests: BTreeMap<String, Quantity>,
}

/// A member's persistent volume.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("has(self.storageClassName) == has(oldSelf.storageClassName) && (!has(self.storageClassName) || self.storageClassName == oldSelf.storageClassName)").message("spec.persistence.storageClassName is immutable"),
)]
pub struct PersistenceSpec {
    /// Size of each member's PVC: may be increased (where the StorageClass
    /// allows volume expansion), never decreased.
    #[serde(default = "default_storage")]
    #[schemars(extend("pattern" = QUANTITY_PATTERN))]
    pub storage: Quantity,
    /// StorageClass of the PVCs; empty uses the cluster's default class.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage_class_name: Option<String>,
}

impl Default for PersistenceSpec {
    fn default() -> Self {
        PersistenceSpec {
            storage: default_storage(),
            storage_class_name: None,
        }
    }
}

/// The part of a pod spec a user may set (FedState's `podSpec`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct MemberPodSpec {
    /// Node labels the member pods must run on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Pod security context; the operator's restricted defaults fill what is unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub security_context: Option<PodSecurityContext>,
    /// Affinity; when unset, members prefer to run on different nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Accepted for FedState compatibility; StatefulSet pods always restart (`Always`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_policy: Option<String>,
    /// Tolerations of the member pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tolerations: Option<Vec<Toleration>>,
    /// Topology spread constraints of the member pods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_spread_constraints: Option<Vec<TopologySpreadConstraint>>,
}

/// One mongod configuration-file setting (FedState's `ConfigVar`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigVar {
    /// The setting's dotted configuration-file name, e.g.
    /// `storage.wiredTiger.engineConfig.cacheSizeGB` (see `spec.config`).
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Option value.
    #[serde(default)]
    pub value: String,
}

/// A Secret holding the shared credentials of the replica set.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsSecretRef {
    /// Secret name, in the MongoDB object's namespace.
    #[schemars(length(min = 1, max = 253), regex(pattern = OBJECT_NAME_PATTERN))]
    pub name: String,
    /// Key of the keyfile (6–1024 base64 characters, identical in every cluster).
    #[serde(default = "default_keyfile_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = DATA_KEY_PATTERN))]
    pub keyfile_key: String,
    /// Key of the root user's name.
    #[serde(default = "default_username_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = DATA_KEY_PATTERN))]
    pub username_key: String,
    /// Key of the root user's password.
    #[serde(default = "default_password_key")]
    #[schemars(length(min = 1, max = 253), regex(pattern = DATA_KEY_PATTERN))]
    pub password_key: String,
}

/// The application database user (FedState's `dbUserSpec`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(
    validation = Rule::new("self.enable == oldSelf.enable").message("spec.dbUserSpec.enable is immutable"),
    validation = Rule::new("!self.enable || (self.name == oldSelf.name && self.user == oldSelf.user)").message("spec.dbUserSpec.name and user are immutable while enabled"),
    validation = Rule::new("!self.enable || (self.name != '' && self.user != '')").message("spec.dbUserSpec.name and user are required when enable is true"),
)]
pub struct DbUserSpec {
    /// Create and keep the user.
    #[serde(default)]
    pub enable: bool,
    /// Database the user gets `readWrite` on.
    #[serde(default)]
    pub name: String,
    /// User name.
    #[serde(default)]
    pub user: String,
    /// Password (FedState field, plain text). Changing it rotates the password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub password: Option<String>,
}

/// The Prometheus exporter: one Deployment per member, outside the member's
/// pod, so that a failing exporter never makes its member unready.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetricsExporterSpec {
    /// Run an exporter per member and their Service; `false` removes them.
    /// Neither restarts a member.
    #[serde(default)]
    pub enable: bool,
    /// Exporter image.
    #[serde(default = "default_exporter_image")]
    pub image: String,
    /// CPU and memory of the exporter container (defaults: 50m CPU and 64Mi
    /// memory requested, 128Mi memory limited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceSetting>,
}

impl Default for MetricsExporterSpec {
    fn default() -> Self {
        MetricsExporterSpec {
            enable: false,
            image: default_exporter_image(),
            resources: None,
        }
    }
}

/// TLS of the members (`net.tls` of mongod).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = Rule::new("self.mode == 'disabled' || has(self.certificateSecretRef)").message("spec.tls.certificateSecretRef is required unless spec.tls.mode is disabled"))]
#[x_kube(validation = Rule::new("!has(self.clusterAuthMode) || self.clusterAuthMode == 'keyFile' || self.mode == 'requireTLS'").message("spec.tls.clusterAuthMode other than keyFile needs spec.tls.mode requireTLS"))]
pub struct TlsSettings {
    /// `disabled`, `allowTLS`, `preferTLS` or `requireTLS` (mongod's
    /// `net.tls.mode`). At `requireTLS` every client needs TLS.
    pub mode: TlsMode,
    /// The Secret of this cluster's member certificate, in cert-manager's
    /// form: `tls.crt` (the certificate, then its intermediates), `tls.key`,
    /// `ca.crt` (the CAs every member's certificate is verified against). The
    /// certificate needs this cluster's VIP as an IP SAN and both serverAuth
    /// and clientAuth usage (mongod presents it to the other members).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_secret_ref: Option<SecretRef>,
    /// Let clients connect without a certificate of their own (mongod's
    /// `--tlsAllowConnectionsWithoutCertificates`); otherwise every client
    /// presents one signed by a CA of `ca.crt`.
    #[serde(default)]
    pub allow_connections_without_certificates: bool,
    /// How members authenticate to each other (mongod's
    /// `security.clusterAuthMode`): `keyFile` (the default), then
    /// `sendKeyFile`, `sendX509`, `x509` (members authenticate with their
    /// certificates, whose subjects agree on O, OU and DC). Moved one step at
    /// a time, set-wide; any but `keyFile` needs `mode: requireTLS`.
    #[serde(default, skip_serializing_if = "ClusterAuthMode::is_key_file")]
    pub cluster_auth_mode: ClusterAuthMode,
}

/// mongod's cluster authentication modes, from keyfiles to x.509.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub enum ClusterAuthMode {
    /// Members send and accept the keyfile.
    #[default]
    #[serde(rename = "keyFile")]
    KeyFile,
    /// Members send the keyfile; they accept it or an x.509 certificate.
    #[serde(rename = "sendKeyFile")]
    SendKeyFile,
    /// Members send their certificate; they accept it or the keyfile.
    #[serde(rename = "sendX509")]
    SendX509,
    /// Members send and accept certificates only.
    #[serde(rename = "x509")]
    X509,
}

impl ClusterAuthMode {
    /// Every mode, from keyfiles to x.509.
    pub const ALL: [ClusterAuthMode; 4] = [
        ClusterAuthMode::KeyFile,
        ClusterAuthMode::SendKeyFile,
        ClusterAuthMode::SendX509,
        ClusterAuthMode::X509,
    ];

    /// The mode mongod names `name`.
    pub fn parse(name: &str) -> Option<ClusterAuthMode> {
        Self::ALL.into_iter().find(|mode| mode.as_str() == name)
    }

    /// mongod's name of the mode (`--clusterAuthMode`).
    pub fn as_str(self) -> &'static str {
        match self {
            ClusterAuthMode::KeyFile => "keyFile",
            ClusterAuthMode::SendKeyFile => "sendKeyFile",
            ClusterAuthMode::SendX509 => "sendX509",
            ClusterAuthMode::X509 => "x509",
        }
    }

    /// `keyFile`, the mode without x.509 (serde's skip test).
    pub fn is_key_file(&self) -> bool {
        *self == ClusterAuthMode::KeyFile
    }
}

/// mongod's TLS modes, weakest first.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub enum TlsMode {
    /// No TLS.
    #[serde(rename = "disabled")]
    Disabled,
    /// TLS accepted from clients; members dial each other in plain text.
    #[serde(rename = "allowTLS")]
    AllowTls,
    /// TLS and plain accepted; members dial each other over TLS.
    #[serde(rename = "preferTLS")]
    PreferTls,
    /// TLS only.
    #[serde(rename = "requireTLS")]
    RequireTls,
}

impl TlsMode {
    /// The mode mongod names `name`.
    pub fn parse(name: &str) -> Option<TlsMode> {
        [
            TlsMode::Disabled,
            TlsMode::AllowTls,
            TlsMode::PreferTls,
            TlsMode::RequireTls,
        ]
        .into_iter()
        .find(|mode| mode.as_str() == name)
    }

    /// mongod's name of the mode (`--tlsMode`).
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::AllowTls => "allowTLS",
            TlsMode::PreferTls => "preferTLS",
            TlsMode::RequireTls => "requireTLS",
        }
    }
}

/// A Secret in the object's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
pub struct SecretRef {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = OBJECT_NAME_PATTERN))]
    pub name: String,
}

/// Replica-set `settings` (see MongoDB's replica set configuration reference).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplicaSetSettings {
    /// Time without a primary before an election is called.
    #[serde(default = "default_election_timeout")]
    #[schemars(range(min = 1, max = 86400000))]
    pub election_timeout_millis: i64,
    /// Interval between heartbeats.
    #[serde(default = "default_heartbeat_interval")]
    #[schemars(range(min = 1, max = 86400000))]
    pub heartbeat_interval_millis: i64,
    /// How long a new primary catches up before accepting writes; -1 is unlimited.
    #[serde(default = "default_catch_up_timeout")]
    #[schemars(range(min = -1))]
    pub catch_up_timeout_millis: i64,
    /// Whether secondaries may replicate from other secondaries.
    #[serde(default = "default_true")]
    pub chaining_allowed: bool,
}

impl Default for ReplicaSetSettings {
    fn default() -> Self {
        ReplicaSetSettings {
            election_timeout_millis: default_election_timeout(),
            heartbeat_interval_millis: default_heartbeat_interval(),
            catch_up_timeout_millis: default_catch_up_timeout(),
            chaining_allowed: true,
        }
    }
}

/// Observed state, in FedState's shape (its control plane parses it) plus
/// standard conditions and per-member facts. Never holds a secret.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct MongoDBStatus {
    /// Overall state: Running, Pause, Reconciling, Error or Unknown.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<MongoState>,
    /// FedState's restart state (`NotInProcess`, `SecondaryDeleted`, `PrimaryDeleted`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_state: Option<String>,
    /// Every member of the replica set across all clusters, as `replSetGetStatus`
    /// reports them. The control plane deletes the Service of a member that
    /// disappears from this list, so it is never blanked: while a pass cannot
    /// read the set, it keeps the last view (with `primary` and
    /// `currentInfo.members`), and condition `ReplicaSetObserved` is False.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub replset: Vec<ReplSetMemberStatus>,

    /// When the view in `replset`, `primary` and `currentInfo.members` was
    /// first observed as it is (it changes only when the view does).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_set_observed_at: Option<Time>,
    /// The set's featureCompatibilityVersion, as last read from its primary.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feature_compatibility_version: Option<String>,
    /// The default write concern in force for writes that name none, and
    /// where it comes from, as `getDefaultRWConcern` last told it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default_write_concern: Option<DefaultWriteConcernStatus>,
    /// Revision of the spec last applied to the member StatefulSets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub current_revision: Option<String>,
    /// FedState's summary of what runs here.
    #[serde(default)]
    pub current_info: CurrentInfo,
    /// Standard conditions with observedGeneration: Ready, ReplicaSetInitialized,
    /// MembersInSync, Progressing, Degraded, CredentialsFromSpec,
    /// ConfigAccepted, StorageSufficient, ReplicaSetObserved, SettingsMatch, ObjectsApplied and
    /// UpToDate (docs/runbook.md says what each reason means).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["type"]))]
    pub conditions: Vec<Condition>,
    /// The spec generation this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Host of the replica set's primary, if one is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub primary: Option<String>,
    /// Version of the replica-set configuration last seen.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_version: Option<i64>,
    /// `settings.replicaSetId` of the replica set, recorded at initiate or first sight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_set_id: Option<String>,
    /// Local members healthy in the replica set / desired, e.g. `2/2`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_members: Option<String>,
    /// Facts about each member this cluster hosts or is removing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub local_members: Vec<LocalMemberStatus>,
    /// The last disaster recovery asked of this cluster (annotation
    /// `middleware.fedstate.io/disaster-recovery`): what it keeps and drops,
    /// and how far it went. Kept until another request replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recovery: Option<RecoveryStatus>,
    /// The last request to forget a lost cluster asked of this cluster
    /// (annotation `middleware.fedstate.io/forget-cluster`): which members,
    /// and how far it went. Kept until another request replaces it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forget_cluster: Option<ForgetClusterStatus>,
    /// The certificate this cluster's members are given (with `spec.tls`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsStatus>,
}

/// The certificate of `spec.tls.certificateSecretRef`, as the operator
/// checked it before giving it to the members.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct TlsStatus {
    /// The certificate's subject.
    pub subject: String,
    /// When the certificate expires.
    pub not_after: Time,
}

/// The default write concern in force, and its source.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct DefaultWriteConcernStatus {
    /// `w`, e.g. `majority` or `1`; absent before mongod 5.0 when none is
    /// set (each write's own, else `w: 1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w: Option<String>,
    /// `global`: set cluster-wide with `setDefaultRWConcern` (by this
    /// operator right after initiate, or by a person); `implicit`: derived
    /// from the config by mongod 5.0+, which then refuses any reconfig that
    /// changes it; `none`: mongod before 5.0 with none set.
    pub source: String,
}

/// A disaster recovery asked for by annotation, and how far it went.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct RecoveryStatus {
    /// The request: the annotation's value (its reason).
    pub request: String,
    /// Planned, Forced, Done or Refused.
    pub phase: RecoveryPhase,
    /// What was or will be done, or why not, in words.
    pub message: String,
    /// The config version the forced reconfig starts from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from_config_version: Option<i64>,
    /// The members the forced config keeps (`host:port`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub keeping: Vec<String>,
    /// The members the forced config drops (`host:port`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropping: Vec<String>,
    /// The local member the forced reconfig was sent to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forced_on: Option<String>,
    /// When the phase was entered.
    pub since: Time,
}

/// How far a disaster recovery went.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, strum::IntoStaticStr,
)]
pub enum RecoveryPhase {
    /// Reported: the next pass forces this plan if the set still lacks a voting
    /// majority and the plan has not changed.
    Planned,
    /// The forced reconfig was sent; the recovery is recorded in the replica
    /// set once it has a primary again.
    Forced,
    /// Forced and recorded in the set; the request is ignored from now on.
    Done,
    /// Not carried out (the reason is in `message`); the request is ignored
    /// from now on: ask again with another reason.
    Refused,
}

/// A request to forget a lost cluster, and how far it went.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ForgetClusterStatus {
    /// The request: the annotation's value.
    pub request: String,
    /// The VIP of the cluster to forget.
    pub cluster: String,
    /// Removing, Done or Refused.
    pub phase: ForgetClusterPhase,
    /// What was or will be done, or why not, in words.
    pub message: String,
    /// The cluster's members in the config when the request was taken up
    /// (`host:port`): recorded in the replica set, so that none of them is
    /// re-added as it is.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<String>,
    /// When the phase was entered.
    pub since: Time,
}

/// How far forgetting a lost cluster went.
#[derive(
    Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, strum::IntoStaticStr,
)]
pub enum ForgetClusterPhase {
    /// Its members are recorded in the set as forgotten; they are removed one
    /// safe reconfig per pass (the planner's `RemoveForgottenMember`).
    Removing,
    /// No member of the cluster is left in the config; the request is ignored
    /// from now on.
    Done,
    /// Not carried out (the reason is in `message`); the request is ignored
    /// from now on: ask again with another reason.
    Refused,
}

/// FedState's overall state values.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum MongoState {
    /// Every local member is in the replica set and healthy.
    Running,
    /// `spec.pause` is set: nothing is changed.
    Pause,
    /// The operator is making changes or waiting for them to take effect.
    Reconciling,
    /// The operator cannot proceed; see the conditions.
    Error,
    /// Not yet observed.
    Unknown,
}

/// One replica-set member, as `replSetGetStatus` reports it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplSetMemberStatus {
    /// Member `_id` in the replica-set configuration.
    #[serde(rename = "_id")]
    pub id: i64,
    /// Member host, `VIP:NodePort`.
    pub name: String,
    /// 1 when reachable, 0 otherwise.
    pub health: f64,
    /// Numeric member state (1 PRIMARY, 2 SECONDARY, 7 ARBITER, 8 DOWN, …).
    pub state: i32,
    /// Member state name.
    pub state_str: String,
    /// Host this member replicates from.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub sync_source_host: String,
}

/// FedState's `currentInfo`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct CurrentInfo {
    /// Local members that are in the replica set and healthy (Karmada's health
    /// check compares it with spec.members).
    pub members: i32,
    /// SHA-256 fingerprint (first 16 hex digits) of the database user's password,
    /// to detect rotations. FedState stored the password itself; this never does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub db_user_password_fingerprint: Option<String>,
}

/// Facts about one member hosted in this cluster.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, KubeSchema)]
#[serde(rename_all = "camelCase")]
pub struct LocalMemberStatus {
    /// Member index (`<name>-mongodb-<index>`).
    pub index: i32,
    /// StatefulSet (and Service) name.
    pub stateful_set: String,
    /// Pod name.
    pub pod: String,
    /// NodePort of the member's Service, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_port: Option<i32>,
    /// Member host `VIP:NodePort`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Role in the replica set (PRIMARY, SECONDARY, …), `NotInConfig`, or `Unknown`
    /// when this pass could not read the set.
    pub role: String,
    /// Replication lag behind the primary, in seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lag_seconds: Option<i64>,
    /// The revision its pod runs (compare with `currentRevision`, the
    /// revision of its StatefulSet's pod template).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
    /// The TLS mode it runs (`getParameter tlsMode`), asked with `spec.tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_mode: Option<TlsMode>,
}

/// The schema of a quantity in a map of quantities (`resources.limits`):
/// an int-or-string of [`QUANTITY_PATTERN`].
fn quantity_schema() -> serde_json::Value {
    serde_json::json!({
        "description": "A Kubernetes quantity, e.g. `500m` or `1Gi`.",
        "x-kubernetes-int-or-string": true,
        "pattern": QUANTITY_PATTERN,
    })
}

fn default_members() -> i32 {
    1
}
fn default_type() -> DeploymentType {
    DeploymentType::ReplicaSet
}
fn default_image() -> String {
    DEFAULT_IMAGE.to_string()
}
fn default_pull_policy() -> PullPolicy {
    PullPolicy::IfNotPresent
}
fn default_registry() -> String {
    "docker.io".to_string()
}
fn default_resources() -> ResourceSetting {
    let quantities = |cpu: &str, memory: &str| {
        BTreeMap::from([
            ("cpu".to_string(), Quantity(cpu.to_string())),
            ("memory".to_string(), Quantity(memory.to_string())),
        ])
    };
    ResourceSetting {
        limits: quantities("1", "1Gi"),
        requests: quantities("50m", "100Mi"),
    }
}
fn default_storage() -> Quantity {
    Quantity("1Gi".to_string())
}
fn default_keyfile_key() -> String {
    "keyfile".to_string()
}
fn default_username_key() -> String {
    "username".to_string()
}
fn default_password_key() -> String {
    "password".to_string()
}
fn default_exporter_image() -> String {
    "percona/mongodb_exporter:0.43".to_string()
}
fn default_replset_name() -> String {
    DEFAULT_REPLSET_NAME.to_string()
}
fn default_election_timeout() -> i64 {
    10_000
}
fn default_heartbeat_interval() -> i64 {
    2_000
}
fn default_catch_up_timeout() -> i64 {
    -1
}
fn default_true() -> bool {
    true
}
