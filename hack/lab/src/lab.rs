//! Brings up the lab: N simulated member clusters (an API server, the simulated
//! node components and a mongod-sim runtime each, on its own 127.x addresses),
//! one mongod-sim network joining them, a kubeconfig with a context per cluster,
//! the CRDs installed with kubectl, and the **operator binary** running once per
//! cluster as a child process, with leader election on a Lease in the chart's
//! release namespace as the chart runs it (a test may start a standby replica;
//! `LabOptions::leader_election` off runs them without).
//!
//! The API servers enforce RBAC. The operator runs as the member chart's
//! ServiceAccount: the chart is rendered with Helm's engine (helm-python-sdk,
//! through `hack/deploy-check/render_charts.py`, the python of `MMO_PYTHON`)
//! with the lab's values (every namespace watched: a ClusterRole), the
//! release's namespace and the chart's ServiceAccount, roles and bindings are
//! applied with kubectl in every cluster, and each operator's kubeconfig
//! carries that ServiceAccount's token, so a permission the chart lacks fails
//! the tests. The harness (kubectl, which sends no credentials over plain
//! HTTP; the control-plane stand-in and cluster-sim with an admin token) acts
//! as cluster administrator. Without helm-python-sdk the lab refuses to start,
//! before it binds any address: an operator started without its namespace
//! would retry its leader election there for ever, and one running as an
//! administrator would hide a permission the chart lacks.
//!
//! Addresses, for lab number `n` (tests use distinct numbers, 1–250):
//! cluster `i` (0-based) has its API server on `127.n.(i+1).100:6443`, its VIP
//! `127.n.(i+1).1` (NodePorts listen there), its operator's metrics on
//! `127.n.(i+1).101:8080` (a standby replica's on `.102`), and its pods in
//! `127.n.(128+16i).0/20` (4,094 addresses: room for `lab bench`'s 1,000
//! instances in one cluster).

use std::collections::BTreeSet;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use apiserver_sim::auth::Unauthenticated;
use apiserver_sim::{ApiServer, ApiServerHandle, Authenticator, Faults, ServerConfig, Store};
use cluster_sim::{ClusterOptions, ClusterSim, ClusterSimHandle, Ipv4Prefix};
use kube::Client;
use mongod_sim::Network;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use crate::runtime::MongodRuntime;
use federation_sim::control_plane::{ControlPlane, MemberCluster};

/// How often each cluster's kubelet refreshes the Secret and ConfigMap
/// volumes of running containers (cluster-sim's `volume_sync_period`). The
/// real kubelet syncs a pod every minute (`--sync-frequency`) plus its cache's
/// propagation delay; the lab uses 2 s so that a rotated TLS Secret reaches
/// mongod's files within a scenario's patience. Nothing may depend on the
/// exact delay: on a real cluster it is up to a minute or more.
pub const VOLUME_SYNC_PERIOD: Duration = Duration::from_secs(2);

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
    /// Whether the operators elect a leader on a Lease (the chart's default);
    /// without, each runs alone and takes no Lease.
    pub leader_election: bool,
}

