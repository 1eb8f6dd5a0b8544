//! One pod's life on the node, as the kubelet's pod worker drives it: binding,
//! init containers in order, then the containers, restarts per `restartPolicy`
//! with crash-loop back-off, probes, running containers' Secret and ConfigMap
//! volumes kept current ([`super::refresh`]), status (`phase`, conditions,
//! container statuses) and, when the pod is deleted, stopping the containers
//! within the grace period before removing the pod object.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use k8s_openapi::api::core::v1::{
    Binding, Container, ContainerState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, HostIP, ObjectReference, Pod, PodCondition, PodIP,
    PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::{Api, Client, Resource, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use super::probe::{ProbeState, ProbeVerdict};
use super::refresh::{self, RefreshableMount, VolumeRefresh};
use super::resolve::Resolver;
use crate::api_errors::{is_gone, is_status};
use crate::cache::Cache;
use crate::events::EventSink;
use crate::runtime::{ContainerExit, ContainerRuntime, RunningContainer};
use crate::RestartBackoff;

/// How often a container whose configuration cannot be resolved is retried.
const CONFIG_RETRY: Duration = Duration::from_secs(2);
/// How long the worker waits for containers beyond their grace period.
const STOP_SLACK: Duration = Duration::from_secs(5);

/// What every pod worker of a node shares.
pub struct WorkerContext {
    /// API client.
    pub client: Client,
    /// Runs containers.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// The node's name.
    pub node_name: String,
    /// The node's address (the cluster VIP), reported as the pod's hostIP.
    pub node_ip: Ipv4Addr,
    /// Events reported as `kubelet`.
    pub events: EventSink,
    /// Events reported as `default-scheduler`.
    pub scheduler_events: EventSink,
    /// Crash-loop back-off.
    pub backoff: RestartBackoff,
    /// How often running containers' Secret and ConfigMap volumes are refreshed.
    pub volume_sync_period: Duration,
    /// The watch caches the refresh reads.
    pub cache: Cache,
}

/// Requests to a running pod worker.
pub enum WorkerCommand {
    /// Kill one container abruptly (fault injection); it restarts per policy.
    KillContainer {
        /// Container name.
        name: String,
        /// Whether a running container of that name was killed.
        reply: oneshot::Sender<anyhow::Result<()>>,
    },
    /// The node lost power: stop every container now and write nothing.
    PowerOff,
}

/// Why a worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkerOutcome {
    /// The pod is gone or finished for good.
    Finished,
    /// The worker stopped before the pod was done (the node lost power, or the
    /// API server refused a binding or the final removal): the kubelet starts a
    /// new worker for the pod at a later sync.
    Interrupted,
}

/// One container of the pod and what the kubelet knows about it.
struct Slot {
    spec: Container,
    init: bool,
    running: Option<Arc<dyn RunningContainer>>,
    instance: u64,
    has_run: bool,
    completed: bool,
    restart_count: i32,
    state: ContainerState,
    last_state: Option<ContainerState>,
    container_id: Option<String>,
    started_at: Option<Timestamp>,
    ready: bool,
    started: bool,
    startup: Option<ProbeState>,
    readiness: Option<ProbeState>,
    liveness: Option<ProbeState>,
    restart_at: Instant,
    backoff: Option<Duration>,
    exit_override: Option<ContainerExit>,
    volumes: Vec<RefreshableMount>,
}

impl Slot {
    fn new(
        spec: Container,
        init: bool,
        waiting_reason: &str,
        previous: Option<&ContainerStatus>,
    ) -> Self {
        Slot {
            spec,
            init,
            running: None,
            instance: 0,
            has_run: previous.is_some_and(|p| p.container_id.is_some()),
            completed: false,
            restart_count: previous.map(|p| p.restart_count).unwrap_or(0),
            state: waiting(waiting_reason, None),
            last_state: previous.and_then(|p| p.last_state.clone()),
            container_id: None,
            started_at: None,
            ready: false,
            started: false,
            startup: None,
            readiness: None,
            liveness: None,
            restart_at: Instant::now(),
            backoff: None,
            exit_override: None,
            volumes: Vec::new(),
        }
    }

