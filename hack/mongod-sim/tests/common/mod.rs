//! Shared helpers for the mongod-sim integration tests: start a set of members on
//! a test's own 127.N.0.* addresses, initiate it with short timeouts, poll for
//! conditions with generous deadlines, and extract error codes from driver errors.
#![allow(dead_code)]

use bson::{doc, Document};
use mongod_sim::{MemberSpec, MemberState, Network, Volume};
use mongodb::error::{Error, ErrorKind, WriteFailure};
use mongodb::Client;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub const ELECTION_TIMEOUT_MS: u64 = 1000;
pub const HEARTBEAT_MS: u64 = 200;
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Members of one test, stopped when dropped.
pub struct Set {
    pub net: Arc<Network>,
    pub hosts: Vec<String>,
    pub specs: Vec<MemberSpec>,
    pub volumes: Vec<Volume>,
}

impl Drop for Set {
    fn drop(&mut self) {
        self.net.stop_all();
    }
}

impl Set {
    /// Starts `n` members on 127.`range`.0.1..n:27017.
    pub async fn start(range: u8, n: usize, configure: impl Fn(&mut MemberSpec)) -> Set {
        Set::start_at(&format!("127.{range}.0"), n, configure).await
    }

    /// Starts `n` members on `prefix`.1..n:27017 (`prefix` the first three octets).
    pub async fn start_at(prefix: &str, n: usize, configure: impl Fn(&mut MemberSpec)) -> Set {
        Set::start_from(prefix, 1, n, configure).await
    }

    /// Starts `n` members on `prefix`.`first`..`first`+n-1:27017.
    pub async fn start_from(
        prefix: &str,
        first: usize,
        n: usize,
        configure: impl Fn(&mut MemberSpec),
    ) -> Set {
        let net = Network::new();
        let mut set = Set {
            net,
            hosts: Vec::new(),
            specs: Vec::new(),
            volumes: Vec::new(),
        };
        for i in first..first + n {
            let host = format!("{prefix}.{i}:27017");
            let mut spec = MemberSpec::new(host.parse().unwrap(), "rs0");
            configure(&mut spec);
            let volume = Volume::new();
            set.net
                .start_member(spec.clone(), volume.clone())
                .await
                .expect("start member");
            set.hosts.push(host);
            set.specs.push(spec);
            set.volumes.push(volume);
        }
        set
    }

    /// How many `command`s `host` received from clients named `app`.
    pub fn commands_received(&self, host: &str, app: &str, command: &str) -> u64 {
        self.net
            .command_counts()
            .iter()
            .filter(|(key, _)| {
                key.member == host && key.app.as_deref() == Some(app) && key.command == command
            })
            .map(|(_, n)| *n)
            .sum()
    }

    pub fn config(&self, hosts: &[String]) -> Document {
        let members: Vec<Document> = hosts
            .iter()
            .enumerate()
            .map(|(i, h)| doc! {"_id": i as i32, "host": h})
            .collect();
        doc! {
            "_id": "rs0", "version": 1, "members": members,
            "settings": { "electionTimeoutMillis": ELECTION_TIMEOUT_MS as i64, "heartbeatIntervalMillis": HEARTBEAT_MS as i64 },
        }
    }

    pub async fn direct(&self, host: &str, extra: &str) -> Client {
        Client::with_uri_str(format!(
            "mongodb://{host}/?directConnection=true&serverSelectionTimeoutMS=10000{extra}"
        ))
        .await
        .unwrap()
    }

    /// The `replSetGetStatus` entry for `host` as `primary` has it (`extra`:
    /// the URI options to reach `primary`).
    pub async fn status_entry(&self, primary: &str, extra: &str, host: &str) -> Option<Document> {
        let status = self
            .direct(primary, extra)
            .await
            .database("admin")
            .run_command(doc! {"replSetGetStatus": 1})
            .await
            .ok()?;
        status
            .get_array("members")
            .ok()?
            .iter()
            .filter_map(|m| m.as_document())
            .find(|m| m.get_str("name") == Ok(host))
            .cloned()
    }

    pub async fn direct_auth(&self, host: &str, user: &str, pw: &str, mech: &str) -> Client {
        Client::with_uri_str(format!("mongodb://{user}:{pw}@{host}/?directConnection=true&serverSelectionTimeoutMS=10000&authSource=admin&authMechanism={mech}"))
            .await
            .unwrap()
    }

