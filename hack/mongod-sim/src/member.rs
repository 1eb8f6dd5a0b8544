//! One replica-set member: its role (PRIMARY, SECONDARY, ...), heartbeats that
//! spread configs and track peers, replication of the oplog with lag and rollback,
//! elections (dry run, term + 1, one vote per term, freshness, priority takeover),
//! and a primary's step-down when it cannot see a majority. Peers are reached only
//! through the [`Network`], synchronously and without holding this member's locks.
//!
//! A member runs one server version ([`MemberSpec::version`]). Like mongod it
//! refuses to start on data whose featureCompatibilityVersion its binary cannot
//! run (exit code 62), and it dies (exit code 14) when replication or an initial
//! sync brings it an FCV document it cannot parse; see [`Member::exit_code`].

use crate::config::ReplSetConfig;
use crate::network::Network;
use crate::scram;
use crate::state::{
    DurableState, LastVote, Op, OpTime, OplogEntry, Volume, SYSTEM_VERSION_NS, USERS_NS,
};
use crate::version::ServerVersion;
use bson::{doc, oid::ObjectId, Bson, Document};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicI32, AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Replica-set member states with mongod's numeric codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Startup = 0,
    Primary = 1,
    Secondary = 2,
    Startup2 = 5,
    Arbiter = 7,
    Down = 8,
    Removed = 10,
}

impl MemberState {
    pub fn code(self) -> i32 {
        self as i32
    }
    pub fn name(self) -> &'static str {
        match self {
            MemberState::Startup => "STARTUP",
            MemberState::Primary => "PRIMARY",
            MemberState::Secondary => "SECONDARY",
            MemberState::Startup2 => "STARTUP2",
            MemberState::Arbiter => "ARBITER",
            MemberState::Down => "(not reachable/healthy)",
            MemberState::Removed => "REMOVED",
        }
    }
}

/// The root user the official image creates from `MONGO_INITDB_ROOT_USERNAME` /
/// `MONGO_INITDB_ROOT_PASSWORD` when the data directory is empty.
#[derive(Clone)]
pub struct RootUser {
    pub username: String,
    pub password: String,
}

impl std::fmt::Debug for RootUser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RootUser")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// How to start a member (think: the pod spec).
#[derive(Clone)]
pub struct MemberSpec {
    /// The pod address it listens on.
    pub listen: SocketAddr,
    /// `--replSet`.
    pub repl_set: String,
    /// Keyfile content; members whose keyfiles differ cannot talk to each other.
    /// With a keyfile (or a root user) access control is on.
    pub keyfile: Option<String>,
    pub root_user: Option<RootUser>,
    /// The server version the member runs (the image's mongod): what `buildInfo`,
    /// `serverStatus` and `hello.maxWireVersion` report and which
    /// featureCompatibilityVersions it can run. [`MemberSpec::new`] uses
    /// [`ServerVersion::DEFAULT`] (7.0.14).
    pub version: ServerVersion,
}

impl std::fmt::Debug for MemberSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberSpec")
            .field("listen", &self.listen)
            .field("repl_set", &self.repl_set)
            .field("keyfile", &self.keyfile.as_ref().map(|_| "<redacted>"))
            .field("root_user", &self.root_user)
            .field("version", &self.version)
            .finish()
    }
}

impl MemberSpec {
    pub fn new(listen: SocketAddr, repl_set: &str) -> MemberSpec {
        MemberSpec {
            listen,
            repl_set: repl_set.to_string(),
            keyfile: None,
            root_user: None,
            version: ServerVersion::DEFAULT,
        }
    }
}

