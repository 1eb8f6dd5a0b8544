//! Stage `dereference` (Kubernetes I/O): reads everything a `MongoDB` object
//! refers to — the hostconf ConfigMap, the credentials Secret, the keyfile
//! Secrets its StatefulSets and pods mount, the certificate Secret and the
//! TLS Secret the members mount, the propagated
//! member Services (by the instance label, and the arbiter's by its name, as
//! FedState does not label it with the instance), the custom config
//! ConfigMap, and the StatefulSets and pods this operator runs — and returns
//! them as read, from the watch caches ([`mod@super::caches`]): a pass lists
//! nothing, and GETs only what it reads by name for the first time since it
//! changed. Checking them is the pure `validate` stage's work.

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use kube::{Api, Client, ResourceExt};

use super::caches::{ByName, Caches};
use crate::api::MongoDB;
use crate::build::names;
use crate::validate::{keyfile_secret_names, ReferencedObjects};

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
    caches: &Caches,
    mongodb: &MongoDB,
) -> Result<ReferencedObjects, DereferenceError> {
    let namespace = mongodb.namespace().unwrap_or_default();
    let instance = mongodb.name_any();
    let secrets = Api::<Secret>::namespaced(client.clone(), &namespace);
    let get_secret =
        |name: String| read_named(&caches.named_secrets, &secrets, &namespace, name, "Secret");
    let config_maps = Api::<ConfigMap>::namespaced(client.clone(), &namespace);
    let config_map = |name: String| {
        read_named(
            &caches.config_maps,
            &config_maps,
            &namespace,
            name,
            "ConfigMap",
        )
    };

    let hostconf_name = names::hostconf(&instance, mongodb.spec.member_config_ref.as_deref());
    let hostconf = config_map(hostconf_name).await?;
    let credentials_secret = match &mongodb.spec.credentials_secret_ref {
        Some(reference) => get_secret(reference.name.clone()).await?,
        None => None,
    };
    let certificate_secret = match mongodb
        .spec
        .tls
        .as_ref()
        .and_then(|t| t.certificate_secret_ref.as_ref())
    {
        Some(reference) => get_secret(reference.name.clone()).await?,
        None => None,
    };
    let mounted_tls_secret = match mongodb.spec.tls {
        Some(_) => get_secret(names::tls_secret(&instance)).await?,
        None => None,
    };
    let services = member_services(client, caches, mongodb).await?;
    let stateful_sets = caches.stateful_sets.of_instance(&namespace, &instance);
    let pods = caches.pods.of_instance(&namespace, &instance);
    let claims = caches.claims.of_instance(&namespace, &instance);
    let custom_config = match mongodb.spec.custom_config_ref.as_deref() {
        Some(name) => config_map(name.to_string()).await?,
        None => None,
    };
    // Leaving must not need the shared credentials: the operator's own
    // clusterAdmin user can take this cluster's members out.
    let operator_credentials = match mongodb.metadata.deletion_timestamp {
        Some(_) => get_secret(names::admin_credentials_secret(&instance)).await?,
        None => None,
    };
    let mut keyfile_secrets = Vec::new();
    for name in keyfile_secret_names(&stateful_sets, &pods) {
        keyfile_secrets.extend(get_secret(name).await?);
    }

    Ok(ReferencedObjects {
        hostconf,
        credentials_secret,
        certificate_secret,
        mounted_tls_secret,
        services,
        stateful_sets,
        pods,
        claims,
        custom_config,
        operator_credentials,
        keyfile_secrets,
    })
}

/// The instance's Services: those with its label, from the watch cache, and
/// FedState's arbiter Service, which carries `app` but not the instance
/// label, read by name.
pub async fn member_services(
    client: &Client,
    caches: &Caches,
    mongodb: &MongoDB,
) -> Result<Vec<Service>, DereferenceError> {
    let namespace = mongodb.namespace().unwrap_or_default();
    let instance = mongodb.name_any();
    let mut services = caches.services.of_instance(&namespace, &instance);
    let arbiter = names::arbiter(&instance);
    if !services.iter().any(|s| s.name_any() == arbiter) {
        let api = Api::<Service>::namespaced(client.clone(), &namespace);
        let named = read_named(&caches.named_services, &api, &namespace, arbiter, "Service");
        services.extend(named.await?);
    }
    Ok(services)
}

/// The object `name` of `namespace`, read by name through `cache`: `None`
/// when it does not exist.
async fn read_named<K>(
    cache: &ByName<K>,
    api: &Api<K>,
    namespace: &str,
    name: String,
    kind: &str,
) -> Result<Option<K>, DereferenceError>
where
    K: super::caches::Cached
        + kube::Resource<Scope = kube::core::NamespaceResourceScope>
        + Clone
        + serde::Serialize
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
    K::DynamicType: Default,
{
    match cache.get(api, namespace, &name).await {
        Ok(object) => Ok(object),
        Err(source) => Err(DereferenceError {
            what: format!("{kind} {name}"),
            source,
        }),
    }
}

#[cfg(test)]
mod tests {
    use k8s_openapi::api::core::v1::Service;
    use kube::runtime::watcher;
    use serde_json::json;

    use super::*;
    use crate::build::fixtures;
    use crate::controller::caches::{caches, CacheWriter};
    use crate::controller::test_cluster;

    fn service(name: &str, labels: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": fixtures::NAMESPACE, "labels": labels},
            "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [{"name": "mongo", "port": 27017, "targetPort": 27017}]},
        }))
        .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn fedstates_arbiter_service_is_found_by_its_name() {
        // FedState labels member Services with the instance label and `app`, but
        // the arbiter Service only with `app` (pkg/driver/k8s/label.go): the
        // label-narrowed watch never sees it, a pass reads it by name.
        let (_server, client) = test_cluster::start().await;
        let (caches, mut writers, _synced) = caches();
        writers
            .services
            .apply_watcher_event(&watcher::Event::Apply(service(
                "demo-mongodb-0",
                json!({"app.kubernetes.io/instance": "demo", "app": "demo-mongodb-0"}),
            )));
        let api = Api::<Service>::namespaced(client.clone(), fixtures::NAMESPACE);
        for name in ["demo-mongodb-arbiter", "other-mongodb-arbiter"] {
            let arbiter = service(name, json!({"app": name}));
            api.create(&Default::default(), &arbiter).await.unwrap();
        }
        let mongodb = fixtures::mongodb();
        let referenced = dereference(&client, &caches, &mongodb).await.unwrap();
        let mut names: Vec<String> = referenced.services.iter().map(|s| s.name_any()).collect();
        names.sort();
        assert_eq!(names, ["demo-mongodb-0", "demo-mongodb-arbiter"]);
    }
}
