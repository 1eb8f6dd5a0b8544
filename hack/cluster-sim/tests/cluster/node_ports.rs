//! kube-proxy's NodePorts: bytes carried to the Ready pod and following it
//! when it is replaced; a Service held by a finalizer routing and keeping its
//! Endpoints up to date until it is removed; a cut VIP refusing connections
//! until healed; a pod that cannot reach itself through its own NodePort
//! without hairpin.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_port_carries_bytes_to_the_ready_pod_and_follows_it_when_replaced() {
    let bench = Bench::start(66).await;
    create_secret(&bench.client).await;
    bench
        .create_set(mongo_set("demo-mongodb-0", 1, json!({})))
        .await;
    create_node_port(&bench.client, "demo-mongodb-0", "demo-mongodb-0", 30017).await;
    bench.wait_ready("demo-mongodb-0", 1).await;
    let front = SocketAddr::from((bench.vip, 30017));

    let first = pod(&bench, "demo-mongodb-0-0").await;
    let first_uid = first.uid().unwrap();
    let first_ip: Ipv4Addr = first
        .status
        .as_ref()
        .unwrap()
        .pod_ip
        .as_deref()
        .unwrap()
        .parse()
        .unwrap();
    let routes = bench.cluster().routes();
    let expected = Some(SocketAddr::from((first_ip, 27017)));
    eventually("the route names the pod", || async {
        routes.borrow().get(&front).copied() == Some(expected)
    })
    .await;
    eventually("the nodePort answers from the pod", || async {
        greet(front).await.is_some_and(|g| g.contains(&first_uid))
    })
    .await;
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(bench.client.clone(), NS);
    eventually("the Service's Endpoints list the pod", || async {
        let found = endpoints.get_opt("demo-mongodb-0").await.unwrap();
        let subset = found
            .and_then(|e| e.subsets)
            .and_then(|s| s.into_iter().next());
        subset.is_some_and(|s| {
            s.addresses
                .is_some_and(|a| a.len() == 1 && a[0].ip == first_ip.to_string())
                && s.ports.is_some_and(|p| p.len() == 1 && p[0].port == 27017)
        })
    })
    .await;

    bench
        .pods()
        .delete("demo-mongodb-0-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("a replacement pod is Ready", || async {
        let pod = bench.pods().get_opt("demo-mongodb-0-0").await.unwrap();
        pod.is_some_and(|p| {
            p.uid() != Some(first_uid.clone())
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
    .await;
    let second = pod(&bench, "demo-mongodb-0-0").await;
    let second_uid = second.uid().unwrap();
    eventually("new connections reach the replacement", || async {
        greet(front).await.is_some_and(|g| g.contains(&second_uid))
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cutting_the_vip_refuses_connections_until_healed() {
    let bench = Bench::start(67).await;
    create_secret(&bench.client).await;
    bench
        .create_set(mongo_set("demo-mongodb-0", 1, json!({})))
        .await;
    create_node_port(&bench.client, "demo-mongodb-0", "demo-mongodb-0", 30018).await;
    bench.wait_ready("demo-mongodb-0", 1).await;
    let front = SocketAddr::from((bench.vip, 30018));
    eventually("the nodePort answers", || async {
        greet(front).await.is_some()
    })
    .await;

    bench.cluster().cut_vip();
    eventually("connections to the VIP are refused", || async {
        TcpStream::connect(front).await.is_err()
    })
    .await;
    let pod_ip = pod(&bench, "demo-mongodb-0-0")
        .await
        .status
        .unwrap()
        .pod_ip
        .unwrap();
    assert!(
        greet(SocketAddr::from((
            pod_ip.parse::<Ipv4Addr>().unwrap(),
            27017
        )))
        .await
        .is_some(),
        "the pod itself keeps running"
    );

    bench.cluster().heal();
    eventually("the nodePort answers again", || async {
        greet(front).await.is_some()
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_hairpin_a_pod_cannot_reach_itself_through_its_node_port() {
    let bench = Bench::start(116).await;
    let (front, pod_ip) = bench.one_member_behind_node_port(30019).await;
    let other = Ipv4Addr::new(127, 116, 2, 1);
    eventually("the pod reaches itself through its nodePort", || async {
        greet_from(pod_ip, front).await.is_some()
    })
    .await;

    bench.cluster().set_hairpin(false);
    eventually("the pod's own connections are reset", || async {
        greet_from(pod_ip, front).await.is_none()
    })
    .await;
    assert!(
        greet_from(other, front).await.is_some(),
        "other clients still reach the pod"
    );
    bench.cluster().heal();
    assert!(
        greet_from(pod_ip, front).await.is_none(),
        "heal keeps the cluster's hairpin setting"
    );
    bench.cluster().set_hairpin(true);
    eventually("hairpin again", || async {
        greet_from(pod_ip, front).await.is_some()
    })
    .await;
    bench.stop().await;
}

/// The Endpoints' ready addresses as (IP, pod uid) pairs.
fn ready_addresses(endpoints: &k8s_openapi::api::core::v1::Endpoints) -> Vec<(String, String)> {
    endpoints
        .subsets
        .iter()
        .flatten()
        .flat_map(|s| s.addresses.iter().flatten())
        .map(|a| {
            let uid = a.target_ref.as_ref().and_then(|r| r.uid.clone());
            (a.ip.clone(), uid.unwrap_or_default())
        })
        .collect()
}

/// kube-proxy keeps a Service's rules while the object exists, deletionTimestamp or not
/// (`pkg/proxy/config/config.go` `ServiceConfig.handleUpdateService`; only an informer
/// Delete event calls `OnServiceDelete`), and the endpoints controller keeps updating a
/// Terminating Service's Endpoints (`pkg/controller/endpoint/endpoints_controller.go`
/// `Controller.syncService` deletes them only on NotFound).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_held_by_a_finalizer_keeps_routing_and_its_endpoints_follow_until_removed() {
    let bench = Bench::start(121).await;
    create_secret(&bench.client).await;
    bench
        .create_set(mongo_set("demo-mongodb-0", 1, json!({})))
        .await;
    let services: Api<Service> = Api::namespaced(bench.client.clone(), NS);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": "demo-mongodb-0", "namespace": NS, "finalizers": ["example.com/hold"]},
        "spec": {
            "type": "NodePort",
            "selector": {"app.kubernetes.io/instance": "demo", "app": "demo-mongodb-0"},
            "ports": [{"name": "mongo", "port": 27017, "targetPort": "mongo", "nodePort": 30121}]
        }
    }))
    .unwrap();
    services
        .create(&PostParams::default(), &service)
        .await
        .expect("service created");
    bench.wait_ready("demo-mongodb-0", 1).await;
    let front = SocketAddr::from((bench.vip, 30121));
    let routes = bench.cluster().routes();
    let endpoints: Api<k8s_openapi::api::core::v1::Endpoints> =
        Api::namespaced(bench.client.clone(), NS);

    let first = pod(&bench, "demo-mongodb-0-0").await;
    let first_uid = first.uid().unwrap();
    let first_ip: Ipv4Addr = first.status.unwrap().pod_ip.unwrap().parse().unwrap();
    eventually("the route names the pod", || async {
        routes.borrow().get(&front).copied() == Some(Some(SocketAddr::from((first_ip, 27017))))
    })
    .await;
    eventually("the nodePort answers from the pod", || async {
        greet(front).await.is_some_and(|g| g.contains(&first_uid))
    })
    .await;

    // Karmada's delete: Background, no wait.
    services
        .delete("demo-mongodb-0", &DeleteParams::background())
        .await
        .expect("delete accepted");
    let deleting = services
        .get_opt("demo-mongodb-0")
        .await
        .unwrap()
        .expect("the finalizer keeps the Service");
    assert!(
        deleting.metadata.deletion_timestamp.is_some(),
        "the Service is Terminating"
    );
    assert_eq!(
        deleting.metadata.finalizers,
        Some(vec!["example.com/hold".to_string()]),
        "a Background delete adds no foregroundDeletion finalizer"
    );
    // A label written after the delete: once the Endpoints carry it, the
    // controllers' shared cache holds the Terminating Service.
    services
        .patch(
            "demo-mongodb-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"step": "terminating"}}})),
        )
        .await
        .expect("a Terminating Service can still be labelled");
    eventually(
        "the Terminating Service's Endpoints are updated",
        || async {
            let found = endpoints.get_opt("demo-mongodb-0").await.unwrap();
            found.is_some_and(|e| {
                e.labels().get("step").map(String::as_str) == Some("terminating")
                    && ready_addresses(&e) == [(first_ip.to_string(), first_uid.clone())]
            })
        },
    )
    .await;
    assert_eq!(
        routes.borrow().get(&front).copied(),
        Some(Some(SocketAddr::from((first_ip, 27017)))),
        "the Terminating Service keeps its route"
    );
    assert!(
        greet(front).await.is_some_and(|g| g.contains(&first_uid)),
        "the Terminating Service's nodePort still reaches the pod"
    );

    // The member's pod is replaced while the Service is Terminating.
    bench
        .pods()
        .delete("demo-mongodb-0-0", &DeleteParams::default())
        .await
        .unwrap();
    eventually("a replacement pod is Ready", || async {
        let pod = bench.pods().get_opt("demo-mongodb-0-0").await.unwrap();
        pod.is_some_and(|p| {
            p.uid() != Some(first_uid.clone())
                && p.status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
        })
    })
    .await;
    let second = pod(&bench, "demo-mongodb-0-0").await;
    let second_uid = second.uid().unwrap();
    let second_ip: Ipv4Addr = second.status.unwrap().pod_ip.unwrap().parse().unwrap();
    eventually("the route follows the replacement", || async {
        routes.borrow().get(&front).copied() == Some(Some(SocketAddr::from((second_ip, 27017))))
    })
    .await;
    eventually("new connections reach the replacement", || async {
        greet(front).await.is_some_and(|g| g.contains(&second_uid))
    })
    .await;
    eventually("the Endpoints list the replacement", || async {
        let found = endpoints.get_opt("demo-mongodb-0").await.unwrap();
        found.is_some_and(|e| ready_addresses(&e) == [(second_ip.to_string(), second_uid.clone())])
    })
    .await;
    assert!(
        services
            .get_opt("demo-mongodb-0")
            .await
            .unwrap()
            .is_some_and(|s| s.metadata.deletion_timestamp.is_some()),
        "the Service is still Terminating"
    );

    // The last finalizer goes: the Service is removed, and its route and Endpoints with it.
    services
        .patch(
            "demo-mongodb-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .expect("finalizer removed");
    assert!(
        services.get_opt("demo-mongodb-0").await.unwrap().is_none(),
        "the Service is removed with its last finalizer"
    );
    eventually("the route is gone", || async {
        !routes.borrow().contains_key(&front)
    })
    .await;
    eventually("the nodePort refuses connections", || async {
        TcpStream::connect(front).await.is_err()
    })
    .await;
    eventually("the Endpoints are gone", || async {
        endpoints.get_opt("demo-mongodb-0").await.unwrap().is_none()
    })
    .await;
    bench.stop().await;
}
