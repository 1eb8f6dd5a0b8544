//! One replica-set member: its role (PRIMARY, SECONDARY, ...), heartbeats that
//! spread configs and track peers, replication of the oplog with lag and rollback,
//! elections (dry run, term + 1, one vote per term, freshness, priority takeover),
//! and a primary's step-down when it cannot see a majority. Peers are reached only
//! through the [`Network`], synchronously and without holding this member's locks.
//!
//! A member runs one server version ([`MemberSpec::version`]). Like mongod it
//! refuses to start on data whose featureCompatibilityVersion its binary cannot
//! run (exit code 62), and it dies (exit code 14) when replication or an initial
//! sync brings it an FCV document it cannot parse; on a volume with no room
//! for a write it aborts (exit code 134, [`crate::disk`]); see
//! [`Member::exit_code`].
//!
//! This module holds the member's state, its start and stop, and the loop that
//! ticks every 10 ms; `heartbeat`, `replication`, `election`, `catch_up` and
//! `primary` hold what the loop does in each role.

mod catch_up;
mod election;
mod heartbeat;
mod primary;
mod replication;

use crate::config::ReplSetConfig;
use crate::keyfile::Keyfile;
use crate::network::Network;
use crate::scram;
use crate::state::{DurableState, OpTime, Volume, SYSTEM_VERSION_NS, USERS_NS};
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
    Recovering = 3,
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
            MemberState::Recovering => "RECOVERING",
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
    /// `--oplogSize` / `replication.oplogSizeMB`, in bytes: the capped
    /// oplog's size when this member creates its oplog. `None`: 5 % of the
    /// free disk, at least 990 MB ([`crate::disk::new_oplog_size`]), or never
    /// truncated when the disk is unknown too.
    /// [`Network::set_oplog_size`] overrides it for every member.
    pub oplog_size_bytes: Option<u64>,
    /// The volume it runs on; `None`: a disk that never fills.
    pub disk: Option<crate::disk::Disk>,
    /// How long an initial sync takes (copying the data); zero: at once.
    /// [`Network::set_initial_sync_duration`] overrides it for every member.
    pub initial_sync_duration: Duration,
    /// Whether its clients run on its own host, so that mongod's localhost
    /// exception applies to them while no user exists (true, the default: a
    /// simulator started by hand). The lab sets false: there every client
    /// stands for a process in another pod, never on the member's loopback.
    pub clients_on_own_host: bool,
    /// Its TLS options ([`crate::tls`]); the default: none, TLS disabled.
    pub tls: crate::tls::TlsSpec,
}

impl std::fmt::Debug for MemberSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemberSpec")
            .field("listen", &self.listen)
            .field("repl_set", &self.repl_set)
            .field("keyfile", &self.keyfile.as_ref().map(|_| "<redacted>"))
            .field("root_user", &self.root_user)
            .field("version", &self.version)
            .field("oplog_size_bytes", &self.oplog_size_bytes)
            .field("disk", &self.disk)
            .field("initial_sync_duration", &self.initial_sync_duration)
            .field("clients_on_own_host", &self.clients_on_own_host)
            .field("tls", &self.tls)
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
            oplog_size_bytes: None,
            disk: None,
            initial_sync_duration: Duration::ZERO,
            clients_on_own_host: true,
            tls: crate::tls::TlsSpec::default(),
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
    /// Its last heartbeat was refused internal authentication.
    pub auth_issue: bool,
    /// Why its last heartbeat's connection failed in TLS.
    pub connection_failure: Option<String>,
}

