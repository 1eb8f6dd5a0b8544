//! `lab bench`: measures the operator in the lab and writes the figures as a
//! Markdown table (BENCHMARKS.md). Counters come from the simulators, outside the
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
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::lab::Lab;
use crate::observe;
use crate::unrelated::{self, Unrelated};
use federation_sim::control_plane::{lab_replica_set_settings, InstanceRequest, Split};

/// The operator's user in the lab's API servers (the chart's ServiceAccount).
const OPERATOR_USER_PREFIX: &str = "system:serviceaccount:mongodb-member-operator:";
/// The operator's `appName` in its MongoDB handshakes.
const OPERATOR_APP: &str = "mongodb-member-operator";
/// Linux's USER_HZ: the unit of `/proc/<pid>/stat`'s CPU times (fixed at 100
/// in the kernel's ABI).
const CLOCK_TICKS_PER_SECOND: f64 = 100.0;
/// How long an operator may take to serve `/metrics` after it started.
const METRICS_DEADLINE: Duration = Duration::from_secs(30);
/// The series counting an operator's passes (one per cluster).
const PASSES_METRIC: &str = "mongodb_operator_reconcile_duration_seconds_count";

/// What the operators spent bringing N instances to Ready, then while
/// nothing changed.
#[derive(Debug)]
pub struct AtRest {
    /// Instances, each Ready with `split`.
    pub instances: usize,
    /// Members per cluster of each instance.
    pub split: String,
    /// Whether the operators ran with leader election (a Lease each).
    pub leader_election: bool,
    /// From the first instance written to every instance Ready.
    pub converging: Phase,
    /// The window without a change.
    pub resting: Phase,
    /// The unrelated objects written into the first cluster before the
    /// instances, how long that took, and how long their rewrite at rest took.
    pub unrelated: Option<(Unrelated, Duration, Option<Duration>)>,
    /// Each operator's memory at the start of the window without a change.
    pub memory_at_rest: Vec<(String, Memory)>,
    /// Each operator's memory at the end, with its peak.
    pub memory: Vec<(String, Memory)>,
    /// The first cluster's operator restarted at rest: its memory once it
    /// has run as many passes as there are instances (the start looks at
    /// each), without the convergence's peak.
    pub restarted: (String, Memory),
}

/// What the operators spent in one stretch of time.
#[derive(Debug)]
pub struct Phase {
    /// How long it lasted.
    pub duration: Duration,
    /// The operators' API requests by verb and resource (all clusters).
    pub requests: BTreeMap<(String, String), u64>,
    /// The operators' MongoDB commands, by command.
    pub commands: BTreeMap<String, u64>,
    /// CPU seconds of each cluster's operator.
    pub cpu_seconds: Vec<(String, f64)>,
    /// Passes (reconciles) of each cluster's operator.
    pub passes: Vec<(String, u64)>,
}

/// An operator's resident memory, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy)]
pub struct Memory {
    /// `VmRSS`, KiB.
    pub resident_kib: u64,
    /// `VmHWM`: the peak resident size, KiB.
    pub peak_kib: u64,
}

impl AtRest {
    /// The figures as Markdown.
    pub fn markdown(&self, command: &str) -> String {
        let mut out = format!(
            "### {} instances ({}), operators {} leader election\n\nReproduce: `{command}`\n\n",
            self.instances,
            self.split,
            if self.leader_election {
                "with"
            } else {
                "without"
            },
        );
        out.push_str(&format!(
            "Every instance Ready {:.1} s after the first was written; then {:.0} s without a change.\n\n",
            self.converging.duration.as_secs_f64(),
            self.resting.duration.as_secs_f64()
        ));
        if let Some((unrelated, written, _)) = &self.unrelated {
            let cluster = self.memory.first().map(|(c, _)| c.as_str()).unwrap_or("a");
            out.push_str(&format!("{}\n\n", unrelated.describe(*written, cluster)));
        }
        out.push_str(&self.resting.markdown("At rest", self.instances));
        out.push('\n');
        out.push_str(&self.converging.markdown("Converging", self.instances));
        if let Some((_, _, Some(rewritten))) = &self.unrelated {
            out.push_str(&format!(
                "\nThe unrelated objects' rewrite at the start of the at-rest window took {:.1} s.\n",
                rewritten.as_secs_f64()
            ));
        }
        out.push_str(
            "\n| operator | resident memory (VmRSS) at the start of the at-rest window | at the end | peak (VmHWM) |\n|---|---|---|---|\n",
        );
        let mib = |kib: u64| kib as f64 / 1024.0;
        for ((cluster, memory), (_, start)) in self.memory.iter().zip(&self.memory_at_rest) {
            out.push_str(&format!(
                "| cluster {cluster} | {:.1} MiB | {:.1} MiB | {:.1} MiB |\n",
                mib(start.resident_kib),
                mib(memory.resident_kib),
                mib(memory.peak_kib)
            ));
        }
        let (cluster, memory) = &self.restarted;
        out.push_str(&format!(
            "| cluster {cluster}, restarted at rest, after as many passes as instances | | {:.1} MiB | {:.1} MiB |\n",
            mib(memory.resident_kib),
            mib(memory.peak_kib)
        ));
        out
    }
}

