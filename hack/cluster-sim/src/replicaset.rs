//! The ReplicaSet controller (kube-controller-manager's `replicaset`
//! controller, kubernetes/kubernetes `pkg/controller/replicaset/replica_set.go`):
//! `syncReplicaSet` claims the active pods matching the selector (adopting
//! orphans, releasing pods that no longer match), `manageReplicas` creates
//! pods `<set>-<5 random characters>` from the template or deletes the surplus
//! (not-ready and younger pods first, `getPodsToDelete`), and
//! `calculateStatus` (`replica_set_utils.go`) reports the counts.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{ReplicaSet, ReplicaSetCondition};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::ObjectRef;
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::api_errors::{is_gone, is_status};
use crate::cache::Cache;
use crate::controller_ref::{self, controller_ref, merge_patch, omit_zero};
use crate::events::EventSink;
use crate::faults::Faults;
use crate::pod_facts::{is_ready, is_terminal, is_terminating, label_selector_matches, phase};

/// The annotation ranking pods for deletion (`controller.kubernetes.io/pod-deletion-cost`).
pub const POD_DELETION_COST: &str = "controller.kubernetes.io/pod-deletion-cost";

/// At most this many pods created or deleted per sync (`BurstReplicas`).
const BURST_REPLICAS: usize = 500;
/// How long the controller waits for its own writes to appear in its cache.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(5);
/// Periodic resync, as informers do (it also re-checks `minReadySeconds`).
const RESYNC: Duration = Duration::from_secs(5);

/// The controller of one cluster.
pub struct ReplicaSetController {
    client: Client,
    cache: Cache,
    events: EventSink,
    faults: watch::Receiver<Faults>,
}

impl ReplicaSetController {
    /// A controller writing through `client`, reading `cache`.
    pub fn new(
        client: Client,
        cache: Cache,
        faults: watch::Receiver<Faults>,
        node_name: &str,
    ) -> Self {
        let events = EventSink::new(client.clone(), "replicaset-controller", node_name);
        ReplicaSetController {
            client,
            cache,
            events,
            faults,
        }
    }

