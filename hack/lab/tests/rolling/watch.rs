//! A roll under observation, judged independently of the operators' own
//! status. What it watches, from the start of the change to the end of the
//! scenario:
//! - every member's state, read from the simulator (the lab's mongod-sim
//!   `Network`) by its host every 50 ms on a thread of its own
//!   ([`observe::SetSampler`]; a stopped or unreachable member is down): never
//!   more than one member outside PRIMARY/SECONDARY/ARBITER, never two
//!   primaries in one term;
//! - every member stop the simulator records (`Network::stops`): none while
//!   PRIMARY, exactly one per member, at least one per cluster, the member
//!   that was primary when the roll began last;
//! - the writer: every acknowledged write read back, the longest time without
//!   an acknowledged write and the elections bounded by one election
//!   ([`Bounds`]);
//! - at the end, each member's pod on its StatefulSet's template revision (a
//!   new one), and in every cluster `status.restartState` `NotInProcess`,
//!   condition `UpToDate` True and `status.localMembers[].revision` the
//!   template's.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use crate::harness::*;
use federation_sim::control_plane::Split;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{ApiResource, DynamicObject};
use kube::Api;
use lab::lab::Lab;
use lab::observe::{self, SetSample, SetSampler};
use mongod_sim::network::MemberStop;
use mongod_sim::MemberState;
use mongodb_member_operator::api::{MongoDB, ReplicaSetSettings};
use mongodb_member_operator::build::statefulset::REVISION_ANNOTATION;
use serde_json::{json, Value};

use super::SPLIT;

