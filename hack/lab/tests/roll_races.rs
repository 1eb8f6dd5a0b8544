//! The roll where another rule or another cluster narrows what it may do.
//!
//! - A set of three clusters whose only electable member is the primary: the
//!   other two have priority 0, written in hostconf by the control plane (a
//!   Karmada OverridePolicy giving hostconf the structured `members.yaml`).
//!   A template change rolls all three one at a time: the two priority-0
//!   secondaries first, then the primary, restarted once without a step-down
//!   (mongod would refuse it, 262, after refusing writes for its catch-up
//!   period), said in a Warning Event.
//! - A roll racing another cluster's removal: a template change reaches a
//!   2+2+1 set and cluster c is scaled to 0 right after, so c's member leaves
//!   the config while the others restart. The roll reads the config afresh
//!   before it deletes a pod and needs a voting majority of it up without
//!   that member; the samples check that a voting majority of the newest
//!   config is up throughout.
//!
//! Each runs a w:"majority" writer that must lose nothing. Lab 52: the
//! single electable member; lab 53: the race.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::harness::*;
use crate::roll_safety::event_reasons;
use crate::rolling::{longest_write_gap, rolled_status, sized};
use crate::write_concern::members_of;
use federation_sim::karmada::{Kind, OverridePolicy, Overrider, ResourceRef};
use k8s_openapi::api::apps::v1::StatefulSet;
use kube::Api;
use lab::lab::Lab;
use lab::observe::{self, Sampler, SetSample, SetSampler};
use mongod_sim::{MemberState, Network};
use mongodb_member_operator::api::MongoDB;
use serde_json::json;

/// How often the set is sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// From the template change to every cluster saying the roll is over.
const ROLL_TIMEOUT: Duration = Duration::from_secs(120);
/// How long hostconf's priorities may take to reach the config.
const SETTINGS_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest time the writer may go without an acknowledged write: one
/// restart of the primary, which no other member can replace meanwhile.
const LONGEST_GAP: Duration = Duration::from_secs(15);

/// The stops of `hosts`' members since `since`: the host each stop was of,
/// and the member's state when it stopped.
fn stops_since(lab: &Lab, hosts: &[String], since: Instant) -> Vec<(String, MemberState)> {
    lab.network()
        .stops()
        .into_iter()
        .filter(|stop| stop.at >= since)
        .filter_map(|stop| {
            let host = stop
                .host
                .iter()
                .chain(&stop.aliases)
                .find(|h| hosts.contains(h))?;
            Some((host.clone(), stop.state))
        })
        .collect()
}

/// The priority of each member of `config`, by host.
fn priorities(config: &mongodb::bson::Document) -> BTreeMap<String, f64> {
    members_of(config)
        .into_iter()
        .map(|(host, _, priority)| (host, priority))
        .collect()
}

/// Applies instance `name` of `split` with its first resources request and
/// waits until every cluster reports it ready.
async fn ready_instance(lab: &Lab, name: &str, split: &str) -> Outcome {
    lab.control_plane()
        .apply(&sized(name, split, "1", "512Mi"))
        .await
        .map_err(fail("apply"))?;
    ready(lab, name, split).await
}

/// Changes the resources request of `name` (a new pod template in every
/// cluster); returns when.
async fn change_template(lab: &Lab, name: &str, split: &str) -> Result<Instant, String> {
    let changed_at = Instant::now();
    lab.control_plane()
        .apply(&sized(name, split, "1500m", "1Gi"))
        .await
        .map_err(fail("apply the new resources"))?;
    Ok(changed_at)
}

/// The majority writer on `hosts`, once it has some writes acknowledged.
async fn writing(
    lab: &Lab,
    name: &str,
    hosts: &[String],
) -> Result<Option<TimedMajorityWriter>, String> {
    let writer = TimedMajorityWriter::start(lab, name, hosts).await?;
    if let Some(writer) = &writer {
        writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
    }
    Ok(writer)
}

/// The control plane's hostconf for `name`, in the structured format: every
/// host of `hosts`, priority 0 for all but `electable`. Sent as a Karmada
/// OverridePolicy on FedState's hostconf, so every cluster gets the same.
fn only_electable(name: &str, hosts: &[String], electable: &str) -> OverridePolicy {
    let members: String = hosts
        .iter()
        .map(|host| match host == electable {
            true => format!("- host: {host}\n"),
            false => format!("- host: {host}\n  priority: 0\n"),
        })
        .collect();
    hostconf_policy(name, &members)
}

