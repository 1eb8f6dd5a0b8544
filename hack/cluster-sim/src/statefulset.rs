//! The StatefulSet controller (kube-controller-manager's `statefulset`
//! controller): ordinal pods from the template, PersistentVolumeClaims from the
//! claim templates before each pod, `OrderedReady` and `Parallel` management,
//! scale-down from the highest ordinal, `RollingUpdate` one pod at a time from
//! the highest ordinal, claim retention by ownerReferences, adoption and
//! release of pods (`ClaimPods`), and status.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{StatefulSet, StatefulSetStatus};
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimVolumeSource, Pod, Volume,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::watch;

use crate::api_errors::{is_gone, is_status};
use crate::cache::Cache;
use crate::events::EventSink;
use crate::faults::Faults;
use crate::pod_facts::{
    controller_uid, is_pending, is_running_and_ready, is_terminal, is_terminating,
    label_selector_matches,
};

/// Label carrying the pod's revision.
pub const REVISION_LABEL: &str = "controller-revision-hash";
/// Label carrying the pod's name.
pub const POD_NAME_LABEL: &str = "statefulset.kubernetes.io/pod-name";
/// Label carrying the pod's ordinal.
pub const POD_INDEX_LABEL: &str = "apps.kubernetes.io/pod-index";

/// How long the controller waits for its own writes to appear in its cache.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(5);
/// Periodic resync, as informers do.
const RESYNC: Duration = Duration::from_secs(5);

/// The controller of one cluster.
pub struct StatefulSetController {
    client: Client,
    cache: Cache,
    events: EventSink,
    faults: watch::Receiver<Faults>,
}

/// `persistentVolumeClaimRetentionPolicy`, read.
#[derive(Debug, Clone, Copy)]
struct Retention {
    delete_when_set_deleted: bool,
    delete_when_scaled: bool,
}

impl StatefulSetController {
    /// A controller writing through `client`, reading `cache`.
    pub fn new(
        client: Client,
        cache: Cache,
        faults: watch::Receiver<Faults>,
        node_name: &str,
    ) -> Self {
        let events = EventSink::new(client.clone(), "statefulset-controller", node_name);
        StatefulSetController {
            client,
            cache,
            events,
            faults,
        }
    }

    /// Reconciles every StatefulSet whenever anything changes, until dropped.
    pub async fn run(mut self) {
        if let Err(error) = self.cache.wait_until_ready().await {
            tracing::warn!(%error, "statefulset controller: cache never filled");
            return;
        }
        let mut changes = self.cache.subscribe();
        loop {
            if !self.faults.borrow().cluster_lost {
                // Each set's pods, found once per round rather than by a
                // look at every pod for every set (quadratic: `lab bench`
                // with 1,000 StatefulSets kept the lab at both cores).
                let mut pods_by_owner: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
                let mut orphans: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
                for pod in self.cache.pods.state() {
                    match controller_uid(&pod) {
                        Some(uid) => pods_by_owner
                            .entry(uid.to_string())
                            .or_default()
                            .push(pod.clone()),
                        None => orphans
                            .entry(pod.namespace().unwrap_or_default())
                            .or_default()
                            .push(pod.clone()),
                    }
                }
                for set in self.cache.stateful_sets.state() {
                    let owned = set
                        .uid()
                        .and_then(|uid| pods_by_owner.remove(&uid))
                        .unwrap_or_default();
                    let namespace_orphans = set
                        .namespace()
                        .and_then(|ns| orphans.get(&ns))
                        .map(Vec::as_slice)
                        .unwrap_or_default();
                    let claimed = match self.claim_pods(&set, owned, namespace_orphans).await {
                        Ok(claimed) => claimed,
                        Err(error) => {
                            tracing::warn!(statefulset = %set.name_any(), error = %format!("{error:#}"), "claiming pods failed");
                            continue;
                        }
                    };
                    if let Err(error) = self.reconcile(&set, claimed).await {
                        tracing::warn!(statefulset = %set.name_any(), error = %format!("{error:#}"), "sync failed");
                    }
                }
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                _ = tokio::time::sleep(RESYNC) => {}
            }
        }
    }