    fn status(&self) -> ContainerStatus {
        let image = self.spec.image.clone().unwrap_or_default();
        ContainerStatus {
            name: self.spec.name.clone(),
            image_id: format!("sim://{image}"),
            image,
            container_id: self.container_id.clone(),
            ready: self.ready,
            started: Some(self.running.is_some() && self.started),
            restart_count: self.restart_count,
            state: Some(self.state.clone()),
            last_state: self.last_state.clone(),
            ..Default::default()
        }
    }

    fn next_probe(&self) -> Option<Instant> {
        self.running.as_ref()?;
        [&self.startup, &self.readiness, &self.liveness]
            .into_iter()
            .flatten()
            .map(|p| p.next_run)
            .min()
    }
}

fn waiting(reason: &str, message: Option<String>) -> ContainerState {
    ContainerState {
        waiting: Some(ContainerStateWaiting {
            reason: Some(reason.into()),
            message,
        }),
        ..Default::default()
    }
}

fn now() -> Time {
    Time(Timestamp::now())
}

/// Drives one pod.
pub struct PodWorker {
    ctx: Arc<WorkerContext>,
    pod: Arc<Pod>,
    pod_ip: Ipv4Addr,
    updates: watch::Receiver<Option<Arc<Pod>>>,
    commands: mpsc::Receiver<WorkerCommand>,
    exits_tx: mpsc::UnboundedSender<(usize, u64, ContainerExit)>,
    exits: mpsc::UnboundedReceiver<(usize, u64, ContainerExit)>,
    tasks: JoinSet<()>,
    slots: Vec<Slot>,
    start_time: Time,
    init_failed: bool,
    last_written: Option<serde_json::Value>,
    refresh: VolumeRefresh,
}

impl PodWorker {
    /// A worker for `pod` at `pod_ip`, following `updates` (None: the pod is gone) and obeying `commands`.
    pub fn new(
        ctx: Arc<WorkerContext>,
        pod: Arc<Pod>,
        pod_ip: Ipv4Addr,
        updates: watch::Receiver<Option<Arc<Pod>>>,
        commands: mpsc::Receiver<WorkerCommand>,
    ) -> Self {
        let spec = pod.spec.clone().unwrap_or_default();
        let status = pod.status.clone().unwrap_or_default();
        let previous = |list: &Option<Vec<ContainerStatus>>, name: &str| {
            list.iter().flatten().find(|s| s.name == name).cloned()
        };
        let mut slots = Vec::new();
        for c in spec.init_containers.unwrap_or_default() {
            let prev = previous(&status.init_container_statuses, &c.name);
            slots.push(Slot::new(c, true, "PodInitializing", prev.as_ref()));
        }
        let has_init = !slots.is_empty();
        for c in spec.containers {
            let prev = previous(&status.container_statuses, &c.name);
            slots.push(Slot::new(
                c,
                false,
                if has_init {
                    "PodInitializing"
                } else {
                    "ContainerCreating"
                },
                prev.as_ref(),
            ));
        }
        let (exits_tx, exits) = mpsc::unbounded_channel();
        let start_time = status.start_time.clone().unwrap_or_else(now);
        PodWorker {
            refresh: VolumeRefresh::new(ctx.volume_sync_period),
            ctx,
            pod,
            pod_ip,
            updates,
            commands,
            exits_tx,
            exits,
            tasks: JoinSet::new(),
            slots,
            start_time,
            init_failed: false,
            last_written: None,
        }
    }

    fn api(&self) -> Api<Pod> {
        Api::namespaced(
            self.ctx.client.clone(),
            &self.pod.namespace().unwrap_or_default(),
        )
    }

    fn restart_policy(&self) -> &str {
        self.pod
            .spec
            .as_ref()
            .and_then(|s| s.restart_policy.as_deref())
            .unwrap_or("Always")
    }

