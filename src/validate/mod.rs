//! Stage `validate` (pure): turns the objects the `dereference` stage read into
//! the checked input of one pass — this cluster's VIP, the hostconf member
//! list, the shared credentials, the member Services and StatefulSets by slot —
//! or into an [`InvalidInput`] that says precisely what is wrong and what to do.
//!
//! An invalid input stops the pass with a condition and an Event; the operator
//! then waits for the object to change. Messages name objects and keys, never a
//! secret value.

mod credentials;
mod custom_config;
mod image;
mod invalid_input;
mod keyfiles;
mod member_list;
mod member_objects;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Pod, Secret, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;

use crate::api::{MongoDB, VIP_LABEL};
use crate::build::{self, names, MemberTarget};
use crate::hostconf::{HostConf, MemberAddress};
use crate::keyfile::Keyfile;
use crate::member::{MemberSlot, Wanted};
use crate::tls::modes::TlsStep;

pub use credentials::{credentials, kept_user, RootCredentials};
pub use image::{image_release, supported_image, version_change_allowed};
pub use invalid_input::{CredentialFault, CredentialRole, InvalidInput, KeyfileFault};
pub use keyfiles::keyfile_secret_names;
pub use member_list::hostconf;
pub use member_objects::{node_port, MemberService, MemberStatefulSetFacts};

use crate::volume_growth::{new_claim_storage, ClaimVolume, MemberVolume};
use credentials::{operator_admin, shared_root_credentials};
use custom_config::custom_config_accepted;
use keyfiles::known_keyfiles;
use member_list::{last_observed_members, propagated_hostconf};
use member_objects::{member_claims, member_services, member_stateful_sets};

/// The longest StatefulSet name whose pods can be created: the pods carry the
/// label `controller-revision-hash: <name>-<hash of up to 10 characters>`, and
/// a label value has at most 63 characters.
const MAX_STATEFUL_SET_NAME: usize = 52;

/// The objects a `MongoDB` refers to, as read from the API server, unchecked.
#[derive(Clone, Debug, Default)]
pub struct ReferencedObjects {
    /// The hostconf ConfigMap, if it exists.
    pub hostconf: Option<ConfigMap>,
    /// The credentials Secret of `spec.credentialsSecretRef`, if it is set and exists.
    pub credentials_secret: Option<Secret>,
    /// The certificate Secret of `spec.tls.certificateSecretRef`, if it is
    /// set and exists.
    pub certificate_secret: Option<Secret>,
    /// With `spec.tls`, the operator's TLS Secret the members mount, if it
    /// exists: the files they run now.
    pub mounted_tls_secret: Option<Secret>,
    /// Services carrying the instance label.
    pub services: Vec<Service>,
    /// StatefulSets carrying the instance label.
    pub stateful_sets: Vec<StatefulSet>,
    /// Pods carrying the instance label.
    pub pods: Vec<Pod>,
    /// PersistentVolumeClaims carrying the instance label.
    pub claims: Vec<PersistentVolumeClaim>,
    /// The custom mongod config ConfigMap of `spec.customConfigRef`, if it is
    /// set and exists.
    pub custom_config: Option<ConfigMap>,
    /// The operator's own `clusterAdmin` credentials Secret, read while the
    /// object is being deleted: leaving must not need the shared credentials.
    pub operator_credentials: Option<Secret>,
    /// The operator's keyfile Secrets the member StatefulSets' templates
    /// name, then those the pods name ([`keyfile_secret_names`]'s order).
    pub keyfile_secrets: Vec<Secret>,
}

