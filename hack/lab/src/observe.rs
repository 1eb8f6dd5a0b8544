//! Reading the lab's state back: what every cluster's `MongoDB` status says, the
//! readiness criterion of the demo and the tests, the human table of
//! `lab status`, samples taken on a thread of their own ([`Sampler`]), of the
//! replica set's members straight from the simulator ([`SetSampler`]), not
//! through any operator, a member StatefulSet's pod template revision, and
//! the one change the tests and benchmarks make to a set themselves: making a
//! member PRIMARY ([`make_primary`]).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::Secret;
use kube::Api;
use mongod_sim::{MemberState, Network};
use mongodb::bson::doc;
use mongodb::options::{ClientOptions, Credential, ServerAddress};
use mongodb_member_operator::api::{MongoDB, MongoState};
use mongodb_member_operator::build::statefulset::REVISION_ANNOTATION;

use crate::lab::Lab;
use federation_sim::control_plane::{ControlPlane, Split};

/// One cluster's view of an instance.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ClusterView {
    /// Cluster name.
    pub cluster: String,
    /// `spec.members`.
    pub desired: i32,
    /// `status.state`.
    pub state: Option<String>,
    /// `status.readyMembers`.
    pub ready: Option<String>,
    /// `status.primary`.
    pub primary: Option<String>,
    /// `status.configVersion`.
    pub config_version: Option<i64>,
    /// Member hosts in `status.replset`, with their state.
    pub replset: Vec<(String, String)>,
    /// The `Ready` condition's message.
    pub message: Option<String>,
}

impl ClusterView {
    fn of(cluster: &str, mongodb: &MongoDB) -> ClusterView {
        let status = mongodb.status.clone().unwrap_or_default();
        ClusterView {
            cluster: cluster.to_string(),
            desired: mongodb.spec.members,
            state: status.state.map(|s| format!("{s:?}")),
            ready: status.ready_members.clone(),
            primary: status.primary.clone(),
            config_version: status.config_version,
            replset: status
                .replset
                .iter()
                .map(|m| (m.name.clone(), m.state_str.clone()))
                .collect(),
            message: status
                .conditions
                .iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.message.clone()),
        }
    }
}

/// Every cluster's view of `name`.
pub async fn views(
    control_plane: &ControlPlane,
    namespace: &str,
    name: &str,
) -> Result<Vec<ClusterView>> {
    Ok(control_plane
        .statuses(namespace, name)
        .await?
        .iter()
        .map(|(cluster, mongodb)| ClusterView::of(cluster, mongodb))
        .collect())
}

/// Whether the instance is what `split` asks for: every cluster hosting members
/// is Running with its members ready, every cluster's `replset` lists the same
/// `split.total()` members with exactly one PRIMARY, and every cluster that
/// should host none has left the set.
pub fn is_ready(views: &[ClusterView], split: &Split) -> bool {
    let total = split.total() as usize;
    let hosting: Vec<&ClusterView> = views
        .iter()
        .filter(|v| split.members_of(&v.cluster) > 0)
        .collect();
    if hosting.len() != split.0.values().filter(|c| **c > 0).count() {
        return false;
    }
    let member_sets: BTreeSet<Vec<String>> = hosting
        .iter()
        .map(|v| v.replset.iter().map(|(host, _)| host.clone()).collect())
        .collect();
    hosting.iter().all(|v| {
        v.state.as_deref() == Some(format!("{:?}", MongoState::Running).as_str())
            && v.desired == split.members_of(&v.cluster) as i32
            && v.replset.len() == total
            && v.replset
                .iter()
                .filter(|(_, state)| state == "PRIMARY")
                .count()
                == 1
            && v.replset
                .iter()
                .all(|(_, state)| state == "PRIMARY" || state == "SECONDARY" || state == "ARBITER")
    }) && member_sets.len() == 1
}

