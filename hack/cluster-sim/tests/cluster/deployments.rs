//! The Deployment and ReplicaSet controllers: a Deployment's ReplicaSet and
//! Ready pods and their status; a hand-deleted pod replaced; scaling to zero
//! and back; a template change rolled out within maxSurge/maxUnavailable,
//! old ReplicaSets kept to `revisionHistoryLimit`; a `Recreate` rollout; a
//! crash-looping container (alone, and as a rollout that never completes);
//! deleting Deployments removes their ReplicaSets and pods.

use super::*;

use futures::StreamExt;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use kube::runtime::{reflector, watcher};

/// A Deployment `name` (pods labelled `app: <name>`) of echo containers
/// serving `http` (8080), Ready by a TCP probe on it; `extra_spec` is merged
/// into its spec.
fn echo_deployment(name: &str, replicas: i32, extra_spec: serde_json::Value) -> serde_json::Value {
    let mut deployment = json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [echo_container(false)]
                }
            }
        }
    });
    if let (Some(spec), Some(extra)) = (deployment["spec"].as_object_mut(), extra_spec.as_object())
    {
        spec.extend(extra.clone());
    }
    deployment
}

/// The echo container; with `crash`, one whose process exits 1 at once.
fn echo_container(crash: bool) -> serde_json::Value {
    let mut container = json!({
        "name": "server", "image": "echo:1",
        "ports": [{"name": "http", "containerPort": 8080}],
        "readinessProbe": {"tcpSocket": {"port": "http"}, "periodSeconds": 1, "failureThreshold": 1}
    });
    if crash {
        container["command"] = json!(["false"]);
    }
    container
}

fn deployments(bench: &Bench) -> Api<Deployment> {
    Api::namespaced(bench.client.clone(), NS)
}

fn replica_sets(bench: &Bench) -> Api<ReplicaSet> {
    Api::namespaced(bench.client.clone(), NS)
}

async fn create_deployment(bench: &Bench, deployment: serde_json::Value) {
    let deployment: Deployment = serde_json::from_value(deployment).unwrap();
    deployments(bench)
        .create(&PostParams::default(), &deployment)
        .await
        .expect("Deployment created");
}

/// The ReplicaSets of the pods `app=<app>`, by revision.
async fn replica_sets_of(bench: &Bench, app: &str) -> Vec<ReplicaSet> {
    let mut sets = replica_sets(bench)
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items;
    sets.sort_by_key(|s| {
        let revision = s.annotations().get("deployment.kubernetes.io/revision");
        revision.and_then(|r| r.parse::<i64>().ok()).unwrap_or(0)
    });
    sets
}

/// The pods `app=<app>`, by name.
async fn pods_of(bench: &Bench, app: &str) -> Vec<Pod> {
    let mut pods = bench
        .pods()
        .list(&ListParams::default().labels(&format!("app={app}")))
        .await
        .unwrap()
        .items;
    pods.sort_by_key(|p| p.name_any());
    pods
}

fn is_ready(pod: &Pod) -> bool {
    pod.metadata.deletion_timestamp.is_none()
        && pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.as_ref())
            .is_some_and(|cs| cs.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn spec_replicas(set: &ReplicaSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

/// (status, reason) of the Deployment's condition `type_`.
fn condition(deployment: &Deployment, type_: &str) -> (String, String) {
    deployment
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == type_))
        .map(|c| (c.status.clone(), c.reason.clone().unwrap_or_default()))
        .unwrap_or_default()
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|cs| cs.first())
        .map(|c| c.restart_count)
        .unwrap_or(0)
}

/// Waits until the Deployment has rolled out: its generation observed and
/// `replicas` pods updated, ready and available, no other pod counted.
async fn wait_rolled_out(bench: &Bench, name: &str, replicas: i32) {
    eventually(
        &format!("{name} has rolled out {replicas} available replicas"),
        || async {
            let d = deployments(bench).get(name).await.unwrap();
            let s = d.status.clone().unwrap_or_default();
            s.observed_generation == d.metadata.generation
                && s.replicas.unwrap_or(0) == replicas
                && s.updated_replicas.unwrap_or(0) == replicas
                && s.ready_replicas.unwrap_or(0) == replicas
                && s.available_replicas.unwrap_or(0) == replicas
                && s.unavailable_replicas.unwrap_or(0) == 0
        },
    )
    .await;
}

