//! The kubelet: a killed container restarted and counted; a lost cluster's
//! containers stopped and restarted at the same address when healed; a
//! container waiting with a config error until its Secret exists; a failing
//! liveness probe; pods started and status converging through API errors and
//! dropped watches; a running container's Secret and ConfigMap volumes
//! refreshed in place (but not a `subPath` mount, a finished init container's,
//! or from a deleted Secret).

use super::*;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::ByteString;

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

/// How long a refreshed volume may take to show, with a 200 ms sync period.
const REFRESH_PATIENCE: Duration = Duration::from_secs(20);

/// A Secret's `data` as JSON (base64), for a create or a merge patch.
fn secret_data(pairs: &[(&str, &str)]) -> serde_json::Value {
    let data: BTreeMap<String, ByteString> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), ByteString(v.as_bytes().to_vec())))
        .collect();
    serde_json::to_value(data).unwrap()
}

/// The files of `container`'s mount at `mount_path`, as the container sees them now.
fn mounted(container: &ResolvedContainer, mount_path: &str) -> BTreeMap<String, String> {
    let mount = container
        .mounts
        .iter()
        .find(|m| m.mount_path == mount_path)
        .unwrap_or_else(|| panic!("{mount_path} is mounted"));
    let files = match &mount.volume {
        ResolvedVolume::Secret { files, .. } | ResolvedVolume::ConfigMap { files, .. } => files,
        other => panic!("{mount_path} resolved as {other:?}"),
    };
    files
        .snapshot()
        .iter()
        .map(|(k, v)| (k.clone(), String::from_utf8_lossy(v).into_owned()))
        .collect()
}

fn files(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Changed Secret and ConfigMap objects reach a running container's volumes,
/// all files of a volume at once, but not its `subPath` mount nor a finished
/// init container's volume; a deleted Secret leaves the files as they were.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_containers_secret_and_config_map_volumes_refresh_in_place() {
    let bench = Bench::start_with(129, |options| {
        options.volume_sync_period = Duration::from_millis(200);
    })
    .await;
    let secrets: Api<Secret> = Api::namespaced(bench.client.clone(), NS);
    let config_maps: Api<ConfigMap> = Api::namespaced(bench.client.clone(), NS);
    let create = PostParams::default();
    let patch = PatchParams::default();
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "tls", "namespace": NS},
        "data": secret_data(&[("tls.pem", "cert-1"), ("ca.pem", "ca-1")])
    }))
    .unwrap();
    secrets.create(&create, &secret).await.unwrap();
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "conf", "namespace": NS},
        "data": {"mongod.conf": "v1"}
    }))
    .unwrap();
    config_maps.create(&create, &config_map).await.unwrap();
    // A round refreshes the mounts in this order: the subPath mount first, so
    // a (wrong) refresh of it has happened once a later mount shows new files;
    // the ConfigMap last, so that seeing it change means the Secret mounts
    // before it were processed in the same round.
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "rotating", "namespace": NS},
        "spec": {
            "terminationGracePeriodSeconds": 1,
            "initContainers": [{
                "name": "init", "image": "busybox:1.36",
                "volumeMounts": [{"name": "tls", "mountPath": "/tls"}]
            }],
            "containers": [{
                "name": "server", "image": "mongo:7.0",
                "volumeMounts": [
                    {"name": "tls", "mountPath": "/sub/server.pem", "subPath": "tls.pem"},
                    {"name": "tls-items", "mountPath": "/items"},
                    {"name": "tls", "mountPath": "/tls"},
                    {"name": "conf", "mountPath": "/conf"}
                ]
            }],
            "volumes": [
                {"name": "tls", "secret": {"secretName": "tls"}},
                {"name": "tls-items", "secret": {"secretName": "tls",
                    "items": [{"key": "tls.pem", "path": "certs/server.pem"}]}},
                {"name": "conf", "configMap": {"name": "conf"}}
            ]
        }
    }))
    .unwrap();
    bench.pods().create(&create, &pod).await.unwrap();
    let started = |name: &str| {
        bench
            .runtime
            .starts()
            .into_iter()
            .filter(|c| c.pod.name == "rotating" && c.name == name)
            .collect::<Vec<_>>()
    };
    eventually("the server container runs", || async {
        !started("server").is_empty()
    })
    .await;
    let server = started("server").remove(0);
    let init = started("init").remove(0);
    let first = files(&[("tls.pem", "cert-1"), ("ca.pem", "ca-1")]);
    assert_eq!(mounted(&server, "/tls"), first);
    assert_eq!(
        mounted(&server, "/items"),
        files(&[("certs/server.pem", "cert-1")])
    );
    assert_eq!(mounted(&server, "/conf"), files(&[("mongod.conf", "v1")]));

    // A rotation: both files of the Secret change together.
    secrets
        .patch(
            "tls",
            &patch,
            &Patch::Merge(
                json!({"data": secret_data(&[("tls.pem", "cert-2"), ("ca.pem", "ca-2")])}),
            ),
        )
        .await
        .unwrap();
    config_maps
        .patch(
            "conf",
            &patch,
            &Patch::Merge(json!({"data": {"mongod.conf": "v2"}})),
        )
        .await
        .unwrap();
    let second = files(&[("tls.pem", "cert-2"), ("ca.pem", "ca-2")]);
    eventually_within(
        REFRESH_PATIENCE,
        "the running container sees the new Secret and ConfigMap",
        || async {
            let tls = mounted(&server, "/tls");
            assert!(
                tls == first || tls == second,
                "the files change all at once: {tls:?}"
            );
            tls == second
                && mounted(&server, "/items") == files(&[("certs/server.pem", "cert-2")])
                && mounted(&server, "/conf") == files(&[("mongod.conf", "v2")])
        },
    )
    .await;
    assert_eq!(
        mounted(&server, "/sub/server.pem"),
        first,
        "a subPath mount keeps the files it started with"
    );
    assert_eq!(
        mounted(&init, "/tls"),
        first,
        "a finished init container's volume is not refreshed"
    );
    assert_eq!(
        started("server").len(),
        1,
        "the container was not restarted"
    );

    // The Secret goes: the files stay. The round that shows v3 may have read
    // the Secret before the deletion; the one that shows v4 started after that
    // round ended, so it read the Secret after the deletion, before the ConfigMap.
    secrets
        .delete("tls", &DeleteParams::default())
        .await
        .unwrap();
    for version in ["v3", "v4"] {
        config_maps
            .patch(
                "conf",
                &patch,
                &Patch::Merge(json!({"data": {"mongod.conf": version}})),
            )
            .await
            .unwrap();
        eventually_within(
            REFRESH_PATIENCE,
            &format!("the ConfigMap's {version} is mounted"),
            || async { mounted(&server, "/conf") == files(&[("mongod.conf", version)]) },
        )
        .await;
    }
    assert_eq!(
        mounted(&server, "/tls"),
        second,
        "a deleted Secret leaves the files"
    );
    assert_eq!(
        mounted(&server, "/items"),
        files(&[("certs/server.pem", "cert-2")])
    );
    bench.stop().await;
}
