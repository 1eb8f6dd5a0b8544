//! `lab bench --unrelated-config-maps N --unrelated-services M`: objects that
//! are not the operator's, written into a cluster the way a real member
//! cluster holds them (dashboards, chart payloads, application Services), so
//! the bench shows what they cost an operator that shares the cluster.
//!
//! They carry the labels applications and charts set (`app`,
//! `app.kubernetes.io/name`, `…/component`, `…/part-of`) but never
//! `app.kubernetes.io/instance` or the operator's `app.kubernetes.io/managed-by`:
//! nothing of them is the operator's. One in four carries the
//! `kubectl.kubernetes.io/last-applied-configuration` annotation `kubectl
//! apply` writes (the whole object again, data included). Half go into the
//! instances' namespace, half into [`OTHER_NAMESPACE`].

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::{stream, StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::PostParams;
use kube::{Api, Client};

/// The namespace beside the instances' that holds the other half.
pub const OTHER_NAMESPACE: &str = "monitoring";
/// Bytes of data in each ConfigMap (4 KiB).
pub const CONFIG_MAP_BYTES: usize = 4096;
/// Requests in flight at once: apiserver-sim serves each on its own task.
const IN_FLIGHT: usize = 32;
/// One object in this many carries kubectl's last-applied annotation.
const LAST_APPLIED_EVERY: usize = 4;
/// kubectl's annotation holding the applied object.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// How many unrelated objects a bench writes, and whether it rewrites them at rest.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unrelated {
    /// ConfigMaps of [`CONFIG_MAP_BYTES`] each.
    pub config_maps: usize,
    /// ClusterIP Services with one port.
    pub services: usize,
    /// Rewrite each of them once at the start of the at-rest window.
    pub churn: bool,
}

impl Unrelated {
    /// Whether there is anything to write.
    pub fn any(&self) -> bool {
        self.config_maps + self.services > 0
    }

    /// The `lab bench` arguments that ask for these objects.
    pub fn arguments(&self) -> String {
        if !self.any() {
            return String::new();
        }
        format!(
            " --unrelated-config-maps {} --unrelated-services {}{}",
            self.config_maps,
            self.services,
            if self.churn { " --churn-unrelated" } else { "" }
        )
    }

    /// A sentence for the bench's report.
    pub fn describe(&self, written_in: Duration, cluster: &str) -> String {
        format!(
            "Cluster {cluster} also held {} unrelated ConfigMaps ({} bytes of data each) and {} unrelated ClusterIP Services, half in the instances' namespace and half in `{OTHER_NAMESPACE}`, written before the instances in {:.1} s{}.",
            self.config_maps,
            CONFIG_MAP_BYTES,
            self.services,
            written_in.as_secs_f64(),
            if self.churn {
                "; each was rewritten once at the start of the at-rest window"
            } else {
                ""
            }
        )
    }
}

/// Where object `index` goes: every other one into [`OTHER_NAMESPACE`].
fn namespace_of(index: usize, instances_namespace: &str) -> &str {
    if index.is_multiple_of(2) {
        instances_namespace
    } else {
        OTHER_NAMESPACE
    }
}

/// The labels an application's chart sets; `app` names one of a few
/// applications, so selectors over them match many objects, as in a real cluster.
fn labels(index: usize, component: &str) -> BTreeMap<String, String> {
    let app = [
        "grafana",
        "prometheus",
        "loki",
        "checkout",
        "payments",
        "search",
    ][index % 6];
    BTreeMap::from([
        ("app".to_string(), app.to_string()),
        ("app.kubernetes.io/name".to_string(), app.to_string()),
        (
            "app.kubernetes.io/component".to_string(),
            component.to_string(),
        ),
        (
            "app.kubernetes.io/part-of".to_string(),
            "platform".to_string(),
        ),
    ])
}

