//! Adversarial end-to-end scenarios: the real operator binary, once per
//! simulated cluster, under what a replica set across clusters meets at its
//! worst — the cost of an idle instance, a set left without a primary,
//! one cluster whose settings differ, an object the API server refuses, a
//! member Service given another nodePort, a primary that cannot step
//! down, and the rsInit cluster's object recreated while it is cut off from a
//! live set. Each test runs its own lab (numbers
//! 60–79) and shuts it down; each that changes the set runs a majority writer
//! whose every acknowledged write must survive.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use crate::harness::*;
use federation_sim::control_plane::Split;
use federation_sim::karmada::{Kind, OverridePolicy, Overrider, ResourceRef};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Service};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use lab::lab::Lab;
use lab::observe;
use mongodb::bson::Document;
use mongodb_member_operator::api::{MongoDB, MongoState};
use serde_json::json;

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

fn election_timeout(config: &Document) -> Option<i64> {
    let settings = config.get_document("settings").ok()?;
    settings
        .get_i32("electionTimeoutMillis")
        .map(i64::from)
        .or_else(|_| settings.get_i64("electionTimeoutMillis"))
        .ok()
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

/// CPU time (user + system, in clock ticks) of process `pid` so far.
fn cpu_ticks(pid: u32) -> Result<u64, String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(fail("/proc stat"))?;
    // The fields after the command name: the first is field 3 (state);
    // utime is field 14, stime field 15 (proc(5)).
    let (_, fields) = stat
        .rsplit_once(')')
        .ok_or("no command name in /proc stat")?;
    let fields: Vec<&str> = fields.split_whitespace().collect();
    let field = |n: usize| -> Result<u64, String> {
        fields
            .get(n - 3)
            .and_then(|f| f.parse().ok())
            .ok_or(format!("no field {n} in /proc/{pid}/stat"))
    };
    Ok(field(14)? + field(15)?)
}

