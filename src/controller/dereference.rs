//! Stage `dereference` (Kubernetes I/O): reads everything a `MongoDB` object
//! refers to — the hostconf ConfigMap, the credentials Secret, the propagated
//! member Services (by the instance label, and the arbiter's by its name, as
//! FedState does not label it with the instance), the custom config
//! ConfigMap, and the StatefulSets and pods
//! this operator runs — and returns them as read. Checking them is the pure
//! `validate` stage's work.

use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::ListParams;
use kube::{Api, Client, ResourceExt};

use crate::api::{MongoDB, INSTANCE_LABEL};
use crate::build::names;
use crate::validate::ReferencedObjects;

/// Why the referenced objects could not be read.
#[derive(Debug, thiserror::Error)]
#[error("reading {what}: {source}")]
pub struct DereferenceError {
    /// What was being read.
    what: String,
    /// What the API server said.
    #[source]
    source: kube::Error,
}

/// Reads everything `mongodb` refers to. An object that does not exist is
/// `None` (or absent from its list): whether that is a problem is for
/// `validate` to say.
pub async fn dereference(
    client: &Client,
    mongodb: &MongoDB,
) -> Result<ReferencedObjects, DereferenceError> {
    let namespace = mongodb.namespace().unwrap_or_default();
    let instance = mongodb.name_any();
    let failed = |what: String| move |source| DereferenceError { what, source };

    let hostconf_name = names::hostconf(&instance, mongodb.spec.member_config_ref.as_deref());
    let hostconf = Api::<ConfigMap>::namespaced(client.clone(), &namespace)
        .get_opt(&hostconf_name)
        .await
        .map_err(failed(format!("ConfigMap {hostconf_name}")))?;

    let credentials_secret = match &mongodb.spec.credentials_secret_ref {
        Some(reference) => Api::<Secret>::namespaced(client.clone(), &namespace)
            .get_opt(&reference.name)
            .await
            .map_err(failed(format!("Secret {}", reference.name)))?,
        None => None,
    };

    let selector = ListParams::default().labels(&format!("{INSTANCE_LABEL}={instance}"));
    let services_api = Api::<Service>::namespaced(client.clone(), &namespace);
    let mut services = services_api
        .list(&selector)
        .await
        .map_err(failed("the member Services".to_string()))?
        .items;
    // FedState's arbiter Service carries `app` but not the instance label.
    let arbiter = names::arbiter(&instance);
    if !services.iter().any(|s| s.name_any() == arbiter) {
        let found = services_api
            .get_opt(&arbiter)
            .await
            .map_err(failed(format!("Service {arbiter}")))?;
        services.extend(found);
    }
    let stateful_sets = Api::<StatefulSet>::namespaced(client.clone(), &namespace)
        .list(&selector)
        .await
        .map_err(failed("the member StatefulSets".to_string()))?
        .items;
    let pods = Api::<Pod>::namespaced(client.clone(), &namespace)
        .list(&selector)
        .await
        .map_err(failed("the member pods".to_string()))?
        .items;

    let custom_config = match &mongodb.spec.custom_config_ref {
        Some(name) => Api::<ConfigMap>::namespaced(client.clone(), &namespace)
            .get_opt(name)
            .await
            .map_err(failed(format!("ConfigMap {name}")))?,
        None => None,
    };

    // Leaving must not need the shared credentials: the operator's own
    // clusterAdmin user can take this cluster's members out.
    let operator_credentials = match mongodb.metadata.deletion_timestamp {
        Some(_) => {
            let name = names::admin_credentials_secret(&instance);
            Api::<Secret>::namespaced(client.clone(), &namespace)
                .get_opt(&name)
                .await
                .map_err(failed(format!("Secret {name}")))?
        }
        None => None,
    };

    Ok(ReferencedObjects {
        hostconf,
        credentials_secret,
        services,
        stateful_sets,
        pods,
        custom_config,
        operator_credentials,
    })
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::PostParams;
    use serde_json::json;

    use super::*;
    use crate::build::fixtures;
    use crate::controller::test_cluster;

    async fn create_service(client: &Client, name: &str, labels: serde_json::Value) {
        let service: Service = serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [{"name": "mongo", "port": 27017, "targetPort": 27017}]},
        }))
        .unwrap();
        Api::<Service>::namespaced(client.clone(), fixtures::NAMESPACE)
            .create(&PostParams::default(), &service)
            .await
            .expect("the Service is created");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fedstates_arbiter_service_is_found_by_its_name() {
        // FedState labels member Services with the instance label and `app`, but
        // the arbiter Service only with `app` (pkg/driver/k8s/label.go).
        let (_server, client) = test_cluster::start().await;
        let mongodb = fixtures::mongodb();
        create_service(
            &client,
            "demo-mongodb-0",
            json!({"app.kubernetes.io/instance": "demo", "app": "demo-mongodb-0"}),
        )
        .await;
        create_service(
            &client,
            "demo-mongodb-arbiter",
            json!({"app": "demo-mongodb-arbiter"}),
        )
        .await;
        create_service(
            &client,
            "other-mongodb-arbiter",
            json!({"app": "other-mongodb-arbiter"}),
        )
        .await;
        let referenced = dereference(&client, &mongodb).await.unwrap();
        let mut names: Vec<String> = referenced.services.iter().map(|s| s.name_any()).collect();
        names.sort();
        assert_eq!(names, ["demo-mongodb-0", "demo-mongodb-arbiter"]);
    }
}
