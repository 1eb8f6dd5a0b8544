//! Secret scan: one representative scenario with every
//! kind of credential, then a search of everything observable for them.
//!
//! The scenario, on three clusters: FedState's sample
//! `MultiCloudMongoDB` (the exporter enabled) with a long random root
//! password; an application database user with a long random password; a
//! replica set of 1+1+1 formed; a template change that rolls every pod
//! (FedState's `spec.resource`); a scale-out to 2+1+1; and the `MongoDB`
//! deleted in cluster c with `kubectl`, its member leaving the set.
//!
//! FedState always sends `dbUserSpec: {}`, and `dbUserSpec.enable` is
//! immutable, so the database user cannot come through FedState or a later
//! OverridePolicy: a user's field manager sets `dbUserSpec` on each member
//! cluster's `MongoDB` before Karmada first applies it (Karmada applies
//! server-side and keeps fields another manager owns).
//!
//! The secrets: the root password, the keyfile the operator derives from it,
//! the `clusterAdmin` and `clusterMonitor` passwords it derives, and the
//! database user's password. None may appear — verbatim, in standard base64
//! at any byte alignment, or as any run of 23 or more of their characters —
//! in any operator log line, any Event, any object of any cluster other than
//! the Secrets' data and the `MongoDB` spec the user wrote (statuses,
//! metadata, pod and StatefulSet specs, ConfigMaps, …), or the command line
//! and environment of any process the test started (sampled every 250 ms,
//! the operators included). Every variable in a pod's environment must come
//! from a `secretKeyRef`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::harness::*;
use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use federation_sim::control_plane::{lab_replica_set_settings, LabOnly, Split, Submission};
use federation_sim::fedstate::MultiCloudMongoDB;
use k8s_openapi::api::apps::v1::StatefulSet;
use k8s_openapi::api::core::v1::{Pod, Secret};
use kube::api::ListParams;
use kube::Api;
use lab::lab::Lab;
use lab::observe;
use mongodb_member_operator::build::secrets::{ADMIN_USER, MONITOR_USER};
use mongodb_member_operator::build::{derive_keyfile, derive_user_password, REVISION_ANNOTATION};
use rand::distr::{Alphanumeric, SampleString};
use serde_json::Value;

const NAME: &str = "scan";
/// Length of a searched window, and the step between windows: any run of
/// `WINDOW + STEP - 1` characters of a secret contains a whole window.
const WINDOW: usize = 16;
const STEP: usize = 8;
/// How long a roll of every member may take.
const ROLL_TIMEOUT: Duration = Duration::from_secs(180);

fn phase(started: Instant, what: &str) {
    eprintln!("[{:>5.1} s] {what}", started.elapsed().as_secs_f64());
}

/// What is searched for: each secret and its standard base64 at the three
/// byte alignments it can have inside longer data (without the characters
/// that depend on the bytes around it), cut into overlapping windows.
struct Needles {
    windows: Vec<(String, String)>,
}

impl Needles {
    fn new(secrets: &[(&str, &str)]) -> Needles {
        let mut windows = Vec::new();
        for (label, secret) in secrets {
            let mut forms = vec![(label.to_string(), secret.to_string())];
            for offset in 0..3 {
                let mut bytes = vec![0u8; offset];
                bytes.extend_from_slice(secret.as_bytes());
                let encoded = STANDARD.encode(&bytes);
                let skip = if offset == 0 { 0 } else { 4 };
                let stable = &encoded[skip..encoded.len() - 4];
                forms.push((format!("{label} (base64, offset {offset})"), stable.into()));
            }
            forms.push((format!("{label} (base64)"), STANDARD.encode(secret)));
            for (form, text) in forms {
                let last = text.len().saturating_sub(WINDOW);
                let mut starts: Vec<usize> = (0..=last).step_by(STEP).collect();
                starts.push(last);
                for start in starts {
                    windows.push((form.clone(), text[start..start + WINDOW].to_string()));
                }
            }
        }
        windows.sort();
        windows.dedup();
        Needles { windows }
    }

    /// The forms of secrets found in `text`.
    fn found_in(&self, text: &str) -> Vec<String> {
        let mut found: Vec<String> = self
            .windows
            .iter()
            .filter(|(_, window)| text.contains(window.as_str()))
            .map(|(form, _)| form.clone())
            .collect();
        found.dedup();
        found
    }
}

/// What the scan went through, and what it found.
#[derive(Default)]
struct Scan {
    counts: BTreeMap<&'static str, usize>,
    leaks: Vec<String>,
}

