//! The endpoints controller: a core/v1 `Endpoints` object for every Service
//! with a selector, listing the selected pods (ready ones under `addresses`,
//! others under `notReadyAddresses`, all ready with `publishNotReadyAddresses`),
//! so `kubectl describe service` shows where traffic goes. EndpointSlices are
//! not written.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    EndpointAddress, EndpointPort, EndpointSubset, Endpoints, ObjectReference, Pod, Service,
};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::api_errors::{is_gone, is_status};
use crate::cache::Cache;
use crate::faults::Faults;
use crate::pod_facts::{is_ready, is_terminal, is_terminating, service_selects, PodsByLabel};
use crate::proxy::target_port;

const RESYNC: Duration = Duration::from_secs(5);

/// Keeps Endpoints in line with Services and pods.
pub struct EndpointsController {
    client: Client,
    cache: Cache,
    faults: watch::Receiver<Faults>,
    written: HashSet<(String, String)>,
}

impl EndpointsController {
    /// A controller writing through `client`.
    pub fn new(client: Client, cache: Cache, faults: watch::Receiver<Faults>) -> Self {
        EndpointsController {
            client,
            cache,
            faults,
            written: HashSet::new(),
        }
    }

    /// Runs until dropped.
    pub async fn run(mut self) {
        if self.cache.wait_until_ready().await.is_err() {
            return;
        }
        let mut changes = self.cache.subscribe();
        loop {
            if !self.faults.borrow().cluster_lost {
                if let Err(error) = self.sync().await {
                    tracing::warn!(%error, "endpoints sync failed");
                }
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    async fn sync(&mut self) -> Result<(), kube::Error> {
        let pods = PodsByLabel::new(self.cache.pods.state());
        let mut wanted = HashSet::new();
        for service in self.cache.services.state() {
            let Some(spec) = service.spec.as_ref() else {
                continue;
            };
            if spec.selector.as_ref().is_none_or(BTreeMap::is_empty) {
                continue;
            }
            let (namespace, name) = (service.namespace().unwrap_or_default(), service.name_any());
            wanted.insert((namespace.clone(), name.clone()));
            let subsets = subsets(&service, &pods.candidates(&service));
            let mut labels = service.labels().clone();
            if spec.cluster_ip.as_deref() == Some("None") {
                labels.insert("service.kubernetes.io/headless".into(), String::new());
            }
            let existing = self
                .cache
                .endpoints
                .get(&ObjectRef::new(&name).within(&namespace));
            let api: Api<Endpoints> = Api::namespaced(self.client.clone(), &namespace);
            match existing {
                Some(current)
                    if current.subsets.clone().unwrap_or_default() == subsets
                        && *current.labels() == labels => {}
                Some(_) => {
                    let subsets = (!subsets.is_empty()).then_some(subsets);
                    let patch = json!({ "metadata": { "labels": labels }, "subsets": subsets });
                    match api
                        .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
                        .await
                    {
                        Ok(_) => {}
                        Err(error) if is_status(&error, 404) => {}
                        Err(error) => return Err(error),
                    }
                }
                None => {
                    let mut endpoints = Endpoints::default();
                    endpoints.metadata.name = Some(name.clone());
                    endpoints.metadata.namespace = Some(namespace.clone());
                    endpoints.metadata.labels = Some(labels);
                    endpoints.subsets = (!subsets.is_empty()).then_some(subsets);
                    match api.create(&PostParams::default(), &endpoints).await {
                        Ok(_) => {}
                        Err(error) if is_status(&error, 409) => {}
                        Err(error) => return Err(error),
                    }
                }
            }
            self.written.insert((namespace, name));
        }
        let orphans: Vec<(String, String)> = self
            .written
            .iter()
            .filter(|k| !wanted.contains(*k))
            .cloned()
            .collect();
        for (namespace, name) in orphans {
            let api: Api<Endpoints> = Api::namespaced(self.client.clone(), &namespace);
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(error) if is_gone(&error) => {}
                Err(error) => return Err(error),
            }
            self.written.remove(&(namespace, name));
        }
        Ok(())
    }
}

/// A resolved endpoint port: name, number, protocol.
type PortKey = (Option<String>, i32, String);

/// The selected pods grouped by their resolved port lists, addresses sorted by IP.
fn subsets(service: &Service, pods: &[Arc<Pod>]) -> Vec<EndpointSubset> {
    let Some(spec) = service.spec.as_ref() else {
        return vec![];
    };
    let selector = spec.selector.clone().unwrap_or_default();
    let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
    let mut groups: BTreeMap<Vec<PortKey>, (Vec<EndpointAddress>, Vec<EndpointAddress>)> =
        BTreeMap::new();
    for pod in pods {
        if pod.namespace() != service.namespace()
            || !service_selects(&selector, pod.metadata.labels.as_ref())
        {
            continue;
        }
        let Some(ip) = pod.status.as_ref().and_then(|s| s.pod_ip.clone()) else {
            continue;
        };
        if is_terminal(pod) || (is_terminating(pod) && !publish_not_ready) {
            continue;
        }
        let ports: Vec<PortKey> = spec
            .ports
            .iter()
            .flatten()
            .filter_map(|p| {
                Some((
                    p.name.clone(),
                    i32::from(target_port(p, pod)?),
                    p.protocol.clone().unwrap_or_else(|| "TCP".into()),
                ))
            })
            .collect();
        let pod_spec = pod.spec.as_ref();
        let hostname = pod_spec
            .filter(|s| s.subdomain.as_deref() == Some(service.name_any().as_str()))
            .and_then(|s| s.hostname.clone());
        let address = EndpointAddress {
            ip,
            hostname,
            node_name: pod_spec.and_then(|s| s.node_name.clone()),
            target_ref: Some(ObjectReference {
                kind: Some("Pod".into()),
                name: pod.metadata.name.clone(),
                namespace: pod.namespace(),
                uid: pod.uid(),
                ..Default::default()
            }),
        };
        let group = groups.entry(ports).or_default();
        if publish_not_ready || is_ready(pod) {
            group.0.push(address);
        } else {
            group.1.push(address);
        }
    }
    groups
        .into_iter()
        .map(|(ports, (mut ready, mut not_ready))| {
            ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            not_ready.sort_by(|a, b| a.ip.cmp(&b.ip));
            EndpointSubset {
                addresses: (!ready.is_empty()).then_some(ready),
                not_ready_addresses: (!not_ready.is_empty()).then_some(not_ready),
                ports: Some(
                    ports
                        .into_iter()
                        .map(|(name, port, protocol)| EndpointPort {
                            name,
                            port,
                            protocol: Some(protocol),
                            app_protocol: None,
                        })
                        .collect(),
                ),
            }
        })
        .collect()
}
