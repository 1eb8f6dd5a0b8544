//! Stage `build` (pure): the desired Kubernetes objects of one `MongoDB` instance
//! in this cluster, ready for server-side apply.
//!
//! Nothing here talks to a client, awaits, or reads the environment: every
//! function takes the `MongoDB` object (through a [`BuildContext`]) and a few
//! inputs the Kubernetes I/O stage resolved (a member's Service selector and host,
//! the root password), and returns full objects. Every object carries a controlling
//! owner reference to the `MongoDB` and the `app.kubernetes.io/*` labels of
//! [`labels`].
//!
//! What is built, one module per object family:
//! - [`statefulset`]: one StatefulSet per member Service (and the arbiter's), with
//!   its pod template and the revision the status reports;
//! - [`services`]: the headless governing Service and the exporter's Service;
//! - [`exporter`]: one metrics exporter Deployment per member, outside the
//!   member's pod;
//! - [`pdb`]: the PodDisruptionBudget of the data members;
//! - [`secrets`]: the credentials derived from the root password (FedState
//!   fallback), the operator-managed users' Secrets, the database user's Secret
//!   and the image pull Secret, plus the pure derivations behind them.
//!
//! Object names live in [`names`], labels in [`labels`]; what `spec.config`
//! means, in [`mongod_options`].

pub mod exporter;
pub mod labels;
pub mod mongod_options;
pub mod names;
pub mod pdb;
mod pod;
pub mod secrets;
pub mod services;
pub mod statefulset;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::{Resource, ResourceExt};

use crate::api::{MongoDB, MongoDBSpec};
use crate::keyfile::Keyfile;
use crate::member::MemberSlot;
use crate::tls::MemberTls;

pub use exporter::exporter_deployment;
pub use pdb::member_pod_disruption_budget;
pub use pod::{
    CUSTOM_CONFIG_KEY, DATA_PATH, DATA_VOLUME, KEYFILE_PATH, METRICS_PORT, MONGODB_PORT,
};
use secrets::derived_keyfile;
pub use secrets::{
    admin_credentials_secret, db_user_secret, derive_keyfile, derive_user_password,
    derived_credentials_secret, fingerprint, image_pull_secret, keyfile_secret,
    keyfile_secret_name, monitor_credentials_secret, sha256_hex, tls_secret, CredentialsSource,
    KEYFILE_SECRET_KEY, TLS_CA_FILE, TLS_CERTIFICATE_KEY_FILE,
};
pub use services::{headless_service, metrics_service};
pub use statefulset::{
    member_stateful_set, MemberStatefulSet, CLUSTER_AUTH_ANNOTATION, KEYFILE_KEYS_ANNOTATION,
    KEYFILE_SECRET_ANNOTATION, MEMBER_ENTRY_ANNOTATION, MEMBER_HOST_ANNOTATION,
    REVISION_ANNOTATION, TLS_MODE_ANNOTATION,
};

/// Why desired objects could not be built from the input.
///
/// Only input the API server does not already validate is checked here
/// (malformed quantities, names and so on are refused at admission).
#[derive(
    Debug, Clone, PartialEq, Eq, thiserror::Error, strum::IntoStaticStr, strum::VariantNames,
)]
pub enum BuildError {
    /// The `MongoDB` object has no `metadata.name`.
    #[error("the MongoDB object has no metadata.name")]
    MissingName,
    /// The `MongoDB` object has no `metadata.namespace`.
    #[error("MongoDB {name} has no metadata.namespace")]
    MissingNamespace {
        /// Name of the `MongoDB` object.
        name: String,
    },
    /// The `MongoDB` object has no `metadata.uid` (it was not read from the API
    /// server), so no owner reference can point at it.
    #[error("MongoDB {name} has no metadata.uid: owner references need the stored object")]
    MissingUid {
        /// Name of the `MongoDB` object.
        name: String,
    },
    /// Neither `spec.credentialsSecretRef` nor a non-empty `spec.rootPassword` is set.
    #[error(
        "MongoDB {name} sets neither spec.credentialsSecretRef nor a non-empty spec.rootPassword"
    )]
    MissingCredentials {
        /// Name of the `MongoDB` object.
        name: String,
    },
    /// A member's Service has an empty selector: its StatefulSet would select
    /// nothing and the Service would route to no pod.
    #[error("the Service of member {member} has an empty selector")]
    EmptySelector {
        /// Name of the member's Service and StatefulSet.
        member: String,
    },
    /// `spec.dbUserSpec.enable` is set without a database name or user name.
    #[error("spec.dbUserSpec is enabled but its name or user is empty")]
    IncompleteDbUser,
    /// The keyfile of a referenced credentials Secret was not planned before
    /// the pods were built.
    #[error("the members' keyfile was not planned before their pods were built")]
    KeyfileNotPlanned,
}

