//! `lab bench`'s timed scenarios (issue 14): how long the operator takes on
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
//! start, elections and the rest). [`fedstate_waits`] puts FedState's designed
//! waits beside the figures measured.

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

use crate::lab::{Lab, LabOptions};
use crate::observe::{self, Sampler, SetSampler};
use crate::timing::{self, human, Row};
use federation_sim::control_plane::{
    lab_replica_set_settings, ControlPlane, InstanceRequest, Split, ToSubmission,
};
use federation_sim::karmada::{Kind, OverridePolicy, Overrider, ResourceRef};

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
}

impl Scenario {
    /// The timed scenarios, in the order `lab bench --scenario timed` runs them.
    pub const TIMED: [Scenario; 4] = [
        Scenario::Join,
        Scenario::Reaction,
        Scenario::NoPrimary,
        Scenario::Convergence,
    ];

    /// The name of the instance the scenario applies.
    fn instance(self) -> &'static str {
        match self {
            Scenario::Join => "join",
            Scenario::Reaction => "react",
            Scenario::NoPrimary => "step",
            Scenario::Convergence => "demo",
        }
    }
}

/// Runs `scenario` `runs` times, each in a fresh lab started with `options`.
/// A run that fails is counted as one without figures and its error noted.
pub async fn run(options: &LabOptions, scenario: Scenario, runs: usize) -> Result<Timed> {
    let mut timed = match scenario {
        Scenario::Join => Timed {
            title: "Join overhead: a scale-out (1+1+1 → 2+1+1) on a Ready instance".into(),
            rows: join_rows(),
            notes: vec![JOIN_NOTE.to_string()],
        },
        Scenario::Reaction => Timed {
            title: "Reaction: from a change to the operator's first effect (1+1+1 instance)".into(),
            rows: reaction_rows(),
            notes: vec![REACTION_NOTE.to_string()],
        },
        Scenario::NoPrimary => Timed {
            title: "No-primary window: a scale-in (2+2+1 → 1+2+1) that removes the primary".into(),
            rows: no_primary_rows(),
            notes: vec![NO_PRIMARY_NOTE.to_string()],
        },
        Scenario::Convergence => Timed {
            title:
                "Demo convergence: a 2+2+1 instance from its objects written to Ready everywhere"
                    .into(),
            rows: convergence_rows(),
            notes: vec![CONVERGENCE_NOTE.to_string()],
        },
    };
    for run in 1..=runs {
        let lab = Lab::start(options.clone())
            .await
            .context("starting the lab")?;
        let pruner = tokio::spawn(lab.control_plane().run(NAMESPACE.into(), |_| {}));
        let figures = match scenario {
            Scenario::Join => join(&lab).await,
            Scenario::Reaction => reaction(&lab).await,
            Scenario::NoPrimary => no_primary(&lab).await,
            Scenario::Convergence => convergence(&lab).await,
        };
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

// ---------------------------------------------------------------- join

const JOIN_OVERHEAD: &str = "join overhead";
const JOIN_RUNS: &str = "scale-out → new mongod runs";
const JOIN_ANSWERS: &str = "new mongod runs → answers at its address";
const JOIN_LISTED_TO_READY: &str = "in the config → Ready everywhere";
const JOIN_READY: &str = "scale-out → Ready everywhere";

const JOIN_NOTE: &str = "mongod-sim is looked at every 10 ms on a thread of its own. The new mongod *runs* at the first look where a member listens on an address that did not before the scale-out; it *answers at its address* at the first look where a running member is reached at the new `VIP:nodePort` (kube-proxy's route, which follows the pod's readiness and which the lab mirrors into mongod-sim's aliases); it is *in the config* at the first look where the newest config any member holds lists that host (what `replSetGetConfig` answers, `newlyAdded` or not). The scale-out is FedState's, with the lab-only `keep_unchanged_clusters_on_scale_up` correction (FedState itself withdraws the other clusters' Services on a partial scale-up). *Ready everywhere*: every cluster's `MongoDB` Running with the whole set and one PRIMARY, polled every 50 ms.";

fn join_rows() -> Vec<Row> {
    vec![
        Row::new(
            JOIN_OVERHEAD,
            "new member answers at `VIP:nodePort` → host in the replica-set config",
        ),
        Row::new(
            JOIN_RUNS,
            "control-plane write → the new member's mongod listens (StatefulSet, pod, container)",
        ),
        Row::new(
            JOIN_ANSWERS,
            "mongod listens → reached at its `VIP:nodePort` (the pod's readiness probe, kube-proxy)",
        ),
        Row::new(
            JOIN_LISTED_TO_READY,
            "host in the config → every cluster's `MongoDB` Ready",
        ),
        Row::new(
            JOIN_READY,
            "control-plane write → every cluster's `MongoDB` Ready",
        ),
    ]
}

async fn join(lab: &Lab) -> Result<Figures> {
    let control_plane = lab.control_plane();
    let name = Scenario::Join.instance();
    let before_split = Split::parse("a=1,b=1,c=1")?;
    let after_split = Split::parse("a=2,b=1,c=1")?;
    control_plane
        .apply(
            &request(name, &before_split)
                .to_submission()
                .keep_unchanged_clusters_on_scale_up(),
        )
        .await?;
    ready_at(&control_plane, name, &before_split).await?;
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_millis(200)).await;
    let before = probe.latest().context("no look at the network")?;
    let asked = Instant::now();
    control_plane
        .apply(
            &request(name, &after_split)
                .to_submission()
                .keep_unchanged_clusters_on_scale_up(),
        )
        .await?;
    let ready = ready_at(&control_plane, name, &after_split).await?;
    let looks = probe.stop();
    let after = looks.last().map(Look::config_hosts).unwrap_or_default();
    let before_hosts = before.config_hosts();
    let added: Vec<&String> = after.difference(&before_hosts).collect();
    let [host] = added[..] else {
        bail!("expected one new member in the config, found {added:?}");
    };
    let runs = first(&looks, asked, |l| !l.running.is_subset(&before.running))
        .context("no new mongod ever ran")?;
    let answers = first(&looks, asked, |l| l.reachable.contains(host))
        .with_context(|| format!("{host} never answered"))?;
    let listed = first(&looks, asked, |l| l.config_hosts().contains(host))
        .with_context(|| format!("{host} never entered the config"))?;
    Ok(BTreeMap::from([
        (JOIN_OVERHEAD, Ok(listed.saturating_duration_since(answers))),
        (JOIN_RUNS, Ok(runs - asked)),
        (JOIN_ANSWERS, Ok(answers.saturating_duration_since(runs))),
        (
            JOIN_LISTED_TO_READY,
            Ok(ready.saturating_duration_since(listed)),
        ),
        (JOIN_READY, Ok(ready - asked)),
    ]))
}

// ---------------------------------------------------------------- reaction

const REACT_MEMBERS: &str = "`spec.members` +1";
const REACT_SERVICE: &str = "member Service's nodePort";
const REACT_HOSTCONF: &str = "hostconf: a line added";
const REACT_SECRET: &str = "credentials Secret: a new password";

const REACTION_NOTE: &str = "Both instants are when the event reaches the bench through a kube-rs watcher on that cluster's apiserver-sim (the change's own event and the effect's), or, for the config, the first 10 ms look at mongod-sim that shows it; so each figure is the operator's reaction plus one watch delivery. One 1+1+1 instance per run, its credentials from a Secret of our own in every cluster (`spec.credentialsSecretRef`, by an OverridePolicy applied with the instance, holding what the operator would derive from the root password). The four changes, in this order: `spec.members` through the control plane (FedState's scale-out of cluster a, with the lab-only `keep_unchanged_clusters_on_scale_up`), timed from cluster a's `MongoDB` showing `spec.members: 2` to cluster a's new member StatefulSet created; then, once Ready, the nodePort of the Service of a member that is not PRIMARY, in its own cluster (replaced directly in that cluster's API server, as Karmada would write it), timed to the first config that lists the member at its new `VIP:nodePort` (the operator's reconfig); then, once cluster a's `MongoDB` has not changed for 3 s, one more `host:'VIP:port'` line in cluster a's hostconf for a member that does not exist yet (as FedState writes hostconf ahead of a scale-out), timed to the first change of cluster a's `MongoDB` status (hostconf is put back afterwards); then, once quiet again, a new root password in the Secret of every cluster, timed from cluster a's Secret event to the first of cluster a's StatefulSets with another pod template revision (`middleware.fedstate.io/revision`). The set still holds the old password, so the operator then reports `CredentialsRefused` (its log: \"the members refuse the root user of Secret …\"); the StatefulSets update `OnDelete`, so no pod restarts for the new revision by itself.";

fn reaction_rows() -> Vec<Row> {
    vec![
        Row::new(
            REACT_MEMBERS,
            "cluster a's `MongoDB` event with `spec.members: 2` → new StatefulSet created (watch)",
        ),
        Row::new(
            REACT_SERVICE,
            "Service event with the new nodePort → config lists the member at it (reconfig)",
        ),
        Row::new(
            REACT_HOSTCONF,
            "hostconf ConfigMap event → `MongoDB` status changed (watch)",
        ),
        Row::new(
            REACT_SECRET,
            "Secret event with the new password → a StatefulSet's pod template revision changed (watch; the operator then refuses the credentials, see below)",
        ),
    ]
}

async fn reaction(lab: &Lab) -> Result<Figures> {
    let control_plane = lab.control_plane();
    let name = Scenario::Reaction.instance();
    let a = &lab.clusters()[0];
    let mongodbs = Recorder::<MongoDB>::start(Api::namespaced(a.client.clone(), NAMESPACE));
    let stateful_sets =
        Recorder::<StatefulSet>::start(Api::namespaced(a.client.clone(), NAMESPACE));
    let config_maps = Recorder::<ConfigMap>::start(Api::namespaced(a.client.clone(), NAMESPACE));
    let secrets = Recorder::<Secret>::start(Api::namespaced(a.client.clone(), NAMESPACE));
    // The credentials come from a Secret of our own in every cluster
    // (`spec.credentialsSecretRef`, set by an OverridePolicy right after the
    // instance is applied), holding what the operator would derive from the
    // root password: a switch from one to the other changes no credential.
    let secret_name = format!("{name}-shared-credentials");
    for cluster in lab.clusters() {
        put_credentials(cluster, &secret_name, ROOT_PASSWORD).await?;
    }
    let first_split = Split::parse("a=1,b=1,c=1")?;
    let mut submission = request(name, &first_split)
        .to_submission()
        .keep_unchanged_clusters_on_scale_up();
    submission.object.spec.auth.root_passwd = Some(ROOT_PASSWORD.to_string());
    control_plane.apply(&submission).await?;
    control_plane
        .apply_override_policy(
            NAMESPACE,
            name,
            &secret_name,
            OverridePolicy {
                labels: BTreeMap::new(),
                resource: ResourceRef::new(Kind::MongoDB, name),
                clusters: None,
                overrider: Overrider::AddPath {
                    path: "/spec/credentialsSecretRef".into(),
                    value: json!({
                        "name": secret_name,
                        "keyfileKey": "keyfile",
                        "usernameKey": "username",
                        "passwordKey": "password",
                    }),
                },
            },
        )
        .await?;
    ready_at(&control_plane, name, &first_split).await?;
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut figures = Figures::new();

    // spec.members: a=1 → a=2.
    let split = Split::parse("a=2,b=1,c=1")?;
    let members = async {
        let existing: BTreeSet<String> = stateful_sets
            .seen()
            .iter()
            .map(|(_, s)| s.name_any())
            .collect();
        let asked = Instant::now();
        control_plane.scale(NAMESPACE, name, &split, None).await?;
        let changed = mongodbs
            .wait_for(asked, |m| m.name_any() == name && m.spec.members == 2)
            .await
            .context("cluster a's MongoDB never asked for 2 members")?;
        let created = stateful_sets
            .wait_for(asked, |s| !existing.contains(&s.name_any()))
            .await
            .context("no new StatefulSet in cluster a")?;
        ready_at(&control_plane, name, &split).await?;
        anyhow::Ok(created.saturating_duration_since(changed))
    };
    figures.insert(REACT_MEMBERS, members.await.map_err(|e| format!("{e:#}")));
    tokio::time::sleep(Duration::from_secs(2)).await;

    // A member Service's nodePort, in the cluster of a member that is not PRIMARY.
    let service = async {
        let (cluster, service_name) = non_primary_member_service(lab, name).await?;
        let services = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE);
        let service_events = Recorder::<Service>::start(services.clone());
        tokio::time::sleep(Duration::from_secs(1)).await;
        let port = free_node_port(lab).await?;
        let mut service = services.get(&service_name).await?;
        let ports = service
            .spec
            .as_mut()
            .and_then(|s| s.ports.as_mut())
            .context("a member Service without ports")?;
        ports[0].node_port = Some(port);
        let asked = Instant::now();
        services
            .replace(&service_name, &PostParams::default(), &service)
            .await
            .context("moving the member Service's nodePort")?;
        let moved = service_events
            .wait_for(asked, |s| {
                s.name_any() == service_name && node_port(s) == Some(port)
            })
            .await?;
        let new_host = format!("{}:{port}", cluster.vip);
        let reconfigured = wait_look(&probe, moved, |l| l.config_hosts().contains(&new_host))
            .await
            .with_context(|| format!("the config never listed {new_host}"))?;
        anyhow::Ok(reconfigured.saturating_duration_since(moved))
    };
    figures.insert(REACT_SERVICE, service.await.map_err(|e| format!("{e:#}")));

    // hostconf: one more line, once the status is quiet; then put back.
    let hostconf_name = format!("{name}-hostconf");
    let config_maps_api = Api::<ConfigMap>::namespaced(a.client.clone(), NAMESPACE);
    let original = config_maps_api.get(&hostconf_name).await?;
    let hostconf = async {
        quiet(&mongodbs, name, QUIET).await?;
        let mut hostconf = original.clone();
        let extra = format!(
            "host:'{}:{}'",
            lab.clusters()[2].vip,
            free_node_port(lab).await?
        );
        let data = hostconf.data.get_or_insert_with(Default::default);
        let datas = data.entry("datas".to_string()).or_default();
        datas.push('\n');
        datas.push_str(&extra);
        let asked = Instant::now();
        config_maps_api
            .replace(&hostconf_name, &PostParams::default(), &hostconf)
            .await
            .context("adding a line to hostconf")?;
        let written = config_maps
            .wait_for(asked, |c| {
                c.name_any() == hostconf_name
                    && c.data
                        .as_ref()
                        .and_then(|d| d.get("datas"))
                        .is_some_and(|d| d.contains(&extra))
            })
            .await?;
        let status_then = mongodbs
            .last_before(name, written)
            .map(|m| serde_json::to_value(&m.status))
            .transpose()?;
        let reacted = mongodbs
            .wait_for(written, |m| {
                m.name_any() == name && serde_json::to_value(&m.status).ok() != status_then
            })
            .await
            .context("cluster a's MongoDB status never changed after the hostconf change")?;
        anyhow::Ok(reacted.saturating_duration_since(written))
    };
    figures.insert(REACT_HOSTCONF, hostconf.await.map_err(|e| format!("{e:#}")));
    let mut restored = config_maps_api.get(&hostconf_name).await?;
    restored.data = original.data.clone();
    config_maps_api
        .replace(&hostconf_name, &PostParams::default(), &restored)
        .await
        .context("putting hostconf back")?;

    // The credentials Secret: a new root password in every cluster.
    let secret = async {
        quiet(&mongodbs, name, QUIET).await?;
        let revisions_then = template_revisions(&stateful_sets.seen());
        let asked = Instant::now();
        for cluster in lab.clusters() {
            put_credentials(cluster, &secret_name, NEW_ROOT_PASSWORD).await?;
        }
        let written = secrets
            .wait_for(asked, |s| {
                s.name_any() == secret_name
                    && s.data
                        .as_ref()
                        .and_then(|d| d.get("password"))
                        .is_some_and(|p| p.0 == NEW_ROOT_PASSWORD.as_bytes())
            })
            .await?;
        let rolled = stateful_sets
            .wait_for(written, |s| {
                let revision = observe::template_revision(s);
                revision.is_some() && revisions_then.get(&s.name_any()) != Some(&revision)
            })
            .await
            .context("no StatefulSet of cluster a got a new pod template revision")?;
        anyhow::Ok(rolled.saturating_duration_since(written))
    };
    figures.insert(REACT_SECRET, secret.await.map_err(|e| format!("{e:#}")));
    probe.stop();
    // Let the operators finish the pass the last change started (their logs
    // then show it) before the lab stops them.
    tokio::time::sleep(Duration::from_secs(2)).await;
    Ok(figures)
}

