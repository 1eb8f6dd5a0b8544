//! Stage `apply` (Kubernetes I/O): server-side apply of the desired objects
//! under one field manager, StatefulSets last. Full desired objects are
//! applied, never read-modify-written; a StatefulSet is only ever deleted by a
//! planner step ([`delete_member`]).

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret, Service};
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use kube::api::{DeleteParams, Patch, PatchParams};
use kube::{Api, Client, Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::FIELD_MANAGER;
use crate::build::{names, DesiredObjects};

/// Why applying failed: which object, and what the API server said.
#[derive(Debug, thiserror::Error)]
#[error("applying {kind} {name}: {source}")]
pub struct ApplyError {
    /// Object kind.
    kind: String,
    /// Object name.
    name: String,
    /// What the API server said.
    #[source]
    source: kube::Error,
}

/// Applies every desired object, in order, into `namespace`.
pub async fn apply(
    client: &Client,
    namespace: &str,
    desired: &DesiredObjects,
) -> Result<(), ApplyError> {
    for secret in &desired.secrets {
        apply_one(Api::<Secret>::namespaced(client.clone(), namespace), secret).await?;
    }
    for service in &desired.services {
        apply_one(
            Api::<Service>::namespaced(client.clone(), namespace),
            service,
        )
        .await?;
    }
    let budgets = Api::<PodDisruptionBudget>::namespaced(client.clone(), namespace);
    apply_one(budgets, &desired.pod_disruption_budget).await?;
    for stateful_set in &desired.stateful_sets {
        apply_one(
            Api::<StatefulSet>::namespaced(client.clone(), namespace),
            stateful_set,
        )
        .await?;
    }
    Ok(())
}

/// Deletes a member's StatefulSet and, when asked, its PVC. "Not found" is success.
/// The PVC goes first: a crash in between repeats the same step (the StatefulSet
/// still exists), where the other order could leave a PVC nothing reports. The
/// PVC's protection finalizer keeps it until the pod is gone.
pub async fn delete_member(
    client: &Client,
    namespace: &str,
    stateful_set: &str,
    delete_pvc: bool,
) -> Result<(), kube::Error> {
    if delete_pvc {
        let claim = names::data_claim(stateful_set);
        let claims = Api::<PersistentVolumeClaim>::namespaced(client.clone(), namespace);
        ignore_not_found(
            claims
                .delete(&claim, &DeleteParams::default())
                .await
                .map(drop),
        )?;
    }
    let stateful_sets = Api::<StatefulSet>::namespaced(client.clone(), namespace);
    let deleted = stateful_sets
        .delete(stateful_set, &DeleteParams::foreground())
        .await;
    ignore_not_found(deleted.map(drop))
}

fn ignore_not_found(result: Result<(), kube::Error>) -> Result<(), kube::Error> {
    match result {
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        other => other,
    }
}

async fn apply_one<K>(api: Api<K>, object: &K) -> Result<(), ApplyError>
where
    K: Resource + Clone + Serialize + DeserializeOwned + std::fmt::Debug,
    K::DynamicType: Default,
{
    let kind = K::kind(&Default::default()).to_string();
    let failed = |source| ApplyError {
        kind: kind.clone(),
        name: object.name_any(),
        source,
    };
    let mut value = serde_json::to_value(object).map_err(|e| failed(kube::Error::SerdeError(e)))?;
    value["apiVersion"] =
        serde_json::Value::String(K::api_version(&Default::default()).to_string());
    value["kind"] = serde_json::Value::String(kind.clone());
    let params = PatchParams::apply(FIELD_MANAGER).force();
    api.patch(&object.name_any(), &params, &Patch::Apply(value))
        .await
        .map(drop)
        .map_err(failed)
}
