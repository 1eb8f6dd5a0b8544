//! Disaster recovery, only on request: two of three clusters are
//! lost (nodes, network and operators) with a majority of the voters. The
//! survivor's operator reports the loss and changes nothing; an SRE looks with
//! `kubectl mongodb status` (b's API server failing, c's operator dead) and
//! asks it for recovery with `kubectl mongodb recover` (the annotation); it
//! reports the plan, forces it once, records it, and ignores the request
//! afterwards. The lost clusters come back: their members (old config, maybe
//! divergent data) are refused, not re-added; resynced from scratch (their
//! volumes deleted), they join again, and `kubectl mongodb status` shows the
//! five members and one primary. A w:"majority" writer runs throughout; the
//! survivor's member was primary, so every acknowledged write is on it and
//! must survive.
//!
//! The plugin is the root crate's binary `kubectl-mongodb`: `cargo test
//! --workspace` builds it with the operator (binaries are built for the root
//! crate's integration tests); alone, `cargo build --bin kubectl-mongodb`.

use std::time::{Duration, Instant};

use crate::harness::*;
use lab::lab::Lab;
use lab::observe::SetSampler;
use mongodb_member_operator::api::{MongoDB, RecoveryPhase};

const NAME: &str = "ledger";
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
const REASON: &str = "clusters b and c lost in the flood, ticket 4711";

/// Waits until cluster `index`'s object satisfies `check`.
async fn until(
    lab: &Lab,
    index: usize,
    what: &str,
    check: impl Fn(&MongoDB) -> bool,
) -> Result<MongoDB, String> {
    until_in(lab, index, NAME, what, check).await
}

/// The row of the status' cluster table for `cluster`.
fn cluster_row<'a>(status: &'a str, cluster: &str) -> Result<&'a str, String> {
    status
        .lines()
        .find(|l| l.split_whitespace().next() == Some(cluster))
        .ok_or(format!("no row for cluster {cluster}"))
}

/// The rows of the status' member table.
fn member_rows(status: &str) -> Vec<&str> {
    status
        .lines()
        .skip_while(|l| !l.starts_with("MEMBER"))
        .skip(1)
        .take_while(|l| !l.starts_with('('))
        .collect()
}

