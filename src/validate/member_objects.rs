//! The member Services and StatefulSets of this instance, by slot, with the
//! state of each member's pod.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod, Service};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::ResourceExt;

use crate::api::{ClusterAuthMode, MongoDB, TlsMode};
use crate::build::{
    names, CLUSTER_AUTH_ANNOTATION, DATA_VOLUME, KEYFILE_KEYS_ANNOTATION, MEMBER_ENTRY_ANNOTATION,
    MEMBER_HOST_ANNOTATION, REVISION_ANNOTATION, TLS_MODE_ANNOTATION,
};
use crate::hostconf::MemberAddress;
use crate::member::{MemberSlot, RecordedEntry};
use crate::roll::PodFacts;
use crate::tls::modes::TlsStep;
use crate::volume_growth::ClaimVolume;

/// A propagated member Service, as far as the operator needs it.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberService {
    /// Its selector: the member pods must carry it.
    pub selector: BTreeMap<String, String>,
    /// Its nodePort, once allocated.
    pub node_port: Option<i32>,
}

/// A StatefulSet this operator runs for a member.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberStatefulSetFacts {
    /// The member host recorded on it (kept for when the Service is gone).
    pub recorded_host: Option<MemberAddress>,
    /// The config entry it was last seen as ([`MEMBER_ENTRY_ANNOTATION`]).
    pub recorded_entry: Option<RecordedEntry>,
    /// Whether its pod is running.
    pub pod_running: bool,
    /// Whether its pod is Ready: only then does its Service route to it.
    pub pod_ready: bool,
    /// Its pod (`<statefulset>-0`), when one exists.
    pub pod: Option<PodFacts>,
    /// It has a `deletionTimestamp`: it is going (its pod first, as the
    /// foreground garbage collection deletes it), and is not deleted again.
    pub deleting: bool,
    /// Its data claim template's storage request (it cannot change).
    pub claim_storage: Option<Quantity>,
    /// The TLS mode and cluster authentication its template runs
    /// ([`TLS_MODE_ANNOTATION`], [`CLUSTER_AUTH_ANNOTATION`]).
    pub tls_mode: TlsStep,
}

/// The propagated NodePort Services of this instance's members, by slot.
pub(super) fn member_services(
    instance: &str,
    services: &[Service],
) -> BTreeMap<MemberSlot, MemberService> {
    services
        .iter()
        .filter_map(|service| {
            let slot = names::slot_of(instance, &service.name_any())?;
            let node_port = node_port(service)?;
            let spec = service.spec.as_ref()?;
            let selector = spec.selector.clone().unwrap_or_default();
            Some((
                slot,
                MemberService {
                    selector,
                    node_port,
                },
            ))
        })
        .collect()
}

/// The nodePort of a member Service: `None` when it is not of type NodePort,
/// `Some(None)` until one is allocated (its first port's).
pub fn node_port(service: &Service) -> Option<Option<i32>> {
    let spec = service.spec.as_ref()?;
    if spec.type_.as_deref() != Some("NodePort") {
        return None;
    }
    let first = spec.ports.as_ref().and_then(|ports| ports.first());
    Some(first.and_then(|p| p.node_port))
}

