//! `lab demo`, the README's first command, as a newcomer runs it: without
//! the chart's renderer it says what to run and starts nothing; Ctrl-C stops
//! every process it started and ends it as a success.

use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::Command;

use crate::harness::*;

/// `lab demo` in `state_dir` on lab `number`, from the repository.
fn demo(state_dir: &Path, number: u8) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_lab"));
    command
        .arg("--state-dir")
        .arg(state_dir)
        .args(["--number", &number.to_string(), "demo"])
        .current_dir(repo())
        .stdin(Stdio::null())
        .kill_on_drop(true);
    command
}

fn fresh_state_dir(number: u8) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("mmo-demo-{number}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    dir
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_the_charts_renderer_the_demo_starts_no_operator_and_says_what_to_run() {
    let state_dir = fresh_state_dir(97);
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        demo(&state_dir, 97)
            .args(["--exit-when-ready", "--timeout", "10"])
            .env_remove("MMO_PYTHON")
            .env_remove("MMO_REQUIRE_TOOLS")
            .output(),
    )
    .await
    .expect("the demo ends")
    .expect("the demo runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    let started = ["a", "b", "c"]
        .iter()
        .filter(|c| state_dir.join(format!("operator-{c}.log")).exists())
        .count();
    let _ = std::fs::remove_dir_all(&state_dir);
    assert_eq!(
        started, 0,
        "the demo started {started} operators without their namespace and ServiceAccount"
    );
    assert!(!output.status.success(), "the demo succeeded: {stderr}");
    assert!(
        stderr.contains("MMO_PYTHON") && stderr.contains("hack/test-tools.sh"),
        "the error does not say what to run: {stderr}"
    );
}

/// The process ids whose parent is `parent`.
fn children(parent: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let after_name = stat.rsplit_once(')')?.1;
                    after_name.split_whitespace().nth(1)?.parse::<u32>().ok()
                })
                == Some(parent)
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_stops_every_process_of_the_demo_and_exits_0_with_one_line() {
    let state_dir = fresh_state_dir(98);
    let mut child = demo(&state_dir, 98)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .env("RUST_BACKTRACE", "1")
        .spawn()
        .expect("the demo starts");
    let pid = child.id().expect("the demo runs");
    let mut stdout = BufReader::new(child.stdout.take().expect("piped")).lines();
    let deadline = Instant::now() + READY_TIMEOUT;
    let mut seen = Vec::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout_at(deadline.into(), stdout.next_line()).await
    {
        let up = line.starts_with("lab up:");
        seen.push(line);
        if up {
            break;
        }
    }
    let operators = children(pid);
    assert_eq!(
        operators.len(),
        3,
        "the demo runs three operators once up: {seen:?}"
    );
    let status = Command::new("kill")
        .args(["-INT", &pid.to_string()])
        .status()
        .await
        .expect("kill runs");
    assert!(status.success());
    let mut after = Vec::new();
    while let Ok(Ok(Some(line))) =
        tokio::time::timeout(Duration::from_secs(30), stdout.next_line()).await
    {
        after.push(line);
    }
    let exit = tokio::time::timeout(Duration::from_secs(30), child.wait())
        .await
        .expect("the demo ends after Ctrl-C")
        .expect("the demo's status");
    let mut stderr = String::new();
    if let Some(mut err) = child.stderr.take() {
        use tokio::io::AsyncReadExt;
        let _ = err.read_to_string(&mut stderr).await;
    }
    let _ = std::fs::remove_dir_all(&state_dir);
    let left: Vec<u32> = operators
        .into_iter()
        .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
        .collect();
    assert!(
        left.is_empty(),
        "operators still running after Ctrl-C: {left:?}"
    );
    assert!(
        exit.success(),
        "Ctrl-C ended the demo with {exit}: {stderr}"
    );
    let said: Vec<&String> = after
        .iter()
        .filter(|l| l.starts_with("interrupted:"))
        .collect();
    assert_eq!(said.len(), 1, "Ctrl-C prints one line: {after:?}");
    assert_eq!(
        after.last(),
        said.first().copied(),
        "the line comes last: {after:?}"
    );
    assert!(
        !stderr.contains("Error"),
        "Ctrl-C ended as an error: {stderr}"
    );
}