/// What a heartbeat learns about a peer.
#[derive(Debug, Clone)]
pub(crate) struct PeerView {
    pub state: MemberState,
    pub optime: OpTime,
    pub term: i64,
    pub config: Option<ReplSetConfig>,
    pub sync_source: Option<String>,
    pub uptime_secs: i64,
    pub election_id: Option<ObjectId>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct PeerInfo {
    pub last_attempt: Option<Instant>,
    pub last_ok: Option<Instant>,
    pub last_heartbeat_ms: i64,
    pub view: Option<PeerView>,
    pub up: bool,
}

pub(crate) struct Inner {
    pub state: MemberState,
    /// This member's host string in the current config.
    pub self_host: Option<String>,
    pub peers: HashMap<String, PeerInfo>,
    pub election_deadline: Instant,
    /// Not electable before this instant (replSetStepDown period or replSetFreeze).
    pub no_election_until: Option<Instant>,
    pub commit_point: OpTime,
    /// The commit point when this primary last installed a config of its own
    /// (mongod's `_lastCommittedInPrevConfig`): it must be majority-committed
    /// in the current config before the next reconfig.
    pub last_committed_in_prev_config: OpTime,
    /// The optime of this primary's "new primary" entry (mongod's
    /// `_firstOpTimeOfMyTerm`).
    pub first_optime_of_my_term: OpTime,
    pub config_op_in_progress: bool,
    pub sync_source: Option<String>,
    pub election_id: Option<ObjectId>,
    pub election_date_ms: i64,
    pub step_up_requested: bool,
    pub takeover_since: Option<Instant>,
    pub heartbeat_now: bool,
    /// Incremented on every role change; writes waiting for write concern watch it.
    pub role_generation: u64,
    pub topology_counter: i64,
    /// Failed initial sync attempts (mongod gives up after 10).
    pub initial_sync_failures: u32,
    /// No initial sync attempt before this instant (1 s between attempts).
    pub next_initial_sync: Option<Instant>,
}

/// A running member. Obtain through [`Network::member`].
pub struct Member {
    listen: String,
    spec: MemberSpec,
    net: Weak<Network>,
    volume: Volume,
    inner: Mutex<Inner>,
    topology: watch::Sender<i64>,
    process_id: ObjectId,
    started: Instant,
    shutdown_tx: watch::Sender<bool>,
    next_connection_id: AtomicI64,
    tasks: Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// The process exit code once it died on its own (-1 while it runs or after
    /// an ordinary stop).
    exit_code: AtomicI32,
}

pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// electionId: ObjectId with bytes 7fffffff followed by the term, big-endian.
pub(crate) fn election_id_for(term: i64) -> ObjectId {
    let mut b = [0u8; 12];
    b[..4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    b[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(b)
}

fn election_timeout(cfg: &ReplSetConfig) -> Duration {
    Duration::from_millis(cfg.settings.election_timeout_millis.max(1) as u64)
}

fn randomized_election_timeout(cfg: &ReplSetConfig) -> Duration {
    let base = election_timeout(cfg);
    base + base.mul_f64(0.15 * rand::random::<f64>())
}

/// A user document as stored in `admin.system.users`.
pub(crate) fn user_document(db: &str, user: &str, password: &str, roles: Bson) -> Document {
    doc! {
        "_id": format!("{db}.{user}"),
        "userId": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: rand::random::<[u8; 16]>().to_vec() },
        "user": user, "db": db,
        "credentials": scram::make_credentials(user, password),
        "roles": roles,
    }
}

const TICK: Duration = Duration::from_millis(10);

impl Member {
    pub(crate) fn start(
        net: Weak<Network>,
        spec: MemberSpec,
        volume: Volume,
        listener: tokio::net::TcpListener,
    ) -> Arc<Member> {
        let startup = {
            let mut disk = volume.lock();
            if disk.is_empty() {
                if let Some(root) = &spec.root_user {
                    // The image's entrypoint creates the user with a standalone
                    // mongod first, which writes the FCV document of a clean start
                    // (the binary's release).
                    let user = user_document(
                        "admin",
                        &root.username,
                        &root.password,
                        Bson::Array(vec![Bson::Document(doc! {"role": "root", "db": "admin"})]),
                    );
                    let fcv = crate::fcv::Fcv::Version(spec.version.release()).document();
                    for (ns, doc) in [(USERS_NS, user), (SYSTEM_VERSION_NS, fcv)] {
                        disk.base.insert(ns.to_string(), vec![doc.clone()]);
                        disk.data.insert(ns.to_string(), vec![doc]);
                    }
                }
            }
            crate::fcv::startup_check(spec.version, &disk)
        };
        let (topology, _) = watch::channel(0);
        let (shutdown_tx, shutdown_rx) = watch::channel(false);
        let member = Arc::new(Member {
            listen: spec.listen.to_string(),
            spec,
            net,
            volume,
            inner: Mutex::new(Inner {
                state: MemberState::Startup,
                self_host: None,
                peers: HashMap::new(),
                election_deadline: Instant::now(),
                no_election_until: None,
                commit_point: OpTime::NULL,
                last_committed_in_prev_config: OpTime::NULL,
                first_optime_of_my_term: OpTime::NULL,
                config_op_in_progress: false,
                sync_source: None,
                election_id: None,
                election_date_ms: 0,
                step_up_requested: false,
                takeover_since: None,
                heartbeat_now: true,
                role_generation: 0,
                topology_counter: 0,
                initial_sync_failures: 0,
                next_initial_sync: None,
            }),
            topology,
            process_id: ObjectId::new(),
            started: Instant::now(),
            shutdown_tx,
            next_connection_id: AtomicI64::new(1),
            tasks: Mutex::new(Vec::new()),
            exit_code: AtomicI32::new(-1),
        });
        if let Err(e) = startup {
            // mongod logs the reason and exits before it listens.
            tracing::error!(member = %member.listen, id = e.log_id, error = %e.message, "{}", e.log_msg);
            member.exit_code.store(e.exit_code, Ordering::SeqCst);
            drop(listener);
            member.leave_network_when_registered();
            return member;
        }
        {
            let mut inner = member.lock();
            member.refresh_role(&mut inner);
            if let Some(cfg) = member.disk().config.clone() {
                inner.election_deadline = Instant::now() + randomized_election_timeout(&cfg);
            }
        }
        let server = tokio::spawn(crate::server::serve(member.clone(), listener, shutdown_rx));
        let weak = Arc::downgrade(&member);
        let ticker = tokio::spawn(async move {
            let mut interval = tokio::time::interval(TICK);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                interval.tick().await;
                let Some(m) = weak.upgrade() else { return };
                m.tick();
            }
        });
        member
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend([server, ticker]);
        tracing::info!(member = %member.listen, "member started");
        member
    }

    /// Stops serving: tells connections to close and aborts the listener and the
    /// background loop. Await the returned handles to know the port is released.
    pub(crate) fn shutdown(&self) -> Vec<tokio::task::JoinHandle<()>> {
        let _ = self.shutdown_tx.send(true);
        let tasks: Vec<_> = self
            .tasks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for t in &tasks {
            t.abort();
        }
        tracing::info!(member = %self.listen, "member stopped");
        tasks
    }

    /// A member that died on its own leaves the network as soon as
    /// `Network::start_member` has registered it (it registers what `start`
    /// returns right after).
    fn leave_network_when_registered(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            for _ in 0..1000 {
                {
                    let Some(me) = weak.upgrade() else { return };
                    let Some(net) = me.network() else { return };
                    if net.member(&me.listen).is_some_and(|m| Arc::ptr_eq(&m, &me)) {
                        net.stop_member(&me.listen);
                        return;
                    }
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
            }
        });
    }

