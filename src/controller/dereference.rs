//! Stage `dereference` (Kubernetes I/O): reads everything a `MongoDB` object
//! refers to — the hostconf ConfigMap, the credentials Secret, the propagated
//! member Services, and the StatefulSets and pods this operator runs — and checks
//! it with [`crate::validate`].

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::api::{MongoDB, INSTANCE_LABEL};
use crate::build::{names, CredentialsSource, MEMBER_HOST_ANNOTATION};
use crate::hostconf::{HostConf, MemberAddress};
use crate::planner::MemberSlot;
use crate::status::Problem;
use crate::validate::{self, SharedCredentials};

/// A propagated member Service, as far as the operator needs it.
#[derive(Clone, Debug)]
pub struct MemberService {
    /// Its selector: the member pods must carry it.
    pub selector: BTreeMap<String, String>,
    /// Its nodePort, once allocated.
    pub node_port: Option<i32>,
}

/// A StatefulSet this operator runs for a member.
#[derive(Clone, Debug)]
pub struct MemberStatefulSetFacts {
    /// The member host recorded on it (kept for when the Service is gone).
    pub recorded_host: Option<MemberAddress>,
    /// Whether its pod is running.
    pub pod_running: bool,
}

/// What the object refers to, read and checked.
pub struct Dereferenced {
    /// This cluster's VIP.
    pub vip: String,
    /// Name of the hostconf ConfigMap.
    pub hostconf_name: String,
    /// Every member of the set.
    pub hostconf: HostConf,
    /// Where credentials come from.
    pub credentials_source: CredentialsSource,
    /// The keyfile and root user.
    pub credentials: SharedCredentials,
    /// Propagated member Services by slot.
    pub services: BTreeMap<MemberSlot, MemberService>,
    /// This operator's member StatefulSets by slot.
    pub stateful_sets: BTreeMap<MemberSlot, MemberStatefulSetFacts>,
}

impl Dereferenced {
    /// A slot's address: `VIP:nodePort` from its Service, else the host recorded
    /// on its StatefulSet.
    pub fn address(&self, slot: MemberSlot) -> Option<MemberAddress> {
        let from_service = self
            .services
            .get(&slot)
            .and_then(|s| s.node_port)
            .and_then(|port| u16::try_from(port).ok())
            .map(|port| MemberAddress {
                host: self.vip.clone(),
                port,
            });
        from_service.or_else(|| {
            self.stateful_sets
                .get(&slot)
                .and_then(|s| s.recorded_host.clone())
        })
    }
}

/// The hostconf ConfigMap's name: `spec.memberConfigRef`, or `<name>-hostconf`.
pub fn hostconf_name(mongodb: &MongoDB) -> String {
    match mongodb.spec.member_config_ref.as_deref() {
        Some(name) if !name.is_empty() => name.to_string(),
        _ => format!("{}-hostconf", mongodb.name_any()),
    }
}

/// Which slot a member Service or StatefulSet name is, for this instance.
pub fn slot_of(instance: &str, object_name: &str) -> Option<MemberSlot> {
    if object_name == names::arbiter(instance) {
        return Some(MemberSlot::Arbiter);
    }
    let index = object_name.strip_prefix(&format!("{instance}-mongodb-"))?;
    if index.is_empty() || index.starts_with('0') && index.len() > 1 {
        return None;
    }
    index.parse().ok().map(MemberSlot::Data)
}