/// Waits until [`is_ready`], printing progress lines through `progress` when the
/// picture changes. Fails after `timeout` with the last picture.
pub async fn wait_ready(
    control_plane: &ControlPlane,
    namespace: &str,
    name: &str,
    split: &Split,
    timeout: Duration,
    mut progress: impl FnMut(&[ClusterView]),
) -> Result<Vec<ClusterView>> {
    let deadline = Instant::now() + timeout;
    let mut last = String::new();
    loop {
        let current = views(control_plane, namespace, name)
            .await
            .unwrap_or_default();
        let picture = table(&current);
        if picture != last {
            progress(&current);
            last = picture;
        }
        if is_ready(&current, split) {
            return Ok(current);
        }
        if Instant::now() > deadline {
            bail!("{name} was not ready after {timeout:?}:\n{last}");
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The human table of `lab status`.
pub fn table(views: &[ClusterView]) -> String {
    let mut out = format!(
        "{:<8} {:>7} {:<12} {:>6} {:<22} {:>7}  {}\n",
        "CLUSTER", "DESIRED", "STATE", "READY", "PRIMARY", "VERSION", "REPLSET"
    );
    for view in views {
        let replset: Vec<String> = view
            .replset
            .iter()
            .map(|(host, state)| format!("{host}={state}"))
            .collect();
        out.push_str(&format!(
            "{:<8} {:>7} {:<12} {:>6} {:<22} {:>7}  {}\n",
            view.cluster,
            view.desired,
            view.state.as_deref().unwrap_or("-"),
            view.ready.as_deref().unwrap_or("-"),
            view.primary.as_deref().unwrap_or("-"),
            view.config_version
                .map(|v| v.to_string())
                .unwrap_or_else(|| "-".into()),
            if replset.is_empty() {
                "-".to_string()
            } else {
                replset.join(" ")
            },
        ));
    }
    out
}

/// One member of the set as the simulator has it at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberSample {
    /// The member's host in the set (`VIP:nodePort`).
    pub host: String,
    /// The listen address (pod address) of the running member that host
    /// reaches, if any.
    pub listen: Option<String>,
    /// Its state; `None` when no running member answers to the host.
    pub state: Option<MemberState>,
    /// Its term, when it runs.
    pub term: Option<i64>,
}

impl MemberSample {
    /// PRIMARY, SECONDARY or ARBITER: a healthy member of the set. Anything
    /// else (stopped, unreachable by its host, STARTUP, STARTUP2, REMOVED, ...)
    /// is down.
    pub fn is_up(&self) -> bool {
        matches!(
            self.state,
            Some(MemberState::Primary | MemberState::Secondary | MemberState::Arbiter)
        )
    }
}

/// Every member of the set at one instant.
#[derive(Clone, Debug, PartialEq)]
pub struct SetSample {
    /// When the sample was taken.
    pub at: Instant,
    /// One entry per host asked for, in that order.
    pub members: Vec<MemberSample>,
}

impl SetSample {
    /// Hosts of the members that are down.
    pub fn down(&self) -> Vec<&str> {
        self.members
            .iter()
            .filter(|m| !m.is_up())
            .map(|m| m.host.as_str())
            .collect()
    }

    /// `(term, host)` of every member that is PRIMARY.
    pub fn primaries(&self) -> Vec<(i64, &str)> {
        self.members
            .iter()
            .filter(|m| m.state == Some(MemberState::Primary))
            .map(|m| (m.term.unwrap_or(-1), m.host.as_str()))
            .collect()
    }

    /// The highest term any running member holds.
    pub fn highest_term(&self) -> Option<i64> {
        self.members.iter().filter_map(|m| m.term).max()
    }
}

/// The members `hosts` reach on `network` now: each host resolved through
/// the self aliases (kube-proxy's routes) or as a listen address itself.
pub fn sample_set(network: &Network, hosts: &[String]) -> SetSample {
    let mut reaches: BTreeMap<String, String> = BTreeMap::new();
    for listen in network.running() {
        for alias in network.aliases_of(&listen) {
            reaches.insert(alias, listen.clone());
        }
        reaches.insert(listen.clone(), listen);
    }
    let members = hosts
        .iter()
        .map(|host| {
            let listen = reaches.get(host).cloned();
            let member = listen.as_deref().and_then(|l| network.member(l));
            MemberSample {
                host: host.clone(),
                listen: member.as_ref().map(|m| m.listen().to_string()),
                state: member.as_ref().map(|m| m.state()),
                term: member.as_ref().map(|m| m.term()),
            }
        })
        .collect();
    SetSample {
        at: Instant::now(),
        members,
    }
}

/// Takes a sample every `every` on a thread of its own (so that a busy async
/// runtime cannot stretch the interval) until stopped.
pub struct Sampler<T> {
    samples: Arc<Mutex<Vec<T>>>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<T: Clone + Send + 'static> Sampler<T> {
    /// Starts sampling with `take`.
    pub fn start(every: Duration, take: impl Fn() -> T + Send + 'static) -> Sampler<T> {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (samples, stop) = (samples.clone(), stop.clone());
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let sample = take();
                    samples
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(sample);
                    std::thread::sleep(every);
                }
            })
        };
        Sampler {
            samples,
            stop,
            thread: Some(thread),
        }
    }

    /// The latest sample.
    pub fn latest(&self) -> Option<T> {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .last()
            .cloned()
    }

    /// Every sample so far.
    pub fn samples(&self) -> Vec<T> {
        self.samples
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Stops sampling; returns every sample.
    pub fn stop(&mut self) -> Vec<T> {
        self.halt();
        self.samples()
    }
}

