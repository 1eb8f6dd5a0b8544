//! The simulated kube-proxy: for every TCP port of every NodePort (or
//! LoadBalancer) Service that has a `nodePort`, a listener on `VIP:nodePort`
//! that forwards each new connection byte-for-byte to a ready pod the Service
//! selects. The current routes are published for the lab (mongod's isSelf).

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use k8s_openapi::api::core::v1::{Pod, Service, ServicePort};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kube::ResourceExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

use crate::cache::Cache;
use crate::faults::Faults;
use crate::pod_facts::{is_ready, is_terminal, is_terminating, service_selects, PodsByLabel};

/// Which pod address serves each `VIP:nodePort` (None: no endpoint, connections are closed at once).
pub type NodePortRoutes = BTreeMap<SocketAddr, Option<SocketAddr>>;

const RESYNC: Duration = Duration::from_secs(5);
const BIND_RETRY: Duration = Duration::from_secs(1);
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The proxy of one node.
pub struct NodePortProxy {
    vip: Ipv4Addr,
    cache: Cache,
    faults: watch::Receiver<Faults>,
    routes: watch::Sender<NodePortRoutes>,
}

/// A listening socket with its connections; dropping it closes them all.
struct Listener(JoinHandle<()>);

impl Drop for Listener {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl NodePortProxy {
    /// A proxy listening on `vip`, publishing its routes on `routes`.
    pub fn new(
        vip: Ipv4Addr,
        cache: Cache,
        faults: watch::Receiver<Faults>,
        routes: watch::Sender<NodePortRoutes>,
    ) -> Self {
        NodePortProxy {
            vip,
            cache,
            faults,
            routes,
        }
    }

    /// Keeps listeners and routes in line with Services and pods, until dropped.
    pub async fn run(mut self) {
        if self.cache.wait_until_ready().await.is_err() {
            return;
        }
        let mut changes = self.cache.subscribe();
        let mut listeners: HashMap<u16, Listener> = HashMap::new();
        loop {
            let routes = compute_routes(
                self.vip,
                &self.cache.services.state(),
                &self.cache.pods.state(),
            );
            self.routes.send_if_modified(|current| {
                let changed = *current != routes;
                if changed {
                    *current = routes.clone();
                }
                changed
            });
            let open = self.faults.borrow().vip_reachable();
            let wanted: Vec<u16> = if open {
                routes.keys().map(SocketAddr::port).collect()
            } else {
                vec![]
            };
            listeners.retain(|port, _| wanted.contains(port));
            let mut bind_failed = false;
            for port in wanted {
                if listeners.contains_key(&port) {
                    continue;
                }
                let frontend = SocketAddr::V4(SocketAddrV4::new(self.vip, port));
                match TcpListener::bind(frontend).await {
                    Ok(listener) => {
                        tracing::debug!(%frontend, "nodePort listening");
                        listeners.insert(
                            port,
                            Listener(tokio::spawn(serve(
                                listener,
                                frontend,
                                self.routes.subscribe(),
                                self.faults.clone(),
                            ))),
                        );
                    }
                    Err(error) => {
                        tracing::warn!(%frontend, %error, "cannot listen on nodePort; retrying");
                        bind_failed = true;
                    }
                }
            }
            let pause = if bind_failed { BIND_RETRY } else { RESYNC };
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(pause) => {}
            }
        }
    }
}

/// Accepts connections on one `VIP:nodePort` and forwards each to the route
/// current at accept time; without hairpin, not back to the pod that dialed.
async fn serve(
    listener: TcpListener,
    frontend: SocketAddr,
    routes: watch::Receiver<NodePortRoutes>,
    faults: watch::Receiver<Faults>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, peer)) = accepted else { continue };
                let backend = routes.borrow().get(&frontend).copied().flatten();
                let no_hairpin = faults.borrow().no_hairpin;
                let backend = backend.filter(|b| !(no_hairpin && b.ip() == peer.ip()));
                match backend {
                    Some(backend) => {
                        connections.spawn(forward(client, backend));
                    }
                    None => {
                        // No endpoint: kube-proxy rejects; the closest after accept is a reset.
                        let _ = client.set_zero_linger();
                    }
                }
            }
            Some(_) = connections.join_next() => {}
        }
    }
}

async fn forward(mut client: TcpStream, backend: SocketAddr) {
    match tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(backend)).await {
        Ok(Ok(mut upstream)) => {
            let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
        }
        _ => {
            let _ = client.set_zero_linger();
        }
    }
}

