//! `lab bench`: measures the operator in the lab and writes the figures as a
//! Markdown table (issue 14). Counters come from the simulators, outside the
//! operator: API requests by user, verb and resource from each apiserver-sim
//! (`RequestCounts`), MongoDB commands by member and client from mongod-sim
//! (`Network::command_counts`), and each operator process's CPU time from
//! `/proc/<pid>/stat`.
//!
//! Scenario so far: **at rest** — N instances Ready over three clusters,
//! nothing changing for a while: what the operators spend.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};

use crate::controlplane::{lab_replica_set_settings, InstanceRequest, Split};
use crate::lab::Lab;
use crate::observe;

/// The operator's user in the lab's API servers (the chart's ServiceAccount).
const OPERATOR_USER_PREFIX: &str = "system:serviceaccount:mongodb-member-operator:";
/// The operator's `appName` in its MongoDB handshakes.
const OPERATOR_APP: &str = "mongodb-member-operator";
/// Linux's USER_HZ: the unit of `/proc/<pid>/stat`'s CPU times (fixed at 100
/// in the kernel's ABI).
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;

/// What the operators spent while nothing changed.
#[derive(Debug)]
pub struct AtRest {
    /// Instances, each Ready with `split`.
    pub instances: usize,
    /// Members per cluster of each instance.
    pub split: String,
    /// How long nothing changed.
    pub idle: Duration,
    /// The operators' API requests by verb (all clusters).
    pub requests_by_verb: BTreeMap<String, u64>,
    /// The operators' writes, by verb and resource.
    pub writes: BTreeMap<(String, String), u64>,
    /// The operators' MongoDB commands, by command.
    pub commands: BTreeMap<String, u64>,
    /// CPU seconds of each cluster's operator.
    pub cpu_seconds: Vec<(String, f64)>,
}

impl AtRest {
    /// The figures as Markdown.
    pub fn markdown(&self, command: &str) -> String {
        let minutes = self.idle.as_secs_f64() / 60.0;
        let per_minute = |n: u64| n as f64 / minutes;
        let mut out = format!(
            "### At rest: {} instances ({}), {:.0} s without a change\n\nReproduce: `{command}`\n\n",
            self.instances,
            self.split,
            self.idle.as_secs_f64()
        );
        out.push_str(
            "| what | total | per minute | per instance per minute |\n|---|---|---|---|\n",
        );
        let instances = self.instances.max(1) as f64;
        let mut row = |what: String, n: u64| {
            out.push_str(&format!(
                "| {what} | {n} | {:.1} | {:.2} |\n",
                per_minute(n),
                per_minute(n) / instances
            ));
        };
        for (verb, n) in &self.requests_by_verb {
            row(format!("API `{verb}` requests (operators)"), *n);
        }
        let writes: u64 = self.writes.values().sum();
        row("API writes (operators)".to_string(), writes);
        for ((verb, resource), n) in &self.writes {
            row(format!("  of which `{verb}` `{resource}`"), *n);
        }
        let commands: u64 = self.commands.values().sum();
        row("MongoDB commands (operators)".to_string(), commands);
        for (command, n) in &self.commands {
            row(format!("  of which `{command}`"), *n);
        }
        for (cluster, seconds) in &self.cpu_seconds {
            out.push_str(&format!(
                "| CPU of cluster {cluster}'s operator | {seconds:.2} s | {:.3} s | {:.1} % of a core |\n",
                seconds / minutes,
                seconds / self.idle.as_secs_f64() * 100.0
            ));
        }
        out
    }
}

/// Counters of the operators, summed over the clusters.
struct Snapshot {
    requests: BTreeMap<(String, String), u64>,
    commands: BTreeMap<String, u64>,
    cpu_ticks: Vec<(String, u64)>,
}

fn snapshot(lab: &Lab) -> Result<Snapshot> {
    let mut requests = BTreeMap::new();
    for cluster in lab.clusters() {
        for (key, n) in cluster.api.requests().snapshot() {
            if key.user.starts_with(OPERATOR_USER_PREFIX) {
                *requests.entry((key.verb, key.resource)).or_default() += n;
            }
        }
    }
    let mut commands = BTreeMap::new();
    for (key, n) in lab.network().command_counts() {
        if key.app.as_deref() == Some(OPERATOR_APP) {
            *commands.entry(key.command).or_default() += n;
        }
    }
    let mut cpu_ticks = Vec::new();
    for (index, cluster) in lab.clusters().iter().enumerate() {
        let pid = lab
            .operator_pid(index)
            .context("an operator is not running")?;
        cpu_ticks.push((cluster.name.clone(), cpu_ticks_of(pid)?));
    }
    Ok(Snapshot {
        requests,
        commands,
        cpu_ticks,
    })
}

/// utime + stime of process `pid`, in clock ticks.
fn cpu_ticks_of(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces), from field 3 on.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    let field = |n: usize| -> Result<u64> {
        fields
            .get(n - 3)
            .context("short /proc stat")?
            .parse()
            .context("/proc stat field")
    };
    Ok(field(14)? + field(15)?)
}

fn difference<K: Ord + Clone>(
    after: &BTreeMap<K, u64>,
    before: &BTreeMap<K, u64>,
) -> BTreeMap<K, u64> {
    after
        .iter()
        .map(|(k, n)| (k.clone(), n - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, n)| *n > 0)
        .collect()
}

/// Applies `instances` instances with `split`, waits until all are Ready,
/// lets things settle for `settle`, then measures `idle` without a change.
pub async fn at_rest(
    lab: &Lab,
    instances: usize,
    split: &str,
    settle: Duration,
    idle: Duration,
) -> Result<AtRest> {
    let control_plane = lab.control_plane();
    let parsed = Split::parse(split)?;
    let names: Vec<String> = (0..instances).map(|i| format!("bench-{i}")).collect();
    for name in &names {
        control_plane
            .apply(&InstanceRequest {
                name: name.clone(),
                namespace: "default".to_string(),
                split: parsed.clone(),
                image: "mongo:7.0".to_string(),
                settings: lab_replica_set_settings(),
            })
            .await?;
    }
    let pruner = tokio::spawn(lab.control_plane().run("default".into(), |_| {}));
    let deadline = Duration::from_secs(120 + 30 * instances as u64);
    for name in &names {
        observe::wait_ready(&control_plane, "default", name, &parsed, deadline, |_| {}).await?;
    }
    tokio::time::sleep(settle).await;
    let before = snapshot(lab)?;
    let started = Instant::now();
    tokio::time::sleep(idle).await;
    let after = snapshot(lab)?;
    let idle = started.elapsed();
    pruner.abort();
    let requests = difference(&after.requests, &before.requests);
    let mut requests_by_verb = BTreeMap::new();
    let mut writes = BTreeMap::new();
    for ((verb, resource), n) in &requests {
        *requests_by_verb.entry(verb.clone()).or_default() += n;
        let key = apiserver_sim::RequestKey {
            user: String::new(),
            verb: verb.clone(),
            resource: resource.clone(),
        };
        if key.is_write() {
            writes.insert((verb.clone(), resource.clone()), *n);
        }
    }
    let cpu_seconds = after
        .cpu_ticks
        .iter()
        .zip(&before.cpu_ticks)
        .map(|((cluster, a), (_, b))| (cluster.clone(), (a - b) as f64 / CLOCK_TICKS_PER_SECOND))
        .collect();
    Ok(AtRest {
        instances,
        split: split.to_string(),
        idle,
        requests_by_verb,
        writes,
        commands: difference(&after.commands, &before.commands),
        cpu_seconds,
    })
}