    /// Syncs every ReplicaSet whenever anything changes, until dropped.
    pub async fn run(mut self) {
        if let Err(error) = self.cache.wait_until_ready().await {
            tracing::warn!(%error, "replicaset controller: cache never filled");
            return;
        }
        let mut changes = self.cache.subscribe();
        loop {
            if !self.faults.borrow().cluster_lost {
                self.sync_all().await;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    async fn sync_all(&self) {
        let sets = self.cache.replica_sets.state();
        if sets.is_empty() {
            return;
        }
        // The active pods (`FilterActivePods`) by controller, and the active
        // orphans by namespace, found once per round.
        let uids: HashSet<String> = sets.iter().filter_map(|s| s.uid()).collect();
        let mut owned: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
        let mut orphans: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
        for pod in self.cache.pods.state() {
            if !is_active(&pod) {
                continue;
            }
            match controller_ref::controller_uid(&pod.metadata) {
                Some(uid) if uids.contains(uid) => {
                    owned.entry(uid.to_string()).or_default().push(pod.clone());
                }
                Some(_) => {}
                None => orphans
                    .entry(pod.namespace().unwrap_or_default())
                    .or_default()
                    .push(pod.clone()),
            }
        }
        for set in sets {
            let pods = set
                .uid()
                .and_then(|uid| owned.remove(&uid))
                .unwrap_or_default();
            let candidates = orphans
                .get(&set.namespace().unwrap_or_default())
                .cloned()
                .unwrap_or_default();
            if let Err(error) = self.sync(&set, pods, &candidates).await {
                tracing::warn!(replicaset = %set.name_any(), error = %format!("{error:#}"), "sync failed");
            }
        }
    }

    /// `syncReplicaSet`: claims pods, manages replicas, writes status.
    async fn sync(
        &self,
        set: &ReplicaSet,
        owned: Vec<Arc<Pod>>,
        orphans: &[Arc<Pod>],
    ) -> anyhow::Result<()> {
        let (Some(namespace), Some(uid), Some(spec)) =
            (set.namespace(), set.uid(), set.spec.as_ref())
        else {
            return Ok(());
        };
        if selects_everything(&spec.selector) {
            // Refused by the API server's validation (`ValidateReplicaSetSpec`).
            return Ok(());
        }
        let deleting = set.metadata.deletion_timestamp.is_some();
        let selected =
            |pod: &Pod| label_selector_matches(&spec.selector, pod.metadata.labels.as_ref());

        let mut pods = Vec::new();
        for pod in owned {
            if selected(pod.as_ref()) {
                pods.push(pod);
            } else if !deleting {
                match controller_ref::release(&self.client, &uid, pod.as_ref()).await {
                    Ok(()) => {}
                    Err(error) if is_gone(&error) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        let adoptable: Vec<&Arc<Pod>> = orphans.iter().filter(|p| selected(p.as_ref())).collect();
        if !deleting && !adoptable.is_empty() && self.still_exists(set).await? {
            for pod in adoptable {
                match controller_ref::adopt(&self.client, set, pod.as_ref()).await {
                    Ok(()) => pods.push(pod.clone()),
                    Err(error) if is_status(&error, 404) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }

        let managed = if deleting {
            Ok(())
        } else {
            self.manage_replicas(set, &namespace, &pods).await
        };
        self.write_status(set, &pods, managed.as_ref().err())
            .await?;
        managed
    }

    /// `manageReplicas`: creates missing pods, deletes surplus ones.
    async fn manage_replicas(
        &self,
        set: &ReplicaSet,
        namespace: &str,
        pods: &[Arc<Pod>],
    ) -> anyhow::Result<()> {
        let desired = desired_replicas(set);
        match pods.len().cmp(&desired) {
            Ordering::Less => {
                let missing = (desired - pods.len()).min(BURST_REPLICAS);
                if !template_selected(set) {
                    // kube-apiserver refuses such a set (`ValidateReplicaSetSpec`:
                    // "`selector` does not match template `labels`"); apiserver-sim
                    // does not, and its pods would never count: create none.
                    anyhow::bail!("`selector` does not match template `labels`");
                }
                if !self.still_exists(set).await? {
                    return Ok(());
                }
                for _ in 0..missing {
                    self.create_pod(set, namespace).await?;
                }
            }
            Ordering::Greater => {
                let surplus = (pods.len() - desired).min(BURST_REPLICAS);
                for pod in pods_to_delete(pods, surplus) {
                    self.delete_pod(set, namespace, &pod).await?;
                }
            }
            Ordering::Equal => {}
        }
        Ok(())
    }

    /// Re-reads the set before acting on a possibly stale cache
    /// (`RecheckDeletionTimestamp` before adoption; before creating pods, so
    /// that the pods of a set just deleted are not made again).
    async fn still_exists(&self, set: &ReplicaSet) -> anyhow::Result<bool> {
        let api: Api<ReplicaSet> =
            Api::namespaced(self.client.clone(), &set.namespace().unwrap_or_default());
        let current = api.get_opt(&set.name_any()).await?;
        Ok(
            current
                .is_some_and(|c| c.uid() == set.uid() && c.metadata.deletion_timestamp.is_none()),
        )
    }

    async fn create_pod(&self, set: &ReplicaSet, namespace: &str) -> anyhow::Result<()> {
        let pod = pod_from_template(set);
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                let pod_name = created.name_any();
                self.events.normal(
                    set.object_ref(&()),
                    "SuccessfulCreate",
                    "Create",
                    format!("Created pod: {pod_name}"),
                );
                let uid = created.uid();
                let key = ObjectRef::new(&pod_name).within(namespace);
                self.cache
                    .wait_for(EXPECTATION_TIMEOUT, |c| {
                        c.pods.get(&key).is_some_and(|p| p.uid() == uid)
                    })
                    .await;
                Ok(())
            }
            Err(error) => {
                self.events.warning(
                    set.object_ref(&()),
                    "FailedCreate",
                    "Create",
                    format!("Error creating: {error}"),
                );
                Err(error.into())
            }
        }
    }

    async fn delete_pod(&self, set: &ReplicaSet, namespace: &str, pod: &Pod) -> anyhow::Result<()> {
        let pod_name = pod.name_any();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        let params = DeleteParams {
            preconditions: Some(Preconditions {
                uid: pod.uid(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match api.delete(&pod_name, &params).await {
            Ok(_) => {
                self.events.normal(
                    set.object_ref(&()),
                    "SuccessfulDelete",
                    "Delete",
                    format!("Deleted pod: {pod_name}"),
                );
                let uid = pod.uid();
                let key = ObjectRef::new(&pod_name).within(namespace);
                self.cache
                    .wait_for(EXPECTATION_TIMEOUT, |c| {
                        c.pods
                            .get(&key)
                            .is_none_or(|p| p.uid() != uid || is_terminating(&p))
                    })
                    .await;
                Ok(())
            }
            Err(error) if is_gone(&error) => Ok(()),
            Err(error) => {
                self.events.warning(
                    set.object_ref(&()),
                    "FailedDelete",
                    "Delete",
                    format!("Error deleting: {error}"),
                );
                Err(error.into())
            }
        }
    }

    /// `calculateStatus` and `updateReplicaSetStatus`, written only when it changes.
    async fn write_status(
        &self,
        set: &ReplicaSet,
        pods: &[Arc<Pod>],
        manage_error: Option<&anyhow::Error>,
    ) -> anyhow::Result<()> {
        let mut patch = status_patch(set, pods, manage_error, Timestamp::now());
        let existing = json!({"status": set.status.clone().unwrap_or_default()});
        let mut merged = existing.clone();
        merge_patch(&mut merged, &patch);
        if merged == existing {
            return Ok(());
        }
        // Conditional on the resourceVersion read, as `UpdateStatus` is: a
        // status of a stale ReplicaSet (say, an older generation) is refused.
        let before = set.resource_version();
        patch["metadata"] = json!({"resourceVersion": before});
        let namespace = set.namespace().unwrap_or_default();
        let name = set.name_any();
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
        match api
            .patch_status(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await
        {
            Ok(_) => {
                let key = ObjectRef::new(&name).within(&namespace);
                self.cache
                    .wait_for(EXPECTATION_TIMEOUT, |c| {
                        c.replica_sets
                            .get(&key)
                            .is_none_or(|s| s.resource_version() != before)
                    })
                    .await;
                Ok(())
            }
            Err(error) if is_status(&error, 404) => Ok(()),
            Err(error) if is_status(&error, 409) => {
                tracing::debug!(replicaset = %name, "status computed from a stale read; retrying");
                Ok(())
            }
            Err(error) => Err(error.into()),
        }
    }
}

/// `IsPodActive`: neither finished nor being deleted.
pub fn is_active(pod: &Pod) -> bool {
    !is_terminal(pod) && !is_terminating(pod)
}

/// An empty selector (no labels, no expressions): the API server refuses it
/// for ReplicaSets and Deployments, and it would select every pod.
pub fn selects_everything(selector: &LabelSelector) -> bool {
    selector.match_labels.as_ref().is_none_or(|m| m.is_empty())
        && selector
            .match_expressions
            .as_ref()
            .is_none_or(|e| e.is_empty())
}

/// Whether the pods the template makes match the set's selector.
fn template_selected(set: &ReplicaSet) -> bool {
    set.spec.as_ref().is_some_and(|spec| {
        let labels = spec
            .template
            .as_ref()
            .and_then(|t| t.metadata.as_ref())
            .and_then(|m| m.labels.as_ref());
        label_selector_matches(&spec.selector, labels)
    })
}

/// `spec.replicas` (defaulted to 1).
pub fn desired_replicas(set: &ReplicaSet) -> usize {
    let replicas = set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
    usize::try_from(replicas).unwrap_or(0)
}

/// When the pod's `Ready` condition last became true.
fn ready_since(pod: &Pod) -> Option<Timestamp> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == "Ready" && c.status == "True")?
        .last_transition_time
        .as_ref()
        .map(|t| t.0)
}

/// `podutil.IsPodAvailable`: Ready for at least `min_ready_seconds`.
pub fn is_available(pod: &Pod, min_ready_seconds: i32, now: Timestamp) -> bool {
    if !is_ready(pod) {
        return false;
    }
    if min_ready_seconds <= 0 {
        return true;
    }
    ready_since(pod)
        .is_some_and(|since| now.as_second() - since.as_second() >= i64::from(min_ready_seconds))
}

/// `GetPodFromTemplate`: a pod `<set>-<random>` (by `generateName`) with the
/// template's labels, annotations, finalizers and spec, controlled by `set`.
fn pod_from_template(set: &ReplicaSet) -> Pod {
    let template = set
        .spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default();
    let meta = template.metadata.unwrap_or_default();
    Pod {
        metadata: ObjectMeta {
            generate_name: Some(format!("{}-", set.name_any())),
            namespace: set.namespace(),
            labels: meta.labels,
            annotations: meta.annotations,
            finalizers: meta.finalizers,
            owner_references: controller_ref(set).map(|o| vec![o]),
            ..Default::default()
        },
        spec: template.spec,
        status: None,
    }
}

/// `podPhaseToOrdinal`: Pending < Unknown < Running.
fn phase_ordinal(pod: &Pod) -> u8 {
    match phase(pod) {
        "Unknown" => 1,
        "Running" => 2,
        _ => 0,
    }
}

fn deletion_cost(pod: &Pod) -> i64 {
    pod.annotations()
        .get(POD_DELETION_COST)
        .and_then(|v| v.parse::<i32>().ok())
        .map(i64::from)
        .unwrap_or(0)
}

fn max_restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .into_iter()
        .flatten()
        .map(|c| c.restart_count)
        .max()
        .unwrap_or(0)
}

/// `afterOrZero`: an unset time first, then the later one.
fn later_first(a: Option<Timestamp>, b: Option<Timestamp>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(a), Some(b)) => b.cmp(&a),
    }
}

/// `ActivePodsWithRanks.Less` (`pkg/controller/controller_utils.go`): which
/// of two pods to delete first. Unassigned before assigned; Pending before
/// Unknown before Running; not Ready before Ready; lower
/// `pod-deletion-cost` first; of two Ready pods the one Ready for less time;
/// more container restarts first; the newer pod first. (The rank by
/// co-located pods is left out: there is one node.)
fn deletion_order(a: &Pod, b: &Pod) -> Ordering {
    let node = |p: &Pod| {
        p.spec
            .as_ref()
            .and_then(|s| s.node_name.clone())
            .unwrap_or_default()
    };
    let (node_a, node_b) = (node(a), node(b));
    if node_a != node_b && (node_a.is_empty() || node_b.is_empty()) {
        return if node_a.is_empty() {
            Ordering::Less
        } else {
            Ordering::Greater
        };
    }
    phase_ordinal(a)
        .cmp(&phase_ordinal(b))
        .then_with(|| is_ready(a).cmp(&is_ready(b)))
        .then_with(|| deletion_cost(a).cmp(&deletion_cost(b)))
        .then_with(|| {
            if is_ready(a) && is_ready(b) {
                later_first(ready_since(a), ready_since(b))
            } else {
                Ordering::Equal
            }
        })
        .then_with(|| max_restarts(b).cmp(&max_restarts(a)))
        .then_with(|| {
            let created = |p: &Pod| p.metadata.creation_timestamp.as_ref().map(|t| t.0);
            later_first(created(a), created(b))
        })
}

/// `getPodsToDelete`: the `count` pods to delete first.
fn pods_to_delete(pods: &[Arc<Pod>], count: usize) -> Vec<Arc<Pod>> {
    let mut ranked = pods.to_vec();
    if count < ranked.len() {
        ranked.sort_by(|a, b| deletion_order(a, b));
    }
    ranked.truncate(count);
    ranked
}

/// The status patch `calculateStatus` gives: counts of the claimed active
/// pods, the `ReplicaFailure` condition while creating or deleting fails,
/// and `observedGeneration`. Counters left at zero are removed (`omitempty`).
fn status_patch(
    set: &ReplicaSet,
    pods: &[Arc<Pod>],
    manage_error: Option<&anyhow::Error>,
    now: Timestamp,
) -> serde_json::Value {
    let spec = set.spec.clone().unwrap_or_default();
    let template_labels = spec
        .template
        .as_ref()
        .and_then(|t| t.metadata.as_ref())
        .and_then(|m| m.labels.clone())
        .unwrap_or_default();
    let min_ready_seconds = spec.min_ready_seconds.unwrap_or(0);
    let (mut fully_labeled, mut ready, mut available) = (0i32, 0i32, 0i32);
    for pod in pods {
        let labels = pod.labels();
        if template_labels
            .iter()
            .all(|(k, v)| labels.get(k) == Some(v))
        {
            fully_labeled += 1;
        }
        if is_ready(pod) {
            ready += 1;
            if is_available(pod, min_ready_seconds, now) {
                available += 1;
            }
        }
    }
    let mut conditions = set
        .status
        .as_ref()
        .and_then(|s| s.conditions.clone())
        .unwrap_or_default();
    let failing = conditions.iter().any(|c| c.type_ == "ReplicaFailure");
    match manage_error {
        Some(error) if !failing => {
            let reason = match pods.len().cmp(&desired_replicas(set)) {
                Ordering::Less => "FailedCreate",
                Ordering::Greater => "FailedDelete",
                Ordering::Equal => "",
            };
            conditions.push(ReplicaSetCondition {
                type_: "ReplicaFailure".into(),
                status: "True".into(),
                reason: Some(reason.into()),
                message: Some(format!("{error:#}")),
                last_transition_time: Some(Time(
                    Timestamp::from_second(now.as_second()).unwrap_or(now),
                )),
            });
        }
        None if failing => conditions.retain(|c| c.type_ != "ReplicaFailure"),
        _ => {}
    }
    let replicas = i32::try_from(pods.len()).unwrap_or(i32::MAX);
    json!({"status": {
        "replicas": replicas,
        "fullyLabeledReplicas": omit_zero(fully_labeled),
        "readyReplicas": omit_zero(ready),
        "availableReplicas": omit_zero(available),
        "observedGeneration": omit_zero(set.metadata.generation.unwrap_or(0)),
        "conditions": if conditions.is_empty() { serde_json::Value::Null } else { json!(conditions) },
    }})
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn pod(name: &str, extra: serde_json::Value) -> Arc<Pod> {
        let mut pod = json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {"app": "web", "pod-template-hash": "h"},
                "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"nodeName": "n", "containers": [{"name": "c"}]},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:01:00Z"}],
                "containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 0}]}
        });
        merge_patch(&mut pod, &extra);
        Arc::new(serde_json::from_value(pod).unwrap())
    }

    fn set(replicas: i32) -> ReplicaSet {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "ReplicaSet",
            "metadata": {"name": "web-h", "namespace": "ns", "uid": "rs-uid", "generation": 2},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web", "pod-template-hash": "h"}, "annotations": {"a": "b"}},
                    "spec": {"containers": [{"name": "c", "image": "i"}]}}}
        }))
        .unwrap()
    }

    fn names(pods: &[Arc<Pod>]) -> Vec<String> {
        pods.iter().map(|p| p.name_any()).collect()
    }

    #[test]
    fn surplus_pods_go_unhealthy_first_then_youngest() {
        let not_ready = pod(
            "not-ready",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        let pending = pod(
            "pending",
            json!({"status": {"phase": "Pending", "conditions": null}}),
        );
        let unassigned = pod(
            "unassigned",
            json!({"spec": {"nodeName": null}, "status": {"phase": "Pending", "conditions": null}}),
        );
        let old = pod("old", json!({}));
        let young = pod(
            "young",
            json!({"metadata": {"creationTimestamp": "2026-01-02T00:00:00Z"}}),
        );
        let recently_ready = pod(
            "recently-ready",
            json!({"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-03T00:00:00Z"}]}}),
        );
        let restarting = pod(
            "restarting",
            json!({"status": {"containerStatuses": [{"name": "c", "image": "i", "imageID": "", "ready": true, "restartCount": 4}]}}),
        );
        let cheap = pod(
            "cheap",
            json!({"metadata": {"annotations": {POD_DELETION_COST: "-5"}}}),
        );
        let all = vec![
            old.clone(),
            young.clone(),
            recently_ready.clone(),
            restarting.clone(),
            cheap.clone(),
            not_ready.clone(),
            pending.clone(),
            unassigned.clone(),
        ];
        let order = pods_to_delete(&all, 7);
        assert_eq!(
            names(&order),
            [
                "unassigned",
                "pending",
                "not-ready",
                "cheap",
                "recently-ready",
                "restarting",
                "young"
            ]
        );
        assert_eq!(names(&pods_to_delete(&all, all.len())).len(), all.len());
    }

    #[test]
    fn pods_come_from_the_template_with_a_controller_reference() {
        let pod = pod_from_template(&set(1));
        assert_eq!(pod.metadata.generate_name.as_deref(), Some("web-h-"));
        assert_eq!(pod.metadata.name, None);
        assert_eq!(pod.labels()["pod-template-hash"], "h");
        assert_eq!(pod.annotations()["a"], "b");
        let owner = &pod.metadata.owner_references.unwrap()[0];
        assert_eq!(
            (
                owner.kind.as_str(),
                owner.uid.as_str(),
                owner.controller,
                owner.block_owner_deletion
            ),
            ("ReplicaSet", "rs-uid", Some(true), Some(true))
        );
    }

    #[test]
    fn status_counts_ready_available_and_fully_labeled_pods() {
        let now = Timestamp::now();
        let ready = pod("a", json!({}));
        let not_ready = pod(
            "b",
            json!({"status": {"conditions": [{"type": "Ready", "status": "False"}]}}),
        );
        let partly_labeled = pod(
            "c",
            json!({"metadata": {"labels": {"pod-template-hash": null}}}),
        );
        let patch = status_patch(&set(3), &[ready, not_ready, partly_labeled], None, now);
        assert_eq!(
            patch["status"],
            json!({"replicas": 3, "fullyLabeledReplicas": 2, "readyReplicas": 2, "availableReplicas": 2,
                "observedGeneration": 2, "conditions": null})
        );
        let error = anyhow::anyhow!("quota exceeded");
        let failing = status_patch(&set(3), &[], Some(&error), now);
        assert_eq!(failing["status"]["replicas"], 0);
        assert_eq!(failing["status"]["readyReplicas"], serde_json::Value::Null);
        assert_eq!(failing["status"]["conditions"][0]["reason"], "FailedCreate");
        assert_eq!(
            failing["status"]["conditions"][0]["message"],
            "quota exceeded"
        );
    }

    #[test]
    fn a_template_outside_the_selector_makes_no_pods() {
        assert!(template_selected(&set(1)));
        let mut stray = set(1);
        stray.spec.as_mut().unwrap().selector = LabelSelector {
            match_labels: Some(BTreeMap::from([("app".to_string(), "other".to_string())])),
            match_expressions: None,
        };
        assert!(!template_selected(&stray));
    }

    #[test]
    fn availability_waits_for_min_ready_seconds() {
        let ready_at = |t: &str| {
            pod(
                "p",
                json!({"status": {"conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": t}]}}),
            )
        };
        let now: Timestamp = "2026-01-01T00:01:30Z".parse().unwrap();
        assert!(is_available(&ready_at("2026-01-01T00:01:00Z"), 30, now));
        assert!(!is_available(&ready_at("2026-01-01T00:01:01Z"), 30, now));
        assert!(is_available(&ready_at("2026-01-01T00:01:29Z"), 0, now));
        assert!(selects_everything(&LabelSelector::default()));
    }
}