    /// The process dies (a fatal assertion): it stops serving at once, like a
    /// killed member, with `exit_code`; its volume keeps what was written.
    pub(crate) fn crash(&self, exit_code: i32) {
        self.exit_code.store(exit_code, Ordering::SeqCst);
        if let Some(net) = self.network() {
            if net
                .member(&self.listen)
                .is_some_and(|m| std::ptr::eq(Arc::as_ptr(&m), self))
            {
                net.stop_member(&self.listen);
            }
        }
    }

    // ---- accessors -------------------------------------------------------

    /// The server version this member runs.
    pub fn version(&self) -> ServerVersion {
        self.spec.version
    }

    /// How the member's process ended when it ended on its own: 62 when it
    /// refused to start on data whose featureCompatibilityVersion its binary
    /// cannot run, 14 after a fatal assertion (an FCV it cannot parse arrived by
    /// replication or initial sync). None while it runs or after a stop.
    pub fn exit_code(&self) -> Option<i32> {
        Some(self.exit_code.load(Ordering::SeqCst)).filter(|c| *c >= 0)
    }

    /// The pod address this member listens on.
    pub fn listen(&self) -> &str {
        &self.listen
    }
    pub(crate) fn spec(&self) -> &MemberSpec {
        &self.spec
    }
    pub(crate) fn keyfile(&self) -> Option<&str> {
        self.spec.keyfile.as_deref()
    }
    pub(crate) fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
    pub(crate) fn disk(&self) -> MutexGuard<'_, DurableState> {
        self.volume.lock()
    }
    pub(crate) fn network(&self) -> Option<Arc<Network>> {
        self.net.upgrade()
    }
    pub(crate) fn process_id(&self) -> ObjectId {
        self.process_id
    }
    pub(crate) fn topology_watch(&self) -> watch::Receiver<i64> {
        self.topology.subscribe()
    }
    pub(crate) fn uptime_secs(&self) -> i64 {
        self.started.elapsed().as_secs() as i64
    }
    pub(crate) fn next_connection_id(&self) -> i64 {
        self.next_connection_id.fetch_add(1, Ordering::Relaxed)
    }
    pub(crate) fn auth_enabled(&self) -> bool {
        self.spec.keyfile.is_some() || self.spec.root_user.is_some()
    }

    /// Current role.
    pub fn state(&self) -> MemberState {
        self.lock().state
    }
    /// Current term.
    pub fn term(&self) -> i64 {
        self.disk().term
    }
    /// Installed config, if any.
    pub fn config(&self) -> Option<ReplSetConfig> {
        self.disk().config.clone()
    }
    /// Optime of the last applied entry.
    pub fn last_optime(&self) -> OpTime {
        self.disk().last_optime()
    }
    /// The member's host string in its config (what `me` reports).
    pub fn self_host(&self) -> Option<String> {
        self.lock().self_host.clone()
    }

    pub(crate) fn summary(&self) -> serde_json::Value {
        let inner = self.lock();
        let disk = self.disk();
        serde_json::json!({
            "listen": self.listen,
            "me": inner.self_host,
            "state": inner.state.name(),
            "term": disk.term,
            "configVersion": disk.config.as_ref().map(|c| c.version),
            "configTerm": disk.config.as_ref().map(|c| c.term),
            "lastOptime": format!("{:?}", disk.last_optime()),
            "commitPoint": format!("{:?}", inner.commit_point),
            "oplogEntries": disk.oplog.len(),
            "syncSource": inner.sync_source,
        })
    }

    /// A topology change: the counter goes up and waiting awaitable hellos answer.
    /// `send_replace`, not `send`: `send` leaves the value unchanged when nobody is
    /// subscribed at that moment, and a later awaitable hello would then compare the
    /// client's (current) counter with a stale one and answer at once, forever.
    pub(crate) fn bump_topology(&self, inner: &mut Inner) {
        inner.topology_counter += 1;
        self.topology.send_replace(inner.topology_counter);
    }

    /// Re-derives self host and role from the installed config.
    pub(crate) fn refresh_role(&self, inner: &mut Inner) {
        let net = self.network();
        let (cfg, pending) = {
            let disk = self.disk();
            (disk.config.clone(), disk.initial_sync_pending)
        };
        let Some(cfg) = cfg else {
            if inner.state != MemberState::Startup {
                inner.state = MemberState::Startup;
                self.bump_topology(inner);
            }
            return;
        };
        let me = cfg.members.iter().find(|m| {
            net.as_ref()
                .map(|n| n.is_self(&self.listen, &m.host))
                .unwrap_or(m.host == self.listen)
        });
        let new_host = me.map(|m| m.host.clone());
        let new_state = match me {
            None => MemberState::Removed,
            Some(m) if m.arbiter_only => MemberState::Arbiter,
            Some(_) if pending => MemberState::Startup2,
            Some(_) if inner.state == MemberState::Primary => MemberState::Primary,
            Some(_) => MemberState::Secondary,
        };
        if new_host != inner.self_host || new_state != inner.state {
            if inner.state == MemberState::Primary && new_state != MemberState::Primary {
                inner.election_id = None;
            }
            if inner.state != new_state {
                inner.role_generation += 1;
            }
            inner.self_host = new_host;
            inner.state = new_state;
            self.bump_topology(inner);
        }
    }

    /// The member's own config entry.
    pub(crate) fn self_config(
        &self,
        inner: &Inner,
        cfg: &ReplSetConfig,
    ) -> Option<crate::config::MemberConfig> {
        inner
            .self_host
            .as_ref()
            .and_then(|h| cfg.member_by_host(h).cloned())
    }

    // ---- what peers see ----------------------------------------------------

    pub(crate) fn view(&self) -> PeerView {
        let inner = self.lock();
        let disk = self.disk();
        PeerView {
            state: inner.state,
            optime: disk.last_optime(),
            term: disk.term,
            config: disk.config.clone(),
            sync_source: inner.sync_source.clone(),
            uptime_secs: self.uptime_secs(),
            election_id: inner.election_id,
        }
    }

    /// Heartbeat payload with a newer config: install it if it is newer and for us.
    pub(crate) fn receive_config(&self, cfg: &ReplSetConfig) {
        let mut inner = self.lock();
        let has_config = {
            let disk = self.disk();
            match &disk.config {
                Some(mine) => {
                    if !mine.may_be_replaced_by(cfg) {
                        return;
                    }
                    true
                }
                None => {
                    if cfg.set_name != self.spec.repl_set {
                        return;
                    }
                    false
                }
            }
        };
        if !has_config {
            let net = self.network();
            let in_config = cfg.members.iter().any(|m| {
                net.as_ref()
                    .map(|n| n.is_self(&self.listen, &m.host))
                    .unwrap_or(false)
            });
            if !in_config {
                return;
            }
        }
        self.install_config(&mut inner, cfg.clone());
    }

    /// Installs a config locally (durably) and re-derives the role.
    pub(crate) fn install_config(&self, inner: &mut Inner, cfg: ReplSetConfig) {
        {
            let mut disk = self.disk();
            if disk.config.is_none() && disk.oplog.is_empty() {
                disk.initial_sync_pending = true;
            }
            disk.config = Some(cfg.clone());
        }
        inner.heartbeat_now = true;
        inner.peers.retain(|h, _| cfg.member_by_host(h).is_some());
        inner.election_deadline = Instant::now() + randomized_election_timeout(&cfg);
        self.bump_topology(inner);
        self.refresh_role(inner);
        tracing::info!(member = %self.listen, version = cfg.version, term = cfg.term, "installed config");
    }

    /// Adopts a higher term seen anywhere; a primary steps down.
    pub(crate) fn observe_term(&self, inner: &mut Inner, term: i64) {
        let mut disk = self.disk();
        if term > disk.term {
            disk.term = term;
            drop(disk);
            if inner.state == MemberState::Primary {
                self.step_down_locked(inner, None);
            }
        }
    }

    /// Leaves PRIMARY. `no_election_for` keeps it from standing again for a while.
    pub(crate) fn step_down_locked(&self, inner: &mut Inner, no_election_for: Option<Duration>) {
        if inner.state != MemberState::Primary {
            return;
        }
        inner.state = MemberState::Secondary;
        inner.election_id = None;
        inner.role_generation += 1;
        if let Some(d) = no_election_for {
            inner.no_election_until = Some(Instant::now() + d);
        }
        if let Some(cfg) = self.disk().config.clone() {
            inner.election_deadline = Instant::now() + randomized_election_timeout(&cfg);
        }
        self.bump_topology(inner);
        self.refresh_role(inner);
        tracing::info!(member = %self.listen, "stepped down");
    }

    /// Vote request from a candidate (replSetRequestVotes).
    pub(crate) fn request_vote(
        &self,
        term: i64,
        candidate: &str,
        cand_cfg: &ReplSetConfig,
        cand_optime: OpTime,
        dry_run: bool,
    ) -> bool {
        let mut inner = self.lock();
        let mut disk = self.disk();
        let Some(cfg) = disk.config.clone() else {
            return false;
        };
        if cfg.set_name != cand_cfg.set_name || term < disk.term || cfg.is_newer_than(cand_cfg) {
            return false;
        }
        if disk.last_optime() > cand_optime {
            return false;
        }
        if dry_run {
            return true;
        }
        if disk
            .last_vote
            .as_ref()
            .map(|v| v.term >= term)
            .unwrap_or(false)
        {
            return false;
        }
        disk.last_vote = Some(LastVote {
            term,
            candidate: candidate.to_string(),
        });
        let raise = term > disk.term;
        drop(disk);
        if raise {
            self.observe_term(&mut inner, term);
        }
        // Granting a vote restarts our own election timer.
        inner.election_deadline = Instant::now() + randomized_election_timeout(&cfg);
        true
    }

    /// replSetStepUp request from a stepping-down primary or a client.
    pub(crate) fn request_step_up(&self) {
        self.lock().step_up_requested = true;
    }

    /// Entries after `after` from this member's oplog, or None if `after` is not in it
    /// (the caller diverged and must roll back).
    pub(crate) fn entries_after(&self, after: OpTime) -> Option<(Vec<OplogEntry>, OpTime)> {
        let commit = self.lock().commit_point;
        let disk = self.disk();
        let start = if after == OpTime::NULL {
            0
        } else {
            disk.oplog.binary_search_by(|e| e.optime.cmp(&after)).ok()? + 1
        };
        Some((disk.oplog[start..].to_vec(), commit))
    }

    pub(crate) fn has_optime(&self, optime: OpTime) -> bool {
        self.disk()
            .oplog
            .binary_search_by(|e| e.optime.cmp(&optime))
            .is_ok()
    }

    /// Copy of the data set for an initial sync: (base, oplog, data).
    pub(crate) fn clone_data(&self) -> Option<DurableState> {
        let inner = self.lock();
        if !matches!(inner.state, MemberState::Primary | MemberState::Secondary) {
            return None;
        }
        let disk = self.disk();
        if disk.oplog.is_empty() {
            return None;
        }
        Some(disk.clone())
    }

    // ---- the background loop -------------------------------------------------

    fn tick(self: &Arc<Self>) {
        if self.exit_code().is_some() {
            return;
        }
        let Some(net) = self.network() else { return };
        let Some(cfg) = self.disk().config.clone() else {
            return;
        };
        {
            let mut inner = self.lock();
            self.refresh_role(&mut inner);
        }
        self.heartbeats(&net, &cfg);
        let state = self.state();
        match state {
            MemberState::Startup2 => self.initial_sync(&net, &cfg),
            MemberState::Secondary => {
                self.replicate(&net, &cfg);
                if self.exit_code().is_some() {
                    // Died applying what it fetched.
                    return;
                }
                self.maybe_elect(&net, &cfg);
            }
            MemberState::Primary => {
                self.primary_duties(&net, &cfg);
            }
            _ => {}
        }
    }

    fn heartbeats(&self, net: &Network, cfg: &ReplSetConfig) {
        let interval = Duration::from_millis(cfg.settings.heartbeat_interval_millis.max(1) as u64);
        let now = Instant::now();
        let (due, my_host): (Vec<String>, Option<String>) = {
            let mut inner = self.lock();
            let force = std::mem::take(&mut inner.heartbeat_now);
            let my_host = inner.self_host.clone();
            let due = cfg
                .members
                .iter()
                .filter(|m| Some(&m.host) != my_host.as_ref())
                .filter(|m| {
                    force
                        || inner
                            .peers
                            .get(&m.host)
                            .and_then(|p| p.last_attempt)
                            .map(|t| now >= t + interval)
                            .unwrap_or(true)
                })
                .map(|m| m.host.clone())
                .collect();
            (due, my_host)
        };
        if my_host.is_none() {
            // REMOVED: nobody to heartbeat as a member; wait to be re-added.
            return;
        }
        for host in due {
            let result = net.dial(self, &host).map(|peer| {
                let view = peer.view();
                (peer, view)
            });
            let mut inner = self.lock();
            let primary_before = self.known_primary(&inner);
            self.record_heartbeat(
                &mut inner,
                &host,
                now,
                result.as_ref().map(|(_, v)| v.clone()),
            );
            if self.known_primary(&inner) != primary_before {
                // Clients waiting in an awaitable hello learn the new primary at once.
                self.bump_topology(&mut inner);
            }
            let Some((peer, view)) = result else { continue };
            let my_cfg = self.disk().config.clone();
            if view.term > self.disk().term {
                self.observe_term(&mut inner, view.term);
            }
            if let (Some(theirs), Some(mine)) = (&view.config, &my_cfg) {
                if mine.may_be_replaced_by(theirs) {
                    self.install_config(&mut inner, theirs.clone());
                }
            }
            let my_term = self.disk().term;
            if view.state == MemberState::Primary
                && view.term >= my_term
                && inner.state != MemberState::Primary
            {
                if let Some(c) = &my_cfg {
                    inner.election_deadline = Instant::now() + randomized_election_timeout(c);
                }
            }
            drop(inner);
            if let Some(mine) = &my_cfg {
                let theirs_older = view
                    .config
                    .as_ref()
                    .map(|t| t.may_be_replaced_by(mine))
                    .unwrap_or(true);
                if theirs_older {
                    peer.receive_config(mine);
                }
            }
        }
    }

    fn record_heartbeat(
        &self,
        inner: &mut Inner,
        host: &str,
        now: Instant,
        view: Option<PeerView>,
    ) {
        let info = inner.peers.entry(host.to_string()).or_default();
        info.last_attempt = Some(now);
        info.last_heartbeat_ms = now_ms();
        match view {
            Some(v) => {
                info.up = true;
                info.last_ok = Some(now);
                info.view = Some(v);
            }
            None => {
                info.up = false;
                if let Some(v) = info.view.as_mut() {
                    v.state = MemberState::Down;
                }
            }
        }
    }

    fn initial_sync(&self, net: &Network, cfg: &ReplSetConfig) {
        let my_host = {
            let inner = self.lock();
            if inner.next_initial_sync.is_some_and(|t| Instant::now() < t) {
                return;
            }
            inner.self_host.clone()
        };
        for m in &cfg.members {
            if Some(&m.host) == my_host.as_ref() {
                continue;
            }
            let Some(peer) = net.dial(self, &m.host) else {
                continue;
            };
            let Some(copy) = peer.clone_data() else {
                continue;
            };
            // The initial syncer reads the source's FCV document first: one this
            // binary cannot parse, or an unfinished upgrade/downgrade, fails the
            // attempt.
            if let Some(Err(reason)) = copy.fcv_document().map(|d| {
                match crate::fcv::parse_document(self.spec.version, d) {
                    Ok(crate::fcv::Fcv::Version(_)) => Ok(()),
                    Ok(unsafe_fcv) => Err(format!("IncompatibleServerVersion: Sync source had unsafe feature compatibility version: {unsafe_fcv}")),
                    Err(e) => Err(format!("{}: {}", e.code_name, e.errmsg)),
                }
            }) {
                self.initial_sync_attempt_failed(&reason);
                return;
            }
            let mut inner = self.lock();
            {
                let mut disk = self.disk();
                disk.base = copy.base;
                disk.oplog = copy.oplog;
                disk.data = copy.data;
                disk.initial_sync_pending = false;
                if copy.term > disk.term {
                    disk.term = copy.term;
                }
            }
            inner.sync_source = Some(m.host.clone());
            inner.initial_sync_failures = 0;
            inner.next_initial_sync = None;
            self.refresh_role(&mut inner);
            tracing::info!(member = %self.listen, source = %m.host, "initial sync done");
            return;
        }
    }

    /// mongod retries a failed initial sync attempt after `initialSyncRetryWait`
    /// (1 s) and gives up after `numInitialSyncAttempts` (10) with a fatal
    /// assertion.
    fn initial_sync_attempt_failed(&self, reason: &str) {
        const ATTEMPTS: u32 = 10;
        let failures = {
            let mut inner = self.lock();
            inner.initial_sync_failures += 1;
            inner.next_initial_sync = Some(Instant::now() + Duration::from_secs(1));
            inner.initial_sync_failures
        };
        tracing::error!(member = %self.listen, id = 21200, attemptsLeft = ATTEMPTS - failures.min(ATTEMPTS), error = %reason, "Initial sync attempt failed");
        if failures >= ATTEMPTS {
            tracing::error!(member = %self.listen, id = 21202, "The maximum number of retries have been exhausted for initial sync");
            tracing::error!(member = %self.listen, id = 21416, "Initial sync failed, shutting down now. Restart the server to attempt a new initial sync");
            tracing::error!(member = %self.listen, id = 23095, msgid = 40088, error = %reason, "Fatal assertion");
            self.crash(14);
        }
    }

    /// The primary as seen through heartbeats (host), if any is up.
    pub(crate) fn known_primary(&self, inner: &Inner) -> Option<String> {
        if inner.state == MemberState::Primary {
            return inner.self_host.clone();
        }
        inner
            .peers
            .iter()
            .filter(|(_, p)| p.up)
            .filter_map(|(h, p)| p.view.as_ref().map(|v| (h, v)))
            .filter(|(_, v)| v.state == MemberState::Primary)
            .max_by_key(|(_, v)| v.term)
            .map(|(h, _)| h.clone())
    }

    fn replicate(&self, net: &Network, cfg: &ReplSetConfig) {
        let my_last = self.disk().last_optime();
        let (candidates, my_host) = {
            let inner = self.lock();
            let mut c = Vec::new();
            if let Some(p) = self.known_primary(&inner) {
                c.push(p);
            }
            if cfg.settings.chaining_allowed {
                let mut others: Vec<(String, OpTime)> = inner
                    .peers
                    .iter()
                    .filter(|(_, p)| p.up)
                    .filter_map(|(h, p)| p.view.as_ref().map(|v| (h.clone(), v)))
                    .filter(|(_, v)| v.state == MemberState::Secondary)
                    .map(|(h, v)| (h, v.optime))
                    .filter(|(_, optime)| *optime > my_last)
                    .collect();
                others.sort_by_key(|o| std::cmp::Reverse(o.1));
                c.extend(others.into_iter().map(|(h, _)| h));
            }
            (c, inner.self_host.clone())
        };
        for host in candidates {
            if Some(&host) == my_host.as_ref() {
                continue;
            }
            let Some(source) = net.dial(self, &host) else {
                continue;
            };
            let source_view_state = source.state();
            if !matches!(
                source_view_state,
                MemberState::Primary | MemberState::Secondary
            ) {
                continue;
            }
            match source.entries_after(my_last) {
                // Diverged from the primary, or from a secondary that is ahead of us
                // on another branch: roll back. A secondary merely behind us is skipped.
                None if source_view_state == MemberState::Primary
                    || source.last_optime() > my_last =>
                {
                    self.rollback(&source);
                    return;
                }
                None => continue,
                Some((entries, commit)) => {
                    if entries.is_empty()
                        && source_view_state != MemberState::Primary
                        && source.last_optime() <= my_last
                    {
                        // A secondary that is not ahead of us is no use as a source.
                        continue;
                    }
                    self.apply_entries(net, cfg, entries, commit, &host);
                    return;
                }
            }
        }
        self.lock().sync_source = None;
    }

    fn apply_entries(
        &self,
        net: &Network,
        cfg: &ReplSetConfig,
        entries: Vec<OplogEntry>,
        commit: OpTime,
        source: &str,
    ) {
        let mut lag = net.lag_of(&self.listen);
        let mut inner = self.lock();
        if let Some(me) = self.self_config(&inner, cfg) {
            lag = lag.max(Duration::from_secs(me.secondary_delay_secs.max(0) as u64));
        }
        let horizon = now_ms() - lag.as_millis() as i64;
        let mut disk = self.disk();
        let mut fatal = None;
        for e in entries {
            if e.wall_ms > horizon {
                break;
            }
            // The FCV op observer parses an FCV document the entry writes; one
            // this binary cannot parse fails the batch, and the applier's
            // fassert ends the process.
            if let Some(doc) = e.op.written_fcv_document() {
                if let Err(err) = crate::fcv::check_write(self.spec.version, doc) {
                    fatal = Some((e, err));
                    break;
                }
            }
            disk.append(e);
        }
        let last = disk.last_optime();
        drop(disk);
        if let Some((entry, err)) = fatal {
            drop(inner);
            let error = format!("{}: {}", err.code_name, err.errmsg);
            tracing::error!(member = %self.listen, id = 21237, oplogEntry = ?entry, error = %error, "Error applying operation");
            tracing::error!(member = %self.listen, id = 21235, error = %error, "Failed to apply batch of operations");
            tracing::error!(member = %self.listen, id = 23095, msgid = 34437, error = %error, "Fatal assertion");
            self.crash(14);
            return;
        }
        // The majority commit point travels with replication; never past what we hold.
        inner.commit_point = inner.commit_point.max(commit.min(last)).min(last);
        if inner.sync_source.as_deref() != Some(source) {
            inner.sync_source = Some(source.to_string());
        }
    }

    /// Our oplog diverged from the source: drop entries it does not have.
    fn rollback(&self, source: &Member) {
        let optimes: Vec<OpTime> = self.disk().oplog.iter().map(|e| e.optime).collect();
        let mut keep = 0;
        for (i, op) in optimes.iter().enumerate().rev() {
            if source.has_optime(*op) {
                keep = i + 1;
                break;
            }
        }
        let _inner = self.lock();
        let mut disk = self.disk();
        let dropped = disk.oplog.len().saturating_sub(keep);
        disk.truncate_after(keep);
        tracing::warn!(member = %self.listen, dropped, "rolled back entries not on the sync source");
    }

    fn maybe_elect(self: &Arc<Self>, net: &Network, cfg: &ReplSetConfig) {
        let now = Instant::now();
        let (electable, step_up, timed_out, takeover) = {
            let mut inner = self.lock();
            let me = self.self_config(&inner, cfg);
            let frozen = inner.no_election_until.map(|t| now < t).unwrap_or(false);
            let electable = me
                .as_ref()
                .map(|m| m.is_electable() && m.is_voter())
                .unwrap_or(false)
                && !frozen;
            let step_up = std::mem::take(&mut inner.step_up_requested);
            let timed_out = now >= inner.election_deadline;
            // Priority takeover: a caught-up member with higher priority than the primary.
            let mut takeover = false;
            if let (Some(me), Some(p)) = (me.as_ref(), self.known_primary(&inner)) {
                let pview = inner.peers.get(&p).and_then(|i| i.view.clone());
                let pprio = cfg.member_by_host(&p).map(|m| m.priority).unwrap_or(0.0);
                let caught_up = pview
                    .map(|v| self.disk().last_optime() >= v.optime)
                    .unwrap_or(false);
                if me.priority > pprio && caught_up {
                    let since = *inner.takeover_since.get_or_insert(now);
                    takeover = now
                        >= since
                            + Duration::from_millis(
                                cfg.settings.heartbeat_interval_millis.max(1) as u64 * 2,
                            );
                } else {
                    inner.takeover_since = None;
                }
            } else {
                inner.takeover_since = None;
            }
            (electable, step_up, timed_out, takeover)
        };
        if !electable {
            if timed_out {
                self.lock().election_deadline = now + randomized_election_timeout(cfg);
            }
            return;
        }
        if step_up || timed_out || takeover {
            let won = self.run_election(net, cfg, step_up);
            let mut inner = self.lock();
            inner.takeover_since = None;
            if !won {
                inner.election_deadline = Instant::now() + randomized_election_timeout(cfg);
            }
        }
    }

    fn collect_votes(
        &self,
        net: &Network,
        cfg: &ReplSetConfig,
        term: i64,
        my_host: &str,
        optime: OpTime,
        dry_run: bool,
    ) -> usize {
        let mut votes = 0;
        for m in cfg.voters() {
            if m.host == my_host {
                votes += 1;
                continue;
            }
            if let Some(peer) = net.dial(self, &m.host) {
                if peer.request_vote(term, my_host, cfg, optime, dry_run) {
                    votes += 1;
                }
            }
        }
        votes
    }

    /// Stands for election; true if it became primary.
    pub(crate) fn run_election(
        &self,
        net: &Network,
        cfg: &ReplSetConfig,
        skip_dry_run: bool,
    ) -> bool {
        let (term, optime, my_host) = {
            let inner = self.lock();
            let disk = self.disk();
            let Some(h) = inner.self_host.clone() else {
                return false;
            };
            if inner.state != MemberState::Secondary {
                return false;
            }
            (disk.term, disk.last_optime(), h)
        };
        if !skip_dry_run
            && self.collect_votes(net, cfg, term + 1, &my_host, optime, true) < cfg.majority()
        {
            return false;
        }
        let new_term = {
            let _inner = self.lock();
            let mut disk = self.disk();
            if disk.term != term
                || disk
                    .last_vote
                    .as_ref()
                    .map(|v| v.term > term)
                    .unwrap_or(false)
            {
                return false;
            }
            disk.term = term + 1;
            disk.last_vote = Some(LastVote {
                term: term + 1,
                candidate: my_host.clone(),
            });
            term + 1
        };
        // Our own vote is already recorded; ask the others.
        let mut votes = 1;
        for m in cfg.voters().filter(|m| m.host != my_host) {
            if let Some(peer) = net.dial(self, &m.host) {
                if peer.request_vote(new_term, &my_host, cfg, optime, false) {
                    votes += 1;
                }
            }
        }
        let mut inner = self.lock();
        let still = self.disk().term == new_term && inner.state == MemberState::Secondary;
        if !still || votes < cfg.majority() {
            return false;
        }
        inner.state = MemberState::Primary;
        inner.election_id = Some(election_id_for(new_term));
        inner.election_date_ms = now_ms();
        inner.role_generation += 1;
        inner.no_election_until = None;
        inner.sync_source = None;
        {
            let mut disk = self.disk();
            let optime = disk.next_optime(new_term, now_ms());
            disk.append(OplogEntry {
                optime,
                wall_ms: now_ms(),
                op: Op::Noop {
                    msg: "new primary".into(),
                },
            });
            inner.first_optime_of_my_term = optime;
            // The new primary stamps the current config with its term.
            if let Some(c) = disk.config.as_mut() {
                c.term = new_term;
            }
        }
        inner.heartbeat_now = true;
        self.bump_topology(&mut inner);
        tracing::info!(member = %self.listen, term = new_term, votes, "won election");
        true
    }

    /// Applied optimes of the data-bearing voters the primary can reach.
    fn primary_duties(&self, net: &Network, cfg: &ReplSetConfig) {
        let now = Instant::now();
        let timeout = election_timeout(cfg);
        let my_host = match self.lock().self_host.clone() {
            Some(h) => h,
            None => return,
        };
        // Can we still see a majority of voters?
        let visible = {
            let inner = self.lock();
            cfg.voters()
                .filter(|m| {
                    m.host == my_host
                        || inner
                            .peers
                            .get(&m.host)
                            .and_then(|p| p.last_ok)
                            .map(|t| now.duration_since(t) < timeout)
                            .unwrap_or(false)
                })
                .count()
        };
        if visible < cfg.majority() {
            let mut inner = self.lock();
            tracing::warn!(member = %self.listen, "primary cannot see a majority; stepping down");
            self.step_down_locked(&mut inner, None);
            return;
        }
        // Commit point from the replication progress of data-bearing voters.
        let mut optimes = Vec::new();
        for m in cfg.voters().filter(|m| !m.arbiter_only) {
            if m.host == my_host {
                optimes.push(self.disk().last_optime());
            } else if let Some(peer) = net.dial(self, &m.host) {
                optimes.push(peer.last_optime());
            }
        }
        let data_voters = cfg.voters().filter(|m| !m.arbiter_only).count();
        let needed = cfg.majority().min(data_voters);
        optimes.sort_by(|a, b| b.cmp(a));
        let term = self.disk().term;
        if let Some(candidate) = optimes.get(needed.saturating_sub(1)).copied() {
            if optimes.len() >= needed && candidate.t == term {
                let mut inner = self.lock();
                if candidate > inner.commit_point {
                    inner.commit_point = candidate;
                }
            }
        }
        self.remove_newly_added(cfg);
    }

    /// The primary clears `newlyAdded` once the member is SECONDARY.
    fn remove_newly_added(&self, cfg: &ReplSetConfig) {
        let mut inner = self.lock();
        if inner.config_op_in_progress || inner.state != MemberState::Primary {
            return;
        }
        let ready: Vec<String> = cfg
            .members
            .iter()
            .filter(|m| m.newly_added)
            .filter(|m| {
                inner
                    .peers
                    .get(&m.host)
                    .map(|p| {
                        p.up && p
                            .view
                            .as_ref()
                            .map(|v| v.state == MemberState::Secondary)
                            .unwrap_or(false)
                    })
                    .unwrap_or(false)
            })
            .map(|m| m.host.clone())
            .collect();
        if ready.is_empty() {
            return;
        }
        let mut new = cfg.clone();
        for m in new.members.iter_mut() {
            if ready.contains(&m.host) {
                m.newly_added = false;
            }
        }
        new.version += 1;
        new.term = self.disk().term;
        inner.last_committed_in_prev_config = inner.commit_point;
        self.install_config(&mut inner, new);
    }

    /// Whether `target` is on a majority of `cfg`'s data-bearing voters (as
    /// mongod's oplog commitment counts: its write majority).
    pub(crate) fn majority_has(&self, net: &Network, cfg: &ReplSetConfig, target: OpTime) -> bool {
        let me = self.lock().self_host.clone();
        let mut data_voters = 0;
        let mut have = 0;
        for m in cfg.voters().filter(|m| !m.arbiter_only) {
            data_voters += 1;
            let optime = if Some(&m.host) == me.as_ref() {
                Some(self.disk().last_optime())
            } else {
                net.dial(self, &m.host).map(|peer| peer.last_optime())
            };
            if optime.is_some_and(|o| o >= target) {
                have += 1;
            }
        }
        have >= cfg.majority().min(data_voters)
    }
}
