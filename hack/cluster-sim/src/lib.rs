//! The machinery of one simulated member cluster around its API server: the
//! kubelet of its one node (with the scheduler's binding), the StatefulSet,
//! Deployment, ReplicaSet and endpoints controllers, PersistentVolume provisioning, binding and expansion,
//! and kube-proxy's NodePort forwarding. They talk to the cluster's API server only through the
//! kube-rs client, like the real components, and run containers through a
//! pluggable [`ContainerRuntime`].
//!
//! Start one [`ClusterSim`] per simulated cluster; the returned
//! [`ClusterSimHandle`] injects faults, publishes which pod serves each
//! `VIP:nodePort`, and stops everything when shut down or dropped.

mod api_errors;
mod cache;
mod controller_ref;
mod deployment;
mod endpoints;
mod events;
mod faults;
mod ip_pool;
mod kubelet;
mod pod_facts;
mod proxy;
mod replicaset;
mod runtime;
mod statefulset;
mod volume_binder;
mod volume_expansion;

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinSet;

pub use deployment::POD_TEMPLATE_HASH_LABEL;
pub use faults::Faults;
pub use ip_pool::Ipv4Prefix;
pub use proxy::NodePortRoutes;
pub use runtime::{
    BoxFuture, ClaimIdentity, ContainerExit, ContainerRuntime, PodIdentity, ResolvedContainer,
    ResolvedEnvVar, ResolvedMount, ResolvedPort, ResolvedVolume, RunningContainer, VolumeFiles,
};
pub use statefulset::{POD_INDEX_LABEL, POD_NAME_LABEL, REVISION_LABEL};

use cache::Cache;
use deployment::DeploymentController;
use endpoints::EndpointsController;
use ip_pool::IpPool;
use kubelet::{Kubelet, KubeletCommand, KubeletOptions};
use proxy::NodePortProxy;
use replicaset::ReplicaSetController;
use statefulset::StatefulSetController;
use volume_binder::VolumeBinder;
use volume_expansion::{NodeVolumeExpander, VolumeResizer};

/// How long `start` waits for the first lists from the API server.
const CACHE_SYNC_TIMEOUT: Duration = Duration::from_secs(30);
/// How long `shutdown` waits for the containers to stop.
const SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(15);
/// The kubelet's default pod sync period (`--sync-frequency`, 1 minute).
pub const DEFAULT_VOLUME_SYNC_PERIOD: Duration = Duration::from_secs(60);

/// The kubelet's crash-loop back-off: the first restart of a container is
/// immediate, later ones wait `initial`, doubling up to `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartBackoff {
    /// First delay (the kubelet uses 10 s).
    pub initial: Duration,
    /// Largest delay (the kubelet uses 300 s).
    pub max: Duration,
}

impl Default for RestartBackoff {
    fn default() -> Self {
        RestartBackoff {
            initial: Duration::from_secs(10),
            max: Duration::from_secs(300),
        }
    }
}

/// What makes one simulated cluster.
#[derive(Clone)]
pub struct ClusterOptions {
    /// Cluster name; the single node is called `<name>-node`.
    pub name: String,
    /// The cluster's VIP (node address), e.g. 127.0.10.1: NodePorts listen here.
    pub vip: Ipv4Addr,
    /// Pods get addresses from this prefix (e.g. 127.10.1.0/24), never the VIP.
    pub pod_ip_prefix: Ipv4Prefix,
    /// Runs the containers.
    pub runtime: Arc<dyn ContainerRuntime>,
    /// Crash-loop back-off for restarted containers.
    pub restart_backoff: RestartBackoff,
    /// How often the kubelet re-reads the Secret and ConfigMap volumes of a
    /// running container and swaps changed files in (but for `subPath`
    /// mounts): the real kubelet's pod sync period (`--sync-frequency`),
    /// [`DEFAULT_VOLUME_SYNC_PERIOD`] by default.
    pub volume_sync_period: Duration,
}

impl ClusterOptions {
    /// Options with the kubelet's default back-off and sync period.
    pub fn new(
        name: impl Into<String>,
        vip: Ipv4Addr,
        pod_ip_prefix: Ipv4Prefix,
        runtime: Arc<dyn ContainerRuntime>,
    ) -> Self {
        ClusterOptions {
            name: name.into(),
            vip,
            pod_ip_prefix,
            runtime,
            restart_backoff: RestartBackoff::default(),
            volume_sync_period: DEFAULT_VOLUME_SYNC_PERIOD,
        }
    }
}

/// Entry point: starts the node components of one cluster.
pub struct ClusterSim;

