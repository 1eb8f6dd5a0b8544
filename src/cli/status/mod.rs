//! `kubectl mongodb status` (pure): one view of a replica set spread over
//! several clusters, from the `MongoDB` status each cluster's operator
//! reports.
//!
//! Each cluster's operator sees the whole set (`status.replset`) but reports
//! on its own members (`status.localMembers`, conditions). The member table
//! takes the set from the *reference* report — the highest config version,
//! then the latest `replicaSetObservedAt` — and each member's cluster and lag
//! from the cluster that hosts it. The cluster table gives each cluster's
//! state and what its operator does or waits for. Clusters that disagree are
//! said to: a lower config version (`behind`), or a report older than the
//! reference in which its own members are up while the reference sees them
//! down (`STALE?`: its operator is likely not running, or cannot reach its
//! members). Contexts that could not be read are listed, not left out.

use std::cmp::Reverse;
use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;

use super::{age, list};
use crate::api::{LocalMemberStatus, MongoDB, MongoDBStatus};
use crate::status::{condition, ConditionType};

/// What one kubeconfig context gave.
#[derive(Clone, Debug)]
pub struct ContextReport {
    /// The kubeconfig context (one per cluster).
    pub context: String,
    /// The namespace read there.
    pub namespace: String,
    /// The object, or why it could not be read.
    pub outcome: Result<MongoDB, Unread>,
}

/// Why a context gave no object.
#[derive(Clone, Debug, PartialEq)]
pub enum Unread {
    /// The context is not in the kubeconfig, or its entry is unusable.
    BadContext(String),
    /// The API server did not answer, or answered with an error.
    Unreachable(String),
    /// The API server has no such object.
    NotFound,
}

impl Unread {
    /// What the cluster table says instead of a state.
    fn label(&self) -> &'static str {
        match self {
            Unread::BadContext(_) => "BAD CONTEXT",
            Unread::Unreachable(_) => "UNREACHABLE",
            Unread::NotFound => "NOT FOUND",
        }
    }
}

impl ContextReport {
    fn status(&self) -> Option<&MongoDBStatus> {
        self.outcome.as_ref().ok()?.status.as_ref()
    }

    /// Why the context could not be read, in one line.
    fn unread(&self, name: &str) -> Option<String> {
        Some(match self.outcome.as_ref().err()? {
            Unread::BadContext(why) => format!("bad context: {why}"),
            Unread::Unreachable(why) => format!("unreachable: {why}"),
            Unread::NotFound => format!("no MongoDB {}/{name} there", self.namespace),
        })
    }
}

/// One line per context that could not be read: which context, and why.
pub fn errors(name: &str, reports: &[ContextReport]) -> Vec<String> {
    reports
        .iter()
        .filter_map(|r| Some(format!("context {}: {}", r.context, r.unread(name)?)))
        .collect()
}

/// The whole set as the reports tell it: the member table, the cluster
/// table, then what each cluster waits for, its recovery, and why a cluster
/// is unread or suspect. `now` dates the reports' ages.
pub fn render(name: &str, reports: &[ContextReport], now: Timestamp) -> String {
    let contexts: Vec<String> = reports.iter().map(|r| r.context.clone()).collect();
    let mut namespaces: Vec<&str> = reports.iter().map(|r| r.namespace.as_str()).collect();
    namespaces.sort_unstable();
    namespaces.dedup();
    let mut out = format!(
        "MongoDB {name} in namespace {}, contexts {}\n\n",
        namespaces.join(", "),
        list(&contexts)
    );
    let reference = reference(reports);
    let hosting = hosting(reports);
    match reference {
        Some(index) => out.push_str(&members(reports, index, &hosting, now)),
        None => out.push_str("no cluster reports the replica set's members yet\n"),
    }
    out.push('\n');
    let verdicts: Vec<Vec<String>> = reports
        .iter()
        .map(|r| verdicts(r, reference.map(|i| &reports[i]), now))
        .collect();
    out.push_str(&clusters(reports, &verdicts, now));
    out.push('\n');
    for (report, verdicts) in reports.iter().zip(&verdicts) {
        for line in details(name, report, now)
            .into_iter()
            .chain(verdicts.iter().cloned())
        {
            out.push_str(&format!("{}: {line}\n", report.context));
        }
    }
    out
}

/// The report the member table follows: the highest config version, then
/// the latest observation, then the first context.
fn reference(reports: &[ContextReport]) -> Option<usize> {
    reports
        .iter()
        .enumerate()
        .filter_map(|(index, r)| Some((index, r.status().filter(|s| !s.replset.is_empty())?)))
        .max_by_key(|(index, s)| {
            (
                s.config_version.unwrap_or(-1),
                s.replica_set_observed_at.as_ref().map(|t| t.0),
                Reverse(*index),
            )
        })
        .map(|(index, _)| index)
}

