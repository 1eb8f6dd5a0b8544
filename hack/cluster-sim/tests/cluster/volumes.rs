//! Volumes: claims provisioned and bound to PersistentVolumes; a bound claim
//! grown online by the resizer and the kubelet, and offline until a pod uses
//! it; a StatefulSet deleted with `propagationPolicy: Orphan` and re-created
//! with a bigger claim template, adopting its running pods and claims.

use std::sync::Mutex as StdMutex;

use cluster_sim::REVISION_LABEL;
use futures::StreamExt;
use k8s_openapi::api::core::v1::PersistentVolume;
use k8s_openapi::api::storage::v1::StorageClass;
use kube::runtime::watcher;

use super::*;

/// A default StorageClass `expandable` (driver `csi.example.com`) that allows expansion.
async fn create_default_expandable_class(client: &Client) {
    let classes: Api<StorageClass> = Api::all(client.clone());
    let class: StorageClass = serde_json::from_value(json!({
        "metadata": {"name": "expandable",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
        "provisioner": "csi.example.com",
        "allowVolumeExpansion": true
    }))
    .unwrap();
    classes
        .create(&PostParams::default(), &class)
        .await
        .expect("StorageClass created");
}

fn storage(
    map: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Option<String> {
    map.and_then(|m| m.get("storage")).map(|q| q.0.clone())
}

/// What an observer of a claim's status sees at one moment.
#[derive(Debug, Clone, PartialEq)]
struct Seen {
    capacity: Option<String>,
    allocated: Option<String>,
    resize_status: Option<String>,
    conditions: Vec<String>,
}

fn seen(claim: &PersistentVolumeClaim) -> Seen {
    let status = claim.status.clone().unwrap_or_default();
    Seen {
        capacity: storage(status.capacity.as_ref()),
        allocated: storage(status.allocated_resources.as_ref()),
        resize_status: status
            .allocated_resource_statuses
            .as_ref()
            .and_then(|m| m.get("storage").cloned()),
        conditions: status
            .conditions
            .iter()
            .flatten()
            .map(|c| c.type_.clone())
            .collect(),
    }
}

/// Records every state of claim `name` from now on.
fn record_claim(client: &Client, name: &str) -> (Arc<StdMutex<Vec<Seen>>>, JoinHandle<()>) {
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), NS);
    let states = Arc::new(StdMutex::new(Vec::<Seen>::new()));
    let record = states.clone();
    let config = watcher::Config::default().fields(&format!("metadata.name={name}"));
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, config));
        while let Some(event) = events.next().await {
            if let Ok(watcher::Event::Apply(claim) | watcher::Event::InitApply(claim)) = event {
                let mut states = record.lock().unwrap();
                let now = seen(&claim);
                if states.last() != Some(&now) {
                    states.push(now);
                }
            }
        }
    });
    (states, task)
}

fn position(states: &[Seen], what: impl Fn(&Seen) -> bool) -> Option<usize> {
    states.iter().position(what)
}

fn has(state: &Seen, condition: &str) -> bool {
    state.conditions.iter().any(|c| c == condition)
}

fn restart_counts(pods: &[Pod]) -> Vec<i32> {
    pods.iter()
        .map(|p| {
            p.status
                .as_ref()
                .unwrap()
                .container_statuses
                .as_ref()
                .unwrap()[0]
                .restart_count
        })
        .collect()
}