impl<T> Sampler<T> {
    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl<T> Drop for Sampler<T> {
    fn drop(&mut self) {
        self.halt();
    }
}

/// Samples the set ([`sample_set`]) on its own thread until stopped.
pub struct SetSampler(Sampler<SetSample>);

impl SetSampler {
    /// Starts sampling `hosts` on `network`.
    pub fn start(network: Arc<Network>, hosts: Vec<String>, every: Duration) -> SetSampler {
        SetSampler(Sampler::start(every, move || sample_set(&network, &hosts)))
    }

    /// The latest sample.
    pub fn latest(&self) -> Option<SetSample> {
        self.0.latest()
    }

    /// Every sample so far.
    pub fn samples(&self) -> Vec<SetSample> {
        self.0.samples()
    }

    /// Stops sampling; returns every sample.
    pub fn stop(&mut self) -> Vec<SetSample> {
        self.0.stop()
    }
}

/// The pod template revision (`middleware.fedstate.io/revision`) of a member
/// StatefulSet.
pub fn template_revision(stateful_set: &StatefulSet) -> Option<String> {
    stateful_set
        .spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(REVISION_ANNOTATION)
        .cloned()
}

/// The root user's name and password of instance `name`, from
/// `<name>-credentials` in the first cluster that has it.
pub async fn root_credentials(lab: &Lab, name: &str) -> Result<(String, String)> {
    let mut secret = None;
    for cluster in lab.clusters() {
        secret = Api::<Secret>::namespaced(cluster.client.clone(), "default")
            .get_opt(&format!("{name}-credentials"))
            .await?;
        if secret.is_some() {
            break;
        }
    }
    let data = secret
        .with_context(|| format!("no cluster has {name}-credentials"))?
        .data
        .unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .with_context(|| format!("the credentials Secret has no {key}"))
    };
    Ok((text("username")?, text("password")?))
}

/// Makes `host` PRIMARY (`replSetStepUp` through the Rust driver, as the
/// root user of `<name>-credentials` in the first cluster that has it) and
/// waits until `hello` says it is.
pub async fn make_primary(lab: &Lab, name: &str, host: &str) -> Result<()> {
    let (username, password) = root_credentials(lab, name).await?;
    let options = ClientOptions::builder()
        .hosts(vec![ServerAddress::parse(host)?])
        .direct_connection(true)
        .credential(
            Credential::builder()
                .username(username)
                .password(password)
                .source("admin".to_string())
                .build(),
        )
        .server_selection_timeout(Duration::from_secs(10))
        .build();
    let client = mongodb::Client::with_options(options)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let _ = client
            .database("admin")
            .run_command(doc! {"replSetStepUp": 1})
            .await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let hello = client
            .database("admin")
            .run_command(doc! {"hello": 1})
            .await?;
        if hello.get_bool("isWritablePrimary").unwrap_or(false) {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("{host} did not become primary");
        }
    }
}