    /// `getPodsForStatefulSet` (kubernetes/kubernetes
    /// `pkg/controller/statefulset/stateful_set.go`) through the
    /// `PodControllerRefManager` (`pkg/controller/controller_ref_manager.go`
    /// `ClaimPods`, `ClaimObject`): the pods `owned` that still match the
    /// selector and are members (`isMemberOf`: named `<set>-<digits>`) are kept,
    /// the others released (their ownerReference removed); orphans of the
    /// namespace that match and are not being deleted are adopted (a controller
    /// ownerReference added by a strategic merge patch, `AdoptPod`), after a
    /// fresh read of the set shows it still exists and is not being deleted
    /// (`RecheckDeletionTimestamp`). A set being deleted adopts and releases
    /// nothing.
    async fn claim_pods(
        &self,
        set: &StatefulSet,
        owned: Vec<Arc<Pod>>,
        orphans: &[Arc<Pod>],
    ) -> anyhow::Result<Vec<Arc<Pod>>> {
        let (Some(spec), Some(uid)) = (set.spec.as_ref(), set.uid()) else {
            return Ok(owned);
        };
        let name = set.name_any();
        let deleting = set.metadata.deletion_timestamp.is_some();
        let matches = |pod: &Pod| {
            label_selector_matches(&spec.selector, pod.metadata.labels.as_ref())
                && is_member_of(&name, &pod.name_any())
        };
        let mut claimed = Vec::new();
        for pod in owned {
            if matches(&pod) {
                claimed.push(pod);
            } else if !deleting {
                self.patch_owner(&pod, json!([{"$patch": "delete", "uid": uid}]))
                    .await?;
            }
        }
        let adoptable: Vec<&Arc<Pod>> = orphans
            .iter()
            .filter(|pod| matches(pod) && !is_terminating(pod))
            .collect();
        if deleting || adoptable.is_empty() || !self.still_exists(set).await? {
            return Ok(claimed);
        }
        let Some(mut reference) = set.controller_owner_ref(&()) else {
            return Ok(claimed);
        };
        reference.block_owner_deletion = Some(true);
        for pod in adoptable {
            tracing::info!(statefulset = %name, pod = %pod.name_any(), "adopting orphaned pod");
            if let Some(adopted) = self.patch_owner(pod, json!([reference])).await? {
                claimed.push(Arc::new(adopted));
            }
        }
        Ok(claimed)
    }

    /// A strategic merge patch of the pod's ownerReferences (merged by uid), with
    /// the pod's uid, as `ownerRefControllerPatch` and
    /// `GenerateDeleteOwnerRefStrategicMergeBytes` write them. `None` if the pod is gone.
    async fn patch_owner(
        &self,
        pod: &Pod,
        references: serde_json::Value,
    ) -> anyhow::Result<Option<Pod>> {
        let api: Api<Pod> =
            Api::namespaced(self.client.clone(), &pod.namespace().unwrap_or_default());
        let patch = json!({"metadata": {"ownerReferences": references, "uid": pod.uid()}});
        match api
            .patch(
                &pod.name_any(),
                &PatchParams::default(),
                &Patch::Strategic(patch),
            )
            .await
        {
            Ok(patched) => {
                let key = kube::runtime::reflector::ObjectRef::new(&pod.name_any())
                    .within(&pod.namespace().unwrap_or_default());
                let number = |p: &Pod| {
                    p.resource_version()
                        .and_then(|v| v.parse::<u64>().ok())
                        .unwrap_or(0)
                };
                let version = number(&patched);
                self.cache
                    .wait_for(EXPECTATION_TIMEOUT, |c| {
                        c.pods.get(&key).is_none_or(|p| number(&p) >= version)
                    })
                    .await;
                Ok(Some(patched))
            }
            Err(error) if is_gone(&error) => Ok(None),
            Err(error) => Err(error.into()),
        }
    }