async fn grow(bench: &Bench, claim: &str, to: &str) {
    bench
        .claims()
        .patch(
            claim,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": to}}}})),
        )
        .await
        .expect("the claim's storage request grows");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bound_claim_in_use_grows_online_volume_first_then_the_claim() {
    let bench = Bench::start(123).await;
    create_default_expandable_class(&bench.client).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 1, json!({}))).await;
    bench.wait_ready("db", 1).await;

    // Provisioned and bound, in the default class.
    let claim = bench.claims().get("data-db-0").await.unwrap();
    let uid = claim.metadata.uid.clone().unwrap();
    let spec = claim.spec.clone().unwrap();
    assert_eq!(spec.storage_class_name.as_deref(), Some("expandable"));
    assert_eq!(spec.volume_name, Some(format!("pvc-{uid}")));
    assert_eq!(
        claim.annotations()["pv.kubernetes.io/bind-completed"],
        "yes"
    );
    let volumes: Api<PersistentVolume> = Api::all(bench.client.clone());
    let volume = volumes.get(&format!("pvc-{uid}")).await.unwrap();
    let volume_spec = volume.spec.clone().unwrap();
    assert_eq!(
        storage(volume_spec.capacity.as_ref()).as_deref(),
        Some("1Gi")
    );
    assert_eq!(volume_spec.claim_ref.unwrap().uid, Some(uid.clone()));
    assert_eq!(volume_spec.csi.unwrap().driver, "csi.example.com");
    assert_eq!(
        volume_spec.persistent_volume_reclaim_policy.as_deref(),
        Some("Delete")
    );
    assert_eq!(volume.status.unwrap().phase.as_deref(), Some("Bound"));
    assert_eq!(seen(&claim).capacity.as_deref(), Some("1Gi"));
    let pod_before = pod(&bench, "db-0").await;
    let starts_before = bench.runtime.starts().len();

    let (states, recorder) = record_claim(&bench.client, "data-db-0");
    eventually("the recorder sees the claim", || async {
        !states.lock().unwrap().is_empty()
    })
    .await;
    grow(&bench, "data-db-0", "2Gi").await;
    eventually("the claim's capacity is 2Gi", || async {
        let claim = bench.claims().get("data-db-0").await.unwrap();
        seen(&claim).capacity.as_deref() == Some("2Gi")
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    recorder.abort();

    let states = states.lock().unwrap().clone();
    let resizing = position(&states, |s| {
        has(s, "Resizing")
            && s.resize_status.as_deref() == Some("ControllerResizeInProgress")
            && s.allocated.as_deref() == Some("2Gi")
            && s.capacity.as_deref() == Some("1Gi")
    });
    let node_pending = position(&states, |s| {
        has(s, "Resizing")
            && has(s, "FileSystemResizePending")
            && s.resize_status.as_deref() == Some("NodeResizePending")
            && s.capacity.as_deref() == Some("1Gi")
    });
    let node_in_progress = position(&states, |s| {
        s.resize_status.as_deref() == Some("NodeResizeInProgress")
            && s.capacity.as_deref() == Some("1Gi")
    });
    let finished = Seen {
        capacity: Some("2Gi".into()),
        allocated: Some("2Gi".into()),
        resize_status: None,
        conditions: vec![],
    };
    assert!(
        matches!((resizing, node_pending, node_in_progress), (Some(a), Some(b), Some(c)) if a < b && b < c),
        "the resizer's states, then the kubelet's, in order: {states:#?}"
    );
    assert_eq!(states.last(), Some(&finished), "{states:#?}");
    assert!(
        states
            .iter()
            .all(|s| s.capacity.as_deref() != Some("2Gi") || *s == finished),
        "the capacity moves last: {states:#?}"
    );

    let volume = volumes.get(&format!("pvc-{uid}")).await.unwrap();
    assert_eq!(
        storage(volume.spec.unwrap().capacity.as_ref()).as_deref(),
        Some("2Gi")
    );
    let claim = bench.claims().get("data-db-0").await.unwrap();
    assert!(
        !claim
            .annotations()
            .contains_key("volume.kubernetes.io/storage-resizer"),
        "that annotation is for migrated in-tree volumes"
    );
    let events: Api<k8s_openapi::api::events::v1::Event> =
        Api::namespaced(bench.client.clone(), NS);
    eventually("the expansion's events are recorded", || async {
        let recorded: Vec<(String, String, String)> = events
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|e| {
                (
                    e.reason.unwrap_or_default(),
                    e.type_.unwrap_or_default(),
                    e.regarding.and_then(|r| r.kind).unwrap_or_default(),
                )
            })
            .collect();
        [
            ("ExternalExpanding", "Warning", "PersistentVolumeClaim"),
            ("Resizing", "Normal", "PersistentVolumeClaim"),
            (
                "FileSystemResizeRequired",
                "Normal",
                "PersistentVolumeClaim",
            ),
            (
                "FileSystemResizeSuccessful",
                "Normal",
                "PersistentVolumeClaim",
            ),
            ("FileSystemResizeSuccessful", "Normal", "Pod"),
        ]
        .iter()
        .all(|(reason, type_, kind)| {
            recorded
                .iter()
                .any(|r| (r.0.as_str(), r.1.as_str(), r.2.as_str()) == (*reason, *type_, *kind))
        })
    })
    .await;
    let pod_after = pod(&bench, "db-0").await;
    assert_eq!(
        pod_after.metadata.uid, pod_before.metadata.uid,
        "online: the pod stays"
    );
    assert_eq!(restart_counts(&[pod_after]), [0]);
    assert_eq!(
        bench.runtime.starts().len(),
        starts_before,
        "no container restarted"
    );
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_no_pod_uses_waits_for_one_to_grow_its_file_system_and_a_deleted_claims_volume_goes(
) {
    let bench = Bench::start(124).await;
    create_default_expandable_class(&bench.client).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 1, json!({}))).await;
    bench.wait_ready("db", 1).await;
    let scale = |replicas: i32| {
        let sets = bench.sets();
        async move {
            sets.patch(
                "db",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": replicas}})),
            )
            .await
            .unwrap();
        }
    };
    scale(0).await;
    eventually("db-0 is gone", || async {
        bench.pod_names().await.is_empty()
    })
    .await;

    grow(&bench, "data-db-0", "3Gi").await;
    eventually("the volume grew and the node's part waits", || async {
        let s = seen(&bench.claims().get("data-db-0").await.unwrap());
        s.resize_status.as_deref() == Some("NodeResizePending")
            && has(&s, "FileSystemResizePending")
    })
    .await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    let waiting = bench.claims().get("data-db-0").await.unwrap();
    assert_eq!(
        seen(&waiting).capacity.as_deref(),
        Some("1Gi"),
        "no pod, no file system resize"
    );
    let message = waiting
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "FileSystemResizePending")
        .unwrap()
        .message;
    assert_eq!(
        message.as_deref(),
        Some(
            "Waiting for user to (re-)start a pod to finish file system resize of volume on node."
        )
    );

    scale(1).await;
    bench.wait_ready("db", 1).await;
    eventually("the claim's capacity is 3Gi once a pod uses it", || async {
        let s = seen(&bench.claims().get("data-db-0").await.unwrap());
        s.capacity.as_deref() == Some("3Gi") && s.resize_status.is_none() && s.conditions.is_empty()
    })
    .await;

    // A smaller request is refused by the API server; the claim's volume goes with it.
    let refused = bench
        .claims()
        .patch(
            "data-db-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"resources": {"requests": {"storage": "2Gi"}}}})),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(refused, kube::Error::Api(ref s) if s.code == 422),
        "{refused}"
    );
    let volume_name = bench
        .claims()
        .get("data-db-0")
        .await
        .unwrap()
        .spec
        .unwrap()
        .volume_name
        .unwrap();
    bench
        .sets()
        .delete("db", &DeleteParams::default())
        .await
        .unwrap();
    eventually("db-0 is gone", || async {
        bench.pod_names().await.is_empty()
    })
    .await;
    bench
        .claims()
        .delete("data-db-0", &DeleteParams::default())
        .await
        .unwrap();
    let volumes: Api<PersistentVolume> = Api::all(bench.client.clone());
    eventually(
        "the released volume is deleted (reclaim policy Delete)",
        || async { volumes.get_opt(&volume_name).await.unwrap().is_none() },
    )
    .await;
    bench.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_orphaned_set_recreated_with_a_bigger_claim_template_adopts_its_pods_and_claims_as_they_are(
) {
    let bench = Bench::start(125).await;
    create_secret(&bench.client).await;
    bench.create_set(mongo_set("db", 2, json!({}))).await;
    bench.wait_ready("db", 2).await;
    let old_set = bench.sets().get("db").await.unwrap();
    let pods_before: Vec<Pod> = vec![pod(&bench, "db-0").await, pod(&bench, "db-1").await];
    let claims_before: Vec<PersistentVolumeClaim> = vec![
        bench.claims().get("data-db-0").await.unwrap(),
        bench.claims().get("data-db-1").await.unwrap(),
    ];
    let starts_before = bench.runtime.starts().len();

    // volumeClaimTemplates cannot change in place.
    let refused = bench
        .sets()
        .patch(
            "db",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"volumeClaimTemplates": [{"metadata": {"name": "data"},
                "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "2Gi"}}}}]}})),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(status) = refused else {
        panic!("an API status")
    };
    assert_eq!(status.code, 422);
    assert!(
        status.message.contains("spec: Forbidden: updates to statefulset spec for fields other than 'replicas', 'ordinals', 'template', 'updateStrategy', 'persistentVolumeClaimRetentionPolicy' and 'minReadySeconds' are forbidden"),
        "{}",
        status.message
    );

    // Orphaning delete: the set goes, its pods stay and run, without an owner.
    let deleted = bench
        .sets()
        .delete("db", &DeleteParams::orphan())
        .await
        .unwrap();
    let pending = deleted
        .left()
        .expect("the set is left to the garbage collector");
    assert_eq!(
        pending.metadata.finalizers,
        Some(vec!["orphan".to_string()])
    );
    eventually("the set is gone", || async {
        bench.sets().get_opt("db").await.unwrap().is_none()
    })
    .await;
    for before in &pods_before {
        let now = pod(&bench, &before.name_any()).await;
        assert_eq!(now.metadata.uid, before.metadata.uid);
        assert!(
            now.metadata.owner_references.is_none(),
            "{:?}",
            now.metadata.owner_references
        );
        assert!(now.metadata.deletion_timestamp.is_none());
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        bench.pod_names().await,
        ["db-0", "db-1"],
        "nothing deletes orphans"
    );

    // Re-created with a bigger claim template: the pods are adopted as they run.
    let mut bigger = mongo_set("db", 2, json!({}));
    bigger["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"] =
        json!("2Gi");
    bench.create_set(bigger).await;
    let new_set = bench.sets().get("db").await.unwrap();
    assert_ne!(new_set.metadata.uid, old_set.metadata.uid);
    eventually("both pods are adopted", || async {
        let mut adopted = true;
        for name in ["db-0", "db-1"] {
            let owners = pod(&bench, name)
                .await
                .metadata
                .owner_references
                .unwrap_or_default();
            adopted &= owners.len() == 1
                && owners[0].uid == *new_set.metadata.uid.as_ref().unwrap()
                && owners[0].controller == Some(true);
        }
        adopted
    })
    .await;
    bench.wait_ready("db", 2).await;
    tokio::time::sleep(Duration::from_secs(1)).await;

    let pods_after: Vec<Pod> = vec![pod(&bench, "db-0").await, pod(&bench, "db-1").await];
    for (before, after) in pods_before.iter().zip(&pods_after) {
        assert_eq!(
            after.metadata.uid,
            before.metadata.uid,
            "{} kept",
            before.name_any()
        );
        assert_eq!(label(after, REVISION_LABEL), label(before, REVISION_LABEL));
        assert!(after.metadata.deletion_timestamp.is_none());
    }
    assert_eq!(restart_counts(&pods_after), restart_counts(&pods_before));
    assert_eq!(
        bench.runtime.starts().len(),
        starts_before,
        "no container started again"
    );
    let status = bench.set_status("db").await;
    assert_eq!(status["currentRevision"], status["updateRevision"]);
    assert_eq!(
        status["updateRevision"].as_str(),
        Some(label(&pods_after[0], REVISION_LABEL))
    );
    for before in &claims_before {
        let after = bench.claims().get(&before.name_any()).await.unwrap();
        assert_eq!(after.metadata.uid, before.metadata.uid);
        assert_eq!(
            after.metadata.resource_version,
            before.metadata.resource_version,
            "{} untouched",
            before.name_any()
        );
        assert_eq!(
            storage(after.spec.unwrap().resources.unwrap().requests.as_ref()).as_deref(),
            Some("1Gi"),
            "existing claims are used as they are"
        );
    }
    bench.stop().await;
}
