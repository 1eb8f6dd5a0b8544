//! The Deployment controller (kube-controller-manager's `deployment`
//! controller, kubernetes/kubernetes `pkg/controller/deployment/`): it keeps
//! one ReplicaSet `<deployment>-<pod-template-hash>` per pod template, rolls
//! from the old ones to the new one (`RollingUpdate` within maxSurge and
//! maxUnavailable, or `Recreate`), scales proportionally, keeps
//! `revisionHistoryLimit` old ReplicaSets, and reports status and the
//! `Available`/`Progressing` conditions. The pods are the ReplicaSet
//! controller's business.

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::apps::v1::{
    Deployment, DeploymentCondition, DeploymentStatus, ReplicaSet, ReplicaSetSpec,
};
use k8s_openapi::api::core::v1::{Pod, PodTemplateSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
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
use crate::pod_facts::is_terminal;
use crate::replicaset::selects_everything;

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

// ---------------------------------------------------------------- helpers

/// The rollout strategy (`spec.strategy.type`, `RollingUpdate` when unset as
/// the API server defaults it).
#[derive(Debug, Clone, PartialEq, Eq)]
enum Strategy {
    RollingUpdate,
    Recreate,
    Unknown(String),
}

fn strategy_type(d: &Deployment) -> Strategy {
    match d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.type_.as_deref())
    {
        None | Some("RollingUpdate") => Strategy::RollingUpdate,
        Some("Recreate") => Strategy::Recreate,
        Some(other) => Strategy::Unknown(other.to_string()),
    }
}

/// `spec.replicas` (defaulted to 1).
fn replicas(d: &Deployment) -> i32 {
    d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn spec_replicas(set: &ReplicaSet) -> i32 {
    set.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1)
}

fn status_replicas(set: &ReplicaSet) -> i32 {
    set.status.as_ref().map(|s| s.replicas).unwrap_or(0)
}

fn ready_replicas(set: &ReplicaSet) -> i32 {
    set.status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0)
}

fn available_replicas(set: &ReplicaSet) -> i32 {
    set.status
        .as_ref()
        .and_then(|s| s.available_replicas)
        .unwrap_or(0)
}

fn template_of(set: &ReplicaSet) -> PodTemplateSpec {
    set.spec
        .as_ref()
        .and_then(|s| s.template.clone())
        .unwrap_or_default()
}

/// `old` followed by `new` (`append(oldRSs, newRS)`, a nil new one left out).
fn with_new(old: &[ReplicaSet], new: Option<&ReplicaSet>) -> Vec<ReplicaSet> {
    old.iter().chain(new).cloned().collect()
}

/// `ReplicaSetsByCreationTimestamp`: older first, then by name.
fn by_creation(a: &ReplicaSet, b: &ReplicaSet) -> Ordering {
    let created = |s: &ReplicaSet| s.metadata.creation_timestamp.as_ref().map(|t| t.0);
    created(a)
        .cmp(&created(b))
        .then_with(|| a.name_any().cmp(&b.name_any()))
}

/// The revision annotation of a ReplicaSet (0 when absent or unreadable).
fn revision(set: &ReplicaSet) -> i64 {
    set.annotations()
        .get(REVISION_ANNOTATION)
        .and_then(|r| r.parse().ok())
        .unwrap_or(0)
}

fn int_annotation(set: &ReplicaSet, key: &str) -> Option<i32> {
    set.annotations().get(key)?.parse().ok()
}

/// `intstr.GetValueFromIntOrPercent`: a number, or a percentage of `total`
/// rounded up or down (anything else is refused by validation: 0).
fn int_or_percent(value: &IntOrString, total: i32, round_up: bool) -> i32 {
    match value {
        IntOrString::Int(n) => *n,
        IntOrString::String(s) => {
            let Some(percent) = s.strip_suffix('%').and_then(|p| p.parse::<i64>().ok()) else {
                return 0;
            };
            let scaled = percent * i64::from(total);
            let value = if round_up {
                (scaled + 99).div_euclid(100)
            } else {
                scaled.div_euclid(100)
            };
            i32::try_from(value).unwrap_or(0)
        }
    }
}

