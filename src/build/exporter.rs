//! The metrics exporter: one Deployment per member, beside the member's pod
//! and never inside it, dialling its member through the headless Service.
//!
//! Why not a container of the member's pod: kubelet counts every container,
//! restartable init containers included, in the pod's `ContainersReady` and so
//! its `Ready` condition (kubernetes/kubernetes
//! `pkg/kubelet/status/generate.go` `GenerateContainersReadyCondition`,
//! `GeneratePodReadyCondition`), and the member's propagated Service routes
//! only to Ready pods. An exporter there that crash-loops, is OOM-killed or
//! cannot pull its image takes its member off the network. In a pod of its
//! own it can only lose its own metrics; a Deployment (not a StatefulSet)
//! replaces a broken exporter pod when its spec changes, whatever its state.
//!
//! The exporter's pods carry neither the member's Service selector nor the
//! labels of the member pods' selectors (headless Service, PodDisruptionBudget,
//! anti-affinity, the operator's pod watch): nothing that concerns a member
//! ever counts them. The member pod template does not depend on the exporter,
//! so enabling or disabling it restarts no member.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};

use super::labels::{
    component_labels, instance_selector, Component, COMPONENT_LABEL, MANAGED_BY_LABEL, MANAGER,
    NAME_LABEL,
};
use super::pod::{
    container_port, container_security_context, image_pull_secrets, pod_security_context,
    resource_requirements, secret_env, tls_path, tls_volume_and_mount, METRICS_PORT, MONGODB_PORT,
};
use super::secrets::{TLS_CA_FILE, TLS_CERTIFICATE_KEY_FILE};
use super::{names, secrets, BuildContext, DesiredObjects, MemberTarget};
use crate::api::ResourceSetting;
use crate::tls::rotation::restart_digest;

/// `app.kubernetes.io/name` of the exporter's pods: not the members' name, so
/// no selector of the member pods matches them.
pub const EXPORTER_APP_NAME: &str = "mongodb-exporter";
/// Label of an exporter pod naming the member StatefulSet it watches: the
/// Deployment's selector.
pub const EXPORTER_MEMBER_LABEL: &str = "middleware.fedstate.io/exporter-of";

/// Exporter pod template annotation, with TLS on: the digest of the
/// certificate files it reads.
pub const TLS_FILES_ANNOTATION: &str = "middleware.fedstate.io/tls-files";

const EXPORTER_CONTAINER: &str = "metrics-exporter";

/// The collectors the exporter runs: each costs one command per scrape
/// whatever the data (`getDiagnosticData`, `replSetGetStatus`). None of them
/// discovers databases or collections: `$collStats`, `$indexStats`, `dbStats`
/// and `top` (percona/mongodb_exporter `main.go` `GlobalFlags`) grow with the
/// data and are left out.
const COLLECTORS: [&str; 2] = ["--collector.diagnosticdata", "--collector.replicasetstatus"];

/// The exporter Deployment of `target`'s member, when the exporter is enabled.
pub fn exporter_deployment(ctx: &BuildContext, target: &MemberTarget) -> Option<Deployment> {
    let exporter = &ctx.spec().metrics_exporter_spec;
    if !exporter.enable {
        return None;
    }
    let member = target.name(ctx.name());
    let selector = exporter_selector(ctx.name(), &member);
    let mut pod_labels = selector.clone();
    pod_labels.insert(
        COMPONENT_LABEL.to_string(),
        Component::Metrics.as_str().to_string(),
    );
    let user_pod_spec = ctx.spec().pod_spec.clone().unwrap_or_default();
    let mut container = exporter_container(ctx, &member);
    let tls = tls_volume_and_mount(ctx);
    if let Some((_, mount)) = &tls {
        container.volume_mounts = Some(vec![mount.clone()]);
    }
    let pod_spec = PodSpec {
        containers: vec![container],
        volumes: tls.map(|(volume, _)| vec![volume]),
        security_context: Some(pod_security_context(None)),
        // Where the members may run (their taints and node labels), without
        // their affinity: that one is about members, not exporters.
        node_selector: user_pod_spec.node_selector,
        tolerations: user_pod_spec.tolerations,
        image_pull_secrets: image_pull_secrets(ctx),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        ..PodSpec::default()
    };
    Some(Deployment {
        metadata: ctx.object_meta(
            names::exporter(&member),
            component_labels(ctx.name(), Component::Metrics),
        ),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: tls_files_annotation(ctx),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod_spec),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    })
}

/// With TLS on, the digest of the certificate files: the exporter reads them
/// once, when it starts, so a change of them restarts it (a Deployment's
/// rolling update, which only its own metrics notice).
fn tls_files_annotation(ctx: &BuildContext) -> Option<BTreeMap<String, String>> {
    let tls = ctx.tls()?;
    let digest = restart_digest(tls, false);
    Some(BTreeMap::from([(
        TLS_FILES_ANNOTATION.to_string(),
        digest[..16].to_string(),
    )]))
}

