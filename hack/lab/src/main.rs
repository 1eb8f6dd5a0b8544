//! `lab`: run simulated member clusters with the operator in each, and drive
//! them like a control plane would. See hack/lab/README.md.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Parser, Subcommand};
use kube::Client;
use lab::controlplane::{ControlPlane, InstanceRequest, MemberCluster, Split};
use lab::lab::{Lab, LabOptions};
use lab::observe;
use mongodb_member_operator::api::ReplicaSetSettings;

#[derive(Parser)]
#[command(
    about = "Simulated member clusters, a control-plane stand-in and the operator, on one machine"
)]
struct Cli {
    /// Where the lab keeps its kubeconfig, logs and cluster list.
    #[arg(long, global = true, default_value = ".lab")]
    state_dir: PathBuf,
    /// Lab number: the second octet of every address (127.N.x.y); `up` and `demo` only.
    #[arg(long, global = true, default_value_t = 10, value_parser = clap::value_parser!(u8).range(1..=250))]
    number: u8,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Bring the clusters and operators up and keep them running (foreground).
    Up {
        /// Number of clusters.
        #[arg(long, default_value_t = 3)]
        clusters: usize,
    },
    /// Create an instance split over clusters, e.g. `--split a=2,b=2,c=1`.
    Apply {
        /// Instance name.
        name: String,
        /// Members per cluster.
        #[arg(long)]
        split: String,
        /// Namespace.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Change an instance's split.
    Scale {
        /// Instance name.
        name: String,
        /// Members per cluster.
        #[arg(long)]
        split: String,
        /// Namespace.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Delete an instance in every cluster.
    Delete {
        /// Instance name.
        name: String,
        /// Namespace.
        #[arg(long, default_value = "default")]
        namespace: String,
    },
    /// Show every cluster's status of an instance.
    Status {
        /// Instance name.
        name: String,
        /// Namespace.
        #[arg(long, default_value = "default")]
        namespace: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Inject a fault into the running `lab up`: kill-mongod CLUSTER POD | lose-cluster CLUSTER |
    /// cut-vip CLUSTER | heal CLUSTER | lag CLUSTER POD MILLIS | api-errors CLUSTER COUNT |
    /// drop-watches CLUSTER.
    Fault {
        /// The fault and its arguments.
        #[arg(required = true, num_args = 1..)]
        command: Vec<String>,
    },
    /// Bring the lab up with a 2+2+1 replica set over three clusters and show it forming.
    Demo {
        /// Exit 0 once the replica set is ready (non-zero on timeout) instead of running on.
        #[arg(long)]
        exit_when_ready: bool,
        /// How long to wait for the replica set, in seconds.
        #[arg(long, default_value_t = 300)]
        timeout: u64,
    },
}

/// The clusters of a running lab, as `up` records them.
#[derive(serde::Serialize, serde::Deserialize)]
struct ClusterRecord {
    name: String,
    vip: Ipv4Addr,
    server: String,
}

#[tokio::main]
async fn main() -> Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "warn".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let state_dir = absolute(&cli.state_dir)?;
    match cli.command {
        Command::Up { clusters } => {
            let lab = start(&state_dir, cli.number, clusters).await?;
            println!(
                "lab up: {} clusters; kubeconfig: {}",
                lab.clusters().len(),
                lab.kubeconfig().display()
            );
            println!(
                "  e.g. kubectl --kubeconfig {} --context a get mongodb",
                lab.kubeconfig().display()
            );
            println!("  inject faults with: lab fault …  (see lab fault --help)");
            run_control_plane_until_interrupted(&lab, cli.number, &state_dir).await;
            lab.shutdown().await;
        }
        Command::Apply {
            name,
            split,
            namespace,
        }
        | Command::Scale {
            name,
            split,
            namespace,
        } => {
            let control_plane = connect(&state_dir)?;
            control_plane
                .apply(&request(&name, &namespace, Split::parse(&split)?))
                .await?;
            println!("{name}: applied split {split}");
        }
        Command::Delete { name, namespace } => {
            connect(&state_dir)?.delete(&namespace, &name).await?;
            println!("{name}: deleted; the operators take their members out of the replica set");
        }
        Command::Status {
            name,
            namespace,
            json,
        } => {
            let views = observe::views(&connect(&state_dir)?, &namespace, &name).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&views)?);
            } else {
                print!("{}", observe::table(&views));
            }
        }
        Command::Fault { command } => {
            println!("{}", lab::faults::send(&state_dir, &command).await?)
        }
        Command::Demo {
            exit_when_ready,
            timeout,
        } => {
            demo(
                &state_dir,
                cli.number,
                exit_when_ready,
                Duration::from_secs(timeout),
            )
            .await?
        }
    }
    Ok(())
}

