//! Test harness of the controller's Kubernetes I/O: an apiserver-sim on a
//! loopback address of its own, with the `MongoDB` CRD and the fixtures'
//! namespace in place.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU8, Ordering};

use apiserver_sim::{ApiServer, ApiServerHandle};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::PostParams;
use kube::{Api, Client, CustomResourceExt};
use serde_json::json;

use crate::api::MongoDB;
use crate::build::fixtures;

/// A started API server (stopped when the handle drops) and a client for it.
pub async fn start() -> (ApiServerHandle, Client) {
    static NEXT: AtomicU8 = AtomicU8::new(1);
    let last = NEXT.fetch_add(1, Ordering::Relaxed);
    let pid = std::process::id();
    let ip = IpAddr::V4(Ipv4Addr::new(127, 91, (pid % 250) as u8, last));
    let server = ApiServer::start(SocketAddr::new(ip, 0))
        .await
        .expect("apiserver-sim starts");
    let config = kube::Config::new(server.url().parse().expect("a URL"));
    let client = Client::try_from(config).expect("a client");
    Api::<CustomResourceDefinition>::all(client.clone())
        .create(&PostParams::default(), &MongoDB::crd())
        .await
        .expect("the CRD is accepted");
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": fixtures::NAMESPACE}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
        .expect("the namespace is created");
    (server, client)
}