/// The root password the reaction scenario starts with, and the one its
/// Secret change sets.
const ROOT_PASSWORD: &str = "bench-root-password-1";
const NEW_ROOT_PASSWORD: &str = "bench-root-password-2";
/// How long an object must not have changed before a change is timed.
const QUIET: Duration = Duration::from_secs(3);

/// Creates or replaces Secret `name` in `cluster` with the credentials the
/// operator would derive from `password` (user `root`, keyfile derived).
async fn put_credentials(
    cluster: &crate::lab::LabCluster,
    name: &str,
    password: &str,
) -> Result<()> {
    let secrets = Api::<Secret>::namespaced(cluster.client.clone(), NAMESPACE);
    let data = BTreeMap::from([
        ("keyfile".to_string(), derive_keyfile(password)),
        ("username".to_string(), DERIVED_ROOT_USER.to_string()),
        ("password".to_string(), password.to_string()),
    ]);
    let mut secret = secrets.get_opt(name).await?.unwrap_or_else(|| Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_string()),
            ..Default::default()
        },
        ..Default::default()
    });
    secret.data = Some(
        data.into_iter()
            .map(|(k, v)| (k, k8s_openapi::ByteString(v.into_bytes())))
            .collect(),
    );
    secret.string_data = None;
    if secret.metadata.resource_version.is_some() {
        secrets
            .replace(name, &PostParams::default(), &secret)
            .await?;
    } else {
        secrets.create(&PostParams::default(), &secret).await?;
    }
    Ok(())
}

