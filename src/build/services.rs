//! The Services the operator owns (the member Services are propagated by the
//! control plane and never changed here).

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::exporter::exporters_selector;
use super::labels::{component_labels, instance_labels, member_pods_selector, Component};
use super::pod::{METRICS_PORT, MONGODB_PORT};
use super::{names, BuildContext};

/// `<name>-mongodb-headless`: the governing Service of every member StatefulSet.
/// It publishes not-ready addresses: a member must be resolvable and reachable
/// before it is Ready, or a full restart never elects a primary. It selects the
/// instance's member pods only (by their `app.kubernetes.io/name`), never the
/// exporter's.
pub fn headless_service(ctx: &BuildContext) -> Service {
    Service {
        metadata: ctx.object_meta(
            names::headless_service(ctx.name()),
            instance_labels(ctx.name()),
        ),
        spec: Some(ServiceSpec {
            cluster_ip: Some("None".to_string()),
            publish_not_ready_addresses: Some(true),
            selector: Some(member_pods_selector(ctx.name())),
            ports: Some(vec![service_port("mongodb", MONGODB_PORT)]),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// `<name>-mongodb-metrics`, the Service of the instance's exporter pods in this
/// cluster, when the exporter is enabled.
pub fn metrics_service(ctx: &BuildContext) -> Option<Service> {
    if !ctx.spec().metrics_exporter_spec.enable {
        return None;
    }
    Some(Service {
        metadata: ctx.object_meta(
            names::metrics_service(ctx.name()),
            component_labels(ctx.name(), Component::Metrics),
        ),
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_string()),
            selector: Some(exporters_selector(ctx.name())),
            ports: Some(vec![service_port("metrics", METRICS_PORT)]),
            ..ServiceSpec::default()
        }),
        status: None,
    })
}

fn service_port(name: &str, port: i32) -> ServicePort {
    ServicePort {
        name: Some(name.to_string()),
        port,
        target_port: Some(IntOrString::String(name.to_string())),
        protocol: Some("TCP".to_string()),
        ..ServicePort::default()
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::*;
    use super::*;

    #[test]
    fn headless_service_publishes_not_ready_members_of_the_instance() {
        let mongodb = mongodb();
        let service = headless_service(&BuildContext::from_mongodb(&mongodb).unwrap());
        assert_eq!(
            service.metadata.name.as_deref(),
            Some("demo-mongodb-headless")
        );
        assert!(service.metadata.owner_references.is_some());
        let spec = service.spec.unwrap();
        assert_eq!(spec.cluster_ip.as_deref(), Some("None"));
        assert_eq!(spec.publish_not_ready_addresses, Some(true));
        assert_eq!(spec.selector, Some(member_pods_selector(NAME)));
        let port = &spec.ports.unwrap()[0];
        assert_eq!(
            (port.port, port.target_port.clone()),
            (27017, Some(IntOrString::String("mongodb".into())))
        );
    }

    #[test]
    fn metrics_service_exists_only_when_the_exporter_is_enabled() {
        let mut mongodb = mongodb();
        assert_eq!(
            metrics_service(&BuildContext::from_mongodb(&mongodb).unwrap()),
            None
        );
        mongodb.spec.metrics_exporter_spec.enable = true;
        let service = metrics_service(&BuildContext::from_mongodb(&mongodb).unwrap()).unwrap();
        assert_eq!(
            service.metadata.name.as_deref(),
            Some("demo-mongodb-metrics")
        );
        assert_eq!(
            service.metadata.labels.unwrap()["app.kubernetes.io/component"],
            "metrics"
        );
        let spec = service.spec.unwrap();
        assert_eq!(spec.selector, Some(exporters_selector(NAME)));
        assert_eq!(spec.ports.unwrap()[0].port, 9216);
    }
}
