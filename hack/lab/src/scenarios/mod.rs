//! `lab bench`'s timed scenarios: how long the operator takes on
//! its own, apart from what mongod and the pods need. Each run starts a fresh
//! lab (three clusters, an operator in each, the control-plane stand-in), makes
//! an instance Ready, changes it and times two observations:
//!
//! - the simulated MongoDB network, looked at every 10 ms on its own thread
//!   (`observe::Sampler`; mongod-sim's own state: which member runs and answers at which
//!   `VIP:nodePort`, which is PRIMARY, the newest replica-set config any member
//!   holds — what `replSetGetConfig` answers);
//! - the API servers' objects, through kube-rs watchers against each
//!   apiserver-sim (`Recorder`): the instant an event arrives in the bench.
//!
//! Scenarios: **join** (a scale-out's new member answering at its address →
//! in the config), **reaction** (a change of `spec.members`, of a member
//! Service's nodePort, of hostconf and of the credentials Secret → the
//! operator's first effect),
//! **no-primary** (a scale-in that removes the primary: the longest time
//! without a PRIMARY, against one election timeout) and **convergence** (a
//! 2+2+1 instance from its objects written to Ready everywhere, split into pod
//! start, elections and the rest), one module each. [`fedstate_waits`] puts
//! FedState's designed waits beside the figures measured.

mod convergence;
mod join;
mod no_primary;
mod reaction;
mod waits;
mod write_gap;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, ensure, Context, Result};
use futures::StreamExt;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{ConfigMap, Pod, Secret, Service};
use kube::api::PostParams;
use kube::runtime::{watcher, WatchStreamExt};
use kube::{Api, Resource, ResourceExt};
use mongod_sim::{MemberState, Network};
use mongodb_member_operator::api::MongoDB;
use mongodb_member_operator::build::secrets::{derive_keyfile, DERIVED_ROOT_USER};
use serde::de::DeserializeOwned;
use serde_json::json;

use federation_sim::control_plane::{
    lab_replica_set_settings, ControlPlane, InstanceRequest, Split, ToSubmission,
};
use federation_sim::karmada::{Kind, OverridePolicy, Overrider, ResourceRef};

use crate::lab::{Lab, LabOptions};
use crate::observe::{self, Sampler, SetSampler};
use crate::timing::{self, human, Row};

use convergence::{convergence, convergence_rows, CONVERGENCE_NOTE};
use join::{join, join_rows, JOIN_NOTE};
use no_primary::{no_primary, no_primary_rows, NO_PRIMARY_NOTE};
use reaction::{reaction, reaction_rows, REACTION_NOTE};
pub use waits::fedstate_waits;

/// How often the MongoDB network is looked at.
const LOOK_EVERY: Duration = Duration::from_millis(10);
/// How often the bench polls every cluster's `MongoDB` for readiness.
const POLL_EVERY: Duration = Duration::from_millis(50);
/// How long an instance may take to be Ready.
const READY_TIMEOUT: Duration = Duration::from_secs(240);
/// How long a change may take to show its effect.
const EFFECT_TIMEOUT: Duration = Duration::from_secs(90);
/// The namespace every scenario uses.
const NAMESPACE: &str = "default";

/// A timed scenario's outcome: its rows and what to know to read them.
#[derive(Debug)]
pub struct Timed {
    /// The table's heading.
    pub title: String,
    /// One row per figure.
    pub rows: Vec<Row>,
    /// Notes printed under the table (how each figure is observed, failed runs).
    pub notes: Vec<String>,
}

impl Timed {
    /// The row timing `what`.
    pub fn row(&self, what: &str) -> Option<&Row> {
        self.rows.iter().find(|row| row.what == what)
    }

    /// The Markdown of the scenario.
    pub fn markdown(&self, command: &str) -> String {
        timing::table(&self.title, command, &self.rows, &self.notes)
    }
}

/// The timed scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scenario {
    /// A scale-out's new member: answering at its address → in the config.
    Join,
    /// A change of `spec.members`, a member Service, hostconf or the
    /// credentials Secret → the operator's first effect.
    Reaction,
    /// A scale-in that removes the primary: the longest time without one.
    NoPrimary,
    /// A 2+2+1 instance from its objects written to Ready everywhere.
    Convergence,
    /// A pymongo majority writer while the PRIMARY's cluster is scaled to 0:
    /// the longest time between two acknowledged writes, and why.
    WriteGap,
}

impl Scenario {
    /// The timed scenarios, in the order `lab bench --scenario timed` runs them.
    pub const TIMED: [Scenario; 5] = [
        Scenario::Join,
        Scenario::Reaction,
        Scenario::NoPrimary,
        Scenario::Convergence,
        Scenario::WriteGap,
    ];