/// The last pod template revision seen of every StatefulSet.
fn template_revisions(seen: &[(Instant, StatefulSet)]) -> BTreeMap<String, Option<String>> {
    seen.iter()
        .map(|(_, s)| (s.name_any(), observe::template_revision(s)))
        .collect()
}

/// A member Service (its cluster and name) of a member that is not PRIMARY,
/// in a cluster other than a: the StatefulSet `<name>-mongodb-<i>` there has
/// the Service of the same name.
async fn non_primary_member_service<'a>(
    lab: &'a Lab,
    name: &str,
) -> Result<(&'a crate::lab::LabCluster, String)> {
    let primaries: BTreeSet<String> = lab
        .network()
        .primaries()
        .iter()
        .flat_map(|listen| lab.network().aliases_of(listen))
        .collect();
    for cluster in &lab.clusters()[1..] {
        let stateful_sets = Api::<StatefulSet>::namespaced(cluster.client.clone(), NAMESPACE);
        let services = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE);
        for stateful_set in stateful_sets.list(&Default::default()).await? {
            let member = stateful_set.name_any();
            if !member.starts_with(&format!("{name}-mongodb-")) {
                continue;
            }
            let Some(service) = services.get_opt(&member).await? else {
                continue;
            };
            let Some(port) = node_port(&service) else {
                continue;
            };
            if !primaries.contains(&format!("{}:{port}", cluster.vip)) {
                return Ok((cluster, member));
            }
        }
    }
    bail!("no member Service of a secondary outside cluster a")
}

