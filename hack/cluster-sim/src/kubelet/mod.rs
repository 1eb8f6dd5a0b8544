//! The simulated kubelet of the cluster's single node (also doing the
//! scheduler's one job, binding): it registers the Node, watches pods, gives each pod of this node
//! an IP address and a pod worker, routes fault injections to the workers, and
//! powers every pod off when the cluster is lost (starting them again when it
//! comes back, keeping their IP addresses).

mod probe;
mod refresh;
mod resolve;
mod worker;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Node, Pod};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, ResourceExt};
use serde_json::json;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;
use tokio::time::Instant;

use crate::cache::Cache;
use crate::events::EventSink;
use crate::faults::Faults;
use crate::ip_pool::IpPool;
use crate::pod_facts::is_terminal;
use crate::runtime::ContainerRuntime;
use crate::RestartBackoff;
use worker::{PodWorker, WorkerCommand, WorkerContext, WorkerOutcome};

const RESYNC: Duration = Duration::from_secs(5);
/// How long after an interrupted worker the kubelet tries the pod again.
const WORKER_RETRY: Duration = Duration::from_secs(1);
/// How long a shutdown waits for workers to stop their containers.
const POWER_OFF_TIMEOUT: Duration = Duration::from_secs(10);

/// Requests to the kubelet.
pub enum KubeletCommand {
    /// Kill a container of a pod (fault injection).
    KillContainer {
        /// Pod namespace.
        namespace: String,
        /// Pod name.
        pod: String,
        /// Container name.
        container: String,
        /// Outcome.
        reply: oneshot::Sender<anyhow::Result<()>>,
    },
    /// Stop every container and end.
    Shutdown {
        /// Sent once every container is stopped.
        reply: oneshot::Sender<()>,
    },
}

/// Settings of the node.
pub struct KubeletOptions {
    /// Node name.
    pub node_name: String,
    /// Node address (the cluster VIP).
    pub node_ip: Ipv4Addr,
    /// Pod address allocation.
    pub pool: IpPool,
    /// Runs containers.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// Crash-loop back-off.
    pub backoff: RestartBackoff,
    /// How often running containers' Secret and ConfigMap volumes are refreshed.
    pub volume_sync_period: Duration,
}

struct WorkerHandle {
    namespace: String,
    name: String,
    ip: Ipv4Addr,
    updates: watch::Sender<Option<Arc<Pod>>>,
    commands: mpsc::Sender<WorkerCommand>,
}

/// The node agent.
pub struct Kubelet {
    ctx: Arc<WorkerContext>,
    cache: Cache,
    faults: watch::Receiver<Faults>,
    commands: mpsc::Receiver<KubeletCommand>,
    pool: IpPool,
    workers: HashMap<String, WorkerHandle>,
    running: JoinSet<(String, WorkerOutcome)>,
    finished: HashSet<String>,
    retry_at: HashMap<String, Instant>,
}

impl Kubelet {
    /// A kubelet for the node described by `options`.
    pub fn new(
        client: Client,
        cache: Cache,
        faults: watch::Receiver<Faults>,
        commands: mpsc::Receiver<KubeletCommand>,
        options: KubeletOptions,
    ) -> Self {
        let ctx = WorkerContext {
            events: EventSink::new(client.clone(), "kubelet", &options.node_name),
            scheduler_events: EventSink::new(
                client.clone(),
                "default-scheduler",
                &options.node_name,
            ),
            client,
            runtime: options.runtime,
            node_name: options.node_name,
            node_ip: options.node_ip,
            backoff: options.backoff,
            volume_sync_period: options.volume_sync_period,
            cache: cache.clone(),
        };
        Kubelet {
            ctx: Arc::new(ctx),
            cache,
            faults,
            commands,
            pool: options.pool,
            workers: HashMap::new(),
            running: JoinSet::new(),
            finished: HashSet::new(),
            retry_at: HashMap::new(),
        }
    }