fn count_in_log(lab: &Lab, index: usize, needle: &str) -> usize {
    std::fs::read_to_string(lab.operator_log(index))
        .unwrap_or_default()
        .matches(needle)
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_lost_clusters_are_recovered_only_on_request_and_come_back_only_resynced() {
    scenario(87, 3, async |lab| {
        let split = "a=2,b=2,c=1";
        let control_plane = lab.control_plane();
        let passes = ControlPlanePasses::start(lab);
        control_plane
            .apply(&request(NAME, split))
            .await
            .map_err(fail("apply"))?;
        ready(lab, NAME, split).await?;
        let hosts = hosts_of(lab, 0, NAME).await?;
        let a0 = member_host(lab, 0, NAME, 0).await?;
        let a1 = member_host(lab, 0, NAME, 1).await?;
        // The survivor's member is primary: every acknowledged write is on it.
        make_primary(lab, NAME, &a0).await?;
        let first = config_on(lab, NAME, &a0).await?;
        let writer = TimedMajorityWriter::start(lab, NAME, &hosts).await?;
        if let Some(writer) = &writer {
            writer
                .wait_acknowledged(10, Duration::from_secs(60))
                .await?;
        }
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);

        // Clusters b and c are lost: nodes, network, operators (3 of 5 voters).
        lose_clusters(lab, &[1, 2]).await?;
        let lost_at = Instant::now();

        // Reported, and nothing changed without a request.
        until(lab, 0, "VotingMajorityLost reported", |m| {
            reason_is(m, "Degraded", "VotingMajorityLost")
        })
        .await?;
        let reported_after = lost_at.elapsed();
        let unchanged = config_on(lab, NAME, &a0).await?;
        if version(&unchanged) != version(&first) || hosts_in(&unchanged) != hosts_in(&first) {
            return Err(format!(
                "the config changed without a request: {first} -> {unchanged}"
            ));
        }

        // The SRE looks, while b's API server fails every request and c's
        // operator is gone (its status is what it last wrote).
        let b_api = lab.clusters()[1].api.faults().clone();
        b_api.fail_share(1.0, apiserver_sim::InjectedError::Unavailable);
        let lost = plugin(lab, &["status", NAME]).await;
        b_api.clear();
        let lost = lost?;
        let a_row = cluster_row(&lost.stdout, "a")?;
        let hosts_down = hosts.iter().filter(|h| **h != a0 && **h != a1);
        let waits = lost
            .stdout
            .lines()
            .find(|l| l.starts_with("a: ") && l.contains("VotingMajorityLost"))
            .unwrap_or_default();
        // Exit 1 (b unread); a waits, naming the voters gone; b unreachable;
        // c's report stale.
        let as_expected = !lost.success
            && a_row.contains("VotingMajorityLost")
            && cluster_row(&lost.stdout, "b")?.contains("UNREACHABLE")
            && cluster_row(&lost.stdout, "c")?.contains("STALE?")
            && lost.stderr.contains("context b: unreachable")
            && hosts_down.clone().all(|h| waits.contains(h.as_str()));
        if !as_expected {
            return Err("the status while b and c are lost is not as expected".into());
        }

        // The SRE asks cluster a for recovery.
        let asked_at = Instant::now();
        let asked = plugin(
            lab,
            &[
                "recover",
                NAME,
                "--context",
                "a",
                "--reason",
                REASON,
                "--yes",
            ],
        )
        .await?;
        let phases: Vec<&str> = asked
            .stdout
            .lines()
            .filter_map(|l| {
                ["Planned", "Forced", "Done"]
                    .into_iter()
                    .find(|p| l.starts_with(p))
            })
            .collect();
        // The dry run: what the forced config keeps and drops.
        let line = |prefix: &str| {
            asked
                .stdout
                .lines()
                .find(|l| l.trim_start().starts_with(prefix))
                .unwrap_or_default()
                .to_string()
        };
        let (keep, drop) = (line("keep: "), line("drop: "));
        let as_expected = asked.success
            && asked
                .stdout
                .starts_with("cluster a reports VotingMajorityLost")
            && keep.contains(a0.as_str())
            && keep.contains(a1.as_str())
            && hosts_down.clone().all(|h| drop.contains(h.as_str()))
            && phases.last() == Some(&"Done")
            && phases.windows(2).all(|w| w[0] != w[1]);
        if !as_expected {
            return Err(format!(
                "the recover command's dry run or phases are not as expected: {phases:?}"
            ));
        }
        let done = until(lab, 0, "recovery done", |m| {
            m.status
                .as_ref()
                .and_then(|s| s.recovery.as_ref())
                .is_some_and(|r| r.phase == RecoveryPhase::Done)
        })
        .await?;
        let recovered_after = asked_at.elapsed();
        let recovery = done.status.and_then(|s| s.recovery).ok_or("no recovery")?;
        let mut kept = vec![a0.clone(), a1.clone()];
        kept.sort();
        if recovery.keeping != kept || recovery.dropping.len() != 3 || recovery.request != REASON {
            return Err(format!("unexpected recovery record: {recovery:?}"));
        }
        let forced = config_on(lab, NAME, &a0).await?;
        if hosts_in(&forced) != kept || version(&forced) < 10_000 {
            return Err(format!("the forced config is not a0 + a1: {forced}"));
        }
        let reasons = event_reasons_in(lab, 0, NAME).await?;
        let position = |reason: &str| reasons.iter().position(|r| r == reason);
        match (
            position("VotingMajorityLost"),
            position("RecoveryPlanned"),
            position("ForcedReconfig"),
            position("RecoveryRecorded"),
        ) {
            (Some(lost), Some(planned), Some(forced), Some(recorded))
                if lost < planned && planned < forced && forced < recorded => {}
            _ => return Err(format!("Events out of order or missing: {reasons:?}")),
        }

        // The set takes majority writes again.
        if let Some(writer) = &writer {
            let before = writer.acknowledged().len();
            writer
                .wait_acknowledged(before + 10, Duration::from_secs(60))
                .await?;
        }
        // The request stays on the object and is ignored: one force, ever.
        // Two more passes (a set in sync is looked at every 30 s, and a
        // status write wakes no pass).
        let passes_before = count_in_log(lab, 0, " planned ");
        let deadline = Instant::now() + Duration::from_secs(75);
        while count_in_log(lab, 0, " planned ") < passes_before + 2 {
            if Instant::now() > deadline {
                return Err("operator a made no further pass".into());
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        let forces = count_in_log(lab, 0, "forced reconfig sent");
        if forces != 1 {
            return Err(format!("{forces} forced reconfigs were sent, not one"));
        }

        // b and c come back: their members hold the old config and are refused.
        for index in [1, 2] {
            let cluster = &lab.clusters()[index];
            cluster.node.heal();
            lab.network().heal_site(&cluster.name);
            lab.restart_operator(index).map_err(fail("restart"))?;
        }
        for index in [1, 2] {
            until(lab, index, "DroppedByRecovery reported", |m| {
                reason_is(m, "Ready", "DroppedByRecovery")
            })
            .await?;
        }
        let still = config_on(lab, NAME, &a0).await?;
        if hosts_in(&still) != kept {
            return Err(format!("a dropped member was re-added as it was: {still}"));
        }

        // Resynced from scratch (volume and pod deleted, as the refusal says),
        // they join again.
        for (context, members) in [("b", 2), ("c", 1)] {
            for member in 0..members {
                lose_volume(lab, context, NAME, member).await?;
            }
        }
        ready(lab, NAME, split).await?;
        std::mem::drop(passes);
        let back = plugin(lab, &["status", NAME]).await?;
        let rows = member_rows(&back.stdout);
        let primaries = rows.iter().filter(|r| r.ends_with('*')).count();
        let every_member_up = hosts.iter().all(|h| {
            rows.iter()
                .any(|r| r.starts_with(h.as_str()) && r.contains(" up "))
        });
        if !back.success || rows.len() != 5 || !every_member_up || primaries != 1 {
            return Err(format!(
                "the status at the end does not show five members up and one primary: {rows:?}"
            ));
        }

        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        let last = config_on(lab, NAME, &a0).await?;
        eprintln!(
            "loss reported after {reported_after:?}; recovered {recovered_after:?} after the \
             request; {} samples; {acknowledged} majority writes acknowledged, none lost; \
             config version {} -> {} (forced) -> {}; members {:?}",
            samples.len(),
            version(&first),
            version(&forced),
            version(&last),
            hosts_in(&last)
        );
        if replica_set_id(&first) != replica_set_id(&last) {
            return Err("the replica set was initiated again".into());
        }
        if hosts_in(&last).len() != 5 {
            return Err(format!("not every member is back: {last}"));
        }
        one_primary_per_term(&samples)
    })
    .await;
}
