//! A control plane's mistake that would cut a live set off: a 2+2+1 set
//! scaled to 2+2+0 right after it was Ready, before FedState's own status
//! reports it, makes FedState delete every member Service and empty hostconf
//! (hack/federation-sim/README.md). The operators hold each deleted Service by
//! their finalizer while its member is in the set, so kube-proxy keeps routing
//! it: every member stays reachable at its `VIP:NodePort`, c's member leaves
//! the set the ordinary way and only then does its Service go, and a and b say
//! which Services they hold and why. A w:"majority" writer runs throughout and
//! loses nothing.
//!
//! Lab 74.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Service;
use kube::Api;
use mongodb::bson::doc;

use crate::harness::*;
use lab::lab::Lab;
use lab::observe::SetSampler;
use mongodb_member_operator::api::MongoDB;

const NAME: &str = "keep";
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
const WAIT: Duration = Duration::from_secs(180);
const HELD: &str = "MemberServicesHeld";

/// Cluster `index`'s member Services of the instance: name and whether it is being deleted.
async fn member_services(lab: &Lab, index: usize) -> Result<Vec<(String, bool)>, String> {
    let api: Api<Service> = Api::namespaced(lab.clusters()[index].client.clone(), "default");
    let services = api
        .list(&Default::default())
        .await
        .map_err(fail("Services"))?;
    Ok(services
        .items
        .into_iter()
        .filter_map(|s| {
            let name = s.metadata.name?;
            let member =
                name.starts_with(&format!("{NAME}-mongodb-")) && !name.ends_with("headless");
            member.then_some((name, s.metadata.deletion_timestamp.is_some()))
        })
        .collect())
}

/// Whether every member answers `ping` at its `VIP:NodePort`.
async fn every_member_answers(hosts: &[String]) -> Outcome {
    for host in hosts {
        let client = anonymous_direct(host)?;
        let answered = client.database("admin").run_command(doc! {"ping": 1}).await;
        answered.map_err(|e| format!("{host} does not answer: {e}"))?;
    }
    Ok(())
}

/// The message of `mongodb`'s `MemberServicesHeld` condition when it is True.
fn held_message(mongodb: &MongoDB) -> Option<&str> {
    let conditions = &mongodb.status.as_ref()?.conditions;
    let held = conditions
        .iter()
        .find(|c| c.type_ == HELD && c.status == "True")?;
    Some(held.message.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_scaled_in_before_fedstate_reports_it_stays_reachable_and_c_leaves_safely() {
    scenario(74, 3, async |lab| {
        // FedState's passes run only when asked: its status still holds the new
        // set's zeros when the scale-down comes, as it does for up to 15 s.
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request(NAME, "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, NAME, "a=2,b=2,c=1").await?;
        let hosts = hosts_of(lab, 0, NAME).await?;
        let a0 = member_host(lab, 0, NAME, 0).await?;
        let c0 = member_host(lab, 2, NAME, 0).await?;
        make_primary(lab, NAME, &a0).await?;
        let writer = TimedMajorityWriter::start(lab, NAME, &hosts).await?;
        if let Some(writer) = &writer {
            writer
                .wait_acknowledged(10, Duration::from_secs(60))
                .await?;
        }
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);

        // The scale-down on stale status: FedState deletes every member Service.
        control_plane
            .apply(&request(NAME, "a=2,b=2,c=0"))
            .await
            .map_err(fail("scale in"))?;
        let _passes = ControlPlanePasses::start(lab);
        for index in 0..2 {
            let services = member_services(lab, index).await?;
            if services.iter().any(|(_, deleting)| !deleting) {
                return Err(format!(
                    "cluster {index}: FedState's mistake did not happen as expected: {services:?}"
                ));
            }
        }

        // Every member stays reachable and the writer goes on.
        every_member_answers(&hosts).await?;
        let a = until_in(lab, 0, NAME, "a holds its Services", |m| {
            held_message(m).is_some_and(|h| h.contains(&format!("{NAME}-mongodb-1")))
        })
        .await?;
        let held = held_message(&a).unwrap_or_default().to_string();
        if !held.contains(&format!("Service {NAME}-mongodb-0 ")) {
            return Err(format!("a's condition does not name both Services: {held}"));
        }
        if let Some(writer) = &writer {
            let so_far = writer.acknowledged().len();
            writer
                .wait_acknowledged(so_far + 50, Duration::from_secs(60))
                .await?;
        }

        // c's member leaves the set, then its Service goes.
        let deadline = Instant::now() + WAIT;
        loop {
            let config = config_on(lab, NAME, &a0).await?;
            if !hosts_in(&config).contains(&c0) {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("c's member is still in the config after {WAIT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let deadline = Instant::now() + WAIT;
        while !member_services(lab, 2).await?.is_empty() {
            if Instant::now() > deadline {
                return Err(format!(
                    "c's member Service was kept after its member left ({WAIT:?})"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let remaining: Vec<String> = hosts.iter().filter(|h| **h != c0).cloned().collect();
        every_member_answers(&remaining).await?;
        let reasons = event_reasons_in(lab, 0, NAME).await?;
        if !reasons.iter().any(|r| r == "MemberServiceHeld") {
            return Err(format!(
                "a published no MemberServiceHeld Event: {reasons:?}"
            ));
        }
        let still = member_services(lab, 0).await?;
        if still.len() != 2 {
            return Err(format!(
                "a's Services were let go with their members in the set: {still:?}"
            ));
        }

        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        eprintln!(
            "{} samples; {acknowledged} majority writes acknowledged, none lost; a says: {held}",
            samples.len()
        );
        one_primary_per_term(&samples)
    })
    .await;
}