/// A Karmada OverridePolicy giving instance `name`'s hostconf, in every
/// cluster, the structured `members.yaml` text `members`: how a control plane
/// other than FedState's own passes sets members' priority, votes, hidden or
/// tags.
pub(super) fn hostconf_policy(name: &str, members: &str) -> OverridePolicy {
    OverridePolicy {
        labels: Default::default(),
        resource: ResourceRef::new(Kind::ConfigMap, format!("{name}-hostconf")),
        clusters: None,
        overrider: Overrider::AddPath {
            path: "/data".to_string(),
            value: json!({ "members.yaml": members }),
        },
    }
}

/// Waits until the primary's config gives every member of `hosts` but
/// `electable` priority 0, and `electable` is the primary.
async fn wait_only_electable(
    lab: &Lab,
    name: &str,
    hosts: &[String],
    electable: &str,
    sampler: &SetSampler,
) -> Outcome {
    let deadline = Instant::now() + SETTINGS_TIMEOUT;
    loop {
        let found = priorities(&config(lab, name, hosts).await?);
        let demoted = hosts
            .iter()
            .filter(|h| *h != electable)
            .all(|h| found.get(h) == Some(&0.0));
        let primary = sampler
            .latest()
            .is_some_and(|s| s.primaries().iter().any(|(_, h)| *h == electable));
        if demoted && found.get(electable).is_some_and(|p| *p > 0.0) && primary {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "hostconf's priorities were not in the config {SETTINGS_TIMEOUT:?} after the \
                 change, or {electable} is not primary: priorities {found:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every revision in `now` is known and none is one of `before`.
fn all_replaced(before: &[Option<String>], now: &[Option<String>]) -> bool {
    !now.is_empty() && now.iter().all(|r| r.is_some() && !before.contains(r))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_whose_only_electable_member_is_the_primary_rolls_it_last_without_a_step_down() {
    const NAME: &str = "lone-electable";
    const SPLIT: &str = "a=1,b=1,c=1";
    scenario(52, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        ready_instance(lab, NAME, SPLIT).await?;
        let mut hosts = Vec::new();
        for cluster in 0..3 {
            hosts.push(member_host(lab, cluster, NAME, 0).await?);
        }
        let electable = hosts[0].clone();
        let mut sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);
        lab.control_plane()
            .apply_override_policy(
                "default",
                NAME,
                "hostconf-electable-in-a",
                only_electable(NAME, &hosts, &electable),
            )
            .await
            .map_err(fail("hostconf with priorities"))?;
        wait_only_electable(lab, NAME, &hosts, &electable, &sampler).await?;

        let writer = writing(lab, NAME, &hosts).await?;
        let before = member_revisions(lab, NAME).await?;
        let changed_at = change_template(lab, NAME, SPLIT).await?;
        let deadline = changed_at + ROLL_TIMEOUT;
        let rolled = loop {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let status = rolled_status(lab, NAME).await?;
            let primary = sampler
                .latest()
                .is_some_and(|s| s.down().is_empty() && s.primaries().len() == 1);
            if status.is_ok()
                && primary
                && all_replaced(&before, &member_revisions(lab, NAME).await?)
            {
                break Ok(());
            }
            if Instant::now() > deadline {
                break Err(format!(
                    "the roll was not over {ROLL_TIMEOUT:?} after the change: {}",
                    status.err().unwrap_or_else(|| "no healthy primary".into())
                ));
            }
        };
        let ended = Instant::now();
        let samples = sampler.stop();
        let stops = stops_since(lab, &hosts, changed_at);
        let reasons = event_reasons(lab, NAME).await?;
        let acknowledged = match writer {
            Some(writer) => Some(writer.stop_and_check().await?),
            None => None,
        };
        rolled?;

        let during: Vec<SetSample> = samples.into_iter().filter(|s| s.at >= changed_at).collect();
        let worst = observe::most_down(&during).map(|s| s.down().len());
        eprintln!(
            "{NAME}: {} samples, at most {worst:?} down at once; stops {stops:?}",
            during.len()
        );
        if let Some(sample) = observe::most_down(&during).filter(|s| s.down().len() > 1) {
            return Err(format!(
                "{:?} down at once, +{:.1} s after the change",
                sample.down(),
                sample.at.duration_since(changed_at).as_secs_f64()
            ));
        }
        one_primary_per_term(&during)?;
        let per_host: BTreeMap<&str, usize> = hosts
            .iter()
            .map(|h| (h.as_str(), stops.iter().filter(|(s, _)| s == h).count()))
            .collect();
        if per_host.values().any(|count| *count != 1) {
            return Err(format!("each member should stop once: {per_host:?}"));
        }
        let as_primary: Vec<&String> = stops
            .iter()
            .filter(|(_, state)| *state == MemberState::Primary)
            .map(|(host, _)| host)
            .collect();
        if as_primary != [&electable] || stops.last().map(|(h, _)| h) != Some(&electable) {
            return Err(format!(
                "{electable}, the only electable member, should stop last and as the only \
                 PRIMARY stopped (it cannot be stepped down): stops {stops:?}"
            ));
        }
        let last = during.last().ok_or("no sample")?;
        if last.primaries().iter().map(|(_, h)| *h).collect::<Vec<_>>() != [electable.as_str()] {
            return Err(format!(
                "after the roll the primary should be {electable}: {:?}",
                last.primaries()
            ));
        }
        let without_step_down = reasons
            .iter()
            .filter(|r| *r == "RestartingPrimaryWithoutStepDown")
            .count();
        if without_step_down != 1 || reasons.iter().any(|r| r == "SteppingDownForRestart") {
            return Err(format!(
                "one RestartingPrimaryWithoutStepDown and no step-down expected: {reasons:?}"
            ));
        }
        if let Some(acknowledged) = acknowledged {
            let (gap, from) = longest_write_gap(&acknowledged, changed_at, ended);
            eprintln!(
                "{NAME}: longest write gap {:.1} s from +{:.1} s after the change",
                gap.as_secs_f64(),
                from.saturating_duration_since(changed_at).as_secs_f64()
            );
            if gap > LONGEST_GAP {
                return Err(format!(
                    "the writer went {:.1} s without an acknowledged write, longer than one \
                     restart ({LONGEST_GAP:?})",
                    gap.as_secs_f64()
                ));
            }
        }
        Ok(())
    })
    .await;
}

/// One instant of the set: every member's state by its host, and the voters
/// of the newest config any running member holds (a removal shows there as
/// soon as one member has it).
#[derive(Clone)]
struct MajoritySample {
    set: SetSample,
    voters: Vec<String>,
    version: i64,
}

impl MajoritySample {
    fn take(network: &Network, hosts: &[String]) -> MajoritySample {
        let set = observe::sample_set(network, hosts);
        let newest = network
            .running()
            .iter()
            .filter_map(|listen| network.member(listen)?.config())
            .max_by_key(|config| (config.term, config.version));
        let (voters, version) = newest.map_or((Vec::new(), -1), |config| {
            let voters = config
                .members
                .iter()
                .filter(|m| m.is_voter())
                .map(|m| m.host.clone())
                .collect();
            (voters, config.version)
        });
        MajoritySample {
            set,
            voters,
            version,
        }
    }

    /// The voters up, and how many a majority needs.
    fn voters_up(&self) -> (usize, usize) {
        let up = self
            .set
            .members
            .iter()
            .filter(|m| m.is_up() && self.voters.contains(&m.host))
            .count();
        (up, self.voters.len() / 2 + 1)
    }
}

/// Waits until the roll and the removal are both over: cluster c holds no
/// object and no StatefulSet, the config lists exactly `staying`, and every
/// remaining cluster reports its members replaced and the roll over.
async fn wait_rolled_and_removed(
    lab: &Lab,
    name: &str,
    staying: &[String],
    before: &[Option<String>],
    deadline: Instant,
) -> Outcome {
    let c = lab.clusters()[2].client.clone();
    loop {
        let c_gone = Api::<MongoDB>::namespaced(c.clone(), "default")
            .get_opt(name)
            .await
            .map_err(fail("c's MongoDB"))?
            .is_none()
            && Api::<StatefulSet>::namespaced(c.clone(), "default")
                .get_opt(&format!("{name}-mongodb-0"))
                .await
                .map_err(fail("c's StatefulSet"))?
                .is_none();
        let listed: BTreeSet<String> = config(lab, name, staying)
            .await
            .map(|c| priorities(&c).into_keys().collect())
            .unwrap_or_default();
        let remaining = statuses(lab, name).await?;
        let over = remaining.len() == 2
            && remaining.iter().all(|(_, m)| {
                let status = m.status.as_ref();
                status.and_then(|s| s.observed_generation) == m.metadata.generation
                    && status.is_some_and(|s| s.restart_state.as_deref() == Some("NotInProcess"))
                    && status.is_some_and(|s| {
                        s.conditions
                            .iter()
                            .any(|c| c.type_ == "UpToDate" && c.status == "True")
                    })
            });
        let replaced = all_replaced(before, &member_revisions(lab, name).await?);
        if c_gone && over && replaced && listed == staying.iter().cloned().collect() {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "not over {ROLL_TIMEOUT:?} after the change: c gone {c_gone}, the roll over \
                 {over}, every member replaced {replaced}, config lists {listed:?}"
            ));
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roll_racing_another_clusters_removal_keeps_a_voting_majority_of_the_config_up() {
    const NAME: &str = "race";
    const SPLIT: &str = "a=2,b=2,c=1";
    scenario(53, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let control_plane = lab.control_plane();
        ready_instance(lab, NAME, SPLIT).await?;
        // As a FedState user would: scale only once the MultiCloudMongoDB
        // reports the set (FedState's scale-down reads its own status).
        control_plane
            .settled("default", NAME, READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        let mut hosts = Vec::new();
        for (cluster, members) in [(0, 2), (1, 2), (2, 1)] {
            for index in 0..members {
                hosts.push(member_host(lab, cluster, NAME, index).await?);
            }
        }
        let staying = hosts[..4].to_vec();
        let mut sampler = {
            let (network, hosts) = (lab.network().clone(), hosts.clone());
            Sampler::start(SAMPLE_EVERY, move || MajoritySample::take(&network, &hosts))
        };
        let writer = writing(lab, NAME, &staying).await?;
        let before = member_revisions(lab, NAME).await?;
        let stateful_sets: Api<StatefulSet> =
            Api::namespaced(lab.clusters()[0].client.clone(), "default");
        let template = async || -> Result<Option<String>, String> {
            Ok(stateful_sets
                .get_opt(&format!("{NAME}-mongodb-0"))
                .await
                .map_err(fail("a's StatefulSet"))?
                .and_then(|s| observe::template_revision(&s)))
        };
        let old_template = template().await?;
        let changed_at = change_template(lab, NAME, SPLIT).await?;
        // The removal right after the change reaches cluster a's template.
        while template().await? == old_template {
            if changed_at.elapsed() > ROLL_TIMEOUT {
                return Err("the change never reached cluster a's StatefulSet".into());
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        control_plane
            .apply(&sized(NAME, "a=2,b=2,c=0", "1500m", "1Gi"))
            .await
            .map_err(fail("scale c to 0"))?;
        let scaled_at = Instant::now();
        let done =
            wait_rolled_and_removed(lab, NAME, &staying, &before, changed_at + ROLL_TIMEOUT).await;
        let samples = sampler.stop();
        let acknowledged = match writer {
            Some(writer) => Some(writer.stop_and_check().await?),
            None => None,
        };
        let stops = stops_since(lab, &hosts, changed_at);
        // Whether c's member held the lease as c left (taken over at once).
        let takeovers = event_reasons(lab, NAME)
            .await?
            .iter()
            .filter(|r| *r == "TakingOverExpiredLease")
            .count();
        eprintln!(
            "{NAME}: c scaled to 0 +{:.1} s after the change, over +{:.1} s; {} samples; \
             stops {stops:?}; {takeovers} lease takeover(s); {} acknowledged writes",
            scaled_at.duration_since(changed_at).as_secs_f64(),
            changed_at.elapsed().as_secs_f64(),
            samples.len(),
            acknowledged.as_ref().map_or(0, Vec::len)
        );
        let lost: Vec<String> = samples
            .iter()
            .filter(|s| s.set.at >= changed_at)
            .filter(|s| {
                let (up, needed) = s.voters_up();
                up < needed
            })
            .map(|s| {
                let (up, needed) = s.voters_up();
                format!(
                    "+{:.2} s: config v{} voters {:?}, {up} up of {needed} needed (down {:?})",
                    s.set.at.duration_since(changed_at).as_secs_f64(),
                    s.version,
                    s.voters,
                    s.set.down()
                )
            })
            .collect();
        if !lost.is_empty() {
            return Err(format!(
                "a voting majority of the config was not up in {} samples, first: {:?}",
                lost.len(),
                &lost[..lost.len().min(5)]
            ));
        }
        let sets: Vec<SetSample> = samples.into_iter().map(|s| s.set).collect();
        one_primary_per_term(&sets)?;
        done
    })
    .await;
}