impl BuildError {
    /// A bounded PascalCase category (the variant's name), for Event reasons,
    /// condition reasons and metric labels.
    pub fn reason(&self) -> &'static str {
        self.into()
    }
}

/// Every object this cluster should hold for the instance, in the order they
/// are applied (the StatefulSets last, once what their pods mount exists).
#[derive(Debug, Clone)]
pub struct DesiredObjects {
    /// Users' and derived credentials' Secrets, the image pull Secret.
    pub secrets: Vec<Secret>,
    /// The headless governing Service and the exporter's Service.
    pub services: Vec<Service>,
    /// The data members' PodDisruptionBudget.
    pub pod_disruption_budget: PodDisruptionBudget,
    /// One exporter Deployment per member target, when the exporter is enabled.
    pub deployments: Vec<Deployment>,
    /// One StatefulSet per member target.
    pub stateful_sets: Vec<StatefulSet>,
    /// Revision of the member pod template (`None` when no member is built).
    pub revision: Option<String>,
}

/// Builds every desired object of the instance for `targets`, the members this
/// cluster runs; `root_password` is the root user's, from the credentials.
pub fn desired_objects(
    ctx: &BuildContext,
    root_password: &str,
    targets: &[MemberTarget],
) -> Result<DesiredObjects, BuildError> {
    let mut secrets = vec![
        monitor_credentials_secret(ctx, root_password),
        admin_credentials_secret(ctx, root_password),
    ];
    secrets.extend(derived_credentials_secret(ctx)?);
    secrets.push(keyfile_secret(ctx)?);
    secrets.extend(tls_secret(ctx));
    secrets.extend(db_user_secret(ctx, root_password)?);
    secrets.extend(image_pull_secret(ctx));
    let mut services = vec![headless_service(ctx)];
    services.extend(metrics_service(ctx));
    let mut stateful_sets = Vec::with_capacity(targets.len());
    let mut deployments = Vec::new();
    let mut revision = None;
    for target in targets {
        deployments.extend(exporter_deployment(ctx, target));
        let member = member_stateful_set(ctx, target)?;
        stateful_sets.push(member.stateful_set);
        revision = Some(member.revision);
    }
    Ok(DesiredObjects {
        secrets,
        services,
        pod_disruption_budget: member_pod_disruption_budget(ctx),
        deployments,
        stateful_sets,
        revision,
    })
}

/// Everything the builders need from the `MongoDB` object, checked once.
///
/// Its `Debug` shows the identity and the credentials' location only: the spec
/// may hold FedState's plain-text passwords.
#[derive(Clone)]
pub struct BuildContext<'a> {
    mongodb: &'a MongoDB,
    name: String,
    namespace: String,
    owner: OwnerReference,
    credentials: CredentialsSource,
    content_digest: String,
    keyfile: Option<Keyfile>,
    tls: Option<MemberTls>,
}

impl std::fmt::Debug for BuildContext<'_> {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("BuildContext")
            .field("name", &self.name)
            .field("namespace", &self.namespace)
            .field("credentials", &self.credentials)
            .finish_non_exhaustive()
    }
}

