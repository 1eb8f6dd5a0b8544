//! `lab up` serves its control plane to the other `lab` commands over a
//! local socket: one JSON [`Request`] per connection, one JSON answer.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value as Json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use super::{ControlPlane, OverridePolicy, Split, Submission};

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