/// The longest time between two consecutive samples.
pub fn longest_sample_gap(samples: &[SetSample]) -> Duration {
    samples
        .windows(2)
        .map(|pair| pair[1].at.saturating_duration_since(pair[0].at))
        .max()
        .unwrap_or_default()
}

/// The first sample with the most members down at once.
pub fn most_down(samples: &[SetSample]) -> Option<&SetSample> {
    let most = samples.iter().map(|s| s.down().len()).max()?;
    samples.iter().find(|s| s.down().len() == most)
}

/// How long, in total, more than `allowed` members were down at once (each
/// sample counting until the next).
pub fn time_with_more_down_than(samples: &[SetSample], allowed: usize) -> Duration {
    samples
        .windows(2)
        .filter(|pair| pair[0].down().len() > allowed)
        .map(|pair| pair[1].at.saturating_duration_since(pair[0].at))
        .sum()
}

/// The hosts seen PRIMARY in each term.
pub fn primaries_by_term(samples: &[SetSample]) -> BTreeMap<i64, BTreeSet<String>> {
    let mut by_term: BTreeMap<i64, BTreeSet<String>> = BTreeMap::new();
    for sample in samples {
        for (term, host) in sample.primaries() {
            by_term.entry(term).or_default().insert(host.to_string());
        }
    }
    by_term
}