impl Phase {
    /// The phase's figures as a Markdown table headed `title`.
    fn markdown(&self, title: &str, instances: usize) -> String {
        let minutes = self.duration.as_secs_f64() / 60.0;
        let per_minute = |n: u64| n as f64 / minutes;
        let mut out = format!(
            "{title}, {:.0} s:\n\n| what | total | per minute | per instance per minute |\n|---|---|---|---|\n",
            self.duration.as_secs_f64()
        );
        let instances = instances.max(1) as f64;
        let mut row = |what: String, n: u64| {
            out.push_str(&format!(
                "| {what} | {n} | {:.1} | {:.2} |\n",
                per_minute(n),
                per_minute(n) / instances
            ));
        };
        let mut requests_by_verb = BTreeMap::<&str, u64>::new();
        for ((verb, _), n) in &self.requests {
            *requests_by_verb.entry(verb).or_default() += n;
        }
        for (verb, n) in &requests_by_verb {
            row(format!("API `{verb}` requests (operators)"), *n);
        }
        let writes: BTreeMap<_, _> = self
            .requests
            .iter()
            .filter(|((verb, resource), _)| is_write(verb, resource))
            .collect();
        row(
            "API writes (operators)".to_string(),
            writes.values().copied().sum(),
        );
        for ((verb, resource), n) in writes {
            row(format!("  of which `{verb}` `{resource}`"), *n);
        }
        let commands: u64 = self.commands.values().sum();
        row("MongoDB commands (operators)".to_string(), commands);
        for (command, n) in &self.commands {
            row(format!("  of which `{command}`"), *n);
        }
        let passes: u64 = self.passes.iter().map(|(_, n)| n).sum();
        row("passes (operators)".to_string(), passes);
        for (cluster, seconds) in &self.cpu_seconds {
            out.push_str(&format!(
                "| CPU of cluster {cluster}'s operator | {seconds:.2} s | {:.3} s | {:.1} % of a core |\n",
                seconds / minutes,
                seconds / self.duration.as_secs_f64() * 100.0
            ));
        }
        if passes > 0 {
            let requests: u64 = self
                .requests
                .iter()
                .filter(|((_, resource), _)| resource != "leases")
                .map(|(_, n)| n)
                .sum();
            let cpu: f64 = self.cpu_seconds.iter().map(|(_, s)| s).sum();
            out.push_str(&format!(
                "| per pass: API requests, the leader election's aside | {:.2} | | |\n| per pass: operator CPU | {:.2} ms | | |\n",
                requests as f64 / passes as f64,
                cpu * 1000.0 / passes as f64
            ));
        }
        out
    }

    fn between(before: &Snapshot, after: &Snapshot, duration: Duration) -> Phase {
        let per_cluster = |after: &[(String, u64)], before: &[(String, u64)]| {
            after
                .iter()
                .zip(before)
                .map(|((cluster, a), (_, b))| (cluster.clone(), a - b))
                .collect::<Vec<_>>()
        };
        Phase {
            duration,
            requests: difference(&after.requests, &before.requests),
            commands: difference(&after.commands, &before.commands),
            cpu_seconds: per_cluster(&after.cpu_ticks, &before.cpu_ticks)
                .into_iter()
                .map(|(cluster, ticks)| (cluster, ticks as f64 / CLOCK_TICKS_PER_SECOND))
                .collect(),
            passes: per_cluster(&after.passes, &before.passes),
        }
    }
}

/// Whether a request of `verb` on `resource` writes (apiserver-sim's rule).
fn is_write(verb: &str, resource: &str) -> bool {
    apiserver_sim::RequestKey {
        user: String::new(),
        verb: verb.to_string(),
        resource: resource.to_string(),
    }
    .is_write()
}

/// Counters of the operators, summed over the clusters.
struct Snapshot {
    requests: BTreeMap<(String, String), u64>,
    commands: BTreeMap<String, u64>,
    cpu_ticks: Vec<(String, u64)>,
    passes: Vec<(String, u64)>,
}

async fn snapshot(lab: &Lab) -> Result<Snapshot> {
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
    let mut passes = Vec::new();
    for (index, cluster) in lab.clusters().iter().enumerate() {
        let pid = running_operator(lab, index)?;
        cpu_ticks.push((cluster.name.clone(), cpu_ticks_of(pid)?));
        passes.push((cluster.name.clone(), passes_of(lab, index).await?));
    }
    Ok(Snapshot {
        requests,
        commands,
        cpu_ticks,
        passes,
    })
}