/// `ResolveFenceposts`: (maxSurge, maxUnavailable) for `spec.replicas`; both
/// zero makes maxUnavailable 1. Unset values are the API defaults, 25%.
fn resolve_fenceposts(d: &Deployment) -> (i32, i32) {
    let rolling = d
        .spec
        .as_ref()
        .and_then(|s| s.strategy.as_ref())
        .and_then(|s| s.rolling_update.clone())
        .unwrap_or_default();
    let default = IntOrString::String("25%".into());
    let desired = replicas(d);
    let surge = int_or_percent(
        rolling.max_surge.as_ref().unwrap_or(&default),
        desired,
        true,
    );
    let unavailable = int_or_percent(
        rolling.max_unavailable.as_ref().unwrap_or(&default),
        desired,
        false,
    );
    if surge == 0 && unavailable == 0 {
        (0, 1)
    } else {
        (surge, unavailable)
    }
}

/// `MaxSurge`.
fn max_surge(d: &Deployment) -> i32 {
    if strategy_type(d) != Strategy::RollingUpdate {
        return 0;
    }
    resolve_fenceposts(d).0
}

/// `MaxUnavailable`.
fn max_unavailable(d: &Deployment) -> i32 {
    if strategy_type(d) != Strategy::RollingUpdate || replicas(d) == 0 {
        return 0;
    }
    resolve_fenceposts(d).1.min(replicas(d))
}

/// `NewRSNewReplicas`: how far the new ReplicaSet may grow now.
fn new_rs_new_replicas(d: &Deployment, all: &[ReplicaSet], new: &ReplicaSet) -> i32 {
    let desired = replicas(d);
    match strategy_type(d) {
        Strategy::RollingUpdate => {
            let current: i32 = all.iter().map(spec_replicas).sum();
            let max_total = desired + max_surge(d);
            if current >= max_total {
                return spec_replicas(new);
            }
            let scale_up = (max_total - current).min(desired - spec_replicas(new));
            spec_replicas(new) + scale_up
        }
        _ => desired,
    }
}

/// `IsSaturated`: the new ReplicaSet holds every replica, all available.
fn is_saturated(d: &Deployment, new: Option<&ReplicaSet>) -> bool {
    let Some(new) = new else {
        return false;
    };
    let desired = replicas(d);
    int_annotation(new, DESIRED_REPLICAS_ANNOTATION) == Some(desired)
        && spec_replicas(new) == desired
        && available_replicas(new) == desired
}

/// `FindActiveOrLatest`: the only active ReplicaSet, or the newest when none
/// is active; none when several are.
fn find_active_or_latest(new: Option<&ReplicaSet>, old: &[ReplicaSet]) -> Option<ReplicaSet> {
    let mut old = old.to_vec();
    old.sort_by(|a, b| by_creation(b, a));
    let active: Vec<ReplicaSet> = with_new(&old, new)
        .into_iter()
        .filter(|s| spec_replicas(s) > 0)
        .collect();
    match active.len() {
        0 => new.cloned().or_else(|| old.first().cloned()),
        1 => active.into_iter().next(),
        _ => None,
    }
}

/// `GetProportion` / `getReplicaSetFraction`.
fn get_proportion(set: &ReplicaSet, d: &Deployment, to_add: i32, added: i32) -> i32 {
    let size = spec_replicas(set);
    if size == 0 || to_add == 0 || to_add == added {
        return 0;
    }
    let fraction = if replicas(d) == 0 {
        -size
    } else {
        let deployment_replicas = replicas(d) + max_surge(d);
        let annotated = int_annotation(set, MAX_REPLICAS_ANNOTATION)
            .unwrap_or_else(|| d.status.as_ref().and_then(|s| s.replicas).unwrap_or(0));
        if annotated == 0 {
            return 0;
        }
        let new_size = f64::from(size) * f64::from(deployment_replicas) / f64::from(annotated);
        new_size.round() as i32 - size
    };
    let allowed = to_add - added;
    if to_add > 0 {
        fraction.min(allowed)
    } else {
        fraction.max(allowed)
    }
}

