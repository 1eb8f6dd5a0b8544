//! The kubelet: a killed container restarted and counted; a lost cluster's
//! containers stopped and restarted at the same address when healed; a
//! container waiting with a config error until its Secret exists; a failing
//! liveness probe; pods started and status converging through API errors and
//! dropped watches.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_container_restarts_and_counts_the_restart() {
    let bench = Bench::start(68).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 1, json!({}))).await;
    bench.wait_ready("db", 1).await;

    bench
        .cluster()
        .kill_container(NS, "db-0", "mongod")
        .await
        .expect("the container is killed");
    eventually("the container restarted and is Ready again", || async {
        let status = pod(&bench, "db-0").await.status.unwrap();
        let container = &status.container_statuses.unwrap()[0];
        let last_exit = container
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code);
        container.restart_count == 1 && container.ready && last_exit == Some(137)
    })
    .await;
    assert!(bench
        .cluster()
        .kill_container(NS, "db-0", "nope")
        .await
        .is_err());
    assert!(bench
        .cluster()
        .kill_container(NS, "absent", "mongod")
        .await
        .is_err());
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lost_cluster_stops_its_containers_and_healing_restarts_them_at_the_same_address() {
    let bench = Bench::start(69).await;
    let (front, pod_ip) = bench.one_member_behind_node_port(30019).await;
    let direct = SocketAddr::from((pod_ip, 27017));
    eventually("the nodePort answers", || async {
        greet(front).await.is_some()
    })
    .await;

    bench.cluster().lose_cluster();
    eventually("nothing answers, neither the VIP nor the pod", || async {
        TcpStream::connect(front).await.is_err() && TcpStream::connect(direct).await.is_err()
    })
    .await;

    bench.cluster().heal();
    eventually(
        "the pod answers again at its old address and through the VIP",
        || async { greet(direct).await.is_some() && greet(front).await.is_some() },
    )
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_container_waits_with_a_config_error_until_its_secret_exists() {
    let bench = Bench::start(70).await;
    bench.create_set(mongo_set("db", 1, json!({}))).await;
    eventually(
        "the container waits with CreateContainerConfigError",
        || async {
            let pod = bench.pods().get_opt("db-0").await.unwrap();
            let waiting = pod
                .and_then(|p| p.status)
                .and_then(|s| s.container_statuses)
                .and_then(|cs| cs.into_iter().next())
                .and_then(|c| c.state)
                .and_then(|s| s.waiting);
            waiting.is_some_and(|w| {
                w.reason.as_deref() == Some("CreateContainerConfigError")
                    && w.message.is_some_and(|m| m.contains("creds"))
            })
        },
    )
    .await;
    assert!(
        bench.runtime.starts().iter().all(|c| c.init),
        "the main container never started without its Secret"
    );
    create_secret(&bench.client).await;
    bench.wait_ready("db", 1).await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_liveness_probe_restarts_a_plain_pods_container() {
    let bench = Bench::start(71).await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "lonely", "namespace": NS},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "containers": [{
                "name": "server", "image": "mongo:7.0",
                "ports": [{"name": "mongo", "containerPort": 27017}],
                "livenessProbe": {"tcpSocket": {"port": 27018}, "periodSeconds": 1, "failureThreshold": 1}
            }]
        }
    }))
    .unwrap();
    bench
        .pods()
        .create(&PostParams::default(), &pod)
        .await
        .unwrap();
    eventually(
        "the container was restarted for failing its liveness probe",
        || async {
            let status = bench
                .pods()
                .get("lonely")
                .await
                .unwrap()
                .status
                .unwrap_or_default();
            status
                .container_statuses
                .is_some_and(|cs| cs[0].restart_count >= 1)
        },
    )
    .await;
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(bench.client.clone(), NS);
    eventually("Unhealthy and Killing events were recorded", || async {
        let reasons: Vec<String> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.reason)
            .collect();
        reasons.iter().any(|r| r == "Unhealthy") && reasons.iter().any(|r| r == "Killing")
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_start_and_status_converges_through_api_errors_and_dropped_watches() {
    let bench = Bench::start(72).await;
    create_secret(&bench.client).await;
    bench
        .server
        .faults()
        .fail_share(0.2, InjectedError::Internal);
    let set: StatefulSet = serde_json::from_value(mongo_set("db", 2, json!({}))).unwrap();
    eventually("the StatefulSet is created despite errors", || async {
        bench
            .sets()
            .create(&PostParams::default(), &set)
            .await
            .is_ok()
            || bench.sets().get("db").await.is_ok()
    })
    .await;
    bench.server.faults().drop_watches();
    eventually(
        "both replicas are reported ready despite errors",
        || async {
            let status = bench.sets().get("db").await.ok().and_then(|s| s.status);
            status.is_some_and(|s| s.ready_replicas == Some(2))
        },
    )
    .await;
    bench.server.faults().clear();
    assert!(
        bench.server.faults().injected_count() > 0,
        "errors were injected"
    );
    assert_eq!(bench.pod_names().await, ["db-0", "db-1"]);
    bench.stop().await;
}
