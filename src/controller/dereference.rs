//! Stage `dereference` (Kubernetes I/O): reads everything a `MongoDB` object
//! refers to — the hostconf ConfigMap, the credentials Secret, the propagated
//! member Services, and the StatefulSets and pods this operator runs — and
//! returns them as read. Checking them is the pure `validate` stage's work.

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
    let services = Api::<Service>::namespaced(client.clone(), &namespace)
        .list(&selector)
        .await
        .map_err(failed("the member Services".to_string()))?
        .items;
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

    Ok(ReferencedObjects {
        hostconf,
        credentials_secret,
        services,
        stateful_sets,
        pods,
    })
}