/// `ReplicasAnnotationsNeedUpdate`.
fn replicas_annotations_need_update(set: &ReplicaSet, desired: i32, max: i32) -> bool {
    int_annotation(set, DESIRED_REPLICAS_ANNOTATION) != Some(desired)
        || int_annotation(set, MAX_REPLICAS_ANNOTATION) != Some(max)
}

/// `SetNewReplicaSetAnnotations`: the Deployment's annotations (but the
/// skipped ones), the revision if it grows (the former one kept in the
/// revision history), and for a set about to be created the replica
/// annotations. Whether anything changed.
fn set_new_rs_annotations(
    d: &Deployment,
    set: &mut ReplicaSet,
    new_revision: i64,
    exists: bool,
) -> bool {
    let mut changed = false;
    let annotations = set.metadata.annotations.get_or_insert_with(BTreeMap::new);
    for (key, value) in d.annotations() {
        if ANNOTATIONS_TO_SKIP.contains(&key.as_str()) || annotations.get(key) == Some(value) {
            continue;
        }
        annotations.insert(key.clone(), value.clone());
        changed = true;
    }
    let old_revision = annotations.get(REVISION_ANNOTATION).cloned();
    let old_number = match old_revision.as_deref() {
        None | Some("") => 0,
        Some(text) => match text.parse::<i64>() {
            Ok(n) => n,
            Err(_) => return false,
        },
    };
    if old_number < new_revision {
        annotations.insert(REVISION_ANNOTATION.into(), new_revision.to_string());
        changed = true;
        if let Some(old_revision) = old_revision.filter(|r| !r.is_empty()) {
            let history = annotations
                .get(REVISION_HISTORY_ANNOTATION)
                .cloned()
                .unwrap_or_default();
            let mut revisions: Vec<String> = history
                .split(',')
                .filter(|r| !r.is_empty())
                .map(String::from)
                .collect();
            revisions.push(old_revision);
            while revisions.join(",").len() > MAX_REVISION_HISTORY_CHARS && revisions.len() > 1 {
                revisions.remove(0);
            }
            annotations.insert(REVISION_HISTORY_ANNOTATION.into(), revisions.join(","));
        }
    }
    if !exists {
        let desired = replicas(d);
        let max = desired + max_surge(d);
        for (key, value) in [
            (DESIRED_REPLICAS_ANNOTATION, desired),
            (MAX_REPLICAS_ANNOTATION, max),
        ] {
            if annotations.get(key) != Some(&value.to_string()) {
                annotations.insert(key.into(), value.to_string());
                changed = true;
            }
        }
    }
    changed
}

/// `SetDeploymentRevision` (in memory; written by `write_deployment`).
fn set_deployment_revision(d: &mut Deployment, revision: &str) {
    d.metadata
        .annotations
        .get_or_insert_with(BTreeMap::new)
        .insert(REVISION_ANNOTATION.into(), revision.to_string());
}

fn has_progress_deadline(d: &Deployment) -> bool {
    d.spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .is_some_and(|s| s != i32::MAX)
}

fn revision_history_limit(d: &Deployment) -> Option<i32> {
    d.spec
        .as_ref()
        .and_then(|s| s.revision_history_limit)
        .filter(|l| *l != i32::MAX)
}

/// `oldPodsRunning`: an old ReplicaSet still counts pods, or one of its pods
/// has not finished (terminating ones included).
fn old_pods_running(
    new: Option<&ReplicaSet>,
    old: &[ReplicaSet],
    pod_map: &HashMap<String, Vec<Arc<Pod>>>,
) -> bool {
    if old.iter().map(status_replicas).sum::<i32>() > 0 {
        return true;
    }
    let new_uid = new.and_then(|n| n.uid());
    pod_map
        .iter()
        .filter(|(uid, _)| Some(uid.as_str()) != new_uid.as_deref())
        .any(|(_, pods)| pods.iter().any(|p| !is_terminal(p)))
}