fn node_port(service: &Service) -> Option<i32> {
    service.spec.as_ref()?.ports.as_ref()?.first()?.node_port
}

/// A nodePort no Service of any cluster uses.
async fn free_node_port(lab: &Lab) -> Result<i32> {
    let mut taken = BTreeSet::new();
    for cluster in lab.clusters() {
        let services = Api::<Service>::all(cluster.client.clone());
        for service in services.list(&Default::default()).await? {
            taken.extend(node_port(&service));
        }
    }
    (31_000..32_000)
        .find(|port| !taken.contains(port))
        .context("no free nodePort")
}

/// Waits until `name`'s `MongoDB` has had no event for `period`; returns the
/// instant of its last event.
async fn quiet(records: &Recorder<MongoDB>, name: &str, period: Duration) -> Result<Instant> {
    let deadline = Instant::now() + EFFECT_TIMEOUT;
    loop {
        let last = records
            .seen()
            .iter()
            .rev()
            .find(|(_, m)| m.name_any() == name)
            .map(|(at, _)| *at)
            .context("no MongoDB event at all")?;
        if last.elapsed() >= period {
            return Ok(last);
        }
        if Instant::now() > deadline {
            bail!("{name}'s MongoDB kept changing");
        }
        tokio::time::sleep(POLL_EVERY).await;
    }
}

