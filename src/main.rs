//! The operator binary: flags (with environment fallbacks), logging, the
//! operational endpoints, a startup check for the CRD, leader election when
//! asked for, then the controller until SIGTERM or Ctrl-C (or until
//! leadership is lost: the process then exits, to start again as a candidate).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::{Api, Client};
use mongodb_member_operator::kube_clients::KubeClients;
use mongodb_member_operator::leader::LeaderElection;
use mongodb_member_operator::{controller, telemetry};

/// Keeps one MongoDB replica set alive across the member clusters of a Karmada
/// federation; run one copy in every member cluster.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// Namespace to watch; empty watches every namespace.
    #[arg(long, env = "WATCH_NAMESPACE", default_value = "")]
    namespace: String,
    /// Address of the /metrics, /healthz and /readyz endpoints.
    #[arg(long, env = "METRICS_ADDRESS", default_value = "0.0.0.0:8080")]
    metrics_address: SocketAddr,
    /// How many MongoDB objects are reconciled at once.
    #[arg(long, env = "CONCURRENCY", default_value_t = 16)]
    concurrency: u16,
    /// Log format.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "text")]
    log_format: telemetry::LogFormat,
    /// This cluster's name, the `cluster` label of every metric.
    #[arg(long, env = "CLUSTER_NAME", default_value = "")]
    cluster_name: String,
    /// Namespace of the leader-election Lease; empty: no leader election (run
    /// one replica only).
    #[arg(long, env = "LEADER_ELECTION_NAMESPACE", default_value = "")]
    leader_election_namespace: String,
    /// This replica's identity in the Lease (the pod's name); empty: the host name.
    #[arg(long, env = "POD_NAME", default_value = "")]
    pod_name: String,
}

fn main() -> anyhow::Result<()> {
    // Before the runtime's threads exist, so none has an arena of its own.
    mongodb_member_operator::allocator::limit_arenas();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?
        .block_on(operate())
}

async fn operate() -> anyhow::Result<()> {
    let args = Args::parse();
    telemetry::init_logging(args.log_format);
    let metrics = Arc::new(telemetry::Metrics::new(&args.cluster_name));
    let endpoints = tokio::spawn(telemetry::serve(args.metrics_address, metrics.clone()));

    let clients = KubeClients::infer()
        .await
        .context("connecting to the Kubernetes API server")?;
    wait_for_crd(&clients.requests).await?;
    let leadership = match Some(&args.leader_election_namespace).filter(|ns| !ns.is_empty()) {
        Some(lease_namespace) => {
            let mut election =
                LeaderElection::new(clients.requests.clone(), lease_namespace, identity(&args));
            // A replica standing by is ready: it takes over when the leader goes.
            metrics.set_ready(true);
            tokio::select! {
                () = election.acquire() => {}
                _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted while standing by"),
            }
            metrics.set_ready(false);
            Some(election.hold())
        }
        None => None,
    };
    let namespace = Some(args.namespace).filter(|ns| !ns.is_empty());
    tracing::info!(
        namespace = namespace.as_deref().unwrap_or("<all>"),
        concurrency = args.concurrency,
        "starting the controller"
    );
    let controller = controller::run(clients, namespace, args.concurrency, metrics);
    match leadership {
        Some(held) => tokio::select! {
            () = controller => {}
            lost = held => {
                tracing::error!(error = %lost, "leadership lost; exiting");
                std::process::exit(1);
            }
        },
        None => controller.await,
    }
    endpoints.abort();
    tracing::info!("stopped");
    Ok(())
}

/// This replica's name in the Lease: the pod's name, else the host's.
fn identity(args: &Args) -> String {
    if !args.pod_name.is_empty() {
        return args.pod_name.clone();
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|name| name.trim().to_string())
        .ok()
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| format!("mongodb-member-operator-{}", std::process::id()))
}

/// Waits until the `MongoDB` CRD is installed, saying what is missing.
async fn wait_for_crd(client: &Client) -> anyhow::Result<()> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let name = "mongodbs.middleware.fedstate.io";
    let mut warned = false;
    loop {
        match crds.get_opt(name).await {
            Ok(Some(_)) => return Ok(()),
            Ok(None) => {
                if !warned {
                    tracing::warn!("CRD {name} is not installed: apply crds/mongodb.yaml (or install the Helm chart); waiting for it");
                    warned = true;
                }
            }
            Err(error) => tracing::warn!(%error, "cannot check for CRD {name}; retrying"),
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            _ = tokio::signal::ctrl_c() => anyhow::bail!("interrupted while waiting for CRD {name}"),
        }
    }
}
