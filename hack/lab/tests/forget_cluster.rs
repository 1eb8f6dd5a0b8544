//! A cluster lost for good, forgotten on request: with c of a 2+2+1 set gone
//! (nodes, network, operator), a change of the pod template rolls nothing past
//! c's dead member, which stays in the config. The SRE asks cluster a with
//! `kubectl mongodb forget-cluster` (refused while c still answers); a's
//! operator records c's members in the set, removes them one safe reconfig at
//! a time and says Done; the roll then completes in a and b. When c comes
//! back, its member, which still holds the old config, is kept out. A
//! w:"majority" writer runs throughout and loses nothing.
//!
//! Lab 68.

use std::time::{Duration, Instant};

use crate::harness::*;
use crate::rolling::sized;
use crate::rolling::watch::rolled_status;
use lab::lab::Lab;
use lab::observe::SetSampler;
use mongodb_member_operator::api::{ForgetClusterPhase, MongoDB};

const NAME: &str = "atlas";
const SPLIT: &str = "a=2,b=2,c=1";
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
const ROLL_TIMEOUT: Duration = Duration::from_secs(300);

/// The phase of the request to forget a cluster `mongodb` reports, if any.
fn forget_phase(mongodb: &MongoDB) -> Option<ForgetClusterPhase> {
    mongodb
        .status
        .as_ref()?
        .forget_cluster
        .as_ref()
        .map(|f| f.phase)
}

