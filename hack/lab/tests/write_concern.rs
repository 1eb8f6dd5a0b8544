//! mongod 5.0+'s write-concern and PSA rules, met by FedState's arbiter
//! topology (the arbiter and rsInit with the first largest cluster). Without a cluster-wide write concern, mongod refuses every
//! reconfig that changes the implicit default write concern (`{w: 1}` with
//! arbiters and no more data-bearing voters than a majority, else
//! `{w: "majority"}`), forced ones and its own `newlyAdded` clearing included;
//! and it refuses to make a PSA set's secondary electable from a config with a
//! single writable voter. The operator pins the implicit default as the
//! cluster-wide one right after initiate, and re-adds a PSA member in two
//! steps. A set from 4.4, which has nothing pinned, is pinned on 5.0 by the
//! cluster whose member is then the primary, its rsInit cluster gone. A
//! w:"majority" writer runs throughout and loses nothing.
//!
//! Labs 50, 51 and 67.

use std::time::{Duration, Instant};

use crate::e2e::{fedstate_sample, set_shape};
use crate::harness::*;
use crate::rolling::everywhere;
use crate::versions::wait_release;
use federation_sim::control_plane::{Submission, ToSubmission};
use kube::Api;
use lab::lab::Lab;
use mongodb::bson::Document;
use mongodb_member_operator::api::{MongoDB, RecoveryPhase};
use serde_json::json;

