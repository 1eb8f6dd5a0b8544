//! The member's own address: mongod proves that a config host (`VIP:NodePort`)
//! is itself only by connecting to it through the member Service (its isSelf
//! slow path), which routes to the pod only once it is Ready.
//!
//! - A member restarted by a roll is REMOVED until its Service routes to it
//!   again and a heartbeat re-checks isSelf: the roll waits for it, the status
//!   says why, and the roll completes with a w:"majority" writer losing
//!   nothing.
//! - On a cluster whose pods cannot reach their own `VIP:NodePort` (no
//!   hairpin), initiate fails with NodeNotFound (74): the operator says so in
//!   a Warning Event naming what to check and in condition `Degraded` for as
//!   long as it lasts, and the set forms once hairpin traffic works.
//!
//! Labs 100 and 101, one cluster each.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::harness::*;
use federation_sim::control_plane::{Submission, ToSubmission};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{Api, ResourceExt};
use lab::lab::Lab;
use mongod_sim::MemberState;
use mongodb_member_operator::api::MongoDB;
use mongodb_member_operator::build::statefulset::REVISION_ANNOTATION;
use mongodb_member_operator::status::{condition, ConditionType};

const SPLIT: &str = "a=3";
/// How long a roll of three members may take (each is REMOVED for a
/// readiness period after its restart, then catches up).
const ROLL_TIMEOUT: Duration = Duration::from_secs(240);
/// How long the operator may take to report a failed initiate.
const EVENT_TIMEOUT: Duration = Duration::from_secs(120);

/// The instance with `cpu` as its request and limit, at mongod's default
/// heartbeat interval and election timeout: a restarted member finds itself
/// at the first heartbeat after its Service routes to it, and the lab's
/// shorter interval (500 ms) left the operator too short a time to see it
/// REMOVED on a busy machine.
fn with_cpu(name: &str, cpu: &str) -> Submission {
    let mut instance = request(name, SPLIT);
    instance.settings.heartbeat_interval_millis = 2_000;
    instance.settings.election_timeout_millis = 10_000;
    let mut submission = instance.to_submission();
    let quantities = BTreeMap::from([
        ("cpu".to_string(), cpu.to_string()),
        ("memory".to_string(), "512Mi".to_string()),
    ]);
    submission.object.spec.resource.requests = quantities.clone();
    submission.object.spec.resource.limits = quantities;
    submission
}

/// Whether every member pod of `name` runs its StatefulSet's template revision.
async fn rolled(lab: &Lab, name: &str) -> Result<bool, String> {
    let client = lab.clusters()[0].client.clone();
    let sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
    let pods: Api<Pod> = Api::namespaced(client, "default");
    let prefix = format!("{name}-mongodb-");
    let mut seen = 0;
    for set in sets
        .list(&Default::default())
        .await
        .map_err(fail("sets"))?
        .items
    {
        if !set.name_any().starts_with(&prefix) {
            continue;
        }
        seen += 1;
        let wanted = set
            .spec
            .as_ref()
            .and_then(|s| s.template.metadata.as_ref())
            .and_then(|m| m.annotations.as_ref())
            .and_then(|a| a.get(REVISION_ANNOTATION))
            .cloned();
        let pod = pods
            .get_opt(&format!("{}-0", set.name_any()))
            .await
            .map_err(fail("pod"))?;
        let has = pod.and_then(|p| p.annotations().get(REVISION_ANNOTATION).cloned());
        if wanted.is_none() || wanted != has {
            return Ok(false);
        }
    }
    Ok(seen == 3)
}