    /// Reconciles `set`, whose controller uid the pods `owned` carry.
    async fn reconcile(&self, set: &StatefulSet, owned: Vec<Arc<Pod>>) -> anyhow::Result<()> {
        let (Some(namespace), Some(uid), Some(spec)) =
            (set.namespace(), set.uid(), set.spec.as_ref())
        else {
            return Ok(());
        };
        if set.metadata.deletion_timestamp.is_some() {
            return Ok(()); // the garbage collector removes the pods
        }
        let name = set.name_any();
        let replicas = spec.replicas.unwrap_or(1).max(0);
        let start = spec
            .ordinals
            .as_ref()
            .and_then(|o| o.start)
            .unwrap_or(0)
            .max(0);
        let parallel = spec.pod_management_policy.as_deref() == Some("Parallel");
        let retention = retention(set);
        let update_revision = revision_name(&name, &spec.template);
        let current_revision = set
            .status
            .as_ref()
            .and_then(|s| s.current_revision.clone())
            .filter(|r| !r.is_empty())
            .unwrap_or_else(|| update_revision.clone());

        let pods: BTreeMap<i32, Arc<Pod>> = owned
            .into_iter()
            .filter(|p| {
                p.namespace().as_deref() == Some(namespace.as_str())
                    && controller_uid(p) == Some(uid.as_str())
            })
            .filter(|p| label_selector_matches(&spec.selector, p.metadata.labels.as_ref()))
            .filter_map(|p| ordinal_of(&name, &p.name_any()).map(|o| (o, p)))
            .collect();

        self.write_status(set, &pods, &current_revision, &update_revision)
            .await?;

        let in_range = |ordinal: i32| ordinal >= start && ordinal < start + replicas;
        for (ordinal, pod) in &pods {
            self.keep_claim_owners(
                set,
                &namespace,
                *ordinal,
                Some(pod),
                !in_range(*ordinal),
                retention,
            )
            .await?;
        }

        // Replicas that should exist.
        for ordinal in start..start + replicas {
            match pods.get(&ordinal) {
                None => {
                    if !self.still_exists(set).await? {
                        return Ok(());
                    }
                    self.create_claims(set, &namespace, ordinal, retention)
                        .await?;
                    self.create_pod(set, &namespace, ordinal, &update_revision)
                        .await?;
                    if !parallel {
                        return Ok(());
                    }
                }
                Some(pod) if is_terminal(pod) && !is_terminating(pod) => {
                    self.delete_pod(set, &namespace, pod).await?;
                    if !parallel {
                        return Ok(());
                    }
                }
                Some(pod) => {
                    // As processReplica: missing claims are made for a pending
                    // pod only; a running pod whose claim was deleted keeps
                    // running without one being made again.
                    if is_pending(pod) {
                        self.create_claims(set, &namespace, ordinal, retention)
                            .await?;
                    }
                    if !parallel && !is_running_and_ready(pod) {
                        return Ok(());
                    }
                }
            }
        }

        // Condemned replicas, highest ordinal first.
        let condemned: Vec<&Arc<Pod>> = pods
            .iter()
            .rev()
            .filter(|(o, _)| !in_range(**o))
            .map(|(_, p)| p)
            .collect();
        let any_condemned = !condemned.is_empty();
        for pod in condemned {
            if is_terminating(pod) {
                if !parallel {
                    return Ok(());
                }
                continue;
            }
            self.delete_pod(set, &namespace, pod).await?;
            if !parallel {
                return Ok(());
            }
        }
        if any_condemned {
            return Ok(());
        }

        // Rolling update: highest ordinal first, one at a time, each Ready before the next.
        let rolling = spec
            .update_strategy
            .as_ref()
            .and_then(|s| s.type_.as_deref())
            .unwrap_or("RollingUpdate")
            == "RollingUpdate";
        if !rolling {
            return Ok(());
        }
        let partition = spec
            .update_strategy
            .as_ref()
            .and_then(|s| s.rolling_update.as_ref())
            .and_then(|r| r.partition)
            .unwrap_or(0)
            .max(0);
        for ordinal in (start + partition.min(replicas)..start + replicas).rev() {
            let Some(pod) = pods.get(&ordinal) else {
                return Ok(());
            };
            if revision_of(pod) != Some(update_revision.as_str()) && !is_terminating(pod) {
                tracing::info!(statefulset = %name, pod = %pod.name_any(), revision = %update_revision, "rolling update: replacing pod");
                self.delete_pod(set, &namespace, pod).await?;
                return Ok(());
            }
            if !is_running_and_ready(pod) {
                return Ok(());
            }
        }
        Ok(())
    }

