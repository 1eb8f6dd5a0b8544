//! Clusters cut off from each other: every cluster alone, so that no group
//! holds a majority and the set has no primary (Ready nowhere until it has one
//! again); and the rsInit cluster's object recreated, its status lost, while
//! that cluster is cut off from a live set (it never initiates a second set).

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::{condition, override_in, phase, ready, running_members, same_set, wait_in};
use crate::harness::*;
use federation_sim::karmada::{Kind, ResourceRef};
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::Api;
use mongodb_member_operator::api::{MongoDB, MongoState};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_without_a_primary_is_ready_nowhere_until_it_has_one_again() {
    let started = Instant::now();
    scenario(61, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("headless", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "headless", "a=2,b=2,c=1").await?;
        phase(started, "headless: a=2,b=2,c=1 everywhere");
        control_plane
            .settled("default", "headless", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        let hosts = hosts_of(lab, 0, "headless").await?;
        let first = config(lab, "headless", &hosts).await?;
        let writer = MajorityWriter::start(lab, "headless", &hosts).await?;

        // Every cluster cut off from the others (clients still reach every
        // member): no group holds a majority of the 5 votes, the primary steps
        // down, every member is SECONDARY.
        lab.network().cut_site("a");
        lab.network().cut_site("b");
        wait_for(lab, "headless", "Ready=False everywhere", 3, |m| {
            m.status.as_ref().and_then(|s| s.state) != Some(MongoState::Running)
                && condition(m, "Ready").is_some_and(|c| c.status == "False")
        })
        .await?;
        if !lab.network().primaries().is_empty() {
            return Err(format!(
                "a member is still primary ({:?}): the cut left a majority",
                lab.network().primaries()
            ));
        }
        let reasons: Vec<String> = statuses(lab, "headless")
            .await?
            .iter()
            .map(|(cluster, m)| {
                let ready = condition(m, "Ready");
                format!(
                    "{cluster}: {:?} {}",
                    ready.map(|c| &c.reason),
                    ready.map(|c| c.message.as_str()).unwrap_or_default()
                )
            })
            .collect();
        eprintln!("without a primary: {reasons:?}");
        phase(started, "no primary: Ready=False everywhere");
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let state = control_plane
                .multicloudmongodb("default", "headless")
                .await
                .map(|o| o.status.state)
                .unwrap_or_default();
            if state != "Health" {
                eprintln!("FedState's MultiCloudMongoDB state without a primary: {state}");
                phase(started, "FedState no longer reports Health");
                break;
            }
            if Instant::now() > deadline {
                return Err("FedState still reports Health without a primary".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }

        lab.network().heal_site("a");
        lab.network().heal_site("b");
        ready(lab, "headless", "a=2,b=2,c=1").await?;
        phase(started, "headless: a=2,b=2,c=1 everywhere");
        control_plane
            .settled("default", "headless", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status after the heal"))?;
        phase(started, "FedState reports Health again");
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        let last = config(lab, "headless", &hosts).await?;
        same_set(&first, &last)
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_rs_init_cluster_recreated_while_cut_off_never_initiates_a_second_set() {
    let started = Instant::now();
    // No periodic control-plane passes: Karmada would re-create the deleted
    // object as soon as it is gone; here it does at the pass after the cut.
    scenario(65, 3, async |lab| {
        let control_plane = lab.control_plane();
        // a has most members, so FedState makes it rsInit; alone it holds a
        // majority of hostconf's data members (3 of 5).
        control_plane
            .apply(&request("twice", "a=3,b=1,c=1"))
            .await
            .map_err(fail("apply"))?;
        control_plane
            .apply_override_policy(
                "default",
                "twice",
                "twice-delete-pvcs-in-a",
                override_in(
                    "a",
                    ResourceRef::new(Kind::MongoDB, "twice"),
                    "/spec/removedMemberPvcPolicy",
                    json!("Delete"),
                ),
            )
            .await
            .map_err(fail("OverridePolicy"))?;
        ready(lab, "twice", "a=3,b=1,c=1").await?;
        phase(started, "twice: a=3,b=1,c=1 everywhere");
        let hosts = hosts_of(lab, 0, "twice").await?;
        let first = config(lab, "twice", &hosts).await?;
        let set_id = replica_set_id(&first).ok_or("no replicaSetId")?;
        let writer = MajorityWriter::start(lab, "twice", &hosts).await?;

        // a's object is deleted: its members leave the set, their PVCs go.
        lab.kubectl("a", &["delete", "mongodb", "twice", "--wait=false"])
            .await
            .map_err(fail("kubectl delete"))?;
        let in_a: Api<MongoDB> = Api::namespaced(lab.clusters()[0].client.clone(), "default");
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(lab.clusters()[0].client.clone(), "default");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            let object = in_a.get_opt("twice").await.map_err(fail("MongoDB"))?;
            let left = claims
                .list(&Default::default())
                .await
                .map_err(fail("PVCs"))?
                .items
                .len();
            if object.is_none() && left == 0 {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "a's object (present: {}) and PVCs ({left}) are not gone",
                    object.is_some()
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let live: Vec<String> = config(lab, "twice", &hosts)
            .await?
            .get_array("members")
            .map_err(fail("members"))?
            .iter()
            .filter_map(|m| m.as_document()?.get_str("host").ok().map(str::to_string))
            .collect();
        let vip_a = format!("{}:", lab.clusters()[0].vip);
        if live.len() != 2 || live.iter().any(|h| h.starts_with(&vip_a)) {
            return Err(format!("b and c should hold the set alone: {live:?}"));
        }
        phase(started, "a's members left, its object and PVCs are gone");

        // a is cut off: its members from b's and c's (both ways), and b's and
        // c's VIPs (their NodePorts) unreachable, so a's operator hears nobody.
        lab.network().cut_site("a");
        lab.clusters()[1].node.cut_vip();
        lab.clusters()[2].node.cut_vip();
        // Karmada re-creates the object it propagated; its status is lost.
        let deadline = Instant::now() + Duration::from_secs(30);
        while in_a
            .get_opt("twice")
            .await
            .map_err(fail("MongoDB"))?
            .is_none()
        {
            control_plane
                .reconcile("default", "twice")
                .await
                .map_err(fail("pass"))?;
            if Instant::now() > deadline {
                return Err("Karmada did not re-create a's object".into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        phase(started, "a cut off; Karmada re-created its object");
        let waiting = wait_in(lab, 0, "twice", "Ready reason ClusterNotAnswering", |m| {
            condition(m, "Ready").is_some_and(|c| c.reason == "ClusterNotAnswering")
        })
        .await?;
        eprintln!(
            "cluster a, recreated and cut off: {:?}",
            condition(&waiting, "Ready").map(|c| &c.message)
        );
        phase(started, "a waits: ClusterNotAnswering");
        let until = Instant::now() + Duration::from_secs(30);
        let mut members_of_a = BTreeSet::new();
        while Instant::now() < until {
            for listen in running_members(lab, 0) {
                let config = lab.network().member(&listen).and_then(|m| m.config());
                if let Some(config) = config {
                    return Err(format!(
                        "{listen} in cut-off cluster a holds a config: {:?} version {}",
                        config.replica_set_id(),
                        config.version
                    ));
                }
                members_of_a.insert(listen);
            }
            let object = in_a.get_opt("twice").await.map_err(fail("MongoDB"))?;
            if let Some(id) = object.and_then(|m| m.status).and_then(|s| s.replica_set_id) {
                return Err(format!("cut-off cluster a records replicaSetId {id}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        if members_of_a.len() != 3 {
            return Err(format!(
                "expected a's 3 new members running, saw {members_of_a:?}"
            ));
        }
        phase(started, "30 s without a second set");

        lab.network().heal_site("a");
        lab.clusters()[1].node.heal();
        lab.clusters()[2].node.heal();
        ready(lab, "twice", "a=3,b=1,c=1").await?;
        phase(started, "twice: a=3,b=1,c=1 everywhere");
        let hosts = hosts_of(lab, 0, "twice").await?;
        let last = config(lab, "twice", &hosts).await?;
        same_set(&first, &last)?;
        let recorded = in_a
            .get("twice")
            .await
            .map_err(fail("MongoDB"))?
            .status
            .and_then(|s| s.replica_set_id);
        if recorded.as_deref() != Some(set_id.as_str()) {
            return Err(format!("a records {recorded:?}, the set is {set_id}"));
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        Ok(())
    })
    .await;
}
