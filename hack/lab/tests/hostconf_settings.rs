//! Settings of members already in the set, changed in hostconf.
//!
//! A Ready 1+1+1 set under a w:"majority" writer; the control plane then
//! rewrites hostconf as a FedState user would, through a Karmada
//! OverridePolicy giving it the structured `members.yaml`: first b's member
//! gets priority 2, then c's member `votes: 0`. Each change must reach the
//! primary's config within a generous deadline, by ordinary reconfigs (no
//! forced one, same replicaSetId), with every member up throughout and no
//! acknowledged write lost. Lab 78.

use std::time::{Duration, Instant};

use mongodb::bson::Document;

use crate::harness::*;
use crate::roll_races::hostconf_policy;
use lab::lab::Lab;
use lab::observe::{SetSample, SetSampler};

const NAME: &str = "settings";
const SPLIT: &str = "a=1,b=1,c=1";
/// The one policy both changes are written in: the second replaces the first.
const POLICY: &str = "hostconf-settings";
/// How long one hostconf change may take to reach the primary's config.
const SETTINGS_TIMEOUT: Duration = Duration::from_secs(90);
/// How often the set is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// The first config version a forced reconfig gives (mongod adds a random
/// number of at least 10000 to the version).
const FORCED_VERSION: i64 = 10_000;

/// `(votes, priority)` of `host`'s entry in `config`.
fn settings_of(config: &Document, host: &str) -> Option<(i64, f64)> {
    let members = config.get_array("members").ok()?;
    let entry = members
        .iter()
        .filter_map(|m| m.as_document())
        .find(|m| m.get_str("host").ok() == Some(host))?;
    let number = |key: &str| -> Option<f64> {
        match entry.get(key)? {
            mongodb::bson::Bson::Int32(n) => Some(f64::from(*n)),
            mongodb::bson::Bson::Int64(n) => Some(*n as f64),
            mongodb::bson::Bson::Double(n) => Some(*n),
            _ => None,
        }
    };
    Some((number("votes")? as i64, number("priority")?))
}

/// Writes `members` into hostconf and waits until the primary's config gives
/// `host` the `(votes, priority)` `wanted`; returns the config then.
async fn change_and_wait(
    lab: &Lab,
    hosts: &[String],
    members: &str,
    host: &str,
    wanted: (i64, f64),
) -> Result<Document, String> {
    let changed_at = Instant::now();
    lab.control_plane()
        .apply_override_policy("default", NAME, POLICY, hostconf_policy(NAME, members))
        .await
        .map_err(fail("hostconf override"))?;
    loop {
        // A reconfig or an election may make one read fail: asked again.
        let found = config(lab, NAME, hosts).await;
        if let Ok(config) = &found {
            if settings_of(config, host) == Some(wanted) {
                eprintln!(
                    "{NAME}: {host} at {wanted:?} after {:.1} s, config version {}",
                    changed_at.elapsed().as_secs_f64(),
                    version(config)
                );
                return found;
            }
        }
        if changed_at.elapsed() > SETTINGS_TIMEOUT {
            let seen = found.map(|c| settings_of(&c, host));
            return Err(format!(
                "{host} should be at (votes, priority) {wanted:?} {SETTINGS_TIMEOUT:?} after \
                 hostconf said so: the primary's config has {seen:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Checks the config after a change of one member, from `previous`: one
/// ordinary reconfig of the same set.
fn one_reconfig(config: &Document, previous: &Document, replica_set: &Option<String>) -> Outcome {
    if version(config) != version(previous) + 1 {
        return Err(format!(
            "one member's change should be one reconfig: version {} after {}",
            version(config),
            version(previous)
        ));
    }
    if version(config) >= FORCED_VERSION {
        return Err(format!(
            "config version {} looks forced (>= {FORCED_VERSION})",
            version(config)
        ));
    }
    if replica_set_id(config) != *replica_set {
        return Err(format!(
            "replicaSetId changed from {replica_set:?} to {:?}",
            replica_set_id(config)
        ));
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostconf_changes_of_existing_members_reach_the_config_one_reconfig_at_a_time() {
    scenario(78, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        lab.control_plane()
            .apply(&request(NAME, SPLIT))
            .await
            .map_err(fail("apply"))?;
        ready(lab, NAME, SPLIT).await?;
        let mut hosts = Vec::new();
        for cluster in 0..3 {
            hosts.push(member_host(lab, cluster, NAME, 0).await?);
        }
        let [a, b, c] = [&hosts[0], &hosts[1], &hosts[2]];
        let before = config(lab, NAME, &hosts).await?;
        let replica_set = replica_set_id(&before);
        if replica_set.is_none() {
            return Err("the config has no replicaSetId".into());
        }
        let mut sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);
        let writer = TimedMajorityWriter::start(lab, NAME, &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
        }

        let changes = async {
            let raised = format!("- host: {a}\n- host: {b}\n  priority: 2\n- host: {c}\n");
            let raised_config = change_and_wait(lab, &hosts, &raised, b, (1, 2.0)).await?;
            one_reconfig(&raised_config, &before, &replica_set)?;
            let demoted = format!(
                "- host: {a}\n- host: {b}\n  priority: 2\n- host: {c}\n  votes: 0\n  priority: 0\n"
            );
            let after = change_and_wait(lab, &hosts, &demoted, c, (0, 0.0)).await?;
            one_reconfig(&after, &raised_config, &replica_set)?;
            match settings_of(&after, b) {
                Some((1, 2.0)) => Ok(()),
                other => Err(format!("{b} lost its priority 2 on c's change: {other:?}")),
            }
        }
        .await;
        let samples: Vec<SetSample> = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => Some(writer.stop_and_check().await?.len()),
            None => None,
        };
        changes?;

        // A settings change restarts nobody: every member stays up, so a
        // voting majority does, and one primary per term.
        if let Some(sample) = samples.iter().find(|s| !s.down().is_empty()) {
            return Err(format!("{:?} went down during the changes", sample.down()));
        }
        one_primary_per_term(&samples)?;
        eprintln!(
            "{NAME}: {} samples, all up, primary at the end {:?}; {acknowledged:?} writes \
             acknowledged, none lost",
            samples.len(),
            samples.last().map(|s| s.primaries())
        );
        Ok(())
    })
    .await;
}