/// The member that listened on `listen` at `at`, as the last sample taken
/// at or before `at` that shows it has it (pod addresses change across
/// restarts and may be reused): its host, and its state then.
pub fn listening_on(samples: &[SetSample], listen: &str, at: Instant) -> Option<MemberSample> {
    samples.iter().rev().filter(|s| s.at <= at).find_map(|s| {
        s.members
            .iter()
            .find(|m| m.listen.as_deref() == Some(listen))
            .cloned()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(cluster: &str, desired: i32, state: &str, members: &[(&str, &str)]) -> ClusterView {
        ClusterView {
            cluster: cluster.into(),
            desired,
            state: Some(state.into()),
            ready: None,
            primary: None,
            config_version: Some(3),
            replset: members
                .iter()
                .map(|(h, s)| (h.to_string(), s.to_string()))
                .collect(),
            message: None,
        }
    }

    #[test]
    fn ready_needs_every_cluster_running_one_primary_and_the_same_members() {
        let members = [
            ("127.0.1.1:30001", "PRIMARY"),
            ("127.0.2.1:30001", "SECONDARY"),
        ];
        let split = Split::parse("a=1,b=1").unwrap();
        let ready = vec![
            view("a", 1, "Running", &members),
            view("b", 1, "Running", &members),
        ];
        assert!(is_ready(&ready, &split));
        let reconciling = vec![
            view("a", 1, "Running", &members),
            view("b", 1, "Reconciling", &members),
        ];
        assert!(!is_ready(&reconciling, &split));
        let two_primaries = [
            ("127.0.1.1:30001", "PRIMARY"),
            ("127.0.2.1:30001", "PRIMARY"),
        ];
        assert!(!is_ready(
            &[
                view("a", 1, "Running", &two_primaries),
                view("b", 1, "Running", &two_primaries)
            ],
            &split
        ));
        assert!(
            !is_ready(&[view("a", 1, "Running", &members)], &split),
            "a cluster missing"
        );
    }
}

#[cfg(test)]
mod sample_tests {
    use super::*;

    fn member(host: &str, state: Option<MemberState>, term: i64) -> MemberSample {
        MemberSample {
            host: host.into(),
            listen: state.map(|_| format!("pod-{host}")),
            state,
            term: state.map(|_| term),
        }
    }

    fn sample(start: Instant, millis: u64, members: Vec<MemberSample>) -> SetSample {
        SetSample {
            at: start + Duration::from_millis(millis),
            members,
        }
    }

    #[test]
    fn samples_count_down_members_primaries_per_term_and_gaps() {
        use MemberState::*;
        let t0 = Instant::now();
        let samples = vec![
            sample(
                t0,
                0,
                vec![
                    member("a", Some(Primary), 1),
                    member("b", Some(Secondary), 1),
                    member("c", Some(Arbiter), 1),
                ],
            ),
            // b restarting (STARTUP2 counts as down), a stale primary of term 1
            // while c won term 2: two primaries, but in two terms.
            sample(
                t0,
                100,
                vec![
                    member("a", Some(Primary), 1),
                    member("b", Some(Startup2), 1),
                    member("c", Some(Primary), 2),
                ],
            ),
            sample(
                t0,
                400,
                vec![
                    member("a", None, 0),
                    member("b", Some(Removed), 2),
                    member("c", Some(Primary), 2),
                ],
            ),
            sample(
                t0,
                450,
                vec![
                    member("a", Some(Primary), 2),
                    member("b", Some(Secondary), 2),
                    member("c", Some(Primary), 2),
                ],
            ),
        ];
        assert_eq!(samples[1].down(), vec!["b"]);
        let worst = most_down(&samples).unwrap();
        assert_eq!(worst.down(), vec!["a", "b"]);
        assert_eq!(worst.at, t0 + Duration::from_millis(400));
        assert_eq!(
            time_with_more_down_than(&samples, 1),
            Duration::from_millis(50)
        );
        assert_eq!(
            time_with_more_down_than(&samples, 0),
            Duration::from_millis(350)
        );
        assert_eq!(longest_sample_gap(&samples), Duration::from_millis(300));
        let by_term = primaries_by_term(&samples);
        assert_eq!(by_term[&1], BTreeSet::from(["a".to_string()]));
        assert_eq!(
            by_term[&2],
            BTreeSet::from(["a".to_string(), "c".to_string()])
        );
        assert_eq!(samples[2].highest_term(), Some(2));
        let b = listening_on(&samples, "pod-b", t0 + Duration::from_millis(420)).unwrap();
        assert_eq!((b.host.as_str(), b.state), ("b", Some(Removed)));
        let a = listening_on(&samples, "pod-a", t0 + Duration::from_millis(420)).unwrap();
        assert_eq!(
            (a.host.as_str(), a.state),
            ("a", Some(Primary)),
            "the last sample before that instant that shows it"
        );
        assert_eq!(
            listening_on(&samples, "pod-a", t0 - Duration::from_millis(1)),
            None
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_sampler_reads_members_by_their_aliases_and_counts_stopped_ones_down() {
        let network = Network::new();
        let listen = "127.93.0.1:27017";
        network
            .start_member(
                mongod_sim::MemberSpec::new(listen.parse().unwrap(), "rs0"),
                mongod_sim::Volume::new(),
            )
            .await
            .unwrap();
        network.add_alias(listen, "vip:30001");
        let hosts = vec!["vip:30001".to_string(), "vip:30002".to_string()];
        let now = sample_set(&network, &hosts);
        assert_eq!(now.members[0].listen.as_deref(), Some(listen));
        assert_eq!(now.members[0].state, Some(MemberState::Startup));
        assert_eq!(now.members[1].state, None);
        assert_eq!(now.down(), vec!["vip:30001", "vip:30002"]);
        let mut sampler = SetSampler::start(network.clone(), hosts, Duration::from_millis(10));
        tokio::time::sleep(Duration::from_millis(100)).await;
        network.stop_member(listen);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let samples = sampler.stop();
        assert!(samples.len() >= 5, "{} samples", samples.len());
        assert_eq!(samples.last().unwrap().members[0].state, None);
        assert!(longest_sample_gap(&samples) < Duration::from_millis(100));
    }
}
