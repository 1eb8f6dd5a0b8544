//! One StatefulSet per member: `<name>-mongodb-<i>` (and `<name>-mongodb-arbiter`),
//! named like the member's propagated Service, one replica, pods labelled with
//! that Service's selector so that its NodePort routes to them. One StatefulSet
//! per member lets the operator remove exactly the member it chose.
//!
//! The StatefulSet's pod template carries the instance's revision (a hash of the
//! members' pod spec, from which the arbiter's follows, and of the content
//! digest of the credentials and custom config),
//! which the status reports as `currentRevision`. Updates are `OnDelete`: the
//! operator replaces the pods itself, one member of the whole set at a time
//! ([`crate::roll`]).

use k8s_openapi::api::apps::v1::{
    StatefulSet, StatefulSetPersistentVolumeClaimRetentionPolicy, StatefulSetSpec,
    StatefulSetUpdateStrategy,
};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec,
    VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use std::collections::BTreeMap;

use super::labels::{component_labels, Component};
use super::pod::{arbiter_pod_spec, member_pod_spec, DATA_VOLUME};
use super::secrets::{keyfile_secret_name, sha256_hex};
use super::{names, BuildContext, BuildError, MemberTarget};
use crate::api::ClusterAuthMode;
use crate::member::MemberSlot;
use crate::tls::rotation::{restart_digest, rotates_in_place};

/// StatefulSet annotation recording the member's host `VIP:NodePort`, so that the
/// planner still knows it after the control plane deleted the member's Service.
pub const MEMBER_HOST_ANNOTATION: &str = "middleware.fedstate.io/member-host";
/// StatefulSet annotation recording the config entry the member was last seen
/// as, `<_id>@<host>` (written by the controller after observing the set, under
/// its own field manager, never by the build): how a member is recognised in
/// the config after its address changed.
pub const MEMBER_ENTRY_ANNOTATION: &str = "middleware.fedstate.io/member-config-entry";
/// Pod-template annotation carrying the revision of the pod spec.
pub const REVISION_ANNOTATION: &str = "middleware.fedstate.io/revision";
/// Pod template annotation: the fingerprints of the keys of the keyfile the
/// pod runs, comma-separated, in the order mongod tries them (what its
/// operator reports for it).
pub const KEYFILE_KEYS_ANNOTATION: &str = "middleware.fedstate.io/keyfile-keys";
/// StatefulSet and pod template annotation: the keyfile Secret the template
/// mounts (the operator finds its keyfiles by it: its caches keep no specs).
pub const KEYFILE_SECRET_ANNOTATION: &str = "middleware.fedstate.io/keyfile-secret";

/// StatefulSet and pod template annotation, with TLS on: the mode the
/// template runs (absent: `disabled`), what the roll reports of each pod and
/// the next step is planned from.
pub const TLS_MODE_ANNOTATION: &str = "middleware.fedstate.io/tls-mode";

/// StatefulSet and pod template annotation, with a cluster authentication
/// mode other than `keyFile`: that mode (absent: `keyFile`), reported and
/// planned from as [`TLS_MODE_ANNOTATION`].
pub const CLUSTER_AUTH_ANNOTATION: &str = "middleware.fedstate.io/cluster-auth-mode";

/// Hex digits of the pod spec's SHA-256 kept as the revision.
const REVISION_LENGTH: usize = 10;

/// A member's StatefulSet and the revision of its pod template.
#[derive(Debug, Clone, PartialEq)]
pub struct MemberStatefulSet {
    /// The desired StatefulSet.
    pub stateful_set: StatefulSet,
    /// The pod spec's revision (10 hex digits): the same for every member of the
    /// instance, changing only when the pod spec does.
    pub revision: String,
}