    /// The name of the instance the scenario applies.
    fn instance(self) -> &'static str {
        match self {
            Scenario::Join => "join",
            Scenario::Reaction => "react",
            Scenario::NoPrimary => "step",
            Scenario::Convergence => "demo",
            Scenario::WriteGap => "gap",
        }
    }
}

/// Runs `scenario` `runs` times, each in a fresh lab started with `options`.
/// A run that fails is counted as one without figures and its error noted.
pub async fn run(options: &LabOptions, scenario: Scenario, runs: usize) -> Result<Timed> {
    let timed = |title: &str, rows: Vec<Row>, note: &str| Timed {
        title: title.into(),
        rows,
        notes: vec![note.to_string()],
    };
    match scenario {
        Scenario::Join => {
            let title = "Join overhead: a scale-out (1+1+1 → 2+1+1) on a Ready instance";
            let measured = timed(title, join_rows(), JOIN_NOTE);
            each_run(options, runs, measured, async |lab, _| join(lab).await).await
        }
        Scenario::Reaction => {
            let title = "Reaction: from a change to the operator's first effect (1+1+1 instance)";
            let measured = timed(title, reaction_rows(), REACTION_NOTE);
            each_run(options, runs, measured, async |lab, _| reaction(lab).await).await
        }
        Scenario::NoPrimary => {
            let title = "No-primary window: a scale-in (2+2+1 → 1+2+1) that removes the primary";
            let measured = timed(title, no_primary_rows(), NO_PRIMARY_NOTE);
            each_run(options, runs, measured, async |lab, _| {
                no_primary(lab).await
            })
            .await
        }
        Scenario::Convergence => {
            let title =
                "Demo convergence: a 2+2+1 instance from its objects written to Ready everywhere";
            let measured = timed(title, convergence_rows(), CONVERGENCE_NOTE);
            each_run(options, runs, measured, async |lab, _| {
                convergence(lab).await
            })
            .await
        }
        Scenario::WriteGap => write_gap::run(options, runs).await,
    }
}

/// Runs `one` `runs` times, each in a fresh lab started with `options` with
/// the control plane's passes running, and records each run's figures in
/// `timed`'s rows. A run that fails is counted as one without figures and
/// its error noted.
async fn each_run(
    options: &LabOptions,
    runs: usize,
    mut timed: Timed,
    mut one: impl AsyncFnMut(&Lab, usize) -> Result<Figures>,
) -> Result<Timed> {
    for run in 1..=runs {
        let lab = Lab::start(options.clone())
            .await
            .context("starting the lab")?;
        let pruner = tokio::spawn(lab.control_plane().run(NAMESPACE.into(), |_| {}));
        let figures = one(&lab, run).await;
        pruner.abort();
        // The control plane's objects go with the lab: the next run starts empty.
        lab.shutdown().await;
        match figures {
            Ok(figures) => {
                eprintln!("run {run}/{runs}: {figures:?}");
                for row in &mut timed.rows {
                    match figures.get(row.what.as_str()) {
                        Some(Ok(figure)) => row.record(Some(*figure)),
                        Some(Err(error)) => {
                            timed
                                .notes
                                .push(format!("Run {run}, {}: {error}", row.what));
                            row.record(None);
                        }
                        None => row.record(None),
                    }
                }
            }
            Err(error) => {
                eprintln!("run {run}/{runs} failed: {error:#}");
                timed.notes.push(format!("Run {run} failed: {error:#}"));
                for row in &mut timed.rows {
                    row.record(None);
                }
            }
        }
    }
    Ok(timed)
}

/// One run's figures, by row (an error: why it was not measured in that run).
type Figures = BTreeMap<&'static str, Result<Duration, String>>;

/// The instance request every scenario applies: FedState's sample with
/// mongo:7.0 and the lab's short replica-set timeouts.
fn request(name: &str, split: &Split) -> InstanceRequest {
    InstanceRequest {
        name: name.to_string(),
        namespace: NAMESPACE.to_string(),
        split: split.clone(),
        image: "mongo:7.0".to_string(),
        settings: lab_replica_set_settings(),
    }
}

/// The hosts of the set `name`, as the first cluster's status lists them.
async fn replset_hosts(control_plane: &ControlPlane, name: &str) -> Result<Vec<String>> {
    Ok(observe::views(control_plane, NAMESPACE, name)
        .await?
        .first()
        .context("no cluster has the instance")?
        .replset
        .iter()
        .map(|(host, _)| host.clone())
        .collect())
}

