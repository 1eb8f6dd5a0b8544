//! The scenario harness every end-to-end module shares: [`scenario`] runs a
//! body in a fresh lab of its own number (its own 127.n addresses) and cleans
//! up after it; [`ControlPlanePasses`] runs FedState's and Karmada's periodic
//! passes for as long as a scenario holds it; the pymongo majority writers
//! check that no acknowledged write is lost. Then what the checks share: the
//! instance request, the root credentials and driver clients, the replica-set
//! config as the primary has it, every cluster's `MongoDB` status and waits on
//! it.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use federation_sim::control_plane::{InstanceRequest, Split};
use k8s_openapi::api::core::v1::{Pod, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::api::ListParams;
use kube::{Api, ResourceExt};
use lab::lab::{sibling_binary, Lab, LabOptions};
use mongodb::bson::{doc, Document};
use mongodb::options::{ClientOptions, Credential, ServerAddress};
use mongodb_member_operator::api::{MongoDB, ReplicaSetSettings};

pub const READY_TIMEOUT: Duration = Duration::from_secs(240);

/// Under `cargo test` the scenarios of the one process run their labs one at
/// a time (each starts three or four clusters and as many operators); under
/// nextest each scenario is a process of its own and the `lab-scenarios` test
/// group caps how many labs run at once.
static ONE_LAB_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

async fn serial() -> tokio::sync::MutexGuard<'static, ()> {
    ONE_LAB_AT_A_TIME.lock().await
}

pub type Outcome = Result<(), String>;

pub fn fail<E: std::fmt::Display>(context: &str) -> impl Fn(E) -> String + '_ {
    move |error| format!("{context}: {error}")
}

/// The root user of the instance, from the Secret the operator derives from
/// FedState's `rootPassword` (in the first cluster that has one: a cluster whose
/// object was deleted lost it with the object).
pub async fn root_credentials(lab: &Lab, name: &str) -> Result<(String, String), String> {
    let mut found = None;
    for cluster in lab.clusters() {
        let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), "default");
        found = secrets
            .get_opt(&format!("{name}-credentials"))
            .await
            .map_err(fail("reading the credentials"))?;
        if found.is_some() {
            break;
        }
    }
    let secret = found.ok_or(format!("no cluster has {name}-credentials"))?;
    let data = secret.data.unwrap_or_default();
    let text = |key: &str| {
        data.get(key)
            .map(|v| String::from_utf8_lossy(&v.0).into_owned())
            .ok_or(format!("no {key}"))
    };
    Ok((text("username")?, text("password")?))
}

/// Writes the user's own fields of `MongoDB` `name` (`spec`, YAML indented
/// under `spec:`) in every cluster, as a user applies them with `field_manager`
/// before the control plane's first write. Through a file: a secret in the
/// fields never reaches a command line.
pub async fn apply_user_fields(lab: &Lab, name: &str, field_manager: &str, spec: &str) -> Outcome {
    let manifest = std::env::temp_dir().join(format!("mmo-{name}-{}.yaml", std::process::id()));
    std::fs::write(
        &manifest,
        format!(
            "apiVersion: middleware.fedstate.io/v1alpha1\nkind: MongoDB\nmetadata:\n  name: \
             {name}\n  namespace: default\nspec:\n{spec}"
        ),
    )
    .map_err(fail("manifest"))?;
    let manager = format!("--field-manager={field_manager}");
    for cluster in lab.clusters() {
        let applied = lab
            .kubectl(
                &cluster.name,
                &[
                    "apply",
                    "--server-side",
                    &manager,
                    "-f",
                    &manifest.display().to_string(),
                ],
            )
            .await;
        if let Err(error) = applied {
            let _ = std::fs::remove_file(&manifest);
            return Err(format!("the user's fields of {name}: {error}"));
        }
    }
    let _ = std::fs::remove_file(&manifest);
    Ok(())
}

/// The reasons of cluster `index`'s Events about instance `name`, oldest first.
pub async fn event_reasons_in(lab: &Lab, index: usize, name: &str) -> Result<Vec<String>, String> {
    let api: Api<Event> = Api::namespaced(lab.clusters()[index].client.clone(), "default");
    let mut events: Vec<Event> = api
        .list(&Default::default())
        .await
        .map_err(fail("Events"))?
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect();
    events.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
    Ok(events.into_iter().filter_map(|e| e.reason).collect())
}