/// FNV-1a (32 bits) over the template's JSON, then the collision count as
/// 8 little-endian bytes, rendered with `rand.SafeEncodeString`'s alphabet:
/// `controller.ComputeHash`'s construction, over JSON rather than Go's
/// `DeepHashObject` output, so the value differs from a real cluster's.
pub fn template_hash(template: &PodTemplateSpec, collision_count: Option<i32>) -> String {
    let mut bytes = serde_json::to_vec(template).unwrap_or_default();
    if let Some(count) = collision_count {
        bytes.extend_from_slice(&u64::from(count as u32).to_le_bytes());
    }
    let hash = bytes.iter().fold(0x811c_9dc5u32, |h, b| {
        (h ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    });
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    hash.to_string()
        .bytes()
        .map(|b| ALPHABET[usize::from(b) % ALPHABET.len()] as char)
        .collect()
}

/// A template as JSON without the hash label, nulls and empty lists, and
/// with empty label/annotation maps left out: Go's semantic equality treats
/// nil and empty slices and maps alike.
fn comparable(template: &PodTemplateSpec) -> serde_json::Value {
    fn prune(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for child in map.values_mut() {
                    prune(child);
                }
                map.retain(|key, child| match child {
                    serde_json::Value::Null => false,
                    serde_json::Value::Array(a) => !a.is_empty(),
                    serde_json::Value::Object(o) => {
                        !(o.is_empty()
                            && matches!(key.as_str(), "labels" | "annotations" | "metadata"))
                    }
                    _ => true,
                });
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(prune),
            _ => {}
        }
    }
    let mut template = template.clone();
    if let Some(labels) = template.metadata.as_mut().and_then(|m| m.labels.as_mut()) {
        labels.remove(POD_TEMPLATE_HASH_LABEL);
    }
    let mut value = serde_json::to_value(&template).unwrap_or_default();
    prune(&mut value);
    value
}

/// `EqualIgnoreHash`.
fn equal_ignore_hash(a: &PodTemplateSpec, b: &PodTemplateSpec) -> bool {
    comparable(a) == comparable(b)
}

// ---------------------------------------------------------------- status

fn now() -> Time {
    let now = Timestamp::now();
    Time(Timestamp::from_second(now.as_second()).unwrap_or(now))
}

fn new_condition(type_: &str, status: &str, reason: &str, message: String) -> DeploymentCondition {
    DeploymentCondition {
        type_: type_.into(),
        status: status.into(),
        reason: Some(reason.into()),
        message: Some(message),
        last_update_time: Some(now()),
        last_transition_time: Some(now()),
    }
}

fn get_condition<'a>(
    status: Option<&'a DeploymentStatus>,
    type_: &str,
) -> Option<&'a DeploymentCondition> {
    status?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
}

fn status_mut(d: &mut Deployment) -> &mut DeploymentStatus {
    d.status.get_or_insert_with(Default::default)
}

/// `SetDeploymentCondition`: no change for the same status and reason; the
/// transition time kept for the same status.
fn set_condition(status: &mut DeploymentStatus, mut condition: DeploymentCondition) {
    if let Some(current) = get_condition(Some(status), &condition.type_) {
        if current.status == condition.status && current.reason == condition.reason {
            return;
        }
        if current.status == condition.status {
            condition.last_transition_time = current.last_transition_time.clone();
        }
    }
    let conditions = status.conditions.get_or_insert_with(Vec::new);
    conditions.retain(|c| c.type_ != condition.type_);
    conditions.push(condition);
}

fn remove_condition(status: &mut DeploymentStatus, type_: &str) {
    if let Some(conditions) = status.conditions.as_mut() {
        conditions.retain(|c| c.type_ != type_);
    }
}

/// `checkPausedConditions`: `Progressing` Unknown while paused, and when resumed.
fn check_paused_conditions(d: &mut Deployment) {
    if !has_progress_deadline(d) {
        return;
    }
    let reason = get_condition(d.status.as_ref(), "Progressing").and_then(|c| c.reason.clone());
    if reason.as_deref() == Some(TIMED_OUT) {
        return;
    }
    let paused = d.spec.as_ref().and_then(|s| s.paused).unwrap_or(false);
    let paused_condition = reason.as_deref() == Some(PAUSED);
    if paused && !paused_condition {
        let condition = new_condition(
            "Progressing",
            "Unknown",
            PAUSED,
            "Deployment is paused".into(),
        );
        set_condition(status_mut(d), condition);
    } else if !paused && paused_condition {
        let condition = new_condition(
            "Progressing",
            "Unknown",
            RESUMED,
            "Deployment is resumed".into(),
        );
        set_condition(status_mut(d), condition);
    }
}

