//! The finalizer that takes this cluster's members out of the replica set before
//! the `MongoDB` object goes.
//!
//! kube-runtime's `finalizer` helper is not used: it drops the finalizer as soon
//! as one cleanup pass succeeds, and leaving the set takes several passes (step
//! down, remove each member, delete each StatefulSet). Here the controller runs
//! leaving passes until one reports the members out, and only then
//! [`release`]s. Both patches are JSON patches guarded by a `test` operation, so
//! a concurrent change of the finalizer list makes them fail (and the pass
//! retry) instead of dropping someone else's finalizer.

use json_patch::Patch as JsonPatch;
use kube::api::{Patch, PatchParams};
use std::fmt::Debug;

use kube::{Api, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::api::MongoDB;

/// Finalizer that takes this cluster's members out of the set before deletion.
pub const FINALIZER: &str = "middleware.fedstate.io/leave-replica-set";

/// Where an object stands with respect to the finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Not being deleted and not yet carrying the finalizer: add it first.
    Claim,
    /// Carrying the finalizer, not being deleted: an ordinary pass.
    Member,
    /// Being deleted with the finalizer: leave the set, then release.
    Leaving,
    /// Being deleted and released: nothing left to do.
    Released,
}

/// The object's phase.
pub fn phase(mongodb: &MongoDB) -> Phase {
    let claimed = mongodb.finalizers().iter().any(|f| f == FINALIZER);
    match (mongodb.metadata.deletion_timestamp.is_some(), claimed) {
        (false, false) => Phase::Claim,
        (false, true) => Phase::Member,
        (true, true) => Phase::Leaving,
        (true, false) => Phase::Released,
    }
}

/// Why the finalizer list could not be changed.
#[derive(Debug, thiserror::Error)]
#[error("updating the finalizers of {kind} {name}: {source}")]
pub struct FinalizerError {
    /// The object's kind.
    kind: &'static str,
    /// The object's name.
    name: String,
    /// What the API server said (a failed `test`: the list changed meanwhile).
    #[source]
    source: kube::Error,
}

/// The patch that adds `finalizer` to the list as the object holds it.
fn claim_patch(finalizers: &[String], finalizer: &str) -> serde_json::Value {
    match finalizers.last() {
        None => json!([
            {"op": "test", "path": "/metadata/finalizers", "value": null},
            {"op": "add", "path": "/metadata/finalizers", "value": [finalizer]},
        ]),
        Some(last) => json!([
            {"op": "test", "path": format!("/metadata/finalizers/{}", finalizers.len() - 1), "value": last},
            {"op": "add", "path": "/metadata/finalizers/-", "value": finalizer},
        ]),
    }
}

/// The patch that removes `finalizer`, at the index the object holds it.
fn release_patch(finalizers: &[String], finalizer: &str) -> Option<serde_json::Value> {
    let index = finalizers.iter().position(|f| f == finalizer)?;
    Some(json!([
        {"op": "test", "path": format!("/metadata/finalizers/{index}"), "value": finalizer},
        {"op": "remove", "path": format!("/metadata/finalizers/{index}")},
    ]))
}

/// Adds the finalizer.
pub async fn claim(api: &Api<MongoDB>, mongodb: &MongoDB) -> Result<(), FinalizerError> {
    add(api, &mongodb.name_any(), mongodb.finalizers(), FINALIZER).await
}

/// Removes the finalizer (nothing to do when it is not there).
pub async fn release(api: &Api<MongoDB>, mongodb: &MongoDB) -> Result<(), FinalizerError> {
    remove(api, &mongodb.name_any(), mongodb.finalizers(), FINALIZER).await
}

/// Adds `finalizer` to object `name` of `api`, whose list was read as `finalizers`.
pub async fn add<K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug>(
    api: &Api<K>,
    name: &str,
    finalizers: &[String],
    finalizer: &str,
) -> Result<(), FinalizerError> {
    send(api, name, claim_patch(finalizers, finalizer)).await
}

/// Removes `finalizer` from object `name` of `api`, whose list was read as
/// `finalizers` (nothing to do when it is not there).
pub async fn remove<K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug>(
    api: &Api<K>,
    name: &str,
    finalizers: &[String],
    finalizer: &str,
) -> Result<(), FinalizerError> {
    match release_patch(finalizers, finalizer) {
        Some(patch) => send(api, name, patch).await,
        None => Ok(()),
    }
}

async fn send<K: Resource<DynamicType = ()> + DeserializeOwned + Clone + Debug>(
    api: &Api<K>,
    name: &str,
    patch: serde_json::Value,
) -> Result<(), FinalizerError> {
    let error = |source| FinalizerError {
        kind: match K::kind(&()) {
            std::borrow::Cow::Borrowed(kind) => kind,
            std::borrow::Cow::Owned(_) => "object",
        },
        name: name.to_string(),
        source,
    };
    let patch: JsonPatch =
        serde_json::from_value(patch).map_err(|e| error(kube::Error::SerdeError(e)))?;
    api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch))
        .await
        .map(drop)
        .map_err(error)
}