impl Scan {
    fn check(&mut self, needles: &Needles, what: &str, text: &str) {
        for form in needles.found_in(text) {
            self.leaks.push(format!("{form} in {what}"));
        }
    }

    fn count(&mut self, what: &'static str, n: usize) {
        *self.counts.entry(what).or_default() += n;
    }
}

/// Every process descended from this test process, by pid: its command line
/// and environment as first seen (NUL-separated, as `/proc` has them).
type Processes = Arc<Mutex<BTreeMap<u32, (String, String)>>>;

fn descendants() -> Vec<u32> {
    let mut parents = BTreeMap::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let parent = stat
            .rfind(')')
            .and_then(|end| stat[end + 2..].split_whitespace().nth(1))
            .and_then(|ppid| ppid.parse::<u32>().ok());
        if let Some(parent) = parent {
            parents.insert(pid, parent);
        }
    }
    let me = std::process::id();
    parents
        .keys()
        .copied()
        .filter(|pid| {
            let mut current = *pid;
            for _ in 0..64 {
                match parents.get(&current) {
                    Some(&parent) if parent == me => return true,
                    Some(&parent) if parent > 1 => current = parent,
                    _ => return false,
                }
            }
            false
        })
        .collect()
}

fn sample_processes(processes: Processes) -> tokio::task::JoinHandle<()> {
    tokio::task::spawn_blocking(move || loop {
        for pid in descendants() {
            let read = |file: &str| {
                std::fs::read(format!("/proc/{pid}/{file}"))
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            };
            let mut seen = processes.lock().unwrap_or_else(|p| p.into_inner());
            if let std::collections::btree_map::Entry::Vacant(entry) = seen.entry(pid) {
                let cmdline = read("cmdline");
                if !cmdline.is_empty() {
                    entry.insert((cmdline, read("environ")));
                }
            }
        }
        if Arc::strong_count(&processes) == 1 {
            return;
        }
        std::thread::sleep(Duration::from_millis(250));
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_appears_in_logs_events_objects_or_process_arguments() {
    let started = Instant::now();
    let processes: Processes = Arc::default();
    let sampler = sample_processes(processes.clone());
    scenario(81, 3, async |lab| {
        let outcome = scenario_and_scan(lab, &processes, started).await;
        drop(processes);
        let _ = sampler.await;
        outcome
    })
    .await;
    phase(started, "done");
}

fn random(length: usize) -> String {
    Alphanumeric.sample_string(&mut rand::rng(), length)
}

/// FedState's sample over `members`, with the exporter, a supported image,
/// the lab's replica-set timeouts, and mongod requests of `cpu`.
fn sample(members: &[(&str, i32)], root_password: &str, cpu: &str) -> Submission {
    let mut object = MultiCloudMongoDB::sample(NAME, "default", members);
    object.spec.image_setting.image = "mongo:7.0".into();
    object.spec.export.enable = true;
    object.spec.auth.root_passwd = Some(root_password.to_string());
    object
        .spec
        .resource
        .requests
        .insert("cpu".into(), cpu.into());
    Submission {
        object,
        custom_config: None,
        lab: LabOnly {
            replica_set_settings: Some(lab_replica_set_settings()),
            tls: None,
            deviations: Default::default(),
        },
    }
}

async fn scenario_and_scan(lab: &Lab, processes: &Processes, started: Instant) -> Outcome {
    let root_password = random(48);
    let db_password = random(48);
    let keyfile = derive_keyfile(&root_password);
    let admin_password = derive_user_password(&root_password, ADMIN_USER);
    let monitor_password = derive_user_password(&root_password, MONITOR_USER);
    let needles = Needles::new(&[
        ("the root password", &root_password),
        ("the derived keyfile", &keyfile),
        ("the clusterAdmin password", &admin_password),
        ("the clusterMonitor password", &monitor_password),
        ("the database user's password", &db_password),
    ]);
    // The search finds what it must: a secret inside other text, its base64
    // at every alignment, a 23-character run of the keyfile.
    for (what, text) in [
        ("plain", format!("password={root_password};")),
        ("base64", STANDARD.encode(format!("x{db_password}"))),
        ("base64", STANDARD.encode(format!("xy{admin_password}"))),
        ("base64", STANDARD.encode(format!("xyz{monitor_password}"))),
        ("a run", format!("..{}..", &keyfile[300..323])),
    ] {
        if needles.found_in(&text).is_empty() {
            return Err(format!("the search misses a secret ({what}) in {text}"));
        }
    }
    if !needles.found_in(&random(4000)).is_empty() {
        return Err("the search finds a secret in random text".into());
    }
    let control_plane = lab.control_plane();

    // The database user, set by a user's field manager in every cluster
    // before Karmada's first write (the manifest is a file: no secret on a
    // command line).
    let fields = format!(
        "  rootPassword: {root_password}\n  dbUserSpec:\n    enable: true\n    name: shop\n    \
         user: shopper\n    password: {db_password}\n"
    );
    apply_user_fields(lab, NAME, "shop-db-user", &fields).await?;

    // Formed 1+1+1.
    let passes = ControlPlanePasses::start(lab);
    let split = Split::parse("a=1,b=1,c=1").map_err(fail("split"))?;
    control_plane
        .apply(&sample(
            &[("a", 1), ("b", 1), ("c", 1)],
            &root_password,
            "1",
        ))
        .await
        .map_err(fail("apply"))?;
    observe::wait_ready(
        &control_plane,
        "default",
        NAME,
        &split,
        READY_TIMEOUT,
        |_| {},
    )
    .await
    .map_err(fail("1+1+1"))?;
    phase(started, "1+1+1 ready");
    wait_users(lab, "shopper").await?;
    phase(
        started,
        "users clusterAdmin, clusterMonitor and shopper in place",
    );

    // A template change: FedState's resources, every pod rolled.
    let before = revisions(lab).await?;
    control_plane
        .apply(&sample(
            &[("a", 1), ("b", 1), ("c", 1)],
            &root_password,
            "1500m",
        ))
        .await
        .map_err(fail("new resources"))?;
    wait_rolled(lab, &before, &split).await?;
    phase(started, "every pod rolled to the new resources");

    // Scale-out to 2+1+1.
    control_plane
        .apply(
            &sample(&[("a", 2), ("b", 1), ("c", 1)], &root_password, "1500m")
                .keep_unchanged_clusters_on_scale_up(),
        )
        .await
        .map_err(fail("scale out"))?;
    // The set itself, not every cluster's status: a cluster whose objects did
    // not change refreshes its status at its next periodic pass (30 s).
    wait_set(lab, "4 healthy members", |members| {
        members.len() == 4 && members.iter().all(|(_, state)| healthy(state))
    })
    .await?;
    phase(started, "2+1+1: the set has 4 healthy members");
    let mut scan = Scan::default();
    scan_clusters(
        lab,
        &needles,
        &mut scan,
        "with 2+1+1",
        &root_password,
        &db_password,
    )
    .await?;
    phase(started, "every cluster scanned");

    // Deleted in cluster c (FedState and Karmada stopped first, or Karmada
    // would write it again).
    drop(passes);
    lab.kubectl("c", &["delete", "mongodb", NAME, "--wait=false"])
        .await
        .map_err(fail("kubectl delete"))?;
    let vip_c = format!("{}:", lab.clusters()[2].vip);
    wait_set(lab, "c's member gone", |members| {
        members.len() == 3
            && members.iter().all(|(_, state)| healthy(state))
            && !members.iter().any(|(host, _)| host.starts_with(&vip_c))
    })
    .await?;
    let deadline = Instant::now() + READY_TIMEOUT;
    while !lab
        .kubectl("c", &["get", "mongodb", "-o", "name"])
        .await
        .map_err(fail("get"))?
        .trim()
        .is_empty()
    {
        if Instant::now() > deadline {
            return Err("the MongoDB in c was never finalized".into());
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    phase(
        started,
        "deleted in c: its member left the set, the object is gone",
    );

    scan_clusters(
        lab,
        &needles,
        &mut scan,
        "at the end",
        &root_password,
        &db_password,
    )
    .await?;
    scan_processes(lab, &needles, &mut scan, processes)?;
    let counts: Vec<String> = scan
        .counts
        .iter()
        .map(|(what, n)| format!("{n} {what}"))
        .collect();
    phase(
        started,
        &format!(
            "scanned {} for {} windows of 5 secrets",
            counts.join(", "),
            needles.windows.len()
        ),
    );
    if scan.leaks.is_empty() {
        Ok(())
    } else {
        Err(format!("secrets leaked:\n{}", scan.leaks.join("\n")))
    }
}

fn healthy(state: &str) -> bool {
    matches!(state, "PRIMARY" | "SECONDARY")
}

/// Waits until the replica set's members (host, state), as its primary
/// reports them, satisfy `check`.
async fn wait_set(lab: &Lab, what: &str, check: impl Fn(&[(String, String)]) -> bool) -> Outcome {
    let hosts = hosts_of(lab, 0, NAME).await?;
    let client = mongo(lab, NAME, &hosts, false).await?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        let members: Vec<(String, String)> = match client
            .database("admin")
            .run_command(mongodb::bson::doc! {"replSetGetStatus": 1})
            .await
        {
            Ok(status) => status
                .get_array("members")
                .map(|members| {
                    members
                        .iter()
                        .filter_map(|m| m.as_document())
                        .map(|m| {
                            let text = |key| m.get_str(key).unwrap_or_default().to_string();
                            (text("name"), text("stateStr"))
                        })
                        .collect()
                })
                .unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        if check(&members) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("{what}: not after {READY_TIMEOUT:?}: {members:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Waits for the operator's Event saying the users are in place, the
/// database user among them.
async fn wait_users(lab: &Lab, user: &str) -> Outcome {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let events = lab
            .kubectl(
                "a",
                &[
                    "get",
                    "events",
                    "--field-selector",
                    "reason=UsersReady",
                    "-o",
                    "jsonpath={.items[*].message}",
                ],
            )
            .await
            .map_err(fail("events"))?;
        if events.contains(user) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!("no UsersReady Event names {user}: {events:?}"));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every member StatefulSet's template revision and its running pod's
/// revision, by cluster and StatefulSet name.
type Revisions = BTreeMap<(String, String), (Option<String>, Option<String>)>;

/// The [`Revisions`] now.
async fn revisions(lab: &Lab) -> Result<Revisions, String> {
    let mut found = BTreeMap::new();
    for cluster in lab.clusters() {
        let stateful_sets: Api<StatefulSet> = Api::namespaced(cluster.client.clone(), "default");
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), "default");
        let selector = format!("app.kubernetes.io/instance={NAME}");
        for stateful_set in stateful_sets
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(fail("StatefulSets"))?
        {
            let name = stateful_set.metadata.name.clone().unwrap_or_default();
            let template = stateful_set
                .spec
                .as_ref()
                .and_then(|s| s.template.metadata.as_ref())
                .and_then(|m| m.annotations.as_ref())
                .and_then(|a| a.get(REVISION_ANNOTATION).cloned());
            let pod = pods
                .get_opt(&format!("{name}-0"))
                .await
                .map_err(fail("pod"))?
                .filter(|p| p.metadata.deletion_timestamp.is_none())
                .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
                .and_then(|p| p.metadata.annotations?.get(REVISION_ANNOTATION).cloned());
            found.insert((cluster.name.clone(), name), (template, pod));
        }
    }
    Ok(found)
}

/// Waits until every member StatefulSet has a new template revision, every
/// pod runs it, and the set is ready again.
async fn wait_rolled(lab: &Lab, before: &Revisions, split: &Split) -> Outcome {
    let deadline = Instant::now() + ROLL_TIMEOUT;
    loop {
        let now = revisions(lab).await?;
        let rolled = !now.is_empty()
            && now.iter().all(|(key, (template, pod))| {
                template.is_some()
                    && template == pod
                    && before.get(key).is_none_or(|(old, _)| old != template)
            });
        if rolled {
            let views = observe::views(&lab.control_plane(), "default", NAME)
                .await
                .map_err(fail("views"))?;
            if observe::is_ready(&views, split) {
                return Ok(());
            }
        }
        if Instant::now() > deadline {
            return Err(format!(
                "not rolled after {ROLL_TIMEOUT:?}: before {before:?}, now {now:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The object without what holds secrets by design: a Secret's data, the
/// `MongoDB` spec the user wrote.
fn without_payload(mut object: Value) -> Value {
    if let Some(fields) = object.as_object_mut() {
        match fields.get("kind").and_then(Value::as_str) {
            Some("Secret") => {
                fields.remove("data");
                fields.remove("stringData");
            }
            Some("MongoDB") => {
                fields.remove("spec");
            }
            _ => {}
        }
    }
    object
}

/// Every environment variable of a pod comes from a Secret (`secretKeyRef`),
/// never a plain value: the member pods' variables are all credentials.
fn env_faults(pod: &Value, scan: &mut Scan) -> Vec<String> {
    let name = pod["metadata"]["name"].as_str().unwrap_or_default();
    let mut faults = Vec::new();
    for list in ["containers", "initContainers"] {
        for container in pod["spec"][list].as_array().into_iter().flatten() {
            for variable in container["env"].as_array().into_iter().flatten() {
                scan.count("pod env variables, each from a secretKeyRef", 1);
                if variable.get("value").is_some()
                    || variable["valueFrom"]["secretKeyRef"]["name"]
                        .as_str()
                        .is_none()
                {
                    faults.push(format!(
                        "pod {name} container {} sets {} without a secretKeyRef: {variable}",
                        container["name"], variable["name"]
                    ));
                }
            }
        }
    }
    faults
}

/// Scans every cluster's operator log, Events and objects (`moment` says
/// when, for the report).
async fn scan_clusters(
    lab: &Lab,
    needles: &Needles,
    scan: &mut Scan,
    moment: &str,
    root_password: &str,
    db_password: &str,
) -> Outcome {
    for (index, cluster) in lab.clusters().iter().enumerate() {
        let c = cluster.name.as_str();
        let log = std::fs::read_to_string(lab.operator_log(index)).map_err(fail("log"))?;
        scan.count("operator log lines", log.lines().count());
        for (number, line) in log.lines().enumerate() {
            for form in needles.found_in(line) {
                scan.leaks.push(format!(
                    "{form} in operator {c}'s log, line {} ({moment}): {line}",
                    number + 1
                ));
            }
        }

        let events: Value = serde_json::from_str(
            &lab.kubectl(c, &["get", "events", "-A", "-o", "json"])
                .await
                .map_err(fail("events"))?,
        )
        .map_err(fail("events JSON"))?;
        for event in events["items"].as_array().into_iter().flatten() {
            scan.count("Events", 1);
            scan.check(
                needles,
                &format!("Event {} in {c} ({moment})", event["metadata"]["name"]),
                &event.to_string(),
            );
        }

        for kind in [
            "mongodbs",
            "pods",
            "statefulsets",
            "controllerrevisions",
            "services",
            "endpoints",
            "configmaps",
            "persistentvolumeclaims",
            "poddisruptionbudgets",
            "secrets",
            "leases",
        ] {
            let list: Value = serde_json::from_str(
                &lab.kubectl(c, &["get", kind, "-A", "-o", "json"])
                    .await
                    .map_err(fail(kind))?,
            )
            .map_err(fail("list JSON"))?;
            for item in list["items"].as_array().into_iter().flatten() {
                scan.count("objects", 1);
                if kind == "mongodbs" {
                    // The scan looks for the right values: the spec holds
                    // what the user wrote.
                    let spec = item["spec"].to_string();
                    if !spec.contains(root_password) || !spec.contains(db_password) {
                        return Err(format!(
                            "the MongoDB in {c} lacks the root or database password: {spec}"
                        ));
                    }
                    scan.count("MongoDB statuses", 1);
                }
                if kind == "pods" {
                    scan.count("pod specs", 1);
                    let faults = env_faults(item, scan);
                    scan.leaks.extend(faults);
                }
                let what = format!(
                    "{kind}/{} in {c} ({moment})",
                    item["metadata"]["name"].as_str().unwrap_or_default()
                );
                scan.check(needles, &what, &without_payload(item.clone()).to_string());
            }
        }

        // The scenario had every Secret it should: the scan is not vacuous.
        let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), "default");
        let has_members = !lab
            .kubectl(c, &["get", "mongodb", "-o", "name"])
            .await
            .map_err(fail("get"))?
            .trim()
            .is_empty();
        if has_members {
            for secret in [
                format!("{NAME}-credentials"),
                format!("{NAME}-admin-credentials"),
                format!("{NAME}-monitor-credentials"),
                format!("{NAME}-dbuser"),
            ] {
                secrets
                    .get(&secret)
                    .await
                    .map_err(fail(&format!("Secret {secret} in {c}")))?;
            }
        }
    }

    Ok(())
}

/// Scans the command line and environment of every process seen.
fn scan_processes(lab: &Lab, needles: &Needles, scan: &mut Scan, processes: &Processes) -> Outcome {
    let processes = processes.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let operators: Vec<u32> = (0..lab.clusters().len())
        .filter_map(|i| lab.operator_pid(i))
        .collect();
    for pid in &operators {
        if !processes.contains_key(pid) {
            return Err(format!("the sampler never saw operator process {pid}"));
        }
    }
    let mut programs: BTreeMap<String, usize> = BTreeMap::new();
    for (pid, (cmdline, environ)) in &processes {
        scan.count("processes (command line and environment)", 1);
        let program = cmdline.split('\0').next().unwrap_or_default();
        let base = program.rsplit('/').next().unwrap_or(program).to_string();
        *programs.entry(base).or_default() += 1;
        scan.check(
            needles,
            &format!("the command line of {pid} ({program})"),
            cmdline,
        );
        scan.check(
            needles,
            &format!("the environment of {pid} ({program})"),
            environ,
        );
    }
    eprintln!("processes seen: {programs:?}");
    Ok(())
}