/// `calculateStatus`: the counts over all ReplicaSets (`updatedReplicas`
/// from the new one) and the `Available` condition.
fn calculate_status(
    all: &[ReplicaSet],
    new: Option<&ReplicaSet>,
    d: &Deployment,
) -> DeploymentStatus {
    let available: i32 = all.iter().map(available_replicas).sum();
    let total: i32 = all.iter().map(spec_replicas).sum();
    let current = d.status.clone().unwrap_or_default();
    let mut status = DeploymentStatus {
        observed_generation: d.metadata.generation,
        replicas: Some(all.iter().map(status_replicas).sum()),
        updated_replicas: Some(new.map(status_replicas).unwrap_or(0)),
        ready_replicas: Some(all.iter().map(ready_replicas).sum()),
        available_replicas: Some(available),
        unavailable_replicas: Some((total - available).max(0)),
        collision_count: current.collision_count,
        conditions: current.conditions,
        terminating_replicas: None,
    };
    let condition = if available >= replicas(d) - max_unavailable(d) {
        new_condition(
            "Available",
            "True",
            MINIMUM_REPLICAS_AVAILABLE,
            "Deployment has minimum availability.".into(),
        )
    } else {
        new_condition(
            "Available",
            "False",
            MINIMUM_REPLICAS_UNAVAILABLE,
            "Deployment does not have minimum availability.".into(),
        )
    };
    set_condition(&mut status, condition);
    status
}

fn counter(value: Option<i32>) -> i32 {
    value.unwrap_or(0)
}

/// `DeploymentComplete`.
fn deployment_complete(d: &Deployment, status: Option<&DeploymentStatus>) -> bool {
    let Some(status) = status else {
        return false;
    };
    let desired = replicas(d);
    counter(status.updated_replicas) == desired
        && counter(status.replicas) == desired
        && counter(status.available_replicas) == desired
        && status.observed_generation.unwrap_or(0) >= d.metadata.generation.unwrap_or(0)
}

/// `DeploymentProgressing`: more updated, ready or available replicas, or
/// fewer old ones, than the status last written.
fn deployment_progressing(d: &Deployment, new: &DeploymentStatus) -> bool {
    let old = d.status.clone().unwrap_or_default();
    let old_old = counter(old.replicas) - counter(old.updated_replicas);
    let new_old = counter(new.replicas) - counter(new.updated_replicas);
    counter(new.updated_replicas) > counter(old.updated_replicas)
        || new_old < old_old
        || counter(new.ready_replicas) > counter(old.ready_replicas)
        || counter(new.available_replicas) > counter(old.available_replicas)
}

/// `DeploymentTimedOut`: no progress for `progressDeadlineSeconds`.
fn deployment_timed_out(d: &Deployment, new: &DeploymentStatus) -> bool {
    if !has_progress_deadline(d) {
        return false;
    }
    let Some(condition) = get_condition(Some(new), "Progressing") else {
        return false;
    };
    match condition.reason.as_deref() {
        Some(NEW_RS_AVAILABLE) => return false,
        Some(TIMED_OUT) => return true,
        _ => {}
    }
    let deadline = d
        .spec
        .as_ref()
        .and_then(|s| s.progress_deadline_seconds)
        .unwrap_or(0);
    condition
        .last_update_time
        .as_ref()
        .is_some_and(|from| from.0.as_second() + i64::from(deadline) < Timestamp::now().as_second())
}