impl<'a> BuildContext<'a> {
    /// Checks the object's identity (name, namespace, uid) and resolves where its
    /// credentials come from.
    pub fn from_mongodb(mongodb: &'a MongoDB) -> Result<Self, BuildError> {
        let name = mongodb.meta().name.clone().ok_or(BuildError::MissingName)?;
        let namespace = mongodb
            .namespace()
            .ok_or_else(|| BuildError::MissingNamespace { name: name.clone() })?;
        let owner = mongodb
            .controller_owner_ref(&())
            .ok_or_else(|| BuildError::MissingUid { name: name.clone() })?;
        let credentials = CredentialsSource::resolve(&name, &mongodb.spec)?;
        let keyfile = derived_keyfile(&mongodb.spec).map(|key| Keyfile::of_key(&key));
        Ok(BuildContext {
            mongodb,
            name,
            namespace,
            owner,
            credentials,
            content_digest: String::new(),
            keyfile,
            tls: None,
        })
    }

    /// The same context, with the digest of what the pods run with beyond
    /// their spec (credentials, custom config content): it enters the revision.
    pub fn with_content_digest(mut self, content_digest: String) -> Self {
        self.content_digest = content_digest;
        self
    }

    /// The digest of what the pods run with beyond their spec.
    pub fn content_digest(&self) -> &str {
        &self.content_digest
    }

    /// The same context, with the keyfile the members are to run
    /// ([`crate::keyfile::plan_keyfile`]).
    pub fn with_keyfile(mut self, keyfile: Keyfile) -> Self {
        self.keyfile = Some(keyfile);
        self
    }

    /// The keyfile the members are to run: the one planned, or, before a plan,
    /// the one derived from `spec.rootPassword`.
    pub fn keyfile(&self) -> Result<&Keyfile, BuildError> {
        self.keyfile.as_ref().ok_or(BuildError::KeyfileNotPlanned)
    }

    /// The same context, with the TLS the members run ([`crate::tls::member_tls`]).
    pub fn with_tls(mut self, tls: Option<MemberTls>) -> Self {
        self.tls = tls;
        self
    }

    /// The TLS the members run; `None`: none (or the `disabled` step).
    pub fn tls(&self) -> Option<&MemberTls> {
        self.tls
            .as_ref()
            .filter(|tls| tls.mode != crate::api::TlsMode::Disabled)
    }

    /// Name of the `MongoDB` object (the instance name in every object name).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Namespace of the `MongoDB` object and of everything built from it.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The `MongoDB` spec.
    pub fn spec(&self) -> &'a MongoDBSpec {
        &self.mongodb.spec
    }

    /// Where the keyfile and the root user's credentials come from.
    pub fn credentials(&self) -> &CredentialsSource {
        &self.credentials
    }

    /// Metadata of a built object: its name, the instance's namespace, the
    /// controlling owner reference to the `MongoDB`, and the given labels.
    fn object_meta(&self, name: String, labels: BTreeMap<String, String>) -> ObjectMeta {
        ObjectMeta {
            name: Some(name),
            namespace: Some(self.namespace.clone()),
            labels: Some(labels),
            owner_references: Some(vec![self.owner.clone()]),
            ..ObjectMeta::default()
        }
    }
}

/// One member to run in this cluster, as the Kubernetes I/O stage resolved it
/// from the member's propagated Service (or, once that Service is gone, from the
/// member's existing StatefulSet).
#[derive(Debug, Clone, PartialEq)]
pub struct MemberTarget {
    /// Which member.
    pub slot: MemberSlot,
    /// The propagated Service's selector, normally
    /// `{app.kubernetes.io/instance: <name>, app: <name>-mongodb-<i>}`. The pods
    /// must carry it so that the Service routes to them.
    pub selector: BTreeMap<String, String>,
    /// The member's host `VIP:NodePort`, when known. Once the member's Service is
    /// gone, pass the host recorded in [`MEMBER_HOST_ANNOTATION`]: applying without
    /// it removes the annotation.
    pub host: Option<String>,
    /// The storage its claim template asks for: its StatefulSet's own, which
    /// cannot change (`None`: `spec.persistence.storage`).
    pub claim_storage: Option<Quantity>,
}

impl MemberTarget {
    /// Name of the member's Service and StatefulSet.
    pub fn name(&self, instance: &str) -> String {
        names::slot(instance, self.slot)
    }
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Shared test inputs: a stored `MongoDB` object and member targets.

    use super::*;
    use crate::api::{CredentialsSecretRef, MongoDB};