impl LabOptions {
    /// Defaults for a checkout: lab number 10, three clusters, state in `.lab/`, the
    /// operator built next to the running executable.
    pub fn for_checkout(repo: &Path) -> Result<Self> {
        Ok(LabOptions {
            number: 10,
            clusters: 3,
            state_dir: repo.join(".lab"),
            operator: sibling_binary("mongodb-member-operator")?,
            crds: repo.join("crds"),
            leader_election: true,
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
    /// The addresses its pods get.
    pub pods: Ipv4Prefix,
    /// Its API server.
    pub api: ApiServerHandle,
    /// Its node components.
    pub node: ClusterSimHandle,
    /// A client for it (a cluster administrator).
    pub client: Client,
    alias_sync: JoinHandle<()>,
    /// The token the operator sends: its ServiceAccount's once installed
    /// (an administrator's until then, used by no operator).
    operator_token: String,
}

/// The running lab.
pub struct Lab {
    options: LabOptions,
    network: Arc<Network>,
    clusters: Vec<LabCluster>,
    operators: Vec<Option<Child>>,
    standbys: Vec<Child>,
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
        let rbac = render_operator_rbac().await?;
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
            standbys: Vec::new(),
            kubeconfig,
        };
        for cluster in &lab.clusters {
            lab.kubectl(
                &cluster.name,
                &["apply", "-f", &lab.options.crds.display().to_string()],
            )
            .await?;
        }
        lab.install_operator_rbac(&rbac).await?;
        for index in 0..lab.clusters.len() {
            let child = lab.spawn_operator(index)?;
            lab.operators.push(Some(child));
        }
        Ok(lab)
    }

    /// Where the lab keeps its kubeconfig, logs and state.
    pub fn state_dir(&self) -> &Path {
        &self.options.state_dir
    }

    /// The kubeconfig with one context per cluster.
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    /// The running clusters.
    pub fn clusters(&self) -> &[LabCluster] {
        &self.clusters
    }

    /// Whether the pods of cluster `name` reach themselves through their own
    /// `VIP:nodePort` (hairpin traffic), in both the cluster's proxy and the
    /// members' network (mongod's isSelf dials its own host through it).
    pub fn set_hairpin(&self, name: &str, hairpin: bool) -> Result<()> {
        let cluster = self
            .clusters
            .iter()
            .find(|c| c.name == name)
            .with_context(|| format!("no cluster {name}"))?;
        cluster.node.set_hairpin(hairpin);
        self.network.set_hairpin(name, hairpin);
        Ok(())
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

    /// Installs the release's namespace and the member chart's ServiceAccount
    /// and RBAC in every cluster and gives each operator that ServiceAccount's
    /// token (see the module doc).
    async fn install_operator_rbac(&mut self, rbac: &OperatorRbac) -> Result<()> {
        let file = self.options.state_dir.join("operator-rbac.yaml");
        std::fs::write(&file, &rbac.manifests)
            .with_context(|| format!("writing {}", file.display()))?;
        let file = file.display().to_string();
        for index in 0..self.clusters.len() {
            let name = self.clusters[index].name.clone();
            self.kubectl(&name, &["apply", "-f", &file]).await?;
            let cluster = &mut self.clusters[index];
            let auth = cluster
                .api
                .auth()
                .context("the lab's API servers authenticate")?;
            cluster.operator_token = auth.service_account_token(
                cluster.api.store(),
                &rbac.namespace,
                &rbac.service_account,
            );
        }
        Ok(())
    }

    fn spawn_operator(&self, index: usize) -> Result<Child> {
        self.spawn_operator_replica(index, 0)
    }

    /// Starts replica `replica` of cluster `index`'s operator (0 is the one
    /// the lab starts; the others stand by for leadership, as the chart's
    /// replicas do): its own pod name, log and metrics address.
    fn spawn_operator_replica(&self, index: usize, replica: u8) -> Result<Child> {
        let cluster = &self.clusters[index];
        let kubeconfig = self
            .options
            .state_dir
            .join(format!("operator-{}.kubeconfig", cluster.name));
        std::fs::write(
            &kubeconfig,
            cluster
                .api
                .kubeconfig_with_token(&cluster.name, &cluster.operator_token),
        )?;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.replica_log(index, replica))?;
        let pod_name = match replica {
            0 => format!("operator-{}", cluster.name),
            n => format!("operator-{}-{n}", cluster.name),
        };
        let mut command = Command::new(&self.options.operator);
        if self.options.leader_election {
            command.env("LEADER_ELECTION_NAMESPACE", RELEASE);
        }
        command
            .env("KUBECONFIG", &kubeconfig)
            .env(
                "METRICS_ADDRESS",
                self.metrics_address(index, replica).to_string(),
            )
            .env("RUST_LOG", "info")
            .env("CLUSTER_NAME", &cluster.name)
            .env("POD_NAME", pod_name)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", self.options.operator.display()))
    }

    /// Where cluster `index`'s operator logs.
    pub fn operator_log(&self, index: usize) -> PathBuf {
        self.replica_log(index, 0)
    }

    /// Where replica `replica` of cluster `index`'s operator logs.
    pub fn replica_log(&self, index: usize, replica: u8) -> PathBuf {
        let name = &self.clusters[index].name;
        let file = match replica {
            0 => format!("operator-{name}.log"),
            n => format!("operator-{name}-{n}.log"),
        };
        self.options.state_dir.join(file)
    }

    /// The `/metrics`, `/healthz` and `/readyz` address of replica `replica`
    /// of cluster `index`'s operator.
    pub fn metrics_address(&self, index: usize, replica: u8) -> SocketAddr {
        SocketAddr::from((
            Ipv4Addr::new(127, self.options.number, index as u8 + 1, 101 + replica),
            8080,
        ))
    }

    /// Starts a second replica of cluster `index`'s operator, which stands by
    /// while the first leads; stopped with the lab.
    pub fn start_standby_operator(&mut self, index: usize) -> Result<()> {
        let child = self.spawn_operator_replica(index, 1)?;
        self.standbys.push(child);
        Ok(())
    }

    /// The process id of cluster `index`'s operator, while it runs (e.g. to read
    /// its CPU time from `/proc/<pid>/stat`).
    pub fn operator_pid(&self, index: usize) -> Option<u32> {
        self.operators.get(index)?.as_ref()?.id()
    }

    /// Whether the operators run with leader election.
    pub fn leader_election(&self) -> bool {
        self.options.leader_election
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

    /// Stops every operator, node and API server the lab started; its
    /// control plane's objects go with it.
    pub async fn shutdown(mut self) {
        self.control_plane().shut_down();
        for child in self.operators.iter_mut().filter_map(Option::as_mut) {
            let _ = child.kill().await;
        }
        for child in &mut self.standbys {
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
    // RBAC enforced; a request without a token (kubectl over plain HTTP) is an
    // administrator, as on kube-apiserver's former insecure port.
    let auth = Arc::new(Authenticator::new().unauthenticated(Unauthenticated::Admin));
    let admin_token = auth.admin_token("lab-admin");
    let api = ApiServer::start_with(
        api_addr,
        Store::new(),
        Arc::new(Faults::default()),
        ServerConfig::with_rbac(auth),
    )
    .await
    .with_context(|| format!("starting the API server of cluster {name} on {api_addr}"))?;
    let mut config = kube::Config::new(api.url().parse()?);
    config.auth_info.token = Some(admin_token.clone().into());
    let client = Client::try_from(config)?;
    let vip = Ipv4Addr::new(127, options.number, third, 1);
    let pods = Ipv4Prefix::new(
        Ipv4Addr::new(127, options.number, 128 + 16 * index as u8, 0),
        20,
    )?;
    let runtime = Arc::new(MongodRuntime::new(network.clone(), name));
    let mut cluster_options = ClusterOptions::new(name, vip, pods, runtime);
    cluster_options.volume_sync_period = VOLUME_SYNC_PERIOD;
    let node = ClusterSim::start(client.clone(), cluster_options).await?;
    let alias_sync = tokio::spawn(sync_aliases(network.clone(), node.routes()));
    Ok(LabCluster {
        name: name.to_string(),
        vip,
        pods,
        api,
        node,
        client,
        alias_sync,
        operator_token: admin_token,
    })
}

/// The release the lab installs the member chart as.
const RELEASE: &str = "mongodb-member-operator";

/// The member chart's ServiceAccount and RBAC objects, rendered.
struct OperatorRbac {
    /// A Namespace (the release's) then every ServiceAccount, Role,
    /// ClusterRole and binding the chart renders, as YAML documents.
    manifests: String,
    /// The release namespace.
    namespace: String,
    /// The operator's ServiceAccount.
    service_account: String,
}

/// Renders the member chart with helm-python-sdk (`MMO_PYTHON`), with the
/// lab's values: every namespace watched (the lab runs the operator without
/// `WATCH_NAMESPACE`). Without the tools, an error that says how to get them.
async fn render_operator_rbac() -> Result<OperatorRbac> {
    let missing = |why: String| -> Result<OperatorRbac> {
        bail!(
            "{why}: the lab runs each operator as the member chart's ServiceAccount, in the \
             chart's namespace, and renders the chart with helm-python-sdk; run \
             `eval \"$(hack/test-tools.sh)\"` first (hack/demo.sh and hack/test.sh do)"
        )
    };
    let Some(python) = std::env::var_os("MMO_PYTHON").filter(|p| !p.is_empty()) else {
        return missing("MMO_PYTHON is not set".to_string());
    };
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let output = Command::new(&python)
        .arg(repo.join("hack/deploy-check/render_charts.py"))
        .arg("render")
        .arg(repo.join("charts/mongodb-member-operator"))
        .arg("{}")
        .arg(RELEASE)
        .arg(RELEASE)
        .output()
        .await;
    let output = match output {
        Ok(output) if output.status.success() => output,
        Ok(output) => {
            return missing(format!(
                "rendering the member chart with helm-python-sdk ({}) failed: {}",
                PathBuf::from(&python).display(),
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
        Err(error) => {
            return missing(format!(
                "running {} failed: {error}",
                PathBuf::from(&python).display()
            ))
        }
    };
    let templates: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&output.stdout).context("render_charts.py prints JSON")?;
    let mut manifests = format!("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: {RELEASE}\n");
    let mut service_account = None;
    for (path, text) in &templates {
        if path.ends_with("NOTES.txt") {
            continue;
        }
        for document in serde_yaml::Deserializer::from_str(text) {
            let doc: serde_json::Value = serde::Deserialize::deserialize(document)
                .with_context(|| format!("{path} is not YAML"))?;
            let kind = doc["kind"].as_str().unwrap_or_default();
            if !matches!(
                kind,
                "ServiceAccount" | "Role" | "ClusterRole" | "RoleBinding" | "ClusterRoleBinding"
            ) {
                continue;
            }
            if kind == "ServiceAccount" {
                service_account = doc["metadata"]["name"].as_str().map(String::from);
            }
            manifests.push_str("---\n");
            manifests.push_str(&serde_yaml::to_string(&doc)?);
        }
    }
    let service_account = service_account.context("the member chart renders no ServiceAccount")?;
    Ok(OperatorRbac {
        manifests,
        namespace: RELEASE.to_string(),
        service_account,
    })
}

/// Keeps mongod-sim's routes in step with kube-proxy's: members dial
/// `VIP:nodePort` through them, so a member finds itself at that host (mongod's
/// isSelf slow path) only while kube-proxy routes it to the member's pod.
async fn sync_aliases(
    network: Arc<Network>,
    mut routes: tokio::sync::watch::Receiver<cluster_sim::NodePortRoutes>,
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