/// `syncRolloutStatus`: `calculateStatus`, then the `Progressing` condition
/// (complete, progressing, or timed out past `progressDeadlineSeconds`) and
/// the ReplicaSets' `ReplicaFailure`.
fn sync_rollout_status(
    all: &[ReplicaSet],
    new: Option<&ReplicaSet>,
    d: &Deployment,
) -> DeploymentStatus {
    let mut status = calculate_status(all, new, d);
    if !has_progress_deadline(d) {
        remove_condition(&mut status, "Progressing");
    }
    let current = get_condition(d.status.as_ref(), "Progressing").cloned();
    let complete_before = counter(status.replicas) == counter(status.updated_replicas)
        && current.as_ref().and_then(|c| c.reason.as_deref()) == Some(NEW_RS_AVAILABLE);
    if has_progress_deadline(d) && !complete_before {
        let name = d.name_any();
        if deployment_complete(d, Some(&status)) {
            let message = match new {
                Some(new) => format!(
                    "ReplicaSet \"{}\" has successfully progressed.",
                    new.name_any()
                ),
                None => format!("Deployment \"{name}\" has successfully progressed."),
            };
            set_condition(
                &mut status,
                new_condition("Progressing", "True", NEW_RS_AVAILABLE, message),
            );
        } else if deployment_progressing(d, &status) {
            let message = match new {
                Some(new) => format!("ReplicaSet \"{}\" is progressing.", new.name_any()),
                None => format!("Deployment \"{name}\" is progressing."),
            };
            let mut condition = new_condition("Progressing", "True", REPLICA_SET_UPDATED, message);
            if let Some(current) = &current {
                if current.status == "True" {
                    condition.last_transition_time = current.last_transition_time.clone();
                }
                remove_condition(&mut status, "Progressing");
            }
            set_condition(&mut status, condition);
        } else if deployment_timed_out(d, &status) {
            let message = match new {
                Some(new) => format!(
                    "ReplicaSet \"{}\" has timed out progressing.",
                    new.name_any()
                ),
                None => format!("Deployment \"{name}\" has timed out progressing."),
            };
            set_condition(
                &mut status,
                new_condition("Progressing", "False", TIMED_OUT, message),
            );
        }
    }
    // `getReplicaFailures`: the new ReplicaSet's failure first.
    let failure = new
        .into_iter()
        .chain(all.iter())
        .flat_map(|s| {
            s.status
                .as_ref()
                .and_then(|s| s.conditions.clone())
                .unwrap_or_default()
        })
        .find(|c| c.type_ == "ReplicaFailure");
    match failure {
        Some(c) => set_condition(
            &mut status,
            DeploymentCondition {
                type_: c.type_,
                status: c.status,
                reason: c.reason,
                message: c.message,
                last_update_time: c.last_transition_time.clone(),
                last_transition_time: c.last_transition_time,
            },
        ),
        None => remove_condition(&mut status, "ReplicaFailure"),
    }
    status
}

