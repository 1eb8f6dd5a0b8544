//! Adversarial end-to-end scenarios: the real operator binary, once per
//! simulated cluster, under what a replica set across clusters meets at its
//! worst. Each test runs its own lab (numbers 60–79) and shuts it down; each
//! that changes the set runs a majority writer whose every acknowledged write
//! must survive. The scenarios, by subject:
//! - [`idle`]: the cost of an idle instance;
//! - [`cut_off`]: clusters cut off from each other (a set left without a
//!   primary; the rsInit cluster's object recreated while it is cut off from a
//!   live set);
//! - [`overridden`]: one cluster's objects changed by a user's OverridePolicy
//!   (settings that differ, an object the API server refuses, a member Service
//!   given another nodePort);
//! - [`step_down`]: a primary that cannot step down.
//!
//! This module holds what they share: waiting on the clusters' status, the
//! OverridePolicy for one cluster, the members running in a cluster, Events,
//! and the check that the set is still the one first initiated.

mod cut_off;
mod idle;
mod overridden;
mod step_down;

use std::time::{Duration, Instant};

use crate::harness::*;
use federation_sim::control_plane::Split;
use federation_sim::karmada::{OverridePolicy, Overrider, ResourceRef};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Api;
use lab::lab::Lab;
use lab::observe;
use mongodb::bson::Document;
use mongodb_member_operator::api::MongoDB;

/// Prints how far into the test a phase ended (the test output shows where the
/// time goes).
fn phase(started: Instant, what: &str) {
    eprintln!("[{:>5.1} s] {what}", started.elapsed().as_secs_f64());
}

/// Condition `type_` of an object's status.
fn condition<'a>(mongodb: &'a MongoDB, type_: &str) -> Option<&'a Condition> {
    mongodb
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
}

/// Waits until every cluster reports the set `split` asks for (Running, one
/// primary, the same members everywhere).
async fn ready(lab: &Lab, name: &str, split: &str) -> Outcome {
    let split_parsed = Split::parse(split).map_err(fail("split"))?;
    observe::wait_ready(
        &lab.control_plane(),
        "default",
        name,
        &split_parsed,
        READY_TIMEOUT,
        |_| {},
    )
    .await
    .map(drop)
    .map_err(fail(split))
}

/// Waits until `check` holds for cluster `cluster`'s object; returns it.
async fn wait_in(
    lab: &Lab,
    cluster: usize,
    name: &str,
    what: &str,
    check: impl Fn(&MongoDB) -> bool,
) -> Result<MongoDB, String> {
    let api: Api<MongoDB> = Api::namespaced(lab.clusters()[cluster].client.clone(), "default");
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let current = api.get_opt(name).await.map_err(fail("MongoDB"))?;
        if let Some(mongodb) = current.as_ref().filter(|m| check(m)) {
            return Ok(mongodb.clone());
        }
        if Instant::now() > deadline {
            let conditions = current
                .and_then(|m| m.status)
                .map(|s| s.conditions)
                .unwrap_or_default();
            return Err(format!(
                "{what} in cluster {}: not after {READY_TIMEOUT:?}; conditions {conditions:?}",
                lab.clusters()[cluster].name
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A user's OverridePolicy with one `plaintext` `add` rule for one cluster.
fn override_in(
    cluster: &str,
    resource: ResourceRef,
    path: &str,
    value: serde_json::Value,
) -> OverridePolicy {
    OverridePolicy {
        labels: Default::default(),
        resource,
        clusters: Some(vec![cluster.to_string()]),
        overrider: Overrider::AddPath {
            path: path.to_string(),
            value,
        },
    }
}

/// Listen addresses (`podIP:27017`) of the running mongod-sim members of
/// cluster `cluster` (those in its pods' prefix).
fn running_members(lab: &Lab, cluster: usize) -> Vec<String> {
    let pods = lab.clusters()[cluster].pods;
    lab.network()
        .running()
        .into_iter()
        .filter(|listen| {
            listen
                .parse::<std::net::SocketAddr>()
                .is_ok_and(|address| match address.ip() {
                    std::net::IpAddr::V4(ip) => pods.contains(ip),
                    std::net::IpAddr::V6(_) => false,
                })
        })
        .collect()
}

/// The Events of `reason` about `name` in cluster `cluster`.
async fn events(lab: &Lab, cluster: usize, name: &str, reason: &str) -> Result<Vec<Event>, String> {
    let api: Api<Event> = Api::namespaced(lab.clusters()[cluster].client.clone(), "default");
    let list = api
        .list(&Default::default())
        .await
        .map_err(fail("events"))?;
    Ok(list
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect())
}

/// The set's config is the first one's set (same replicaSetId) and was never
/// force-reconfigured.
fn same_set(first: &Document, last: &Document) -> Outcome {
    if replica_set_id(first) != replica_set_id(last) || version(last) >= 10_000 {
        return Err(format!(
            "second initiate or forced reconfig: replicaSetId {:?} then {:?}, version {}",
            replica_set_id(first),
            replica_set_id(last),
            version(last)
        ));
    }
    Ok(())
}