/// Every member host a cluster reports as its own, with that cluster.
fn hosting(reports: &[ContextReport]) -> BTreeMap<&str, (&str, &LocalMemberStatus)> {
    let mut hosting = BTreeMap::new();
    for report in reports {
        for member in report.status().map_or(&[][..], |s| &s.local_members) {
            if let Some(host) = &member.host {
                hosting
                    .entry(host.as_str())
                    .or_insert((report.context.as_str(), member));
            }
        }
    }
    hosting
}

fn members(
    reports: &[ContextReport],
    reference: usize,
    hosting: &BTreeMap<&str, (&str, &LocalMemberStatus)>,
    now: Timestamp,
) -> String {
    let source = &reports[reference];
    let status = source.status().expect("the reference has a status");
    let mut rows: Vec<Vec<String>> = status
        .replset
        .iter()
        .map(|m| {
            // "?": no cluster read reports it as its own.
            let (cluster, local) = match hosting.get(m.name.as_str()) {
                Some((cluster, local)) => (cluster.to_string(), Some(*local)),
                None => ("?".to_string(), None),
            };
            let up = m.health >= 1.0;
            let lag = local
                .and_then(|l| l.lag_seconds)
                .filter(|_| up)
                .map_or("-".to_string(), |s| format!("{s}s"));
            let primary = if m.state_str == "PRIMARY" { "*" } else { "" };
            vec![
                m.name.clone(),
                cluster,
                m.state_str.clone(),
                if up { "up" } else { "down" }.to_string(),
                lag,
                primary.to_string(),
            ]
        })
        .collect();
    // Members a cluster hosts that are not in the set (not added yet, or
    // refused): as their cluster reports them.
    for report in reports {
        for local in report.status().map_or(&[][..], |s| &s.local_members) {
            let in_set = local
                .host
                .as_ref()
                .is_some_and(|h| status.replset.iter().any(|m| &m.name == h));
            if !in_set {
                let host = local
                    .host
                    .clone()
                    .unwrap_or_else(|| format!("{} (no host yet)", local.pod));
                let row = [&host, &report.context, &local.role, "-", "-", ""];
                rows.push(row.iter().map(ToString::to_string).collect());
            }
        }
    }
    // By cluster, members of no cluster read ("?") last.
    rows.sort_by(|x, y| (x[1] == "?", &x[1], &x[0]).cmp(&(y[1] == "?", &y[1], &y[0])));
    let mut out = table(
        &["MEMBER", "CLUSTER", "STATE", "HEALTH", "LAG", "PRIMARY"],
        rows,
    );
    let observed = status
        .replica_set_observed_at
        .as_ref()
        .map_or(String::new(), |t| {
            format!(", observed {} ago", age(t.0, now))
        });
    let version = status
        .config_version
        .map_or("?".to_string(), |v| v.to_string());
    let primaries: Vec<String> = status
        .replset
        .iter()
        .filter(|m| m.state_str == "PRIMARY")
        .map(|m| match hosting.get(m.name.as_str()) {
            Some((cluster, _)) => format!("{} in {cluster}", m.name),
            None => m.name.clone(),
        })
        .collect();
    let primary = match primaries.len() {
        0 => "no primary".to_string(),
        1 => format!("primary {}", primaries[0]),
        n => format!("{n} members are PRIMARY: {}", primaries.join(", ")),
    };
    out.push_str(&format!(
        "(as {} reports the set: config version {version}{observed}; {primary})\n",
        source.context
    ));
    let versions: Vec<(String, i64)> = reports
        .iter()
        .filter_map(|r| Some((r.context.clone(), r.status()?.config_version?)))
        .collect();
    if versions
        .iter()
        .any(|(_, v)| Some(*v) != status.config_version)
    {
        let each: Vec<String> = versions.iter().map(|(c, v)| format!("{c} {v}")).collect();
        out.push_str(&format!(
            "config versions disagree: {}; the members above are as {} reports them (the highest)\n",
            each.join(", "),
            source.context
        ));
    }
    out
}

fn clusters(reports: &[ContextReport], verdicts: &[Vec<String>], now: Timestamp) -> String {
    let rows = reports
        .iter()
        .zip(verdicts)
        .map(|(report, verdicts)| {
            let mut notes: Vec<&str> = verdicts
                .iter()
                .map(|v| v.split(':').next().unwrap_or_default())
                .collect();
            let status = match &report.outcome {
                Err(unread) => {
                    let mut row = vec![report.context.clone(), unread.label().to_string()];
                    row.extend(std::iter::repeat_n("-".to_string(), 9));
                    return row;
                }
                Ok(mongodb) => match &mongodb.status {
                    Some(status) => status,
                    None => {
                        let mut row = vec![report.context.clone(), "-".to_string()];
                        row.extend(std::iter::repeat_n("-".to_string(), 8));
                        row.push("no status yet: its operator has not reported".to_string());
                        return row;
                    }
                },
            };
            let some = |value: Option<String>| value.unwrap_or_else(|| "-".to_string());
            let reason_if = |type_: ConditionType, bad: &str, good: &str| {
                condition(Some(status), type_).map_or("-".to_string(), |c| {
                    if c.status == bad {
                        c.reason.clone()
                    } else {
                        good.to_string()
                    }
                })
            };
            if status.recovery.is_some() {
                notes.push("recovery below");
            }
            vec![
                report.context.clone(),
                some(status.state.map(|s| format!("{s:?}"))),
                some(status.ready_members.clone()),
                some(status.config_version.map(|v| v.to_string())),
                some(
                    status
                        .replica_set_observed_at
                        .as_ref()
                        .map(|t| age(t.0, now)),
                ),
                reason_if(ConditionType::Ready, "False", "True"),
                reason_if(ConditionType::Degraded, "True", "-"),
                some(status.restart_state.clone()),
                some(status.current_revision.as_ref().map(|r| short(r))),
                some(
                    status
                        .recovery
                        .as_ref()
                        .map(|r| <&str>::from(r.phase).to_string()),
                ),
                notes.join(", "),
            ]
        })
        .collect();
    table(
        &[
            "CLUSTER", "STATE", "MEMBERS", "CONFIG", "OBSERVED", "READY", "DEGRADED", "RESTART",
            "REVISION", "RECOVERY", "NOTE",
        ],
        rows,
    )
}