// ---------------------------------------------------------------- no primary

const NO_PRIMARY: &str = "no PRIMARY";
const STEP_DOWN_TO_REMOVED: &str = "step-down → removed";
const SCALE_IN_READY: &str = "scale-in → Ready everywhere";

const NO_PRIMARY_NOTE: &str = "Before the scale-in the leaving member (cluster a's `<name>-mongodb-1`, the member FedState's scale-in withdraws) is made PRIMARY with `replSetStepUp` (the Rust driver, as root) and FedState's status is let settle, as a FedState user must before scaling in. Every member is then sampled every 10 ms on its own thread from mongod-sim (`observe::SetSampler`: each member's state as `hello`/`replSetGetStatus` report it) from the scale-in request until Ready everywhere; *no PRIMARY* is the longest stretch of consecutive samples in which none of the five is PRIMARY (0: no sample without one; the resolution is one sample, 10 ms), against one election timeout (`electionTimeoutMillis` 2000, the lab's `lab_replica_set_settings`). *Step-down → removed*: from the first sample where the leaving member is no longer PRIMARY to the first 10 ms look where the newest config no longer lists it.";

fn no_primary_rows() -> Vec<Row> {
    let mut window = Row::new(
        NO_PRIMARY,
        "longest stretch of 10 ms samples with no member PRIMARY",
    );
    window.against = Some((
        "election timeout".to_string(),
        Duration::from_millis(lab_replica_set_settings().election_timeout_millis as u64),
    ));
    vec![
        window,
        Row::new(
            STEP_DOWN_TO_REMOVED,
            "leaving member no longer PRIMARY → config without it",
        ),
        Row::new(
            SCALE_IN_READY,
            "control-plane write → every cluster's `MongoDB` Ready",
        ),
    ]
}