impl ClusterSim {
    /// Starts the kubelet, the StatefulSet, Deployment and ReplicaSet controllers,
    /// the claim binder and the proxy of one cluster against the API server
    /// `client` talks to. Returns once their caches hold the first complete lists.
    pub async fn start(
        client: kube::Client,
        options: ClusterOptions,
    ) -> anyhow::Result<ClusterSimHandle> {
        if options.name.is_empty() {
            bail!("a cluster needs a name");
        }
        if !options.vip.is_loopback() {
            bail!(
                "the VIP {} must be a loopback address (127.0.0.0/8)",
                options.vip
            );
        }
        let node_name = format!("{}-node", options.name);
        let mut tasks = JoinSet::new();
        let cache = Cache::start(&client, &mut tasks);
        tokio::time::timeout(CACHE_SYNC_TIMEOUT, cache.wait_until_ready())
            .await
            .context("the API server did not answer the first lists in time")??;
        let (faults, faults_rx) = watch::channel(Faults::default());
        let (routes, routes_rx) = watch::channel(NodePortRoutes::new());
        let (kubelet_commands, kubelet_commands_rx) = mpsc::channel(16);

        let kubelet = Kubelet::new(
            client.clone(),
            cache.clone(),
            faults_rx.clone(),
            kubelet_commands_rx,
            KubeletOptions {
                node_name: node_name.clone(),
                node_ip: options.vip,
                pool: IpPool::new(options.pod_ip_prefix, options.vip),
                runtime: options.runtime,
                backoff: options.restart_backoff,
                volume_sync_period: options.volume_sync_period,
            },
        );
        tasks.spawn(kubelet.run());
        tasks.spawn(
            StatefulSetController::new(
                client.clone(),
                cache.clone(),
                faults_rx.clone(),
                &node_name,
            )
            .run(),
        );
        tasks.spawn(
            DeploymentController::new(client.clone(), cache.clone(), faults_rx.clone(), &node_name)
                .run(),
        );
        tasks.spawn(
            ReplicaSetController::new(client.clone(), cache.clone(), faults_rx.clone(), &node_name)
                .run(),
        );
        tasks.spawn(VolumeBinder::new(client.clone(), cache.clone(), faults_rx.clone()).run());
        tasks.spawn(
            VolumeResizer::new(client.clone(), cache.clone(), faults_rx.clone(), &node_name).run(),
        );
        tasks.spawn(
            NodeVolumeExpander::new(client.clone(), cache.clone(), faults_rx.clone(), &node_name)
                .run(),
        );
        tasks.spawn(EndpointsController::new(client, cache.clone(), faults_rx.clone()).run());
        tasks.spawn(NodePortProxy::new(options.vip, cache, faults_rx, routes).run());
        tracing::info!(cluster = %options.name, vip = %options.vip, pods = %options.pod_ip_prefix, "cluster simulator started");
        Ok(ClusterSimHandle {
            name: options.name,
            node_name,
            vip: options.vip,
            faults,
            routes: routes_rx,
            kubelet: kubelet_commands,
            tasks,
        })
    }
}

/// A running cluster simulator. Dropping it stops every task and drops every
/// container handle (which stops the containers).
pub struct ClusterSimHandle {
    name: String,
    node_name: String,
    vip: Ipv4Addr,
    faults: watch::Sender<Faults>,
    routes: watch::Receiver<NodePortRoutes>,
    kubelet: mpsc::Sender<KubeletCommand>,
    tasks: JoinSet<()>,
}

impl ClusterSimHandle {
    /// The cluster's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The name of the cluster's single node.
    pub fn node_name(&self) -> &str {
        &self.node_name
    }

    /// The cluster's VIP.
    pub fn vip(&self) -> Ipv4Addr {
        self.vip
    }

    /// Which pod address serves each `VIP:nodePort`, kept current (also while
    /// the VIP is cut or the cluster lost: it describes routing, not reachability).
    pub fn routes(&self) -> watch::Receiver<NodePortRoutes> {
        self.routes.clone()
    }

    /// The faults currently injected.
    pub fn faults(&self) -> Faults {
        *self.faults.borrow()
    }

    /// Kills a running container abruptly (exit code 137); the kubelet restarts it
    /// per the pod's `restartPolicy`.
    pub async fn kill_container(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> anyhow::Result<()> {
        let (reply, answer) = oneshot::channel();
        let command = KubeletCommand::KillContainer {
            namespace: namespace.into(),
            pod: pod.into(),
            container: container.into(),
            reply,
        };
        self.kubelet
            .send(command)
            .await
            .map_err(|_| anyhow::anyhow!("the kubelet of {} has stopped", self.name))?;
        answer
            .await
            .map_err(|_| anyhow::anyhow!("the pod stopped before the kill"))?
    }

    /// Loses the whole cluster: every container stops, NodePorts close, and the
    /// kubelet and controllers make no more API writes until [`heal`](Self::heal).
    pub fn lose_cluster(&self) {
        self.faults.send_modify(|f| f.cluster_lost = true);
    }

    /// Cuts the VIP: NodePort listeners close (connections are refused) and open
    /// connections through them are dropped. Pods keep running.
    pub fn cut_vip(&self) {
        self.faults.send_modify(|f| f.vip_cut = true);
    }

    /// Whether a pod reaches itself through its own Service's `VIP:nodePort`
    /// (hairpin traffic). With `false`, such connections are reset, as on a node
    /// whose kubelet runs with `hairpinMode: none`.
    pub fn set_hairpin(&self, hairpin: bool) {
        self.faults.send_modify(|f| f.no_hairpin = !hairpin);
    }

    /// Lifts every fault: pods are started again (same IP addresses), NodePorts
    /// reopen. The hairpin setting stays.
    pub fn heal(&self) {
        self.faults.send_modify(|f| {
            *f = Faults {
                no_hairpin: f.no_hairpin,
                ..Faults::default()
            }
        });
    }

    /// Stops the containers, then every task, and waits for them.
    pub async fn shutdown(mut self) {
        let (reply, stopped) = oneshot::channel();
        if self
            .kubelet
            .send(KubeletCommand::Shutdown { reply })
            .await
            .is_ok()
        {
            let _ = tokio::time::timeout(SHUTDOWN_TIMEOUT, stopped).await;
        }
        self.tasks.shutdown().await;
    }
}