/// Every condition message of every cluster's object, as one text.
async fn condition_messages(lab: &Lab, name: &str) -> Result<String, String> {
    Ok(statuses(lab, name)
        .await?
        .iter()
        .flat_map(|(_, m)| m.status.iter().flat_map(|s| s.conditions.clone()))
        .map(|c| format!("{}={}: {}", c.type_, c.reason, c.message))
        .collect::<Vec<_>>()
        .join("\n"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_restarted_before_its_service_routes_to_it_is_waited_for_and_said() {
    scenario(100, 1, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let name = "selfaddr";
        lab.control_plane()
            .apply(&with_cpu(name, "1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, name, SPLIT).await?;
        let hosts = hosts_of(lab, 0, name).await?;
        let writer = MajorityWriter::start(lab, name, &hosts).await?;

        lab.control_plane()
            .apply(&with_cpu(name, "1500m"))
            .await
            .map_err(fail("apply the new resources"))?;
        // Which members are seen REMOVED, and what the status says then.
        let mut removed = BTreeSet::new();
        let mut said_while_removed = Vec::new();
        let deadline = Instant::now() + ROLL_TIMEOUT;
        let mut started = false;
        loop {
            let removed_now = removed_members(lab);
            if !removed_now.is_empty() {
                said_while_removed.push(condition_messages(lab, name).await?);
                removed.extend(removed_now.iter().cloned());
            }
            let done = rolled(lab, name).await?;
            started |= !done;
            if started && done && removed_now.is_empty() {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("the roll did not complete in {ROLL_TIMEOUT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        ready(lab, name, SPLIT).await?;
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }

        if removed.is_empty() {
            return Err("no restarted member was ever REMOVED: the window was not exercised".into());
        }
        eprintln!("members seen REMOVED after their restart: {removed:?}");
        if !said_while_removed
            .iter()
            .any(|said| said.contains("REMOVED") && said.contains("VIP:NodePort"))
        {
            return Err(format!(
                "while a restarted member was REMOVED the status never said why: {said_while_removed:#?}"
            ));
        }
        Ok(())
    })
    .await;
}

/// The `Degraded` condition of an object's status.
fn degraded(mongodb: &MongoDB) -> Option<&Condition> {
    condition(mongodb.status.as_ref(), ConditionType::Degraded)
}

/// The first cluster's object.
async fn object_of(lab: &Lab, name: &str) -> Result<MongoDB, String> {
    let api: Api<MongoDB> = Api::namespaced(lab.clusters()[0].client.clone(), "default");
    api.get(name).await.map_err(fail("MongoDB"))
}

/// The members of the lab's network that are REMOVED now.
fn removed_members(lab: &Lab) -> Vec<String> {
    let network = lab.network();
    network
        .running()
        .into_iter()
        .filter(|l| network.member(l).map(|m| m.state()) == Some(MemberState::Removed))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_hairpin_initiate_fails_with_an_event_saying_what_to_check() {
    scenario(101, 1, async |lab| {
        lab.set_hairpin("a", false).map_err(fail("no hairpin"))?;
        let _passes = ControlPlanePasses::start(lab);
        let name = "nohairpin";
        lab.control_plane()
            .apply(&request(name, SPLIT).to_submission())
            .await
            .map_err(fail("apply"))?;

        let events: Api<Event> = Api::namespaced(lab.clusters()[0].client.clone(), "default");
        let deadline = Instant::now() + EVENT_TIMEOUT;
        let event = loop {
            let found = events
                .list(&Default::default())
                .await
                .map_err(fail("events"))?
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("MemberCannotReachItself")
                        && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
                });
            if let Some(event) = found {
                break event;
            }
            if Instant::now() > deadline {
                let reasons: Vec<String> = events
                    .list(&Default::default())
                    .await
                    .map_err(fail("events"))?
                    .items
                    .into_iter()
                    .map(|e| format!("{:?}: {:?}", e.reason, e.note))
                    .collect();
                return Err(format!(
                    "no MemberCannotReachItself Event in {EVENT_TIMEOUT:?}: {reasons:#?}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        };
        let note = event.note.unwrap_or_default();
        for needed in ["VIP:NodePort", "hairpin", "74"] {
            if !note.contains(needed) {
                return Err(format!("the Event does not say {needed:?}: {note}"));
            }
        }
        if event.type_.as_deref() != Some("Warning") {
            return Err(format!("not a Warning: {:?}", event.type_));
        }
        // `kubectl describe mongodb` says it too, for as long as it lasts.
        let refused = until_in(lab, 0, name, "the refusal in Degraded", |m| {
            degraded(m).is_some_and(|c| c.reason == "MemberCannotReachItself")
        })
        .await?;
        let message = degraded(&refused)
            .map(|c| c.message.clone())
            .unwrap_or_default();
        let mut members = Vec::new();
        for index in 0..3 {
            members.push(member_host(lab, 0, name, index).await?);
        }
        if !members
            .iter()
            .any(|m| message.contains(&format!("{m} could not")))
        {
            return Err(format!(
                "the condition names no member of {members:?}: {message}"
            ));
        }
        for needed in ["docs/install-helm.md", "Hairpin traffic"] {
            if !message.contains(needed) {
                return Err(format!("the condition does not say {needed:?}: {message}"));
            }
        }
        for _ in 0..8 {
            tokio::time::sleep(Duration::from_millis(500)).await;
            let reason = degraded(&object_of(lab, name).await?).map(|c| c.reason.clone());
            if reason.as_deref() != Some("MemberCannotReachItself") {
                return Err(format!(
                    "the refusal left Degraded while it lasts: {reason:?}"
                ));
            }
        }

        // Hairpin traffic fixed: the set forms, and keeps what it acknowledges.
        lab.set_hairpin("a", true).map_err(fail("hairpin"))?;
        ready(lab, name, SPLIT).await?;
        until_in(lab, 0, name, "the refusal gone from Degraded", |m| {
            degraded(m).is_some_and(|c| c.reason != "MemberCannotReachItself")
        })
        .await?;
        let hosts = hosts_of(lab, 0, name).await?;
        if let Some(writer) = TimedMajorityWriter::start(lab, name, &hosts).await? {
            writer
                .wait_acknowledged(20, Duration::from_secs(60))
                .await?;
            writer.stop_and_check().await?;
        }
        Ok(())
    })
    .await;
}
