//! Brings up the lab: N simulated member clusters (an API server, the simulated
//! node components and a mongod-sim runtime each, on its own 127.x addresses),
//! one mongod-sim network joining them, a kubeconfig with a context per cluster,
//! the CRDs installed with kubectl, and the **operator binary** running once per
//! cluster as a child process.
//!
//! Addresses, for lab number `n` (tests use distinct numbers, 1–250):
//! cluster `i` (0-based) has its API server on `127.n.(i+1).100:6443`, its VIP
//! `127.n.(i+1).1` (NodePorts listen there), its operator's metrics on
//! `127.n.(i+1).101:8080`, and its pods in `127.n.(i+101).0/24`.

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use apiserver_sim::{ApiServer, ApiServerHandle};
use kube::Client;
use kubelet_sim::{ClusterOptions, ClusterSim, ClusterSimHandle, Ipv4Prefix};
use mongod_sim::Network;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::controlplane::{ControlPlane, MemberCluster};
use crate::runtime::MongodRuntime;

/// Cluster names, in order.
pub const CLUSTER_NAMES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];

/// How to bring the lab up.
#[derive(Clone, Debug)]
pub struct LabOptions {
    /// Lab number: the second octet of every address (1–250).
    pub number: u8,
    /// How many clusters (1–8).
    pub clusters: usize,
    /// Where the kubeconfig, logs and kubectl's cache go.
    pub state_dir: PathBuf,
    /// The operator binary to run in every cluster.
    pub operator: PathBuf,
    /// The directory of CRDs to install (`crds/`).
    pub crds: PathBuf,
}

impl LabOptions {
    /// Defaults for a checkout: lab 10, three clusters, state in `.lab/`, the
    /// operator built next to the running executable.
    pub fn for_checkout(repo: &Path) -> Result<Self> {
        Ok(LabOptions {
            number: 10,
            clusters: 3,
            state_dir: repo.join(".lab"),
            operator: sibling_binary("mongodb-member-operator")?,
            crds: repo.join("crds"),
        })
    }
}

/// A binary built into the same target directory as the running executable
/// (which may be a test in `target/debug/deps`).
pub fn sibling_binary(name: &str) -> Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let mut dir = exe
        .parent()
        .context("executable has no directory")?
        .to_path_buf();
    if dir.ends_with("deps") {
        dir.pop();
    }
    let path = dir.join(name);
    if !path.exists() {
        bail!(
            "{} is not built: run `cargo build --bin {name}` first",
            path.display()
        );
    }
    Ok(path)
}

/// One running cluster.
pub struct LabCluster {
    /// Name (also the kubeconfig context).
    pub name: String,
    /// VIP.
    pub vip: Ipv4Addr,
    /// Its API server.
    pub api: ApiServerHandle,
    /// Its node components.
    pub node: ClusterSimHandle,
    /// A client for it.
    pub client: Client,
    alias_sync: JoinHandle<()>,
}

/// The running lab.
pub struct Lab {
    options: LabOptions,
    network: Arc<Network>,
    clusters: Vec<LabCluster>,
    operators: Vec<Option<Child>>,
    kubeconfig: PathBuf,
}

impl Lab {
    /// Starts the clusters, installs the CRDs and starts one operator per cluster.
    pub async fn start(options: LabOptions) -> Result<Lab> {
        if !(1..=CLUSTER_NAMES.len()).contains(&options.clusters) {
            bail!("the lab runs 1 to {} clusters", CLUSTER_NAMES.len());
        }
        std::fs::create_dir_all(&options.state_dir)
            .with_context(|| format!("creating {}", options.state_dir.display()))?;
        let network = Network::new();
        let mut clusters = Vec::new();
        for (index, name) in CLUSTER_NAMES.iter().take(options.clusters).enumerate() {
            clusters.push(start_cluster(&options, &network, index, name).await?);
        }
        let entries: Vec<(String, String)> = clusters
            .iter()
            .map(|c| (c.name.clone(), c.api.url()))
            .collect();
        let kubeconfig = options.state_dir.join("kubeconfig");
        std::fs::write(
            &kubeconfig,
            apiserver_sim::kubeconfig::render(&entries, &entries[0].0),
        )?;
        let mut lab = Lab {
            options,
            network,
            clusters,
            operators: Vec::new(),
            kubeconfig,
        };
        for cluster in &lab.clusters {
            lab.kubectl(
                &cluster.name,
                &["apply", "-f", &lab.options.crds.display().to_string()],
            )
            .await?;
        }
        for index in 0..lab.clusters.len() {
            let child = lab.spawn_operator(index)?;
            lab.operators.push(Some(child));
        }
        Ok(lab)
    }

    /// The kubeconfig with one context per cluster.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The running clusters.
    pub fn clusters(&self) -> &[LabCluster] {
        &self.clusters
    }

    /// The simulated MongoDB network (faults, primaries).
    pub fn network(&self) -> &Arc<Network> {
        &self.network
    }

    /// The control-plane stand-in over every cluster.
    pub fn control_plane(&self) -> ControlPlane {
        ControlPlane::new(
            self.clusters
                .iter()
                .map(|c| MemberCluster {
                    name: c.name.clone(),
                    vip: c.vip,
                    client: c.client.clone(),
                })
                .collect(),
        )
    }

