//! The control-plane stand-in: FedState's control plane ([`crate::fedstate`])
//! and Karmada ([`crate::karmada`], with the chart's own interpreter Lua,
//! [`crate::interpreter`]) over the lab's member clusters. See hack/lab/README.md
//! ("The control-plane stand-in") for the FedState file behind each behaviour.
//!
//! What a user applies is a `MultiCloudMongoDB` (a [`Submission`]); FedState's
//! webhook admits it; each pass runs FedState's handler chain over the
//! objects it keeps in the (simulated) Karmada API server, Karmada propagates
//! them to the member clusters, and FedState reads the ResourceBinding's
//! status back. A pass runs when the `MultiCloudMongoDB` is applied, right
//! after a pass that changed its status (its watch has no generation filter),
//! 15 s after an uneventful pass, and after a failed one with
//! controller-runtime's backoff (5 ms, doubling).
//!
//! There is no Karmada API server process: its objects live in this process,
//! shared by every [`ControlPlane`] over the same member clusters (the e2e tests
//! make several) until the lab shuts down. `lab up` serves them to the other
//! `lab` commands over a local socket ([`serve`], [`send`]).

use std::collections::{BTreeMap, HashMap};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::jiff::Timestamp;
use kube::{Api, Client};
use mongodb_member_operator::api::{MongoDB, ReplicaSetSettings};
use rand::rngs::StdRng;
use rand::SeedableRng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::fedstate::{self, ClusterWithReplicaset, Deviations, Handled, MultiCloudMongoDB, Pass};
use crate::interpreter::Interpreter;
use crate::karmada::{
    self, Bindings, ConfigMapTemplate, Kind, NodePorts, Objects, OverridePolicy, Overrider,
    ResourceBinding, ResourceRef,
};

/// FedState's reconciler requeues an uneventful pass after 15 s.
pub const REQUEUE_AFTER: Duration = Duration::from_secs(15);
/// How often the stand-in looks for a pass that is due.
const TICK: Duration = Duration::from_millis(100);
/// Lines of each instance's log kept for `lab status`.
const LOG_LINES: usize = 40;

/// One member cluster as the control plane sees it (a Karmada `Cluster` with
/// its `vip` label).
#[derive(Clone)]
pub struct MemberCluster {
    /// Cluster name (also its kubeconfig context).
    pub name: String,
    /// The cluster's VIP: every member it hosts is reachable at `VIP:nodePort`.
    pub vip: Ipv4Addr,
    /// Client for the cluster's API server.
    pub client: Client,
}

/// How many members each cluster hosts, e.g. `a=2,b=2,c=1`: FedState's
/// scheduler result (and the static weights of the MongoDB's policy).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Split(pub BTreeMap<String, u32>);

impl Split {
    /// Parses `cluster=count[,cluster=count…]`.
    pub fn parse(text: &str) -> Result<Split> {
        let mut counts = BTreeMap::new();
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (cluster, count) = part
                .split_once('=')
                .ok_or_else(|| anyhow!("split entry {part:?} is not cluster=count"))?;
            let count: u32 = count
                .trim()
                .parse()
                .with_context(|| format!("split entry {part:?}: count is not a number"))?;
            if counts.insert(cluster.trim().to_string(), count).is_some() {
                bail!("split names cluster {cluster:?} twice");
            }
        }
        if counts.is_empty() {
            bail!("empty split: expected cluster=count[,cluster=count…]");
        }
        Ok(Split(counts))
    }

    /// Members hosted by `cluster` (0 when not named).
    pub fn members_of(&self, cluster: &str) -> u32 {
        self.0.get(cluster).copied().unwrap_or(0)
    }

    /// Total members over all clusters.
    pub fn total(&self) -> u32 {
        self.0.values().sum()
    }

    /// The scheduler result: every named cluster, in name order.
    pub fn scheduler_result(&self) -> Vec<ClusterWithReplicaset> {
        self.0
            .iter()
            .map(|(cluster, count)| ClusterWithReplicaset {
                cluster: cluster.clone(),
                replicaset: *count as i32,
                arbiter: false,
            })
            .collect()
    }
}

/// The lab's shorthand for an instance: FedState's sample `MultiCloudMongoDB`
/// with this split and image, plus the lab-only replica-set timeouts.
#[derive(Clone, Debug)]
pub struct InstanceRequest {
    /// Instance name.
    pub name: String,
    /// Namespace, the same in every cluster.
    pub namespace: String,
    /// Members per cluster.
    pub split: Split,
    /// mongod image (`spec.imageSetting.image`); empty: FedState's default, `mongo:3.6`.
    pub image: String,
    /// Replica-set settings set by a lab-only OverridePolicy (not FedState's).
    pub settings: ReplicaSetSettings,
}