/// The passes cluster `index`'s operator has run: the count of its pass
/// duration histogram, from its `/metrics`.
async fn passes_of(lab: &Lab, index: usize) -> Result<u64> {
    let address = lab.metrics_address(index, 0);
    // A freshly started operator may not listen yet.
    let listening = Instant::now();
    let mut stream = loop {
        match TcpStream::connect(address).await {
            Ok(stream) => break stream,
            Err(_) if listening.elapsed() < METRICS_DEADLINE => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(error) => {
                return Err(error).with_context(|| format!("connecting to {address}"));
            }
        }
    };
    stream
        .write_all(b"GET /metrics HTTP/1.0\r\nHost: operator\r\n\r\n")
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let counted = response
        .lines()
        .find(|line| line.starts_with(PASSES_METRIC))
        .and_then(|line| line.rsplit_once(' '))
        .and_then(|(_, n)| n.trim().parse::<f64>().ok());
    // No pass yet: the histogram has no series.
    Ok(counted.unwrap_or(0.0) as u64)
}

/// The process id of cluster `index`'s operator, which must be running.
fn running_operator(lab: &Lab, index: usize) -> Result<u32> {
    lab.operator_pid(index)
        .with_context(|| format!("cluster {index}'s operator is not running"))
}

/// Every cluster's operator's memory now.
fn memories(lab: &Lab) -> Result<Vec<(String, Memory)>> {
    let mut memory = Vec::new();
    for (index, cluster) in lab.clusters().iter().enumerate() {
        memory.push((
            cluster.name.clone(),
            memory_of(running_operator(lab, index)?)?,
        ));
    }
    Ok(memory)
}

/// `VmRSS` and `VmHWM` of process `pid`.
fn memory_of(pid: u32) -> Result<Memory> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = |field: &str| -> Result<u64> {
        status
            .lines()
            .find_map(|line| line.strip_prefix(field))
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|n| n.parse().ok())
            .with_context(|| format!("{field} in /proc/{pid}/status"))
    };
    Ok(Memory {
        resident_kib: kib("VmRSS:")?,
        peak_kib: kib("VmHWM:")?,
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

/// Writes the `unrelated` objects into the first cluster, applies
/// `instances` instances with `split` and measures until all are Ready, lets
/// things settle for `settle`, then measures `idle` without a change to the
/// instances (the unrelated objects rewritten at its start when asked); last,
/// restarts the first cluster's operator and reads its memory once it has run
/// as many passes as there are instances.
pub async fn at_rest(
    lab: &mut Lab,
    instances: usize,
    split: &str,
    settle: Duration,
    idle: Duration,
    unrelated: &Unrelated,
) -> Result<AtRest> {
    let first_cluster = lab.clusters()[0].client.clone();
    let written = if unrelated.any() {
        Some(unrelated::write(&first_cluster, "default", unrelated).await?)
    } else {
        None
    };
    let control_plane = lab.control_plane();
    let parsed = Split::parse(split)?;
    let names: Vec<String> = (0..instances).map(|i| format!("bench-{i}")).collect();
    let before_applying = snapshot(lab).await?;
    let applying = Instant::now();
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
    let converged = applying.elapsed();
    let ready = snapshot(lab).await?;
    tokio::time::sleep(settle).await;
    let memory_at_rest = memories(lab)?;
    let before = snapshot(lab).await?;
    let started = Instant::now();
    let rewritten = if unrelated.churn {
        Some(unrelated::rewrite(&first_cluster, "default", unrelated).await?)
    } else {
        None
    };
    tokio::time::sleep(idle.saturating_sub(started.elapsed())).await;
    let after = snapshot(lab).await?;
    let idle = started.elapsed();
    pruner.abort();
    let memory = memories(lab)?;
    let restarted = restarted_memory(lab, instances).await?;
    Ok(AtRest {
        instances,
        split: split.to_string(),
        leader_election: lab.leader_election(),
        converging: Phase::between(&before_applying, &ready, converged),
        resting: Phase::between(&before, &after, idle),
        unrelated: written.map(|written| (*unrelated, written, rewritten)),
        memory_at_rest,
        memory,
        restarted,
    })
}

/// How long a restarted operator may take to run a pass for each instance
/// (a new leader waits for the killed one's Lease to expire first).
const RESTART_DEADLINE: Duration = Duration::from_secs(300);

/// Restarts the first cluster's operator and reads its memory once it has
/// run at least `instances` passes.
async fn restarted_memory(lab: &mut Lab, instances: usize) -> Result<(String, Memory)> {
    lab.kill_operator(0).await?;
    lab.restart_operator(0)?;
    let restarted = Instant::now();
    while passes_of(lab, 0).await? < instances as u64 {
        if restarted.elapsed() > RESTART_DEADLINE {
            anyhow::bail!(
                "the restarted operator ran fewer than {instances} passes in {RESTART_DEADLINE:?}"
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let pid = running_operator(lab, 0)?;
    Ok((lab.clusters()[0].name.clone(), memory_of(pid)?))
}