/// How often the set is sampled, and the longest gap between two samples the
/// assertions accept (what "samples at least every 200 ms" means).
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
const SAMPLE_GAP_LIMIT: Duration = Duration::from_millis(200);
/// How long the change may take to reach every member StatefulSet's template
/// (Karmada writes at once; the operators apply it at their next pass).
const TEMPLATE_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a roll of five members may take (a pass runs in seconds; each
/// member restarts and catches up in a few).
pub(super) const ROLL_TIMEOUT: Duration = Duration::from_secs(180);
/// How long every cluster's status may lag behind a roll that is over in the
/// pods and the set.
pub(super) const STATUS_GRACE: Duration = Duration::from_secs(30);

/// Prints how far into the test a phase ended.
pub(super) fn phase(started: Instant, what: &str) {
    eprintln!("[{:>5.1} s] {what}", started.elapsed().as_secs_f64());
}

pub(super) fn seconds(duration: Duration) -> String {
    format!("{:.1} s", duration.as_secs_f64())
}

/// What one election may cost the writer, from the lab's replica-set settings
/// (`common::request`: elections after 2 s, heartbeats every 0.5 s).
///
/// The primary steps down once; a secondary stands when its election timeout
/// (randomised up to +15 %) has run out since the last heartbeat that showed
/// a primary, at most one heartbeat interval before the step-down; pymongo
/// finds the new primary within its minimum heartbeat interval (0.5 s), and
/// the writer waits 0.2 s after a failed write plus 0.05 s between writes.
/// 1.5 s more for two loaded cores: 2.3 + 0.5 + 0.5 + 0.25 + 1.5 = 5.05 s.
///
/// Terms: the step-down's election moves the term once; a second candidate
/// standing in the same instant (the random offsets span only 300 ms) can
/// take a term that elects nobody, so the term may advance by two, but one
/// new primary at most. Secondaries restart without any election.
#[derive(Debug)]
pub(super) struct Bounds {
    longest_write_gap: Duration,
    term_changes: i64,
    new_primaries: usize,
}

impl Bounds {
    pub(super) fn of(settings: &ReplicaSetSettings) -> Bounds {
        let election = Duration::from_millis(settings.election_timeout_millis as u64).mul_f64(1.15);
        let heartbeat = Duration::from_millis(settings.heartbeat_interval_millis as u64);
        let driver = Duration::from_millis(500);
        let writer = Duration::from_millis(250);
        let margin = Duration::from_millis(1_500);
        Bounds {
            longest_write_gap: election + heartbeat + driver + writer + margin,
            term_changes: 2,
            new_primaries: 1,
        }
    }
}

/// One member of the set.
#[derive(Clone, Debug)]
pub(super) struct Member {
    pub(super) cluster: usize,
    pub(super) host: String,
    stateful_set: String,
}

impl Member {
    fn pod(&self) -> String {
        format!("{}-0", self.stateful_set)
    }
}

/// A member stop since the change, attributed to a member of the set.
#[derive(Clone, Debug)]
pub(super) struct Stop {
    pub(super) host: String,
    /// Its role when stopped (see [`Roll::stops`]).
    role: Option<MemberState>,
    /// Whether that role is the last sampled one rather than the record's.
    sampled_role: bool,
    record: MemberStop,
}

impl Stop {
    pub(super) fn describe(&self, roll: &Roll) -> String {
        format!(
            "{} {}{} term {} at {}",
            self.host,
            self.role.map(MemberState::name).unwrap_or("(unknown)"),
            if self.sampled_role {
                format!(
                    " (recorded {}, last sampled role)",
                    self.record.state.name()
                )
            } else {
                String::new()
            },
            self.record.term,
            roll.since_change(self.record.at)
        )
    }
}

/// The template revision of every member StatefulSet, by (cluster, name).
type Revisions = BTreeMap<(usize, String), Option<String>>;

/// A roll under observation: the set's members, their revisions before the
/// change, the sampler, the writer, and what failed so far.
pub(super) struct Roll {
    name: String,
    started: Instant,
    pub(super) members: Vec<Member>,
    before: Revisions,
    primary_before: Option<String>,
    pub(super) sampler: SetSampler,
    writer: Option<TimedMajorityWriter>,
    /// When the sampling began (the whole scenario is judged from then).
    began_at: Instant,
    changed_at: Instant,
    rolled_at: Option<Instant>,
    pub(super) failures: Vec<String>,
}

impl Roll {
    /// Starts watching the ready set `name`: its members, their revisions,
    /// the sampler and the writer (which has some writes acknowledged before
    /// this returns).
    pub(super) async fn begin(lab: &Lab, name: &str, started: Instant) -> Result<Roll, String> {
        let split = Split::parse(SPLIT).map_err(fail("split"))?;
        let mut members = Vec::new();
        for (cluster, lab_cluster) in lab.clusters().iter().enumerate() {
            for index in 0..split.members_of(&lab_cluster.name) {
                members.push(Member {
                    cluster,
                    host: member_host(lab, cluster, name, index).await?,
                    stateful_set: format!("{name}-mongodb-{index}"),
                });
            }
        }
        let hosts: Vec<String> = members.iter().map(|m| m.host.clone()).collect();
        let listed: BTreeSet<String> = hosts_of(lab, 0, name).await?.into_iter().collect();
        if listed != hosts.iter().cloned().collect() {
            return Err(format!(
                "the set lists {listed:?}, the member Services are {hosts:?}"
            ));
        }
        let before = revisions(lab, &members).await?;
        if before.values().any(Option::is_none) {
            return Err(format!("a member StatefulSet has no revision: {before:?}"));
        }
        let began_at = Instant::now();
        let sampler = SetSampler::start(lab.network().clone(), hosts.clone(), SAMPLE_EVERY);
        let writer = TimedMajorityWriter::start(lab, name, &hosts).await?;
        if let Some(writer) = &writer {
            writer.wait_acknowledged(5, Duration::from_secs(60)).await?;
        }
        let primary_before = sampler
            .latest()
            .and_then(|s| s.primaries().first().map(|(_, host)| host.to_string()));
        phase(
            started,
            &format!(
                "{name}: sampling the set, the writer acknowledges; primary {primary_before:?}"
            ),
        );
        Ok(Roll {
            name: name.to_string(),
            started,
            members,
            before,
            primary_before,
            sampler,
            writer,
            began_at,
            changed_at: Instant::now(),
            rolled_at: None,
            failures: Vec::new(),
        })
    }

    /// Marks the instant the change is made (just before making it).
    pub(super) fn changing(&mut self) {
        self.changed_at = Instant::now();
        self.primary_before = self
            .sampler
            .latest()
            .and_then(|s| s.primaries().first().map(|(_, host)| host.to_string()));
    }

    /// `at` relative to the change: `+1.2 s` after it, `-0.3 s` before.
    fn since_change(&self, at: Instant) -> String {
        match at.checked_duration_since(self.changed_at) {
            Some(after) => format!("+{:.1} s", after.as_secs_f64()),
            None => format!("-{:.1} s", (self.changed_at - at).as_secs_f64()),
        }
    }

    /// Waits until every member StatefulSet has a template revision other
    /// than before the change; false (and a failure noted) if not in time.
    pub(super) async fn wait_new_template(&mut self, lab: &Lab) -> Result<bool, String> {
        let deadline = Instant::now() + TEMPLATE_TIMEOUT;
        loop {
            let now = revisions(lab, &self.members).await?;
            let unchanged: Vec<String> = now
                .iter()
                .filter(|(key, revision)| self.before.get(*key) == Some(*revision))
                .map(|((cluster, name), revision)| {
                    format!(
                        "{}/{name}@{}",
                        lab.clusters()[*cluster].name,
                        revision.as_deref().unwrap_or("-")
                    )
                })
                .collect();
            if unchanged.is_empty() {
                phase(
                    self.started,
                    &format!("{}: every member StatefulSet has a new template", self.name),
                );
                return Ok(true);
            }
            if Instant::now() > deadline {
                self.failures.push(format!(
                    "the change did not reach the member StatefulSets' pod template within {}: \
                     revision unchanged for {unchanged:?}, so nothing would restart",
                    seconds(TEMPLATE_TIMEOUT)
                ));
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Waits until the roll is over: every pod on its StatefulSet's new
    /// revision and Ready, every member up with one primary, and every
    /// cluster's status `NotInProcess` and `UpToDate` (that last part at most
    /// [`STATUS_GRACE`] after the rest). Notes a failure when not in time.
    pub(super) async fn wait_rolled(&mut self, lab: &Lab) -> Result<(), String> {
        let deadline = Instant::now() + ROLL_TIMEOUT;
        let mut pods_and_set_since: Option<Instant> = None;
        loop {
            let pods = self.pods_on_new_revision(lab).await?;
            let set = self
                .sampler
                .latest()
                .map(|s| set_healthy(&s))
                .unwrap_or(Err("no sample".into()));
            let status = rolled_status(lab, &self.name).await?;
            if pods.is_ok() && set.is_ok() {
                let since = *pods_and_set_since.get_or_insert_with(|| {
                    phase(
                        self.started,
                        &format!(
                            "{}: every pod on its new revision, the set healthy",
                            self.name
                        ),
                    );
                    Instant::now()
                });
                if status.is_ok() {
                    self.rolled_at = Some(Instant::now());
                    phase(
                        self.started,
                        &format!("{}: every cluster reports the roll over", self.name),
                    );
                    return Ok(());
                }
                if since.elapsed() > STATUS_GRACE {
                    self.rolled_at = Some(since);
                    self.failures.push(format!(
                        "{} after every pod was on its new revision and the set healthy, the \
                         status still does not say the roll is over (the end state below \
                         says what)",
                        seconds(STATUS_GRACE)
                    ));
                    return Ok(());
                }
            } else {
                pods_and_set_since = None;
            }
            if Instant::now() > deadline {
                self.rolled_at = Some(Instant::now());
                self.failures.push(format!(
                    "the roll was not over after {}: pods: {}; set: {}; status: {}",
                    seconds(ROLL_TIMEOUT),
                    pods.err().unwrap_or_else(|| "done".into()),
                    set.err().unwrap_or_else(|| "healthy".into()),
                    status.err().unwrap_or_else(|| "done".into())
                ));
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Ok when every member's pod runs, Ready, from its StatefulSet's
    /// current template, and that template is not the one before the change.
    async fn pods_on_new_revision(&self, lab: &Lab) -> Result<Result<(), String>, String> {
        let mut wrong = Vec::new();
        for member in &self.members {
            let client = lab.clusters()[member.cluster].client.clone();
            let cluster = &lab.clusters()[member.cluster].name;
            let stateful_sets: Api<StatefulSet> = Api::namespaced(client.clone(), "default");
            let pods: Api<Pod> = Api::namespaced(client, "default");
            let desired = stateful_sets
                .get_opt(&member.stateful_set)
                .await
                .map_err(fail("StatefulSet"))?
                .and_then(|s| observe::template_revision(&s));
            let pod = pods.get_opt(&member.pod()).await.map_err(fail("Pod"))?;
            let running = pod.as_ref().and_then(pod_revision);
            let ready = pod.as_ref().is_some_and(pod_ready);
            let terminating = pod
                .as_ref()
                .is_some_and(|p| p.metadata.deletion_timestamp.is_some());
            if desired.is_none()
                || self
                    .before
                    .get(&(member.cluster, member.stateful_set.clone()))
                    == Some(&desired)
                || running != desired
                || !ready
                || terminating
            {
                wrong.push(format!(
                    "{cluster}/{} template {} pod {} ready {ready} terminating {terminating}",
                    member.stateful_set,
                    desired.as_deref().unwrap_or("-"),
                    running.as_deref().unwrap_or("-"),
                ));
            }
        }
        Ok(if wrong.is_empty() {
            Ok(())
        } else {
            Err(wrong.join(", "))
        })
    }

    /// The member stops since the sampling began, each with the host of the member
    /// it stopped (from its own record, or the samples: pod addresses
    /// change) and its role then. The role is the record's; a member whose
    /// route (its `VIP:nodePort` alias) went a moment before its container
    /// no longer recognises itself in the config and is recorded REMOVED:
    /// its role is then the last one sampled (at most 50 ms before).
    pub(super) fn stops(&self, lab: &Lab, samples: &[SetSample]) -> Vec<Stop> {
        let hosts: BTreeSet<&str> = self.members.iter().map(|m| m.host.as_str()).collect();
        lab.network()
            .stops()
            .into_iter()
            .filter(|stop| stop.at >= self.began_at)
            .filter_map(|stop| {
                let sampled = observe::listening_on(samples, &stop.listen, stop.at);
                let host = stop
                    .host
                    .iter()
                    .chain(&stop.aliases)
                    .find(|h| hosts.contains(h.as_str()))
                    .cloned()
                    .or_else(|| sampled.as_ref().map(|s| s.host.clone()))?;
                let (role, sampled_role) = match stop.state {
                    MemberState::Primary | MemberState::Secondary | MemberState::Arbiter => {
                        (Some(stop.state), false)
                    }
                    _ => (sampled.and_then(|s| s.state), true),
                };
                Some(Stop {
                    host,
                    role,
                    sampled_role,
                    record: stop,
                })
            })
            .collect()
    }

    /// Stops the sampler and the writer and judges the whole scenario; the
    /// figures are printed whatever the outcome.
    pub(super) async fn finish(mut self, lab: &Lab, bounds: &Bounds) -> Outcome {
        let ended = Instant::now();
        let rolled_at = self.rolled_at.unwrap_or(ended);
        let samples = self.sampler.stop();
        let mut figures = Vec::new();

        // Sampling itself.
        let gap = observe::longest_sample_gap(&samples);
        figures.push(format!(
            "{} samples, at most {} ms apart",
            samples.len(),
            gap.as_millis()
        ));
        if gap > SAMPLE_GAP_LIMIT {
            self.failures.push(format!(
                "the set was sampled {} ms apart at worst (limit {} ms): the samples prove nothing",
                gap.as_millis(),
                SAMPLE_GAP_LIMIT.as_millis()
            ));
        }

        // Never more than one member down.
        if let Some(worst) = observe::most_down(&samples) {
            let down = worst.down();
            let over = observe::time_with_more_down_than(&samples, 1);
            figures.push(format!(
                "at most {} member(s) down at once (first at {}: {down:?}); more than one down \
                 for {} in all",
                down.len(),
                self.since_change(worst.at),
                seconds(over)
            ));
            if down.len() > 1 {
                self.failures.push(format!(
                    "{} members of the set down at once at {} ({down:?}); more than one member \
                     down for {} in all",
                    down.len(),
                    self.since_change(worst.at),
                    seconds(over)
                ));
            }
        }

        // Never two primaries in one term.
        let by_term = observe::primaries_by_term(&samples);
        figures.push(format!("primaries by term {by_term:?}"));
        for (term, primaries) in &by_term {
            if primaries.len() > 1 {
                self.failures
                    .push(format!("two primaries in term {term}: {primaries:?}"));
            }
        }

        // Elections since the change.
        let term_before = samples
            .iter()
            .filter(|s| s.at < self.changed_at)
            .filter_map(SetSample::highest_term)
            .max();
        let term_after = samples.iter().filter_map(SetSample::highest_term).max();
        let term_changes = match (term_before, term_after) {
            (Some(before), Some(after)) => after - before,
            _ => 0,
        };
        let new_primaries = by_term.range(term_before.unwrap_or(i64::MIN) + 1..).count();
        figures.push(format!(
            "terms {term_before:?} -> {term_after:?} ({term_changes} changes), {new_primaries} \
             new primary(ies); primary before the change {:?}",
            self.primary_before
        ));
        if term_changes > bounds.term_changes || new_primaries > bounds.new_primaries {
            self.failures.push(format!(
                "{term_changes} term changes and {new_primaries} new primaries since the change \
                 (bound: {} and {}, one election)",
                bounds.term_changes, bounds.new_primaries
            ));
        }

        // Stops: none while PRIMARY, one per member, the first primary last.
        let stops = self.stops(lab, &samples);
        let mut restarts: BTreeMap<String, usize> =
            self.members.iter().map(|m| (m.host.clone(), 0)).collect();
        for stop in &stops {
            *restarts.entry(stop.host.clone()).or_default() += 1;
        }
        let order: Vec<String> = stops.iter().map(|stop| stop.describe(&self)).collect();
        figures.push(format!("member stops: {order:?}"));
        for stop in &stops {
            if stop.role == Some(MemberState::Primary) {
                self.failures.push(format!(
                    "a member was stopped while PRIMARY, not stepped down first: {}",
                    stop.describe(&self)
                ));
            }
        }
        let wrong: Vec<String> = restarts
            .iter()
            .filter(|(_, count)| **count != 1)
            .map(|(host, count)| format!("{host}: {count}"))
            .collect();
        if !wrong.is_empty() {
            self.failures.push(format!(
                "each member should restart exactly once; restarts per member {restarts:?} \
                 (wrong: {wrong:?})"
            ));
        }
        for (index, cluster) in lab.clusters().iter().enumerate() {
            let restarted = self
                .members
                .iter()
                .filter(|m| m.cluster == index)
                .any(|m| restarts.get(&m.host).copied().unwrap_or(0) > 0);
            if !restarted {
                self.failures.push(format!(
                    "no member of cluster {} restarted: the change did not roll there",
                    cluster.name
                ));
            }
        }
        if let (Some(primary), Some(Stop { host: last, .. })) = (&self.primary_before, stops.last())
        {
            if restarts.get(primary).copied().unwrap_or(0) > 0 && last != primary {
                self.failures.push(format!(
                    "{primary}, the primary when the roll began, did not restart last (the last \
                     was {last}): secondaries first, the primary last"
                ));
            }
        }

        // The end state.
        match self.pods_on_new_revision(lab).await? {
            Ok(()) => figures.push("every pod on its StatefulSet's new revision".into()),
            Err(wrong) => self.failures.push(format!(
                "at the end, pods not on their StatefulSet's new template revision: {wrong}"
            )),
        }
        if let Err(wrong) = rolled_status(lab, &self.name).await? {
            self.failures.push(format!(
                "at the end, the status does not say the roll is over: {wrong}"
            ));
        }

        // The writer.
        if let Some(writer) = self.writer.take() {
            match writer.stop_and_check().await {
                Ok(acknowledged) => {
                    let (longest, at) =
                        longest_write_gap(&acknowledged, self.changed_at, rolled_at);
                    figures.push(format!(
                        "longest time without an acknowledged write during the roll {} from {} \
                         (bound {})",
                        seconds(longest),
                        self.since_change(at),
                        seconds(bounds.longest_write_gap)
                    ));
                    if longest > bounds.longest_write_gap {
                        self.failures.push(format!(
                            "no write was acknowledged for {} from {} after the change (bound {}, \
                             one election)",
                            seconds(longest),
                            self.since_change(at),
                            seconds(bounds.longest_write_gap)
                        ));
                    }
                }
                Err(error) => self.failures.push(error),
            }
        }
        figures.push(format!(
            "roll {} (change to end of roll), scenario {}",
            seconds(rolled_at.saturating_duration_since(self.changed_at)),
            seconds(ended.saturating_duration_since(self.changed_at))
        ));
        eprintln!("{} roll figures:\n  {}", self.name, figures.join("\n  "));
        phase(self.started, &format!("{}: judged", self.name));
        if self.failures.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "{}: {} failure(s):\n- {}",
                self.name,
                self.failures.len(),
                self.failures.join("\n- ")
            ))
        }
    }
}

/// Every member up, exactly one primary.
fn set_healthy(sample: &SetSample) -> Result<(), String> {
    let down = sample.down();
    let primaries = sample.primaries();
    if down.is_empty() && primaries.len() == 1 {
        Ok(())
    } else {
        Err(format!("down {down:?}, primaries {primaries:?}"))
    }
}

/// The longest time without an acknowledged write between `from` and `to`,
/// and when it began.
pub(crate) fn longest_write_gap(
    acknowledged: &[(Instant, u64)],
    from: Instant,
    to: Instant,
) -> (Duration, Instant) {
    let mut previous = acknowledged
        .iter()
        .map(|(at, _)| *at)
        .filter(|at| *at <= from)
        .max()
        .unwrap_or(from);
    let mut longest = (Duration::ZERO, previous);
    let mut times = acknowledged_between(acknowledged, from, to);
    times.push(to);
    for at in times {
        let gap = at.saturating_duration_since(previous);
        if gap > longest.0 {
            longest = (gap, previous);
        }
        previous = at;
    }
    longest
}

/// When each write acknowledged after `from` and up to `to` was, in order.
pub(crate) fn acknowledged_between(
    acknowledged: &[(Instant, u64)],
    from: Instant,
    to: Instant,
) -> Vec<Instant> {
    let mut times: Vec<Instant> = acknowledged
        .iter()
        .map(|(at, _)| *at)
        .filter(|at| *at > from && *at <= to)
        .collect();
    times.sort();
    times
}

fn pod_revision(pod: &Pod) -> Option<String> {
    pod.metadata
        .annotations
        .as_ref()?
        .get(REVISION_ANNOTATION)
        .cloned()
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

async fn revisions(lab: &Lab, members: &[Member]) -> Result<Revisions, String> {
    let mut found = Revisions::new();
    for member in members {
        let stateful_sets: Api<StatefulSet> =
            Api::namespaced(lab.clusters()[member.cluster].client.clone(), "default");
        let revision = stateful_sets
            .get_opt(&member.stateful_set)
            .await
            .map_err(fail("StatefulSet"))?
            .and_then(|s| observe::template_revision(&s));
        found.insert((member.cluster, member.stateful_set.clone()), revision);
    }
    Ok(found)
}

/// Every cluster's `MongoDB` as the API server has it (untyped: it holds
/// fields this checkout's API may not know yet, e.g.
/// `status.localMembers[].revision`).
pub(super) async fn raw_objects(lab: &Lab, name: &str) -> Result<Vec<(String, Value)>, String> {
    let resource = ApiResource::erase::<MongoDB>(&());
    let mut objects = Vec::new();
    for cluster in lab.clusters() {
        let api: Api<DynamicObject> =
            Api::namespaced_with(cluster.client.clone(), "default", &resource);
        let object = api.get(name).await.map_err(fail("MongoDB"))?;
        objects.push((
            cluster.name.clone(),
            serde_json::to_value(&object).map_err(fail("MongoDB as JSON"))?,
        ));
    }
    Ok(objects)
}

/// Ok when every cluster's status describes its current generation, says
/// `restartState: NotInProcess` and `UpToDate` True, and reports each local
/// member's revision as its StatefulSet's template revision.
pub(crate) async fn rolled_status(lab: &Lab, name: &str) -> Result<Result<(), String>, String> {
    let mut wrong = Vec::new();
    for (index, (cluster, object)) in raw_objects(lab, name).await?.into_iter().enumerate() {
        let status = &object["status"];
        let generation = &object["metadata"]["generation"];
        if status["observedGeneration"] != *generation {
            wrong.push(format!(
                "{cluster}: observedGeneration {} of generation {generation}",
                status["observedGeneration"]
            ));
        }
        if status["restartState"] != json!("NotInProcess") {
            wrong.push(format!(
                "{cluster}: restartState {}",
                status["restartState"]
            ));
        }
        let up_to_date = status["conditions"]
            .as_array()
            .and_then(|c| c.iter().find(|c| c["type"] == json!("UpToDate")));
        match up_to_date {
            Some(c) if c["status"] == json!("True") => {}
            Some(c) => wrong.push(format!(
                "{cluster}: UpToDate {} ({} {})",
                c["status"], c["reason"], c["message"]
            )),
            None => wrong.push(format!("{cluster}: no UpToDate condition")),
        }
        let stateful_sets: Api<StatefulSet> =
            Api::namespaced(lab.clusters()[index].client.clone(), "default");
        for member in status["localMembers"].as_array().into_iter().flatten() {
            let stateful_set = member["statefulSet"].as_str().unwrap_or_default();
            let desired = stateful_sets
                .get_opt(stateful_set)
                .await
                .map_err(fail("StatefulSet"))?
                .and_then(|s| observe::template_revision(&s));
            let reported = member["revision"].as_str();
            if reported.is_none() || reported != desired.as_deref() {
                wrong.push(format!(
                    "{cluster}: localMembers {stateful_set} revision {} (template {})",
                    member["revision"],
                    desired.as_deref().unwrap_or("-")
                ));
            }
        }
    }
    Ok(if wrong.is_empty() {
        Ok(())
    } else {
        Err(wrong.join("; "))
    })
}

#[test]
fn the_longest_write_gap_counts_from_the_last_write_before_to_the_end_of_the_roll() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let acknowledged = vec![
        (at(0), 1),
        (at(900), 2),
        (at(1_000), 3),
        (at(4_000), 4),
        (at(4_100), 5),
    ];
    // From 500: the last write before is at 0; the longest gap 1000 → 4000.
    assert_eq!(
        longest_write_gap(&acknowledged, at(500), at(5_000)),
        (Duration::from_millis(3_000), at(1_000))
    );
    // A roll that ends long after the last write.
    assert_eq!(
        longest_write_gap(&acknowledged, at(500), at(9_100)),
        (Duration::from_millis(5_000), at(4_100))
    );
    // No write at all.
    assert_eq!(
        longest_write_gap(&[], at(500), at(1_500)),
        (Duration::from_millis(1_000), at(500))
    );
}