async fn no_primary(lab: &Lab) -> Result<Figures> {
    let control_plane = lab.control_plane();
    let name = Scenario::NoPrimary.instance();
    let split = Split::parse("a=2,b=2,c=1")?;
    control_plane.apply(&request(name, &split)).await?;
    ready_at(&control_plane, name, &split).await?;
    control_plane
        .settled(NAMESPACE, name, READY_TIMEOUT)
        .await?;
    let leaving = member_host(lab, 0, name, 1).await?;
    observe::make_primary(lab, name, &leaving).await?;
    let hosts: Vec<String> = observe::views(&control_plane, NAMESPACE, name)
        .await?
        .first()
        .context("no cluster has the instance")?
        .replset
        .iter()
        .map(|(host, _)| host.clone())
        .collect();
    let mut sampler = SetSampler::start(lab.network().clone(), hosts, LOOK_EVERY);
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let smaller = Split::parse("a=1,b=2,c=1")?;
    let asked = Instant::now();
    control_plane.scale(NAMESPACE, name, &smaller, None).await?;
    let ready = ready_at(&control_plane, name, &smaller).await?;
    let samples = sampler.stop();
    let looks = probe.stop();
    let primary_then = samples
        .iter()
        .rev()
        .find(|s| s.at <= asked)
        .map(|s| s.primaries().iter().any(|(_, host)| *host == leaving))
        .unwrap_or(false);
    ensure!(
        primary_then,
        "{leaving} was not PRIMARY when the scale-in was asked"
    );
    let without: Vec<(Instant, bool)> = samples
        .iter()
        .filter(|s| s.at >= asked)
        .map(|s| (s.at, s.primaries().is_empty()))
        .collect();
    let stepped_down = samples
        .iter()
        .find(|s| s.at >= asked && !s.primaries().iter().any(|(_, host)| *host == leaving))
        .map(|s| s.at)
        .context("the leaving member never stopped being PRIMARY")?;
    let removed = first(&looks, asked, |l| {
        l.config.is_some() && !l.config_hosts().contains(&leaving)
    })
    .context("the leaving member never left the config")?;
    Ok(BTreeMap::from([
        (NO_PRIMARY, Ok(timing::longest_span(&without))),
        (
            STEP_DOWN_TO_REMOVED,
            Ok(removed.saturating_duration_since(stepped_down)),
        ),
        (SCALE_IN_READY, Ok(ready - asked)),
    ]))
}

/// `VIP:nodePort` of the member Service `<name>-mongodb-<index>` in cluster `cluster`.
async fn member_host(lab: &Lab, cluster: usize, name: &str, index: u32) -> Result<String> {
    let cluster = &lab.clusters()[cluster];
    let service = Api::<Service>::namespaced(cluster.client.clone(), NAMESPACE)
        .get(&format!("{name}-mongodb-{index}"))
        .await?;
    let port = node_port(&service).context("a member Service without a nodePort")?;
    Ok(format!("{}:{port}", cluster.vip))
}

// ---------------------------------------------------------------- convergence

const CONVERGED: &str = "total";
const POD_START: &str = "pod start";
const POD_READY: &str = "readiness probe";
const ELECTIONS: &str = "elections";
const OPERATOR: &str = "operator (the rest)";
const CONTROL_PLANE: &str = "  of which the control plane's pass";
const FIRST_POD: &str = "write → first member pod created";
const BEFORE_INITIATE: &str = "members answer → initiated";
const INITIATE_TO_PRIMARY: &str = "initiated → first PRIMARY";
const PRIMARY_TO_READY: &str = "first PRIMARY → Ready everywhere";

const CONVERGENCE_NOTE: &str = "From just before the control plane's `apply` (FedState's pass and Karmada's propagation, run at once) to the first 50 ms poll that finds every cluster's `MongoDB` Running with the same five members and one PRIMARY. The total is split into parts that do not overlap, each the time covered (overlaps counted once) by intervals observed outside the operator: *pod start*, each member pod from its first watch event (created) to its first event with the `mongod` container running (kubelet-sim's status; kube-rs watchers on every cluster); *readiness probe*, outside pod start, each pod from `mongod` running to its first event with condition Ready (the member pods' readiness probe, which the operator builds: `readiness_probe` in `src/build/pod.rs`; kube-proxy routes the member's `VIP:nodePort` only to a Ready pod); *elections*, outside both, the looks at mongod-sim (every 10 ms) in which some member holds a config but none is PRIMARY; *operator*, the rest (it includes the control plane's pass, given apart, kubelet-sim's StatefulSet controller creating the pods, and the watch and poll delays). The last rows are instants on the way: *members answer → initiated* from the last member of the first config answering at its `VIP:nodePort` to the first look where a member holds a config; *initiated → first PRIMARY*; *first PRIMARY → Ready everywhere*.";

fn convergence_rows() -> Vec<Row> {
    vec![
        Row::new(
            CONVERGED,
            "control-plane write → every cluster's `MongoDB` Ready (50 ms poll)",
        ),
        Row::new(POD_START, "pod created → `mongod` running"),
        Row::new(POD_READY, "`mongod` running → pod Ready"),
        Row::new(ELECTIONS, "a config but no PRIMARY (10 ms looks)"),
        Row::new(OPERATOR, "total − the three above"),
        Row::new(CONTROL_PLANE, "the `apply` call: FedState's pass, Karmada"),
        Row::new(
            FIRST_POD,
            "control-plane write → first member pod's first event",
        ),
        Row::new(
            BEFORE_INITIATE,
            "last member of the first config answers → a member holds a config",
        ),
        Row::new(INITIATE_TO_PRIMARY, "a member holds a config → a PRIMARY"),
        Row::new(
            PRIMARY_TO_READY,
            "a PRIMARY → every cluster's `MongoDB` Ready",
        ),
    ]
}