/// The routes Services and pods imply: for each TCP service port with a nodePort,
/// the first eligible selected pod by name, at its resolved target port.
pub fn compute_routes(
    vip: Ipv4Addr,
    services: &[std::sync::Arc<Service>],
    pods: &[std::sync::Arc<Pod>],
) -> NodePortRoutes {
    let mut routes = NodePortRoutes::new();
    let pods = PodsByLabel::new(pods.to_vec());
    let mut services: Vec<&Service> = services.iter().map(|s| s.as_ref()).collect();
    services.sort_by_key(|s| (s.namespace(), s.name_any()));
    for service in services {
        let Some(spec) = service.spec.as_ref() else {
            continue;
        };
        if !matches!(spec.type_.as_deref(), Some("NodePort" | "LoadBalancer")) {
            continue;
        }
        let selector = spec.selector.clone().unwrap_or_default();
        let publish_not_ready = spec.publish_not_ready_addresses == Some(true);
        let selected = pods.candidates(service);
        let mut candidates: Vec<&Pod> = selected
            .iter()
            .map(|p| p.as_ref())
            .filter(|p| {
                p.namespace() == service.namespace()
                    && service_selects(&selector, p.metadata.labels.as_ref())
            })
            .filter(|p| pod_ip(p).is_some() && !is_terminal(p))
            .filter(|p| publish_not_ready || (is_ready(p) && !is_terminating(p)))
            .collect();
        candidates.sort_by_key(|p| p.name_any());
        for port in spec.ports.iter().flatten() {
            if port.protocol.as_deref().unwrap_or("TCP") != "TCP" {
                continue;
            }
            let Some(node_port) = port
                .node_port
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| *n != 0)
            else {
                continue;
            };
            let frontend = SocketAddr::V4(SocketAddrV4::new(vip, node_port));
            if routes.contains_key(&frontend) {
                continue;
            }
            let backend = candidates.iter().find_map(|pod| {
                let ip = pod_ip(pod)?;
                Some(SocketAddr::V4(SocketAddrV4::new(
                    ip,
                    target_port(port, pod)?,
                )))
            });
            routes.insert(frontend, backend);
        }
    }
    routes
}

fn pod_ip(pod: &Pod) -> Option<Ipv4Addr> {
    pod.status.as_ref()?.pod_ip.as_deref()?.parse().ok()
}

/// The pod port a service port forwards to: `targetPort` as a number, or the
/// container port with that name; `port` when `targetPort` is unset.
pub fn target_port(port: &ServicePort, pod: &Pod) -> Option<u16> {
    match &port.target_port {
        None => u16::try_from(port.port).ok(),
        Some(IntOrString::Int(n)) => u16::try_from(*n).ok(),
        Some(IntOrString::String(name)) => pod
            .spec
            .as_ref()?
            .containers
            .iter()
            .flat_map(|c| c.ports.iter().flatten())
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .and_then(|p| u16::try_from(p.container_port).ok()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::Arc;

    fn service(
        name: &str,
        node_port: Option<i32>,
        target: serde_json::Value,
        publish_not_ready: bool,
    ) -> Arc<Service> {
        let mut port =
            json!({"name": "mongo", "port": 27017, "protocol": "TCP", "targetPort": target});
        if let Some(n) = node_port {
            port["nodePort"] = json!(n);
        }
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"type": "NodePort", "selector": {"app": name}, "ports": [port], "publishNotReadyAddresses": publish_not_ready}
            }))
            .unwrap(),
        )
    }

    fn pod(name: &str, app: &str, ip: &str, ready: bool) -> Arc<Pod> {
        Arc::new(
            serde_json::from_value(json!({
                "metadata": {"name": name, "namespace": "ns", "labels": {"app": app}},
                "spec": {"containers": [{"name": "c", "ports": [{"name": "db", "containerPort": 27018}]}]},
                "status": {"phase": "Running", "podIP": ip,
                    "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}
            }))
            .unwrap(),
        )
    }

    const VIP: Ipv4Addr = Ipv4Addr::new(127, 40, 0, 1);

    #[test]
    fn routes_go_to_ready_selected_pods_only() {
        let routes = compute_routes(
            VIP,
            &[service("a", Some(30001), json!(27017), false)],
            &[
                pod("a-0", "a", "127.40.1.2", false),
                pod("a-1", "a", "127.40.1.3", true),
                pod("b-0", "b", "127.40.1.4", true),
            ],
        );
        assert_eq!(
            routes[&"127.40.0.1:30001".parse().unwrap()],
            Some("127.40.1.3:27017".parse().unwrap())
        );
    }

    #[test]
    fn publish_not_ready_addresses_admits_unready_pods() {
        let routes = compute_routes(
            VIP,
            &[service("a", Some(30001), json!(27017), true)],
            &[pod("a-0", "a", "127.40.1.2", false)],
        );
        assert_eq!(
            routes[&"127.40.0.1:30001".parse().unwrap()],
            Some("127.40.1.2:27017".parse().unwrap())
        );
    }

    #[test]
    fn named_target_ports_resolve_through_the_pods_container_ports() {
        let routes = compute_routes(
            VIP,
            &[service("a", Some(30001), json!("db"), false)],
            &[pod("a-0", "a", "127.40.1.2", true)],
        );
        assert_eq!(
            routes[&"127.40.0.1:30001".parse().unwrap()],
            Some("127.40.1.2:27018".parse().unwrap())
        );
    }

    #[test]
    fn ports_without_node_port_are_ignored_and_missing_endpoints_are_none() {
        let routes = compute_routes(
            VIP,
            &[
                service("a", None, json!(27017), false),
                service("b", Some(30002), json!(27017), false),
            ],
            &[],
        );
        assert_eq!(routes.len(), 1);
        assert_eq!(routes[&"127.40.0.1:30002".parse().unwrap()], None);
    }
}