fn clock_ticks_per_second() -> Result<u64, String> {
    let output = std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .map_err(fail("getconf CLK_TCK"))?;
    String::from_utf8_lossy(&output.stdout)
        .trim()
        .parse()
        .map_err(fail("getconf CLK_TCK"))
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

// ---------------------------------------------------------------- case 14

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_instance_costs_each_operator_under_one_percent_of_a_core() {
    let started = Instant::now();
    scenario(60, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("idle", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "idle", "a=2,b=2,c=1").await?;
        phase(started, "idle: a=2,b=2,c=1 everywhere");
        control_plane
            .settled("default", "idle", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        let hz = clock_ticks_per_second()? as f64;
        let pids = (0..lab.clusters().len())
            .map(|i| {
                lab.operator_pid(i)
                    .ok_or(format!("operator {i} is not running"))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        let before = pids
            .iter()
            .map(|pid| cpu_ticks(*pid))
            .collect::<Result<Vec<u64>, String>>()?;
        let passes_before = (0..pids.len())
            .map(|i| passes(lab, i))
            .collect::<Result<Vec<usize>, String>>()?;
        let window = Instant::now();
        // The measurement window: an idle instance, FedState's passes every 15 s.
        tokio::time::sleep(Duration::from_secs(60)).await;
        let after = pids
            .iter()
            .map(|pid| cpu_ticks(*pid))
            .collect::<Result<Vec<u64>, String>>()?;
        let passes_after = (0..pids.len())
            .map(|i| passes(lab, i))
            .collect::<Result<Vec<usize>, String>>()?;
        let elapsed = window.elapsed().as_secs_f64();
        let mut figures = Vec::new();
        let mut over = Vec::new();
        for (index, cluster) in lab.clusters().iter().enumerate() {
            let seconds = after[index].saturating_sub(before[index]) as f64 / hz;
            let share = seconds / elapsed * 100.0;
            let per_minute =
                passes_after[index].saturating_sub(passes_before[index]) as f64 * 60.0 / elapsed;
            let figure = format!(
                "operator {}: {seconds:.2} s CPU in {elapsed:.1} s = {share:.2} % of a core, \
                 {per_minute:.1} passes a minute",
                cluster.name
            );
            // At rest a pass comes every 30 s (the in-sync requeue): two or
            // three fall in a 60 s window. A status write that triggered
            // another pass would double that.
            if share >= 1.0 || per_minute > 3.5 {
                over.push(figure.clone());
            }
            figures.push(figure);
        }
        eprintln!("idle cost: {}", figures.join("; "));
        if !over.is_empty() {
            return Err(format!(
                "an idle operator costs 1 % of a core or more, or passes more than 3 times a \
                 minute: {over:?}"
            ));
        }
        Ok(())
    })
    .await;
}

/// How many passes operator `index` has logged (one "planned" line each; the
/// roll stage logs its step as "roll step").
fn passes(lab: &Lab, index: usize) -> Result<usize, String> {
    let log = std::fs::read_to_string(lab.operator_log(index)).map_err(fail("operator log"))?;
    Ok(log
        .lines()
        .filter(|line| line.contains(" planned "))
        .count())
}

// ---------------------------------------------------------------- case 13

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

// ---------------------------------------------------------------- case 1

/// Config versions and election timeouts read from the primary every second
/// for `window`.
async fn watch_config(
    lab: &Lab,
    name: &str,
    hosts: &[String],
    window: Duration,
) -> Result<Vec<(i64, Option<i64>)>, String> {
    let until = Instant::now() + window;
    let mut seen = Vec::new();
    while Instant::now() < until {
        let current = config(lab, name, hosts).await?;
        seen.push((version(&current), election_timeout(&current)));
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    Ok(seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_whose_settings_differ_says_so_and_never_fights_the_rs_init_cluster() {
    let started = Instant::now();
    scenario(62, 3, async |lab| {
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("fight", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "fight", "a=2,b=2,c=1").await?;
        phase(started, "fight: a=2,b=2,c=1 everywhere");
        let hosts = hosts_of(lab, 0, "fight").await?;
        let writer = MajorityWriter::start(lab, "fight", &hosts).await?;
        let first = config(lab, "fight", &hosts).await?;
        if election_timeout(&first) != Some(2_000) {
            return Err(format!("the set starts without the lab's 2 s: {first}"));
        }

        // A user's OverridePolicy gives cluster c (not rsInit: a has most
        // members) slower elections; the others keep the lab's 2 s.
        control_plane
            .apply_override_policy(
                "default",
                "fight",
                "fight-slower-elections-in-c",
                override_in(
                    "c",
                    ResourceRef::new(Kind::MongoDB, "fight"),
                    "/spec/replicaSetSettings/electionTimeoutMillis",
                    json!(5_000),
                ),
            )
            .await
            .map_err(fail("OverridePolicy"))?;
        let c = wait_in(lab, 2, "fight", "SettingsMatch=False naming 5000", |m| {
            m.spec.replica_set_settings.election_timeout_millis == 5_000
                && condition(m, "SettingsMatch").is_some_and(|c| {
                    c.status == "False"
                        && c.reason == "SettingsDiffer"
                        && c.message.contains("electionTimeoutMillis 5000")
                        && c.message.contains("(2000, ")
                })
        })
        .await?;
        eprintln!(
            "cluster c: {:?}",
            condition(&c, "SettingsMatch").map(|c| &c.message)
        );
        phase(started, "c reports its settings differ");
        let before = version(&config(lab, "fight", &hosts).await?);
        let seen = watch_config(lab, "fight", &hosts, Duration::from_secs(20)).await?;
        let highest = seen.iter().map(|(v, _)| *v).max().unwrap_or(before);
        eprintln!("20 s with c's 5000: versions {before} → {highest}");
        phase(started, "20 s observed");
        if highest > before + 1 {
            return Err(format!(
                "the config version climbed from {before} to {highest} in 20 s: {seen:?}"
            ));
        }
        if seen.iter().any(|(_, timeout)| *timeout != Some(2_000)) {
            return Err(format!(
                "the set left the rsInit cluster's 2000 ms: {seen:?}"
            ));
        }
        for cluster in [0, 1] {
            wait_in(lab, cluster, "fight", "SettingsMatch=True", |m| {
                condition(m, "SettingsMatch").is_some_and(|c| c.status == "True")
            })
            .await?;
        }

        // The template changes (every cluster gets 3 s; c keeps its own 5 s).
        let mut changed = request("fight", "a=2,b=2,c=1");
        changed.settings.election_timeout_millis = 3_000;
        let before = highest;
        control_plane
            .apply(&changed)
            .await
            .map_err(fail("apply 3 s"))?;
        let deadline = Instant::now() + Duration::from_secs(60);
        while election_timeout(&config(lab, "fight", &hosts).await?) != Some(3_000) {
            if Instant::now() > deadline {
                return Err("the set never took the template's 3000 ms".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let seen = watch_config(lab, "fight", &hosts, Duration::from_secs(10)).await?;
        eprintln!("after the template's 3000: {seen:?} (from version {before})");
        phase(started, "the set took 3000 ms once");
        if seen
            .iter()
            .any(|&(v, timeout)| v != before + 1 || timeout != Some(3_000))
        {
            return Err(format!(
                "expected version {} with 3000 ms and nothing else, saw {seen:?}",
                before + 1
            ));
        }
        wait_in(
            lab,
            2,
            "fight",
            "SettingsMatch=False naming 5000 and 3000",
            |m| {
                condition(m, "SettingsMatch").is_some_and(|c| {
                    c.status == "False"
                        && c.message.contains("electionTimeoutMillis 5000")
                        && c.message.contains("(3000, ")
                })
            },
        )
        .await?;
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        same_set(&first, &config(lab, "fight", &hosts).await?)
    })
    .await;
}

// ---------------------------------------------------------------- case 8

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_object_does_not_stop_a_removal_in_the_same_cluster() {
    let started = Instant::now();
    scenario(63, 3, async |lab| {
        let _passes = ControlPlanePasses::start(lab);
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("refuse", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "refuse", "a=2,b=2,c=1").await?;
        phase(started, "refuse: a=2,b=2,c=1 everywhere");
        let hosts = hosts_of(lab, 0, "refuse").await?;
        let first = config(lab, "refuse", &hosts).await?;
        let leaving = member_host(lab, 0, "refuse", 1).await?;
        let writer = MajorityWriter::start(lab, "refuse", &hosts).await?;

        // A user's OverridePolicy narrows member 0's Service selector in cluster
        // a to member pods (its pod is one, so the NodePort still routes to it).
        // The operator's StatefulSet follows the Service's selector, and a
        // StatefulSet's selector is immutable: the API server refuses it.
        control_plane
            .apply_override_policy(
                "default",
                "refuse",
                "refuse-member-0-selector-in-a",
                override_in(
                    "a",
                    ResourceRef::new(Kind::Service, "refuse-mongodb-0"),
                    "/spec/selector/app.kubernetes.io~1component",
                    json!("member"),
                ),
            )
            .await
            .map_err(fail("OverridePolicy"))?;
        let failing = "StatefulSet refuse-mongodb-0";
        wait_in(lab, 0, "refuse", "ObjectsApplied=False", |m| {
            condition(m, "ObjectsApplied")
                .is_some_and(|c| c.status == "False" && c.message.contains(failing))
        })
        .await?;
        phase(started, "a reports ObjectsApplied=False");

        // Something else in the same cluster: one member fewer.
        control_plane
            .settled("default", "refuse", READY_TIMEOUT)
            .await
            .map_err(fail("FedState's status"))?;
        control_plane
            .apply(&request("refuse", "a=1,b=2,c=1"))
            .await
            .map_err(fail("scale in"))?;
        ready(lab, "refuse", "a=1,b=2,c=1").await?;
        phase(started, "refuse: a=1,b=2,c=1 everywhere");
        let remaining = hosts_of(lab, 1, "refuse").await?;
        if remaining.contains(&leaving) || remaining.len() != 4 {
            return Err(format!("{leaving} should have left: {remaining:?}"));
        }
        let stateful_sets: Api<StatefulSet> =
            Api::namespaced(lab.clusters()[0].client.clone(), "default");
        let deadline = Instant::now() + Duration::from_secs(60);
        while stateful_sets
            .get_opt("refuse-mongodb-1")
            .await
            .map_err(fail("StatefulSet"))?
            .is_some()
        {
            if Instant::now() > deadline {
                return Err("the removed member's StatefulSet was not deleted".into());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        // Status is still written, after the scale-in, and still names the refusal.
        let a = wait_in(lab, 0, "refuse", "status of the new generation", |m| {
            m.status.as_ref().and_then(|s| s.observed_generation) == m.metadata.generation
                && m.spec.members == 1
                && condition(m, "ObjectsApplied")
                    .is_some_and(|c| c.status == "False" && c.message.contains(failing))
        })
        .await?;
        eprintln!(
            "cluster a: {:?}",
            condition(&a, "ObjectsApplied").map(|c| &c.message)
        );
        let warnings = events(lab, 0, "refuse", "ApplyFailed").await?;
        if !warnings.iter().any(|e| {
            e.type_.as_deref() == Some("Warning")
                && e.note.as_deref().is_some_and(|n| n.contains(failing))
        }) {
            return Err(format!(
                "no Warning Event ApplyFailed naming {failing}: {warnings:?}"
            ));
        }
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        same_set(&first, &config(lab, "refuse", &remaining).await?)
    })
    .await;
}

// ---------------------------------------------------------------- case 4

/// The `(_id, host, votes)` of each entry of a config.
fn entries(config: &Document) -> Vec<(i64, String, i64)> {
    let number = |m: &Document, key: &str| {
        m.get_i32(key)
            .map(i64::from)
            .or_else(|_| m.get_i64(key))
            .or_else(|_| m.get_f64(key).map(|f| f as i64))
            .unwrap_or(1)
    };
    config
        .get_array("members")
        .map(|members| {
            members
                .iter()
                .filter_map(|m| m.as_document())
                .map(|m| {
                    (
                        number(m, "_id"),
                        m.get_str("host").unwrap_or_default().to_string(),
                        number(m, "votes"),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_whose_node_port_changes_keeps_its_entry_and_no_write_is_lost() {
    let started = Instant::now();
    scenario(66, 3, async |lab| {
        let control_plane = lab.control_plane();
        control_plane
            .apply(&request("move", "a=2,b=2,c=1"))
            .await
            .map_err(fail("apply"))?;
        ready(lab, "move", "a=2,b=2,c=1").await?;
        phase(started, "move: a=2,b=2,c=1 everywhere");
        // The primary is a member that stays.
        let stays = member_host(lab, 0, "move", 0).await?;
        make_primary(lab, "move", &stays).await?;
        let moving = [member_host(lab, 1, "move", 1).await?];
        let hosts = hosts_of(lab, 0, "move").await?;
        let first = config(lab, "move", &hosts).await?;
        let before = entries(&first);
        let writer = MajorityWriter::start(lab, "move", &hosts).await?;

        // A user's OverridePolicy gives member 1's Service another nodePort in
        // cluster b (Karmada updates it there; kube-proxy follows): the same
        // mongod, with its data and its entry, is now reached at another host.
        let services: Api<Service> = Api::namespaced(lab.clusters()[1].client.clone(), "default");
        let mut taken = BTreeSet::new();
        for service in services
            .list(&Default::default())
            .await
            .map_err(fail("Services"))?
        {
            for port in service.spec.and_then(|s| s.ports).unwrap_or_default() {
                taken.extend(port.node_port);
            }
        }
        let new_port = (31_000..32_000)
            .find(|p| !taken.contains(p))
            .ok_or("no free nodePort")?;
        control_plane
            .apply_override_policy(
                "default",
                "move",
                "move-member-1-node-port-in-b",
                override_in(
                    "b",
                    ResourceRef::new(Kind::Service, "move-mongodb-1"),
                    "/spec/ports/0/nodePort",
                    json!(new_port),
                ),
            )
            .await
            .map_err(fail("OverridePolicy"))?;
        let moved = [member_host(lab, 1, "move", 1).await?];
        if moved == moving {
            return Err(format!("the Service kept its nodePort: {moved:?}"));
        }
        phase(started, "b's Service move-mongodb-1 has another nodePort");

        // Until the entry has its new host: never a sixth entry, the same
        // `_id`s and votes throughout.
        let seeds = [stays.clone()];
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut versions = BTreeSet::new();
        loop {
            let now = entries(&config(lab, "move", &seeds).await?);
            versions.insert(version(&config(lab, "move", &seeds).await?));
            let ids = |e: &[(i64, String, i64)]| -> Vec<(i64, i64)> {
                e.iter().map(|(id, _, votes)| (*id, *votes)).collect()
            };
            if ids(&now) != ids(&before) {
                return Err(format!(
                    "entries changed other than by host: {before:?} then {now:?}"
                ));
            }
            let hosts: BTreeSet<&String> = now.iter().map(|(_, host, _)| host).collect();
            if moved.iter().all(|h| hosts.contains(h)) && !moving.iter().any(|h| hosts.contains(h))
            {
                break;
            }
            if Instant::now() > deadline {
                return Err(format!("the moved members keep their old hosts: {now:?}"));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        phase(started, "the entry has its new host");
        // Ready again everywhere: hostconf still lists the old address (FedState
        // writes it from the nodePort it allocated), so the other clusters
        // are not asked to wait for that member.
        wait_in(lab, 1, "move", "b Ready", |m| {
            condition(m, "Ready").is_some_and(|c| c.status == "True")
        })
        .await?;
        phase(started, "b Ready again");
        // The recorded entry follows the new host.
        let stateful_sets: Api<StatefulSet> =
            Api::namespaced(lab.clusters()[1].client.clone(), "default");
        let recorded = wait_for_annotation(&stateful_sets, "move-mongodb-1", &moved[0]).await?;
        eprintln!("config versions seen: {versions:?}; a's member 1 recorded as {recorded}");
        if let Some(writer) = writer {
            writer.stop_and_check().await?;
        }
        phase(started, "every acknowledged write read back");
        same_set(
            &first,
            &config(lab, "move", &hosts_of(lab, 1, "move").await?).await?,
        )
    })
    .await;
}

/// Waits until StatefulSet `name` records a config entry at `host`; returns it.
async fn wait_for_annotation(
    stateful_sets: &Api<StatefulSet>,
    name: &str,
    host: &str,
) -> Result<String, String> {
    let key = "middleware.fedstate.io/member-config-entry";
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let stateful_set = stateful_sets.get(name).await.map_err(fail("StatefulSet"))?;
        let recorded = stateful_set
            .metadata
            .annotations
            .and_then(|a| a.get(key).cloned());
        if let Some(recorded) = recorded.filter(|r| r.ends_with(&format!("@{host}"))) {
            return Ok(recorded);
        }
        if Instant::now() > deadline {
            return Err(format!("{name} does not record an entry at {host}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

// ---------------------------------------------------------------- case 5

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

// ---------------------------------------------------------------- case 2

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
