//! Operational endpoints: Prometheus metrics (`/metrics`), liveness (`/healthz`)
//! and readiness (`/readyz`), served on one small HTTP listener, plus logging setup.
//!
//! Every metric carries the cluster's identity (`cluster`, flag
//! `--cluster-name`), so that one Prometheus scraping several member clusters
//! (or a federation of them) can tell the operators apart:
//!
//! - reconcile passes, failures by bounded reason (the failed stage, or a
//!   step's refusal), and a pass duration histogram;
//! - steps carried out, by kind (`Initiate`, `AddMember`, `RemoveMember`,
//!   `PromoteMember`, `StepDown`, `DeleteStatefulSet`, the roll's
//!   `RestartingMember` and its other steps, the recovery's `ForcedReconfig`, …);
//! - per instance (`namespace/name`), from the status each pass computes:
//!   replica-set members by state, whether it has a primary, whether it is
//!   Ready and why not, and how many local pods run an outdated revision.
//!
//! `/healthz` fails when a reconcile pass has been running for longer than any
//! pass can (every call in it has a timeout): the controller is wedged.
//! `/readyz` succeeds once the controller's watches have synced, or while the
//! replica stands by for leadership.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use crate::api::MongoDBStatus;

/// Upper bounds (seconds) of the reconcile duration histogram buckets.
const DURATION_BUCKETS: [f64; 9] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0];
/// A pass running longer than this is wedged: each MongoDB call has a 15 s
/// timeout, API calls time out too, and a pass makes a bounded number of them.
pub const WEDGED_AFTER: Duration = Duration::from_secs(300);

/// What the metrics say about one instance, from the status a pass computed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InstanceGauges {
    /// Members of the whole set by `stateStr`.
    pub members_by_state: BTreeMap<String, u64>,
    /// Whether a primary is known.
    pub has_primary: bool,
    /// Whether condition Ready is True.
    pub ready: bool,
    /// The Ready condition's reason (what the operator does or waits for).
    pub reason: String,
    /// Local pods whose revision is not the StatefulSet's.
    pub outdated_pods: u64,
}

impl InstanceGauges {
    /// The gauges of `status`.
    pub fn of(status: &MongoDBStatus) -> Self {
        let mut members_by_state = BTreeMap::new();
        for member in &status.replset {
            *members_by_state
                .entry(member.state_str.clone())
                .or_default() += 1;
        }
        let ready = status.conditions.iter().find(|c| c.type_ == "Ready");
        let outdated_pods = status
            .local_members
            .iter()
            .filter(|m| m.revision.is_some() && m.revision != status.current_revision)
            .count() as u64;
        InstanceGauges {
            members_by_state,
            has_primary: status.primary.is_some(),
            ready: ready.is_some_and(|c| c.status == "True"),
            reason: ready.map(|c| c.reason.clone()).unwrap_or_default(),
            outdated_pods,
        }
    }
}

/// Counters and gauges shared by the controller and the HTTP endpoints.
pub struct Metrics {
    cluster: String,
    reconciles: AtomicU64,
    failures: Mutex<BTreeMap<&'static str, u64>>,
    steps: Mutex<BTreeMap<&'static str, u64>>,
    instances: Mutex<BTreeMap<String, InstanceGauges>>,
    duration_buckets: [AtomicU64; DURATION_BUCKETS.len()],
    duration_count: AtomicU64,
    duration_sum_micros: AtomicU64,
    in_flight: Mutex<BTreeMap<u64, Instant>>,
    next_pass: AtomicU64,
    ready: AtomicBool,
}

/// A pass in flight; dropping it ends it.
pub struct PassInFlight<'a> {
    metrics: &'a Metrics,
    id: u64,
}