/// Reads and checks everything `mongodb` refers to.
pub async fn dereference(
    client: &Client,
    mongodb: &MongoDB,
) -> Result<Dereferenced, DereferenceError> {
    let namespace = mongodb.namespace().unwrap_or_default();
    let instance = mongodb.name_any();
    let vip = validate::vip(mongodb.labels()).map_err(DereferenceError::Invalid)?;

    let hostconf_name = hostconf_name(mongodb);
    let config_map = Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .get_opt(&hostconf_name)
        .await?;
    let Some(config_map) = config_map else {
        return Err(DereferenceError::Invalid(Problem {
            reason: "HostconfMissing",
            message: format!("ConfigMap {hostconf_name} (spec.memberConfigRef) does not exist yet; the control plane propagates it"),
        }));
    };
    let hostconf = validate::hostconf(&hostconf_name, config_map.data.as_ref())
        .map_err(DereferenceError::Invalid)?;

    let credentials_source = crate::build::BuildContext::from_mongodb(mongodb)
        .map_err(|error| {
            DereferenceError::Invalid(Problem {
                reason: error.reason(),
                message: error.to_string(),
            })
        })?
        .credentials()
        .clone();
    let credentials = match &credentials_source {
        CredentialsSource::Referenced {
            secret_name,
            keyfile_key,
            username_key,
            password_key,
        } => {
            let secret = Api::<Secret>::namespaced(client.clone(), &namespace)
                .get_opt(secret_name)
                .await?;
            let Some(secret) = secret else {
                return Err(DereferenceError::Invalid(Problem {
                    reason: "CredentialsSecretMissing",
                    message: format!(
                        "Secret {secret_name} (spec.credentialsSecretRef) does not exist yet"
                    ),
                }));
            };
            let data = secret.data.unwrap_or_default();
            let value = |key: &str| data.get(key).map(|v| v.0.as_slice());
            validate::credentials(
                secret_name,
                keyfile_key,
                value(keyfile_key),
                username_key,
                value(username_key),
                password_key,
                value(password_key),
            )
            .map_err(DereferenceError::Invalid)?
        }
        CredentialsSource::DerivedFromRootPassword { secret_name } => {
            let password = mongodb.spec.root_password.clone().unwrap_or_default();
            let keyfile = crate::build::derive_keyfile(&password);
            validate::credentials(
                secret_name,
                "keyfile",
                Some(keyfile.as_bytes()),
                "username",
                Some(crate::build::secrets::DERIVED_ROOT_USER.as_bytes()),
                "password",
                Some(password.as_bytes()),
            )
            .map_err(DereferenceError::Invalid)?
        }
    };

    let selector = ListParams::default().labels(&format!("{INSTANCE_LABEL}={instance}"));
    let mut services = BTreeMap::new();
    for service in Api::<Service>::namespaced(client.clone(), &namespace)
        .list(&selector)
        .await?
    {
        let Some(slot) = slot_of(&instance, &service.name_any()) else {
            continue;
        };
        let spec = service.spec.unwrap_or_default();
        if spec.type_.as_deref() != Some("NodePort") {
            continue;
        }
        let node_port = spec
            .ports
            .as_ref()
            .and_then(|ports| ports.first())
            .and_then(|p| p.node_port);
        services.insert(
            slot,
            MemberService {
                selector: spec.selector.unwrap_or_default(),
                node_port,
            },
        );
    }

    let pods: BTreeMap<String, Pod> = Api::<Pod>::namespaced(client.clone(), &namespace)
        .list(&selector)
        .await?
        .into_iter()
        .map(|pod| (pod.name_any(), pod))
        .collect();
    let mut stateful_sets = BTreeMap::new();
    for stateful_set in Api::<StatefulSet>::namespaced(client.clone(), &namespace)
        .list(&selector)
        .await?
    {
        let name = stateful_set.name_any();
        let Some(slot) = slot_of(&instance, &name) else {
            continue;
        };
        if !stateful_set
            .owner_references()
            .iter()
            .any(|o| Some(&o.uid) == mongodb.metadata.uid.as_ref())
        {
            continue;
        }
        let recorded_host = stateful_set
            .annotations()
            .get(MEMBER_HOST_ANNOTATION)
            .and_then(|h| MemberAddress::parse(h).ok());
        let pod_running = pods.get(&format!("{name}-0")).is_some_and(|pod| {
            pod.metadata.deletion_timestamp.is_none()
                && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
        });
        stateful_sets.insert(
            slot,
            MemberStatefulSetFacts {
                recorded_host,
                pod_running,
            },
        );
    }

    Ok(Dereferenced {
        vip,
        hostconf_name,
        hostconf,
        credentials_source,
        credentials,
        services,
        stateful_sets,
    })
}

/// Why dereferencing stopped.
#[derive(Debug, thiserror::Error)]
pub enum DereferenceError {
    /// Something propagated is missing or malformed: wait for it to change.
    #[error("{}", .0.message)]
    Invalid(Problem),
    /// The API server could not be read: retry.
    #[error("reading referenced objects: {0}")]
    Kube(#[from] kube::Error),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_read_from_this_instances_names_only() {
        assert_eq!(slot_of("demo", "demo-mongodb-0"), Some(MemberSlot::Data(0)));
        assert_eq!(
            slot_of("demo", "demo-mongodb-12"),
            Some(MemberSlot::Data(12))
        );
        assert_eq!(
            slot_of("demo", "demo-mongodb-arbiter"),
            Some(MemberSlot::Arbiter)
        );
        assert_eq!(slot_of("demo", "demo-mongodb-headless"), None);
        assert_eq!(slot_of("demo", "demo-mongodb-metrics"), None);
        assert_eq!(slot_of("demo", "demo-mongodb-01"), None);
        assert_eq!(slot_of("demo", "other-mongodb-0"), None);
        assert_eq!(slot_of("demo", "demo-mongodb-"), None);
    }
}