/// A member pod's life as its watch events show it: created, `mongod`
/// running, Ready.
struct PodTimes {
    created: Instant,
    running: Option<Instant>,
    ready: Option<Instant>,
}

async fn convergence(lab: &Lab) -> Result<Figures> {
    let control_plane = lab.control_plane();
    let name = Scenario::Convergence.instance();
    let split = Split::parse("a=2,b=2,c=1")?;
    let pods: Vec<Recorder<Pod>> = lab
        .clusters()
        .iter()
        .map(|c| Recorder::start(Api::namespaced(c.client.clone(), NAMESPACE)))
        .collect();
    let mut probe = look_at(lab.network().clone());
    tokio::time::sleep(Duration::from_secs(1)).await;
    let start = Instant::now();
    control_plane.apply(&request(name, &split)).await?;
    let applied = Instant::now();
    let ready = ready_at(&control_plane, name, &split).await?;
    let looks = probe.stop();
    let mut times: Vec<PodTimes> = Vec::new();
    for recorder in &pods {
        let mut by_uid: BTreeMap<String, PodTimes> = BTreeMap::new();
        for (at, pod) in recorder.seen() {
            if at < start || !has_container(&pod, "mongod") {
                continue;
            }
            let entry = by_uid
                .entry(pod.uid().unwrap_or_default())
                .or_insert(PodTimes {
                    created: at,
                    running: None,
                    ready: None,
                });
            if entry.running.is_none() && mongod_running(&pod) {
                entry.running = Some(at);
            }
            if entry.ready.is_none() && pod_ready(&pod) {
                entry.ready = Some(at);
            }
        }
        times.extend(by_uid.into_values());
    }
    ensure!(
        times.len() >= split.total() as usize,
        "saw {} member pods",
        times.len()
    );
    let starting: Vec<(Instant, Instant)> = times
        .iter()
        .map(|t| (t.created, t.running.unwrap_or(ready)))
        .collect();
    let probing: Vec<(Instant, Instant)> = times
        .iter()
        .filter_map(|t| Some((t.running?, t.ready.unwrap_or(ready))))
        .collect();
    let electing = timing::spans(
        &looks
            .iter()
            .map(|l| (l.at, l.config.is_some() && l.primaries == 0))
            .collect::<Vec<_>>(),
    );
    let union = |parts: &[&[(Instant, Instant)]]| {
        let all: Vec<(Instant, Instant)> = parts.iter().flat_map(|p| p.iter().copied()).collect();
        timing::covered(&all, start, ready)
    };
    let pod_start = union(&[&starting]);
    let with_probe = union(&[&starting, &probing]);
    let waiting = union(&[&starting, &probing, &electing]);
    let total = ready - start;
    let first_pod = times
        .iter()
        .map(|t| t.created)
        .min()
        .context("no member pod")?;
    let initiated = looks
        .iter()
        .find(|l| l.config.is_some())
        .context("no member ever held a config")?;
    let all_answer = initiated
        .config_hosts()
        .iter()
        .map(|host| first(&looks, start, |l| l.reachable.contains(host)))
        .collect::<Option<Vec<Instant>>>()
        .and_then(|answers| answers.into_iter().max());
    let primary = first(&looks, start, |l| l.primaries > 0);
    Ok(BTreeMap::from([
        (CONVERGED, Ok(total)),
        (POD_START, Ok(pod_start)),
        (POD_READY, Ok(with_probe - pod_start)),
        (ELECTIONS, Ok(waiting - with_probe)),
        (OPERATOR, Ok(total - waiting)),
        (CONTROL_PLANE, Ok(applied - start)),
        (FIRST_POD, Ok(first_pod.saturating_duration_since(start))),
        (
            BEFORE_INITIATE,
            all_answer
                .map(|at| initiated.at.saturating_duration_since(at))
                .ok_or_else(|| "a member of the first config never answered".to_string()),
        ),
        (
            INITIATE_TO_PRIMARY,
            primary
                .map(|at| at.saturating_duration_since(initiated.at))
                .ok_or_else(|| "no PRIMARY seen".to_string()),
        ),
        (
            PRIMARY_TO_READY,
            primary
                .map(|at| ready.saturating_duration_since(at))
                .ok_or_else(|| "no PRIMARY seen".to_string()),
        ),
    ]))
}

fn pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|conditions| {
            conditions
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True")
        })
}

