//! The Deployment controller (kube-controller-manager's `deployment`
//! controller, kubernetes/kubernetes `pkg/controller/deployment/`): it keeps
//! one ReplicaSet `<deployment>-<pod-template-hash>` per pod template, rolls
//! from the old ones to the new one (`RollingUpdate` within maxSurge and
//! maxUnavailable, or `Recreate`), scales proportionally, keeps
//! `revisionHistoryLimit` old ReplicaSets, and reports status and the
//! `Available`/`Progressing` conditions. The pods are the ReplicaSet
//! controller's business.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentStatus, ReplicaSet, ReplicaSetSpec};
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
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
use crate::replicaset::selects_everything;

mod helpers;
mod status;
#[cfg(test)]
mod tests;

use helpers::*;
use status::*;

/// Label (and ReplicaSet selector term) carrying the hash of the pod template.
pub const POD_TEMPLATE_HASH_LABEL: &str = "pod-template-hash";
/// A ReplicaSet's revision in its Deployment's rollout sequence (also on the Deployment).
pub const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";
/// Older revisions a ReplicaSet served (set when it is rolled back to).
const REVISION_HISTORY_ANNOTATION: &str = "deployment.kubernetes.io/revision-history";
/// `spec.replicas` of the Deployment when it last sized the ReplicaSet.
pub const DESIRED_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/desired-replicas";
/// `spec.replicas + maxSurge` of the Deployment when it last sized the ReplicaSet.
pub const MAX_REPLICAS_ANNOTATION: &str = "deployment.kubernetes.io/max-replicas";
/// Deployment annotations not copied to its ReplicaSets (`annotationsToSkip`).
const ANNOTATIONS_TO_SKIP: [&str; 6] = [
    "kubectl.kubernetes.io/last-applied-configuration",
    REVISION_ANNOTATION,
    REVISION_HISTORY_ANNOTATION,
    DESIRED_REPLICAS_ANNOTATION,
    MAX_REPLICAS_ANNOTATION,
    "deprecated.deployment.rollback.to",
];
/// `maxRevHistoryLengthInChars`.
const MAX_REVISION_HISTORY_CHARS: usize = 2000;

// Condition reasons (`pkg/controller/deployment/util/deployment_util.go`).
const REPLICA_SET_UPDATED: &str = "ReplicaSetUpdated";
const FAILED_RS_CREATE: &str = "ReplicaSetCreateError";
const NEW_REPLICA_SET: &str = "NewReplicaSetCreated";
const FOUND_NEW_RS: &str = "FoundNewReplicaSet";
const NEW_RS_AVAILABLE: &str = "NewReplicaSetAvailable";
const TIMED_OUT: &str = "ProgressDeadlineExceeded";
const PAUSED: &str = "DeploymentPaused";
const RESUMED: &str = "DeploymentResumed";
const MINIMUM_REPLICAS_AVAILABLE: &str = "MinimumReplicasAvailable";
const MINIMUM_REPLICAS_UNAVAILABLE: &str = "MinimumReplicasUnavailable";

/// How long the controller waits for its own writes to appear in its cache.
const EXPECTATION_TIMEOUT: Duration = Duration::from_secs(5);
/// Periodic resync, as informers do (it also checks the progress deadline).
const RESYNC: Duration = Duration::from_secs(5);

/// The Deployment went away (or started to) while it was being synced: the
/// sync stops without a warning; the garbage collector removes what is left.
#[derive(Debug)]
struct Gone;

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the deployment no longer exists")
    }
}

impl std::error::Error for Gone {}

/// The controller of one cluster.
pub struct DeploymentController {
    client: Client,
    cache: Cache,
    events: EventSink,
    faults: watch::Receiver<Faults>,
}

impl DeploymentController {
    /// A controller writing through `client`, reading `cache`.
    pub fn new(
        client: Client,
        cache: Cache,
        faults: watch::Receiver<Faults>,
        node_name: &str,
    ) -> Self {
        let events = EventSink::new(client.clone(), "deployment-controller", node_name);
        DeploymentController {
            client,
            cache,
            events,
            faults,
        }
    }