/// What the lab adds to FedState's objects. None of it is FedState's.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct LabOnly {
    /// An OverridePolicy `<name>-lab-replica-set-settings` setting
    /// `spec.replicaSetSettings` in every cluster (short timeouts for one
    /// machine; a user could add the same policy on a real Karmada).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replica_set_settings: Option<ReplicaSetSettings>,
    /// Departures from FedState's own code.
    #[serde(default)]
    pub deviations: Deviations,
}

/// What a user applies to the control plane: the `MultiCloudMongoDB`, the
/// data of the ConfigMap its `spec.config.configRef` names (created by the
/// user in the control plane), and the lab's additions.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct Submission {
    /// The `MultiCloudMongoDB` (its `rootPasswd` left out is generated by the webhook).
    pub object: MultiCloudMongoDB,
    /// Data of the `configRef` ConfigMap.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_config: Option<BTreeMap<String, String>>,
    /// Lab-only additions.
    #[serde(default)]
    pub lab: LabOnly,
}

impl Submission {
    /// With the lab-only correction of FedState's scale-up (see
    /// [`Deviations::keep_unchanged_clusters_on_scale_up`]).
    pub fn keep_unchanged_clusters_on_scale_up(mut self) -> Self {
        self.lab.deviations.keep_unchanged_clusters_on_scale_up = true;
        self
    }
}

/// Anything the control plane can be given.
pub trait ToSubmission {
    /// The submission.
    fn to_submission(&self) -> Submission;
}

impl ToSubmission for Submission {
    fn to_submission(&self) -> Submission {
        self.clone()
    }
}

impl ToSubmission for MultiCloudMongoDB {
    fn to_submission(&self) -> Submission {
        Submission {
            object: self.clone(),
            ..Default::default()
        }
    }
}

impl ToSubmission for InstanceRequest {
    fn to_submission(&self) -> Submission {
        let mut object = MultiCloudMongoDB::sample(&self.name, &self.namespace, &[]);
        object.scheduler_result.cluster_with_replicaset = self.split.scheduler_result();
        object.spec.replicaset = Some(self.split.total() as i32);
        object.spec.image_setting.image = self.image.clone();
        Submission {
            object,
            custom_config: None,
            lab: LabOnly {
                replica_set_settings: Some(self.settings.clone()),
                deviations: Deviations::default(),
            },
        }
    }
}

/// One instance: the `MultiCloudMongoDB`, its objects in the Karmada API
/// server, what Karmada propagated, and when its next pass is due.
struct Instance {
    object: MultiCloudMongoDB,
    objects: Objects,
    bindings: Bindings,
    deviations: Deviations,
    deleting: bool,
    due: Instant,
    failures: u32,
    log: Vec<String>,
}

impl Instance {
    fn note(&mut self, line: String) {
        self.log.push(line);
        if self.log.len() > LOG_LINES {
            self.log.remove(0);
        }
    }
}

struct State {
    instances: BTreeMap<(String, String), Instance>,
    rng: StdRng,
}

struct Shared {
    interpreter: std::result::Result<Interpreter, String>,
    state: tokio::sync::Mutex<State>,
}

/// The Karmada API servers of this process, by the member clusters they serve.
static FEDERATIONS: LazyLock<std::sync::Mutex<HashMap<String, Arc<Shared>>>> =
    LazyLock::new(Default::default);

/// Which Karmada API server serves `clusters`: their names and VIPs.
fn federation_key(clusters: &[MemberCluster]) -> String {
    clusters
        .iter()
        .map(|c| format!("{}={}", c.name, c.vip))
        .collect::<Vec<_>>()
        .join(",")
}

/// The control-plane stand-in over a set of member clusters.
#[derive(Clone)]
pub struct ControlPlane {
    clusters: Vec<MemberCluster>,
    shared: Arc<Shared>,
}

/// What the control plane knows of an instance, for `lab status`.
#[derive(Serialize, Deserialize, Clone, Debug)]
#[serde(rename_all = "camelCase")]
pub struct ControlPlaneView {
    /// The `MultiCloudMongoDB` with FedState's status (root password redacted).
    pub multicloudmongodb: MultiCloudMongoDB,
    /// The MongoDB's ResourceBinding, as FedState reads it.
    pub binding: Option<ResourceBinding>,
    /// The template's generation in the Karmada API server.
    pub template_generation: Option<i64>,
    /// The template's status: the chart's `AggregateStatus`.
    pub aggregated: Json,
    /// The last things the control plane did.
    pub log: Vec<String>,
}