    /// Re-reads the set from the API server before creating anything for it, so
    /// that a stale cache does not re-create pods or claims of a set just deleted
    /// (they would be left for the garbage collector).
    async fn still_exists(&self, set: &StatefulSet) -> anyhow::Result<bool> {
        let api: Api<StatefulSet> =
            Api::namespaced(self.client.clone(), &set.namespace().unwrap_or_default());
        let current = api.get_opt(&set.name_any()).await?;
        Ok(
            current
                .is_some_and(|c| c.uid() == set.uid() && c.metadata.deletion_timestamp.is_none()),
        )
    }

    async fn write_status(
        &self,
        set: &StatefulSet,
        pods: &BTreeMap<i32, Arc<Pod>>,
        current_revision: &str,
        update_revision: &str,
    ) -> anyhow::Result<()> {
        let min_ready_seconds = set
            .spec
            .as_ref()
            .and_then(|s| s.min_ready_seconds)
            .unwrap_or(0);
        let mut status = StatefulSetStatus {
            observed_generation: set.metadata.generation,
            current_revision: Some(current_revision.to_string()),
            update_revision: Some(update_revision.to_string()),
            collision_count: Some(0),
            ..Default::default()
        };
        let (mut replicas, mut ready, mut available, mut current, mut updated) = (0, 0, 0, 0, 0);
        for pod in pods.values() {
            replicas += 1;
            if is_running_and_ready(pod) {
                ready += 1;
                if is_available(pod, min_ready_seconds) {
                    available += 1;
                }
            }
            if !is_terminating(pod) {
                let revision = revision_of(pod);
                if revision == Some(current_revision) {
                    current += 1;
                }
                if revision == Some(update_revision) {
                    updated += 1;
                }
            }
        }
        let rolling = set
            .spec
            .as_ref()
            .and_then(|s| s.update_strategy.as_ref())
            .and_then(|s| s.type_.as_deref())
            .unwrap_or("RollingUpdate")
            == "RollingUpdate";
        if rolling && updated == replicas && ready == replicas {
            status.current_revision = Some(update_revision.to_string());
            current = updated;
        }
        status.replicas = replicas;
        status.ready_replicas = Some(ready);
        status.available_replicas = Some(available);
        status.current_replicas = Some(current);
        status.updated_replicas = Some(updated);

        let existing = set.status.clone().unwrap_or_default();
        if normalized(&existing) == normalized(&status) {
            return Ok(());
        }
        let api: Api<StatefulSet> =
            Api::namespaced(self.client.clone(), &set.namespace().unwrap_or_default());
        api.patch_status(
            &set.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({ "status": status })),
        )
        .await?;
        Ok(())
    }

    async fn create_claims(
        &self,
        set: &StatefulSet,
        namespace: &str,
        ordinal: i32,
        retention: Retention,
    ) -> anyhow::Result<()> {
        let templates = set
            .spec
            .as_ref()
            .and_then(|s| s.volume_claim_templates.clone())
            .unwrap_or_default();
        let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
        for template in &templates {
            let claim = new_claim(set, template, ordinal, retention);
            let claim_name = claim.name_any();
            let key = kube::runtime::reflector::ObjectRef::new(&claim_name).within(namespace);
            if self.cache.claims.get(&key).is_some() {
                continue;
            }
            if !self.still_exists(set).await? {
                return Ok(());
            }
            match api.create(&PostParams::default(), &claim).await {
                Ok(_) => {
                    self.events.normal(
                        set.object_ref(&()),
                        "SuccessfulCreate",
                        "Create",
                        format!(
                            "create Claim {claim_name} Pod {}-{ordinal} in StatefulSet {} success",
                            set.name_any(),
                            set.name_any()
                        ),
                    );
                    self.cache
                        .wait_for(EXPECTATION_TIMEOUT, |c| c.claims.get(&key).is_some())
                        .await;
                }
                Err(error) if is_status(&error, 409) => {}
                Err(error) => {
                    self.events.warning(
                        set.object_ref(&()),
                        "FailedCreate",
                        "Create",
                        format!("create Claim {claim_name} for Pod {}-{ordinal} in StatefulSet {} failed error: {error}", set.name_any(), set.name_any()),
                    );
                    return Err(error.into());
                }
            }
        }
        Ok(())
    }

    /// Keeps the claims' ownerReferences in line with the retention policy: the
    /// StatefulSet owns them when `whenDeleted: Delete`, a condemned pod owns them
    /// when `whenScaled: Delete`; the garbage collector does the deleting.
    async fn keep_claim_owners(
        &self,
        set: &StatefulSet,
        namespace: &str,
        ordinal: i32,
        pod: Option<&Arc<Pod>>,
        condemned: bool,
        retention: Retention,
    ) -> anyhow::Result<()> {
        let templates = set
            .spec
            .as_ref()
            .and_then(|s| s.volume_claim_templates.clone())
            .unwrap_or_default();
        let set_uid = set.uid().unwrap_or_default();
        for template in &templates {
            let claim_name = claim_name(template, &set.name_any(), ordinal);
            let key = kube::runtime::reflector::ObjectRef::new(&claim_name).within(namespace);
            let Some(claim) = self.cache.claims.get(&key) else {
                continue;
            };
            if claim.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let existing = claim.metadata.owner_references.clone().unwrap_or_default();
            let pod_uid = pod.and_then(|p| p.uid());
            let mut desired: Vec<OwnerReference> = existing
                .iter()
                .filter(|o| {
                    !(o.uid == set_uid
                        || (o.kind == "Pod" && o.name == format!("{}-{ordinal}", set.name_any())))
                })
                .cloned()
                .collect();
            // As updateClaimOwnerRefForSetAndPod: a condemned pod owns the claim alone
            // (so the claim goes with it); otherwise the set owns it if deletion deletes it.
            if retention.delete_when_scaled && condemned {
                desired.extend(pod.and_then(|p| owner_ref(p.as_ref())));
            } else if retention.delete_when_set_deleted {
                desired.extend(owner_ref(set));
            }
            let same = |a: &[OwnerReference], b: &[OwnerReference]| {
                let mut a: Vec<&str> = a.iter().map(|o| o.uid.as_str()).collect();
                let mut b: Vec<&str> = b.iter().map(|o| o.uid.as_str()).collect();
                a.sort_unstable();
                b.sort_unstable();
                a == b
            };
            if same(&existing, &desired) {
                continue;
            }
            tracing::debug!(claim = %claim_name, pod_uid = ?pod_uid, "updating claim ownerReferences for retention policy");
            let api: Api<PersistentVolumeClaim> = Api::namespaced(self.client.clone(), namespace);
            let patch = json!({ "metadata": { "ownerReferences": desired } });
            match api
                .patch(&claim_name, &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => {}
                Err(error) if is_status(&error, 404) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    async fn create_pod(
        &self,
        set: &StatefulSet,
        namespace: &str,
        ordinal: i32,
        revision: &str,
    ) -> anyhow::Result<()> {
        let pod = new_pod(set, ordinal, revision);
        let pod_name = pod.name_any();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), namespace);
        match api.create(&PostParams::default(), &pod).await {
            Ok(created) => {
                self.events.normal(
                    set.object_ref(&()),
                    "SuccessfulCreate",
                    "Create",
                    format!(
                        "create Pod {pod_name} in StatefulSet {} successful",
                        set.name_any()
                    ),
                );
                let uid = created.uid();
                let key = kube::runtime::reflector::ObjectRef::new(&pod_name).within(namespace);
                self.cache
                    .wait_for(EXPECTATION_TIMEOUT, |c| {
                        c.pods.get(&key).is_some_and(|p| p.uid() == uid)
                    })
                    .await;
                Ok(())
            }
            Err(error) if is_status(&error, 409) => Ok(()),
            Err(error) => {
                self.events.warning(
                    set.object_ref(&()),
                    "FailedCreate",
                    "Create",
                    format!(
                        "create Pod {pod_name} in StatefulSet {} failed error: {error}",
                        set.name_any()
                    ),
                );
                Err(error.into())
            }
        }
    }

    async fn delete_pod(
        &self,
        set: &StatefulSet,
        namespace: &str,
        pod: &Pod,
    ) -> anyhow::Result<()> {
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
                    format!(
                        "delete Pod {pod_name} in StatefulSet {} successful",
                        set.name_any()
                    ),
                );
                let uid = pod.uid();
                let key = kube::runtime::reflector::ObjectRef::new(&pod_name).within(namespace);
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
            Err(error) => Err(error.into()),
        }
    }
}

