//! The control-plane stand-in: FedState's control plane ([`crate::fedstate`])
//! and Karmada ([`crate::karmada`], with the chart's own interpreter Lua,
//! [`crate::interpreter`]) over the lab's member clusters. This crate's
//! README.md names the FedState or Karmada file behind each behaviour.
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

mod pass;
mod socket;
mod submission;
mod view;

use std::collections::{BTreeMap, HashMap};
use std::net::Ipv4Addr;
use std::sync::{Arc, LazyLock};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use kube::{Api, Client};
use mongodb_member_operator::api::MongoDB;
use rand::rngs::StdRng;
use rand::SeedableRng;

use crate::fedstate::{self, ClusterWithReplicaset, Deviations, MultiCloudMongoDB};
use crate::interpreter::Interpreter;
use crate::karmada::{
    self, Bindings, ConfigMapTemplate, Kind, Objects, OverridePolicy, Overrider, ResourceRef,
};

pub use socket::{send, serve, Request};
pub use submission::{
    lab_replica_set_settings, InstanceRequest, LabOnly, Split, Submission, ToSubmission,
};
pub use view::{describe, ControlPlaneView};

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
        let lab_overrides = [
            (
                "replica-set-settings",
                "/spec/replicaSetSettings",
                submission
                    .lab
                    .replica_set_settings
                    .as_ref()
                    .map(serde_json::to_value)
                    .transpose()?,
            ),
            ("tls", "/spec/tls", submission.lab.tls.clone()),
        ];
        for (policy, path, value) in lab_overrides {
            let policy_name = format!("{name}-lab-{policy}");
            let Some(value) = value else {
                instance.objects.override_policies.remove(&policy_name);
                continue;
            };
            instance.objects.override_policies.insert(
                policy_name,
                OverridePolicy {
                    labels: BTreeMap::from([("lab".to_string(), "true".to_string())]),
                    resource: ResourceRef::new(Kind::MongoDB, &name),
                    clusters: None,
                    overrider: Overrider::AddPath {
                        path: path.into(),
                        value,
                    },
                },
            );
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
                    replica_set_settings: lab_override(
                        &instance.objects,
                        name,
                        "replica-set-settings",
                    )
                    .and_then(|value| serde_json::from_value(value).ok()),
                    tls: lab_override(&instance.objects, name, "tls"),
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
}

fn lab_override(objects: &Objects, name: &str, policy: &str) -> Option<serde_json::Value> {
    match &objects
        .override_policies
        .get(&format!("{name}-lab-{policy}"))?
        .overrider
    {
        Overrider::AddPath { value, .. } => Some(value.clone()),
        Overrider::AddLabels(_) => None,
    }
}