    fn grace_period(&self) -> Duration {
        let seconds = self
            .pod
            .metadata
            .deletion_grace_period_seconds
            .or_else(|| {
                self.pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.termination_grace_period_seconds)
            })
            .unwrap_or(30);
        Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
    }

    fn reference(&self) -> ObjectReference {
        self.pod.object_ref(&())
    }

    fn field_reference(&self, container: &str, init: bool) -> ObjectReference {
        let list = if init { "initContainers" } else { "containers" };
        ObjectReference {
            field_path: Some(format!("spec.{list}{{{container}}}")),
            ..self.reference()
        }
    }

    /// Runs the pod until it is deleted, finishes, or the node powers off.
    pub async fn run(mut self) -> WorkerOutcome {
        if self.pod.metadata.deletion_timestamp.is_some() {
            return self.terminate_and_remove().await;
        }
        match self.bind().await {
            Ok(true) => {}
            Ok(false) => return WorkerOutcome::Finished,
            Err(error) => {
                tracing::warn!(pod = %self.pod.name_any(), %error, "could not bind pod");
                return WorkerOutcome::Interrupted;
            }
        }
        loop {
            self.start_due_containers().await;
            self.write_status().await;
            if self.is_terminal() {
                return WorkerOutcome::Finished;
            }
            let wake = self.next_wake();
            tokio::select! {
                command = self.commands.recv() => match command {
                    Some(WorkerCommand::KillContainer { name, reply }) => {
                        let _ = reply.send(self.kill(&name));
                    }
                    Some(WorkerCommand::PowerOff) | None => {
                        self.power_off().await;
                        return WorkerOutcome::Interrupted;
                    }
                },
                changed = self.updates.changed() => {
                    if changed.is_err() {
                        self.power_off().await;
                        return WorkerOutcome::Interrupted;
                    }
                    let latest = self.updates.borrow_and_update().clone();
                    match latest {
                        None => {
                            self.stop_all().await;
                            return WorkerOutcome::Finished;
                        }
                        Some(pod) => {
                            self.pod = pod;
                            if self.pod.metadata.deletion_timestamp.is_some() {
                                return self.terminate_and_remove().await;
                            }
                        }
                    }
                }
                Some((index, instance, exit)) = self.exits.recv() => self.on_exit(index, instance, exit),
                _ = tokio::time::sleep_until(wake) => self.run_due_probes().await,
                _ = tokio::time::sleep_until(self.refresh.due()) => {
                    let running = self.slots.iter().filter(|s| s.running.is_some());
                    let mounts: Vec<&RefreshableMount> = running.flat_map(|s| &s.volumes).collect();
                    self.refresh.run(&self.ctx.client, &self.ctx.cache, &self.pod, &mounts).await;
                }
            }
            while self.tasks.try_join_next().is_some() {}
        }
    }

    /// Assigns the pod to this node (the scheduler's binding). False if the pod is gone.
    async fn bind(&mut self) -> Result<bool, kube::Error> {
        if self
            .pod
            .spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_some_and(|n| !n.is_empty())
        {
            return Ok(true);
        }
        let name = self.pod.name_any();
        let namespace = self.pod.namespace().unwrap_or_default();
        let binding = Binding {
            metadata: ObjectMeta {
                name: Some(name.clone()),
                namespace: Some(namespace.clone()),
                uid: self.pod.uid(),
                ..Default::default()
            },
            target: ObjectReference {
                api_version: Some("v1".into()),
                kind: Some("Node".into()),
                name: Some(self.ctx.node_name.clone()),
                ..Default::default()
            },
        };
        let api = self.api();
        let bound = match api
            .create_subresource::<_, serde_json::Value>(
                "binding",
                &name,
                &PostParams::default(),
                &binding,
            )
            .await
        {
            Ok(_) => Ok(()),
            // An API server without the binding subresource: set the field directly.
            Err(_) => api
                .patch(
                    &name,
                    &PatchParams::default(),
                    &Patch::Merge(json!({ "spec": { "nodeName": self.ctx.node_name } })),
                )
                .await
                .map(|_| ()),
        };
        match bound {
            Ok(()) => {
                self.ctx.scheduler_events.normal(
                    self.reference(),
                    "Scheduled",
                    "Binding",
                    format!(
                        "Successfully assigned {namespace}/{name} to {}",
                        self.ctx.node_name
                    ),
                );
                Ok(true)
            }
            Err(error) if is_status(&error, 404) => Ok(false),
            Err(error) => Err(error),
        }
    }

    fn init_done(&self) -> bool {
        self.slots.iter().filter(|s| s.init).all(|s| s.completed)
    }

    async fn start_due_containers(&mut self) {
        if self.init_failed {
            return;
        }
        let now = Instant::now();
        let due: Vec<usize> = if !self.init_done() {
            self.slots
                .iter()
                .position(|s| s.init && !s.completed)
                .filter(|i| self.slots[*i].running.is_none())
                .into_iter()
                .collect()
        } else {
            (0..self.slots.len())
                .filter(|i| {
                    !self.slots[*i].init
                        && !self.slots[*i].completed
                        && self.slots[*i].running.is_none()
                })
                .collect()
        };
        for index in due {
            if self.slots[index].restart_at <= now {
                self.start_container(index).await;
            }
        }
    }

    async fn start_container(&mut self, index: usize) {
        let spec = self.slots[index].spec.clone();
        let init = self.slots[index].init;
        let image = spec.image.clone().unwrap_or_default();
        let reference = self.field_reference(&spec.name, init);
        let resolved = Resolver::new(&self.ctx.client, &self.pod)
            .resolve(&spec, init, self.pod_ip, self.ctx.node_ip)
            .await;
        let resolved = match resolved {
            Ok(resolved) => resolved,
            Err(error) => {
                let message = format!("{error:#}");
                let slot = &mut self.slots[index];
                if slot
                    .state
                    .waiting
                    .as_ref()
                    .and_then(|w| w.message.as_deref())
                    != Some(message.as_str())
                {
                    self.ctx.events.warning(
                        reference,
                        "Failed",
                        "StartContainer",
                        format!("Error: {message}"),
                    );
                }
                slot.state = waiting("CreateContainerConfigError", Some(message));
                slot.restart_at = Instant::now() + CONFIG_RETRY;
                return;
            }
        };
        self.ctx.events.normal(
            reference.clone(),
            "Pulled",
            "PullImage",
            format!("Container image \"{image}\" already present on machine"),
        );
        let volumes = refresh::refreshable(&resolved);
        match self.ctx.runtime.start(resolved).await {
            Ok(container) => {
                let container: Arc<dyn RunningContainer> = Arc::from(container);
                self.ctx.events.normal(
                    reference.clone(),
                    "Created",
                    "CreateContainer",
                    format!("Created container: {}", spec.name),
                );
                self.ctx.events.normal(
                    reference,
                    "Started",
                    "StartContainer",
                    format!("Started container {}", spec.name),
                );
                let slot = &mut self.slots[index];
                if slot.has_run {
                    slot.restart_count += 1;
                }
                slot.has_run = true;
                slot.instance += 1;
                let started_at = Timestamp::now();
                slot.started_at = Some(started_at);
                slot.container_id = Some(format!(
                    "sim://{}-{}-{}",
                    self.pod.uid().unwrap_or_default(),
                    spec.name,
                    slot.instance
                ));
                slot.state = ContainerState {
                    running: Some(ContainerStateRunning {
                        started_at: Some(Time(started_at)),
                    }),
                    ..Default::default()
                };
                slot.exit_override = None;
                slot.startup = if init {
                    None
                } else {
                    spec.startup_probe.clone().map(ProbeState::new)
                };
                slot.started = slot.startup.is_none();
                slot.readiness = if init || !slot.started {
                    None
                } else {
                    spec.readiness_probe.clone().map(ProbeState::new)
                };
                slot.liveness = if init || !slot.started {
                    None
                } else {
                    spec.liveness_probe.clone().map(ProbeState::new)
                };
                slot.ready = !init && slot.started && spec.readiness_probe.is_none();
                slot.running = Some(container.clone());
                slot.volumes = volumes;
                let (exits, instance) = (self.exits_tx.clone(), slot.instance);
                self.tasks.spawn(async move {
                    let exit = container.wait().await;
                    let _ = exits.send((index, instance, exit));
                });
            }
            Err(error) => {
                let message = format!("{error:#}");
                self.ctx.events.warning(
                    reference,
                    "Failed",
                    "StartContainer",
                    format!("Error: {message}"),
                );
                let backoff = self.ctx.backoff;
                let slot = &mut self.slots[index];
                let delay = slot
                    .backoff
                    .map(|b| (b * 2).min(backoff.max))
                    .unwrap_or(backoff.initial);
                slot.backoff = Some(delay);
                slot.restart_at = Instant::now() + delay;
                slot.state = waiting("RunContainerError", Some(message));
            }
        }
    }

    fn on_exit(&mut self, index: usize, instance: u64, exit: ContainerExit) {
        let policy = self.restart_policy().to_string();
        let backoff = self.ctx.backoff;
        let (pod_name, container_ref) = (
            self.pod.name_any(),
            self.field_reference(&self.slots[index].spec.name, self.slots[index].init),
        );
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        if slot.instance != instance || slot.running.is_none() {
            return;
        }
        let exit = slot.exit_override.take().unwrap_or(exit);
        slot.running = None;
        slot.ready = false;
        slot.startup = None;
        slot.readiness = None;
        slot.liveness = None;
        let finished_at = Timestamp::now();
        let terminated = ContainerState {
            terminated: Some(ContainerStateTerminated {
                exit_code: exit.exit_code,
                reason: Some(exit.reason().into()),
                started_at: slot.started_at.map(Time),
                finished_at: Some(Time(finished_at)),
                container_id: slot.container_id.clone(),
                ..Default::default()
            }),
            ..Default::default()
        };
        let restart = match (slot.init, policy.as_str()) {
            (true, _) if exit.exit_code == 0 => false,
            (true, "Never") => {
                self.init_failed = true;
                false
            }
            (true, _) => true,
            (false, "Always") => true,
            (false, "OnFailure") => exit.exit_code != 0,
            (false, _) => false,
        };
        if !restart {
            slot.completed = true;
            slot.state = terminated;
            return;
        }
        // Crash-loop back-off: the first restart is immediate, later ones wait, doubling;
        // a container that ran for twice the maximum starts over.
        let ran_for = slot
            .started_at
            .map(|s| finished_at.duration_since(s).unsigned_abs())
            .unwrap_or_default();
        if ran_for >= backoff.max * 2 {
            slot.backoff = None;
        }
        let delay = slot.backoff.unwrap_or(Duration::ZERO);
        slot.backoff = Some(
            slot.backoff
                .map(|b| (b * 2).min(backoff.max))
                .unwrap_or(backoff.initial),
        );
        slot.restart_at = Instant::now() + delay;
        slot.last_state = Some(terminated.clone());
        if delay.is_zero() {
            slot.state = terminated;
        } else {
            let name = slot.spec.name.clone();
            slot.state = waiting(
                "CrashLoopBackOff",
                Some(format!(
                    "back-off {}s restarting failed container={name} pod={pod_name}",
                    delay.as_secs()
                )),
            );
            self.ctx.events.warning(
                container_ref,
                "BackOff",
                "StartContainer",
                format!("Back-off restarting failed container {name} in pod {pod_name}"),
            );
        }
    }

    fn kill(&mut self, name: &str) -> anyhow::Result<()> {
        let slot = self
            .slots
            .iter_mut()
            .find(|s| s.spec.name == name && s.running.is_some())
            .ok_or_else(|| {
                anyhow::anyhow!(
                    "container {name:?} of pod {} is not running",
                    self.pod.name_any()
                )
            })?;
        slot.exit_override = Some(ContainerExit::KILLED);
        if let Some(container) = slot.running.clone() {
            self.tasks.spawn(async move {
                container.stop(Duration::ZERO).await;
            });
        }
        Ok(())
    }

    fn next_wake(&self) -> Instant {
        // Wake at least every few seconds, so a failed status write is retried.
        let far = Instant::now() + Duration::from_secs(5);
        let restarts = self
            .slots
            .iter()
            .filter(|s| s.running.is_none() && !s.completed && !self.init_failed)
            .map(|s| s.restart_at);
        let probes = self.slots.iter().filter_map(Slot::next_probe);
        restarts
            .chain(probes)
            .min()
            .unwrap_or(far)
            .max(Instant::now())
    }

    async fn run_due_probes(&mut self) {
        let now = Instant::now();
        let grace = self.grace_period();
        for index in 0..self.slots.len() {
            let pod_ip = self.pod_ip;
            let reference =
                self.field_reference(&self.slots[index].spec.name, self.slots[index].init);
            let slot = &mut self.slots[index];
            if slot.running.is_none() {
                continue;
            }
            let spec = slot.spec.clone();
            let mut restart_because: Option<String> = None;
            if let Some(probe) = slot.startup.as_mut().filter(|p| p.next_run <= now) {
                match probe.run(pod_ip, &spec).await {
                    ProbeVerdict::Succeeded => {
                        slot.startup = None;
                        slot.started = true;
                        slot.readiness = spec.readiness_probe.clone().map(ProbeState::new);
                        slot.liveness = spec.liveness_probe.clone().map(ProbeState::new);
                        slot.ready = spec.readiness_probe.is_none();
                    }
                    ProbeVerdict::Failed(message) => {
                        self.ctx.events.warning(
                            reference.clone(),
                            "Unhealthy",
                            "Probe",
                            format!("Startup probe failed: {message}"),
                        );
                        restart_because = Some("failed startup probe".into());
                    }
                    ProbeVerdict::Undecided => {}
                }
            }
            if let Some(probe) = slot.readiness.as_mut().filter(|p| p.next_run <= now) {
                match probe.run(pod_ip, &spec).await {
                    ProbeVerdict::Succeeded => slot.ready = true,
                    ProbeVerdict::Failed(message) => {
                        if slot.ready {
                            self.ctx.events.warning(
                                reference.clone(),
                                "Unhealthy",
                                "Probe",
                                format!("Readiness probe failed: {message}"),
                            );
                        }
                        slot.ready = false;
                    }
                    ProbeVerdict::Undecided => {}
                }
            }
            if let Some(probe) = slot.liveness.as_mut().filter(|p| p.next_run <= now) {
                if let ProbeVerdict::Failed(message) = probe.run(pod_ip, &spec).await {
                    self.ctx.events.warning(
                        reference.clone(),
                        "Unhealthy",
                        "Probe",
                        format!("Liveness probe failed: {message}"),
                    );
                    restart_because = Some("failed liveness probe".into());
                }
            }
            if let Some(why) = restart_because {
                self.ctx.events.normal(
                    reference,
                    "Killing",
                    "KillContainer",
                    format!("Container {} {why}, will be restarted", spec.name),
                );
                slot.startup = None;
                slot.readiness = None;
                slot.liveness = None;
                slot.ready = false;
                if let Some(container) = slot.running.clone() {
                    self.tasks.spawn(async move {
                        container.stop(grace).await;
                    });
                }
            }
        }
    }

    /// Stops the containers within the grace period, then removes the pod object
    /// (grace period 0), as the kubelet finishes a deletion.
    async fn terminate_and_remove(&mut self) -> WorkerOutcome {
        self.stop_all().await;
        self.write_status().await;
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: self.pod.uid(),
                resource_version: None,
            }),
            ..Default::default()
        };
        match self.api().delete(&self.pod.name_any(), &params).await {
            Ok(_) => WorkerOutcome::Finished,
            Err(error) if is_gone(&error) => WorkerOutcome::Finished,
            Err(error) => {
                tracing::warn!(pod = %self.pod.name_any(), %error, "could not remove deleted pod");
                WorkerOutcome::Interrupted
            }
        }
    }

    /// Stops every running container within the pod's grace period.
    async fn stop_all(&mut self) {
        let grace = self.grace_period();
        let mut stopping = Vec::new();
        for (index, slot) in self.slots.iter().enumerate() {
            if let Some(container) = slot.running.clone() {
                let reference = self.field_reference(&slot.spec.name, slot.init);
                self.ctx.events.normal(
                    reference,
                    "Killing",
                    "KillContainer",
                    format!("Stopping container {}", slot.spec.name),
                );
                stopping.push((index, container));
            }
        }
        let exits = tokio::time::timeout(
            grace + STOP_SLACK,
            join_all(stopping.iter().map(|(_, c)| c.stop(grace))),
        )
        .await
        .unwrap_or_else(|_| {
            tracing::warn!(pod = %self.pod.name_any(), "containers did not stop within the grace period");
            vec![ContainerExit::KILLED; stopping.len()]
        });
        for ((index, _), exit) in stopping.iter().zip(exits) {
            let slot = &mut self.slots[*index];
            if slot.running.take().is_some() {
                slot.ready = false;
                slot.state = ContainerState {
                    terminated: Some(ContainerStateTerminated {
                        exit_code: exit.exit_code,
                        reason: Some(exit.reason().into()),
                        started_at: slot.started_at.map(Time),
                        finished_at: Some(now()),
                        container_id: slot.container_id.clone(),
                        ..Default::default()
                    }),
                    ..Default::default()
                };
            }
        }
        self.tasks.abort_all();
    }

    /// Stops every container at once, without writing anything (a node losing power).
    async fn power_off(&mut self) {
        let running: Vec<_> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.running.take())
            .collect();
        let _ = tokio::time::timeout(
            STOP_SLACK,
            join_all(running.iter().map(|c| c.stop(Duration::ZERO))),
        )
        .await;
        self.tasks.abort_all();
    }

    fn phase(&self) -> &'static str {
        if self.init_failed {
            return "Failed";
        }
        if !self.init_done() {
            return "Pending";
        }
        let containers: Vec<&Slot> = self.slots.iter().filter(|s| !s.init).collect();
        if !containers.is_empty() && containers.iter().all(|s| s.completed) {
            let all_succeeded = containers.iter().all(|s| {
                s.state
                    .terminated
                    .as_ref()
                    .is_some_and(|t| t.exit_code == 0)
            });
            return if all_succeeded { "Succeeded" } else { "Failed" };
        }
        if containers.iter().any(|s| s.has_run) {
            "Running"
        } else {
            "Pending"
        }
    }

    fn is_terminal(&self) -> bool {
        matches!(self.phase(), "Succeeded" | "Failed")
    }

    fn build_status(&self) -> PodStatus {
        let phase = self.phase();
        let init_done = self.init_done();
        let containers: Vec<&Slot> = self.slots.iter().filter(|s| !s.init).collect();
        let unready: Vec<&str> = containers
            .iter()
            .filter(|s| !s.ready)
            .map(|s| s.spec.name.as_str())
            .collect();
        let incomplete: Vec<&str> = self
            .slots
            .iter()
            .filter(|s| s.init && !s.completed)
            .map(|s| s.spec.name.as_str())
            .collect();
        let previous = self
            .pod
            .status
            .as_ref()
            .and_then(|s| s.conditions.clone())
            .unwrap_or_default();
        let condition = |type_: &str, ok: bool, reason: &str, message: String| {
            let status = if ok { "True" } else { "False" };
            let last_transition_time = previous
                .iter()
                .find(|c| c.type_ == type_ && c.status == status)
                .and_then(|c| c.last_transition_time.clone())
                .unwrap_or_else(now);
            PodCondition {
                type_: type_.into(),
                status: status.into(),
                last_transition_time: Some(last_transition_time),
                reason: (!ok && !reason.is_empty()).then(|| reason.to_string()),
                message: (!ok && !message.is_empty()).then_some(message),
                ..Default::default()
            }
        };
        let containers_ready =
            unready.is_empty() && init_done && !containers.iter().any(|s| s.running.is_none());
        let unready_message = format!("containers with unready status: [{}]", unready.join(" "));
        let conditions = vec![
            condition("PodReadyToStartContainers", true, "", String::new()),
            condition(
                "Initialized",
                init_done,
                "ContainersNotInitialized",
                format!(
                    "containers with incomplete status: [{}]",
                    incomplete.join(" ")
                ),
            ),
            condition(
                "Ready",
                containers_ready,
                "ContainersNotReady",
                unready_message.clone(),
            ),
            condition(
                "ContainersReady",
                containers_ready,
                "ContainersNotReady",
                unready_message,
            ),
            condition("PodScheduled", true, "", String::new()),
        ];
        let statuses = |init: bool| -> Option<Vec<ContainerStatus>> {
            let list: Vec<ContainerStatus> = self
                .slots
                .iter()
                .filter(|s| s.init == init)
                .map(Slot::status)
                .collect();
            (!list.is_empty()).then_some(list)
        };
        PodStatus {
            phase: Some(phase.into()),
            conditions: Some(conditions),
            host_ip: Some(self.ctx.node_ip.to_string()),
            host_ips: Some(vec![HostIP {
                ip: self.ctx.node_ip.to_string(),
            }]),
            pod_ip: Some(self.pod_ip.to_string()),
            pod_ips: Some(vec![PodIP {
                ip: self.pod_ip.to_string(),
            }]),
            start_time: Some(self.start_time.clone()),
            init_container_statuses: statuses(true),
            container_statuses: statuses(false),
            ..Default::default()
        }
    }

    async fn write_status(&mut self) {
        let status = serde_json::to_value(self.build_status()).unwrap_or_default();
        if self.last_written.as_ref() == Some(&status) {
            return;
        }
        let patch = Patch::Merge(json!({ "status": status }));
        match self
            .api()
            .patch_status(&self.pod.name_any(), &PatchParams::default(), &patch)
            .await
        {
            Ok(pod) => {
                self.pod = Arc::new(pod);
                self.last_written = Some(status);
            }
            Err(error) if is_status(&error, 404) => self.last_written = Some(status),
            Err(error) => {
                tracing::warn!(pod = %self.pod.name_any(), %error, "could not write pod status")
            }
        }
    }
}
