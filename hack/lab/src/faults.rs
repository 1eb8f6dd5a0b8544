//! Fault injection into a running lab, for people and scripts: `lab up` serves a
//! one-line-per-connection control socket (its address is written to
//! `STATE_DIR/control`), and `lab fault …` sends one command to it.
//!
//! | command | effect |
//! |---|---|
//! | `kill-mongod CLUSTER POD` | kill the pod's mongod container (the kubelet restarts it) |
//! | `lose-cluster CLUSTER` | the cluster's containers and NodePorts stop, its members are cut off |
//! | `cut-vip CLUSTER` | connections into the cluster's VIP and members fail; pods keep running |
//! | `heal CLUSTER` | undo `lose-cluster` and `cut-vip` |
//! | `no-hairpin CLUSTER` / `hairpin CLUSTER` | the cluster's pods cannot / can reach their own `VIP:nodePort` |
//! | `lag CLUSTER POD MILLIS` | replication lag of the pod's member |
//! | `api-errors CLUSTER COUNT` | the cluster's API server answers the next COUNT requests with 503 |
//! | `drop-watches CLUSTER` | the cluster's API server ends every open watch |

use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use anyhow::{anyhow, bail, Context, Result};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::lab::Lab;

/// Port of mongod in member pods.
const MONGOD_PORT: u16 = 27017;

/// Serves fault commands on `127.n.0.1` until the future is dropped; writes the
/// address to `state_dir/control`.
pub async fn serve(lab: &Lab, number: u8, state_dir: &Path) -> Result<()> {
    let listener =
        TcpListener::bind(SocketAddr::from((Ipv4Addr::new(127, number, 0, 1), 0))).await?;
    std::fs::write(
        state_dir.join("control"),
        listener.local_addr()?.to_string(),
    )?;
    loop {
        let (stream, _) = listener.accept().await?;
        let (read, mut write) = stream.into_split();
        let mut line = String::new();
        if BufReader::new(read).read_line(&mut line).await.is_err() {
            continue;
        }
        let reply = match apply(lab, line.split_whitespace().collect::<Vec<_>>().as_slice()).await {
            Ok(done) => format!("ok: {done}\n"),
            Err(error) => format!("error: {error:#}\n"),
        };
        let _ = write.write_all(reply.as_bytes()).await;
    }
}

/// Sends one command to a running `lab up` and returns its answer.
pub async fn send(state_dir: &Path, command: &[String]) -> Result<String> {
    let path = state_dir.join("control");
    let address = std::fs::read_to_string(&path)
        .with_context(|| format!("reading {} (is `lab up` running?)", path.display()))?;
    let mut stream =
        tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(address.trim())).await??;
    stream
        .write_all(format!("{}\n", command.join(" ")).as_bytes())
        .await?;
    let mut reply = String::new();
    BufReader::new(stream).read_line(&mut reply).await?;
    match reply.strip_prefix("ok: ") {
        Some(done) => Ok(done.trim().to_string()),
        None => bail!("{}", reply.trim().trim_start_matches("error: ")),
    }
}

async fn apply(lab: &Lab, words: &[&str]) -> Result<String> {
    let cluster = |name: &str| {
        lab.clusters()
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| anyhow!("no cluster {name}"))
    };
    match words {
        ["kill-mongod", name, pod] => {
            cluster(name)?
                .node
                .kill_container("default", pod, "mongod")
                .await?;
            Ok(format!("killed mongod of {pod} in {name}"))
        }
        ["lose-cluster", name] => {
            cluster(name)?.node.lose_cluster();
            lab.network().cut_site(name);
            Ok(format!("cluster {name} is lost"))
        }
        ["cut-vip", name] => {
            cluster(name)?.node.cut_vip();
            lab.network().cut_site_ingress(name);
            Ok(format!("the VIP of {name} is cut"))
        }
        ["heal", name] => {
            cluster(name)?.node.heal();
            lab.network().heal_site(name);
            lab.network().heal_site_ingress(name);
            Ok(format!("cluster {name} healed"))
        }
        ["no-hairpin", name] => {
            lab.set_hairpin(name, false)?;
            Ok(format!(
                "the pods of {name} cannot reach their own VIP:nodePort"
            ))
        }
        ["hairpin", name] => {
            lab.set_hairpin(name, true)?;
            Ok(format!("the pods of {name} reach their own VIP:nodePort"))
        }
        ["lag", name, pod, millis] => {
            let millis: u64 = millis.parse().context("MILLIS")?;
            let pods: Api<Pod> = Api::namespaced(cluster(name)?.client.clone(), "default");
            let ip = pods
                .get(pod)
                .await?
                .status
                .and_then(|s| s.pod_ip)
                .ok_or_else(|| anyhow!("{pod} has no IP"))?;
            lab.network().set_lag(
                &format!("{ip}:{MONGOD_PORT}"),
                Duration::from_millis(millis),
            );
            Ok(format!("{pod} lags {millis} ms"))
        }
        ["api-errors", name, count] => {
            let count: u64 = count.parse().context("COUNT")?;
            cluster(name)?
                .api
                .faults()
                .fail_next(count, apiserver_sim::InjectedError::Unavailable);
            Ok(format!(
                "the API server of {name} fails the next {count} requests"
            ))
        }
        ["drop-watches", name] => {
            cluster(name)?.api.faults().drop_watches();
            Ok(format!("the API server of {name} dropped its watches"))
        }
        _ => bail!(
            "unknown fault {:?}; see `lab fault --help`",
            words.join(" ")
        ),
    }
}
