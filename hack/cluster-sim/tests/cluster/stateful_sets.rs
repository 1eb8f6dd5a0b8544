//! The StatefulSet controller: ordered and parallel pod creation with claims,
//! resolved config and Ready status; scaling down and the claims' retention
//! policy; a claim deleted under a running pod; the rolling update.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_statefulset_gets_ordered_pods_with_claims_resolved_config_and_ready_status() {
    let bench = Bench::start(61).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 3, json!({}))).await;
    bench.wait_ready("db", 3).await;

    assert_eq!(bench.pod_names().await, ["db-0", "db-1", "db-2"]);
    assert_eq!(
        bench.claim_names().await,
        ["data-db-0", "data-db-1", "data-db-2"]
    );
    let set = bench.sets().get("db").await.unwrap();
    let status = bench.set_status("db").await;
    assert_eq!(
        status["observedGeneration"].as_i64(),
        set.metadata.generation
    );
    assert_eq!(status["availableReplicas"].as_i64(), Some(3));
    assert_eq!(status["currentReplicas"].as_i64(), Some(3));

    for ordinal in 0..3 {
        let name = format!("db-{ordinal}");
        let pod = pod(&bench, &name).await;
        assert_eq!(label(&pod, "statefulset.kubernetes.io/pod-name"), name);
        assert_eq!(
            label(&pod, "apps.kubernetes.io/pod-index"),
            ordinal.to_string()
        );
        assert_eq!(
            label(&pod, "controller-revision-hash"),
            status["updateRevision"].as_str().unwrap()
        );
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.name.as_str(), owner.controller),
            ("StatefulSet", "db", Some(true))
        );
        let spec = pod.spec.as_ref().unwrap();
        assert_eq!(spec.node_name.as_deref(), Some(bench.cluster().node_name()));
        let pod_status = pod.status.as_ref().unwrap();
        assert_eq!(pod_status.phase.as_deref(), Some("Running"));
        let ip: Ipv4Addr = pod_status.pod_ip.as_deref().unwrap().parse().unwrap();
        assert!(
            bench.prefix.contains(ip) && ip != bench.vip,
            "{ip} is a pod address of this cluster"
        );
        assert_eq!(
            pod_status.host_ip.as_deref(),
            Some(bench.vip.to_string().as_str())
        );
        let conditions: BTreeMap<&str, &str> = pod_status
            .conditions
            .iter()
            .flatten()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        for type_ in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
            assert_eq!(
                conditions.get(type_),
                Some(&"True"),
                "{name} condition {type_}"
            );
        }
        let container = &pod_status.container_statuses.as_ref().unwrap()[0];
        assert!(container.ready && container.state.as_ref().unwrap().running.is_some());
        let init = &pod_status.init_container_statuses.as_ref().unwrap()[0];
        assert_eq!(
            init.state
                .as_ref()
                .unwrap()
                .terminated
                .as_ref()
                .unwrap()
                .reason
                .as_deref(),
            Some("Completed")
        );
        let claim = bench
            .claims()
            .get(&format!("data-db-{ordinal}"))
            .await
            .unwrap();
        assert_eq!(claim.status.unwrap().phase.as_deref(), Some("Bound"));
    }

    let starts = bench.runtime.starts();
    let order: Vec<(String, String)> = starts
        .iter()
        .map(|c| (c.pod.name.clone(), c.name.clone()))
        .collect();
    let expected: Vec<(String, String)> = (0..3)
        .flat_map(|o| {
            [
                (format!("db-{o}"), "init".to_string()),
                (format!("db-{o}"), "mongod".to_string()),
            ]
        })
        .collect();
    assert_eq!(
        order, expected,
        "init containers first, and each pod only once its predecessor is Ready"
    );
    let mongod = starts
        .iter()
        .find(|c| c.pod.name == "db-1" && c.name == "mongod")
        .unwrap();
    assert_eq!(
        mongod.env_value("MONGO_INITDB_ROOT_PASSWORD"),
        Some("pa55word")
    );
    assert_eq!(mongod.env_value("GREETING"), Some("hello db-1"));
    let claim = mongod
        .persistent_volume_claim()
        .expect("the claim is mounted");
    assert_eq!(claim.claim_name, "data-db-1");
    assert_eq!(
        Some(claim.claim_uid.clone()),
        bench.claims().get("data-db-1").await.unwrap().uid()
    );
    let keyfile = mongod
        .mounts
        .iter()
        .find(|m| m.mount_path == "/etc/keyfile")
        .unwrap();
    match &keyfile.volume {
        ResolvedVolume::Secret { files, .. } => {
            assert_eq!(files.get("key"), Some(b"shared-keyfile".to_vec()))
        }
        other => panic!("keyfile volume resolved as {other:?}"),
    }

    let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(bench.client.clone());
    let node = nodes
        .get(bench.cluster().node_name())
        .await
        .expect("the kubelet registered its node");
    let node_status = node.status.unwrap();
    assert!(node_status
        .conditions
        .unwrap()
        .iter()
        .any(|c| c.type_ == "Ready" && c.status == "True"));
    assert_eq!(
        node_status.addresses.unwrap()[0].address,
        bench.vip.to_string()
    );

    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(bench.client.clone(), NS);
    eventually("the kubelet and scheduler recorded events", || async {
        let reasons: Vec<String> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|e| e.reason)
            .collect();
        [
            "Scheduled",
            "Pulled",
            "Created",
            "Started",
            "SuccessfulCreate",
        ]
        .iter()
        .all(|r| reasons.iter().any(|x| x == r))
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_ready_waits_for_readiness_while_parallel_creates_every_pod() {
    let bench = Bench::start(62).await;
    create_secret(&bench.client).await;
    let never_ready = |name: &str, policy: &str| {
        let mut set = mongo_set(name, 3, json!({"podManagementPolicy": policy}));
        set["spec"]["template"]["spec"]["containers"][0]["readinessProbe"] =
            json!({"tcpSocket": {"port": 1}, "periodSeconds": 1});
        set
    };
    bench
        .create_set(never_ready("ordered", "OrderedReady"))
        .await;
    bench.create_set(never_ready("parallel", "Parallel")).await;
    eventually("all Parallel pods run", || async {
        let names = bench.pod_names().await;
        ["parallel-0", "parallel-1", "parallel-2"]
            .iter()
            .all(|n| names.iter().any(|x| x == n))
    })
    .await;
    eventually("ordered-0 runs unready", || async {
        bench
            .pods()
            .get_opt("ordered-0")
            .await
            .unwrap()
            .is_some_and(|p| p.status.and_then(|s| s.phase).as_deref() == Some("Running"))
    })
    .await;
    // The OrderedReady set must not have created its second pod meanwhile; re-check after the Parallel set settled.
    eventually("the parallel set reports 3 replicas", || async {
        bench.set_status("parallel").await["replicas"].as_i64() == Some(3)
    })
    .await;
    let names = bench.pod_names().await;
    assert!(
        !names.iter().any(|n| n == "ordered-1"),
        "ordered-1 must wait for ordered-0 to be Ready: {names:?}"
    );
    assert_eq!(
        bench.set_status("ordered").await["readyReplicas"]
            .as_i64()
            .unwrap_or(0),
        0
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scaling_down_removes_the_highest_ordinals_and_keeps_their_claims_by_default() {
    let bench = Bench::start(63).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 3, json!({}))).await;
    bench.wait_ready("db", 3).await;
    let claim_uid = bench.claims().get("data-db-2").await.unwrap().uid();

    bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually("only db-0 remains", || async {
        bench.pod_names().await == ["db-0"]
    })
    .await;
    bench.wait_ready("db", 1).await;
    assert_eq!(
        bench.claim_names().await,
        ["data-db-0", "data-db-1", "data-db-2"],
        "claims are retained"
    );

    bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    bench.wait_ready("db", 3).await;
    let restarted = bench
        .runtime
        .starts()
        .into_iter()
        .rev()
        .find(|c| c.pod.name == "db-2" && c.name == "mongod")
        .unwrap();
    assert_eq!(
        Some(
            restarted
                .persistent_volume_claim()
                .unwrap()
                .claim_uid
                .clone()
        ),
        claim_uid,
        "db-2 gets its old claim back"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claims_are_deleted_when_the_retention_policy_says_delete() {
    let bench = Bench::start(64).await;
    create_secret(&bench.client).await;
    let policy = json!({"persistentVolumeClaimRetentionPolicy": {"whenScaled": "Delete", "whenDeleted": "Delete"}});
    bench.create_set(mongo_set("db", 2, policy)).await;
    bench.wait_ready("db", 2).await;

    bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 1}})),
        )
        .await
        .unwrap();
    eventually("the scaled-down claim is garbage collected", || async {
        bench.claim_names().await == ["data-db-0"]
    })
    .await;

    bench
        .sets()
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    eventually("pods and claims go with the StatefulSet", || async {
        bench.pod_names().await.is_empty() && bench.claim_names().await.is_empty()
    })
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_deleted_under_a_running_pod_is_not_made_again() {
    // Kubernetes' processReplica makes missing claims for a pending pod only.
    let bench = Bench::start(73).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 1, json!({}))).await;
    bench.wait_ready("db", 1).await;
    bench
        .claims()
        .delete("data-db-0", &DeleteParams::default())
        .await
        .unwrap();
    // Scaling up makes the controller sync the set (and db-0) again.
    bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    bench.wait_ready("db", 2).await;
    assert_eq!(
        bench.claim_names().await,
        ["data-db-1"],
        "db-1 got its claim; running db-0's deleted one was not made again"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rolling_update_replaces_pods_from_the_highest_ordinal_one_at_a_time() {
    let bench = Bench::start(65).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 3, json!({}))).await;
    bench.wait_ready("db", 3).await;
    let old_revision = bench.set_status("db").await["updateRevision"].clone();
    let before = bench.runtime.starts().len();

    let patch =
        json!({"spec": {"template": {"metadata": {"annotations": {"restartedAt": "now"}}}}});
    bench
        .sets()
        .patch("db", &PatchParams::default(), &Patch::Merge(patch))
        .await
        .unwrap();
    eventually("the update revision changes", || async {
        bench.set_status("db").await["updateRevision"] != old_revision
    })
    .await;
    bench.wait_ready("db", 3).await;

    let restarted: Vec<String> = bench.runtime.starts()[before..]
        .iter()
        .filter(|c| c.name == "mongod")
        .map(|c| c.pod.name.clone())
        .collect();
    assert_eq!(restarted, ["db-2", "db-1", "db-0"]);
    let status = bench.set_status("db").await;
    assert_eq!(status["currentRevision"], status["updateRevision"]);
    for name in ["db-0", "db-1", "db-2"] {
        assert_eq!(
            label(&pod(&bench, name).await, "controller-revision-hash"),
            status["updateRevision"].as_str().unwrap()
        );
    }
    bench.stop().await;
}