/// Waits for FedState's own status to report instance `name`, as a FedState
/// user does before a change (its scale-down reads that status).
pub async fn settled(lab: &Lab, name: &str) -> Outcome {
    lab.control_plane()
        .settled("default", name, READY_TIMEOUT)
        .await
        .map_err(fail("FedState's status"))
}

/// A driver client for one member, asked directly without credentials: what
/// an arbiter, which holds no users, answers at all.
pub fn anonymous_direct(host: &str) -> Result<mongodb::Client, String> {
    let options = ClientOptions::builder()
        .hosts(vec![ServerAddress::parse(host).map_err(fail("host"))?])
        .direct_connection(true)
        .server_selection_timeout(Duration::from_secs(10))
        .build();
    mongodb::Client::with_options(options).map_err(fail("client"))
}

/// A driver client for one member (direct) or the whole set.
pub async fn mongo(
    lab: &Lab,
    name: &str,
    hosts: &[String],
    direct: bool,
) -> Result<mongodb::Client, String> {
    let (username, password) = root_credentials(lab, name).await?;
    let hosts = hosts
        .iter()
        .map(|h| ServerAddress::parse(h).map_err(fail("host")))
        .collect::<Result<Vec<_>, _>>()?;
    let options = ClientOptions::builder()
        .hosts(hosts)
        .direct_connection(direct)
        .repl_set_name(if direct {
            None
        } else {
            Some("replset-0".to_string())
        })
        .credential(
            Credential::builder()
                .username(username)
                .password(password)
                .source("admin".to_string())
                .build(),
        )
        .server_selection_timeout(Duration::from_secs(10))
        .build();
    mongodb::Client::with_options(options).map_err(fail("client"))
}

/// The replica-set config as the primary has it.
pub async fn config(lab: &Lab, name: &str, hosts: &[String]) -> Result<Document, String> {
    config_from(lab, name, hosts, false).await
}

/// The replica-set config as one member holds it, asked directly.
pub async fn config_on(lab: &Lab, name: &str, host: &str) -> Result<Document, String> {
    config_from(lab, name, &[host.to_string()], true).await
}

async fn config_from(
    lab: &Lab,
    name: &str,
    hosts: &[String],
    direct: bool,
) -> Result<Document, String> {
    let client = mongo(lab, name, hosts, direct).await?;
    let reply = client
        .database("admin")
        .run_command(doc! {"replSetGetConfig": 1})
        .await
        .map_err(fail("replSetGetConfig"))?;
    reply
        .get_document("config")
        .cloned()
        .map_err(fail("config"))
}

pub fn replica_set_id(config: &Document) -> Option<String> {
    config
        .get_document("settings")
        .ok()?
        .get_object_id("replicaSetId")
        .ok()
        .map(|id| id.to_hex())
}

pub fn version(config: &Document) -> i64 {
    config
        .get_i32("version")
        .map(i64::from)
        .or_else(|_| config.get_i64("version"))
        .unwrap_or(-1)
}

/// The member host (`VIP:nodePort`) of `<name>-mongodb-<index>` in `cluster`.
pub async fn member_host(
    lab: &Lab,
    cluster: usize,
    name: &str,
    index: u32,
) -> Result<String, String> {
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(lab.clusters()[cluster].client.clone(), "default");
    let service = services
        .get(&format!("{name}-mongodb-{index}"))
        .await
        .map_err(fail("member Service"))?;
    let port = service
        .spec
        .and_then(|s| s.ports)
        .and_then(|p| p.first().and_then(|p| p.node_port))
        .ok_or("no nodePort")?;
    Ok(format!("{}:{port}", lab.clusters()[cluster].vip))
}

/// Makes `host` the primary (replSetStepUp on it) and waits until it is.
pub async fn make_primary(lab: &Lab, name: &str, host: &str) -> Outcome {
    lab::observe::make_primary(lab, name, host)
        .await
        .map_err(|error| format!("{error:#}"))
}

/// Cluster `index`'s own object (its status as its operator wrote it).
async fn object_in(lab: &Lab, index: usize, name: &str) -> Result<MongoDB, String> {
    let api: Api<MongoDB> = Api::namespaced(lab.clusters()[index].client.clone(), "default");
    api.get(name).await.map_err(fail("MongoDB"))
}