    /// Syncs every Deployment whenever anything changes, until dropped.
    pub async fn run(mut self) {
        if let Err(error) = self.cache.wait_until_ready().await {
            tracing::warn!(%error, "deployment controller: cache never filled");
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
        let deployments = self.cache.deployments.state();
        if deployments.is_empty() {
            return;
        }
        let uids: HashSet<String> = deployments.iter().filter_map(|d| d.uid()).collect();
        let mut owned: HashMap<String, Vec<Arc<ReplicaSet>>> = HashMap::new();
        let mut orphans: HashMap<String, Vec<Arc<ReplicaSet>>> = HashMap::new();
        for set in self.cache.replica_sets.state() {
            match controller_ref::controller_uid(&set.metadata) {
                Some(uid) if uids.contains(uid) => {
                    owned.entry(uid.to_string()).or_default().push(set.clone());
                }
                Some(_) => {}
                None => orphans
                    .entry(set.namespace().unwrap_or_default())
                    .or_default()
                    .push(set.clone()),
            }
        }
        let mut pods_by_owner: HashMap<String, Vec<Arc<Pod>>> = HashMap::new();
        for pod in self.cache.pods.state() {
            if let Some(uid) = controller_ref::controller_uid(&pod.metadata) {
                pods_by_owner
                    .entry(uid.to_string())
                    .or_default()
                    .push(pod.clone());
            }
        }
        for deployment in deployments {
            let sets = deployment
                .uid()
                .and_then(|uid| owned.remove(&uid))
                .unwrap_or_default();
            let candidates = orphans
                .get(&deployment.namespace().unwrap_or_default())
                .cloned()
                .unwrap_or_default();
            match self
                .sync_deployment(&deployment, sets, &candidates, &pods_by_owner)
                .await
            {
                Ok(()) => {}
                Err(error) if error.is::<Gone>() => {
                    tracing::debug!(deployment = %deployment.name_any(), "deployment went away during its sync");
                }
                Err(error) => {
                    tracing::warn!(deployment = %deployment.name_any(), error = %format!("{error:#}"), "sync failed");
                }
            }
        }
    }

    /// `syncDeployment`: claims the ReplicaSets, then, in kube-controller-manager's
    /// order, a deleted Deployment's status only, a paused one's scaling, a
    /// scaling event, or the rollout of its strategy; then writes the revision
    /// annotation and the status if they changed.
    async fn sync_deployment(
        &self,
        cached: &Deployment,
        owned: Vec<Arc<ReplicaSet>>,
        orphans: &[Arc<ReplicaSet>],
        pods_by_owner: &HashMap<String, Vec<Arc<Pod>>>,
    ) -> anyhow::Result<()> {
        let (Some(_), Some(_), Some(spec)) =
            (cached.namespace(), cached.uid(), cached.spec.as_ref())
        else {
            return Ok(());
        };
        let mut d = cached.clone();
        if selects_everything(&spec.selector) {
            return self.selecting_all(cached).await;
        }
        let mut sets = self.claim_replica_sets(&d, owned, orphans).await?;
        // `getPodMapForDeployment`: the pods of each ReplicaSet, by its uid.
        let pod_map: HashMap<String, Vec<Arc<Pod>>> = sets
            .iter()
            .filter_map(|s| s.uid())
            .map(|uid| {
                let pods = pods_by_owner.get(&uid).cloned().unwrap_or_default();
                (uid, pods)
            })
            .collect();

        let status = if d.metadata.deletion_timestamp.is_some() {
            let (new, old) = self.get_all(&mut d, &mut sets, false).await?;
            calculate_status(&with_new(&old, new.as_ref()), new.as_ref(), &d)
        } else {
            check_paused_conditions(&mut d);
            let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
            if paused || self.is_scaling_event(&mut d, &mut sets).await? {
                self.sync(&mut d, &mut sets, paused).await?
            } else {
                match strategy_type(&d) {
                    Strategy::Recreate => {
                        self.rollout_recreate(&mut d, &mut sets, &pod_map).await?
                    }
                    Strategy::RollingUpdate => self.rollout_rolling(&mut d, &mut sets).await?,
                    Strategy::Unknown(kind) => {
                        anyhow::bail!("unexpected deployment strategy type: {kind}")
                    }
                }
            }
        };
        self.write_deployment(cached, &d, &status).await
    }

    /// A Deployment selecting every pod: a `SelectingAll` warning, only
    /// `observedGeneration` written.
    async fn selecting_all(&self, d: &Deployment) -> anyhow::Result<()> {
        let observed = d
            .status
            .as_ref()
            .and_then(|s| s.observed_generation)
            .unwrap_or(0);
        let generation = d.metadata.generation.unwrap_or(0);
        if observed >= generation {
            return Ok(());
        }
        self.events.warning(
            d.object_ref(&()),
            "SelectingAll",
            "Sync",
            "This deployment is selecting all pods. A non-empty selector is required.".into(),
        );
        let api: Api<Deployment> =
            Api::namespaced(self.client.clone(), &d.namespace().unwrap_or_default());
        api.patch_status(
            &d.name_any(),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"observedGeneration": generation}})),
        )
        .await?;
        Ok(())
    }

    /// `getReplicaSetsForDeployment` (`ClaimReplicaSets`): owned ReplicaSets
    /// that match the selector, plus adopted orphans; owned ones that no
    /// longer match are released.
    async fn claim_replica_sets(
        &self,
        d: &Deployment,
        owned: Vec<Arc<ReplicaSet>>,
        orphans: &[Arc<ReplicaSet>],
    ) -> anyhow::Result<Vec<ReplicaSet>> {
        let uid = d.uid().unwrap_or_default();
        let selector = d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        let deleting = d.metadata.deletion_timestamp.is_some();
        let matches = |set: &ReplicaSet| {
            crate::pod_facts::label_selector_matches(&selector, set.metadata.labels.as_ref())
        };
        let mut sets = Vec::new();
        for set in owned {
            if matches(set.as_ref()) {
                sets.push(set.as_ref().clone());
            } else if !deleting {
                match controller_ref::release(&self.client, &uid, set.as_ref()).await {
                    Ok(()) => {}
                    Err(error) if is_gone(&error) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        let adoptable: Vec<&Arc<ReplicaSet>> = orphans
            .iter()
            .filter(|s| matches(s.as_ref()) && s.metadata.deletion_timestamp.is_none())
            .collect();
        if !deleting && !adoptable.is_empty() && self.still_exists(d).await? {
            for set in adoptable {
                match controller_ref::adopt(&self.client, d, set.as_ref()).await {
                    Ok(()) => sets.push(set.as_ref().clone()),
                    Err(error) if is_status(&error, 404) => {}
                    Err(error) => return Err(error.into()),
                }
            }
        }
        Ok(sets)
    }

    /// Re-reads the Deployment before adopting or creating for it, so that a
    /// stale cache does not create ReplicaSets of a Deployment just deleted.
    async fn still_exists(&self, d: &Deployment) -> anyhow::Result<bool> {
        let api: Api<Deployment> =
            Api::namespaced(self.client.clone(), &d.namespace().unwrap_or_default());
        let current = api.get_opt(&d.name_any()).await?;
        Ok(current.is_some_and(|c| c.uid() == d.uid() && c.metadata.deletion_timestamp.is_none()))
    }

    /// `getAllReplicaSetsAndSyncRevision` / `getNewReplicaSet`: the ReplicaSet
    /// whose template equals the Deployment's (created, with revision
    /// `max(old) + 1`, when `create` and there is none) and the old ones.
    async fn get_all(
        &self,
        d: &mut Deployment,
        sets: &mut Vec<ReplicaSet>,
        create: bool,
    ) -> anyhow::Result<(Option<ReplicaSet>, Vec<ReplicaSet>)> {
        sets.sort_by(by_creation);
        let template = d
            .spec
            .as_ref()
            .map(|s| s.template.clone())
            .unwrap_or_default();
        let new_index = sets
            .iter()
            .position(|s| equal_ignore_hash(&template_of(s), &template));
        let old: Vec<ReplicaSet> = sets
            .iter()
            .enumerate()
            .filter(|(i, _)| Some(*i) != new_index)
            .map(|(_, s)| s.clone())
            .collect();
        let new_revision = old.iter().map(revision).max().unwrap_or(0) + 1;

        if let Some(index) = new_index {
            let mut copy = sets[index].clone();
            let annotations_changed = set_new_rs_annotations(d, &mut copy, new_revision, true);
            let min_ready = d.spec.as_ref().and_then(|s| s.min_ready_seconds);
            let spec = copy.spec.get_or_insert_with(Default::default);
            let min_ready_changed = spec.min_ready_seconds.unwrap_or(0) != min_ready.unwrap_or(0);
            if annotations_changed || min_ready_changed {
                spec.min_ready_seconds = min_ready;
                let patch = json!({
                    "metadata": {"annotations": copy.metadata.annotations},
                    "spec": {"minReadySeconds": omit_zero(min_ready.unwrap_or(0))},
                });
                let updated = self.patch_replica_set(&copy, patch).await?;
                sets[index] = updated.clone();
                return Ok((Some(updated), old));
            }
            let revision = copy
                .annotations()
                .get(REVISION_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            set_deployment_revision(d, &revision);
            if has_progress_deadline(d) && get_condition(d.status.as_ref(), "Progressing").is_none()
            {
                let message = format!("Found new replica set \"{}\"", copy.name_any());
                set_condition(
                    status_mut(d),
                    new_condition("Progressing", "True", FOUND_NEW_RS, message),
                );
            }
            return Ok((Some(copy), old));
        }
        if !create {
            return Ok((None, old));
        }

        // A new ReplicaSet, named after the template's hash.
        let collision_count = d.status.as_ref().and_then(|s| s.collision_count);
        let hash = template_hash(&template, collision_count);
        let mut new_template = template.clone();
        new_template
            .metadata
            .get_or_insert_with(Default::default)
            .labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let mut selector = d
            .spec
            .as_ref()
            .map(|s| s.selector.clone())
            .unwrap_or_default();
        selector
            .match_labels
            .get_or_insert_with(Default::default)
            .insert(POD_TEMPLATE_HASH_LABEL.into(), hash.clone());
        let name = format!("{}-{hash}", d.name_any());
        let mut set = ReplicaSet {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: d.namespace(),
                owner_references: controller_ref(&*d).map(|o| vec![o]),
                labels: new_template
                    .metadata
                    .as_ref()
                    .and_then(|m| m.labels.clone()),
                ..Default::default()
            },
            spec: Some(ReplicaSetSpec {
                replicas: Some(0),
                min_ready_seconds: d.spec.as_ref().and_then(|s| s.min_ready_seconds),
                selector,
                template: Some(new_template),
            }),
            status: None,
        };
        let replicas = new_rs_new_replicas(d, &with_new(&old, Some(&set)), &set);
        if let Some(spec) = set.spec.as_mut() {
            spec.replicas = Some(replicas);
        }
        set_new_rs_annotations(d, &mut set, new_revision, false);
        if !self.still_exists(d).await? {
            return Err(Gone.into());
        }
        let namespace = d.namespace().unwrap_or_default();
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
        let (created, already_existed) = match api.create(&PostParams::default(), &set).await {
            Ok(created) => (created, false),
            Err(error) if is_status(&error, 409) => {
                // Ours (a slow cache), or a hash collision.
                let existing = api.get(&name).await?;
                let ours = controller_ref::controller_uid(&existing.metadata) == d.uid().as_deref()
                    && equal_ignore_hash(&template_of(&existing), &template);
                if !ours {
                    let count = collision_count.unwrap_or(0) + 1;
                    let deployments: Api<Deployment> =
                        Api::namespaced(self.client.clone(), &namespace);
                    deployments
                        .patch_status(
                            &d.name_any(),
                            &PatchParams::default(),
                            &Patch::Merge(json!({"status": {"collisionCount": count}})),
                        )
                        .await?;
                    anyhow::bail!(
                        "hash collision for replica set {name}: collisionCount is now {count}"
                    );
                }
                (existing, true)
            }
            Err(error) => {
                let message = format!("Failed to create new replica set \"{name}\": {error}");
                if has_progress_deadline(d) {
                    set_condition(
                        status_mut(d),
                        new_condition("Progressing", "False", FAILED_RS_CREATE, message.clone()),
                    );
                    let status = d.status.clone().unwrap_or_default();
                    let _ = self.write_status(d, &status).await;
                }
                self.events
                    .warning(d.object_ref(&()), FAILED_RS_CREATE, "Create", message);
                return Err(error.into());
            }
        };
        if !already_existed {
            let key = ObjectRef::new(&name).within(&namespace);
            let uid = created.uid();
            self.cache
                .wait_for(EXPECTATION_TIMEOUT, |c| {
                    c.replica_sets.get(&key).is_some_and(|s| s.uid() == uid)
                })
                .await;
            if replicas > 0 {
                self.events.normal(
                    d.object_ref(&()),
                    "ScalingReplicaSet",
                    "Scale",
                    format!("Scaled up replica set {name} to {replicas}"),
                );
            }
        }
        set_deployment_revision(d, &new_revision.to_string());
        if !already_existed && has_progress_deadline(d) {
            let message = format!("Created new replica set \"{name}\"");
            set_condition(
                status_mut(d),
                new_condition("Progressing", "True", NEW_REPLICA_SET, message),
            );
        }
        if !sets.iter().any(|s| s.uid() == created.uid()) {
            sets.push(created.clone());
        }
        Ok((Some(created), old))
    }

    /// `isScalingEvent`: an active ReplicaSet sized for another `spec.replicas`.
    async fn is_scaling_event(
        &self,
        d: &mut Deployment,
        sets: &mut Vec<ReplicaSet>,
    ) -> anyhow::Result<bool> {
        let (new, old) = self.get_all(d, sets, false).await?;
        let desired = replicas(d);
        Ok(with_new(&old, new.as_ref())
            .iter()
            .filter(|s| spec_replicas(s) > 0)
            .filter_map(|s| int_annotation(s, DESIRED_REPLICAS_ANNOTATION))
            .any(|annotated| annotated != desired))
    }

    /// `sync`: scaling (proportional during a rollout), and the history
    /// cleanup of a paused Deployment; plain status.
    async fn sync(
        &self,
        d: &mut Deployment,
        sets: &mut Vec<ReplicaSet>,
        paused: bool,
    ) -> anyhow::Result<DeploymentStatus> {
        let (new, old) = self.get_all(d, sets, false).await?;
        self.scale(d, new.as_ref(), &old).await?;
        if paused {
            self.cleanup_deployment(&old, d).await?;
        }
        Ok(calculate_status(
            &with_new(&old, new.as_ref()),
            new.as_ref(),
            d,
        ))
    }

    /// `scale`: the only active (or the newest) ReplicaSet gets every
    /// replica; a saturated new one takes them from the old ones; otherwise
    /// the difference is shared in proportion to the sizes (`GetProportion`).
    async fn scale(
        &self,
        d: &Deployment,
        new: Option<&ReplicaSet>,
        old: &[ReplicaSet],
    ) -> anyhow::Result<()> {
        let desired = replicas(d);
        if let Some(only) = find_active_or_latest(new, old) {
            if spec_replicas(&only) != desired {
                self.scale_and_record(&only, desired, d).await?;
            }
            return Ok(());
        }
        if is_saturated(d, new) {
            for set in old.iter().filter(|s| spec_replicas(s) > 0) {
                self.scale_and_record(set, 0, d).await?;
            }
            return Ok(());
        }
        if strategy_type(d) != Strategy::RollingUpdate {
            return Ok(());
        }
        let mut active: Vec<ReplicaSet> = with_new(old, new)
            .into_iter()
            .filter(|s| spec_replicas(s) > 0)
            .collect();
        let total: i32 = active.iter().map(spec_replicas).sum();
        let allowed = if desired > 0 {
            desired + max_surge(d)
        } else {
            0
        };
        let to_add = allowed - total;
        let operation = match to_add.cmp(&0) {
            Ordering::Greater => {
                // ReplicaSetsBySizeNewer
                active.sort_by(|a, b| {
                    spec_replicas(b)
                        .cmp(&spec_replicas(a))
                        .then_with(|| by_creation(b, a))
                });
                "up"
            }
            Ordering::Less => {
                // ReplicaSetsBySizeOlder
                active.sort_by(|a, b| {
                    spec_replicas(b)
                        .cmp(&spec_replicas(a))
                        .then_with(|| by_creation(a, b))
                });
                "down"
            }
            Ordering::Equal => "",
        };
        let mut added = 0;
        let mut sizes: Vec<i32> = Vec::with_capacity(active.len());
        for set in &active {
            if to_add != 0 {
                let proportion = get_proportion(set, d, to_add, added);
                sizes.push(spec_replicas(set) + proportion);
                added += proportion;
            } else {
                sizes.push(spec_replicas(set));
            }
        }
        for (i, set) in active.iter().enumerate() {
            let mut size = sizes[i];
            if i == 0 && to_add != 0 {
                size = (size + to_add - added).max(0);
            }
            self.scale_replica_set(set, size, d, operation).await?;
        }
        Ok(())
    }

    /// `rolloutRolling`: scale the new ReplicaSet up within maxSurge, else the
    /// old ones down within maxUnavailable; clean up once complete.
    async fn rollout_rolling(
        &self,
        d: &mut Deployment,
        sets: &mut Vec<ReplicaSet>,
    ) -> anyhow::Result<DeploymentStatus> {
        let (new, old) = self.get_all(d, sets, true).await?;
        let new = new.ok_or(Gone)?;
        let all = with_new(&old, Some(&new));
        if self.reconcile_new_replica_set(&all, &new, d).await? {
            return Ok(sync_rollout_status(&all, Some(&new), d));
        }
        let active_old: Vec<ReplicaSet> = old
            .iter()
            .filter(|s| spec_replicas(s) > 0)
            .cloned()
            .collect();
        if self
            .reconcile_old_replica_sets(&all, active_old, &new, d)
            .await?
        {
            return Ok(sync_rollout_status(&all, Some(&new), d));
        }
        if deployment_complete(d, d.status.as_ref()) {
            self.cleanup_deployment(&old, d).await?;
        }
        Ok(sync_rollout_status(&all, Some(&new), d))
    }

    /// `reconcileNewReplicaSet`.
    async fn reconcile_new_replica_set(
        &self,
        all: &[ReplicaSet],
        new: &ReplicaSet,
        d: &Deployment,
    ) -> anyhow::Result<bool> {
        let desired = replicas(d);
        let current = spec_replicas(new);
        if current == desired {
            return Ok(false);
        }
        let target = if current > desired {
            desired
        } else {
            new_rs_new_replicas(d, all, new)
        };
        Ok(self.scale_and_record(new, target, d).await?.0)
    }

    /// `reconcileOldReplicaSets`: scale old ReplicaSets down as far as
    /// `maxScaledDown = allPods - minAvailable - newRSUnavailable` allows,
    /// unhealthy replicas first (`cleanupUnhealthyReplicas`), then
    /// `scaleDownOldReplicaSetsForRollingUpdate`.
    async fn reconcile_old_replica_sets(
        &self,
        all: &[ReplicaSet],
        mut old: Vec<ReplicaSet>,
        new: &ReplicaSet,
        d: &Deployment,
    ) -> anyhow::Result<bool> {
        let old_pods: i32 = old.iter().map(spec_replicas).sum();
        if old_pods == 0 {
            return Ok(false);
        }
        let all_pods: i32 = all.iter().map(spec_replicas).sum();
        let min_available = replicas(d) - max_unavailable(d);
        let new_unavailable = spec_replicas(new) - available_replicas(new);
        let max_scaled_down = all_pods - min_available - new_unavailable;
        if max_scaled_down <= 0 {
            return Ok(false);
        }
        // Errors here end the step without failing the sync, as in Kubernetes.
        let Ok(cleaned) = self
            .cleanup_unhealthy_replicas(&mut old, d, max_scaled_down)
            .await
        else {
            return Ok(false);
        };
        let all = with_new(&old, Some(new));
        let Ok(scaled) = self
            .scale_down_old_for_rolling_update(&all, &mut old, d)
            .await
        else {
            return Ok(false);
        };
        Ok(cleaned + scaled > 0)
    }

    /// `cleanupUnhealthyReplicas`: old ReplicaSets lose their unavailable
    /// replicas first, oldest ReplicaSet first.
    async fn cleanup_unhealthy_replicas(
        &self,
        old: &mut [ReplicaSet],
        d: &Deployment,
        max_cleanup: i32,
    ) -> anyhow::Result<i32> {
        old.sort_by(by_creation);
        let mut total = 0;
        for set in old.iter_mut() {
            if total >= max_cleanup {
                break;
            }
            let size = spec_replicas(set);
            let available = available_replicas(set);
            if size == 0 || size == available {
                continue;
            }
            let count = (max_cleanup - total).min(size - available);
            let (_, updated) = self.scale_and_record(set, size - count, d).await?;
            *set = updated;
            total += count;
        }
        Ok(total)
    }

    /// `scaleDownOldReplicaSetsForRollingUpdate`: as many old replicas as the
    /// available ones above `spec.replicas - maxUnavailable`, oldest first.
    async fn scale_down_old_for_rolling_update(
        &self,
        all: &[ReplicaSet],
        old: &mut [ReplicaSet],
        d: &Deployment,
    ) -> anyhow::Result<i32> {
        let min_available = replicas(d) - max_unavailable(d);
        let available: i32 = all.iter().map(available_replicas).sum();
        if available <= min_available {
            return Ok(0);
        }
        old.sort_by(by_creation);
        let to_scale_down = available - min_available;
        let mut total = 0;
        for set in old.iter_mut() {
            if total >= to_scale_down {
                break;
            }
            let size = spec_replicas(set);
            if size == 0 {
                continue;
            }
            let count = size.min(to_scale_down - total);
            let (_, updated) = self.scale_and_record(set, size - count, d).await?;
            *set = updated;
            total += count;
        }
        Ok(total)
    }

    /// `rolloutRecreate`: old ReplicaSets to zero, wait until none of their
    /// pods runs, then the new ReplicaSet to `spec.replicas`.
    async fn rollout_recreate(
        &self,
        d: &mut Deployment,
        sets: &mut Vec<ReplicaSet>,
        pod_map: &HashMap<String, Vec<Arc<Pod>>>,
    ) -> anyhow::Result<DeploymentStatus> {
        let (mut new, old) = self.get_all(d, sets, false).await?;
        let mut all = with_new(&old, new.as_ref());
        let mut scaled_down = false;
        for set in old.iter().filter(|s| spec_replicas(s) > 0) {
            scaled_down |= self.scale_and_record(set, 0, d).await?.0;
        }
        if scaled_down || old_pods_running(new.as_ref(), &old, pod_map) {
            return Ok(sync_rollout_status(&all, new.as_ref(), d));
        }
        if new.is_none() {
            let (created, _) = self.get_all(d, sets, true).await?;
            new = Some(created.ok_or(Gone)?);
            all = with_new(&old, new.as_ref());
        }
        if let Some(new) = &new {
            self.scale_and_record(new, replicas(d), d).await?;
        }
        if deployment_complete(d, d.status.as_ref()) {
            self.cleanup_deployment(&old, d).await?;
        }
        Ok(sync_rollout_status(&all, new.as_ref(), d))
    }

    /// `cleanupDeployment`: deletes the oldest revisions beyond
    /// `revisionHistoryLimit`, among old ReplicaSets that are scaled to zero,
    /// have no pods and whose status is current.
    async fn cleanup_deployment(&self, old: &[ReplicaSet], d: &Deployment) -> anyhow::Result<()> {
        let Some(limit) = revision_history_limit(d) else {
            return Ok(());
        };
        let mut cleanable: Vec<&ReplicaSet> = old
            .iter()
            .filter(|s| s.metadata.deletion_timestamp.is_none())
            .collect();
        let excess = cleanable.len() as i64 - i64::from(limit);
        if excess <= 0 {
            return Ok(());
        }
        cleanable.sort_by(|a, b| {
            revision(a)
                .cmp(&revision(b))
                .then_with(|| by_creation(a, b))
        });
        for set in cleanable.into_iter().take(excess as usize) {
            let observed = set
                .status
                .as_ref()
                .and_then(|s| s.observed_generation)
                .unwrap_or(0);
            if status_replicas(set) != 0
                || spec_replicas(set) != 0
                || set.metadata.generation.unwrap_or(0) > observed
            {
                continue;
            }
            let api: Api<ReplicaSet> =
                Api::namespaced(self.client.clone(), &set.namespace().unwrap_or_default());
            let params = DeleteParams {
                preconditions: Some(Preconditions {
                    uid: set.uid(),
                    resource_version: None,
                }),
                ..Default::default()
            };
            match api.delete(&set.name_any(), &params).await {
                Ok(_) => {}
                Err(error) if is_gone(&error) => {}
                Err(error) => return Err(error.into()),
            }
        }
        Ok(())
    }

    /// `scaleReplicaSetAndRecordEvent`: (whether it was scaled, the set as written).
    async fn scale_and_record(
        &self,
        set: &ReplicaSet,
        size: i32,
        d: &Deployment,
    ) -> anyhow::Result<(bool, ReplicaSet)> {
        let current = spec_replicas(set);
        if current == size {
            return Ok((false, set.clone()));
        }
        let operation = if current < size { "up" } else { "down" };
        self.scale_replica_set(set, size, d, operation).await
    }

    /// `scaleReplicaSet`: `spec.replicas` and the desired/max annotations.
    async fn scale_replica_set(
        &self,
        set: &ReplicaSet,
        size: i32,
        d: &Deployment,
        operation: &str,
    ) -> anyhow::Result<(bool, ReplicaSet)> {
        let current = spec_replicas(set);
        let desired = replicas(d);
        let max = desired + max_surge(d);
        let size_changes = current != size;
        if !size_changes && !replicas_annotations_need_update(set, desired, max) {
            return Ok((false, set.clone()));
        }
        let patch = json!({
            "metadata": {"annotations": {
                DESIRED_REPLICAS_ANNOTATION: desired.to_string(),
                MAX_REPLICAS_ANNOTATION: max.to_string(),
            }},
            "spec": {"replicas": size},
        });
        let updated = self.patch_replica_set(set, patch).await?;
        if size_changes {
            self.events.normal(
                d.object_ref(&()),
                "ScalingReplicaSet",
                "Scale",
                format!(
                    "Scaled {operation} replica set {} to {size} from {current}",
                    set.name_any()
                ),
            );
        }
        Ok((size_changes, updated))
    }

    /// Writes `patch` to `set`, conditional on the resourceVersion the
    /// decision was made on, and waits until the cache shows the change.
    async fn patch_replica_set(
        &self,
        set: &ReplicaSet,
        mut patch: serde_json::Value,
    ) -> anyhow::Result<ReplicaSet> {
        let namespace = set.namespace().unwrap_or_default();
        let name = set.name_any();
        patch["metadata"]["resourceVersion"] = json!(set.resource_version());
        let api: Api<ReplicaSet> = Api::namespaced(self.client.clone(), &namespace);
        let updated = api
            .patch(&name, &PatchParams::default(), &Patch::Merge(patch))
            .await?;
        let key = ObjectRef::new(&name).within(&namespace);
        let before = set.resource_version();
        self.cache
            .wait_for(EXPECTATION_TIMEOUT, |c| {
                c.replica_sets
                    .get(&key)
                    .is_none_or(|s| s.resource_version() != before)
            })
            .await;
        Ok(updated)
    }

    /// Writes what the sync changed: the revision annotation (a metadata
    /// patch: apiserver-sim's `/status` keeps only the status) and the status.
    async fn write_deployment(
        &self,
        cached: &Deployment,
        d: &Deployment,
        status: &DeploymentStatus,
    ) -> anyhow::Result<()> {
        let revision = d.annotations().get(REVISION_ANNOTATION);
        if revision.is_some() && revision != cached.annotations().get(REVISION_ANNOTATION) {
            let api: Api<Deployment> =
                Api::namespaced(self.client.clone(), &d.namespace().unwrap_or_default());
            let patch = json!({"metadata": {"annotations": {REVISION_ANNOTATION: revision}}});
            match api
                .patch(&d.name_any(), &PatchParams::default(), &Patch::Merge(patch))
                .await
            {
                Ok(_) => {}
                Err(error) if is_status(&error, 404) => return Err(Gone.into()),
                Err(error) => return Err(error.into()),
            }
        }
        self.write_status(cached, status).await
    }

    /// `UpdateStatus`, only when the status differs from what was read.
    async fn write_status(
        &self,
        cached: &Deployment,
        status: &DeploymentStatus,
    ) -> anyhow::Result<()> {
        let patch = status_patch(status);
        let existing = json!({"status": cached.status.clone().unwrap_or_default()});
        let mut merged = existing.clone();
        merge_patch(&mut merged, &patch);
        if merged == existing {
            return Ok(());
        }
        let api: Api<Deployment> =
            Api::namespaced(self.client.clone(), &cached.namespace().unwrap_or_default());
        match api
            .patch_status(
                &cached.name_any(),
                &PatchParams::default(),
                &Patch::Merge(patch),
            )
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if is_status(&error, 404) => Err(Gone.into()),
            Err(error) => Err(error.into()),
        }
    }
}