async fn event_notes(bench: &Bench) -> Vec<(String, String)> {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(bench.client.clone(), NS);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .map(|e| (e.reason.unwrap_or_default(), e.note.unwrap_or_default()))
        .collect()
}

/// How many `ScalingReplicaSet` events were recorded about Deployment `name`
/// (a series counting its occurrences).
async fn scaling_events(bench: &Bench, name: &str) -> i32 {
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(bench.client.clone(), NS);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("ScalingReplicaSet")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .map(|e| e.series.map_or(1, |s| s.count))
        .sum()
}

/// What a watch of the pods `app=<app>` saw, evaluated after every event
/// once the first list is complete.
#[derive(Debug, Default, Clone)]
struct Seen {
    /// Fewest Ready pods not being deleted.
    min_ready: Option<usize>,
    /// Most pods not being deleted.
    max_live: usize,
    /// Whether pods of two templates (pod-template-hash) ever existed together,
    /// terminating ones included.
    mixed: bool,
}

fn watch_pods(bench: &Bench, app: &str) -> (Arc<Mutex<Seen>>, JoinHandle<()>) {
    let api: Api<Pod> = Api::namespaced(bench.client.clone(), NS);
    let config = watcher::Config::default().labels(&format!("app={app}"));
    let (reader, writer) = reflector::store();
    let seen = Arc::new(Mutex::new(Seen::default()));
    let record = seen.clone();
    let task = tokio::spawn(async move {
        let mut stream = std::pin::pin!(reflector::reflector(writer, watcher(api, config)));
        let mut listed = false;
        while let Some(event) = stream.next().await {
            match event {
                Ok(watcher::Event::InitDone) => listed = true,
                Ok(_) => {}
                Err(_) => continue,
            }
            if !listed {
                continue;
            }
            let pods = reader.state();
            let live: Vec<_> = pods
                .iter()
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .collect();
            let ready = live.iter().filter(|p| is_ready(p)).count();
            let hashes: std::collections::BTreeSet<&str> =
                pods.iter().map(|p| label(p, "pod-template-hash")).collect();
            let mut seen = record.lock().unwrap();
            seen.min_ready = Some(seen.min_ready.map_or(ready, |m| m.min(ready)));
            seen.max_live = seen.max_live.max(live.len());
            seen.mixed |= hashes.len() > 1;
        }
    });
    (seen, task)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deployment_runs_ready_pods_through_its_replica_set_replaces_a_deleted_pod_and_scales_to_zero_and_back(
) {
    let bench = Bench::start(126).await;
    create_deployment(&bench, echo_deployment("web", 2, json!({}))).await;
    wait_rolled_out(&bench, "web", 2).await;

    let deployment = deployments(&bench).get("web").await.unwrap();
    assert_eq!(
        condition(&deployment, "Available"),
        ("True".into(), "MinimumReplicasAvailable".into())
    );
    eventually(
        "Progressing says the new ReplicaSet is available",
        || async {
            let d = deployments(&bench).get("web").await.unwrap();
            condition(&d, "Progressing") == ("True".into(), "NewReplicaSetAvailable".into())
        },
    )
    .await;
    assert_eq!(
        deployment
            .annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("1")
    );

    // One ReplicaSet, <deployment>-<pod-template-hash>, controlled by the Deployment.
    let sets = replica_sets_of(&bench, "web").await;
    assert_eq!(sets.len(), 1);
    let set = &sets[0];
    let hash = set.labels()["pod-template-hash"].clone();
    assert_eq!(set.name_any(), format!("web-{hash}"));
    let spec = set.spec.clone().unwrap();
    assert_eq!(
        spec.selector.match_labels.unwrap(),
        BTreeMap::from([
            ("app".to_string(), "web".to_string()),
            ("pod-template-hash".to_string(), hash.clone())
        ])
    );
    assert_eq!(spec.replicas, Some(2));
    let owner = &set.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (
            owner.kind.as_str(),
            owner.name.as_str(),
            owner.uid.as_str(),
            owner.controller
        ),
        (
            "Deployment",
            "web",
            deployment.uid().unwrap().as_str(),
            Some(true)
        )
    );
    let annotations = set.annotations();
    assert_eq!(annotations["deployment.kubernetes.io/revision"], "1");
    assert_eq!(
        annotations["deployment.kubernetes.io/desired-replicas"],
        "2"
    );
    assert_eq!(
        annotations["deployment.kubernetes.io/max-replicas"], "3",
        "2 replicas + 25% surge rounded up"
    );
    let set_status = set.status.clone().unwrap();
    assert_eq!(
        (
            set_status.replicas,
            set_status.fully_labeled_replicas,
            set_status.ready_replicas,
            set_status.available_replicas,
            set_status.observed_generation
        ),
        (2, Some(2), Some(2), Some(2), set.metadata.generation)
    );

    // Its pods: <replicaset>-<5 random characters>, from the template, controlled by it.
    let pods = pods_of(&bench, "web").await;
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        let name = pod.name_any();
        let suffix = name.strip_prefix(&format!("{}-", set.name_any())).unwrap();
        assert!(
            suffix.len() == 5 && suffix.bytes().all(|b| b.is_ascii_alphanumeric()),
            "{name}"
        );
        assert_eq!(label(pod, "pod-template-hash"), hash);
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.uid.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            (
                "ReplicaSet",
                set.uid().unwrap().as_str(),
                Some(true),
                Some(true)
            )
        );
        assert!(is_ready(pod), "{name} is Ready");
        assert_eq!(
            pod.spec.as_ref().unwrap().node_name.as_deref(),
            Some(bench.cluster().node_name())
        );
    }
    eventually("the controllers recorded their events", || async {
        let notes = event_notes(&bench).await;
        notes.iter().any(|(r, n)| {
            r == "ScalingReplicaSet"
                && n == &format!("Scaled up replica set {} to 2", set.name_any())
        }) && notes
            .iter()
            .any(|(r, n)| r == "SuccessfulCreate" && n.starts_with("Created pod: web-"))
    })
    .await;

    // A pod deleted by hand is replaced by a new one.
    let victim = pods[0].name_any();
    bench
        .pods()
        .delete(&victim, &DeleteParams::default())
        .await
        .unwrap();
    eventually("the deleted pod is replaced by a Ready one", || async {
        let pods = pods_of(&bench, "web").await;
        pods.len() == 2 && pods.iter().all(|p| p.name_any() != victim && is_ready(p))
    })
    .await;
    wait_rolled_out(&bench, "web", 2).await;
    assert_eq!(
        replica_sets_of(&bench, "web").await.len(),
        1,
        "no new ReplicaSet"
    );

    // Scaled to zero through /scale: no pods, the ReplicaSet kept at 0.
    deployments(&bench)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 0}})),
        )
        .await
        .unwrap();
    eventually("scaled to zero", || async {
        let sets = replica_sets_of(&bench, "web").await;
        pods_of(&bench, "web").await.is_empty()
            && sets.len() == 1
            && spec_replicas(&sets[0]) == 0
            && sets[0].status.as_ref().is_some_and(|s| s.replicas == 0)
    })
    .await;
    wait_rolled_out(&bench, "web", 0).await;
    let deployment = deployments(&bench).get("web").await.unwrap();
    assert_eq!(
        condition(&deployment, "Available").0,
        "True",
        "0 of 0 is enough"
    );

    // And back to two: the same ReplicaSet scales up again.
    deployments(&bench)
        .patch_scale(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 2}})),
        )
        .await
        .unwrap();
    wait_rolled_out(&bench, "web", 2).await;
    let sets = replica_sets_of(&bench, "web").await;
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0].name_any(), set.name_any());
    assert_eq!(
        sets[0].annotations()["deployment.kubernetes.io/revision"],
        "1"
    );
    assert!(pods_of(&bench, "web").await.iter().all(is_ready));
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_template_change_rolls_out_within_surge_and_unavailability_and_recreate_stops_old_pods_first(
) {
    let bench = Bench::start(127).await;
    let strategy = json!({
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0}},
        "revisionHistoryLimit": 1
    });
    create_deployment(&bench, echo_deployment("web", 3, strategy)).await;
    wait_rolled_out(&bench, "web", 3).await;
    let first = replica_sets_of(&bench, "web").await.remove(0);

    // A template change (as `kubectl rollout restart` makes it).
    let (seen, watch) = watch_pods(&bench, "web");
    let restart = |n: &str| json!({"spec": {"template": {"metadata": {"annotations": {"kubectl.kubernetes.io/restartedAt": n}}}}});
    deployments(&bench)
        .patch("web", &PatchParams::default(), &Patch::Merge(restart("1")))
        .await
        .unwrap();
    eventually(
        "a second ReplicaSet took over and the first is at 0",
        || async {
            let sets = replica_sets_of(&bench, "web").await;
            let pods = pods_of(&bench, "web").await;
            sets.len() == 2
                && sets[0].uid() == first.uid()
                && spec_replicas(&sets[0]) == 0
                && spec_replicas(&sets[1]) == 3
                && pods.len() == 3
                && pods.iter().all(|p| {
                    is_ready(p)
                        && label(p, "pod-template-hash") == sets[1].labels()["pod-template-hash"]
                })
        },
    )
    .await;
    wait_rolled_out(&bench, "web", 3).await;
    let seen_now = seen.lock().unwrap().clone();
    assert!(
        seen_now.min_ready >= Some(3),
        "maxUnavailable 0: never fewer than 3 Ready pods ({seen_now:?})"
    );
    assert_eq!(
        seen_now.max_live, 4,
        "maxSurge 1: one pod above 3, used ({seen_now:?})"
    );
    watch.abort();
    let sets = replica_sets_of(&bench, "web").await;
    let second = sets[1].clone();
    assert_eq!(
        second.annotations()["deployment.kubernetes.io/revision"],
        "2"
    );
    let deployment = deployments(&bench).get("web").await.unwrap();
    assert_eq!(
        deployment
            .annotations()
            .get("deployment.kubernetes.io/revision")
            .map(String::as_str),
        Some("2")
    );
    // kube-runtime's recorder folds events of one reason and object into a
    // series (keeping the first note): six more scalings of "web".
    eventually("the rollout's scaling was recorded", || async {
        scaling_events(&bench, "web").await >= 7
    })
    .await;

    // Another change: with revisionHistoryLimit 1, the oldest ReplicaSet goes.
    deployments(&bench)
        .patch("web", &PatchParams::default(), &Patch::Merge(restart("2")))
        .await
        .unwrap();
    eventually(
        "the third ReplicaSet took over and only one old one is kept",
        || async {
            let sets = replica_sets_of(&bench, "web").await;
            sets.len() == 2
                && sets[0].uid() == second.uid()
                && spec_replicas(&sets[0]) == 0
                && spec_replicas(&sets[1]) == 3
                && sets[1]
                    .annotations()
                    .get("deployment.kubernetes.io/revision")
                    .map(String::as_str)
                    == Some("3")
        },
    )
    .await;
    wait_rolled_out(&bench, "web", 3).await;

    // Recreate: every old pod is gone before a new one is made.
    create_deployment(
        &bench,
        echo_deployment("batch", 2, json!({"strategy": {"type": "Recreate"}})),
    )
    .await;
    wait_rolled_out(&bench, "batch", 2).await;
    let (seen, watch) = watch_pods(&bench, "batch");
    deployments(&bench)
        .patch(
            "batch",
            &PatchParams::default(),
            &Patch::Merge(restart("1")),
        )
        .await
        .unwrap();
    eventually("the Recreate rollout completed", || async {
        let sets = replica_sets_of(&bench, "batch").await;
        let pods = pods_of(&bench, "batch").await;
        sets.len() == 2
            && spec_replicas(&sets[0]) == 0
            && pods.len() == 2
            && pods.iter().all(|p| {
                is_ready(p)
                    && label(p, "pod-template-hash") == sets[1].labels()["pod-template-hash"]
            })
    })
    .await;
    wait_rolled_out(&bench, "batch", 2).await;
    let seen_now = seen.lock().unwrap().clone();
    assert!(
        !seen_now.mixed,
        "old and new pods never existed together ({seen_now:?})"
    );
    assert_eq!(seen_now.min_ready, Some(0), "Recreate goes through zero");
    watch.abort();
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_looping_container_touches_no_other_pod_and_deleting_deployments_removes_their_replica_sets_and_pods(
) {
    let bench = Bench::start(128).await;
    create_deployment(&bench, echo_deployment("web", 1, json!({}))).await;
    let mut crashing = echo_deployment("crasher", 1, json!({}));
    crashing["spec"]["template"]["spec"]["containers"] = json!([echo_container(true)]);
    create_deployment(&bench, crashing).await;
    wait_rolled_out(&bench, "web", 1).await;
    let healthy = pods_of(&bench, "web").await.remove(0);

    // The crashing container restarts with back-off; its pod stays, not Ready.
    eventually("the crashing container restarted twice", || async {
        pods_of(&bench, "crasher")
            .await
            .first()
            .is_some_and(|p| restarts(p) >= 2)
    })
    .await;
    let crasher_pods = pods_of(&bench, "crasher").await;
    assert_eq!(
        crasher_pods.len(),
        1,
        "the ReplicaSet does not replace a crash-looping pod"
    );
    let crasher = &crasher_pods[0];
    assert!(!is_ready(crasher));
    let container = &crasher
        .status
        .as_ref()
        .unwrap()
        .container_statuses
        .as_ref()
        .unwrap()[0];
    assert_eq!(
        container
            .last_state
            .as_ref()
            .and_then(|s| s.terminated.as_ref())
            .map(|t| t.exit_code),
        Some(1)
    );
    eventually(
        "the crasher's Deployment reports it unavailable",
        || async {
            let d = deployments(&bench).get("crasher").await.unwrap();
            let s = d.status.clone().unwrap_or_default();
            s.replicas == Some(1)
                && s.available_replicas.unwrap_or(0) == 0
                && s.unavailable_replicas == Some(1)
                && condition(&d, "Available")
                    == ("False".into(), "MinimumReplicasUnavailable".into())
        },
    )
    .await;
    let web = pods_of(&bench, "web").await;
    assert_eq!(web.len(), 1);
    assert_eq!(
        web[0].uid(),
        healthy.uid(),
        "the healthy pod was not replaced"
    );
    assert_eq!(restarts(&web[0]), 0);
    assert!(is_ready(&web[0]));

    // A rollout to a crashing template never completes: with one replica
    // (maxUnavailable 0), the old pod keeps serving.
    let template = json!({"spec": {"template": {"spec": {"containers": [echo_container(true)]}}}});
    deployments(&bench)
        .patch("web", &PatchParams::default(), &Patch::Merge(template))
        .await
        .unwrap();
    eventually(
        "the new ReplicaSet's pod crash-loops beside the old one",
        || async {
            let sets = replica_sets_of(&bench, "web").await;
            let pods = pods_of(&bench, "web").await;
            sets.len() == 2
                && pods.len() == 2
                && pods
                    .iter()
                    .any(|p| p.uid() != healthy.uid() && restarts(p) >= 2)
        },
    )
    .await;
    let sets = replica_sets_of(&bench, "web").await;
    assert_eq!(
        (spec_replicas(&sets[0]), spec_replicas(&sets[1])),
        (1, 1),
        "the old ReplicaSet is not scaled down"
    );
    let old_pod = bench.pods().get(&healthy.name_any()).await.unwrap();
    assert!(is_ready(&old_pod) && restarts(&old_pod) == 0);
    eventually(
        "the Deployment stays available, one replica not updated",
        || async {
            let d = deployments(&bench).get("web").await.unwrap();
            let s = d.status.clone().unwrap_or_default();
            s.replicas == Some(2)
                && s.updated_replicas == Some(1)
                && s.available_replicas == Some(1)
                && condition(&d, "Available").0 == "True"
                && condition(&d, "Progressing") == ("True".into(), "ReplicaSetUpdated".into())
        },
    )
    .await;

    // Deleting the Deployments: the garbage collector takes their
    // ReplicaSets, then their pods.
    for name in ["web", "crasher"] {
        deployments(&bench)
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
    }
    eventually("no Deployment, ReplicaSet or pod is left", || async {
        deployments(&bench)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .is_empty()
            && replica_sets(&bench)
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .is_empty()
            && bench.pod_names().await.is_empty()
    })
    .await;
    bench.stop().await;
}