/// The StatefulSet running `target`: one replica, `Parallel`, `OnDelete` updates,
/// the headless governing Service, PVCs retained (the operator deletes a removed
/// member's PVC itself, by policy), the member's host as an annotation.
pub fn member_stateful_set(
    ctx: &BuildContext,
    target: &MemberTarget,
) -> Result<MemberStatefulSet, BuildError> {
    let name = target.name(ctx.name());
    if target.selector.is_empty() {
        return Err(BuildError::EmptySelector { member: name });
    }
    let labels = component_labels(ctx.name(), component(target.slot));
    let keyfile = ctx.keyfile()?;
    let pod_spec = member_pod_spec(ctx, keyfile);
    let tls_files = ctx
        .tls()
        .map(|tls| restart_digest(tls, rotates_in_place(&ctx.spec().image)));
    let revision = revision(&pod_spec, ctx.content_digest(), tls_files.as_deref());
    // The arbiter's spec follows from the members' (the revision names both).
    let pod_spec = match target.slot {
        MemberSlot::Data(_) => pod_spec,
        MemberSlot::Arbiter => arbiter_pod_spec(pod_spec),
    };

    let keyfile_secret = keyfile_secret_name(ctx.name(), keyfile);
    let mut metadata = ctx.object_meta(name, labels.clone());
    let mut annotations = BTreeMap::from([(
        KEYFILE_SECRET_ANNOTATION.to_string(),
        keyfile_secret.clone(),
    )]);
    if let Some(host) = &target.host {
        annotations.insert(MEMBER_HOST_ANNOTATION.to_string(), host.clone());
    }
    annotations.extend(tls_annotations(ctx));
    metadata.annotations = Some(annotations);

    let stateful_set = StatefulSet {
        metadata,
        spec: Some(StatefulSetSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(target.selector.clone()),
                match_expressions: None,
            },
            service_name: Some(names::headless_service(ctx.name())),
            pod_management_policy: Some("Parallel".to_string()),
            update_strategy: Some(StatefulSetUpdateStrategy {
                type_: Some("OnDelete".to_string()),
                rolling_update: None,
            }),
            persistent_volume_claim_retention_policy: Some(
                StatefulSetPersistentVolumeClaimRetentionPolicy {
                    when_deleted: Some("Retain".to_string()),
                    when_scaled: Some("Retain".to_string()),
                },
            ),
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels(labels.clone(), &target.selector)),
                    annotations: Some(
                        BTreeMap::from([
                            (REVISION_ANNOTATION.to_string(), revision.clone()),
                            (
                                KEYFILE_KEYS_ANNOTATION.to_string(),
                                keyfile.fingerprints().join(","),
                            ),
                            (KEYFILE_SECRET_ANNOTATION.to_string(), keyfile_secret),
                        ])
                        .into_iter()
                        .chain(tls_annotations(ctx))
                        .collect(),
                    ),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec),
            },
            volume_claim_templates: Some(vec![data_claim_template(ctx, target, labels)]),
            ..StatefulSetSpec::default()
        }),
        status: None,
    };
    Ok(MemberStatefulSet {
        stateful_set,
        revision,
    })
}

/// With TLS on, the mode the members run and, other than `keyFile`, their
/// cluster authentication mode.
fn tls_annotations(ctx: &BuildContext) -> Vec<(String, String)> {
    let Some(tls) = ctx.tls() else {
        return Vec::new();
    };
    let mut annotations = vec![(
        TLS_MODE_ANNOTATION.to_string(),
        tls.mode.as_str().to_string(),
    )];
    if tls.cluster_auth != ClusterAuthMode::KeyFile {
        annotations.push((
            CLUSTER_AUTH_ANNOTATION.to_string(),
            tls.cluster_auth.as_str().to_string(),
        ));
    }
    annotations
}

fn component(slot: MemberSlot) -> Component {
    match slot {
        MemberSlot::Data(_) => Component::Member,
        MemberSlot::Arbiter => Component::Arbiter,
    }
}

/// Our labels, overridden by the Service's selector: the pods must match it.
fn pod_labels(
    mut labels: BTreeMap<String, String>,
    selector: &BTreeMap<String, String>,
) -> BTreeMap<String, String> {
    labels.extend(selector.clone());
    labels
}

/// The member's data volume: the target's claim storage (else
/// `spec.persistence.storage`), ReadWriteOnce, in
/// `spec.persistence.storageClassName` or the cluster's default class.
fn data_claim_template(
    ctx: &BuildContext,
    target: &MemberTarget,
    labels: BTreeMap<String, String>,
) -> PersistentVolumeClaim {
    let persistence = &ctx.spec().persistence;
    let storage = target
        .claim_storage
        .clone()
        .unwrap_or_else(|| persistence.storage.clone());
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(DATA_VOLUME.to_string()),
            labels: Some(labels),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: Some(vec!["ReadWriteOnce".to_string()]),
            resources: Some(VolumeResourceRequirements {
                requests: Some(BTreeMap::from([("storage".to_string(), storage)])),
                limits: None,
            }),
            storage_class_name: persistence.storage_class_name.clone(),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    }
}

/// The first 10 hex digits of the SHA-256 of the pod spec's JSON, the
/// content digest and, with TLS on, the digest of the files its members load
/// only by restarting ([`restart_digest`]).
fn revision(pod_spec: &PodSpec, content_digest: &str, tls_files: Option<&str>) -> String {
    let mut input = serde_json::to_vec(pod_spec).expect("a PodSpec always serializes to JSON");
    input.push(0);
    input.extend_from_slice(content_digest.as_bytes());
    if let Some(tls_files) = tls_files {
        input.push(0);
        input.extend_from_slice(tls_files.as_bytes());
    }
    let mut revision = sha256_hex(&input);
    revision.truncate(REVISION_LENGTH);
    revision
}

#[cfg(test)]
mod tests;