fn retention(set: &StatefulSet) -> Retention {
    let policy = set
        .spec
        .as_ref()
        .and_then(|s| s.persistent_volume_claim_retention_policy.as_ref());
    Retention {
        delete_when_set_deleted: policy.and_then(|p| p.when_deleted.as_deref()) == Some("Delete"),
        delete_when_scaled: policy.and_then(|p| p.when_scaled.as_deref()) == Some("Delete"),
    }
}

/// A non-controller ownerReference to `owner` that blocks the owner's foreground deletion.
fn owner_ref<K: Resource<DynamicType = ()>>(owner: &K) -> Option<OwnerReference> {
    let mut reference = owner.owner_ref(&())?;
    reference.block_owner_deletion = Some(true);
    Some(reference)
}

/// `isMemberOf`: whether `pod_name` is `<set>-<digits>` (`getParentName`,
/// the regular expression `(.*)-([0-9]+)$`).
fn is_member_of(set_name: &str, pod_name: &str) -> bool {
    pod_name.rsplit_once('-').is_some_and(|(parent, ordinal)| {
        parent == set_name && !ordinal.is_empty() && ordinal.bytes().all(|b| b.is_ascii_digit())
    })
}

/// The ordinal of pod `pod_name` if it is named `<set>-<ordinal>`.
fn ordinal_of(set_name: &str, pod_name: &str) -> Option<i32> {
    let suffix = pod_name.strip_prefix(set_name)?.strip_prefix('-')?;
    if suffix.is_empty()
        || !suffix.bytes().all(|b| b.is_ascii_digit())
        || (suffix.len() > 1 && suffix.starts_with('0'))
    {
        return None;
    }
    suffix.parse().ok()
}