    pub const NAME: &str = "demo";
    pub const NAMESPACE: &str = "db";
    pub const ROOT_PASSWORD: &str = "s3cret-Root-Pa55";

    /// Members' TLS at `mode` with these files (as the checks found them).
    pub fn member_tls(
        mode: crate::api::TlsMode,
        certificate_key: &[u8],
        ca: &[u8],
    ) -> crate::tls::MemberTls {
        crate::tls::MemberTls {
            mode,
            cluster_auth: crate::api::ClusterAuthMode::KeyFile,
            allow_connections_without_certificates: true,
            certificate_key: certificate_key.to_vec(),
            ca: ca.to_vec(),
            certificate: crate::tls::CheckedCertificate {
                not_before: 0,
                not_after: 1,
                subject: "CN=m".into(),
            },
        }
    }

    /// A `MongoDB` as read from the API server, with FedState's rootPassword.
    pub fn mongodb() -> MongoDB {
        let spec: MongoDBSpec =
            serde_json::from_value(serde_json::json!({ "rootPassword": ROOT_PASSWORD }))
                .expect("minimal spec deserializes with defaults");
        let mut mongodb = MongoDB::new(NAME, spec);
        mongodb.metadata.namespace = Some(NAMESPACE.to_string());
        mongodb.metadata.uid = Some("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0".to_string());
        mongodb
    }

    /// The same object with a propagated credentials Secret instead.
    pub fn mongodb_with_secret_ref() -> MongoDB {
        let mut mongodb = mongodb();
        mongodb.spec.root_password = None;
        mongodb.spec.credentials_secret_ref = Some(CredentialsSecretRef {
            name: "shared-creds".to_string(),
            keyfile_key: "kf".to_string(),
            username_key: "user".to_string(),
            password_key: "pass".to_string(),
        });
        mongodb
    }