/// A new primary's catch-up phase (mongod's `CatchupState`, then drain mode):
/// PRIMARY but not writable until it holds the newest optime its peers
/// reported since it won, the timeout passes, or it steps down.
#[derive(Debug, Clone)]
pub(crate) struct CatchUp {
    /// The term it won.
    pub term: i64,
    /// When it won: only heartbeat responses from then on count (mongod
    /// restarts every heartbeat on winning).
    pub since: Instant,
    /// The newest optime the peers reported since `since`; `None` until
    /// every peer answered (or failed) a heartbeat.
    pub target: Option<OpTime>,
    /// `since` + `catchUpTimeoutMillis`; `None`: no limit (-1).
    pub until: Option<Instant>,
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
    /// A replSetStepDown is waiting for a secondary to catch up (mongod's
    /// leader mode `kAttemptingStepDown`): still PRIMARY, but writes are
    /// refused and hello says `isWritablePrimary: false`.
    pub stepping_down: bool,
    /// A new primary still catching up ([`CatchUp`]): writes are refused and
    /// hello says `isWritablePrimary: false`, `secondary: true`.
    pub catching_up: Option<CatchUp>,
    pub takeover_since: Option<Instant>,
    pub heartbeat_now: bool,
    /// The next role refresh runs the full isSelf check (findSelfInConfig):
    /// set at start, on each config install and on each heartbeat response
    /// while REMOVED (mongod's retry of isSelf); otherwise the member keeps the
    /// host it already found.
    pub self_check_due: bool,
    /// Incremented on every role change; writes waiting for write concern watch it.
    pub role_generation: u64,
    /// Each session's newest txnNumber as this primary began it
    /// ([`crate::retryable::begin_or_continue`]), keyed by the session's BSON.
    pub active_txns: HashMap<Vec<u8>, i64>,
    /// The role generation `active_txns` belongs to: a role change forgets
    /// them, as mongod invalidates its sessions on a step-up or step-down.
    pub sessions_generation: u64,
    pub topology_counter: i64,
    /// Failed initial sync attempts (mongod gives up after 10).
    pub initial_sync_failures: u32,
    /// No initial sync attempt before this instant (1 s between attempts).
    pub next_initial_sync: Option<Instant>,
    /// When the running initial sync began copying from its source.
    pub initial_sync_started: Option<Instant>,
    /// Every sync source's oplog starts after this member's last optime
    /// (mongod's `BackgroundSync::_tooStale`): it stays RECOVERING in
    /// maintenance mode until a source has its next entry again.
    pub too_stale: bool,
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
    /// The keys of its keyfile, as read at start (none without a keyfile).
    keyfile: Option<Keyfile>,
    /// Its TLS modes and certificates.
    tls: crate::tls::MemberTls,
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
                    disk.recount_data_bytes();
                }
            }
            crate::fcv::startup_check(spec.version, &disk)
                .and_then(|()| crate::disk::startup_check(&spec, &disk))
        };
        // mongod sets up internal authentication before it opens its data.
        let keyfile = spec.keyfile.as_deref().map(Keyfile::read).transpose();
        let (keyfile, startup) = match keyfile {
            Ok(keyfile) => (keyfile, startup),
            Err(refused) => (None, Err(refused)),
        };
        // The TLS options and files are refused by global initializers,
        // before anything else.
        let (material, startup) = match crate::tls::startup(&spec.tls, spec.version) {
            Ok(material) => (material, startup),
            Err(refused) => (None, Err(refused)),
        };
        let tls = crate::tls::MemberTls::new(spec.tls.clone(), material, keyfile.is_some());
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
                stepping_down: false,
                catching_up: None,
                takeover_since: None,
                heartbeat_now: true,
                self_check_due: true,
                role_generation: 0,
                active_txns: HashMap::new(),
                sessions_generation: 0,
                topology_counter: 0,
                initial_sync_failures: 0,
                next_initial_sync: None,
                initial_sync_started: None,
                too_stale: false,
            }),
            topology,
            process_id: ObjectId::new(),
            started: Instant::now(),
            shutdown_tx,
            next_connection_id: AtomicI64::new(1),
            tasks: Mutex::new(Vec::new()),
            exit_code: AtomicI32::new(-1),
            keyfile,
            tls,
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
    /// replication or initial sync), 134 when its volume had no room for a
    /// write or for its start (WiredTiger's panic aborts mongod). None while
    /// it runs or after a stop.
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
    pub(crate) fn keyfile(&self) -> Option<&Keyfile> {
        self.keyfile.as_ref()
    }
    pub(crate) fn tls(&self) -> &crate::tls::MemberTls {
        &self.tls
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
    /// Whether it is a primary that accepts writes: not attempting a
    /// step-down and not catching up after its election (mongod's
    /// `canAcceptNonLocalWrites`, leader mode "master").
    pub fn is_writable_primary(&self) -> bool {
        Member::writable(&self.lock())
    }
    /// [`Member::is_writable_primary`] under the member's lock: the one test
    /// every write, `hello`'s `isWritablePrimary` and the commands that need a
    /// writable primary make.
    pub(crate) fn writable(inner: &Inner) -> bool {
        inner.state == MemberState::Primary && !inner.stepping_down && inner.catching_up.is_none()
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
            "writablePrimary": Member::writable(&inner),
            "catchUpTarget": inner.catching_up.as_ref().map(|c| format!("{:?}", c.target)),
            "term": disk.term,
            "configVersion": disk.config.as_ref().map(|c| c.version),
            "configTerm": disk.config.as_ref().map(|c| c.term),
            "lastOptime": format!("{:?}", disk.last_optime()),
            "commitPoint": format!("{:?}", inner.commit_point),
            "oplogEntries": disk.oplog.len(),
            "oplogBytes": disk.oplog_bytes(),
            "oplogMaxBytes": disk.oplog_max_bytes,
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
        let Some(me) = self.self_in_config(inner, &cfg, net.as_deref()) else {
            // Starting up: not yet reachable, so the check waits.
            return;
        };
        let new_host = me.as_ref().map(|m| m.host.clone());
        let new_state = match me {
            None => MemberState::Removed,
            Some(m) if m.arbiter_only => MemberState::Arbiter,
            Some(_) if pending => MemberState::Startup2,
            Some(_) if inner.state == MemberState::Primary => MemberState::Primary,
            Some(_) if inner.too_stale => MemberState::Recovering,
            Some(_) => MemberState::Secondary,
        };
        if new_host != inner.self_host || new_state != inner.state {
            if inner.state == MemberState::Primary && new_state != MemberState::Primary {
                inner.election_id = None;
                inner.catching_up = None;
            }
            if inner.state != new_state {
                inner.role_generation += 1;
            }
            inner.self_host = new_host;
            inner.state = new_state;
            self.bump_topology(inner);
        }
    }

    /// This member's entry in `cfg`, as mongod finds it: the host it already
    /// is when the config still has it (validateConfigForHeartbeatReconfig's
    /// quick path), else, when a check is due, findSelfInConfig (dialing hosts
    /// through the network); else none (REMOVED until the next check). `None`
    /// when the check must wait: the member is not yet running on the network
    /// (mongod's slow path waits for startup to complete).
    fn self_in_config(
        &self,
        inner: &mut Inner,
        cfg: &ReplSetConfig,
        net: Option<&Network>,
    ) -> Option<Option<crate::config::MemberConfig>> {
        if let Some(m) = inner.self_host.as_ref().and_then(|h| cfg.member_by_host(h)) {
            return Some(Some(m.clone()));
        }
        if !inner.self_check_due {
            return Some(None);
        }
        let Some(net) = net else {
            return Some(cfg.members.iter().find(|m| m.host == self.listen).cloned());
        };
        if !net.is_running(self) {
            return None;
        }
        inner.self_check_due = false;
        Some(net.find_self(self, cfg).cloned())
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
            MemberState::Recovering => self.replicate(&net, &cfg),
            MemberState::Primary => {
                self.primary_duties(&net, &cfg);
                self.catch_up(&net, &cfg);
            }
            _ => {}
        }
        self.cap_oplog(&net);
    }
}