async fn demo(
    state_dir: &Path,
    number: u8,
    exit_when_ready: bool,
    timeout: Duration,
) -> Result<()> {
    let lab = start(state_dir, number, 3).await?;
    let control_plane = lab.control_plane();
    let split = Split::parse("a=2,b=2,c=1")?;
    println!("lab up: 3 clusters (a, b, c); creating MongoDB \"demo\" with members a=2, b=2, c=1");
    control_plane
        .apply(&request("demo", "default", split.clone()))
        .await?;
    let pruner = tokio::spawn(lab.control_plane().run("default".into(), |deleted| {
        println!("control plane: deleted {deleted}")
    }));
    let outcome = tokio::select! {
        outcome = observe::wait_ready(&control_plane, "default", "demo", &split, timeout, |views| print!("\n{}", observe::table(views))) => outcome,
        _ = interrupted() => Err(anyhow::anyhow!("interrupted")),
    };
    let kubeconfig = lab.kubeconfig().display().to_string();
    match &outcome {
        Ok(_) => {
            println!("\nthe replica set is ready: 5 members over 3 clusters, one primary.");
            println!("look at it with kubectl:");
            println!("  kubectl --kubeconfig {kubeconfig} --context a get mongodb");
            println!("  kubectl --kubeconfig {kubeconfig} --context b describe mongodb demo");
            println!(
                "  kubectl --kubeconfig {kubeconfig} --context c get statefulsets,pods,services"
            );
            println!(
                "operator logs: {}/operator-<cluster>.log",
                state_dir.display()
            );
        }
        Err(error) => eprintln!("\n{error}"),
    }
    if !exit_when_ready && outcome.is_ok() {
        println!("\nrunning until Ctrl-C");
        interrupted().await;
    }
    pruner.abort();
    lab.shutdown().await;
    outcome.map(drop)
}

async fn start(state_dir: &Path, number: u8, clusters: usize) -> Result<Lab> {
    let repo = repo_root()?;
    let mut options = LabOptions::for_checkout(&repo)?;
    options.number = number;
    options.state_dir = state_dir.to_path_buf();
    options.clusters = clusters;
    let lab = Lab::start(options).await?;
    let records: Vec<ClusterRecord> = lab
        .clusters()
        .iter()
        .map(|c| ClusterRecord {
            name: c.name.clone(),
            vip: c.vip,
            server: c.api.url(),
        })
        .collect();
    std::fs::write(
        state_dir.join("clusters.json"),
        serde_json::to_string_pretty(&records)?,
    )?;
    Ok(lab)
}

async fn run_control_plane_until_interrupted(lab: &Lab, number: u8, state_dir: &Path) {
    tokio::select! {
        _ = lab.control_plane().run("default".into(), |deleted| println!("control plane: deleted {deleted}")) => {}
        result = lab::faults::serve(lab, number, state_dir) => {
            if let Err(error) = result {
                eprintln!("the fault control socket stopped: {error:#}");
            }
        }
        _ = interrupted() => {}
    }
}

/// Ctrl-C or SIGTERM: either way the lab shuts down what it started.
async fn interrupted() {
    match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(mut terminate) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = terminate.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

/// A control plane over the clusters a running `lab up` recorded.
fn connect(state_dir: &Path) -> Result<ControlPlane> {
    let path = state_dir.join("clusters.json");
    let text = std::fs::read_to_string(&path).with_context(|| {
        format!(
            "reading {} (is `lab up` running with this --state-dir?)",
            path.display()
        )
    })?;
    let records: Vec<ClusterRecord> = serde_json::from_str(&text)?;
    let clusters = records
        .into_iter()
        .map(|r| {
            Ok(MemberCluster {
                name: r.name,
                vip: r.vip,
                client: Client::try_from(kube::Config::new(r.server.parse()?))?,
            })
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(ControlPlane::new(clusters))
}

/// The lab's instances: MongoDB 7.0 with replica-set timeouts shortened for a
/// single machine.
fn request(name: &str, namespace: &str, split: Split) -> InstanceRequest {
    InstanceRequest {
        name: name.to_string(),
        namespace: namespace.to_string(),
        split,
        image: "mongo:7.0".to_string(),
        settings: ReplicaSetSettings {
            election_timeout_millis: 2_000,
            heartbeat_interval_millis: 500,
            catch_up_timeout_millis: -1,
            chaining_allowed: true,
        },
    }
}

fn absolute(path: &Path) -> Result<PathBuf> {
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()?.join(path)
    })
}

/// The checkout the lab runs from (it holds `crds/`).
fn repo_root() -> Result<PathBuf> {
    let mut dir = std::env::current_dir()?;
    loop {
        if dir.join("crds").is_dir() && dir.join("Cargo.toml").is_file() {
            return Ok(dir);
        }
        if !dir.pop() {
            bail!("run the lab from the repository (no crds/ found above the current directory)");
        }
    }
}
