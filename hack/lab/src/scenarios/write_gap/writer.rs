//! The pymongo w:"majority" writer of the end-to-end scenarios
//! (`tests/majority_writer.py`), run with its driver events on and as an
//! application's driver runs, with retryable writes (pymongo's default,
//! `WRITER_RETRY_WRITES`): every acknowledgement timed as it arrives, every
//! driver event on the bench's clock.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use tokio::io::AsyncBufReadExt;

/// The writer script, beside the scenarios that use it too.
const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/majority_writer.py");
/// How long the writer may take to stop and read every write back.
const STOP_TIMEOUT: Duration = Duration::from_secs(120);

/// A running writer.
pub(super) struct Writer {
    child: tokio::process::Child,
    stop_file: PathBuf,
    lines: Arc<Mutex<Vec<(Instant, String)>>>,
    reader: tokio::task::JoinHandle<()>,
}

/// What a stopped writer did.
pub(super) struct Written {
    /// Each acknowledged write: when its acknowledgement reached the bench, its number.
    pub acknowledged: Vec<(Instant, u64)>,
    /// The acknowledged numbers missing from the majority read-back.
    pub lost: Vec<u64>,
    /// The driver's events (`EVENT` lines without the time), on the bench's clock.
    pub events: Vec<(Instant, String)>,
}

impl Writer {
    /// Starts the writer on `hosts` as `username`, with its driver events on;
    /// its Python is `MMO_PYTHON` (`hack/test-tools.sh`).
    pub(super) fn start(hosts: &[String], username: &str, password: &str) -> Result<Writer> {
        let python = std::env::var("MMO_PYTHON")
            .context("MMO_PYTHON is not set: run `eval \"$(hack/test-tools.sh)\"` first")?;
        let uri = format!(
            "mongodb://{}:{}@{}/?replicaSet=replset-0&authSource=admin",
            escape(username),
            escape(password),
            hosts.join(",")
        );
        let stop_file =
            std::env::temp_dir().join(format!("lab-bench-writer-stop-{}", std::process::id()));
        let _ = std::fs::remove_file(&stop_file);
        let mut child = tokio::process::Command::new(python)
            .arg(SCRIPT)
            .env("MONGO_URI", uri)
            .env("STOP_FILE", &stop_file)
            .env("WRITER_EVENTS", "1")
            .env("WRITER_RETRY_WRITES", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("starting the pymongo writer")?;
        let stdout = child.stdout.take().context("the writer's stdout")?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let reader = {
            let lines = lines.clone();
            tokio::spawn(async move {
                let mut stdout = tokio::io::BufReader::new(stdout).lines();
                while let Ok(Some(line)) = stdout.next_line().await {
                    lines
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push((Instant::now(), line));
                }
            })
        };
        Ok(Writer {
            child,
            stop_file,
            lines,
            reader,
        })
    }

    /// Acknowledged writes so far.
    fn acknowledged(&self) -> usize {
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner());
        lines.iter().filter(|(_, l)| l.starts_with("ACK ")).count()
    }

    /// Waits until `count` writes are acknowledged.
    pub(super) async fn wait_acknowledged(&self, count: usize, timeout: Duration) -> Result<()> {
        let deadline = Instant::now() + timeout;
        while self.acknowledged() < count {
            if Instant::now() > deadline {
                bail!(
                    "the writer had {} writes acknowledged after {timeout:?}",
                    self.acknowledged()
                );
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Ok(())
    }

    /// Stops the writer and reads what it did.
    pub(super) async fn stop(self) -> Result<Written> {
        std::fs::write(&self.stop_file, b"stop").context("the writer's stop file")?;
        let output = tokio::time::timeout(STOP_TIMEOUT, self.child.wait_with_output())
            .await
            .context("the writer did not stop")??;
        tokio::time::timeout(Duration::from_secs(10), self.reader)
            .await
            .context("the writer's output did not end")??;
        let _ = std::fs::remove_file(&self.stop_file);
        let lines = self.lines.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let Some(found) = lines.iter().find_map(|(_, l)| l.strip_prefix("FOUND")) else {
            bail!(
                "the writer did not read its writes back: {}",
                String::from_utf8_lossy(&output.stderr)
            );
        };
        let found: BTreeSet<u64> = found
            .split_whitespace()
            .filter_map(|n| n.parse().ok())
            .collect();
        let acknowledged: Vec<(Instant, u64)> = lines
            .iter()
            .filter_map(|(at, l)| Some((*at, l.strip_prefix("ACK ")?.parse().ok()?)))
            .collect();
        let lost = acknowledged
            .iter()
            .map(|(_, n)| *n)
            .filter(|n| !found.contains(n))
            .collect();
        Ok(Written {
            acknowledged,
            lost,
            events: on_bench_clock(&lines),
        })
    }
}

/// The `EVENT <seconds> <what>` lines, each at the bench's instant for the
/// writer's `time.monotonic()`: the writer's clock is shifted by the least
/// (arrival − stamp) over every line: the quickest line is placed at its
/// arrival, and every event at most that line's delay early (both clocks are
/// `CLOCK_MONOTONIC`).
pub(super) fn on_bench_clock(lines: &[(Instant, String)]) -> Vec<(Instant, String)> {
    let stamped: Vec<(Instant, f64, &str)> = lines
        .iter()
        .filter_map(|(arrived, line)| {
            let (stamp, what) = line.strip_prefix("EVENT ")?.split_once(' ')?;
            Some((*arrived, stamp.parse().ok()?, what))
        })
        .collect();
    let Some(&(origin, _, _)) = stamped.first() else {
        return Vec::new();
    };
    let shift = stamped
        .iter()
        .map(|(arrived, stamp, _)| (*arrived - origin).as_secs_f64() - stamp)
        .fold(f64::INFINITY, f64::min);
    stamped
        .iter()
        .map(|(_, stamp, what)| {
            let offset = stamp + shift;
            let at = if offset >= 0.0 {
                origin + Duration::from_secs_f64(offset)
            } else {
                origin - Duration::from_secs_f64(-offset)
            };
            (at, what.to_string())
        })
        .collect()
}

/// Percent-escapes a user name or password for the URI (FedState's generated
/// password is base64: `+`, `/`, `=`).
fn escape(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_placed_by_the_quickest_line() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let lines = vec![
            (t0 + ms(5), "EVENT 100.000 a".to_string()),
            (t0 + ms(20), "ACK 1".to_string()),
            (t0 + ms(101), "EVENT 100.100 b x".to_string()),
        ];
        let events = on_bench_clock(&lines);
        let near = |at: Instant, expected: Instant| {
            at.max(expected) - at.min(expected) < Duration::from_micros(1)
        };
        // The second line took 4 ms less than the first to arrive: it is
        // placed at its arrival, the first 4 ms before its own.
        assert_eq!(events.len(), 2);
        assert!(near(events[0].0, t0 + ms(1)) && events[0].1 == "a");
        assert!(near(events[1].0, t0 + ms(101)) && events[1].1 == "b x");
    }

    #[test]
    fn passwords_are_escaped_for_the_uri() {
        assert_eq!(escape("a+b/c="), "a%2Bb%2Fc%3D");
    }
}
