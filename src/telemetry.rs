//! Operational endpoints: Prometheus metrics (`/metrics`), liveness (`/healthz`)
//! and readiness (`/readyz`), served on one small HTTP listener, plus logging setup.
//!
//! Metrics: reconcile runs, failures by bounded PascalCase reason, and a reconcile
//! duration histogram — the set kube-rs's reference controller exposes.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// Upper bounds (seconds) of the reconcile duration histogram buckets.
const DURATION_BUCKETS: [f64; 9] = [0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0];

/// Counters shared by the controller and the HTTP endpoints.
#[derive(Default)]
pub struct Metrics {
    reconciles: AtomicU64,
    failures: Mutex<BTreeMap<&'static str, u64>>,
    duration_buckets: [AtomicU64; DURATION_BUCKETS.len()],
    duration_count: AtomicU64,
    duration_sum_micros: AtomicU64,
    ready: AtomicBool,
}

impl Metrics {
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
        *self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(reason)
            .or_default() += 1;
    }

    /// Marks the operator ready (the CRD exists and the controller runs).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut out = String::new();
        out.push_str("# HELP mongodb_operator_reconciles_total Reconcile passes run.\n# TYPE mongodb_operator_reconciles_total counter\n");
        out.push_str(&format!(
            "mongodb_operator_reconciles_total {}\n",
            self.reconciles.load(Ordering::Relaxed)
        ));
        out.push_str("# HELP mongodb_operator_reconcile_failures_total Failed reconcile passes by reason.\n# TYPE mongodb_operator_reconcile_failures_total counter\n");
        for (reason, count) in self
            .failures
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            out.push_str(&format!(
                "mongodb_operator_reconcile_failures_total{{reason=\"{reason}\"}} {count}\n"
            ));
        }
        out.push_str("# HELP mongodb_operator_reconcile_duration_seconds Reconcile pass duration.\n# TYPE mongodb_operator_reconcile_duration_seconds histogram\n");
        for (bucket, bound) in self.duration_buckets.iter().zip(DURATION_BUCKETS) {
            out.push_str(&format!(
                "mongodb_operator_reconcile_duration_seconds_bucket{{le=\"{bound}\"}} {}\n",
                bucket.load(Ordering::Relaxed)
            ));
        }
        let count = self.duration_count.load(Ordering::Relaxed);
        out.push_str(&format!(
            "mongodb_operator_reconcile_duration_seconds_bucket{{le=\"+Inf\"}} {count}\n"
        ));
        out.push_str(&format!(
            "mongodb_operator_reconcile_duration_seconds_sum {}\n",
            self.duration_sum_micros.load(Ordering::Relaxed) as f64 / 1e6
        ));
        out.push_str(&format!(
            "mongodb_operator_reconcile_duration_seconds_count {count}\n"
        ));
        out
    }
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
    fn metrics_count_reconciles_failures_and_durations() {
        let metrics = Metrics::default();
        metrics.reconciled(Duration::from_millis(30));
        metrics.reconciled(Duration::from_secs(3));
        metrics.failed("MongoUnreachable");
        let text = metrics.render();
        assert!(text.contains("mongodb_operator_reconciles_total 2\n"));
        assert!(text.contains(
            "mongodb_operator_reconcile_failures_total{reason=\"MongoUnreachable\"} 1\n"
        ));
        assert!(
            text.contains("mongodb_operator_reconcile_duration_seconds_bucket{le=\"0.05\"} 1\n")
        );
        assert!(text.contains("mongodb_operator_reconcile_duration_seconds_bucket{le=\"5\"} 2\n"));
        assert!(text.contains("mongodb_operator_reconcile_duration_seconds_count 2\n"));
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