    pub async fn client(&self, extra: &str) -> Client {
        Client::with_uri_str(format!("mongodb://{}/?replicaSet=rs0&serverSelectionTimeoutMS=20000&heartbeatFrequencyMS=500{extra}", self.hosts.join(","))).await.unwrap()
    }

    /// Initiates all members and waits for a primary and every member SECONDARY/PRIMARY.
    pub async fn initiate(&self) -> String {
        self.initiate_via("").await
    }

    /// [`Set::initiate`] through a client with extra URI options `extra`.
    pub async fn initiate_via(&self, extra: &str) -> String {
        let c = self.direct(&self.hosts[0], extra).await;
        c.database("admin")
            .run_command(doc! {"replSetInitiate": self.config(&self.hosts)})
            .await
            .expect("initiate");
        let primary = self.wait_primary(None).await;
        self.wait_all_healthy().await;
        primary
    }

    /// Waits until every member is PRIMARY or SECONDARY.
    pub async fn wait_all_healthy(&self) {
        wait_until("all members healthy", || async {
            self.hosts.iter().all(|h| {
                matches!(
                    self.state(h),
                    Some(MemberState::Primary | MemberState::Secondary)
                )
            })
        })
        .await;
    }

    /// `replSetGetConfig`'s `config` on `host`.
    pub async fn replset_config(&self, host: &str) -> Document {
        let reply = self
            .direct(host, "")
            .await
            .database("admin")
            .run_command(doc! {"replSetGetConfig": 1})
            .await
            .expect("replSetGetConfig");
        reply.get_document("config").unwrap().clone()
    }

    pub fn state(&self, host: &str) -> Option<MemberState> {
        self.net.member(host).map(|m| m.state())
    }

    pub fn primary(&self) -> Option<String> {
        self.hosts
            .iter()
            .find(|h| self.state(h) == Some(MemberState::Primary))
            .cloned()
    }

    /// Waits for a primary other than `not`.
    pub async fn wait_primary(&self, not: Option<&str>) -> String {
        wait_until("a primary", || async {
            self.primary().filter(|p| Some(p.as_str()) != not).is_some()
        })
        .await;
        self.primary().unwrap()
    }

    pub async fn restart(&self, host: &str) {
        let i = self.hosts.iter().position(|h| h == host).unwrap();
        self.net
            .start_member(self.specs[i].clone(), self.volumes[i].clone())
            .await
            .expect("restart member");
    }
}

/// Polls `cond` every 20 ms until it holds; panics after [`DEADLINE`].
pub async fn wait_until<F, Fut>(what: &str, cond: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = bool>,
{
    let start = Instant::now();
    while !cond().await {
        assert!(start.elapsed() < DEADLINE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The member's current config (`replSetGetConfig`).
pub async fn current_config(admin: &mongodb::Database) -> Document {
    admin
        .run_command(doc! {"replSetGetConfig": 1})
        .await
        .unwrap()
        .get_document("config")
        .unwrap()
        .clone()
}

/// The server error code carried by a driver error.
pub fn code_of(e: &Error) -> Option<i32> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => Some(w.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        _ => None,
    }
}

pub async fn expect_code(result: mongodb::error::Result<Document>, code: i32) -> Error {
    let e = result.expect_err(&format!("expected error code {code}"));
    assert_eq!(code_of(&e), Some(code), "unexpected error: {e}");
    e
}

/// All documents of a cursor.
pub async fn collect(mut cursor: mongodb::Cursor<Document>) -> Vec<Document> {
    let mut out = Vec::new();
    while cursor.advance().await.unwrap() {
        out.push(cursor.deserialize_current().unwrap());
    }
    out
}

/// A third-party client named by environment variable `var` (see
/// hack/test-tools.sh): `None`, and the test skips, when it is not set, unless
/// `MMO_REQUIRE_TOOLS=1`, where that fails the test.
pub fn tool(var: &str) -> Option<std::path::PathBuf> {
    match std::env::var_os(var) {
        Some(v) if !v.is_empty() => Some(std::path::PathBuf::from(v)),
        _ => {
            if std::env::var("MMO_REQUIRE_TOOLS").as_deref() == Ok("1") {
                panic!(
                    "MMO_REQUIRE_TOOLS=1 but {var} is not set: run eval \"$(hack/test-tools.sh)\""
                );
            }
            println!("SKIPPED: set {var} (see hack/test-tools.sh)");
            None
        }
    }
}