#[cfg(test)]
mod tests {
    use apiserver_sim::ApiServerHandle;
    use kube::api::{DeleteParams, PostParams};

    use super::*;
    use crate::build::fixtures;
    use crate::controller::test_cluster;

    const OTHER: &str = "example.com/keep-me";

    async fn cluster() -> (ApiServerHandle, Api<MongoDB>) {
        let (server, client) = test_cluster::start().await;
        (server, Api::namespaced(client, fixtures::NAMESPACE))
    }

    async fn create(api: &Api<MongoDB>, finalizers: &[&str]) -> MongoDB {
        let mut mongodb = fixtures::mongodb();
        mongodb.metadata.uid = None;
        mongodb.metadata.finalizers =
            (!finalizers.is_empty()).then(|| finalizers.iter().map(|f| f.to_string()).collect());
        api.create(&PostParams::default(), &mongodb)
            .await
            .expect("the object is created")
    }

    #[test]
    fn the_phase_follows_deletion_and_the_finalizer() {
        let mut mongodb = fixtures::mongodb();
        assert_eq!(phase(&mongodb), Phase::Claim);
        mongodb.metadata.finalizers = Some(vec![OTHER.into(), FINALIZER.into()]);
        assert_eq!(phase(&mongodb), Phase::Member);
        mongodb.metadata.deletion_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                k8s_openapi::jiff::Timestamp::now(),
            ));
        assert_eq!(phase(&mongodb), Phase::Leaving);
        mongodb.metadata.finalizers = Some(vec![OTHER.into()]);
        assert_eq!(phase(&mongodb), Phase::Released);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claim_adds_the_finalizer_and_keeps_the_others() {
        let (_server, api) = cluster().await;
        let bare = create(&api, &[]).await;
        claim(&api, &bare).await.unwrap();
        assert_eq!(
            api.get(&bare.name_any()).await.unwrap().finalizers(),
            [FINALIZER]
        );
        api.delete(&bare.name_any(), &DeleteParams::default())
            .await
            .unwrap();

        let (_server, api) = cluster().await;
        let shared = create(&api, &[OTHER]).await;
        claim(&api, &shared).await.unwrap();
        assert_eq!(
            api.get(&shared.name_any()).await.unwrap().finalizers(),
            [OTHER, FINALIZER]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn claim_on_a_stale_copy_fails_instead_of_overwriting_a_new_finalizer() {
        let (_server, api) = cluster().await;
        let stale = create(&api, &[]).await;
        let patch = json!([{"op": "add", "path": "/metadata/finalizers", "value": [OTHER]}]);
        send(&api, &stale.name_any(), patch).await.unwrap();
        let error = claim(&api, &stale)
            .await
            .expect_err("the test operation fails");
        assert!(
            error
                .to_string()
                .contains("updating the finalizers of MongoDB demo"),
            "{error}"
        );
        assert!(
            std::error::Error::source(&error).is_some(),
            "the API server's answer is kept"
        );
        assert_eq!(
            api.get(&stale.name_any()).await.unwrap().finalizers(),
            [OTHER]
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn release_lets_a_deleted_object_go_and_removes_only_its_own_finalizer() {
        let (_server, api) = cluster().await;
        let object = create(&api, &[FINALIZER]).await;
        api.delete(&object.name_any(), &DeleteParams::default())
            .await
            .unwrap();
        let deleting = api
            .get(&object.name_any())
            .await
            .expect("the finalizer holds it");
        assert_eq!(phase(&deleting), Phase::Leaving);
        release(&api, &deleting).await.unwrap();
        assert!(
            api.get_opt(&object.name_any()).await.unwrap().is_none(),
            "released, it is gone"
        );

        let (_server, api) = cluster().await;
        let object = create(&api, &[OTHER, FINALIZER]).await;
        api.delete(&object.name_any(), &DeleteParams::default())
            .await
            .unwrap();
        let deleting = api.get(&object.name_any()).await.unwrap();
        release(&api, &deleting).await.unwrap();
        let kept = api
            .get(&object.name_any())
            .await
            .expect("the other finalizer still holds it");
        assert_eq!(kept.finalizers(), [OTHER]);
        assert_eq!(phase(&kept), Phase::Released);
        release(&api, &kept)
            .await
            .expect("releasing twice changes nothing");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn release_on_a_stale_index_fails_instead_of_removing_another_finalizer() {
        let (_server, api) = cluster().await;
        let stale = create(&api, &[OTHER, FINALIZER]).await;
        let drop_other = json!([{"op": "remove", "path": "/metadata/finalizers/0"}]);
        send(&api, &stale.name_any(), drop_other).await.unwrap();
        api.patch(
            &stale.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [FINALIZER, OTHER]}})),
        )
        .await
        .unwrap();
        assert!(
            release(&api, &stale).await.is_err(),
            "index 1 now holds another finalizer"
        );
        assert_eq!(
            api.get(&stale.name_any()).await.unwrap().finalizers(),
            [FINALIZER, OTHER]
        );
    }
}