/// Whether clusters a and b report the roll over, every member of theirs
/// replaced (c, lost, reports what it last saw).
async fn rolled_in_a_and_b(lab: &Lab, before: &[Option<String>]) -> Result<bool, String> {
    let status = rolled_status(lab, NAME).await?;
    let a_and_b_rolled = match status {
        Ok(()) => true,
        Err(wrong) => wrong.split("; ").all(|w| w.starts_with("c:")),
    };
    let mut now = Vec::new();
    for (cluster, object) in statuses(lab, NAME).await? {
        if cluster == "c" {
            continue;
        }
        let local = object.status.map(|s| s.local_members).unwrap_or_default();
        now.extend(local.into_iter().map(|l| l.revision));
    }
    let replaced = now.len() == 4 && now.iter().all(|r| r.is_some() && !before.contains(r));
    Ok(a_and_b_rolled && replaced)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_lost_for_good_is_forgotten_on_request_and_the_next_roll_completes() {
    scenario(68, 3, async |lab| {
        let control_plane = lab.control_plane();
        let _passes = ControlPlanePasses::start(lab);
        control_plane
            .apply(&sized(NAME, SPLIT, "1", "512Mi"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, NAME, SPLIT).await?;
        settled(lab, NAME).await?;
        let hosts = hosts_of(lab, 0, NAME).await?;
        let a0 = member_host(lab, 0, NAME, 0).await?;
        let c0 = member_host(lab, 2, NAME, 0).await?;
        let c_vip = c0.rsplit_once(':').map(|(vip, _)| vip.to_string());
        let c_vip = c_vip.ok_or(format!("no VIP in {c0}"))?;
        make_primary(lab, NAME, &a0).await?;
        let writer = TimedMajorityWriter::start(lab, NAME, &hosts).await?;
        if let Some(writer) = &writer {
            writer
                .wait_acknowledged(10, Duration::from_secs(60))
                .await?;
        }
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);

        // While c answers, the plugin refuses and asks nothing.
        let early = plugin(
            lab,
            &[
                "forget-cluster",
                NAME,
                "--context",
                "a",
                "--cluster",
                &c_vip,
                "--yes",
            ],
        )
        .await?;
        let object = until_in(lab, 0, NAME, "a's object", |_| true).await?;
        let annotated = object
            .metadata
            .annotations
            .is_some_and(|a| a.contains_key("middleware.fedstate.io/forget-cluster"));
        if early.success || annotated || !early.stderr.contains(&c0) {
            return Err("forgetting a cluster that answers was not refused by the plugin".into());
        }

        // c is lost for good; once a and b see its member down, a template
        // change cannot roll past it. (Changed sooner, a restart could start
        // before the primary's next heartbeat to c.)
        lose_clusters(lab, &[2]).await?;
        for index in 0..2 {
            until_in(lab, index, NAME, "c's member seen down", |m| {
                reason_saying(m, "Degraded", "MembersUnhealthy", &c0)
            })
            .await?;
        }
        let before = member_revisions(lab, NAME).await?;
        control_plane
            .apply(&sized(NAME, SPLIT, "1500m", "1Gi"))
            .await
            .map_err(fail("apply the new resources"))?;
        until_in(lab, 0, NAME, "the roll waits for c's member", |m| {
            reason_is(m, "UpToDate", "MemberNotHealthy")
        })
        .await?;

        // The SRE asks cluster a to forget c.
        let asked_at = Instant::now();
        let asked = plugin(
            lab,
            &[
                "forget-cluster",
                NAME,
                "--context",
                "a",
                "--cluster",
                &c_vip,
                "--reason",
                "c lost in the fire, ticket 4712",
                "--yes",
            ],
        )
        .await?;
        let phases: Vec<&str> = asked
            .stdout
            .lines()
            .filter_map(|l| ["Removing", "Done"].into_iter().find(|p| l.starts_with(p)))
            .collect();
        let dry_run = asked
            .stdout
            .lines()
            .find(|l| l.trim_start().starts_with("remove: "))
            .unwrap_or_default();
        if !asked.success || !dry_run.contains(&c0) || phases.last() != Some(&"Done") {
            return Err(format!(
                "the forget-cluster command's dry run or phases are not as expected: {phases:?}"
            ));
        }
        let done = until_in(lab, 0, NAME, "forgetting done", |m| {
            forget_phase(m) == Some(ForgetClusterPhase::Done)
        })
        .await?;
        let forgotten_after = asked_at.elapsed();
        let forgetting = done.status.and_then(|s| s.forget_cluster);
        let forgetting = forgetting.ok_or("no forgetting in a's status")?;
        if forgetting.cluster != c_vip || forgetting.members != vec![c0.clone()] {
            return Err(format!("unexpected forgetting: {forgetting:?}"));
        }
        let config = config_on(lab, NAME, &a0).await?;
        if hosts_in(&config).contains(&c0) || hosts_in(&config).len() != 4 {
            return Err(format!("c's member is still in the config: {config}"));
        }
        let reasons = event_reasons_in(lab, 0, NAME).await?;
        let position = |reason: &str| reasons.iter().position(|r| r == reason);
        match (
            position("ForgettingCluster"),
            position("RemoveForgottenMember"),
            position("ClusterForgotten"),
        ) {
            (Some(asked), Some(removed), Some(done)) if asked < removed && removed < done => {}
            _ => return Err(format!("Events out of order or missing: {reasons:?}")),
        }

        // The roll completes in a and b.
        let deadline = Instant::now() + ROLL_TIMEOUT;
        while !rolled_in_a_and_b(lab, &before).await? {
            if Instant::now() > deadline {
                let status = rolled_status(lab, NAME).await?;
                return Err(format!(
                    "the roll was not over {ROLL_TIMEOUT:?} after c was forgotten: {}",
                    status.err().unwrap_or_default()
                ));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        let rolled_after = asked_at.elapsed();

        // c comes back: its member holds the old config and is kept out.
        let cluster = &lab.clusters()[2];
        cluster.node.heal();
        lab.network().heal_site(&cluster.name);
        lab.restart_operator(2)
            .map_err(fail("restart c's operator"))?;
        until_in(lab, 2, NAME, "c's member kept out", |m| {
            reason_is(m, "Ready", "ForgottenWithItsCluster")
        })
        .await?;
        let still = config_on(lab, NAME, &a0).await?;
        if hosts_in(&still).contains(&c0) {
            return Err(format!("c's forgotten member was re-added: {still}"));
        }

        let mut sampler = sampler;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => writer.stop_and_check().await?.len(),
            None => 0,
        };
        eprintln!(
            "forgotten {forgotten_after:?} after the request, rolled {rolled_after:?} after it; \
             {} samples; {acknowledged} majority writes acknowledged, none lost",
            samples.len()
        );
        one_primary_per_term(&samples)
    })
    .await;
}
