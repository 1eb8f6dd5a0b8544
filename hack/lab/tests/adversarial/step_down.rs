//! A primary that cannot step down (every secondary far behind) while a
//! scale-in removes it: the step-down is retried with growing pauses, read
//! from the operator's log and its StepDownFailed Events, and the status says
//! what the removal waits for; once the secondaries catch up the member leaves.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::{condition, events, phase, ready, running_members, same_set};
use crate::harness::*;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use lab::lab::Lab;
use mongodb_member_operator::api::MongoDB;

/// The operator log of cluster `cluster`, without terminal colours.
fn operator_log(lab: &Lab, cluster: usize) -> Result<String, String> {
    let raw = std::fs::read_to_string(lab.operator_log(cluster)).map_err(fail("operator log"))?;
    let mut plain = String::with_capacity(raw.len());
    let mut escape = false;
    for c in raw.chars() {
        match (escape, c) {
            (false, '\u{1b}') => escape = true,
            (false, c) => plain.push(c),
            (true, 'm') => escape = false,
            (true, _) => {}
        }
    }
    Ok(plain)
}

/// When cluster `cluster`'s operator planned a step containing `step` (each
/// line's timestamp), with what triggered that pass.
fn planned(lab: &Lab, cluster: usize, step: &str) -> Result<Vec<(Timestamp, String)>, String> {
    let log = operator_log(lab, cluster)?;
    let mut found = Vec::new();
    for line in log
        .lines()
        .filter(|l| l.contains(" planned ") && l.contains(step))
    {
        let at = line.split_whitespace().next().unwrap_or_default();
        let at: Timestamp = at.parse().map_err(fail("log timestamp"))?;
        let trigger = line
            .split("object.reason=")
            .nth(1)
            .and_then(|rest| rest.split('}').next())
            .unwrap_or("?")
            .to_string();
        found.push((at, trigger));
    }
    Ok(found)
}

