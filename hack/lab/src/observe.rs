//! Reading the lab's state back: what every cluster's `MongoDB` status says, the
//! readiness criterion of the demo and the tests, and the human table of
//! `lab status`.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use anyhow::{bail, Result};
use mongodb_member_operator::api::{MongoDB, MongoState};

use crate::controlplane::{ControlPlane, Split};

/// One cluster's view of an instance.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ClusterView {
    /// Cluster name.
    pub cluster: String,
    /// `spec.members`.
    pub desired: i32,
    /// `status.state`.
    pub state: Option<String>,
    /// `status.readyMembers`.
    pub ready: Option<String>,
    /// `status.primary`.
    pub primary: Option<String>,
    /// `status.configVersion`.
    pub config_version: Option<i64>,
    /// Member hosts in `status.replset`, with their state.
    pub replset: Vec<(String, String)>,
    /// The `Ready` condition's message.
    pub message: Option<String>,
}

impl ClusterView {
    fn of(cluster: &str, mongodb: &MongoDB) -> ClusterView {
        let status = mongodb.status.clone().unwrap_or_default();
        ClusterView {
            cluster: cluster.to_string(),
            desired: mongodb.spec.members,
            state: status.state.map(|s| format!("{s:?}")),
            ready: status.ready_members.clone(),
            primary: status.primary.clone(),
            config_version: status.config_version,
            replset: status
                .replset
                .iter()
                .map(|m| (m.name.clone(), m.state_str.clone()))
                .collect(),
            message: status
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.message.clone()),
        }
    }
}

/// Every cluster's view of `name`.
pub async fn views(
    control_plane: &ControlPlane,
    namespace: &str,
    name: &str,
) -> Result<Vec<ClusterView>> {
    Ok(control_plane
        .statuses(namespace, name)
        .await?
        .iter()
        .map(|(cluster, mongodb)| ClusterView::of(cluster, mongodb))
        .collect())
}

/// Whether the instance is what `split` asks for: every cluster hosting members
/// is Running with its members ready, every cluster's `replset` lists the same
/// `split.total()` members with exactly one PRIMARY, and every cluster that
/// should host none has left the set.
pub fn is_ready(views: &[ClusterView], split: &Split) -> bool {
    let total = split.total() as usize;
    let hosting: Vec<&ClusterView> = views
        .iter()
        .filter(|v| split.members_of(&v.cluster) > 0)
        .collect();
    if hosting.len() != split.0.values().filter(|c| **c > 0).count() {
        return false;
    }
    let member_sets: BTreeSet<Vec<String>> = hosting
        .iter()
        .map(|v| v.replset.iter().map(|(host, _)| host.clone()).collect())
        .collect();
    hosting.iter().all(|v| {
        v.state.as_deref() == Some(format!("{:?}", MongoState::Running).as_str())
            && v.desired == split.members_of(&v.cluster) as i32
            && v.replset.len() == total
            && v.replset
                .iter()
                .filter(|(_, state)| state == "PRIMARY")
                .count()
                == 1
            && v.replset
                .iter()
                .all(|(_, state)| state == "PRIMARY" || state == "SECONDARY" || state == "ARBITER")
    }) && member_sets.len() == 1
}

/// Waits until [`is_ready`], printing progress lines through `progress` when the
/// picture changes. Fails after `timeout` with the last picture.
pub async fn wait_ready(
    control_plane: &ControlPlane,
    namespace: &str,
    name: &str,
    split: &Split,
    timeout: Duration,
    mut progress: impl FnMut(&[ClusterView]),
) -> Result<Vec<ClusterView>> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let current = views(control_plane, namespace, name)
            .await
            .unwrap_or_default();
        let picture = table(&current);
        if picture != last {
            progress(&current);
            last = picture;
        }
        if is_ready(&current, split) {
            return Ok(current);
        }
        if Instant::now() > deadline {
            bail!("{name} was not ready after {timeout:?}:\n{last}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The human table of `lab status`.
pub fn table(views: &[ClusterView]) -> String {
    let mut out = format!(
        "{:<8} {:>7} {:<12} {:>6} {:<22} {:>7}  {}\n",
        "CLUSTER", "DESIRED", "STATE", "READY", "PRIMARY", "VERSION", "REPLSET"
    );
    for view in views {
        let replset: Vec<String> = view
            .replset
            .iter()
            .map(|(host, state)| format!("{host}={state}"))
            .collect();
        out.push_str(&format!(
            "{:<8} {:>7} {:<12} {:>6} {:<22} {:>7}  {}\n",
            view.cluster,
            view.desired,
            view.state.as_deref().unwrap_or("-"),
            view.ready.as_deref().unwrap_or("-"),
            view.primary.as_deref().unwrap_or("-"),
            view.config_version
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into()),
            if replset.is_empty() {
                "-".to_string()
            } else {
                replset.join(" ")
            },
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(cluster: &str, desired: i32, state: &str, members: &[(&str, &str)]) -> ClusterView {
        ClusterView {
            cluster: cluster.into(),
            desired,
            state: Some(state.into()),
            ready: None,
            primary: None,
            config_version: Some(3),
            replset: members
                .iter()
                .map(|(h, s)| (h.to_string(), s.to_string()))
                .collect(),
            message: None,
        }
    }

    #[test]
    fn ready_needs_every_cluster_running_one_primary_and_the_same_members() {
        let members = [
            ("127.0.1.1:30001", "PRIMARY"),
            ("127.0.2.1:30001", "SECONDARY"),
        ];
        let split = Split::parse("a=1,b=1").unwrap();
        let ready = vec![
            view("a", 1, "Running", &members),
            view("b", 1, "Running", &members),
        ];
        assert!(is_ready(&ready, &split));
        let reconciling = vec![
            view("a", 1, "Running", &members),
            view("b", 1, "Reconciling", &members),
        ];
        assert!(!is_ready(&reconciling, &split));
        let two_primaries = [
            ("127.0.1.1:30001", "PRIMARY"),
            ("127.0.2.1:30001", "PRIMARY"),
        ];
        assert!(!is_ready(
            &[
                view("a", 1, "Running", &two_primaries),
                view("b", 1, "Running", &two_primaries)
            ],
            &split
        ));
        assert!(
            !is_ready(&[view("a", 1, "Running", &members)], &split),
            "a cluster missing"
        );
    }
}