    /// Runs kubectl against `context`, as a user would; returns its stdout.
    pub async fn kubectl(&self, context: &str, args: &[&str]) -> Result<String> {
        let cache = self.options.state_dir.join("kubectl-cache");
        let output = Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--context")
            .arg(context)
            .arg("--cache-dir")
            .arg(&cache)
            .args(args)
            .env("HOME", &self.options.state_dir)
            .output()
            .await
            .context("running kubectl (is it on PATH?)")?;
        if !output.status.success() {
            bail!(
                "kubectl {} failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    }

    fn spawn_operator(&self, index: usize) -> Result<Child> {
        let cluster = &self.clusters[index];
        let kubeconfig = self
            .options
            .state_dir
            .join(format!("operator-{}.kubeconfig", cluster.name));
        std::fs::write(
            &kubeconfig,
            apiserver_sim::kubeconfig::render(
                &[(cluster.name.clone(), cluster.api.url())],
                &cluster.name,
            ),
        )?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.operator_log(index))?;
        let metrics = SocketAddr::from((
            Ipv4Addr::new(127, self.options.number, index as u8 + 1, 101),
            8080,
        ));
        Command::new(&self.options.operator)
            .env("KUBECONFIG", &kubeconfig)
            .env("METRICS_ADDRESS", metrics.to_string())
            .env("RUST_LOG", "info")
            .env("POD_NAME", format!("operator-{}", cluster.name))
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.options.operator.display()))
    }

    /// Where cluster `index`'s operator logs.
    pub fn operator_log(&self, index: usize) -> PathBuf {
        self.options
            .state_dir
            .join(format!("operator-{}.log", self.clusters[index].name))
    }

    /// The process id of cluster `index`'s operator, while it runs (e.g. to read
    /// its CPU time from `/proc/<pid>/stat`).
    pub fn operator_pid(&self, index: usize) -> Option<u32> {
        self.operators.get(index)?.as_ref()?.id()
    }

    /// Kills cluster `index`'s operator (SIGKILL, like a crashed pod).
    pub async fn kill_operator(&mut self, index: usize) -> Result<()> {
        if let Some(mut child) = self.operators.get_mut(index).and_then(Option::take) {
            child.kill().await?;
        }
        Ok(())
    }

    /// Starts cluster `index`'s operator again after [`Lab::kill_operator`].
    pub fn restart_operator(&mut self, index: usize) -> Result<()> {
        if self.operators[index].is_none() {
            self.operators[index] = Some(self.spawn_operator(index)?);
        }
        Ok(())
    }

    /// Stops every operator, node and API server the lab started.
    pub async fn shutdown(mut self) {
        for child in self.operators.iter_mut().filter_map(Option::as_mut) {
            let _ = child.kill().await;
        }
        for cluster in self.clusters.drain(..) {
            cluster.alias_sync.abort();
            cluster.node.shutdown().await;
            let mut api = cluster.api;
            api.stop().await;
        }
        self.network.stop_all();
    }
}

async fn start_cluster(
    options: &LabOptions,
    network: &Arc<Network>,
    index: usize,
    name: &str,
) -> Result<LabCluster> {
    let third = index as u8 + 1;
    let api_addr = SocketAddr::from((Ipv4Addr::new(127, options.number, third, 100), 6443));
    let api = ApiServer::start(api_addr)
        .await
        .with_context(|| format!("starting the API server of cluster {name} on {api_addr}"))?;
    let client = Client::try_from(kube::Config::new(api.url().parse()?))?;
    let vip = Ipv4Addr::new(127, options.number, third, 1);
    let pods = Ipv4Prefix::new(Ipv4Addr::new(127, options.number, 100 + third, 0), 24)?;
    let runtime = Arc::new(MongodRuntime::new(network.clone(), name));
    let node = ClusterSim::start(
        client.clone(),
        ClusterOptions::new(name, vip, pods, runtime),
    )
    .await?;
    let alias_sync = tokio::spawn(sync_aliases(network.clone(), node.routes()));
    Ok(LabCluster {
        name: name.to_string(),
        vip,
        api,
        node,
        client,
        alias_sync,
    })
}

/// Keeps mongod-sim's self-aliases in step with kube-proxy's routes: the member
/// behind `VIP:nodePort` recognises that host string as itself (mongod's isSelf).
async fn sync_aliases(
    network: Arc<Network>,
    mut routes: tokio::sync::watch::Receiver<kubelet_sim::NodePortRoutes>,
) {
    let mut published: BTreeSet<(String, String)> = BTreeSet::new();
    loop {
        let current: BTreeSet<(String, String)> = routes
            .borrow_and_update()
            .iter()
            .filter_map(|(front, pod)| pod.map(|pod| (pod.to_string(), front.to_string())))
            .collect();
        for (_, alias) in published.difference(&current) {
            network.remove_alias(alias);
        }
        for (pod, alias) in current.difference(&published) {
            network.add_alias(pod, alias);
        }
        published = current;
        if routes.changed().await.is_err() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