fn has_container(pod: &Pod, name: &str) -> bool {
    pod.spec
        .as_ref()
        .is_some_and(|s| s.containers.iter().any(|c| c.name == name))
}

fn mongod_running(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .is_some_and(|statuses| {
            statuses.iter().any(|c| {
                c.name == "mongod"
                    && c.state
                        .as_ref()
                        .is_some_and(|state| state.running.is_some())
            })
        })
}

// ---------------------------------------------------------------- FedState

/// One of FedState's designed waits (fedstate/fedstate at d28f763), the
/// figure we measured for the same thing (a row of a scenario), and where.
struct Wait {
    what: &'static str,
    source: &'static str,
    fedstate: Duration,
    ours: (Scenario, &'static str),
}

const WAITS: [Wait; 6] = [
    Wait {
        what: "before initiating: sleep `SyncWaitTime` (10 s) \"waiting for mongod to start\"",
        source: "`pkg/controller/mongodb/core/mongo_config.go:39` (`SyncWaitTime = 10 * time.Second`: `pkg/util/ctx.go:10`)",
        fedstate: Duration::from_secs(10),
        ours: (Scenario::Convergence, BEFORE_INITIATE),
    },
    Wait {
        what: "after initiating: sleep `SyncWaitTime` (10 s) \"waiting for the election\"",
        source: "`pkg/controller/mongodb/core/mongo_config.go:93`",
        fedstate: Duration::from_secs(10),
        ours: (Scenario::Convergence, INITIATE_TO_PRIMARY),
    },
    Wait {
        what: "after each step-down (scale-in): sleep 3 s, then remove the member",
        source: "`pkg/controller/mongodb/core/sync.go:208` (and `pkg/controller/mongodb/mode/replica/replica.go:232` in a restart)",
        fedstate: Duration::from_secs(3),
        ours: (Scenario::NoPrimary, STEP_DOWN_TO_REMOVED),
    },
    Wait {
        what: "every pass that syncs members polls the pods with `wait.Poll` every 10 s, the first look after 10 s, before it configures the set",
        source: "`pkg/controller/mongodb/core/sync.go:20,56` (called at `:134`)",
        fedstate: Duration::from_secs(10),
        ours: (Scenario::Join, JOIN_OVERHEAD),
    },
    Wait {
        what: "a Ready instance is looked at again only every 60 s (`RequeueAfter`); the controller watches `MongoDB`, StatefulSets and Pods only, so a hostconf change waits for it (up to 60 s)",
        source: "`controllers/mongodb_controller.go:186` (watches: `:293-296`)",
        fedstate: Duration::from_secs(60),
        ours: (Scenario::Reaction, REACT_HOSTCONF),
    },
    Wait {
        what: "the same 60 s polling for a member Service change (up to 60 s)",
        source: "`controllers/mongodb_controller.go:186` (watches: `:293-296`)",
        fedstate: Duration::from_secs(60),
        ours: (Scenario::Reaction, REACT_SERVICE),
    },
];

/// FedState's designed waits beside the figures we measured in `measured`
/// (scenarios not run are left out), as ratios FedState / ours.
pub fn fedstate_waits(measured: &[(Scenario, &Timed)], command: &str) -> String {
    let mut out = format!(
        "### FedState's designed waits beside ours\n\nReproduce: `{command}`\n\n\
         | FedState's wait | FedState source (d28f763) | FedState | ours: what | ours: median / worst | FedState ÷ ours (median / worst) |\n\
         |---|---|---|---|---|---|\n"
    );
    for wait in &WAITS {
        let Some((_, timed)) = measured.iter().find(|(s, _)| *s == wait.ours.0) else {
            continue;
        };
        let Some(summary) = timed
            .row(wait.ours.1)
            .and_then(|row| timing::summarize(&row.figures))
        else {
            continue;
        };
        let ratio = |ours: Duration| {
            if ours.is_zero() {
                "∞".to_string()
            } else {
                format!("{:.0}×", wait.fedstate.as_secs_f64() / ours.as_secs_f64())
            }
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} ({:?}) | {} / {} | {} / {} |\n",
            wait.what,
            wait.source,
            human(wait.fedstate),
            wait.ours.1,
            wait.ours.0,
            human(summary.median),
            human(summary.worst),
            ratio(summary.median),
            ratio(summary.worst),
        ));
    }
    out
}

// ---------------------------------------------------------------- observing

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
/// arrived, until dropped.
struct Recorder<K> {
    seen: Arc<Mutex<Vec<(Instant, K)>>>,
    task: tokio::task::JoinHandle<()>,
}

impl<K> Recorder<K>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: Default,
{
    fn start(api: Api<K>) -> Recorder<K> {
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

    fn seen(&self) -> Vec<(Instant, K)> {
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