fn revision_of(pod: &Pod) -> Option<&str> {
    pod.metadata
        .labels
        .as_ref()?
        .get(REVISION_LABEL)
        .map(String::as_str)
}

fn is_available(pod: &Pod, min_ready_seconds: i32) -> bool {
    if min_ready_seconds <= 0 {
        return true;
    }
    let since = pod
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == "Ready"))
        .and_then(|c| c.last_transition_time.as_ref())
        .map(|t| t.0);
    since.is_some_and(|since| {
        Timestamp::now().as_second() - since.as_second() >= i64::from(min_ready_seconds)
    })
}

/// Status with unset counters read as 0, for comparison.
fn normalized(status: &StatefulSetStatus) -> serde_json::Value {
    let mut status = status.clone();
    for counter in [
        &mut status.ready_replicas,
        &mut status.available_replicas,
        &mut status.current_replicas,
        &mut status.updated_replicas,
        &mut status.collision_count,
    ] {
        counter.get_or_insert(0);
    }
    status.conditions = None;
    serde_json::to_value(status).unwrap_or_default()
}

/// The revision name `<set>-<hash>` of a pod template, as the
/// `controller-revision-hash` label carries it.
pub fn revision_name(
    set_name: &str,
    template: &k8s_openapi::api::core::v1::PodTemplateSpec,
) -> String {
    let bytes = serde_json::to_vec(template).unwrap_or_default();
    // FNV-1a, 32 bits, as Kubernetes' ComputeHash uses, rendered with SafeEncodeString's alphabet.
    let hash = bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let encoded: String = hash
        .to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect();
    format!("{set_name}-{encoded}")
}