/// The member StatefulSets this object owns, by slot, with their pod's state.
pub(super) fn member_stateful_sets(
    mongodb: &MongoDB,
    stateful_sets: &[StatefulSet],
    pods: &[Pod],
) -> BTreeMap<MemberSlot, MemberStatefulSetFacts> {
    let instance = mongodb.name_any();
    stateful_sets
        .iter()
        .filter(|s| {
            s.owner_references()
                .iter()
                .any(|o| Some(&o.uid) == mongodb.metadata.uid.as_ref())
        })
        .filter_map(|stateful_set| {
            let name = stateful_set.name_any();
            let slot = names::slot_of(&instance, &name)?;
            let recorded_host = stateful_set
                .annotations()
                .get(MEMBER_HOST_ANNOTATION)
                .and_then(|h| MemberAddress::parse(h).ok());
            let recorded_entry = stateful_set
                .annotations()
                .get(MEMBER_ENTRY_ANNOTATION)
                .and_then(|e| e.parse().ok());
            let pod_name = format!("{name}-0");
            let pod = pods
                .iter()
                .find(|pod| pod.metadata.name.as_deref() == Some(pod_name.as_str()));
            let pod_running = pod.is_some_and(is_running);
            let pod_ready = pod_running && pod.is_some_and(is_ready);
            let pod = pod.map(|pod| PodFacts {
                uid: pod.uid().unwrap_or_default(),
                revision: pod.annotations().get(REVISION_ANNOTATION).cloned(),
                keyfile: pod
                    .annotations()
                    .get(KEYFILE_KEYS_ANNOTATION)
                    .map(|keys| keys.split(',').map(str::to_string).collect()),
                tls_mode: tls_mode_of(pod.annotations()),
                terminating: pod.metadata.deletion_timestamp.is_some(),
            });
            Some((
                slot,
                MemberStatefulSetFacts {
                    recorded_host,
                    recorded_entry,
                    pod_running,
                    pod_ready,
                    pod,
                    deleting: stateful_set.metadata.deletion_timestamp.is_some(),
                    claim_storage: data_claim_storage(stateful_set),
                    tls_mode: tls_mode_of(stateful_set.annotations()),
                },
            ))
        })
        .collect()
}

/// The TLS mode and cluster authentication an object was built with
/// ([`TLS_MODE_ANNOTATION`], [`CLUSTER_AUTH_ANNOTATION`]; absent: without
/// TLS, with keyfiles).
fn tls_mode_of(annotations: &BTreeMap<String, String>) -> TlsStep {
    let mode = annotations
        .get(TLS_MODE_ANNOTATION)
        .and_then(|mode| TlsMode::parse(mode))
        .unwrap_or(TlsMode::Disabled);
    let auth = annotations
        .get(CLUSTER_AUTH_ANNOTATION)
        .and_then(|auth| ClusterAuthMode::parse(auth))
        .unwrap_or_default();
    TlsStep::of(mode, auth)
}

/// The storage request of `stateful_set`'s data claim template.
fn data_claim_storage(stateful_set: &StatefulSet) -> Option<Quantity> {
    let templates = stateful_set
        .spec
        .as_ref()?
        .volume_claim_templates
        .as_ref()?;
    let data = templates
        .iter()
        .find(|t| t.metadata.name.as_deref() == Some(DATA_VOLUME))?;
    storage_request(data)
}

/// A claim's `spec.resources.requests.storage`.
fn storage_request(claim: &PersistentVolumeClaim) -> Option<Quantity> {
    let requests = claim.spec.as_ref()?.resources.as_ref()?.requests.as_ref()?;
    requests.get("storage").cloned()
}

/// This instance's data claims, by name, as far as their size goes.
pub(super) fn member_claims(claims: &[PersistentVolumeClaim]) -> BTreeMap<String, ClaimVolume> {
    claims
        .iter()
        .map(|claim| {
            let status = claim.status.as_ref();
            let conditions = status
                .and_then(|s| s.conditions.as_ref())
                .map(|conditions| {
                    conditions
                        .iter()
                        .filter(|c| c.status == "True")
                        .map(|c| c.type_.clone())
                        .collect()
                })
                .unwrap_or_default();
            let volume = ClaimVolume {
                name: claim.name_any(),
                requested: storage_request(claim),
                capacity: status
                    .and_then(|s| s.capacity.as_ref())
                    .and_then(|c| c.get("storage").cloned()),
                conditions,
            };
            (claim.name_any(), volume)
        })
        .collect()
}

/// Whether `pod` runs and is not being deleted.
fn is_running(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

/// Whether `pod`'s `Ready` condition is `True`.
fn is_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}