/// The config's members as (host, arbiterOnly, priority).
pub(super) fn members_of(config: &Document) -> Vec<(String, bool, f64)> {
    let mut members: Vec<(String, bool, f64)> = config
        .get_array("members")
        .map(|members| {
            members
                .iter()
                .filter_map(|m| {
                    let m = m.as_document()?;
                    let priority = m
                        .get_f64("priority")
                        .ok()
                        .or_else(|| m.get_i32("priority").ok().map(f64::from))?;
                    Some((
                        m.get_str("host").ok()?.to_owned(),
                        m.get_bool("arbiterOnly").unwrap_or(false),
                        priority,
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    members.sort_by(|a, b| a.0.cmp(&b.0));
    members
}

/// Applies FedState's arbiter topology with `members` per cluster and waits
/// for `data` data members and the arbiter, one primary, every member healthy.
async fn shape(
    lab: &Lab,
    name: &str,
    members: &[(&str, i32)],
    data: usize,
    clusters: usize,
) -> Outcome {
    let control_plane = lab.control_plane();
    control_plane
        .settled("default", name, READY_TIMEOUT)
        .await
        .map_err(fail("FedState's status"))?;
    control_plane
        .apply(&fedstate_sample(name, members, true).keep_unchanged_clusters_on_scale_up())
        .await
        .map_err(fail("apply"))?;
    let what = format!("{members:?} and an arbiter");
    wait_for(lab, name, &what, clusters, |m| {
        set_shape(m) == (data + 1, 1, 1)
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arbiter_set_crosses_the_implicit_write_concern_both_ways_and_recovers_keeping_its_arbiter(
) {
    scenario(50, 3, async |lab| {
        const NAME: &str = "flip";
        lab.control_plane()
            .apply(&fedstate_sample(
                NAME,
                &[("a", 2), ("b", 2), ("c", 1)],
                true,
            ))
            .await
            .map_err(fail("apply"))?;
        wait_for(lab, NAME, "2+2+1 and an arbiter", 3, |m| {
            set_shape(m) == (6, 1, 1)
        })
        .await?;
        // Five data voters and an arbiter: {w: "majority"}, pinned.
        let pinned = until_in(lab, 0, NAME, "the write concern pinned", |m| {
            m.status
                .as_ref()
                .and_then(|s| s.default_write_concern.as_ref())
                .is_some_and(|wc| wc.source == "global")
        })
        .await?;
        let write_concern = pinned
            .status
            .and_then(|s| s.default_write_concern)
            .ok_or("no write concern")?;
        if write_concern.w.as_deref() != Some("majority") {
            return Err(format!(
                "pinned {write_concern:?}, not the implicit {{w: \"majority\"}}"
            ));
        }
        let hosts = hosts_of(lab, 0, NAME).await?;
        let writer = TimedMajorityWriter::start(lab, NAME, &hosts).await?;

        // Three data voters and an arbiter: mongod's implicit default would be {w: 1}.
        shape(lab, NAME, &[("a", 1), ("b", 1), ("c", 1)], 3, 3).await?;
        // And back to five (the arbiter stays with a, FedState's first
        // largest cluster): mongod's own newlyAdded clearing crosses it again.
        shape(lab, NAME, &[("a", 2), ("b", 2), ("c", 1)], 5, 3).await?;

        // b and c are lost with three of the six voters; a0 is primary, so
        // every acknowledged write is on it. The forced config of a0, a1 and
        // the arbiter has the implicit default {w: 1}.
        let a0 = member_host(lab, 0, NAME, 0).await?;
        let a1 = member_host(lab, 0, NAME, 1).await?;
        make_primary(lab, NAME, &a0).await?;
        let before = config_on(lab, NAME, &a0).await?;
        let arbiter = members_of(&before)
            .into_iter()
            .find(|m| m.1)
            .map(|m| m.0)
            .ok_or("no arbiter")?;
        if let Some(writer) = &writer {
            let acknowledged = writer.acknowledged().len();
            writer
                .wait_acknowledged(acknowledged + 5, Duration::from_secs(60))
                .await?;
        }
        lose_clusters(lab, &[1, 2]).await?;
        until_in(lab, 0, NAME, "VotingMajorityLost reported", |m| {
            m.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.reason == "VotingMajorityLost")
            })
        })
        .await?;
        let annotation = format!(
            "{}=flood",
            mongodb_member_operator::api::RECOVERY_ANNOTATION
        );
        lab.kubectl("a", &["annotate", "mongodb", NAME, &annotation])
            .await
            .map_err(fail("annotate"))?;
        let done = until_in(lab, 0, NAME, "recovery done", |m| {
            m.status
                .as_ref()
                .and_then(|s| s.recovery.as_ref())
                .is_some_and(|r| r.phase == RecoveryPhase::Done)
        })
        .await?;
        let mut recovery = done.status.and_then(|s| s.recovery).ok_or("no recovery")?;
        recovery.keeping.sort();
        let mut kept = vec![a0.clone(), a1, arbiter];
        kept.sort();
        let forced = config_on(lab, NAME, &a0).await?;
        let forced_hosts: Vec<String> = members_of(&forced).into_iter().map(|m| m.0).collect();
        if recovery.keeping != kept || forced_hosts != kept {
            return Err(format!(
                "the recovery did not keep a0, a1 and the arbiter: {recovery:?}, config {forced}"
            ));
        }
        if let Some(writer) = writer {
            let acknowledged = writer.acknowledged().len();
            writer
                .wait_acknowledged(acknowledged + 5, Duration::from_secs(60))
                .await?;
            writer.stop_and_check().await?;
        }
        Ok(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_psa_member_removed_and_readded_gets_its_vote_then_its_priority() {
    scenario(51, 2, async |lab| {
        const NAME: &str = "psa";
        lab.control_plane()
            .apply(&fedstate_sample(NAME, &[("a", 1), ("b", 1)], true))
            .await
            .map_err(fail("apply"))?;
        wait_for(lab, NAME, "1+1 and an arbiter", 2, |m| {
            set_shape(m) == (3, 1, 1)
        })
        .await?;
        let hosts = hosts_of(lab, 0, NAME).await?;
        let writer = MajorityWriter::start(lab, NAME, &hosts).await?;
        let first = config(lab, NAME, &hosts).await?;

        // b's member leaves ({data, arbiter}) and comes back: mongod refuses
        // it electable in one step.
        shape(lab, NAME, &[("a", 1), ("b", 0)], 1, 1).await?;
        // Back on its old data it joins without a vote, gets it once caught
        // up, then its priority: three reconfigs after it is healthy.
        shape(lab, NAME, &[("a", 1), ("b", 1)], 2, 2).await?;
        let deadline = Instant::now() + READY_TIMEOUT;
        let last = loop {
            let last = config(lab, NAME, &hosts).await?;
            let electable = members_of(&last)
                .iter()
                .filter(|m| !m.1 && m.2 > 0.0)
                .count();
            if electable == 2 {
                break last;
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "both data members should be electable again: {last}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        if replica_set_id(&first) != replica_set_id(&last) || version(&last) >= 10_000 {
            return Err("second initiate or forced reconfig detected".into());
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        Ok(())
    })
    .await;
}

/// Applies `submission` and waits until the set is ready as `split`.
async fn reshaped(lab: &Lab, name: &str, submission: &Submission, split: &str) -> Outcome {
    lab.control_plane()
        .apply(submission)
        .await
        .map_err(fail("apply"))?;
    ready(lab, name, split).await
}

/// The write concern cluster `index` reports, as (w, source).
async fn reported_write_concern(
    lab: &Lab,
    index: usize,
    name: &str,
) -> Result<Option<(Option<String>, String)>, String> {
    let api: Api<MongoDB> = Api::namespaced(lab.clusters()[index].client.clone(), "default");
    let object = api.get(name).await.map_err(fail("MongoDB"))?;
    Ok(object
        .status
        .and_then(|s| s.default_write_concern)
        .map(|wc| (wc.w, wc.source)))
}

/// A set created on 4.4 has no cluster-wide write concern (4.4 keeps no
/// implicit default). Its rsInit cluster leaves; once the set runs 5.0 the
/// cluster whose member is then the primary pins one — no rsInit cluster
/// needed — and the rsInit cluster comes back without a reconfig refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_4_4_set_whose_rs_init_cluster_left_is_pinned_by_the_primarys_cluster_on_5_0() {
    scenario(67, 3, async |lab| {
        const NAME: &str = "pin";
        let _passes = ControlPlanePasses::start(lab);
        let control_plane = lab.control_plane();
        let on_4_4 = |split: &str| {
            let mut instance = request(NAME, split);
            instance.image = "mongo:4.4.29".into();
            instance.to_submission()
        };
        reshaped(lab, NAME, &on_4_4("a=2,b=2,c=1"), "a=2,b=2,c=1").await?;
        let pinned_on_4_4 = reported_write_concern(lab, 0, NAME).await?;
        if pinned_on_4_4.as_ref().is_some_and(|(_, source)| source == "global") {
            return Err(format!("pinned on 4.4: {pinned_on_4_4:?}"));
        }

        // a, the rsInit cluster (FedState's first largest), leaves.
        settled(lab, NAME).await?;
        reshaped(lab, NAME, &on_4_4("a=0,b=2,c=1"), "b=2,c=1").await?;
        let hosts = hosts_of(lab, 1, NAME).await?;
        let writer = MajorityWriter::start(lab, NAME, &hosts).await?;

        // 5.0, then FCV 5.0, as a user raises a FedState instance.
        for (name, path, value, fcv) in [
            ("image", "/spec/image", "mongo:5.0.30", "4.4"),
            ("fcv", "/spec/featureCompatibilityVersion", "5.0", "5.0"),
        ] {
            control_plane
                .apply_override_policy(
                    "default",
                    NAME,
                    &format!("{NAME}-{name}"),
                    everywhere(NAME, path, json!(value)),
                )
                .await
                .map_err(fail("OverridePolicy"))?;
            wait_release(lab, NAME, &hosts, "5.0", fcv).await?;
        }
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let b = reported_write_concern(lab, 1, NAME).await?;
            if b.as_ref().is_some_and(|(_, source)| source == "global") {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("no cluster-wide write concern pinned: b reports {b:?}"));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let pinned_by: Vec<usize> = {
            let mut by = Vec::new();
            for index in 0..3 {
                let reasons = event_reasons_in(lab, index, NAME).await?;
                if reasons.iter().any(|r| r == "SetClusterWriteConcern") {
                    by.push(index);
                }
            }
            by
        };
        if pinned_by.len() != 1 || pinned_by.contains(&0) {
            return Err(format!(
                "the write concern should be pinned once, by b or c: pinned by clusters {pinned_by:?}"
            ));
        }

        // a comes back: its members are added and vote, nothing refused.
        settled(lab, NAME).await?;
        // FedState (d28f763) cannot scale out one cluster alone: it would
        // withdraw the others' Services (the lab-only correction, as in e2e).
        let back = on_4_4("a=2,b=2,c=1").keep_unchanged_clusters_on_scale_up();
        reshaped(lab, NAME, &back, "a=2,b=2,c=1").await?;
        for index in 0..3 {
            let reasons = event_reasons_in(lab, index, NAME).await?;
            if let Some(refused) = reasons.iter().find(|r| {
                ["ImplicitWriteConcernWouldChange", "ReconfigRefused"].contains(&r.as_str())
            }) {
                return Err(format!("cluster {index}: a reconfig was refused ({refused})"));
            }
        }
        match writer {
            Some(writer) => writer.stop_and_check().await,
            None => Ok(()),
        }
    })
    .await;
}