/// The status as a merge patch: every field named, zero counters and an
/// empty condition list removed (`omitempty`).
fn status_patch(status: &DeploymentStatus) -> serde_json::Value {
    let conditions = status.conditions.clone().unwrap_or_default();
    json!({"status": {
        "observedGeneration": omit_zero(status.observed_generation.unwrap_or(0)),
        "replicas": omit_zero(counter(status.replicas)),
        "updatedReplicas": omit_zero(counter(status.updated_replicas)),
        "readyReplicas": omit_zero(counter(status.ready_replicas)),
        "availableReplicas": omit_zero(counter(status.available_replicas)),
        "unavailableReplicas": omit_zero(counter(status.unavailable_replicas)),
        "collisionCount": status.collision_count,
        "conditions": if conditions.is_empty() { serde_json::Value::Null } else { json!(conditions) },
    }})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deployment(replicas: i32, strategy: serde_json::Value) -> Deployment {
        serde_json::from_value(json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": "ns", "uid": "d-uid", "generation": 1},
            "spec": {"replicas": replicas, "strategy": strategy, "progressDeadlineSeconds": 600,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "i:1"}]}}}
        }))
        .unwrap()
    }

    fn rolling(surge: serde_json::Value, unavailable: serde_json::Value) -> serde_json::Value {
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge, "maxUnavailable": unavailable}})
    }

    fn set(name: &str, spec: i32, available: i32, created: &str) -> ReplicaSet {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "ns", "uid": format!("{name}-uid"), "creationTimestamp": created,
                "annotations": {DESIRED_REPLICAS_ANNOTATION: "4", MAX_REPLICAS_ANNOTATION: "5"}},
            "spec": {"replicas": spec, "selector": {"matchLabels": {"app": "web"}}},
            "status": {"replicas": spec, "availableReplicas": available, "readyReplicas": available}
        }))
        .unwrap()
    }

    #[test]
    fn fenceposts_round_surge_up_and_unavailability_down() {
        let default = deployment(1, json!(null));
        assert_eq!((max_surge(&default), max_unavailable(&default)), (1, 0));
        let four = deployment(4, rolling(json!("25%"), json!("25%")));
        assert_eq!((max_surge(&four), max_unavailable(&four)), (1, 1));
        let ten = deployment(10, rolling(json!(3), json!("15%")));
        assert_eq!((max_surge(&ten), max_unavailable(&ten)), (3, 1));
        let zero = deployment(3, rolling(json!(0), json!("10%")));
        assert_eq!(
            (max_surge(&zero), max_unavailable(&zero)),
            (0, 1),
            "both zero: one unavailable"
        );
        let recreate = deployment(3, json!({"type": "Recreate"}));
        assert_eq!((max_surge(&recreate), max_unavailable(&recreate)), (0, 0));
        assert_eq!(
            max_unavailable(&deployment(2, rolling(json!(0), json!(5)))),
            2
        );
    }

    #[test]
    fn the_new_replica_set_grows_within_the_surge() {
        let d = deployment(4, rolling(json!(1), json!(1)));
        let old = set("web-old", 4, 4, "2026-01-01T00:00:00Z");
        let new = set("web-new", 0, 0, "2026-01-02T00:00:00Z");
        assert_eq!(
            new_rs_new_replicas(&d, &[old.clone(), new.clone()], &new),
            1
        );
        let old3 = set("web-old", 3, 3, "2026-01-01T00:00:00Z");
        let new1 = set("web-new", 1, 0, "2026-01-02T00:00:00Z");
        assert_eq!(new_rs_new_replicas(&d, &[old3, new1.clone()], &new1), 2);
        let recreate = deployment(4, json!({"type": "Recreate"}));
        assert_eq!(
            new_rs_new_replicas(&recreate, std::slice::from_ref(&new), &new),
            4
        );
    }

    #[test]
    fn templates_compare_without_the_hash_label_and_hash_stably() {
        let d = deployment(1, json!(null));
        let template = d.spec.clone().unwrap().template;
        let mut labeled = template.clone();
        labeled
            .metadata
            .as_mut()
            .unwrap()
            .labels
            .as_mut()
            .unwrap()
            .insert(POD_TEMPLATE_HASH_LABEL.into(), "abc".into());
        labeled.spec.as_mut().unwrap().volumes = Some(vec![]);
        assert!(equal_ignore_hash(&template, &labeled));
        let mut changed = template.clone();
        changed.spec.as_mut().unwrap().containers[0].image = Some("i:2".into());
        assert!(!equal_ignore_hash(&template, &changed));
        assert_eq!(
            template_hash(&template, None),
            template_hash(&template, None)
        );
        assert_ne!(
            template_hash(&template, None),
            template_hash(&changed, None)
        );
        assert_ne!(
            template_hash(&template, None),
            template_hash(&template, Some(1))
        );
        assert!(template_hash(&template, None)
            .bytes()
            .all(|b| b"bcdfghjklmnpqrstvwxz2456789".contains(&b)));
    }

    #[test]
    fn scaling_shares_replicas_in_proportion() {
        // 4 replicas, surge 1: two active sets sized for 5 in all; scaled to 8 (+1 surge = 9).
        let mut d = deployment(8, rolling(json!(1), json!(1)));
        d.status = Some(DeploymentStatus {
            replicas: Some(5),
            ..Default::default()
        });
        let old = set("web-old", 3, 3, "2026-01-01T00:00:00Z");
        let new = set("web-new", 2, 0, "2026-01-02T00:00:00Z");
        let to_add = 9 - 5;
        let p_old = get_proportion(&old, &d, to_add, 0);
        let p_new = get_proportion(&new, &d, to_add, p_old);
        assert_eq!((p_old, p_new), (2, 2), "3*9/5 = 5.4 → 5; 2*9/5 = 3.6 → 4");
        let zero = deployment(0, rolling(json!(1), json!(1)));
        assert_eq!(get_proportion(&old, &zero, -5, 0), -3);
    }

    #[test]
    fn the_only_active_or_the_newest_set_takes_the_scale() {
        let old = set("web-old", 0, 0, "2026-01-01T00:00:00Z");
        let older = set("web-older", 0, 0, "2025-01-01T00:00:00Z");
        let new = set("web-new", 2, 2, "2026-01-02T00:00:00Z");
        let only = find_active_or_latest(Some(&new), std::slice::from_ref(&old)).unwrap();
        assert_eq!(only.name_any(), "web-new");
        let newest = find_active_or_latest(None, &[older.clone(), old.clone()]).unwrap();
        assert_eq!(newest.name_any(), "web-old");
        let active_old = set("web-old", 1, 1, "2026-01-01T00:00:00Z");
        assert!(find_active_or_latest(Some(&new), &[active_old]).is_none());
    }

    #[test]
    fn revisions_grow_and_remember_their_history() {
        let mut d = deployment(2, json!(null));
        d.metadata.annotations = Some(BTreeMap::from([
            ("team".to_string(), "db".to_string()),
            (REVISION_ANNOTATION.to_string(), "7".to_string()),
        ]));
        let mut new = set("web-new", 0, 0, "2026-01-02T00:00:00Z");
        new.metadata.annotations = None;
        assert!(set_new_rs_annotations(&d, &mut new, 1, false));
        let annotations = new.annotations();
        assert_eq!(annotations[REVISION_ANNOTATION], "1");
        assert_eq!(annotations["team"], "db");
        assert_eq!(annotations[DESIRED_REPLICAS_ANNOTATION], "2");
        assert_eq!(annotations[MAX_REPLICAS_ANNOTATION], "3");
        assert!(!set_new_rs_annotations(&d, &mut new, 1, true));
        // Rolled back to: revision 3, history "1".
        assert!(set_new_rs_annotations(&d, &mut new, 3, true));
        assert_eq!(new.annotations()[REVISION_ANNOTATION], "3");
        assert_eq!(new.annotations()[REVISION_HISTORY_ANNOTATION], "1");
    }

    #[test]
    fn status_reports_counts_and_conditions() {
        let d = deployment(4, rolling(json!(1), json!(1)));
        let old = set("web-old", 1, 1, "2026-01-01T00:00:00Z");
        let new = set("web-new", 4, 2, "2026-01-02T00:00:00Z");
        let status = sync_rollout_status(&[old.clone(), new.clone()], Some(&new), &d);
        assert_eq!(
            (
                status.replicas,
                status.updated_replicas,
                status.ready_replicas,
                status.available_replicas,
                status.unavailable_replicas,
                status.observed_generation
            ),
            (Some(5), Some(4), Some(3), Some(3), Some(2), Some(1))
        );
        let available = get_condition(Some(&status), "Available").unwrap();
        assert_eq!(
            (available.status.as_str(), available.reason.as_deref()),
            ("True", Some(MINIMUM_REPLICAS_AVAILABLE)),
            "3 available >= 4 - 1"
        );
        let progressing = get_condition(Some(&status), "Progressing").unwrap();
        assert_eq!(progressing.reason.as_deref(), Some(REPLICA_SET_UPDATED));

        let done = set("web-new", 4, 4, "2026-01-02T00:00:00Z");
        let status = sync_rollout_status(std::slice::from_ref(&done), Some(&done), &d);
        let progressing = get_condition(Some(&status), "Progressing").unwrap();
        assert_eq!(progressing.reason.as_deref(), Some(NEW_RS_AVAILABLE));
        assert!(deployment_complete(&d, Some(&status)));

        let down = set("web-new", 4, 1, "2026-01-02T00:00:00Z");
        let status = calculate_status(&[down], None, &d);
        let available = get_condition(Some(&status), "Available").unwrap();
        assert_eq!(available.status, "False");
    }

    #[test]
    fn status_patches_drop_zero_counters() {
        let status = DeploymentStatus {
            observed_generation: Some(3),
            replicas: Some(0),
            ..Default::default()
        };
        let patch = status_patch(&status);
        assert_eq!(patch["status"]["observedGeneration"], 3);
        assert!(patch["status"]["replicas"].is_null());
        assert!(patch["status"]["conditions"].is_null());
    }
}
