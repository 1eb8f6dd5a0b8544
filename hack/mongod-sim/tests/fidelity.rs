//! Fidelity against real third-party clients: runs the `mongod-sim` binary on its
//! own addresses and drives it with pymongo (fidelity/pymongo_*.py) and
//! mongosh (fidelity/mongosh_fidelity.js). Tools come from `MMO_PYTHON` and
//! `MMO_MONGOSH` (see hack/test-tools.sh); without them the tests skip, unless
//! `MMO_REQUIRE_TOOLS=1`, in which case they fail.

mod common;

use common::tool;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Kills the simulator (or a script) when the test ends, also on panic.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn scratch_dir(name: &str) -> ScratchDir {
    let dir = std::env::temp_dir().join(format!("mongod-sim-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    ScratchDir(dir)
}

/// A directory of a test's own, removed when the test ends.
struct ScratchDir(PathBuf);

impl std::ops::Deref for ScratchDir {
    type Target = PathBuf;
    fn deref(&self) -> &PathBuf {
        &self.0
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Starts the binary and waits for its ready line.
fn start_sim(hosts: &[String], extra: &[String]) -> KillOnDrop {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mongod-sim"));
    for h in hosts {
        cmd.args(["--member", h]);
    }
    cmd.args(["--repl-set", "rs0"])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit());
    let mut child = cmd.spawn().expect("spawn mongod-sim");
    let stdout = child.stdout.take().unwrap();
    let guard = KillOnDrop(child);
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line.starts_with("mongod-sim ready:") {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(30))
        .expect("mongod-sim did not print its ready line");
    guard
}

/// Runs a client script to completion (killing it after a deadline) and returns its output.
fn run_script(mut cmd: Command, expect: &str) {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = cmd.spawn().expect("spawn client");
    let mut guard = KillOnDrop(child);
    let start = Instant::now();
    loop {
        if guard.0.try_wait().unwrap().is_some() {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "client script timed out"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let child = std::mem::replace(&mut guard.0, Command::new("true").spawn().unwrap());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(expect),
        "client script failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("fidelity")
        .join(name)
}

#[test]
fn pymongo_initiates_reconfigures_steps_down_authenticates_and_sees_documented_codes() {
    let Some(python) = tool("MMO_PYTHON") else {
        return;
    };
    let hosts: Vec<String> = (1..=3).map(|i| format!("127.71.0.{i}:27017")).collect();
    let control = "127.71.0.100:18080".to_string();
    let dir = scratch_dir("pymongo");
    std::fs::write(dir.join("root-password"), "fidelity-pw\n").unwrap();
    std::fs::write(dir.join("keyfile"), "ZmlkZWxpdHlrZXlmaWxl\n").unwrap();
    let extra: Vec<String> = vec![
        "--root-user".into(),
        "root".into(),
        "--root-password-file".into(),
        dir.join("root-password").display().to_string(),
        "--keyfile".into(),
        dir.join("keyfile").display().to_string(),
        "--control".into(),
        control.clone(),
    ];
    let _sim = start_sim(&hosts, &extra);
    let mut cmd = Command::new(python);
    cmd.arg(script("pymongo_fidelity.py"))
        .env("MMO_HOSTS", hosts.join(","))
        .env("MMO_CONTROL", &control)
        .env("MMO_ROOT_USER", "root")
        .env("MMO_ROOT_PASSWORD", "fidelity-pw");
    run_script(cmd, "PYMONGO FIDELITY OK");
}

/// Runs a pymongo script against three members on 127.`range`.0.1–3 started
/// with `flags` and a control interface (`MMO_HOSTS`, `MMO_CONTROL`).
fn pymongo_with_control(range: u8, flags: &[&str], name: &str, expect: &str) {
    let Some(python) = tool("MMO_PYTHON") else {
        return;
    };
    let hosts: Vec<String> = (1..=3)
        .map(|i| format!("127.{range}.0.{i}:27017"))
        .collect();
    let control = format!("127.{range}.0.100:18080");
    let mut args: Vec<String> = flags.iter().map(|f| f.to_string()).collect();
    args.extend(["--control".to_string(), control.clone()]);
    let _sim = start_sim(&hosts, &args);
    let mut cmd = Command::new(python);
    cmd.arg(script(name))
        .env("MMO_HOSTS", hosts.join(","))
        .env("MMO_CONTROL", &control);
    run_script(cmd, expect);
}

#[test]
fn pymongo_sees_update_user_change_a_password_on_every_member() {
    let dir = scratch_dir("update-user");
    std::fs::write(dir.join("root-password"), "fidelity-pw\n").unwrap();
    std::fs::write(dir.join("keyfile"), "ZmlkZWxpdHlrZXlmaWxl\n").unwrap();
    let password_file = dir.join("root-password").display().to_string();
    let keyfile = dir.join("keyfile").display().to_string();
    pymongo_with_control(
        78,
        &[
            "--root-user",
            "root",
            "--root-password-file",
            &password_file,
            "--keyfile",
            &keyfile,
        ],
        "pymongo_update_user.py",
        "PYMONGO UPDATE USER OK",
    );
}

#[test]
fn pymongo_updates_deletes_feature_compatibility_version_and_server_versions() {
    pymongo_with_control(
        75,
        &["--server-version", "8.0.3"],
        "pymongo_writes_and_fcv.py",
        "PYMONGO WRITES AND FCV OK",
    );
}

#[test]
fn pymongo_retries_writes_once_each_also_on_a_new_primary() {
    pymongo_with_control(
        119,
        &[],
        "pymongo_retryable_writes.py",
        "PYMONGO RETRYABLE WRITES OK",
    );
}

#[test]
fn pymongo_sees_a_too_stale_member_recovering_until_its_data_is_wiped() {
    pymongo_with_control(
        115,
        &["--oplog-size-bytes", "500", "--initial-sync-ms", "3000"],
        "pymongo_too_stale.py",
        "PYMONGO TOO STALE OK",
    );
}

#[test]
fn pymongo_reads_the_oplog_size_and_sees_a_full_disk_kill_the_primary() {
    let Some(python) = tool("MMO_PYTHON") else {
        return;
    };
    let hosts: Vec<String> = (1..=3).map(|i| format!("127.117.0.{i}:27017")).collect();
    let control = "127.117.0.100:18080".to_string();
    let oplog_host = "127.117.1.1:27017".to_string();
    let _sim = start_sim(
        &hosts,
        &[
            "--disk-size".into(),
            "460Mi".into(),
            "--control".into(),
            control.clone(),
        ],
    );
    let _sized = start_sim(
        std::slice::from_ref(&oplog_host),
        &[
            "--oplog-size-bytes".into(),
            "1048576".into(),
            "--disk-size".into(),
            "1Gi".into(),
        ],
    );
    let mut cmd = Command::new(python);
    cmd.arg(script("pymongo_oplog_and_disk.py"))
        .env("MMO_HOSTS", hosts.join(","))
        .env("MMO_CONTROL", &control)
        .env("MMO_OPLOG_HOST", &oplog_host);
    run_script(cmd, "PYMONGO OPLOG AND DISK OK");
}

#[test]
fn pymongo_meets_the_write_concern_and_psa_reconfig_rules() {
    let Some(python) = tool("MMO_PYTHON") else {
        return;
    };
    let hosts: Vec<String> = (1..=5).map(|i| format!("127.111.0.{i}:27017")).collect();
    let _sim = start_sim(&hosts, &[]);
    let mut cmd = Command::new(python);
    cmd.arg(script("pymongo_write_concern_rules.py"))
        .env("MMO_HOSTS", hosts.join(","));
    run_script(cmd, "PYMONGO WRITE CONCERN RULES OK");
}

#[test]
fn pymongo_sees_what_releases_before_7_0_and_4_4_2_do_not_know() {
    let Some(python) = tool("MMO_PYTHON") else {
        return;
    };
    let hosts: Vec<String> = (1..=3).map(|i| format!("127.113.0.{i}:27017")).collect();
    let old_host = "127.113.1.1:27017".to_string();
    let version = |v: &str| ["--server-version".to_string(), v.to_string()];
    let _sim = start_sim(&hosts, &version("6.0.19"));
    let _old = start_sim(std::slice::from_ref(&old_host), &version("4.4.1"));
    let mut cmd = Command::new(python);
    cmd.arg(script("pymongo_old_versions.py"))
        .env("MMO_HOSTS", hosts.join(","))
        .env("MMO_OLD_HOST", &old_host);
    run_script(cmd, "PYMONGO OLD VERSIONS OK");
}

#[test]
fn mongosh_rs_helpers_initiate_status_add_reconfig_stepdown() {
    let Some(mongosh) = tool("MMO_MONGOSH") else {
        return;
    };
    let hosts: Vec<String> = (1..=3).map(|i| format!("127.72.0.{i}:27017")).collect();
    let _sim = start_sim(&hosts, &[]);
    let home = scratch_dir("mongosh-home");
    let mut cmd = Command::new(mongosh);
    cmd.arg(format!(
        "mongodb://{}/?directConnection=true&serverSelectionTimeoutMS=10000",
        hosts[0]
    ))
    .args(["--quiet", "--norc", "--file"])
    .arg(script("mongosh_fidelity.js"))
    .env("MMO_HOSTS", hosts.join(","))
    .env("HOME", &*home);
    run_script(cmd, "MONGOSH FIDELITY OK");
}

#[test]
fn pymongo_awaitable_hello_is_held_by_every_member_of_an_idle_set() {
    let Some(python) = tool("MMO_PYTHON") else {
        return;
    };
    let hosts: Vec<String> = (1..=5).map(|i| format!("127.74.0.{i}:27017")).collect();
    let _sim = start_sim(&hosts, &[]);
    let mut cmd = Command::new(python);
    cmd.arg(script("pymongo_awaitable_hello.py"))
        .env("MMO_HOSTS", hosts.join(","));
    run_script(cmd, "AWAITABLE HELLO FIDELITY OK");
}

#[test]
fn pymongo_sees_is_self_proven_only_through_a_route_that_reaches_the_member() {
    let Some(python) = tool("MMO_PYTHON") else {
        return;
    };
    let hosts = vec!["127.116.2.1:27017".to_string()];
    let control = "127.116.2.100:18080".to_string();
    let _sim = start_sim(&hosts, &["--control".into(), control.clone()]);
    let mut cmd = Command::new(python);
    cmd.arg(script("pymongo_is_self.py"))
        .env("MMO_HOSTS", hosts.join(","))
        .env("MMO_ALIAS", "127.116.3.1:30001")
        .env("MMO_CONTROL", &control);
    run_script(cmd, "IS SELF FIDELITY OK");
}

/// One HTTP request to the control interface; returns (status line, body).
fn http(control: &str, path: &str) -> (String, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(control).unwrap();
    s.write_all(
        format!("POST {path} HTTP/1.1\r\nHost: {control}\r\nContent-Length: 0\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap_or((&out, ""));
    (
        head.lines().next().unwrap_or_default().to_string(),
        body.to_string(),
    )
}

#[test]
fn binary_control_interface_stops_starts_cuts_and_dumps_state() {
    let hosts: Vec<String> = (1..=2).map(|i| format!("127.73.0.{i}:27017")).collect();
    let control = "127.73.0.100:18080";
    let _sim = start_sim(
        &hosts,
        &[
            "--control".into(),
            control.into(),
            "--lag-ms".into(),
            "5".into(),
        ],
    );
    let (status, body) = http(control, "/state");
    assert!(status.contains("200"), "{status}");
    let state: serde_json::Value = serde_json::from_str(&body).unwrap();
    assert_eq!(state["members"].as_array().unwrap().len(), 2);
    assert_eq!(state["faults"]["lagMs"][&hosts[0]], 5);

    assert_eq!(
        http(control, &format!("/stop/{}", hosts[1])).1.trim(),
        "stopped"
    );
    assert!(
        std::net::TcpStream::connect(&hosts[1]).is_err(),
        "stopped member still accepts connections"
    );
    assert_eq!(
        http(control, &format!("/start/{}", hosts[1])).1.trim(),
        "started"
    );
    std::net::TcpStream::connect(&hosts[1]).expect("restarted member accepts connections");
    assert_eq!(http(control, &format!("/cut/{}", hosts[0])).1.trim(), "cut");
    let state: serde_json::Value = serde_json::from_str(&http(control, "/state").1).unwrap();
    assert_eq!(state["faults"]["isolated"][0], hosts[0].as_str());
    assert_eq!(
        http(control, &format!("/heal/{}", hosts[0])).1.trim(),
        "healed"
    );
    let (status, _) = http(control, "/frobnicate");
    assert!(status.contains("400"), "{status}");
}

#[test]
fn pymongo_step_down_without_electable_secondary_refuses_writes_then_fails_with_262() {
    let Some(python) = tool("MMO_PYTHON") else {
        return;
    };
    let hosts: Vec<String> = (1..=3).map(|i| format!("127.112.1.{i}:27017")).collect();
    let _sim = start_sim(&hosts, &[]);
    let mut cmd = Command::new(python);
    cmd.arg(script("pymongo_step_down.py"))
        .env("MMO_HOSTS", hosts.join(","));
    run_script(cmd, "PYMONGO STEP DOWN OK");
}
