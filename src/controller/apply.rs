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

/// Applies every desired object, in order, into `namespace`, and returns what
/// the API server refused. One refusal (an immutable field that changed, an
/// admission webhook) does not stop the others, nor the rest of the pass:
/// removals, step-downs and status go on.
pub async fn apply(client: &Client, namespace: &str, desired: &DesiredObjects) -> Vec<ApplyError> {
    let mut failures = Vec::new();
    let secrets = Api::<Secret>::namespaced(client.clone(), namespace);
    for secret in &desired.secrets {
        failures.extend(apply_one(&secrets, secret).await.err());
    }
    let services = Api::<Service>::namespaced(client.clone(), namespace);
    for service in &desired.services {
        failures.extend(apply_one(&services, service).await.err());
    }
    let budgets = Api::<PodDisruptionBudget>::namespaced(client.clone(), namespace);
    failures.extend(
        apply_one(&budgets, &desired.pod_disruption_budget)
            .await
            .err(),
    );
    let stateful_sets = Api::<StatefulSet>::namespaced(client.clone(), namespace);
    for stateful_set in &desired.stateful_sets {
        failures.extend(apply_one(&stateful_sets, stateful_set).await.err());
    }
    failures
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

async fn apply_one<K>(api: &Api<K>, object: &K) -> Result<(), ApplyError>
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

#[cfg(test)]
mod tests {
    use k8s_openapi::api::apps::v1::StatefulSet;
    use kube::api::PostParams;

    use super::*;
    use crate::build::{self, fixtures, BuildContext};
    use crate::controller::test_cluster;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn one_refused_object_does_not_stop_the_others() {
        // An immutable field that changed (here the StatefulSet selector, after
        // the propagated Service's selector changed) is refused by the API
        // server; the other members' StatefulSets are still applied.
        let (_server, client) = test_cluster::start().await;
        let mongodb = fixtures::mongodb();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let desired = build::desired_objects(
            &ctx,
            fixtures::ROOT_PASSWORD,
            &[fixtures::member(0), fixtures::member(1)],
        )
        .unwrap();
        let api = Api::<StatefulSet>::namespaced(client.clone(), fixtures::NAMESPACE);
        let mut older = desired.stateful_sets[0].clone();
        let spec = older.spec.as_mut().unwrap();
        spec.selector
            .match_labels
            .as_mut()
            .unwrap()
            .insert("app".into(), "an-older-selector".into());
        spec.template
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert("app".into(), "an-older-selector".into());
        older.metadata.owner_references = None;
        api.create(&PostParams::default(), &older)
            .await
            .expect("the old StatefulSet exists");
        let failures = apply(&client, fixtures::NAMESPACE, &desired).await;
        assert_eq!(failures.len(), 1, "{failures:?}");
        assert!(
            failures[0]
                .to_string()
                .contains("StatefulSet demo-mongodb-0"),
            "{}",
            failures[0]
        );
        assert!(
            api.get_opt("demo-mongodb-1").await.unwrap().is_some(),
            "applied despite the refusal before it"
        );
    }
}