/// Whether an object with `labels` is one of the exporter's (its Deployments
/// and Service carry the `metrics` component).
pub fn is_exporter(labels: &BTreeMap<String, String>) -> bool {
    labels.get(COMPONENT_LABEL).map(String::as_str) == Some(Component::Metrics.as_str())
        && labels.get(MANAGED_BY_LABEL).map(String::as_str) == Some(MANAGER)
}

/// The exporter objects held in the cluster and no longer desired.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UnwantedExporterObjects {
    /// Exporter Deployments to delete, by name.
    pub deployments: Vec<String>,
    /// The metrics Service, when it is held and the exporter is disabled.
    pub metrics_service: Option<String>,
}

/// Of the exporter Deployments `held` and the metrics Service `held_service`,
/// those `desired` does not hold: disabling the exporter removes everything
/// enabling it created, and a member that leaves takes its exporter along.
pub fn unwanted(
    desired: &DesiredObjects,
    held: &[String],
    held_service: Option<String>,
) -> UnwantedExporterObjects {
    let wanted = |name: &String| {
        desired
            .deployments
            .iter()
            .any(|deployment| deployment.metadata.name.as_ref() == Some(name))
    };
    let service_wanted = |name: &String| {
        desired
            .services
            .iter()
            .any(|service| service.metadata.name.as_ref() == Some(name))
    };
    UnwantedExporterObjects {
        deployments: held.iter().filter(|name| !wanted(name)).cloned().collect(),
        metrics_service: held_service.filter(|name| !service_wanted(name)),
    }
}

/// `{instance, name: mongodb-exporter}`: every exporter pod of the instance
/// (the metrics Service's selector).
pub fn exporters_selector(instance: &str) -> BTreeMap<String, String> {
    let mut selector = instance_selector(instance);
    selector.insert(NAME_LABEL.to_string(), EXPORTER_APP_NAME.to_string());
    selector
}

/// The pods of the exporter of `member` (the Deployment's selector).
fn exporter_selector(instance: &str, member: &str) -> BTreeMap<String, String> {
    let mut selector = exporters_selector(instance);
    selector.insert(EXPORTER_MEMBER_LABEL.to_string(), member.to_string());
    selector
}

/// The percona exporter, logged in as `clusterMonitor` (credentials from the
/// monitor user's Secret, through the environment only), connected directly
/// to one member at its pod's name under the headless Service: that name
/// resolves whether or not the member is Ready (the headless Service
/// publishes not-ready addresses), and it is the member's own, not the set's.
fn exporter_container(ctx: &BuildContext, member: &str) -> Container {
    let exporter = &ctx.spec().metrics_exporter_spec;
    let monitor_secret = names::monitor_credentials_secret(ctx.name());
    let resources = exporter
        .resources
        .clone()
        .unwrap_or_else(default_exporter_resources);
    let host = format!(
        "{member}-0.{}.{}.svc",
        names::headless_service(ctx.name()),
        ctx.namespace()
    );
    let mut args = vec![format!(
        "--mongodb.uri=mongodb://{host}:{MONGODB_PORT}{}",
        tls_options(ctx)
    )];
    args.extend(COLLECTORS.map(String::from));
    args.push(format!("--web.listen-address=:{METRICS_PORT}"));
    Container {
        name: EXPORTER_CONTAINER.to_string(),
        image: Some(exporter.image.clone()),
        image_pull_policy: Some(ctx.spec().image_pull_policy.as_str().to_string()),
        args: Some(args),
        env: Some(vec![
            secret_env("MONGODB_USER", &monitor_secret, secrets::USERNAME_KEY),
            secret_env("MONGODB_PASSWORD", &monitor_secret, secrets::PASSWORD_KEY),
        ]),
        ports: Some(vec![container_port("metrics", METRICS_PORT)]),
        resources: Some(resource_requirements(&resources)),
        security_context: Some(container_security_context()),
        ..Container::default()
    }
}

/// The connection string's options with TLS on: the CA bundle and the
/// member's certificate as the client's, the host name left unchecked (the
/// certificate names the cluster's VIP, not the pod's DNS name; the chain
/// is still verified).
fn tls_options(ctx: &BuildContext) -> String {
    match ctx.tls() {
        Some(_) => format!(
            "/?tls=true&tlsCAFile={}&tlsCertificateKeyFile={}&tlsAllowInvalidHostnames=true",
            tls_path(TLS_CA_FILE),
            tls_path(TLS_CERTIFICATE_KEY_FILE)
        ),
        None => String::new(),
    }
}

