//! End-to-end: the real operator binary, once per simulated cluster, forms and
//! changes one replica set across clusters, driven by the control-plane stand-in,
//! and reports it through `kubectl`. Each test runs its own lab on its own
//! 127.n.*.* addresses and shuts everything down.

use std::path::PathBuf;
use std::time::Duration;

use lab::controlplane::{InstanceRequest, Split};
use lab::lab::{sibling_binary, Lab, LabOptions};
use lab::observe;
use mongodb_member_operator::api::ReplicaSetSettings;

const READY_TIMEOUT: Duration = Duration::from_secs(240);

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

async fn lab(number: u8, clusters: usize) -> Lab {
    let state_dir = std::env::temp_dir().join(format!("mmo-lab-{number}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state_dir);
    let options = LabOptions {
        number,
        clusters,
        state_dir,
        operator: sibling_binary("mongodb-member-operator").expect("the operator binary is built with the workspace"),
        crds: repo().join("crds"),
    };
    Lab::start(options).await.expect("the lab starts")
}

fn request(name: &str, split: &str) -> InstanceRequest {
    InstanceRequest {
        name: name.to_string(),
        namespace: "default".to_string(),
        split: Split::parse(split).unwrap(),
        image: "mongo:7.0".to_string(),
        settings: ReplicaSetSettings { election_timeout_millis: 2_000, heartbeat_interval_millis: 500, catch_up_timeout_millis: -1, chaining_allowed: true },
    }
}

/// Shows each operator's log when a test fails, then shuts the lab down.
async fn finish(lab: Lab, outcome: Result<(), String>) {
    if let Err(message) = &outcome {
        for index in 0..lab.clusters().len() {
            let log = std::fs::read_to_string(lab.operator_log(index)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!("--- operator {} (last lines) ---\n{}", lab.clusters()[index].name, tail.into_iter().rev().collect::<Vec<_>>().join("\n"));
        }
        eprintln!("{message}");
    }
    lab.shutdown().await;
    if let Err(message) = outcome {
        panic!("{message}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_split_forms_one_replica_set_over_three_clusters_readable_with_kubectl() {
    let lab = lab(41, 3).await;
    let outcome = async {
        let control_plane = lab.control_plane();
        let split = Split::parse("a=2,b=2,c=1").unwrap();
        control_plane.apply(&request("demo", "a=2,b=2,c=1")).await.map_err(|e| e.to_string())?;
        let views = observe::wait_ready(&control_plane, "default", "demo", &split, READY_TIMEOUT, |_| {}).await.map_err(|e| e.to_string())?;
        for view in &views {
            if view.replset.len() != 5 {
                return Err(format!("cluster {} lists {} members", view.cluster, view.replset.len()));
            }
        }
        let primaries = lab.network().primaries();
        if primaries.len() != 1 {
            return Err(format!("expected exactly one primary, found {primaries:?}"));
        }
        let table = lab.kubectl("a", &["get", "mongodb"]).await.map_err(|e| e.to_string())?;
        for column in ["STATE", "MEMBERS", "PRIMARY", "AGE", "Running", "2/2"] {
            if !table.contains(column) {
                return Err(format!("kubectl get mongodb lacks {column}:\n{table}"));
            }
        }
        let described = lab.kubectl("a", &["describe", "mongodb", "demo"]).await.map_err(|e| e.to_string())?;
        for needle in ["Initiate", "Ready", "ReplicaSetInitialized"] {
            if !described.contains(needle) {
                return Err(format!("kubectl describe mongodb lacks {needle}:\n{described}"));
            }
        }
        Ok(())
    }
    .await;
    finish(lab, outcome).await;
}