/// A revision hash, shortened for the table.
fn short(revision: &str) -> String {
    revision.chars().take(10).collect()
}

/// The conditions that say what a cluster's operator does or waits for,
/// grouped by reason; its recovery; or why it could not be read.
fn details(name: &str, report: &ContextReport, now: Timestamp) -> Vec<String> {
    if let Some(why) = report.unread(name) {
        return vec![why];
    }
    let Some(status) = report.status() else {
        return Vec::new();
    };
    // (type, the status that needs attention).
    const WATCHED: [(ConditionType, &str); 8] = [
        (ConditionType::Ready, "False"),
        (ConditionType::Degraded, "True"),
        (ConditionType::MembersInSync, "False"),
        (ConditionType::Progressing, "True"),
        (ConditionType::ReplicaSetObserved, "False"),
        (ConditionType::UpToDate, "False"),
        (ConditionType::SettingsMatch, "False"),
        (ConditionType::ObjectsApplied, "False"),
    ];
    let mut groups: Vec<(String, Vec<String>, String)> = Vec::new();
    for (type_, bad) in WATCHED {
        let Some(c) = condition(Some(status), type_).filter(|c| c.status == bad) else {
            continue;
        };
        let flagged = format!("{}={}", c.type_, c.status);
        match groups.iter_mut().find(|(reason, _, _)| *reason == c.reason) {
            Some((_, types, _)) => types.push(flagged),
            None => groups.push((c.reason.clone(), vec![flagged], c.message.clone())),
        }
    }
    let mut lines: Vec<String> = groups
        .into_iter()
        .map(|(reason, types, message)| format!("{} {reason}: {message}", types.join(" ")))
        .collect();
    if let Some(r) = &status.recovery {
        lines.push(format!(
            "recovery \"{}\" {:?} ({} ago): keeping {}; dropping {}",
            r.request,
            r.phase,
            age(r.since.0, now),
            list(&r.keeping),
            list(&r.dropping),
        ));
    }
    lines
}

/// Why a readable cluster's report is suspect, against the reference report:
/// `behind: …` and `STALE?: …`, each one line.
fn verdicts(
    report: &ContextReport,
    reference: Option<&ContextReport>,
    now: Timestamp,
) -> Vec<String> {
    let (Some(status), Some(reference)) = (report.status(), reference) else {
        return Vec::new();
    };
    let Some(theirs) = reference.status() else {
        return Vec::new();
    };
    if reference.context == report.context {
        return Vec::new();
    }
    let mut verdicts = Vec::new();
    if let (Some(mine), Some(newest)) = (status.config_version, theirs.config_version) {
        if mine < newest {
            verdicts.push(format!(
                "behind: reports config version {mine}, {} reports {newest}",
                reference.context
            ));
        }
    }
    let observed = |s: &MongoDBStatus| s.replica_set_observed_at.as_ref().map(|t| t.0);
    if observed(status) >= observed(theirs) {
        return verdicts;
    }
    let up = |s: &MongoDBStatus, host: &str| {
        s.replset
            .iter()
            .find(|m| m.name == host)
            .map(|m| m.health >= 1.0)
    };
    let contradicted: Vec<String> = status
        .local_members
        .iter()
        .filter_map(|m| m.host.clone())
        .filter(|host| up(status, host) == Some(true) && up(theirs, host) == Some(false))
        .collect();
    if !contradicted.is_empty() {
        let when = |s: &MongoDBStatus| observed(s).map_or("?".to_string(), |t| age(t, now));
        verdicts.push(format!(
            "STALE?: {} sees its members {} down ({} ago), which {} last saw up ({} ago): is its \
             operator running, and can it reach its members?",
            reference.context,
            contradicted.join(", "),
            when(theirs),
            report.context,
            when(status),
        ));
    }
    verdicts
}

/// Rows under a header, each column as wide as its widest cell.
fn table(header: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let header: Vec<String> = header.iter().map(ToString::to_string).collect();
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:width$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