/// [`CONFIG_MAP_BYTES`] of a dashboard-like JSON text that differs by `index`
/// and `revision`.
fn payload(index: usize, revision: u32) -> String {
    let mut text = format!("{{\"dashboard\":{index},\"revision\":{revision},\"panels\":[");
    let mut panel = 0;
    while text.len() < CONFIG_MAP_BYTES {
        text.push_str(&format!(
            "{{\"id\":{panel},\"title\":\"requests by route {index}-{panel}\",\"expr\":\"sum(rate(http_requests_total[5m]))\"}},"
        ));
        panel += 1;
    }
    text.truncate(CONFIG_MAP_BYTES);
    text
}

/// Adds kubectl's last-applied annotation (the object as applied, without
/// status and server fields) to one object in [`LAST_APPLIED_EVERY`].
fn annotate_last_applied<T: serde::Serialize>(index: usize, object: &T, meta: &mut ObjectMeta) {
    if !index.is_multiple_of(LAST_APPLIED_EVERY) {
        return;
    }
    let applied = serde_json::to_string(object).unwrap_or_default();
    meta.annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(LAST_APPLIED.to_string(), applied);
}

/// Unrelated ConfigMap `index` at `revision`.
pub fn config_map(index: usize, instances_namespace: &str, revision: u32) -> ConfigMap {
    let mut object = ConfigMap {
        metadata: ObjectMeta {
            name: Some(format!("dashboard-{index}")),
            namespace: Some(namespace_of(index, instances_namespace).to_string()),
            labels: Some(labels(index, "dashboard")),
            ..Default::default()
        },
        data: Some(BTreeMap::from([(
            "dashboard.json".to_string(),
            payload(index, revision),
        )])),
        ..Default::default()
    };
    let applied = object.clone();
    annotate_last_applied(index, &applied, &mut object.metadata);
    object
}