/// Waits until cluster `index`'s object `name` satisfies `check` (the other
/// clusters' objects are not looked at: their operators may be gone).
pub async fn until_in(
    lab: &Lab,
    index: usize,
    name: &str,
    what: &str,
    check: impl Fn(&MongoDB) -> bool,
) -> Result<MongoDB, String> {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let current = object_in(lab, index, name).await?;
        if check(&current) {
            return Ok(current);
        }
        if Instant::now() > deadline {
            let conditions = current.status.map(|s| s.conditions).unwrap_or_default();
            return Err(format!(
                "cluster {index}: {what}: not after {READY_TIMEOUT:?}: {conditions:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Every host in `status.replset` of the first cluster's object.
pub async fn hosts_of(lab: &Lab, cluster: usize, name: &str) -> Result<Vec<String>, String> {
    let api: Api<MongoDB> = Api::namespaced(lab.clusters()[cluster].client.clone(), "default");
    let mongodb = api.get(name).await.map_err(fail("MongoDB"))?;
    Ok(mongodb
        .status
        .unwrap_or_default()
        .replset
        .into_iter()
        .map(|m| m.name)
        .collect())
}

/// Runs the pymongo majority writer until stopped; returns (acknowledged, found).
/// The Python with pymongo the writer runs on (`MMO_PYTHON`); `None` (the
/// writer skipped) when it is not set and the tools are not required.
pub fn writer_python() -> Result<Option<String>, String> {
    let Ok(python) = std::env::var("MMO_PYTHON") else {
        if std::env::var("MMO_REQUIRE_TOOLS").as_deref() == Ok("1") {
            return Err(
                "MMO_PYTHON is not set but MMO_REQUIRE_TOOLS=1 (run hack/test-tools.sh)".into(),
            );
        }
        eprintln!("SKIPPED the pymongo majority writer: set MMO_PYTHON (see hack/test-tools.sh)");
        return Ok(None);
    };
    Ok(Some(python))
}

pub struct MajorityWriter {
    child: tokio::process::Child,
    stop_file: PathBuf,
}

impl MajorityWriter {
    pub async fn start(
        lab: &Lab,
        name: &str,
        hosts: &[String],
    ) -> Result<Option<MajorityWriter>, String> {
        let Some(python) = writer_python()? else {
            return Ok(None);
        };
        let (username, password) = root_credentials(lab, name).await?;
        Self::start_as(name, hosts, &python, &username, &password, "")
    }

    /// A second writer, into a collection of its own, with more options in
    /// its connection string (`&tls=true…`).
    pub async fn start_with(
        lab: &Lab,
        name: &str,
        hosts: &[String],
        uri_options: &str,
    ) -> Result<Option<MajorityWriter>, String> {
        let Some(python) = writer_python()? else {
            return Ok(None);
        };
        let (username, password) = root_credentials(lab, name).await?;
        Self::start_as(name, hosts, &python, &username, &password, uri_options)
    }

    /// The writer, authenticated as `username`: a user of its own lets it
    /// write on while the root user's password changes.
    pub fn start_as(
        name: &str,
        hosts: &[String],
        python: &str,
        username: &str,
        password: &str,
        uri_options: &str,
    ) -> Result<Option<MajorityWriter>, String> {
        // FedState's generated password is base64 (`+`, `/`, `=`): escaped for the URI.
        let escape = |text: &str| -> String {
            text.bytes()
                .map(|b| match b {
                    b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                        (b as char).to_string()
                    }
                    _ => format!("%{b:02X}"),
                })
                .collect()
        };
        let uri = format!(
            "mongodb://{}:{}@{}/?replicaSet=replset-0&authSource=admin{uri_options}",
            escape(username),
            escape(password),
            hosts.join(",")
        );
        // A writer with options of its own writes apart from the plain one.
        let collection = if uri_options.is_empty() {
            "writes".to_string()
        } else {
            format!(
                "writes-{}",
                &mongodb_member_operator::build::sha256_hex(uri_options.as_bytes())[..8]
            )
        };
        let stop_file = std::env::temp_dir().join(format!(
            "mmo-writer-stop-{}-{}-{collection}",
            std::process::id(),
            name
        ));
        let _ = std::fs::remove_file(&stop_file);
        let child = tokio::process::Command::new(python)
            .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/majority_writer.py"))
            .env("MONGO_URI", uri)
            .env("STOP_FILE", &stop_file)
            .env("WRITES_COLLECTION", collection)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(fail("starting the pymongo writer"))?;
        Ok(Some(MajorityWriter { child, stop_file }))
    }

    /// Stops the writer and checks that every acknowledged write is present.
    pub async fn stop_and_check(self) -> Outcome {
        std::fs::write(&self.stop_file, b"stop").map_err(fail("stop file"))?;
        let output = tokio::time::timeout(Duration::from_secs(120), self.child.wait_with_output())
            .await
            .map_err(fail("writer did not stop"))?
            .map_err(fail("writer"))?;
        let stdout = String::from_utf8_lossy(&output.stdout);
        let acked: Vec<u64> = stdout
            .lines()
            .filter_map(|l| l.strip_prefix("ACK "))
            .filter_map(|n| n.parse().ok())
            .collect();
        let found = stdout.lines().find_map(|l| l.strip_prefix("FOUND"));
        none_lost(&acked, found, || {
            format!("{stdout} {}", String::from_utf8_lossy(&output.stderr))
        })
    }
}

/// Checks the writer's read-back (its `FOUND` line, once stopped) against the
/// writes it had acknowledged: at least ten, and none missing.
fn none_lost(acked: &[u64], found: Option<&str>, said: impl FnOnce() -> String) -> Outcome {
    let Some(found) = found else {
        return Err(format!("the writer did not read back: {}", said()));
    };
    let found: std::collections::BTreeSet<u64> = found
        .split_whitespace()
        .filter_map(|n| n.parse().ok())
        .collect();
    if acked.len() < 10 {
        return Err(format!(
            "only {} writes were acknowledged during the change: {}",
            acked.len(),
            said()
        ));
    }
    let lost: Vec<u64> = acked
        .iter()
        .copied()
        .filter(|n| !found.contains(n))
        .collect();
    if !lost.is_empty() {
        return Err(format!(
            "{} of {} majority-acknowledged writes were lost: {lost:?}",
            lost.len(),
            acked.len()
        ));
    }
    eprintln!(
        "{} majority writes acknowledged during the change, none lost",
        acked.len()
    );
    Ok(())
}

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs `body` in a fresh lab numbered `number` (the second octet of every
/// address it binds) with `clusters` clusters, then stops every process and
/// server the lab started. On failure the operators' last log lines are shown,
/// the lab's state directory is kept, and the test panics with the message.
pub async fn scenario(number: u8, clusters: usize, body: impl AsyncFnOnce(&mut Lab) -> Outcome) {
    let _serial = serial().await;
    let mut lab = lab(number, clusters).await;
    let outcome = body(&mut lab).await;
    finish(lab, outcome).await;
}

/// The control plane's periodic passes (FedState's, with Karmada's
/// propagation) over every cluster of a lab, until dropped: a scenario that
/// fails half-way stops them as surely as one that ends.
pub struct ControlPlanePasses(tokio::task::JoinHandle<()>);

impl ControlPlanePasses {
    /// Starts the passes for namespace `default`.
    pub fn start(lab: &Lab) -> ControlPlanePasses {
        ControlPlanePasses(tokio::spawn(
            lab.control_plane().run("default".into(), |_| {}),
        ))
    }
}

impl Drop for ControlPlanePasses {
    fn drop(&mut self) {
        self.0.abort();
    }
}

async fn lab(number: u8, clusters: usize) -> Lab {
    let state_dir = std::env::temp_dir().join(format!("mmo-lab-{number}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&state_dir);
    let options = LabOptions {
        number,
        clusters,
        state_dir,
        operator: sibling_binary("mongodb-member-operator")
            .expect("the operator binary is built with the workspace"),
        crds: repo().join("crds"),
        leader_election: true,
    };
    Lab::start(options).await.expect("the lab starts")
}

pub fn request(name: &str, split: &str) -> InstanceRequest {
    InstanceRequest {
        name: name.to_string(),
        namespace: "default".to_string(),
        split: Split::parse(split).unwrap(),
        image: "mongo:7.0".to_string(),
        settings: ReplicaSetSettings {
            election_timeout_millis: 2_000,
            heartbeat_interval_millis: 500,
            catch_up_timeout_millis: -1,
            chaining_allowed: true,
        },
    }
}

/// Shows each operator's log when a test fails, then shuts the lab down; its
/// state directory (logs, kubeconfig) is kept only when the test failed.
async fn finish(lab: Lab, outcome: Result<(), String>) {
    if let Err(message) = &outcome {
        for index in 0..lab.clusters().len() {
            let log = std::fs::read_to_string(lab.operator_log(index)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            eprintln!(
                "--- operator {} (last lines) ---\n{}",
                lab.clusters()[index].name,
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        eprintln!("{message}");
        eprintln!("the lab's logs stay in {}", lab.state_dir().display());
    }
    let state_dir = lab.state_dir().to_path_buf();
    lab.shutdown().await;
    if outcome.is_ok() {
        let _ = std::fs::remove_dir_all(state_dir);
    }
    if let Err(message) = outcome {
        panic!("{message}");
    }
}

/// Waits until every cluster reports instance `name` ready with `split`.
pub async fn ready(lab: &Lab, name: &str, split: &str) -> Outcome {
    let split = Split::parse(split).map_err(fail("split"))?;
    lab::observe::wait_ready(
        &lab.control_plane(),
        "default",
        name,
        &split,
        READY_TIMEOUT,
        |_| {},
    )
    .await
    .map(drop)
    .map_err(fail("ready"))
}

/// No term had two primaries in `samples`.
pub fn one_primary_per_term(samples: &[lab::observe::SetSample]) -> Outcome {
    let doubled: std::collections::BTreeMap<_, _> = lab::observe::primaries_by_term(samples)
        .into_iter()
        .filter(|(_, primaries)| primaries.len() > 1)
        .collect();
    if doubled.is_empty() {
        Ok(())
    } else {
        Err(format!("two primaries in one term: {doubled:?}"))
    }
}

/// Every cluster's `MongoDB` of `name`, as the operators report it.
pub async fn statuses(lab: &Lab, name: &str) -> Result<Vec<(String, MongoDB)>, String> {
    lab.control_plane()
        .statuses("default", name)
        .await
        .map_err(fail("statuses"))
}

/// Waits until `check` holds for every cluster's object (and at least `clusters` report).
pub async fn wait_for(
    lab: &Lab,
    name: &str,
    what: &str,
    clusters: usize,
    check: impl Fn(&MongoDB) -> bool,
) -> Outcome {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let current = statuses(lab, name).await?;
        if current.len() >= clusters && current.iter().all(|(_, m)| check(m)) {
            return Ok(());
        }
        if Instant::now() > deadline {
            let picture: Vec<String> = current
                .iter()
                .map(|(c, m)| {
                    format!(
                        "{c}: {:?}",
                        m.status.as_ref().map(|s| (&s.state, &s.replset))
                    )
                })
                .collect();
            return Err(format!("{what}: not after {READY_TIMEOUT:?}: {picture:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Whether a condition `type_` of `mongodb` has `reason`.
pub fn reason_is(mongodb: &MongoDB, type_: &str, reason: &str) -> bool {
    reason_saying(mongodb, type_, reason, "")
}

/// Whether a condition `type_` of `mongodb` has `reason` and a message
/// containing `text`.
pub fn reason_saying(mongodb: &MongoDB, type_: &str, reason: &str, text: &str) -> bool {
    mongodb.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.reason == reason && c.message.contains(text))
    })
}

/// The hosts of `config`'s members, sorted.
pub fn hosts_in(config: &mongodb::bson::Document) -> Vec<String> {
    let mut hosts: Vec<String> = config
        .get_array("members")
        .map(|members| {
            members
                .iter()
                .filter_map(|m| m.as_document()?.get_str("host").ok().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    hosts.sort();
    hosts
}

pub fn ready_condition(
    mongodb: &MongoDB,
) -> Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    mongodb
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Ready")
}

/// The majority writer, with the time each acknowledgement arrived (its
/// stdout is read as it comes; the writer flushes every line): how long the
/// set accepted no write can be measured.
pub struct TimedMajorityWriter {
    child: tokio::process::Child,
    stop_file: PathBuf,
    lines: std::sync::Arc<std::sync::Mutex<Vec<(Instant, String)>>>,
    reader: tokio::task::JoinHandle<()>,
}

impl TimedMajorityWriter {
    /// Starts the writer as [`MajorityWriter::start`] does (`None` when the
    /// tools are not there and not required).
    pub async fn start(
        lab: &Lab,
        name: &str,
        hosts: &[String],
    ) -> Result<Option<TimedMajorityWriter>, String> {
        let Some(MajorityWriter {
            mut child,
            stop_file,
        }) = MajorityWriter::start(lab, name, hosts).await?
        else {
            return Ok(None);
        };
        let stdout = child
            .stdout
            .take()
            .ok_or("the writer's stdout is not piped")?;
        let lines = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let reader = {
            let lines = lines.clone();
            tokio::spawn(async move {
                use tokio::io::AsyncBufReadExt;
                let mut stdout = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = stdout.next_line().await {
                    lines
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((Instant::now(), line));
                }
            })
        };
        Ok(Some(TimedMajorityWriter {
            child,
            stop_file,
            lines,
            reader,
        }))
    }

    /// Every acknowledged write so far: when its acknowledgement arrived, its number.
    pub fn acknowledged(&self) -> Vec<(Instant, u64)> {
        self.lines
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .filter_map(|(at, line)| Some((*at, line.strip_prefix("ACK ")?.parse().ok()?)))
            .collect()
    }

    /// Waits until `count` writes are acknowledged.
    pub async fn wait_acknowledged(&self, count: usize, timeout: Duration) -> Outcome {
        let deadline = Instant::now() + timeout;
        while self.acknowledged().len() < count {
            if Instant::now() > deadline {
                return Err(format!(
                    "the writer had {} writes acknowledged after {timeout:?}, expected {count}",
                    self.acknowledged().len()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Stops the writer and checks, as [`MajorityWriter::stop_and_check`]
    /// does, that every acknowledged write is present; returns the
    /// acknowledgements.
    pub async fn stop_and_check(self) -> Result<Vec<(Instant, u64)>, String> {
        std::fs::write(&self.stop_file, b"stop").map_err(fail("stop file"))?;
        let output = tokio::time::timeout(Duration::from_secs(120), self.child.wait_with_output())
            .await
            .map_err(fail("writer did not stop"))?
            .map_err(fail("writer"))?;
        tokio::time::timeout(Duration::from_secs(10), self.reader)
            .await
            .map_err(fail("the writer's output did not end"))?
            .map_err(fail("reading the writer's output"))?;
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let acked: Vec<(Instant, u64)> = lines
            .iter()
            .filter_map(|(at, line)| Some((*at, line.strip_prefix("ACK ")?.parse().ok()?)))
            .collect();
        let numbers: Vec<u64> = acked.iter().map(|(_, n)| *n).collect();
        let found = lines
            .iter()
            .find_map(|(_, line)| line.strip_prefix("FOUND"));
        none_lost(&numbers, found, || {
            format!(
                "{} {}",
                lines.last().map(|(_, l)| l.as_str()).unwrap_or_default(),
                String::from_utf8_lossy(&output.stderr)
            )
        })?;
        Ok(acked)
    }
}

/// Deletes the PVC and the pod of `<name>-mongodb-<index>` in `cluster`, as
/// when a disk is lost: the pod comes back on a new, empty volume.
pub async fn lose_volume(lab: &Lab, context: &str, name: &str, index: u32) -> Outcome {
    let claim = format!("data-{name}-mongodb-{index}-0");
    let pod = format!("{name}-mongodb-{index}-0");
    lab.kubectl(context, &["delete", "pvc", &claim, "--wait=false"])
        .await
        .map_err(fail("delete the PVC"))?;
    lab.kubectl(context, &["delete", "pod", &pod, "--wait=false"])
        .await
        .map_err(fail("delete the pod"))?;
    Ok(())
}

/// Loses the clusters at `indexes` as a disaster does: their nodes and their
/// network go (each member there cut off from every other site) and their
/// operators are killed, so nothing there answers or acts until healed.
pub async fn lose_clusters(lab: &mut Lab, indexes: &[usize]) -> Outcome {
    for &index in indexes {
        let cluster = &lab.clusters()[index];
        cluster.node.lose_cluster();
        lab.network().cut_site(&cluster.name);
    }
    for &index in indexes {
        let what = format!("kill the operator of {}", lab.clusters()[index].name);
        lab.kill_operator(index).await.map_err(fail(&what))?;
    }
    Ok(())
}

/// The revision of every local member, as each cluster's status reports it.
pub async fn member_revisions(lab: &Lab, name: &str) -> Result<Vec<Option<String>>, String> {
    Ok(statuses(lab, name)
        .await?
        .into_iter()
        .flat_map(|(_, m)| m.status.map(|s| s.local_members).unwrap_or_default())
        .map(|l| l.revision)
        .collect())
}

/// Waits until StatefulSet `stateful_set` of cluster `cluster` is gone, as a
/// member's removal ends.
pub async fn until_stateful_set_gone(lab: &Lab, cluster: usize, stateful_set: &str) -> Outcome {
    let api: Api<k8s_openapi::api::apps::v1::StatefulSet> =
        Api::namespaced(lab.clusters()[cluster].client.clone(), "default");
    let deadline = Instant::now() + Duration::from_secs(60);
    while api
        .get_opt(stateful_set)
        .await
        .map_err(fail("StatefulSet"))?
        .is_some()
    {
        if Instant::now() > deadline {
            return Err(format!(
                "StatefulSet {stateful_set} is not deleted after 60 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}

/// What a run of the plugin printed.
pub struct Plugin {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `kubectl-mongodb ARGS` with the lab's kubeconfig, as the SRE would.
pub async fn plugin(lab: &Lab, args: &[&str]) -> Result<Plugin, String> {
    let binary = sibling_binary("kubectl-mongodb").map_err(fail("the plugin"))?;
    let run = tokio::process::Command::new(binary)
        .args(args)
        .arg("--kubeconfig")
        .arg(lab.kubeconfig())
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(READY_TIMEOUT, run)
        .await
        .map_err(|_| format!("kubectl-mongodb {args:?}: not done after {READY_TIMEOUT:?}"))?
        .map_err(fail("running kubectl-mongodb"))?;
    let plugin = Plugin {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    };
    eprintln!(
        "$ kubectl mongodb {} ({})\n{}{}",
        args.join(" "),
        output.status,
        plugin.stdout,
        plugin.stderr
    );
    Ok(plugin)
}

/// The primary's view of the set, sampled through a driver client every
/// 200 ms (`replSetGetStatus`): the most members seen at once that are not
/// PRIMARY, SECONDARY or ARBITER, or whose `health` is below 1 (down, or
/// refused internal authentication).
pub struct UnhealthyWatcher {
    most: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl UnhealthyWatcher {
    /// Starts sampling through `client`.
    pub fn start(client: mongodb::Client) -> UnhealthyWatcher {
        let most = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let seen = most.clone();
        let task = tokio::spawn(async move {
            loop {
                let status = client
                    .database("admin")
                    .run_command(doc! {"replSetGetStatus": 1})
                    .await;
                if let Ok(status) = status {
                    let unhealthy = status
                        .get_array("members")
                        .map(|members| {
                            members
                                .iter()
                                .filter_map(|m| m.as_document())
                                .filter(|m| {
                                    !matches!(m.get_i32("state"), Ok(1 | 2 | 7))
                                        || m.get_f64("health").is_ok_and(|h| h < 1.0)
                                        || m.get_i32("health").is_ok_and(|h| h < 1)
                                })
                                .count()
                        })
                        .unwrap_or(0);
                    seen.fetch_max(unhealthy, std::sync::atomic::Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        });
        UnhealthyWatcher { most, task }
    }

    /// Stops sampling; the most members seen unhealthy at once.
    pub fn stop(self) -> usize {
        self.task.abort();
        self.most.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// Every member pod of instance `name` in every cluster: its uid and its
/// containers' restarts.
pub async fn member_pods(lab: &Lab, name: &str) -> Result<BTreeMap<String, (String, i32)>, String> {
    let selector = ListParams::default().labels(&format!("app.kubernetes.io/instance={name}"));
    let mut found = BTreeMap::new();
    for cluster in lab.clusters() {
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
        for pod in pods.list(&selector).await.map_err(fail("pods"))? {
            let restarts = pod
                .status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
                .map(|c| c.restart_count)
                .sum();
            found.insert(
                format!("{}/{}", cluster.name, pod.name_any()),
                (pod.uid().unwrap_or_default(), restarts),
            );
        }
    }
    Ok(found)
}