/// The checked input of a pass.
#[derive(Clone, Debug)]
pub struct Validated {
    /// This cluster's VIP.
    pub vip: String,
    /// Every member of the set.
    pub hostconf: HostConf,
    /// The user the operator authenticates as: the root user (the keyfile
    /// beside it checked), or, while leaving without the shared credentials, the
    /// operator's own clusterAdmin.
    pub root: RootCredentials,
    /// Propagated member Services by slot.
    pub services: BTreeMap<MemberSlot, MemberService>,
    /// This operator's member StatefulSets by slot.
    pub stateful_sets: BTreeMap<MemberSlot, MemberStatefulSetFacts>,
    /// The custom config's content as a digest that enters the pods'
    /// revision, so a change of content rolls the pods (the keyfile enters it
    /// through the name of its Secret).
    pub content_digest: String,
    /// The credentials Secret's keyfile (`None` while leaving without it).
    pub desired_keyfile: Option<Keyfile>,
    /// The keyfiles this cluster's template and pods run, the template's first.
    pub known_keyfiles: Vec<Keyfile>,
    /// This instance's data claims, by name.
    pub claims: BTreeMap<String, ClaimVolume>,
}

impl Validated {
    /// The data volumes of the local members `wanted`, for `grow`.
    pub fn volumes(&self, instance: &str, wanted: Wanted) -> Vec<MemberVolume> {
        wanted
            .slots()
            .map(|slot| {
                let stateful_set = names::slot(instance, slot);
                let facts = self.stateful_sets.get(&slot);
                let claim_name = names::data_claim(&stateful_set);
                MemberVolume {
                    template: facts.and_then(|f| f.claim_storage.clone()),
                    deleting: facts.is_some_and(|f| f.deleting),
                    claim: self.claims.get(&claim_name).cloned(),
                    stateful_set,
                }
            })
            .collect()
    }

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

    /// The TLS mode the member StatefulSets were built with (`None`: there
    /// are none, or all are going).
    pub fn running_tls_mode(&self) -> Option<TlsStep> {
        self.stateful_sets
            .values()
            .find(|facts| !facts.deleting)
            .map(|facts| facts.tls_mode)
    }

    /// Whether the pod of `slot`'s StatefulSet is running.
    pub fn pod_running(&self, slot: MemberSlot) -> bool {
        self.stateful_sets.get(&slot).is_some_and(|s| s.pod_running)
    }

    /// Whether the pod of `slot`'s StatefulSet is Ready.
    pub fn pod_ready(&self, slot: MemberSlot) -> bool {
        self.stateful_sets.get(&slot).is_some_and(|s| s.pod_ready)
    }

    /// The members this cluster runs: each wanted slot once its propagated
    /// Service exists and while its StatefulSet is not being deleted; each
    /// claim template keeps its StatefulSet's size, a new one gets `storage`
    /// (or the largest existing when `storage` is smaller: nothing shrinks).
    pub fn member_targets(&self, wanted: Wanted, storage: &Quantity) -> Vec<MemberTarget> {
        let templates = self
            .stateful_sets
            .values()
            .filter_map(|f| f.claim_storage.as_ref());
        let for_new = new_claim_storage(storage, templates);
        wanted
            .slots()
            .filter_map(|slot| {
                let service = self.services.get(&slot)?;
                // A StatefulSet being deleted is applied again once it is gone.
                let claim_storage = match self.stateful_sets.get(&slot) {
                    Some(facts) if facts.deleting => return None,
                    Some(facts) => facts.claim_storage.clone(),
                    None => Some(for_new.clone()),
                };
                Some(MemberTarget {
                    slot,
                    selector: service.selector.clone(),
                    host: self.address(slot).map(|a| a.to_string()),
                    claim_storage,
                })
            })
            .collect()
    }
}