fn claim_name(template: &PersistentVolumeClaim, set_name: &str, ordinal: i32) -> String {
    format!("{}-{set_name}-{ordinal}", template.name_any())
}

fn new_claim(
    set: &StatefulSet,
    template: &PersistentVolumeClaim,
    ordinal: i32,
    retention: Retention,
) -> PersistentVolumeClaim {
    let set_name = set.name_any();
    let mut labels = template.metadata.labels.clone().unwrap_or_default();
    if let Some(selector) = set
        .spec
        .as_ref()
        .and_then(|s| s.selector.match_labels.clone())
    {
        labels.extend(selector);
    }
    let owners: Vec<OwnerReference> = if retention.delete_when_set_deleted {
        owner_ref(set).into_iter().collect()
    } else {
        vec![]
    };
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim_name(template, &set_name, ordinal)),
            namespace: set.namespace(),
            labels: Some(labels),
            annotations: template.metadata.annotations.clone(),
            owner_references: (!owners.is_empty()).then_some(owners),
            ..Default::default()
        },
        spec: template.spec.clone(),
        status: None,
    }
}

fn new_pod(set: &StatefulSet, ordinal: i32, revision: &str) -> Pod {
    let set_name = set.name_any();
    let pod_name = format!("{set_name}-{ordinal}");
    let spec = set.spec.clone().unwrap_or_default();
    let template = spec.template;
    let template_meta = template.metadata.unwrap_or_default();
    let mut labels = template_meta.labels.unwrap_or_default();
    labels.insert(POD_NAME_LABEL.into(), pod_name.clone());
    labels.insert(POD_INDEX_LABEL.into(), ordinal.to_string());
    labels.insert(REVISION_LABEL.into(), revision.to_string());
    let mut pod_spec = template.spec.unwrap_or_default();
    pod_spec.hostname = Some(pod_name.clone());
    if !spec.service_name.as_deref().unwrap_or_default().is_empty() {
        pod_spec.subdomain = spec.service_name.clone();
    }
    let mut volumes = pod_spec.volumes.take().unwrap_or_default();
    for template in spec.volume_claim_templates.iter().flatten() {
        let volume_name = template.name_any();
        volumes.retain(|v| v.name != volume_name);
        volumes.push(Volume {
            name: volume_name,
            persistent_volume_claim: Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim_name(template, &set_name, ordinal),
                read_only: None,
            }),
            ..Default::default()
        });
    }
    pod_spec.volumes = (!volumes.is_empty()).then_some(volumes);
    Pod {
        metadata: ObjectMeta {
            name: Some(pod_name),
            namespace: set.namespace(),
            labels: Some(labels),
            annotations: template_meta.annotations,
            owner_references: set.controller_owner_ref(&()).map(|mut o| {
                o.block_owner_deletion = Some(true);
                vec![o]
            }),
            ..Default::default()
        },
        spec: Some(pod_spec),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::StatefulSetSpec;
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec};

    fn set() -> StatefulSet {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": {"name": "db", "namespace": "ns", "uid": "set-uid"},
            "spec": {
                "serviceName": "db-headless",
                "selector": {"matchLabels": {"app": "db"}},
                "template": {"metadata": {"labels": {"app": "db"}}, "spec": {"containers": [{"name": "mongod", "image": "mongo:7.0"}],
                    "volumes": [{"name": "data", "emptyDir": {}}]}},
                "volumeClaimTemplates": [{"metadata": {"name": "data"}, "spec": {"accessModes": ["ReadWriteOnce"]}}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn ordinals_are_parsed_only_from_canonical_pod_names() {
        assert_eq!(ordinal_of("db", "db-0"), Some(0));
        assert_eq!(ordinal_of("db", "db-12"), Some(12));
        assert_eq!(ordinal_of("db", "db-01"), None);
        assert_eq!(ordinal_of("db", "db-x"), None);
        assert_eq!(ordinal_of("db", "dbx-1"), None);
        assert_eq!(ordinal_of("db", "db-"), None);
        assert_eq!(ordinal_of("db", "db-99999999999"), None);
    }

    #[test]
    fn revision_names_change_with_the_template_only() {
        let a = PodTemplateSpec {
            metadata: None,
            spec: Some(PodSpec {
                containers: vec![Container {
                    name: "c".into(),
                    image: Some("a".into()),
                    ..Default::default()
                }],
                ..Default::default()
            }),
        };
        let mut b = a.clone();
        assert_eq!(revision_name("db", &a), revision_name("db", &b));
        b.spec.as_mut().unwrap().containers[0].image = Some("b".into());
        assert_ne!(revision_name("db", &a), revision_name("db", &b));
        assert!(revision_name("db", &a).starts_with("db-"));
    }

    #[test]
    fn pods_carry_identity_labels_owner_and_claim_volumes() {
        let pod = new_pod(&set(), 2, "db-abc");
        let labels = pod.metadata.labels.clone().unwrap();
        assert_eq!(pod.metadata.name.as_deref(), Some("db-2"));
        assert_eq!(labels[POD_NAME_LABEL], "db-2");
        assert_eq!(labels[POD_INDEX_LABEL], "2");
        assert_eq!(labels[REVISION_LABEL], "db-abc");
        assert_eq!(labels["app"], "db");
        let owner = &pod.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.kind.as_str(), owner.uid.as_str(), owner.controller),
            ("StatefulSet", "set-uid", Some(true))
        );
        let spec = pod.spec.unwrap();
        assert_eq!(spec.hostname.as_deref(), Some("db-2"));
        assert_eq!(spec.subdomain.as_deref(), Some("db-headless"));
        let volumes = spec.volumes.unwrap();
        assert_eq!(
            volumes.len(),
            1,
            "the claim replaces the template volume of the same name"
        );
        assert_eq!(
            volumes[0]
                .persistent_volume_claim
                .as_ref()
                .unwrap()
                .claim_name,
            "data-db-2"
        );
    }

    #[test]
    fn claims_are_owned_by_the_set_only_when_the_policy_deletes_them() {
        let keep = Retention {
            delete_when_set_deleted: false,
            delete_when_scaled: false,
        };
        let delete = Retention {
            delete_when_set_deleted: true,
            delete_when_scaled: false,
        };
        let template = set()
            .spec
            .unwrap()
            .volume_claim_templates
            .unwrap()
            .remove(0);
        let kept = new_claim(&set(), &template, 0, keep);
        assert_eq!(kept.metadata.name.as_deref(), Some("data-db-0"));
        assert_eq!(kept.metadata.labels.as_ref().unwrap()["app"], "db");
        assert!(kept.metadata.owner_references.is_none());
        let owned = new_claim(&set(), &template, 0, delete);
        assert_eq!(owned.metadata.owner_references.unwrap()[0].uid, "set-uid");
    }

    #[test]
    fn a_set_without_spec_fields_still_builds_pods() {
        let set = StatefulSet {
            metadata: ObjectMeta {
                name: Some("x".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: Some(StatefulSetSpec::default()),
            status: None,
        };
        let pod = new_pod(&set, 0, "x-1");
        assert_eq!(pod.metadata.name.as_deref(), Some("x-0"));
        assert!(
            pod.metadata.owner_references.is_none(),
            "no uid, no ownerReference"
        );
    }
}