    /// Runs the node until shut down or dropped.
    pub async fn run(mut self) {
        if self.cache.pods.wait_until_ready().await.is_err() {
            return;
        }
        let mut changes = self.cache.subscribe();
        let mut registered = false;
        loop {
            if self.faults.borrow().cluster_lost {
                self.power_off_all().await;
                registered = false;
            } else {
                if !registered {
                    self.register_node().await;
                    registered = true;
                }
                self.sync();
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = self.faults.changed() => if changed.is_err() { return },
                Some(joined) = self.running.join_next() => self.reap(joined),
                command = self.commands.recv() => match command {
                    Some(KubeletCommand::KillContainer { namespace, pod, container, reply }) => self.kill(&namespace, &pod, container, reply).await,
                    Some(KubeletCommand::Shutdown { reply }) => {
                        self.power_off_all().await;
                        let _ = reply.send(());
                        return;
                    }
                    None => {
                        self.power_off_all().await;
                        return;
                    }
                },
                _ = tokio::time::sleep(if self.retry_at.is_empty() { RESYNC } else { WORKER_RETRY }) => {}
            }
        }
    }

    /// Registers the node (or refreshes its status) as the kubelet does at start-up;
    /// best effort: a failure is logged, pods run anyway.
    async fn register_node(&self) {
        let name = &self.ctx.node_name;
        let address = self.ctx.node_ip.to_string();
        let node: Node = match serde_json::from_value(json!({
            "metadata": {"name": name, "labels": {
                "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux", "beta.kubernetes.io/arch": "amd64"
            }},
            "spec": {}
        })) {
            Ok(node) => node,
            Err(error) => {
                tracing::warn!(%error, "could not build the Node object");
                return;
            }
        };
        let api: Api<Node> = Api::all(self.ctx.client.clone());
        if let Err(error) = api.create(&PostParams::default(), &node).await {
            if !crate::api_errors::is_status(&error, 409) {
                tracing::warn!(node = %name, %error, "could not register the node");
                return;
            }
        }
        let now = k8s_openapi::jiff::Timestamp::now().to_string();
        let capacity =
            json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"});
        let status = json!({"status": {
            "addresses": [{"type": "InternalIP", "address": address}, {"type": "Hostname", "address": name}],
            "capacity": capacity, "allocatable": capacity,
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now}],
            "nodeInfo": {"kubeletVersion": "v1.33.0-sim", "kubeProxyVersion": "v1.33.0-sim", "containerRuntimeVersion": "sim://1.0",
                "operatingSystem": "linux", "architecture": "amd64", "osImage": "kubelet-sim", "kernelVersion": "",
                "machineID": "", "systemUUID": "", "bootID": ""}
        }});
        if let Err(error) = api
            .patch_status(name, &PatchParams::default(), &Patch::Merge(status))
            .await
        {
            tracing::warn!(node = %name, %error, "could not write the node status");
        }
    }

    fn reap(&mut self, joined: Result<(String, WorkerOutcome), tokio::task::JoinError>) {
        let Ok((uid, outcome)) = joined else { return };
        self.workers.remove(&uid);
        match outcome {
            WorkerOutcome::Finished => {
                self.finished.insert(uid);
            }
            WorkerOutcome::Interrupted => {
                self.retry_at.insert(uid, Instant::now() + WORKER_RETRY);
            }
        }
    }

    fn is_ours(&self, pod: &Pod) -> bool {
        pod.spec
            .as_ref()
            .and_then(|s| s.node_name.as_deref())
            .is_none_or(|n| n.is_empty() || n == self.ctx.node_name)
    }

    /// Starts workers for new pods of this node and passes every change to the running ones.
    fn sync(&mut self) {
        let pods = self.cache.pods.state();
        let mut live = HashSet::new();
        for pod in &pods {
            let Some(uid) = pod.uid() else { continue };
            live.insert(uid.clone());
            if !self.is_ours(pod) || self.finished.contains(&uid) {
                continue;
            }
            if let Some(worker) = self.workers.get(&uid) {
                worker.updates.send_if_modified(|current| {
                    let newer = current
                        .as_ref()
                        .is_none_or(|c| c.resource_version() != pod.resource_version());
                    if newer {
                        *current = Some(pod.clone());
                    }
                    newer
                });
            } else if !is_terminal(pod)
                && self
                    .retry_at
                    .get(&uid)
                    .is_none_or(|at| *at <= Instant::now())
            {
                self.retry_at.remove(&uid);
                self.spawn_worker(pod.clone(), uid, &pods);
            }
        }
        for (uid, worker) in &self.workers {
            if !live.contains(uid) {
                worker
                    .updates
                    .send_if_modified(|current| current.take().is_some());
            }
        }
        self.finished.retain(|uid| live.contains(uid));
        self.retry_at.retain(|uid, _| live.contains(uid));
    }

    fn spawn_worker(&mut self, pod: Arc<Pod>, uid: String, pods: &[Arc<Pod>]) {
        let assigned = pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse::<Ipv4Addr>().ok());
        let ip = match assigned {
            Some(ip) => ip,
            None => {
                let mut in_use: BTreeSet<Ipv4Addr> = self.workers.values().map(|w| w.ip).collect();
                in_use.extend(pods.iter().filter(|p| self.is_ours(p)).filter_map(|p| {
                    p.status
                        .as_ref()?
                        .pod_ip
                        .as_deref()?
                        .parse::<Ipv4Addr>()
                        .ok()
                }));
                match self.pool.allocate(&in_use) {
                    Some(ip) => ip,
                    None => {
                        tracing::warn!(pod = %pod.name_any(), "no pod IP address left in the node's range");
                        return;
                    }
                }
            }
        };
        let (updates, updates_rx) = watch::channel(Some(pod.clone()));
        let (commands, commands_rx) = mpsc::channel(8);
        let handle = WorkerHandle {
            namespace: pod.namespace().unwrap_or_default(),
            name: pod.name_any(),
            ip,
            updates,
            commands,
        };
        let worker = PodWorker::new(self.ctx.clone(), pod, ip, updates_rx, commands_rx);
        let worker_uid = uid.clone();
        self.running
            .spawn(async move { (worker_uid, worker.run().await) });
        self.workers.insert(uid, handle);
    }

    async fn kill(
        &mut self,
        namespace: &str,
        pod: &str,
        container: String,
        reply: oneshot::Sender<anyhow::Result<()>>,
    ) {
        let worker = self
            .workers
            .values()
            .find(|w| w.namespace == namespace && w.name == pod);
        let Some(worker) = worker else {
            let _ = reply.send(Err(anyhow::anyhow!(
                "pod {namespace}/{pod} is not running on node {}",
                self.ctx.node_name
            )));
            return;
        };
        if let Err(mpsc::error::SendError(WorkerCommand::KillContainer { reply, .. })) = worker
            .commands
            .send(WorkerCommand::KillContainer {
                name: container,
                reply,
            })
            .await
        {
            let _ = reply.send(Err(anyhow::anyhow!(
                "pod {namespace}/{pod} is shutting down"
            )));
        }
    }

    /// Stops every pod's containers and forgets the workers (the pods stay in the API).
    async fn power_off_all(&mut self) {
        if self.workers.is_empty() {
            return;
        }
        for worker in self.workers.values() {
            let _ = worker.commands.try_send(WorkerCommand::PowerOff);
        }
        let drained = tokio::time::timeout(POWER_OFF_TIMEOUT, async {
            while let Some(joined) = self.running.join_next().await {
                if let Ok((uid, WorkerOutcome::Finished)) = joined {
                    self.finished.insert(uid);
                }
            }
        })
        .await;
        if drained.is_err() {
            tracing::warn!("pods did not stop in time; dropping them");
            self.running.abort_all();
        }
        self.workers.clear();
    }
}
