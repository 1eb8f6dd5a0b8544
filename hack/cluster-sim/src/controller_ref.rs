//! Controller references, as kube-controller-manager's `ControllerRefManager`
//! keeps them (kubernetes/kubernetes `pkg/controller/controller_ref_manager.go`
//! `BaseControllerRefManager.ClaimObject`): an object a controller owns and
//! that still matches its selector is claimed; one it owns that no longer
//! matches is released (unless the controller is being deleted); an orphan
//! that matches is adopted (unless either is being deleted), after a fresh
//! read of the controller (`RecheckDeletionTimestamp`).

use std::fmt::Debug;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use kube::api::{Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

/// The uid of the object's controller (the ownerReference with `controller: true`).
pub fn controller_uid(meta: &ObjectMeta) -> Option<&str> {
    meta.owner_references
        .as_ref()?
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.as_str())
}

/// A controller ownerReference to `owner` (`metav1.NewControllerRef`: it
/// blocks the owner's foreground deletion).
pub fn controller_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    let mut reference = owner.controller_owner_ref(&())?;
    reference.block_owner_deletion = Some(true);
    Some(reference)
}

/// Adopts the orphan `object` for `owner` (`AdoptPod`, `AdoptReplicaSet`):
/// a patch adding the controller reference, conditional on the object's
/// resourceVersion, so that an object claimed meanwhile by someone else is
/// left alone (409).
pub async fn adopt<K, O>(client: &Client, owner: &O, object: &K) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
    O: Resource<DynamicType = ()>,
{
    let Some(reference) = controller_ref(owner) else {
        return Ok(());
    };
    let mut references = object.owner_references().to_vec();
    references.push(reference);
    write_references(client, object, references).await
}

/// Releases `object` from the controller `owner_uid` (`ReleasePod`,
/// `ReleaseReplicaSet`): its ownerReference is removed.
pub async fn release<K>(client: &Client, owner_uid: &str, object: &K) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let references: Vec<OwnerReference> = object
        .owner_references()
        .iter()
        .filter(|o| o.uid != owner_uid)
        .cloned()
        .collect();
    write_references(client, object, references).await
}

async fn write_references<K>(
    client: &Client,
    object: &K,
    references: Vec<OwnerReference>,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + DeserializeOwned
        + Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), &object.namespace().unwrap_or_default());
    let references = if references.is_empty() {
        serde_json::Value::Null
    } else {
        json!(references)
    };
    let patch = json!({
        "metadata": {
            "resourceVersion": object.resource_version(),
            "ownerReferences": references,
        }
    });
    api.patch(
        &object.name_any(),
        &PatchParams::default(),
        &Patch::Merge(patch),
    )
    .await
    .map(|_| ())
}

/// Applies the JSON merge patch `patch` (RFC 7386) to `target`: how the API
/// server would merge a status patch, so that a controller writes only when
/// the result differs from what it read.
pub fn merge_patch(target: &mut serde_json::Value, patch: &serde_json::Value) {
    let serde_json::Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    if let serde_json::Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(
                    target.entry(key.clone()).or_insert(serde_json::Value::Null),
                    value,
                );
            }
        }
    }
}

/// A counter as an `omitempty` field of a status patch: zero removes it, as
/// the API server would not serialize it.
pub fn omit_zero<T: Into<i64>>(value: T) -> serde_json::Value {
    let value = value.into();
    if value == 0 {
        serde_json::Value::Null
    } else {
        json!(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_patches_replace_lists_and_remove_nulls() {
        let mut status = json!({"replicas": 2, "readyReplicas": 2, "conditions": [{"type": "A"}]});
        merge_patch(
            &mut status,
            &json!({"readyReplicas": null, "conditions": [{"type": "B"}], "new": {"x": 1}}),
        );
        assert_eq!(
            status,
            json!({"replicas": 2, "conditions": [{"type": "B"}], "new": {"x": 1}})
        );
        assert_eq!(omit_zero(0), serde_json::Value::Null);
        assert_eq!(omit_zero(3), json!(3));
    }
}