impl Drop for PassInFlight<'_> {
    fn drop(&mut self) {
        lock(&self.metrics.in_flight).remove(&self.id);
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

impl Metrics {
    /// Metrics of the operator in cluster `cluster`.
    pub fn new(cluster: &str) -> Self {
        Metrics {
            cluster: cluster.to_string(),
            reconciles: AtomicU64::default(),
            failures: Mutex::default(),
            steps: Mutex::default(),
            instances: Mutex::default(),
            duration_buckets: Default::default(),
            duration_count: AtomicU64::default(),
            duration_sum_micros: AtomicU64::default(),
            in_flight: Mutex::default(),
            next_pass: AtomicU64::default(),
            ready: AtomicBool::default(),
        }
    }

    /// Marks a pass as running until the returned guard is dropped.
    pub fn pass_started(&self) -> PassInFlight<'_> {
        let id = self.next_pass.fetch_add(1, Ordering::Relaxed);
        lock(&self.in_flight).insert(id, Instant::now());
        PassInFlight { metrics: self, id }
    }

    /// Whether a pass has been running for longer than `limit`.
    pub fn wedged(&self, limit: Duration) -> bool {
        lock(&self.in_flight)
            .values()
            .any(|started| started.elapsed() > limit)
    }

    /// Records one finished reconcile and how long it took.
    pub fn reconciled(&self, took: Duration) {
        self.reconciles.fetch_add(1, Ordering::Relaxed);
        let seconds = took.as_secs_f64();
        for (bucket, bound) in self.duration_buckets.iter().zip(DURATION_BUCKETS) {
            if seconds <= bound {
                bucket.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.duration_count.fetch_add(1, Ordering::Relaxed);
        self.duration_sum_micros
            .fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Records a failed reconcile under its bounded reason.
    pub fn failed(&self, reason: &'static str) {
        *lock(&self.failures).entry(reason).or_default() += 1;
    }

    /// Records a step carried out, by its bounded kind.
    pub fn step_taken(&self, kind: &'static str) {
        *lock(&self.steps).entry(kind).or_default() += 1;
    }

    /// Records what a pass's status says about `instance`.
    pub fn observed(&self, instance: &str, gauges: InstanceGauges) {
        lock(&self.instances).insert(instance.to_string(), gauges);
    }

    /// Forgets `instance` (its object is gone from this cluster).
    pub fn forget(&self, instance: &str) {
        lock(&self.instances).remove(instance);
    }

    /// Marks the operator ready (watches synced, or standing by).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = Exposition::new(&self.cluster);
        let reconciles = "mongodb_operator_reconciles_total";
        out.family(reconciles, "counter", "Reconcile passes run.");
        out.sample(reconciles, &[], self.reconciles.load(Ordering::Relaxed));
        let failures = "mongodb_operator_reconcile_failures_total";
        out.family(
            failures,
            "counter",
            "Failed passes and failed steps, by reason.",
        );
        for (reason, count) in lock(&self.failures).iter() {
            out.sample(failures, &[("reason", reason)], count);
        }
        let steps = "mongodb_operator_steps_total";
        out.family(steps, "counter", "Steps carried out, by kind.");
        for (kind, count) in lock(&self.steps).iter() {
            out.sample(steps, &[("step", kind)], count);
        }
        let duration = "mongodb_operator_reconcile_duration_seconds";
        out.family(duration, "histogram", "Reconcile pass duration.");
        let bucket = format!("{duration}_bucket");
        for (count, bound) in self.duration_buckets.iter().zip(DURATION_BUCKETS) {
            let le = bound.to_string();
            out.sample(&bucket, &[("le", &le)], count.load(Ordering::Relaxed));
        }
        let count = self.duration_count.load(Ordering::Relaxed);
        out.sample(&bucket, &[("le", "+Inf")], count);
        let sum = self.duration_sum_micros.load(Ordering::Relaxed) as f64 / 1e6;
        out.sample(&format!("{duration}_sum"), &[], sum);
        out.sample(&format!("{duration}_count"), &[], count);

        let instances = lock(&self.instances);
        let members = "mongodb_operator_replica_set_members";
        out.family(
            members,
            "gauge",
            "Members of the whole replica set by state, as this cluster's operator last saw them.",
        );
        for (instance, g) in instances.iter() {
            for (state, n) in &g.members_by_state {
                out.sample(members, &[("instance", instance), ("state", state)], n);
            }
        }
        let primary = "mongodb_operator_replica_set_has_primary";
        out.family(primary, "gauge", "1 when the replica set has a primary.");
        for (instance, g) in instances.iter() {
            out.sample(primary, &[("instance", instance)], u8::from(g.has_primary));
        }
        let ready = "mongodb_operator_instance_ready";
        out.family(
            ready,
            "gauge",
            "1 when condition Ready is True; reason: what the operator does or waits for.",
        );
        for (instance, g) in instances.iter() {
            let labels = [("instance", instance.as_str()), ("reason", &g.reason)];
            out.sample(ready, &labels, u8::from(g.ready));
        }
        let outdated = "mongodb_operator_pods_outdated";
        out.family(
            outdated,
            "gauge",
            "Local member pods not yet on their StatefulSet's revision (the roll's progress).",
        );
        for (instance, g) in instances.iter() {
            out.sample(outdated, &[("instance", instance)], g.outdated_pods);
        }
        out.text
    }
}

/// The text exposition being written: every sample carries the cluster.
struct Exposition {
    cluster: String,
    text: String,
}

impl Exposition {
    fn new(cluster: &str) -> Self {
        Exposition {
            cluster: escape(cluster),
            text: String::new(),
        }
    }

    fn family(&mut self, name: &str, type_: &str, help: &str) {
        self.text
            .push_str(&format!("# HELP {name} {help}\n# TYPE {name} {type_}\n"));
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        let mut text = format!("{name}{{cluster=\"{}\"", self.cluster);
        for (key, label) in labels {
            text.push_str(&format!(",{key}=\"{}\"", escape(label)));
        }
        text.push_str(&format!("}} {value}\n"));
        self.text.push_str(&text);
    }
}

/// A label value with `\`, `"` and newlines escaped.
fn escape(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// Serves `/metrics`, `/healthz` and `/readyz` until the task is dropped.
pub async fn serve(address: SocketAddr, metrics: Arc<Metrics>) -> std::io::Result<()> {
    let listener = TcpListener::bind(address).await?;
    tracing::info!(%address, "serving /metrics, /healthz and /readyz");
    loop {
        let (mut stream, _) = listener.accept().await?;
        let metrics = metrics.clone();
        tokio::spawn(async move {
            let mut request = [0u8; 1024];
            let Ok(Ok(read)) =
                tokio::time::timeout(Duration::from_secs(5), stream.read(&mut request)).await
            else {
                return;
            };
            let path = request_path(&request[..read]);
            let (status, body) = match path {
                Some("/metrics") => ("200 OK", metrics.render()),
                Some("/healthz") if metrics.wedged(WEDGED_AFTER) => (
                    "503 Service Unavailable",
                    format!("a reconcile pass has run for more than {WEDGED_AFTER:?}\n"),
                ),
                Some("/healthz") => ("200 OK", "ok\n".to_string()),
                Some("/readyz") if metrics.ready.load(Ordering::Relaxed) => {
                    ("200 OK", "ok\n".to_string())
                }
                Some("/readyz") => ("503 Service Unavailable", "not ready\n".to_string()),
                _ => ("404 Not Found", "not found\n".to_string()),
            };
            let response = format!(
                "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(response.as_bytes()).await;
        });
    }
}

/// The path of an HTTP/1 request line (`GET /metrics HTTP/1.1`), without query.
fn request_path(request: &[u8]) -> Option<&str> {
    let line = std::str::from_utf8(request).ok()?.lines().next()?;
    let mut parts = line.split(' ');
    let _method = parts.next()?;
    parts
        .next()
        .map(|target| target.split('?').next().unwrap_or(target))
}

/// Log format of the operator.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global `tracing` subscriber (`RUST_LOG` filters, default `info`).
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_count_reconciles_failures_steps_and_durations_with_the_cluster() {
        let metrics = Metrics::new("member-1");
        metrics.reconciled(Duration::from_millis(30));
        metrics.reconciled(Duration::from_secs(3));
        metrics.failed("MongoUnreachable");
        metrics.step_taken("AddMember");
        metrics.step_taken("AddMember");
        let text = metrics.render();
        let has = |line: &str| assert!(text.contains(&format!("{line}\n")), "{line}\n{text}");
        has("mongodb_operator_reconciles_total{cluster=\"member-1\"} 2");
        has("mongodb_operator_reconcile_failures_total{cluster=\"member-1\",reason=\"MongoUnreachable\"} 1");
        has("mongodb_operator_steps_total{cluster=\"member-1\",step=\"AddMember\"} 2");
        has("mongodb_operator_reconcile_duration_seconds_bucket{cluster=\"member-1\",le=\"0.05\"} 1");
        has("mongodb_operator_reconcile_duration_seconds_bucket{cluster=\"member-1\",le=\"5\"} 2");
        has("mongodb_operator_reconcile_duration_seconds_count{cluster=\"member-1\"} 2");
    }

    #[test]
    fn instance_gauges_come_from_the_status_and_go_with_the_object() {
        use crate::api::{LocalMemberStatus, ReplSetMemberStatus};
        let member = |name: &str, state: &str| ReplSetMemberStatus {
            id: 0,
            name: name.to_string(),
            health: 1.0,
            state: 0,
            state_str: state.to_string(),
            sync_source_host: String::new(),
        };
        let local = |revision: &str| LocalMemberStatus {
            index: 0,
            stateful_set: "s".into(),
            pod: "p".into(),
            node_port: None,
            host: None,
            role: "SECONDARY".into(),
            lag_seconds: None,
            tls_mode: None,
            revision: Some(revision.to_string()),
        };
        let status = MongoDBStatus {
            replset: vec![
                member("a:1", "PRIMARY"),
                member("b:1", "SECONDARY"),
                member("c:1", "SECONDARY"),
                member("d:1", "(not reachable/healthy)"),
            ],
            current_revision: Some("new".into()),
            local_members: vec![local("new"), local("old")],
            ..MongoDBStatus::default()
        };
        let gauges = InstanceGauges::of(&status);
        assert_eq!(gauges.members_by_state.get("SECONDARY"), Some(&2));
        assert_eq!(gauges.outdated_pods, 1);
        assert!(!gauges.has_primary && !gauges.ready);
        let metrics = Metrics::new("a \"quoted\" name");
        metrics.observed("default/x", gauges);
        let text = metrics.render();
        assert!(text.contains("mongodb_operator_replica_set_members{cluster=\"a \\\"quoted\\\" name\",instance=\"default/x\",state=\"SECONDARY\"} 2\n"), "{text}");
        assert!(text.contains("mongodb_operator_pods_outdated{cluster=\"a \\\"quoted\\\" name\",instance=\"default/x\"} 1\n"));
        metrics.forget("default/x");
        assert!(!metrics.render().contains("default/x"));
    }

    #[test]
    fn a_pass_running_too_long_is_wedged_until_it_ends() {
        let metrics = Metrics::new("");
        let pass = metrics.pass_started();
        assert!(!metrics.wedged(Duration::from_secs(60)));
        assert!(metrics.wedged(Duration::ZERO));
        drop(pass);
        assert!(!metrics.wedged(Duration::ZERO));
    }

    #[test]
    fn request_path_ignores_method_and_query() {
        assert_eq!(
            request_path(b"GET /metrics?x=1 HTTP/1.1\r\nHost: a\r\n\r\n"),
            Some("/metrics")
        );
        assert_eq!(request_path(b"\xff\xfe"), None);
        assert_eq!(request_path(b""), None);
    }
}