/// Polls every cluster's `MongoDB` every 50 ms until [`observe::is_ready`];
/// returns when it first was.
async fn ready_at(control_plane: &ControlPlane, name: &str, split: &Split) -> Result<Instant> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let views = observe::views(control_plane, NAMESPACE, name)
            .await
            .unwrap_or_default();
        if observe::is_ready(&views, split) {
            return Ok(Instant::now());
        }
        if Instant::now() > deadline {
            bail!(
                "{name} was not Ready after {READY_TIMEOUT:?}:\n{}",
                observe::table(&views)
            );
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// One look at the simulated MongoDB network.
#[derive(Clone, Debug)]
struct Look {
    at: Instant,
    /// Listen addresses of the running members.
    running: BTreeSet<String>,
    /// Hosts (`VIP:nodePort`) that reach a running member.
    reachable: BTreeSet<String>,
    /// Running members that are PRIMARY.
    primaries: usize,
    /// The newest config any running member holds: its version and hosts.
    config: Option<(i64, BTreeSet<String>)>,
}

impl Look {
    fn take(network: &Network) -> Look {
        let mut look = Look {
            at: Instant::now(),
            running: BTreeSet::new(),
            reachable: BTreeSet::new(),
            primaries: 0,
            config: None,
        };
        for listen in network.running() {
            let Some(member) = network.member(&listen) else {
                continue;
            };
            look.reachable.extend(network.aliases_of(&listen));
            look.running.insert(listen);
            if member.state() == MemberState::Primary {
                look.primaries += 1;
            }
            if let Some(config) = member.config() {
                if look
                    .config
                    .as_ref()
                    .is_none_or(|(version, _)| config.version > *version)
                {
                    look.config = Some((
                        config.version,
                        config.members.iter().map(|m| m.host.clone()).collect(),
                    ));
                }
            }
        }
        look
    }

    fn config_hosts(&self) -> BTreeSet<String> {
        self.config
            .as_ref()
            .map(|(_, hosts)| hosts.clone())
            .unwrap_or_default()
    }
}

/// The instant of the first look at or after `after` for which `holds`.
fn first(looks: &[Look], after: Instant, holds: impl Fn(&Look) -> bool) -> Option<Instant> {
    looks
        .iter()
        .find(|l| l.at >= after && holds(l))
        .map(|l| l.at)
}

/// Waits until a look at or after `after` shows `holds`; its instant.
async fn wait_look(
    probe: &Probe,
    after: Instant,
    holds: impl Fn(&Look) -> bool,
) -> Result<Instant> {
    let deadline = Instant::now() + EFFECT_TIMEOUT;
    loop {
        if let Some(at) = first(&probe.samples(), after, &holds) {
            return Ok(at);
        }
        if Instant::now() > deadline {
            bail!("not seen within {EFFECT_TIMEOUT:?}");
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

/// Looks at the network every 10 ms on a thread of its own until stopped.
type Probe = Sampler<Look>;

/// Starts looking at `network`.
fn look_at(network: Arc<Network>) -> Probe {
    Sampler::start(LOOK_EVERY, move || Look::take(&network))
}

/// Every object a kube-rs watcher delivers from one API, with the instant it
/// arrived, until dropped: what lasts a single write, which polling misses.
pub struct Recorder<K> {
    seen: Arc<Mutex<Vec<(Instant, K)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Recorder<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    /// Starts watching `api`.
    pub fn start(api: Api<K>) -> Recorder<K> {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let sink = seen.clone();
        let task = tokio::spawn(async move {
            let mut objects =
                std::pin::pin!(watcher(api, watcher::Config::default()).applied_objects());
            while let Some(object) = objects.next().await {
                match object {
                    Ok(object) => sink
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((Instant::now(), object)),
                    Err(error) => tracing::warn!(%error, "bench watcher"),
                }
            }
        });
        Recorder { seen, task }
    }

    /// What arrived so far, oldest first.
    pub fn seen(&self) -> Vec<(Instant, K)> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// The last object named `name` that arrived before `at`.
    fn last_before(&self, name: &str, at: Instant) -> Option<K> {
        self.seen()
            .into_iter()
            .rev()
            .find(|(arrived, object)| *arrived < at && object.meta().name.as_deref() == Some(name))
            .map(|(_, object)| object)
    }

    /// The arrival of the first object at or after `after` for which `holds`.
    async fn wait_for(&self, after: Instant, holds: impl Fn(&K) -> bool) -> Result<Instant> {
        let deadline = Instant::now() + EFFECT_TIMEOUT;
        loop {
            if let Some((at, _)) = self
                .seen()
                .into_iter()
                .find(|(at, object)| *at >= after && holds(object))
            {
                return Ok(at);
            }
            if Instant::now() > deadline {
                return Err(anyhow!("no such event within {EFFECT_TIMEOUT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
}

impl<K> Drop for Recorder<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}
