//! The bad-input corpus (`tests/bad-input/`): every invalid
//! `MongoDB` a user or a control plane could write, each applied with the real
//! `kubectl` to one simulated cluster running the real operator binary.
//!
//! Each case file is a manifest (one or more YAML documents) whose leading
//! comments say what is expected:
//!
//! ```yaml
//! # What the case is.
//! # refused-by: api-server | operator
//! # update-of: _update-base.yaml     (optional: applied first, the case is an update of it)
//! # reason: HostconfInvalid           (operator cases: the condition and Event reason)
//! # expect: <text>                    (one or more: each appears verbatim)
//! ```
//!
//! - `api-server`: `kubectl apply` fails, and its stderr contains every
//!   `expect` text (kubectl prints the API server's 422 as the user sees it).
//! - `operator`: the API server admits it (it cannot tell: a ConfigMap's or a
//!   Secret's content, a label, a name's length); the operator then reports
//!   condition `Ready` False with `reason` and a message containing every
//!   `expect` text, and a Warning Event with that reason and message. Cases
//!   with `update-of` run in a second round, once the first round is
//!   reported: they change the Secret or hostconf under an object the
//!   operator already refused, and the operator must notice the change.
//!
//! Meanwhile the operator must not crash or restart: its process is the same
//! (pid and start time) at the end, and its log holds no panic.
//!
//! One lab (number 80, one cluster) for the whole corpus.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::harness::*;
use k8s_openapi::api::core::v1::Event;
use kube::api::ListParams;
use kube::Api;
use lab::lab::Lab;
use mongodb_member_operator::api::MongoDB;
use serde::Deserialize;

/// How long the operator may take to report every operator case.
const REPORT_TIMEOUT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RefusedBy {
    ApiServer,
    Operator,
}

/// One case of the corpus.
#[derive(Debug)]
struct Case {
    file: String,
    path: PathBuf,
    what: String,
    refused_by: RefusedBy,
    update_of: Option<PathBuf>,
    reason: Option<String>,
    expect: Vec<String>,
    /// The `MongoDB` the case applies.
    object: String,
}

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/bad-input")
}

/// Reads every case (files not starting with `_`), in name order.
fn read_corpus(dir: &Path) -> Result<Vec<Case>, String> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(fail("reading the corpus"))?
        .filter_map(|entry| entry.ok().map(|e| e.path()))
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .filter(|path| {
            !path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('_'))
        })
        .collect();
    files.sort();
    files.iter().map(|path| read_case(dir, path)).collect()
}

fn read_case(dir: &Path, path: &Path) -> Result<Case, String> {
    let file = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let text = std::fs::read_to_string(path).map_err(fail("reading a case"))?;
    let mut what = None;
    let mut fields: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines().map_while(|l| l.strip_prefix("# ")) {
        match line.split_once(": ") {
            Some((key, value))
                if ["refused-by", "update-of", "reason", "expect"].contains(&key) =>
            {
                fields
                    .entry(key.to_string())
                    .or_default()
                    .push(value.to_string())
            }
            _ if what.is_none() => what = Some(line.to_string()),
            _ => {}
        }
    }
    let one = |key: &str| fields.get(key).and_then(|v| v.first()).cloned();
    let refused_by = match one("refused-by").as_deref() {
        Some("api-server") => RefusedBy::ApiServer,
        Some("operator") => RefusedBy::Operator,
        other => return Err(format!("{file}: refused-by is {other:?}")),
    };
    let expect = fields.get("expect").cloned().unwrap_or_default();
    if expect.is_empty() {
        return Err(format!("{file}: no expect line"));
    }
    let reason = one("reason");
    if refused_by == RefusedBy::Operator && reason.is_none() {
        return Err(format!("{file}: an operator case needs a reason"));
    }
    let mut object = None;
    for document in serde_yaml::Deserializer::from_str(&text) {
        let value = serde_yaml::Value::deserialize(document).map_err(fail(&file))?;
        if value["kind"].as_str() == Some("MongoDB") {
            object = value["metadata"]["name"].as_str().map(str::to_string);
        }
    }
    Ok(Case {
        what: what.unwrap_or_default(),
        path: path.to_path_buf(),
        refused_by,
        update_of: one("update-of").map(|base| dir.join(base)),
        reason,
        expect,
        object: object.ok_or(format!("{file}: no MongoDB in it"))?,
        file,
    })
}

/// The operator's process: its pid and start time (`/proc/<pid>/stat` field
/// 22), and whether it still runs (not a zombie).
fn process(pid: u32) -> Option<(u32, u64, char)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    let state = fields.first()?.chars().next()?;
    let start_time = fields.get(19)?.parse().ok()?;
    Some((pid, start_time, state))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_bad_input_is_refused_with_a_message_saying_what_is_wrong() {
    let started = Instant::now();
    scenario(80, 1, async |lab| run_corpus(lab).await).await;
    eprintln!("bad input: {:.1} s", started.elapsed().as_secs_f64());
}