/// Unrelated Service `index` at `revision` (a ClusterIP Service with one port).
pub fn service(index: usize, instances_namespace: &str, revision: u32) -> Service {
    let name = format!("app-{index}");
    let mut object = Service {
        metadata: ObjectMeta {
            name: Some(name.clone()),
            namespace: Some(namespace_of(index, instances_namespace).to_string()),
            labels: Some(labels(index, "server")),
            annotations: Some(BTreeMap::from([(
                "lab.example/revision".to_string(),
                revision.to_string(),
            )])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            selector: Some(BTreeMap::from([("app".to_string(), name)])),
            ports: Some(vec![ServicePort {
                name: Some("http".to_string()),
                port: 80,
                target_port: Some(
                    k8s_openapi::apimachinery::pkg::util::intstr::IntOrString::Int(8080),
                ),
                protocol: Some("TCP".to_string()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let applied = object.clone();
    annotate_last_applied(index, &applied, &mut object.metadata);
    object
}

/// Creates [`OTHER_NAMESPACE`], then every unrelated object, 32
/// requests at a time; how long it took.
pub async fn write(
    client: &Client,
    instances_namespace: &str,
    unrelated: &Unrelated,
) -> Result<Duration> {
    let started = Instant::now();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let namespace = Namespace {
        metadata: ObjectMeta {
            name: Some(OTHER_NAMESPACE.to_string()),
            ..Default::default()
        },
        ..Default::default()
    };
    match namespaces.create(&PostParams::default(), &namespace).await {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => return Err(error).context("creating the unrelated objects' namespace"),
    }
    let post = PostParams::default();
    each_in_flight(unrelated.config_maps, |index| {
        let object = config_map(index, instances_namespace, 0);
        let api: Api<ConfigMap> =
            Api::namespaced(client.clone(), namespace_of(index, instances_namespace));
        let post = &post;
        async move { api.create(post, &object).await }
    })
    .await
    .context("creating an unrelated ConfigMap")?;
    each_in_flight(unrelated.services, |index| {
        let object = service(index, instances_namespace, 0);
        let api: Api<Service> =
            Api::namespaced(client.clone(), namespace_of(index, instances_namespace));
        let post = &post;
        async move { api.create(post, &object).await }
    })
    .await
    .context("creating an unrelated Service")?;
    Ok(started.elapsed())
}

/// Rewrites every unrelated object once with new content (a PUT of the whole
/// object, as `kubectl replace` or a chart upgrade does), 32 at a
/// time; how long it took.
pub async fn rewrite(
    client: &Client,
    instances_namespace: &str,
    unrelated: &Unrelated,
) -> Result<Duration> {
    let started = Instant::now();
    let put = PostParams::default();
    each_in_flight(unrelated.config_maps, |index| {
        let object = config_map(index, instances_namespace, 1);
        let api: Api<ConfigMap> =
            Api::namespaced(client.clone(), namespace_of(index, instances_namespace));
        let put = &put;
        async move {
            api.replace(&format!("dashboard-{index}"), put, &object)
                .await
        }
    })
    .await
    .context("rewriting an unrelated ConfigMap")?;
    each_in_flight(unrelated.services, |index| {
        let api: Api<Service> =
            Api::namespaced(client.clone(), namespace_of(index, instances_namespace));
        let put = &put;
        async move {
            let name = format!("app-{index}");
            // A Service's PUT keeps its allocated cluster IP only when it names it.
            let mut object = api.get(&name).await?;
            let fresh = service(index, instances_namespace, 1);
            object.metadata.annotations = fresh.metadata.annotations;
            api.replace(&name, put, &object).await
        }
    })
    .await
    .context("rewriting an unrelated Service")?;
    Ok(started.elapsed())
}

/// Sends `request(index)` for every index below `count`, [`IN_FLIGHT`] at
/// a time; the first refusal ends it.
async fn each_in_flight<T, F>(
    count: usize,
    request: impl FnMut(usize) -> F,
) -> Result<(), kube::Error>
where
    F: std::future::Future<Output = Result<T, kube::Error>>,
{
    stream::iter(0..count)
        .map(request)
        .buffer_unordered(IN_FLIGHT)
        .try_for_each(|_| async { Ok(()) })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    const OPERATOR_LABELS: [&str; 2] =
        ["app.kubernetes.io/instance", "app.kubernetes.io/managed-by"];

    #[test]
    fn config_maps_hold_four_kib_and_none_of_the_operators_labels() {
        for index in 0..8 {
            let object = config_map(index, "default", 0);
            let data = object.data.as_ref().unwrap();
            assert_eq!(data["dashboard.json"].len(), CONFIG_MAP_BYTES);
            let labels = object.metadata.labels.as_ref().unwrap();
            assert!(labels.contains_key("app") && labels.contains_key("app.kubernetes.io/name"));
            assert!(OPERATOR_LABELS.iter().all(|l| !labels.contains_key(*l)));
        }
    }

    #[test]
    fn one_in_four_carries_the_whole_object_as_last_applied() {
        let annotated = |index| {
            config_map(index, "default", 0)
                .metadata
                .annotations
                .and_then(|a| a.get(LAST_APPLIED).cloned())
        };
        let applied = annotated(0).expect("object 0 is annotated");
        assert!(applied.len() > CONFIG_MAP_BYTES);
        assert!((1..4).all(|i| annotated(i).is_none()));
        assert!(service(4, "default", 0)
            .metadata
            .annotations
            .unwrap()
            .contains_key(LAST_APPLIED));
    }

    #[test]
    fn half_go_beside_the_instances_and_a_rewrite_changes_the_data() {
        assert_eq!(
            config_map(0, "default", 0).metadata.namespace.unwrap(),
            "default"
        );
        assert_eq!(
            service(1, "default", 0).metadata.namespace.unwrap(),
            OTHER_NAMESPACE
        );
        assert_ne!(
            config_map(2, "default", 0).data,
            config_map(2, "default", 1).data
        );
        let spec = service(3, "default", 0).spec.unwrap();
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.ports.unwrap()[0].port, 80);
    }

    #[test]
    fn the_arguments_repeat_what_was_asked() {
        let unrelated = Unrelated {
            config_maps: 10,
            services: 2,
            churn: true,
        };
        assert_eq!(
            unrelated.arguments(),
            " --unrelated-config-maps 10 --unrelated-services 2 --churn-unrelated"
        );
        assert_eq!(Unrelated::default().arguments(), "");
    }
}