/// Checks everything `mongodb` refers to. While `leaving`, what only a member
/// that stays needs is not asked for: a missing or bad hostconf is replaced by
/// the members status last observed, and missing shared credentials by the
/// operator's own clusterAdmin user.
pub fn validate(
    mongodb: &MongoDB,
    referenced: &ReferencedObjects,
    leaving: bool,
) -> Result<Validated, InvalidInput> {
    let instance = mongodb.name_any();
    let vip = vip(mongodb.labels())?;
    if !leaving {
        supported_image(&mongodb.spec.image)?;
        let fcv = mongodb
            .status
            .as_ref()
            .and_then(|s| s.feature_compatibility_version.as_deref());
        version_change_allowed(&mongodb.spec.image, fcv)?;
        member_names_fit(&instance, Wanted::of(mongodb, false))?;
    }
    let hostconf = match (propagated_hostconf(mongodb, referenced), leaving) {
        (Ok(hostconf), _) => hostconf,
        (Err(_), true) => last_observed_members(mongodb),
        (Err(invalid), false) => return Err(invalid),
    };
    let shared = shared_root_credentials(mongodb, referenced);
    let content_digest = match (&shared, leaving) {
        (Ok(_), false) => content_digest(mongodb, referenced)?,
        _ => String::new(),
    };
    let desired_keyfile = shared
        .as_ref()
        .ok()
        .map(|(_, keyfile)| Keyfile::of_key(keyfile));
    let root = match (shared, leaving) {
        (Ok((root, _)), _) => root,
        (Err(invalid), true) => operator_admin(referenced).ok_or(invalid)?,
        (Err(invalid), false) => return Err(invalid),
    };
    Ok(Validated {
        vip,
        hostconf,
        root,
        services: member_services(&instance, &referenced.services),
        stateful_sets: member_stateful_sets(mongodb, &referenced.stateful_sets, &referenced.pods),
        claims: member_claims(&referenced.claims),
        content_digest,
        desired_keyfile,
        known_keyfiles: known_keyfiles(&referenced.keyfile_secrets),
    })
}

/// The digest of what the pods run with beyond their spec: the custom
/// config's content. The root user is not in it: mongod reads it only to
/// create the user on an empty data directory, so restarting the pods cannot
/// bring a new password to the set (the rsInit cluster's operator sets it
/// with `updateUser`). A missing custom config is refused: the pods cannot
/// start without it; so is one mongod would exit on.
fn content_digest(
    mongodb: &MongoDB,
    referenced: &ReferencedObjects,
) -> Result<String, InvalidInput> {
    let mut content = Vec::new();
    if let Some(name) = &mongodb.spec.custom_config_ref {
        let Some(config_map) = &referenced.custom_config else {
            return Err(InvalidInput::CustomConfigMissing { name: name.clone() });
        };
        custom_config_accepted(name, config_map)?;
        let data = config_map.data.iter().flatten();
        let binary = config_map.binary_data.iter().flatten();
        for (key, value) in data
            .map(|(k, v)| (k, v.as_bytes()))
            .chain(binary.map(|(k, v)| (k, v.0.as_slice())))
        {
            for part in [key.as_bytes(), value] {
                content.extend_from_slice(&(part.len() as u64).to_be_bytes());
                content.extend_from_slice(part);
            }
        }
    }
    Ok(build::sha256_hex(&content))
}

/// This cluster's VIP, from the `MongoDB` object's labels.
pub fn vip(labels: &BTreeMap<String, String>) -> Result<String, InvalidInput> {
    let vip = labels.get(VIP_LABEL).map(|v| v.trim()).unwrap_or_default();
    if vip.is_empty() {
        return Err(InvalidInput::VipLabelMissing);
    }
    let unbracketed_non_ipv6 =
        vip.contains(':') && !vip.starts_with('[') && vip.parse::<std::net::Ipv6Addr>().is_err();
    if unbracketed_non_ipv6 || vip.contains(char::is_whitespace) {
        return Err(InvalidInput::VipLabelInvalid {
            vip: vip.to_string(),
        });
    }
    Ok(vip.to_string())
}

/// Refuses an instance name whose wanted member StatefulSets would be too
/// long for their pods to be created.
pub fn member_names_fit(instance: &str, wanted: Wanted) -> Result<(), InvalidInput> {
    let too_long = wanted
        .slots()
        .map(|slot| names::slot(instance, slot))
        .find(|name| name.len() > MAX_STATEFUL_SET_NAME);
    match too_long {
        Some(stateful_set) => Err(InvalidInput::NameTooLong {
            length: stateful_set.len(),
            stateful_set,
        }),
        None => Ok(()),
    }
}