    /// Member `index` as its propagated Service describes it.
    pub fn member(index: u32) -> MemberTarget {
        MemberTarget {
            slot: MemberSlot::Data(index),
            selector: BTreeMap::from([
                ("app.kubernetes.io/instance".to_string(), NAME.to_string()),
                ("app".to_string(), names::member(NAME, index)),
            ]),
            host: Some(format!("10.29.5.107:{}", 38018 + index)),
            claim_storage: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;

    #[test]
    fn fedstates_empty_image_pull_secret_means_no_pull_secret() {
        // FedState always sends `imagePullSecret: {}` (a non-pointer struct).
        let mut mongodb = fixtures::mongodb();
        mongodb.spec = serde_json::from_value(serde_json::json!({
            "rootPassword": "x", "imagePullSecret": {}
        }))
        .unwrap();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        assert_eq!(image_pull_secret(&ctx), None);
        let desired = desired_objects(&ctx, "x", &[fixtures::member(0)]).unwrap();
        assert!(desired
            .secrets
            .iter()
            .all(|s| s.type_.as_deref() != Some("kubernetes.io/dockerconfigjson")));
        let pod = desired.stateful_sets[0]
            .spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap();
        assert_eq!(
            pod.image_pull_secrets, None,
            "no empty pull secret attached to the pods"
        );
        mongodb.spec.image_pull_secret.as_mut().unwrap().username = "only-a-user".into();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        assert_eq!(
            image_pull_secret(&ctx),
            None,
            "like FedState: both user and password, or none"
        );
    }

    #[test]
    fn context_resolves_identity_and_owner_reference_of_stored_object() {
        let mongodb = mongodb();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        assert_eq!((ctx.name(), ctx.namespace()), (NAME, NAMESPACE));
        let meta = ctx.object_meta("x".to_string(), BTreeMap::new());
        let owner = &meta.owner_references.unwrap()[0];
        assert_eq!(owner.kind, "MongoDB");
        assert_eq!(owner.api_version, "middleware.fedstate.io/v1alpha1");
        assert_eq!(owner.name, NAME);
        assert_eq!(owner.uid, "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0");
        assert_eq!(owner.controller, Some(true));
    }

    #[test]
    fn context_refuses_object_without_namespace_or_uid() {
        let mut no_namespace = mongodb();
        no_namespace.metadata.namespace = None;
        assert_eq!(
            BuildContext::from_mongodb(&no_namespace).unwrap_err(),
            BuildError::MissingNamespace {
                name: NAME.to_string()
            }
        );
        let mut no_uid = mongodb();
        no_uid.metadata.uid = None;
        let error = BuildContext::from_mongodb(&no_uid).unwrap_err();
        assert_eq!(error.reason(), "MissingUid");
    }

    #[test]
    fn context_refuses_object_without_any_credentials() {
        let mut mongodb = mongodb();
        mongodb.spec.root_password = Some(String::new());
        assert_eq!(
            BuildContext::from_mongodb(&mongodb).unwrap_err(),
            BuildError::MissingCredentials {
                name: NAME.to_string()
            }
        );
    }

    /// Every object built for an instance with every option on, Secrets apart.
    fn every_non_secret_object(mongodb: &MongoDB) -> Vec<serde_json::Value> {
        let ctx = BuildContext::from_mongodb(mongodb).unwrap();
        let arbiter = MemberTarget {
            slot: MemberSlot::Arbiter,
            selector: BTreeMap::from([("app".to_string(), names::arbiter(NAME))]),
            host: None,
            claim_storage: None,
        };
        let mut objects = vec![
            serde_json::to_value(headless_service(&ctx)).unwrap(),
            serde_json::to_value(metrics_service(&ctx).expect("exporter enabled")).unwrap(),
            serde_json::to_value(member_pod_disruption_budget(&ctx)).unwrap(),
        ];
        for target in [member(0), member(1), arbiter] {
            objects.push(serde_json::to_value(exporter_deployment(&ctx, &target)).unwrap());
            objects.push(
                serde_json::to_value(member_stateful_set(&ctx, &target).unwrap().stateful_set)
                    .unwrap(),
            );
        }
        objects
    }

    #[test]
    fn no_secret_value_appears_in_any_non_secret_object() {
        let mut mongodb = mongodb();
        mongodb.spec.metrics_exporter_spec.enable = true;
        mongodb.spec.custom_config_ref = Some("demo-custom".to_string());
        mongodb.spec.db_user_spec = crate::api::DbUserSpec {
            enable: true,
            name: "app".into(),
            user: "appuser".into(),
            password: Some("db-user-Pa55word".into()),
        };
        mongodb.spec.image_pull_secret = Some(crate::api::ImagePullSecretSpec {
            username: "puller".into(),
            password: "registry-Pa55word".into(),
            registry: "registry.example.com".into(),
        });
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let secrets = [
            derived_credentials_secret(&ctx).unwrap().unwrap(),
            monitor_credentials_secret(&ctx, ROOT_PASSWORD),
            admin_credentials_secret(&ctx, ROOT_PASSWORD),
            db_user_secret(&ctx, ROOT_PASSWORD).unwrap().unwrap(),
            image_pull_secret(&ctx).unwrap(),
        ];
        let secret_values: Vec<String> = secrets
            .iter()
            .flat_map(|secret| secret.data.iter().flatten())
            .filter(|(key, _)| key.as_str() != "username" && key.as_str() != "database")
            .map(|(_, value)| String::from_utf8(value.0.clone()).unwrap())
            .chain([
                "db-user-Pa55word".to_string(),
                "registry-Pa55word".to_string(),
                ROOT_PASSWORD.to_string(),
            ])
            .collect();
        assert_eq!(secret_values.len(), 9);

        for object in every_non_secret_object(&mongodb) {
            let json = object.to_string();
            for value in &secret_values {
                assert!(
                    !json.contains(value.as_str()),
                    "{} leaks a secret",
                    object["metadata"]["name"]
                );
            }
        }
    }

    #[test]
    fn member_target_names_follow_the_propagated_services() {
        assert_eq!(member(2).name("demo"), "demo-mongodb-2");
        let arbiter = MemberTarget {
            slot: MemberSlot::Arbiter,
            selector: BTreeMap::new(),
            host: None,
            claim_storage: None,
        };
        assert_eq!(arbiter.name("demo"), "demo-mongodb-arbiter");
    }
}