/// 50m CPU requested; 64Mi memory requested and 128Mi limited: one Go process
/// holding one member's `getDiagnosticData` and `replSetGetStatus` documents
/// per scrape, whose size depends on the set's members, not on the data.
fn default_exporter_resources() -> ResourceSetting {
    ResourceSetting {
        requests: BTreeMap::from([
            ("cpu".to_string(), Quantity("50m".to_string())),
            ("memory".to_string(), Quantity("64Mi".to_string())),
        ]),
        limits: BTreeMap::from([("memory".to_string(), Quantity("128Mi".to_string()))]),
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::super::metrics_service;
    use super::*;

    fn enabled() -> crate::api::MongoDB {
        let mut mongodb = mongodb();
        mongodb.spec.metrics_exporter_spec.enable = true;
        mongodb
    }

    /// The pod template of member `index`'s exporter.
    fn pod_template(mongodb: &crate::api::MongoDB, index: u32) -> PodTemplateSpec {
        let ctx = BuildContext::from_mongodb(mongodb).unwrap();
        let deployment = exporter_deployment(&ctx, &member(index)).unwrap();
        deployment.spec.unwrap().template
    }

    /// Member 0's exporter pod template with TLS files `ca`.
    fn with_tls_files(ca: &[u8]) -> PodTemplateSpec {
        let tls = member_tls(crate::api::TlsMode::RequireTls, b"CERT\nKEY\n", ca);
        let mongodb = enabled();
        let ctx = BuildContext::from_mongodb(&mongodb)
            .unwrap()
            .with_tls(Some(tls));
        exporter_deployment(&ctx, &member(0))
            .unwrap()
            .spec
            .unwrap()
            .template
    }

    #[test]
    fn with_tls_the_exporter_dials_over_tls_and_restarts_when_the_files_change() {
        let template = with_tls_files(b"CA\n");
        let pod = template.spec.clone().unwrap();
        let volumes = pod.volumes.unwrap_or_default();
        assert!(volumes.iter().any(|v| v.name == "tls"));
        let digest = |template: &PodTemplateSpec| {
            template.metadata.clone().unwrap().annotations.unwrap()[TLS_FILES_ANNOTATION].clone()
        };
        assert_ne!(digest(&template), digest(&with_tls_files(b"NEW CA\n")));
        let uri = pod.containers[0]
            .args
            .iter()
            .flatten()
            .find(|a| a.starts_with("--mongodb.uri="))
            .cloned()
            .unwrap();
        assert!(
            uri.ends_with(
                ":27017/?tls=true&tlsCAFile=/etc/mongodb/tls/ca.pem\
                 &tlsCertificateKeyFile=/etc/mongodb/tls/mongod.pem&tlsAllowInvalidHostnames=true"
            ),
            "{uri}"
        );
        let plain = pod_template(&enabled(), 0);
        assert!(plain.metadata.unwrap().annotations.is_none());
    }

    #[test]
    fn no_exporter_is_built_when_disabled() {
        let mongodb = mongodb();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        assert_eq!(exporter_deployment(&ctx, &member(0)), None);
    }

    #[test]
    fn the_exporter_dials_its_own_member_with_bounded_collectors() {
        let mongodb = enabled();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let deployment = exporter_deployment(&ctx, &member(2)).unwrap();
        assert_eq!(
            deployment.metadata.name.as_deref(),
            Some("demo-mongodb-2-metrics")
        );
        let spec = deployment.spec.unwrap();
        assert_eq!(spec.replicas, Some(1));
        let pod = spec.template.spec.unwrap();
        let container = &pod.containers[0];
        assert_eq!(
            container.args.as_deref().unwrap(),
            [
                "--mongodb.uri=mongodb://demo-mongodb-2-0.demo-mongodb-headless.db.svc:27017",
                "--collector.diagnosticdata",
                "--collector.replicasetstatus",
                "--web.listen-address=:9216",
            ]
        );
        assert!(!container
            .args
            .iter()
            .flatten()
            .any(|arg| arg.contains("collect-all") || arg.contains("stats")));
        let memory = |quantities: &Option<BTreeMap<String, Quantity>>| {
            quantities.as_ref().unwrap()["memory"].0.clone()
        };
        let resources = container.resources.as_ref().unwrap();
        assert_eq!(memory(&resources.requests), "64Mi");
        assert_eq!(memory(&resources.limits), "128Mi");
    }

    #[test]
    fn the_exporter_logs_in_only_through_the_monitor_secret_and_runs_restricted() {
        let mongodb = enabled();
        let pod = pod_template(&mongodb, 0).spec.unwrap();
        let container = &pod.containers[0];
        assert_eq!(
            container.image.as_deref(),
            Some("percona/mongodb_exporter:0.43")
        );
        assert!(container
            .args
            .iter()
            .flatten()
            .all(|arg| !arg.contains('@')));
        let secret_refs: Vec<(String, String)> = container
            .env
            .iter()
            .flatten()
            .map(|var| {
                let source = var.value_from.as_ref().unwrap().secret_key_ref.as_ref();
                (var.name.clone(), source.unwrap().name.clone())
            })
            .collect();
        let monitor = "demo-monitor-credentials".to_string();
        assert_eq!(
            secret_refs,
            [
                ("MONGODB_USER".to_string(), monitor.clone()),
                ("MONGODB_PASSWORD".to_string(), monitor)
            ]
        );
        assert!(container
            .env
            .iter()
            .flatten()
            .all(|var| var.value.is_none()));
        let context = container.security_context.as_ref().unwrap();
        assert_eq!(context.read_only_root_filesystem, Some(true));
        assert_eq!(context.allow_privilege_escalation, Some(false));
        assert_eq!(
            pod.security_context.as_ref().unwrap().run_as_non_root,
            Some(true)
        );
        assert_eq!(pod.automount_service_account_token, Some(false));
    }

    #[test]
    fn exporter_resources_come_from_its_spec_when_given() {
        let memory = BTreeMap::from([("memory".to_string(), Quantity("256Mi".into()))]);
        let mut mongodb = enabled();
        mongodb.spec.metrics_exporter_spec.resources = Some(ResourceSetting {
            limits: memory.clone(),
            requests: memory.clone(),
        });
        let pod = pod_template(&mongodb, 0).spec.unwrap();
        let resources = pod.containers[0].resources.clone().unwrap();
        assert_eq!(
            (resources.limits, resources.requests),
            (Some(memory.clone()), Some(memory))
        );
    }

    #[test]
    fn disabling_the_exporter_removes_what_enabling_created() {
        let enabled = enabled();
        let ctx = BuildContext::from_mongodb(&enabled).unwrap();
        let targets = [member(0), member(1)];
        let desired = super::super::desired_objects(&ctx, ROOT_PASSWORD, &targets).unwrap();
        let held: Vec<String> = desired
            .deployments
            .iter()
            .map(|d| d.metadata.name.clone().unwrap())
            .collect();
        assert_eq!(held, ["demo-mongodb-0-metrics", "demo-mongodb-1-metrics"]);
        let service = Some("demo-mongodb-metrics".to_string());
        assert!(held.iter().chain(&service).all(|name| {
            let deployment = desired.deployments.iter().map(|d| &d.metadata);
            let services = desired.services.iter().map(|s| &s.metadata);
            deployment.chain(services).any(|meta| {
                meta.name.as_ref() == Some(name) && is_exporter(meta.labels.as_ref().unwrap())
            })
        }));
        assert_eq!(
            unwanted(&desired, &held, service.clone()),
            UnwantedExporterObjects::default(),
            "nothing to delete while enabled"
        );
        let one_member = super::super::desired_objects(&ctx, ROOT_PASSWORD, &targets[..1]).unwrap();
        assert_eq!(
            unwanted(&one_member, &held, service.clone()).deployments,
            ["demo-mongodb-1-metrics"],
            "a member gone takes its exporter along"
        );
        let disabled = mongodb();
        let ctx = BuildContext::from_mongodb(&disabled).unwrap();
        let desired = super::super::desired_objects(&ctx, ROOT_PASSWORD, &targets).unwrap();
        assert_eq!(
            unwanted(&desired, &held, service.clone()),
            UnwantedExporterObjects {
                deployments: held.clone(),
                metrics_service: service,
            }
        );
    }

    #[test]
    fn exporter_pods_match_no_selector_of_the_members() {
        let mongodb = enabled();
        let ctx = BuildContext::from_mongodb(&mongodb).unwrap();
        let template = pod_template(&mongodb, 0);
        let labels = template.metadata.and_then(|meta| meta.labels).unwrap();
        let matches = |selector: &BTreeMap<String, String>| {
            selector
                .iter()
                .all(|(key, value)| labels.get(key) == Some(value))
        };
        let member_service = member(0).selector;
        let headless = super::super::headless_service(&ctx)
            .spec
            .unwrap()
            .selector
            .unwrap();
        let budget = super::super::member_pod_disruption_budget(&ctx)
            .spec
            .unwrap()
            .selector
            .unwrap()
            .match_labels
            .unwrap();
        for selector in [&member_service, &headless, &budget] {
            assert!(!matches(selector), "{selector:?} selects the exporter");
        }
        assert!(!labels.contains_key(super::super::labels::MANAGED_BY_LABEL));
        let metrics = metrics_service(&ctx)
            .unwrap()
            .spec
            .unwrap()
            .selector
            .unwrap();
        assert!(matches(&metrics), "the metrics Service selects it");
    }
}