async fn run_corpus(lab: &Lab) -> Outcome {
    let cases = read_corpus(&corpus_dir())?;
    let pid = lab.operator_pid(0).ok_or("the operator does not run")?;
    let before = process(pid).ok_or("no /proc entry for the operator")?;
    let mut failures = Vec::new();
    let mut report = Vec::new();

    // The API server's refusals, with kubectl.
    let (api_cases, operator_cases): (Vec<&Case>, Vec<&Case>) = cases
        .iter()
        .partition(|c| c.refused_by == RefusedBy::ApiServer);
    for case in &api_cases {
        match apply(lab, case).await? {
            Ok(stdout) => failures.push(format!(
                "{}: kubectl apply was accepted: {}",
                case.file,
                stdout.trim()
            )),
            Err(stderr) => {
                let missing: Vec<&String> = case
                    .expect
                    .iter()
                    .filter(|e| !stderr.contains(*e))
                    .collect();
                if missing.is_empty() {
                    report.push(format!(
                        "{} ({})\n    kubectl: {}",
                        case.file, case.what, case.expect[0]
                    ));
                } else {
                    failures.push(format!(
                        "{}: kubectl's error lacks {missing:?}:\n{stderr}",
                        case.file
                    ));
                }
            }
        }
    }

    // The operator's, in two rounds: new objects, then changes to them (a
    // Secret or a hostconf that changes under an object already refused).
    let (first, second): (Vec<&Case>, Vec<&Case>) =
        operator_cases.iter().partition(|c| c.update_of.is_none());
    for round in [first, second] {
        for case in &round {
            if let Err(stderr) = apply(lab, case).await? {
                failures.push(format!(
                    "{}: the API server refused what only the operator can judge: {stderr}",
                    case.file
                ));
            }
        }
        let (reported, pending) = wait_reported(lab, &round).await?;
        report.extend(reported);
        failures.extend(pending);
    }

    // The operator went through all of it in one process, without a panic.
    let after = process(pid);
    if after.map(|(p, start, _)| (p, start)) != Some((before.0, before.1))
        || after.is_some_and(|(_, _, state)| matches!(state, 'Z' | 'X'))
    {
        failures.push(format!(
            "the operator process changed or died: before {before:?}, after {after:?}"
        ));
    }
    let log = std::fs::read_to_string(lab.operator_log(0)).map_err(fail("operator log"))?;
    let panics: Vec<&str> = log
        .lines()
        .filter(|l| l.to_lowercase().contains("panic"))
        .collect();
    if !panics.is_empty() {
        failures.push(format!("the operator log shows a panic: {panics:?}"));
    }
    let retried = log
        .lines()
        .filter(|l| l.contains("reconcile failed"))
        .count();

    for line in &report {
        eprintln!("{line}");
    }
    eprintln!(
        "{} cases: {} refused by the API server, {} by the operator; operator pid {pid} \
         unchanged, {} log lines, no panic, {retried} failed reconciles",
        cases.len(),
        api_cases.len(),
        operator_cases.len(),
        log.lines().count()
    );
    if failures.is_empty() {
        Ok(())
    } else {
        Err(failures.join("\n"))
    }
}

/// `kubectl apply` of the case (after its `update-of` base): `Ok(stdout)`
/// when admitted, `Err(stderr)` when refused. Only a base that does not
/// apply is an error of the test.
async fn apply(lab: &Lab, case: &Case) -> Result<Result<String, String>, String> {
    if let Some(base) = &case.update_of {
        lab.kubectl("a", &["apply", "-f", &base.display().to_string()])
            .await
            .map_err(fail(&format!("{}: applying its base", case.file)))?;
    }
    Ok(lab
        .kubectl("a", &["apply", "-f", &case.path.display().to_string()])
        .await
        .map_err(|error| format!("{error:#}")))
}

/// Waits until the operator reports every case: condition `Ready` False with
/// the case's reason and a message holding every expected text, and a Warning
/// Event with that reason and message. Returns what was reported and what
/// was not after [`REPORT_TIMEOUT`].
async fn wait_reported(lab: &Lab, cases: &[&Case]) -> Result<(Vec<String>, Vec<String>), String> {
    let client = lab.clusters()[0].client.clone();
    let mongodbs: Api<MongoDB> = Api::namespaced(client.clone(), "default");
    let events: Api<Event> = Api::namespaced(client, "default");
    let deadline = Instant::now() + REPORT_TIMEOUT;
    loop {
        let objects = mongodbs
            .list(&ListParams::default())
            .await
            .map_err(fail("listing MongoDBs"))?;
        let warnings = events
            .list(&ListParams::default().fields("type=Warning"))
            .await
            .map_err(fail("listing Events"))?;
        let mut reported = Vec::new();
        let mut pending = Vec::new();
        for case in cases {
            let reason = case.reason.as_deref().unwrap_or_default();
            let says = |message: &str| case.expect.iter().all(|e| message.contains(e.as_str()));
            let ready = objects
                .items
                .iter()
                .find(|m| m.metadata.name.as_deref() == Some(case.object.as_str()))
                .and_then(ready_condition);
            let condition = match ready {
                Some(c) if c.status == "False" && c.reason == reason && says(&c.message) => {
                    Ok(c.message.clone())
                }
                other => Err(format!(
                    "condition Ready {:?}",
                    other.map(|c| (&c.status, &c.reason, &c.message))
                )),
            };
            let event = warnings.items.iter().find(|e| {
                e.involved_object.name.as_deref() == Some(case.object.as_str())
                    && e.reason.as_deref() == Some(reason)
                    && says(e.message.as_deref().unwrap_or_default())
            });
            match (condition, event) {
                (Ok(message), Some(_)) => reported.push(format!(
                    "{} ({})\n    condition and Warning Event {reason}: {message}",
                    case.file, case.what
                )),
                (condition, event) => pending.push(format!(
                    "{}: expected {reason} saying {:?}; {}; Warning Event {}",
                    case.file,
                    case.expect,
                    condition
                        .err()
                        .unwrap_or_else(|| "condition as expected".into()),
                    if event.is_some() {
                        "as expected"
                    } else {
                        "missing"
                    }
                )),
            }
        }
        if pending.is_empty() || Instant::now() > deadline {
            return Ok((reported, pending));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}