impl ControlPlane {
    /// The control plane propagating to these clusters. Every `ControlPlane`
    /// over the same clusters (names and VIPs) shares one Karmada API server.
    pub fn new(clusters: Vec<MemberCluster>) -> Self {
        let shared = FEDERATIONS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(federation_key(&clusters))
            .or_insert_with(|| {
                Arc::new(Shared {
                    interpreter: Interpreter::from_checkout().map_err(|e| format!("{e:#}")),
                    state: tokio::sync::Mutex::new(State {
                        instances: BTreeMap::new(),
                        rng: StdRng::from_os_rng(),
                    }),
                })
            })
            .clone();
        ControlPlane { clusters, shared }
    }

    /// The Karmada API server of these clusters goes with the lab that made
    /// them: a control plane made over the same names and VIPs afterwards (a
    /// new lab with the same number, in the same process) starts empty.
    pub fn shut_down(self) {
        FEDERATIONS
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&federation_key(&self.clusters));
    }

    /// The member clusters.
    pub fn clusters(&self) -> &[MemberCluster] {
        &self.clusters
    }

    fn interpreter(&self) -> Result<&Interpreter> {
        self.shared
            .interpreter
            .as_ref()
            .map_err(|e| anyhow!("the chart's interpreter: {e}"))
    }

    fn vips(&self) -> BTreeMap<String, String> {
        self.clusters
            .iter()
            .map(|c| (c.name.clone(), c.vip.to_string()))
            .collect()
    }

    /// `kubectl apply` of a `MultiCloudMongoDB` to the control plane: FedState's
    /// webhook admits it (or refuses it: the error), then a pass runs. A pass
    /// that fails is logged; FedState retries it.
    pub async fn apply<T: ToSubmission + ?Sized>(&self, input: &T) -> Result<()> {
        let submission = input.to_submission();
        for entry in &submission.object.scheduler_result.cluster_with_replicaset {
            if !self.clusters.iter().any(|c| c.name == entry.cluster) {
                let known: Vec<&str> = self.clusters.iter().map(|c| c.name.as_str()).collect();
                bail!(
                    "the scheduler result names unknown cluster {:?} (clusters: {})",
                    entry.cluster,
                    known.join(", ")
                );
            }
        }
        let interpreter = self.interpreter()?.clone();
        let mut state = self.shared.state.lock().await;
        let key = (
            submission.object.namespace.clone(),
            submission.object.name.clone(),
        );
        let State { instances, rng } = &mut *state;
        let old = instances.get(&key).map(|i| &i.object);
        if old.is_some_and(|_| instances[&key].deleting) {
            bail!("MultiCloudMongoDB {}/{} is being deleted", key.0, key.1);
        }
        let admitted =
            fedstate::admit(submission.object, old, rng).map_err(|e| anyhow!("admission: {e}"))?;
        let instance = instances.entry(key.clone()).or_insert_with(|| Instance {
            object: admitted.clone(),
            objects: Objects::default(),
            bindings: Bindings::default(),
            deviations: Deviations::default(),
            deleting: false,
            due: Instant::now(),
            failures: 0,
            log: Vec::new(),
        });
        instance.object = admitted;
        instance.deviations = submission.lab.deviations.clone();
        let name = key.1.clone();
        let settings_policy = format!("{name}-lab-replica-set-settings");
        match &submission.lab.replica_set_settings {
            Some(settings) => {
                instance.objects.override_policies.insert(
                    settings_policy,
                    OverridePolicy {
                        labels: BTreeMap::from([("lab".to_string(), "true".to_string())]),
                        resource: ResourceRef::new(Kind::MongoDB, &name),
                        clusters: None,
                        overrider: Overrider::AddPath {
                            path: "/spec/replicaSetSettings".into(),
                            value: serde_json::to_value(settings)?,
                        },
                    },
                );
            }
            None => {
                instance.objects.override_policies.remove(&settings_policy);
            }
        }
        if let (Some(reference), Some(data)) = (
            instance.object.spec.config.config_ref.clone(),
            submission.custom_config,
        ) {
            instance.objects.config_maps.insert(
                reference,
                ConfigMapTemplate {
                    labels: BTreeMap::new(),
                    data,
                    user_owned: true,
                },
            );
        }
        self.pass(&mut state, &key, &interpreter).await;
        Ok(())
    }

    /// Changes the scheduler result (and the total, by default their sum) of an
    /// applied instance, as FedState's scheduler and a user would.
    pub async fn scale(
        &self,
        namespace: &str,
        name: &str,
        split: &Split,
        members: Option<i32>,
    ) -> Result<()> {
        let mut submission = {
            let state = self.shared.state.lock().await;
            let instance = state
                .instances
                .get(&(namespace.to_string(), name.to_string()))
                .ok_or_else(|| anyhow!("no MultiCloudMongoDB {namespace}/{name}"))?;
            Submission {
                object: instance.object.clone(),
                custom_config: None,
                lab: LabOnly {
                    replica_set_settings: lab_settings(&instance.objects, name),
                    deviations: instance.deviations.clone(),
                },
            }
        };
        submission.object.scheduler_result.cluster_with_replicaset = split.scheduler_result();
        submission.object.spec.replicaset = Some(members.unwrap_or(split.total() as i32));
        self.apply(&submission).await
    }

    /// `kubectl delete` of the `MultiCloudMongoDB`: FedState's finalizer deletes
    /// its objects in its order, then the garbage collector the rest; Karmada
    /// withdraws them from the member clusters (the operators then take their
    /// members out of the set).
    pub async fn delete(&self, namespace: &str, name: &str) -> Result<()> {
        let interpreter = self.interpreter()?.clone();
        let mut state = self.shared.state.lock().await;
        let key = (namespace.to_string(), name.to_string());
        let Some(instance) = state.instances.get_mut(&key) else {
            return Ok(());
        };
        instance.deleting = true;
        self.pass(&mut state, &key, &interpreter).await;
        Ok(())
    }

    /// Runs a pass of `namespace/name` now.
    pub async fn reconcile(&self, namespace: &str, name: &str) -> Result<()> {
        let interpreter = self.interpreter()?.clone();
        let mut state = self.shared.state.lock().await;
        self.pass(
            &mut state,
            &(namespace.to_string(), name.to_string()),
            &interpreter,
        )
        .await;
        Ok(())
    }

    /// `kubectl apply` of a user's own OverridePolicy `policy_name` to the
    /// Karmada API server, for a template of instance `namespace/name` (e.g.
    /// one cluster's `spec.replicaSetSettings`, or a member Service's selector
    /// in one cluster). Karmada renders the selected template again for every
    /// cluster it is propagated to and writes what changed; no FedState pass
    /// runs (FedState neither watches nor touches a policy it did not create).
    /// Policies apply in name order, a later one overriding an earlier one.
    pub async fn apply_override_policy(
        &self,
        namespace: &str,
        name: &str,
        policy_name: &str,
        policy: OverridePolicy,
    ) -> Result<()> {
        let interpreter = self.interpreter()?.clone();
        let mut state = self.shared.state.lock().await;
        let instance = state
            .instances
            .get_mut(&(namespace.to_string(), name.to_string()))
            .ok_or_else(|| anyhow!("no MultiCloudMongoDB {namespace}/{name}"))?;
        if !instance.objects.has_template(&policy.resource) {
            bail!(
                "OverridePolicy {policy_name}: {:?} {} is not a template of {name}",
                policy.resource.kind,
                policy.resource.name
            );
        }
        instance
            .objects
            .override_policies
            .insert(policy_name.to_string(), policy);
        let done = karmada::sync(
            &self.clusters,
            namespace,
            &instance.objects,
            &mut instance.bindings,
            &interpreter,
        )
        .await?;
        instance.note(format!("{name}: applied OverridePolicy {policy_name}"));
        for line in done {
            instance.note(format!("{name}: {line}"));
        }
        Ok(())
    }

    /// Waits until FedState's own status reports `namespace/name` as its
    /// scheduler result asks: state `Health`, and every cluster with members
    /// listed in `status.result` with that many members. Runs the passes that
    /// fall due meanwhile (with or without [`ControlPlane::run`]).
    ///
    /// What a FedState user checks before changing an instance: FedState
    /// decides scale-downs from this status, which an uneventful pass refreshes
    /// only every 15 s. Scaling a cluster to 0 while the status still holds the
    /// zeros of a set being created passes FedState's check at once, and its
    /// ScaleDownCleaner then finds no Service in use and deletes them all.
    pub async fn settled(&self, namespace: &str, name: &str, timeout: Duration) -> Result<()> {
        let interpreter = self.interpreter()?.clone();
        let key = (namespace.to_string(), name.to_string());
        let deadline = Instant::now() + timeout;
        loop {
            {
                let mut state = self.shared.state.lock().await;
                let Some(instance) = state.instances.get(&key) else {
                    bail!("no MultiCloudMongoDB {namespace}/{name}");
                };
                if instance.due <= Instant::now() {
                    self.pass(&mut state, &key, &interpreter).await;
                }
                let Some(instance) = state.instances.get(&key) else {
                    bail!("MultiCloudMongoDB {namespace}/{name} was deleted");
                };
                let status = &instance.object.status;
                let reported = |c: &ClusterWithReplicaset| {
                    status.result.iter().any(|r| {
                        r.cluster == c.cluster
                            && r.replicaset_status == Some(i64::from(c.replicaset))
                            && r.connect_addr_with_role
                                .values()
                                .filter(|role| *role != fedstate::ARBITER_ROLE)
                                .count()
                                == c.replicaset as usize
                    })
                };
                if status.state == "Health"
                    && instance
                        .object
                        .scheduler_result
                        .cluster_with_replicaset
                        .iter()
                        .filter(|c| c.replicaset > 0)
                        .all(reported)
                {
                    return Ok(());
                }
                if Instant::now() > deadline {
                    bail!(
                        "FedState's status of {name} did not settle within {timeout:?}: {}",
                        serde_json::to_string(status).unwrap_or_default()
                    );
                }
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// Runs the control plane for `namespace` (empty: every namespace) until
    /// the future is dropped: every pass that is due. `report` hears what each
    /// pass did.
    pub async fn run(self, namespace: String, report: impl Fn(&str)) {
        let interpreter = match self.interpreter() {
            Ok(interpreter) => interpreter.clone(),
            Err(error) => {
                report(&format!("{error:#}"));
                return;
            }
        };
        loop {
            {
                let mut state = self.shared.state.lock().await;
                let now = Instant::now();
                let due: Vec<(String, String)> = state
                    .instances
                    .iter()
                    .filter(|((ns, _), i)| {
                        (namespace.is_empty() || *ns == namespace) && i.due <= now
                    })
                    .map(|(k, _)| k.clone())
                    .collect();
                for key in due {
                    for line in self.pass(&mut state, &key, &interpreter).await {
                        report(&line);
                    }
                }
            }
            tokio::time::sleep(TICK).await;
        }
    }

    /// One pass of FedState's handler chain over `key`, with Karmada's
    /// propagation and the ResourceBinding read back. Returns what it did.
    async fn pass(
        &self,
        state: &mut State,
        key: &(String, String),
        interpreter: &Interpreter,
    ) -> Vec<String> {
        let mut ports = NodePorts {
            used: state
                .instances
                .values()
                .flat_map(|i| i.objects.services.values().map(|s| s.node_port))
                .collect(),
        };
        let State { instances, rng } = state;
        let Some(instance) = instances.get_mut(key) else {
            return Vec::new();
        };
        let (namespace, name) = key;
        let mut lines = Vec::new();
        let mut failed = None;
        if instance.deleting {
            // FedState's finalizer, then the garbage collector; Karmada after each.
            let mut deleted =
                fedstate::delete_external_resources(&instance.object, &mut instance.objects);
            for collect in [false, true] {
                if collect {
                    deleted.extend(fedstate::garbage_collect(&mut instance.objects));
                }
                match karmada::sync(
                    &self.clusters,
                    namespace,
                    &instance.objects,
                    &mut instance.bindings,
                    interpreter,
                )
                .await
                {
                    Ok(done) => deleted.extend(done),
                    Err(error) => {
                        failed = Some(format!("{error:#}"));
                        break;
                    }
                }
            }
            lines.extend(deleted.into_iter().map(|d| format!("{name}: {d}")));
            if failed.is_none() {
                // What stays propagated now (the user's configRef ConfigMap,
                // whose policy FedState deleted) stays in the member clusters.
                instances.remove(key);
                lines.push(format!("{name}: MultiCloudMongoDB deleted"));
                return lines;
            }
        } else {
            let now = Timestamp::now().to_string();
            let before = instance.object.status.clone();
            let vips = self.vips();
            let mut pass = Pass::new(
                &mut instance.object,
                &mut instance.objects,
                &mut ports,
                rng,
                &instance.deviations,
                now.clone(),
            );
            let handled = pass.handle(&vips);
            let suspended = pass.suspend();
            let synced = karmada::sync(
                &self.clusters,
                namespace,
                &instance.objects,
                &mut instance.bindings,
                interpreter,
            )
            .await;
            let binding = if matches!(handled, Ok(Handled::ReadStatus)) && synced.is_ok() {
                Some(
                    karmada::read_binding(
                        &self.clusters,
                        namespace,
                        name,
                        &mut instance.bindings,
                        interpreter,
                    )
                    .await
                    .map_err(|e| format!("reading the ResourceBinding: {e:#}")),
                )
            } else {
                None
            };
            let mut pass = Pass::resume(
                &mut instance.object,
                &mut instance.objects,
                &mut ports,
                rng,
                &instance.deviations,
                now,
                suspended,
            );
            let mut outcome = handled.map(drop);
            if let Some(binding) = &binding {
                outcome = match binding {
                    Ok(binding) => pass.status(Some(binding)),
                    Err(error) => Err(error.clone()),
                };
            }
            pass.finish();
            let log = pass.suspend().log;
            lines.extend(log.into_iter().map(|l| format!("{name}: {l}")));
            match synced {
                Ok(done) => lines.extend(done.into_iter().map(|d| format!("{name}: {d}"))),
                Err(error) => failed = Some(format!("Karmada: {error:#}")),
            }
            if let Err(error) = outcome {
                failed.get_or_insert(format!("FedState: {error}"));
            }
            if let Some(Ok(binding)) = binding {
                if let Some(template) = instance.objects.mongodbs.get_mut(name) {
                    match karmada::aggregate(namespace, name, template, &binding, interpreter) {
                        Ok(status) => template.status = status,
                        Err(error) => {
                            failed.get_or_insert(format!("AggregateStatus: {error:#}"));
                        }
                    }
                }
            }
            if instance.object.status != before && failed.is_none() {
                instance.failures = 0;
                instance.due = Instant::now();
                for line in &lines {
                    instance.note(line.clone());
                }
                Self::trace(&lines, &instance.object.status);
                return lines;
            }
        }
        match &failed {
            Some(error) => {
                let backoff = Duration::from_millis(5)
                    .saturating_mul(1 << instance.failures.min(18))
                    .min(Duration::from_secs(1000));
                instance.failures += 1;
                instance.due = Instant::now() + backoff;
                lines.push(format!(
                    "{name}: pass failed ({error}); next in {backoff:?}"
                ));
                tracing::warn!(instance = %name, %error, "control-plane pass failed");
            }
            None => {
                instance.failures = 0;
                instance.due = Instant::now() + REQUEUE_AFTER;
            }
        }
        for line in &lines {
            instance.note(line.clone());
        }
        Self::trace(&lines, &instance.object.status);
        lines
    }

    /// Appends a pass's lines to the file `LAB_CONTROL_PLANE_LOG` names, if set
    /// (the e2e tests discard what `run` reports).
    fn trace(lines: &[String], status: &fedstate::MultiCloudMongoDBStatus) {
        let Ok(path) = std::env::var("LAB_CONTROL_PLANE_LOG") else {
            return;
        };
        use std::io::Write;
        if let Ok(mut file) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let now = Timestamp::now();
            for line in lines {
                let _ = writeln!(file, "{now} {line}");
            }
            let _ = writeln!(
                file,
                "{now} status {}",
                serde_json::to_string(status).unwrap_or_default()
            );
        }
    }

    /// The `MongoDB` object of each cluster that holds one.
    pub async fn statuses(&self, namespace: &str, name: &str) -> Result<Vec<(String, MongoDB)>> {
        let mut found = Vec::new();
        for cluster in &self.clusters {
            let api: Api<MongoDB> = Api::namespaced(cluster.client.clone(), namespace);
            if let Some(mongodb) = api.get_opt(name).await? {
                found.push((cluster.name.clone(), mongodb));
            }
        }
        Ok(found)
    }

    /// The applied `MultiCloudMongoDB` (with FedState's status), if any.
    pub async fn multicloudmongodb(
        &self,
        namespace: &str,
        name: &str,
    ) -> Option<MultiCloudMongoDB> {
        let state = self.shared.state.lock().await;
        state
            .instances
            .get(&(namespace.to_string(), name.to_string()))
            .map(|i| i.object.clone())
    }

    /// The root password FedState's webhook generated (or the user gave).
    pub async fn root_password(&self, namespace: &str, name: &str) -> Option<String> {
        self.multicloudmongodb(namespace, name)
            .await?
            .root_password()
            .map(str::to_string)
    }

    /// What the control plane knows of `namespace/name`: FedState's status,
    /// the ResourceBinding (read now) and the aggregated status.
    pub async fn view(&self, namespace: &str, name: &str) -> Result<ControlPlaneView> {
        let interpreter = self.interpreter()?.clone();
        let mut state = self.shared.state.lock().await;
        let instance = state
            .instances
            .get_mut(&(namespace.to_string(), name.to_string()))
            .ok_or_else(|| anyhow!("no MultiCloudMongoDB {namespace}/{name}"))?;
        let binding = if instance.objects.mongodbs.contains_key(name) {
            Some(
                karmada::read_binding(
                    &self.clusters,
                    namespace,
                    name,
                    &mut instance.bindings,
                    &interpreter,
                )
                .await?,
            )
        } else {
            None
        };
        let template = instance.objects.mongodbs.get(name);
        let aggregated = match (template, &binding) {
            (Some(template), Some(binding)) => {
                karmada::aggregate(namespace, name, template, binding, &interpreter)?
            }
            _ => Json::Null,
        };
        let mut object = instance.object.clone();
        if object.spec.auth.root_passwd.is_some() {
            object.spec.auth.root_passwd = Some("(redacted)".into());
        }
        Ok(ControlPlaneView {
            multicloudmongodb: object,
            binding,
            template_generation: template.map(|t| t.generation),
            aggregated,
            log: instance.log.clone(),
        })
    }
}

fn lab_settings(objects: &Objects, name: &str) -> Option<ReplicaSetSettings> {
    match &objects
        .override_policies
        .get(&format!("{name}-lab-replica-set-settings"))?
        .overrider
    {
        Overrider::AddPath { value, .. } => serde_json::from_value(value.clone()).ok(),
        Overrider::AddLabels(_) => None,
    }
}

/// The lab's replica-set timeouts for one machine (set by a lab-only
/// OverridePolicy; MongoDB's defaults are 10 s elections and 2 s heartbeats).
pub fn lab_replica_set_settings() -> ReplicaSetSettings {
    ReplicaSetSettings {
        election_timeout_millis: 2_000,
        heartbeat_interval_millis: 500,
        catch_up_timeout_millis: -1,
        chaining_allowed: true,
    }
}

/// `lab status`'s view of the control plane.
pub fn describe(view: &ControlPlaneView) -> String {
    let object = &view.multicloudmongodb;
    let status = &object.status;
    let mut out = format!(
        "MultiCloudMongoDB {} (FedState): state {}, replicaset {}, image {}\n",
        object.name,
        or_dash(&status.state),
        object.spec.replicaset.unwrap_or_default(),
        or_dash(&object.spec.image_setting.image),
    );
    out.push_str(&format!(
        "  externalAddr {}\n",
        or_dash(&status.external_addr)
    ));
    out.push_str(&format!(
        "  {:<8} {:>4} {:>6} {:<12} {:<7}  {}\n",
        "CLUSTER", "SPEC", "STATUS", "STATE", "APPLIED", "CONNECT ADDRESSES"
    ));
    for result in &status.result {
        let addresses: Vec<String> = result
            .connect_addr_with_role
            .iter()
            .map(|(a, r)| format!("{a}={r}"))
            .collect();
        out.push_str(&format!(
            "  {:<8} {:>4} {:>6} {:<12} {:<7}  {}\n",
            result.cluster,
            result.replicaset_spec.unwrap_or_default(),
            result.replicaset_status.unwrap_or_default(),
            or_dash(&result.state),
            result.applied,
            if addresses.is_empty() {
                "-".to_string()
            } else {
                addresses.join(" ")
            }
        ));
    }
    for condition in &status.conditions {
        out.push_str(&format!(
            "  condition {}={} {}: {}\n",
            condition.type_, condition.status, condition.reason, condition.message
        ));
    }
    if let Some(binding) = &view.binding {
        out.push_str(&format!(
            "ResourceBinding {} (Karmada; ReflectStatus and InterpretHealth from the chart):\n",
            binding.name
        ));
        out.push_str(&format!(
            "  {:<8} {:>5} {:<9} {:<12} {:>6} {:>7}  {}\n",
            "CLUSTER", "SHARE", "HEALTH", "STATE", "READY", "CURRENT", "PRIMARY"
        ));
        for item in &binding.aggregated_status {
            let share = binding
                .clusters
                .iter()
                .find(|c| c.name == item.cluster_name)
                .map(|c| c.replicas)
                .unwrap_or_default();
            let s = item.status.clone().unwrap_or(Json::Null);
            out.push_str(&format!(
                "  {:<8} {:>5} {:<9} {:<12} {:>6} {:>7}  {}\n",
                item.cluster_name,
                share,
                item.health,
                s["state"].as_str().unwrap_or("-"),
                s["readyMembers"].as_str().unwrap_or("-"),
                s["currentInfo"]["members"]
                    .as_i64()
                    .map(|n| n.to_string())
                    .unwrap_or_else(|| "-".into()),
                s["primary"].as_str().unwrap_or("-"),
            ));
        }
    }
    if !view.aggregated.is_null() {
        let a = &view.aggregated;
        out.push_str(&format!(
            "MongoDB template (AggregateStatus from the chart): state {}, readyMembers {}, members {}, primary {}, observedGeneration {}/{}\n",
            a["state"].as_str().unwrap_or("-"),
            a["readyMembers"].as_str().unwrap_or("-"),
            a["currentInfo"]["members"].as_i64().map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
            a["primary"].as_str().unwrap_or("-"),
            a["observedGeneration"].as_i64().map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
            view.template_generation.map(|n| n.to_string()).unwrap_or_else(|| "-".into()),
        ));
    }
    out
}

fn or_dash(text: &str) -> &str {
    if text.is_empty() {
        "-"
    } else {
        text
    }
}

/// A request to the control plane of a running `lab up`.
#[derive(Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase")]
pub enum Request {
    /// Apply a `MultiCloudMongoDB`.
    Apply(Box<Submission>),
    /// Change an instance's split (and total).
    Scale {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// Members per cluster.
        split: BTreeMap<String, u32>,
        /// Total members (default: the split's sum).
        members: Option<i32>,
    },
    /// Delete an instance.
    Delete {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
    /// A user's own OverridePolicy (`lab override`): applied with
    /// [`ControlPlane::apply_override_policy`], replacing one of that name.
    OverridePolicy {
        /// Namespace.
        namespace: String,
        /// The instance.
        name: String,
        /// The policy's name.
        policy_name: String,
        /// The policy.
        policy: OverridePolicy,
    },
    /// The control plane's view of an instance.
    View {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
    },
}

/// Serves [`Request`]s (one JSON line per connection) on `127.n.0.1` until the
/// future is dropped; writes the address to `state_dir/control-plane`.
pub async fn serve(control_plane: ControlPlane, number: u8, state_dir: &Path) -> Result<()> {
    let listener =
        TcpListener::bind(SocketAddr::from((Ipv4Addr::new(127, number, 0, 1), 0))).await?;
    std::fs::write(
        state_dir.join("control-plane"),
        listener.local_addr()?.to_string(),
    )?;
    loop {
        let (stream, _) = listener.accept().await?;
        let control_plane = control_plane.clone();
        tokio::spawn(async move {
            let (read, mut write) = stream.into_split();
            let mut line = String::new();
            if BufReader::new(read).read_line(&mut line).await.is_err() {
                return;
            }
            let reply = match answer(&control_plane, &line).await {
                Ok(value) => json!({ "ok": value }),
                Err(error) => json!({ "error": format!("{error:#}") }),
            };
            let _ = write.write_all(format!("{reply}\n").as_bytes()).await;
        });
    }
}

async fn answer(control_plane: &ControlPlane, line: &str) -> Result<Json> {
    let request: Request = serde_json::from_str(line).context("not a control-plane request")?;
    Ok(match request {
        Request::Apply(submission) => {
            control_plane.apply(submission.as_ref()).await?;
            json!(format!(
                "applied MultiCloudMongoDB {}",
                submission.object.name
            ))
        }
        Request::Scale {
            namespace,
            name,
            split,
            members,
        } => {
            control_plane
                .scale(&namespace, &name, &Split(split), members)
                .await?;
            json!(format!("scaled MultiCloudMongoDB {name}"))
        }
        Request::Delete { namespace, name } => {
            control_plane.delete(&namespace, &name).await?;
            json!(format!("deleting MultiCloudMongoDB {name}"))
        }
        Request::OverridePolicy {
            namespace,
            name,
            policy_name,
            policy,
        } => {
            control_plane
                .apply_override_policy(&namespace, &name, &policy_name, policy)
                .await?;
            json!(format!("applied OverridePolicy {policy_name} to {name}"))
        }
        Request::View { namespace, name } => {
            serde_json::to_value(control_plane.view(&namespace, &name).await?)?
        }
    })
}

/// Sends one request to a running `lab up` and returns its answer.
pub async fn send(state_dir: &Path, request: &Request) -> Result<Json> {
    let path = state_dir.join("control-plane");
    let address = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (is `lab up` running?)", path.display()))?;
    let mut stream =
        tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(address.trim())).await??;
    stream
        .write_all(format!("{}\n", serde_json::to_string(request)?).as_bytes())
        .await?;
    let mut reply = String::new();
    tokio::time::timeout(
        Duration::from_secs(120),
        BufReader::new(stream).read_line(&mut reply),
    )
    .await??;
    let mut reply: Json = serde_json::from_str(&reply).context("the control plane's reply")?;
    if let Some(error) = reply.get("error").and_then(Json::as_str) {
        bail!("{error}");
    }
    Ok(reply["ok"].take())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_parses_counts_per_cluster() {
        let split = Split::parse("a=2, b=2,c=1").unwrap();
        assert_eq!(split.members_of("a"), 2);
        assert_eq!(split.members_of("c"), 1);
        assert_eq!(split.members_of("d"), 0);
        assert_eq!(split.total(), 5);
    }

    #[test]
    fn split_refuses_malformed_entries() {
        assert!(Split::parse("").is_err());
        assert!(Split::parse("a").is_err());
        assert!(Split::parse("a=x").is_err());
        assert!(Split::parse("a=1,a=2").is_err());
    }

    #[test]
    fn an_instance_request_is_fedstates_sample_with_the_split_and_the_lab_timeouts() {
        let request = InstanceRequest {
            name: "demo".into(),
            namespace: "default".into(),
            split: Split::parse("a=2,b=2,c=0").unwrap(),
            image: "mongo:7.0".into(),
            settings: lab_replica_set_settings(),
        };
        let submission = request.to_submission();
        assert_eq!(submission.object.spec.replicaset, Some(4));
        assert_eq!(
            submission.object.scheduler_annotation(),
            r#"{"ClusterWithReplicaset":[{"cluster":"a","replicaset":2},{"cluster":"b","replicaset":2},{"cluster":"c","replicaset":0}]}"#
        );
        assert_eq!(submission.object.spec.image_setting.image, "mongo:7.0");
        assert_eq!(
            submission.object.root_password(),
            None,
            "left to the webhook"
        );
        assert_eq!(
            submission.lab.replica_set_settings,
            Some(lab_replica_set_settings())
        );
    }
}