/// Writes once (w:1) to the primary and waits until its last optime is ahead
/// of every lagging member's: the entry they lack that keeps mongod from
/// finding a caught-up secondary.
async fn primary_ahead_of(
    lab: &Lab,
    hosts: &[String],
    primary: &str,
    lagging: &[String],
) -> Outcome {
    mongo(lab, "backoff", hosts, false)
        .await?
        .database("lab")
        .run_command(mongodb::bson::doc! {
            "insert": "behind",
            "documents": [{"at": "lag set"}],
            "writeConcern": {"w": 1},
        })
        .await
        .map_err(fail("the write the secondaries lack"))?;
    let network = lab.network();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ahead = network.member(primary).is_some_and(|p| {
            lagging.iter().all(|listen| {
                network
                    .member(listen)
                    .is_none_or(|m| m.last_optime() < p.last_optime())
            })
        });
        if ahead {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the primary {primary} holds nothing the lagging members lack"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primary_that_cannot_step_down_is_retried_with_a_growing_delay() {
    let started = Instant::now();
    scenario(64, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("backoff", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "backoff", "a=2,b=2,c=1").await?;
        phase(started, "backoff: a=2,b=2,c=1 everywhere");
        let leaving = member_host(lab, 0, "backoff", 1).await?;
        make_primary(lab, "backoff", &leaving).await?;
        phase(started, "a's member 1 is primary");
        let hosts = hosts_of(lab, 0, "backoff").await?;
        let first = config(lab, "backoff", &hosts).await?;
        let writer = MajorityWriter::start(lab, "backoff", &hosts).await?;
        control_plane
            .settled("default", "backoff", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;

        // Every secondary applies the oplog 10 minutes late, and the primary
        // then takes a write they lack: none is caught up, so mongod answers a
        // step-down 262 after its catch-up period. Without that write a
        // step-down that starts before the writer's next insert finds every
        // secondary holding the primary's last optime, and mongod steps down
        // at once (`TopologyCoordinator::isSafeToStepDown`).
        let primaries = lab.network().primaries();
        let [primary] = primaries.as_slice() else {
            return Err(format!("expected one primary, found {primaries:?}"));
        };
        let lagging: Vec<String> = (0..lab.clusters().len())
            .flat_map(|cluster| running_members(lab, cluster))
            .filter(|listen| listen != primary)
            .collect();
        for listen in &lagging {
            lab.network().set_lag(listen, Duration::from_secs(600));
        }
        primary_ahead_of(lab, &hosts, primary, &lagging).await?;
        let asked = Timestamp::now();
        control_plane
            .apply(&request("backoff", "a=1,b=2,c=1"))
            .await
            .map_err(fail("scale in"))?;
        phase(started, "secondaries lag 10 min; scale-in asked");

        // 45 s: when each step-down was planned (the log) and when mongod's
        // refusal came back (the StepDownFailed Event's series).
        let step = format!("step primary {leaving} down");
        // Also each status write in cluster a (each one is a watch event that
        // starts a pass), with what it shows.
        let mut ends = BTreeSet::new();
        let mut writes = Vec::new();
        let mut last_version = None;
        let in_a: Api<MongoDB> = Api::namespaced(lab.clusters()[0].client.clone(), "default");
        let window = Instant::now() + Duration::from_secs(45);
        while Instant::now() < window {
            for event in events(lab, 0, "backoff", "StepDownFailed").await? {
                ends.extend(event.event_time.map(|t| t.0));
                ends.extend(event.series.map(|s| s.last_observed_time.0));
            }
            let a = in_a.get("backoff").await.map_err(fail("MongoDB"))?;
            if a.metadata.resource_version != last_version {
                last_version = a.metadata.resource_version.clone();
                let status = a.status.clone().unwrap_or_default();
                let lags: Vec<(i32, Option<i64>)> = status
                    .local_members
                    .iter()
                    .map(|m| (m.index, m.lag_seconds))
                    .collect();
                writes.push(format!(
                    "{} generation {:?}: Progressing {:?}, lags {lags:?}",
                    Timestamp::now(),
                    a.metadata.generation,
                    condition(&a, "Progressing").map(|c| &c.reason)
                ));
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        let attempts: Vec<(Timestamp, String)> = planned(lab, 0, &step)?
            .into_iter()
            .filter(|(at, _)| *at >= asked)
            .collect();
        // Every attempt but the last has been refused by now: its Event is out.
        for event in events(lab, 0, "backoff", "StepDownFailed").await? {
            ends.extend(event.event_time.map(|t| t.0));
            ends.extend(event.series.map(|s| s.last_observed_time.0));
        }
        let a = statuses(lab, "backoff").await?.remove(0).1;
        let progressing = condition(&a, "Progressing").cloned();
        let warnings = events(lab, 0, "backoff", "StepDownFailed").await?;
        eprintln!("step-down attempts (start, trigger): {attempts:?}");
        eprintln!("refusals seen at: {ends:?}");
        eprintln!("writes of cluster a's MongoDB: {writes:#?}");
        eprintln!("cluster a Progressing: {progressing:?}");
        eprintln!(
            "StepDownFailed Events: {:?}",
            warnings
                .iter()
                .map(|e| (e.series.as_ref().map(|s| s.count), e.note.clone()))
                .collect::<Vec<_>>()
        );

        let mut gaps = Vec::new();
        for pair in attempts.windows(2) {
            let (start, _) = &pair[0];
            let (next, trigger) = &pair[1];
            let Some(end) = ends.iter().find(|end| *end >= start && *end <= next) else {
                return Err(format!(
                    "attempt at {next} ({trigger}) started before the one at {start} was refused"
                ));
            };
            gaps.push(next.duration_since(*end).as_secs_f64());
        }
        eprintln!("pauses between a refusal and the next attempt (s): {gaps:?}");
        phase(started, "45 s of refused step-downs observed");
        if attempts.len() < 2 || ends.is_empty() {
            return Err(format!(
                "expected a refused step-down retried within 45 s: {} attempts, {} refusals",
                attempts.len(),
                ends.len()
            ));
        }
        // Between attempts the status says what the removal waits for, and how
        // far behind the closest electable secondary is.
        if !progressing.as_ref().is_some_and(|c| {
            c.reason == "StepDownRefused"
                && c.message.contains(&leaving)
                && c.message.contains("behind")
        }) {
            return Err(format!(
                "status does not say why the primary cannot step down yet: {progressing:?}"
            ));
        }
        if !warnings.iter().any(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.note.as_deref().is_some_and(|n| {
                    n.contains(&leaving) && n.contains("no electable secondary caught up")
                })
        }) {
            return Err(format!(
                "no StepDownFailed Warning saying why: {warnings:?}"
            ));
        }
        // Judged at the end, so that a failure here still shows whether the
        // removal completes and the writes survive.
        let backoff = if let Some(short) = gaps.iter().find(|gap| **gap < 4.5) {
            Err(format!(
                "a refused step-down was tried again after {short:.1} s (the backoff starts at \
                 5 s): pauses {gaps:?}, attempts (start, trigger) {attempts:?}"
            ))
        } else if gaps.windows(2).any(|pair| pair[1] + 0.5 < pair[0]) {
            Err(format!("the pauses between attempts do not grow: {gaps:?}"))
        } else {
            Ok(())
        };

        // The secondaries catch up: the step-down succeeds, the member leaves.
        for listen in &lagging {
            lab.network().set_lag(listen, Duration::ZERO);
        }
        ready(lab, "backoff", "a=1,b=2,c=1").await?;
        phase(started, "backoff: a=1,b=2,c=1 everywhere");
        let remaining = hosts_of(lab, 1, "backoff").await?;
        if remaining.contains(&leaving) || remaining.len() != 4 {
            return Err(format!("{leaving} should have left: {remaining:?}"));
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        same_set(&first, &config(lab, "backoff", &remaining).await?)?;
        backoff
    })
    .await;
}
