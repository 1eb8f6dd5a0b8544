//! Command dispatch for one connection: access control (code 13 before auth,
//! with mongod's localhost exception while no user exists), the handshake and
//! diagnostic commands, SCRAM, user management, and insert with write concern.
//! Replica-set administration lives in [`crate::repl_commands`], reads (find,
//! aggregate) in [`crate::query`], update and delete in [`crate::update`],
//! featureCompatibilityVersion in [`crate::fcv`].

use crate::error::{self, fail, CmdError};
use crate::member::{now_ms, user_document, Member, MemberState};
use crate::scram::{self, Conversation, Mechanism};
use crate::state::{is_fcv_document, DurableState, Op, OpTime, OplogEntry, USERS_NS};
use crate::values::{render, values_equal};
use bson::{doc, oid::ObjectId, spec::BinarySubtype, Binary, Bson, DateTime, Document};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub(crate) type CmdResult = Result<Document, CmdError>;

/// Per-connection state.
pub(crate) struct Connection {
    pub id: i64,
    /// Authenticated (user, db) pairs.
    pub users: Vec<(String, String)>,
    pub conversation: Option<Conversation>,
    pub skip_empty_exchange: bool,
    /// The client's `appName` from its handshake (`client.application.name`).
    pub app_name: Option<String>,
}

impl Connection {
    pub fn new(id: i64) -> Connection {
        Connection {
            id,
            users: Vec::new(),
            conversation: None,
            skip_empty_exchange: false,
            app_name: None,
        }
    }
}

/// Commands any client may run before authenticating.
const NO_AUTH: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "buildInfo",
    "buildinfo",
    "saslStart",
    "saslContinue",
    "endSessions",
    "connectionStatus",
    "logout",
];

/// Handles one OP_MSG command and returns the reply body.
pub(crate) async fn dispatch(
    member: &Arc<Member>,
    conn: &mut Connection,
    body: Document,
) -> Document {
    let Some(name) = body.keys().next().cloned() else {
        return CmdError::new(error::FAILED_TO_PARSE, "no command given").to_document();
    };
    if let Ok(app) = body
        .get_document("client")
        .and_then(|client| client.get_document("application"))
        .and_then(|application| application.get_str("name"))
    {
        conn.app_name = Some(app.to_string());
    }
    if let Some(net) = member.network() {
        net.count_command(member.listen(), conn.app_name.as_deref(), &name);
    }
    let result = run(member, conn, &name, &body).await;
    match result {
        Ok(mut d) => {
            if !d.contains_key("ok") {
                d.insert("ok", 1.0);
            }
            d
        }
        Err(e) => {
            let mut d = e.to_document();
            if e.code == error::NOT_WRITABLE_PRIMARY {
                d.insert("topologyVersion", topology_version(member));
            }
            d
        }
    }
}

/// Handles an OP_QUERY command: only the hello/isMaster handshake.
pub(crate) async fn dispatch_legacy(
    member: &Arc<Member>,
    conn: &mut Connection,
    query: Document,
) -> Document {
    let name = query.keys().next().cloned().unwrap_or_default();
    if matches!(name.as_str(), "hello" | "isMaster" | "ismaster") {
        dispatch(member, conn, query).await
    } else {
        CmdError::new(
            error::UNSUPPORTED_OP_QUERY_COMMAND,
            format!(
                "Unsupported OP_QUERY command: {name}. The client driver may require an upgrade."
            ),
        )
        .to_document()
    }
}

/// What the localhost exception permits while no user exists (MongoDB manual,
/// "Localhost Exception": createUser, replSetInitiate, replSetGetStatus,
/// replSetReconfig), to clients on the member's own host only
/// ([`crate::member::MemberSpec::clients_on_own_host`]).
const LOCALHOST_EXCEPTION: &[&str] = &[
    "createUser",
    "replSetInitiate",
    "replSetGetStatus",
    "replSetReconfig",
];

fn is_authorized(member: &Member, conn: &Connection, name: &str) -> bool {
    if !member.auth_enabled() || !conn.users.is_empty() {
        return true;
    }
    member.spec().clients_on_own_host
        && LOCALHOST_EXCEPTION.contains(&name)
        && member.disk().collection(USERS_NS).is_empty()
}

async fn run(
    member: &Arc<Member>,
    conn: &mut Connection,
    name: &str,
    body: &Document,
) -> CmdResult {
    if !NO_AUTH.contains(&name) && !is_authorized(member, conn, name) {
        return fail(
            error::UNAUTHORIZED,
            format!("Command {name} requires authentication"),
        );
    }
    match name {
        "hello" if !member.version().knows_hello() => fail(
            error::COMMAND_NOT_FOUND,
            format!("no such command: '{name}'"),
        ),
        "hello" => hello(member, conn, body, false).await,
        "isMaster" | "ismaster" => hello(member, conn, body, true).await,
        "ping" => Ok(doc! {}),
        "buildInfo" | "buildinfo" => Ok(build_info(member)),
        "getParameter" => crate::fcv::get_parameter(member, body).map(|mut reply| {
            crate::tls::commands::get_parameters(member, body, &mut reply);
            reply
        }),
        "setParameter" => crate::tls::commands::set_parameter(member, body),
        "rotateCertificates" => crate::tls::commands::rotate_certificates(member, body),
        "endSessions" => Ok(doc! {}),
        "serverStatus" => Ok(server_status(member, conn)),
        "dbStats" | "dbstats" => crate::stats::db_stats(member, body),
        "collStats" | "collstats" => crate::stats::coll_stats(member, name, body),
        "connectionStatus" => Ok(connection_status(conn)),
        "logout" => {
            conn.users.clear();
            Ok(doc! {})
        }
        "saslStart" => sasl_start(member, conn, body),
        "saslContinue" => sasl_continue(conn, body),
        "createUser" => create_user(member, body).await,
        "updateUser" => update_user(member, body).await,
        "dropUser" => drop_user(member, body).await,
        "usersInfo" => users_info(member, body),
        "insert" => insert(member, body).await,
        "update" => crate::update::update(member, body).await,
        "delete" => crate::update::delete(member, body).await,
        "setFeatureCompatibilityVersion" => crate::fcv::set_fcv(member, body).await,
        "setDefaultRWConcern" => crate::rwc_defaults::set_default(member, body).await,
        "getDefaultRWConcern" => crate::rwc_defaults::get_default(member, body),
        "find" => crate::query::find(member, body),
        "aggregate" => crate::query::aggregate(member, body),
        "replSetInitiate" => crate::repl_commands::initiate(member, body).await,
        "replSetGetConfig" => crate::repl_commands::get_config(member, body).await,
        "replSetGetStatus" => crate::repl_commands::get_status(member),
        "replSetReconfig" => crate::repl_commands::reconfig(member, body).await,
        "replSetStepDown" => crate::step_down::step_down(member, body).await,
        "replSetFreeze" => crate::repl_commands::freeze(member, body),
        "replSetStepUp" => crate::repl_commands::step_up(member, body).await,
        other => fail(
            error::COMMAND_NOT_FOUND,
            format!("no such command: '{other}'"),
        ),
    }
}

// ---- handshake -------------------------------------------------------------

pub(crate) fn topology_version(member: &Member) -> Document {
    doc! { "processId": member.process_id(), "counter": member.lock().topology_counter }
}

pub(crate) fn db_of(body: &Document) -> String {
    body.get_str("$db").unwrap_or("admin").to_string()
}

/// A client-supplied number of seconds as a Duration (non-finite or negative → 0,
/// capped at about 30 years so deadlines never overflow).
pub(crate) fn secs(v: f64) -> Duration {
    if v.is_finite() && v > 0.0 {
        Duration::from_secs_f64(v.min(1e9))
    } else {
        Duration::ZERO
    }
}

/// A client-supplied timeout in milliseconds; None when absent or not positive.
pub(crate) fn timeout_ms(v: Option<f64>) -> Option<Duration> {
    v.filter(|t| t.is_finite() && *t > 0.0)
        .map(|t| secs(t / 1000.0))
}

pub(crate) fn num(v: Option<&Bson>) -> Option<f64> {
    match v? {
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

async fn hello(
    member: &Arc<Member>,
    conn: &Connection,
    body: &Document,
    legacy: bool,
) -> CmdResult {
    if let (Ok(tv), Some(max_wait)) = (
        body.get_document("topologyVersion"),
        num(body.get("maxAwaitTimeMS")),
    ) {
        // Subscribe before reading the counter so a change in between wakes us.
        let mut watch = member.topology_watch();
        let current = *watch.borrow_and_update();
        let same_process = tv.get_object_id("processId").ok() == Some(member.process_id());
        let counter = tv.get_i64("counter").ok();
        if same_process && counter == Some(current) {
            let wait = secs(max_wait.min(600_000.0) / 1000.0);
            let _ = tokio::time::timeout(wait, watch.changed()).await;
        }
    }
    Ok(hello_response(member, conn, body, legacy))
}

fn hello_response(member: &Member, conn: &Connection, body: &Document, legacy: bool) -> Document {
    let writable_key = if legacy {
        "ismaster"
    } else {
        "isWritablePrimary"
    };
    let inner = member.lock();
    let disk = member.disk();
    let mut d = doc! { "topologyVersion": { "processId": member.process_id(), "counter": inner.topology_counter } };
    let member_cfg = disk.config.as_ref().and_then(|c| {
        inner
            .self_host
            .as_ref()
            .and_then(|h| c.member_by_host(h))
            .map(|m| (c, m))
    });
    match member_cfg {
        Some((cfg, me)) if inner.state != MemberState::Removed => {
            // fillHelloForReplSet: hidden and delayed members are left out.
            let visible = |m: &&crate::config::MemberConfig| {
                !m.hidden && m.secondary_delay_secs == 0 && !m.arbiter_only
            };
            let hosts: Vec<Bson> = cfg
                .members
                .iter()
                .filter(visible)
                .filter(|m| m.is_electable())
                .map(|m| Bson::String(m.host.clone()))
                .collect();
            let passives: Vec<Bson> = cfg
                .members
                .iter()
                .filter(visible)
                .filter(|m| !m.is_electable())
                .map(|m| Bson::String(m.host.clone()))
                .collect();
            let arbiters: Vec<Bson> = cfg
                .members
                .iter()
                .filter(|m| m.arbiter_only && !m.hidden)
                .map(|m| Bson::String(m.host.clone()))
                .collect();
            d.insert("hosts", hosts);
            if !passives.is_empty() {
                d.insert("passives", passives);
            }
            if !arbiters.is_empty() {
                d.insert("arbiters", arbiters);
            }
            d.insert("setName", cfg.set_name.clone());
            d.insert("setVersion", cfg.version as i32);
            // mongod: `fillHelloForReplSet` answers `myState.primary() &&
            // !isSteppingDown()`; `_makeHelloResponse` then reports a primary
            // that cannot accept writes yet (catching up after its election)
            // as a secondary.
            let primary = inner.state == MemberState::Primary && !inner.stepping_down;
            let catching_up = primary && !Member::writable(&inner);
            d.insert(writable_key, primary && !catching_up);
            d.insert(
                "secondary",
                inner.state == MemberState::Secondary || catching_up,
            );
            if let Some(p) = member.known_primary(&inner) {
                d.insert("primary", p);
            }
            if !me.is_electable() && !me.arbiter_only {
                d.insert("passive", true);
            }
            if me.hidden {
                d.insert("hidden", true);
            }
            if me.arbiter_only {
                d.insert("arbiterOnly", true);
            }
            if !me.tags.is_empty() {
                d.insert("tags", me.tags.clone());
            }
            d.insert("me", me.host.clone());
            if let Some(id) = inner.election_id {
                d.insert("electionId", id);
            }
            let last = disk.last_optime();
            let commit = inner.commit_point.min(last);
            d.insert(
                "lastWrite",
                doc! {
                    "opTime": last.to_document(),
                    "lastWriteDate": DateTime::from_millis(disk.last_wall_ms()),
                    "majorityOpTime": commit.to_document(),
                    "majorityWriteDate": DateTime::from_millis(disk.wall_ms_at(commit)),
                },
            );
        }
        _ => {
            d.insert(writable_key, false);
            d.insert("secondary", false);
            d.insert("isreplicaset", true);
            d.insert("info", "Does not have a valid replica set config");
        }
    }
    drop(disk);
    drop(inner);
    // `helloOk` came with `hello`: it tells a driver it may switch to it.
    if body.get_bool("helloOk").unwrap_or(false) && member.version().knows_hello() {
        d.insert("helloOk", true);
    }
    d.insert("maxBsonObjectSize", 16_777_216);
    d.insert("maxMessageSizeBytes", 48_000_000);
    d.insert("maxWriteBatchSize", 100_000);
    d.insert("localTime", DateTime::now());
    d.insert("logicalSessionTimeoutMinutes", 30);
    d.insert("connectionId", conn.id as i32);
    d.insert("minWireVersion", 0);
    d.insert("maxWireVersion", member.version().max_wire_version());
    d.insert("readOnly", false);
    if let Ok(spec) = body.get_str("saslSupportedMechs") {
        if let Some((db, user)) = spec.split_once('.') {
            if let Some(u) = member.disk().user(db, user) {
                let mechs: Vec<Bson> = u
                    .get_document("credentials")
                    .map(|c| c.keys().map(|k| Bson::String(k.clone())).collect())
                    .unwrap_or_default();
                d.insert("saslSupportedMechs", mechs);
            }
        }
    }
    d
}

fn build_info(member: &Member) -> Document {
    let version = member.version();
    let array: Vec<Bson> = version
        .version_array()
        .iter()
        .map(|n| Bson::Int32(*n))
        .collect();
    doc! {
        "version": version.to_string(), "gitVersion": "mongod-sim", "versionArray": array,
        "bits": 64, "debug": false, "maxBsonObjectSize": 16_777_216,
        "storageEngines": ["devnull", "wiredTiger"], "modules": [], "javascriptEngine": "none",
        "sysInfo": "deprecated", "openssl": { "running": "disabled", "compiled": "disabled" },
    }
}

fn server_status(member: &Member, conn: &Connection) -> Document {
    let inner = member.lock();
    doc! {
        "host": inner.self_host.clone().unwrap_or_else(|| member.listen().to_string()),
        "version": member.version().to_string(), "process": "mongod", "pid": std::process::id() as i64,
        "uptime": member.uptime_secs() as f64, "uptimeMillis": member.uptime_secs() * 1000,
        "localTime": DateTime::now(),
        "connections": { "current": 1, "totalCreated": conn.id },
        "repl": { "setName": member.spec().repl_set.clone(), "myState": inner.state.code() },
    }
}

fn connection_status(conn: &Connection) -> Document {
    let users: Vec<Bson> = conn
        .users
        .iter()
        .map(|(u, d)| Bson::Document(doc! {"user": u.clone(), "db": d.clone()}))
        .collect();
    doc! { "authInfo": { "authenticatedUsers": users, "authenticatedUserRoles": [] } }
}

// ---- SCRAM -------------------------------------------------------------------

fn payload_bytes(body: &Document) -> Vec<u8> {
    match body.get("payload") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        Some(Bson::String(s)) => s.as_bytes().to_vec(),
        _ => Vec::new(),
    }
}

fn bin(bytes: Vec<u8>) -> Binary {
    Binary {
        subtype: BinarySubtype::Generic,
        bytes,
    }
}

fn auth_failed() -> CmdError {
    CmdError::new(error::AUTHENTICATION_FAILED, "Authentication failed.")
}

fn sasl_start(member: &Member, conn: &mut Connection, body: &Document) -> CmdResult {
    let mech_name = body.get_str("mechanism").unwrap_or_default();
    let Some(mech) = Mechanism::parse(mech_name) else {
        return fail(
            error::BAD_VALUE,
            format!(
                "Received authentication for mechanism {mech_name} which is unknown or not enabled"
            ),
        );
    };
    let db = db_of(body);
    let started = scram::start(mech, &db, &payload_bytes(body), |user| {
        member.disk().user(&db, user).cloned()
    });
    let (conv, server_first) = started.map_err(|e| {
        tracing::debug!("saslStart failed: {e}");
        auth_failed()
    })?;
    conn.skip_empty_exchange = body
        .get_document("options")
        .ok()
        .and_then(|o| o.get_bool("skipEmptyExchange").ok())
        .unwrap_or(false);
    conn.conversation = Some(conv);
    Ok(doc! { "conversationId": 1, "done": false, "payload": bin(server_first.into_bytes()) })
}

fn sasl_continue(conn: &mut Connection, body: &Document) -> CmdResult {
    let Some(conv) = conn.conversation.as_mut() else {
        return fail(error::BAD_VALUE, "No SASL session state found");
    };
    if conv.finished {
        let (user, db) = (conv.user.clone(), conv.db.clone());
        conn.conversation = None;
        conn.users.push((user, db));
        return Ok(doc! { "conversationId": 1, "done": true, "payload": bin(Vec::new()) });
    }
    let server_final = match conv.finish(&payload_bytes(body)) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!("saslContinue failed: {e}");
            conn.conversation = None;
            return Err(auth_failed());
        }
    };
    let done = conn.skip_empty_exchange;
    if done {
        let (user, db) = (conv.user.clone(), conv.db.clone());
        conn.conversation = None;
        conn.users.push((user, db));
    }
    Ok(doc! { "conversationId": 1, "done": done, "payload": bin(server_final.into_bytes()) })
}

// ---- writes ------------------------------------------------------------------

/// Parsed `writeConcern`.
pub(crate) struct WriteConcern {
    /// None = majority; Some(n) = n members.
    pub w: Option<i64>,
    pub wtimeout: Option<Duration>,
}

pub(crate) fn write_concern(body: &Document) -> WriteConcern {
    let mut wc = WriteConcern {
        w: None,
        wtimeout: None,
    };
    if let Ok(d) = body.get_document("writeConcern") {
        match d.get("w") {
            Some(Bson::String(s)) if s == "majority" => wc.w = None,
            Some(v) => wc.w = num(Some(v)).map(|n| n as i64),
            None => {}
        }
        wc.wtimeout = timeout_ms(num(d.get("wtimeout")).or(num(d.get("wtimeoutMS"))));
    }
    wc
}

/// Why a write-concern wait ended without success.
pub(crate) enum WaitFailure {
    TimedOut,
    SteppedDown,
}

pub(crate) fn not_primary() -> CmdError {
    CmdError::new(error::NOT_WRITABLE_PRIMARY, "not primary")
}

/// Appends operations as the primary; returns the optime of the last one and the
/// role generation to detect a step-down while waiting.
pub(crate) fn write_ops(member: &Member, ops: Vec<Op>) -> Result<(OpTime, u64), CmdError> {
    write_planned(member, |_| (ops, ())).map(|(optime, generation, ())| (optime, generation))
}

/// The primary's last optime and role generation: what a write that changed
/// nothing waits for (mongod's `setLastOpToSystemLastOpTime`).
pub(crate) fn last_op(member: &Member) -> Result<(OpTime, u64), CmdError> {
    write_ops(member, Vec::new())
}

/// Plans a write on the primary's data and appends the operations the plan
/// returns, both under the member's locks so no other write interleaves. Returns
/// the optime to wait for (the last entry, or the last optime when the plan wrote
/// nothing), the role generation, and the plan's result.
pub(crate) fn write_planned<R>(
    member: &Member,
    plan: impl FnOnce(&DurableState) -> (Vec<Op>, R),
) -> Result<(OpTime, u64, R), CmdError> {
    let inner = member.lock();
    // A primary attempting a step-down or still catching up after its
    // election accepts no writes (`TopologyCoordinator::canAcceptWrites`:
    // only leader mode "master").
    if !Member::writable(&inner) {
        return Err(not_primary());
    }
    let mut disk = member.disk();
    let (ops, result) = plan(&disk);
    let term = disk.term;
    for op in ops {
        let optime = disk.next_optime(term, now_ms());
        let entry = OplogEntry::new(optime, now_ms(), op);
        if !member.room_for(&disk, crate::disk::write_bytes(&entry)) {
            // The process dies; the client gets no answer (`server` sends
            // none once the member has an exit code).
            drop(disk);
            drop(inner);
            member.disk_full();
            return Err(CmdError::new(
                error::INTERNAL_ERROR,
                "No space left on device",
            ));
        }
        disk.append(entry);
    }
    Ok((disk.last_optime(), inner.role_generation, result))
}

pub(crate) async fn wait_for_write_concern(
    member: &Member,
    optime: OpTime,
    generation: u64,
    wc: &WriteConcern,
) -> Result<(), WaitFailure> {
    let deadline = wc.wtimeout.map(|t| Instant::now() + t);
    loop {
        let enough_members = match wc.w {
            Some(n) if n > 1 => count_members_with(member, optime) >= n as usize,
            _ => true,
        };
        {
            let inner = member.lock();
            let done = match wc.w {
                None => inner.commit_point >= optime,
                Some(_) => enough_members,
            };
            if done {
                return Ok(());
            }
            if inner.role_generation != generation {
                return Err(WaitFailure::SteppedDown);
            }
        }
        if deadline.map(|d| Instant::now() >= d).unwrap_or(false) {
            return Err(WaitFailure::TimedOut);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

fn count_members_with(member: &Member, optime: OpTime) -> usize {
    let Some(net) = member.network() else {
        return 0;
    };
    let Some(cfg) = member.disk().config.clone() else {
        return 0;
    };
    let me = member.self_host();
    cfg.members
        .iter()
        .filter(|m| !m.arbiter_only)
        .filter(|m| {
            if Some(&m.host) == me.as_ref() {
                true
            } else {
                net.dial(member, &m.host)
                    .map(|p| p.last_optime() >= optime)
                    .unwrap_or(false)
            }
        })
        .count()
}

pub(crate) fn write_concern_error(f: WaitFailure, body: &Document) -> Document {
    let wc = body
        .get_document("writeConcern")
        .cloned()
        .unwrap_or_else(|_| doc! {"w": "majority"});
    match f {
        WaitFailure::TimedOut => doc! {
            "code": error::WRITE_CONCERN_FAILED, "codeName": "WriteConcernFailed",
            "errmsg": "waiting for replication timed out", "errInfo": { "wtimeout": true, "writeConcern": wc },
        },
        WaitFailure::SteppedDown => doc! {
            "code": error::INTERRUPTED_DUE_TO_REPL_STATE_CHANGE, "codeName": "InterruptedDueToReplStateChange",
            "errmsg": "operation was interrupted because a replica set state change occurred", "errInfo": { "writeConcern": wc },
        },
    }
}

/// Runs `ops` as one replicated write and applies the write concern; user
/// management commands fail outright when the concern fails, as mongod does.
async fn user_write(member: &Member, body: &Document, op: Op) -> CmdResult {
    let (optime, generation) = write_ops(member, vec![op])?;
    match wait_for_write_concern(
        member,
        optime,
        generation,
        &crate::rwc_defaults::effective_write_concern(member, body),
    )
    .await
    {
        Ok(()) => Ok(doc! {}),
        Err(f) => {
            let mut d = doc! { "ok": 1.0 };
            d.insert("writeConcernError", write_concern_error(f, body));
            Ok(d)
        }
    }
}

fn roles_of(body: &Document, db: &str) -> Bson {
    let roles = body.get_array("roles").cloned().unwrap_or_default();
    Bson::Array(
        roles
            .into_iter()
            .map(|r| match r {
                Bson::String(name) => Bson::Document(doc! { "role": name, "db": db }),
                other => other,
            })
            .collect(),
    )
}

async fn create_user(member: &Member, body: &Document) -> CmdResult {
    let db = db_of(body);
    let user = body
        .get_str("createUser")
        .map_err(|_| CmdError::new(error::BAD_VALUE, "createUser must be a string"))?;
    let pwd = body.get_str("pwd").map_err(|_| {
        CmdError::new(
            error::BAD_VALUE,
            "Must provide a 'pwd' field for all user documents",
        )
    })?;
    if !member.is_writable_primary() {
        return Err(not_primary());
    }
    if member.disk().user(&db, user).is_some() {
        return fail(
            error::USER_ALREADY_EXISTS,
            format!("User \"{user}@{db}\" already exists"),
        );
    }
    let doc = user_document(&db, user, pwd, roles_of(body, &db));
    user_write(member, body, Op::PutUser { doc }).await
}

async fn update_user(member: &Member, body: &Document) -> CmdResult {
    let db = db_of(body);
    let user = body
        .get_str("updateUser")
        .map_err(|_| CmdError::new(error::BAD_VALUE, "updateUser must be a string"))?;
    if !member.is_writable_primary() {
        return Err(not_primary());
    }
    let updated = ["pwd", "customData", "roles", "authenticationRestrictions"];
    if !updated.iter().any(|field| body.contains_key(field)) {
        return fail(
            error::BAD_VALUE,
            "Must specify at least one field to update in updateUser",
        );
    }
    let Some(mut doc) = member.disk().user(&db, user).cloned() else {
        return fail(
            error::USER_NOT_FOUND,
            format!("Could not find user \"{user}\" for db \"{db}\""),
        );
    };
    if let Ok(pwd) = body.get_str("pwd") {
        doc.insert("credentials", scram::make_credentials(user, pwd));
    }
    if body.contains_key("roles") {
        doc.insert("roles", roles_of(body, &db));
    }
    user_write(member, body, Op::PutUser { doc }).await
}

async fn drop_user(member: &Member, body: &Document) -> CmdResult {
    let db = db_of(body);
    let user = body
        .get_str("dropUser")
        .map_err(|_| CmdError::new(error::BAD_VALUE, "dropUser must be a string"))?;
    if !member.is_writable_primary() {
        return Err(not_primary());
    }
    if member.disk().user(&db, user).is_none() {
        return fail(
            error::USER_NOT_FOUND,
            format!("Could not find user \"{user}\" for db \"{db}\""),
        );
    }
    user_write(
        member,
        body,
        Op::DropUser {
            id: format!("{db}.{user}"),
        },
    )
    .await
}

fn users_info(member: &Member, body: &Document) -> CmdResult {
    let db = db_of(body);
    let wanted: Option<Vec<(String, String)>> = match body.get("usersInfo") {
        Some(Bson::String(u)) => Some(vec![(db.clone(), u.clone())]),
        Some(Bson::Document(d)) => Some(vec![(
            d.get_str("db").unwrap_or(&db).to_string(),
            d.get_str("user").unwrap_or_default().to_string(),
        )]),
        Some(Bson::Array(a)) => Some(
            a.iter()
                .filter_map(|v| match v {
                    Bson::String(u) => Some((db.clone(), u.clone())),
                    Bson::Document(d) => Some((
                        d.get_str("db").unwrap_or(&db).to_string(),
                        d.get_str("user").ok()?.to_string(),
                    )),
                    _ => None,
                })
                .collect(),
        ),
        _ => None,
    };
    let show_credentials = body.get_bool("showCredentials").unwrap_or(false);
    let disk = member.disk();
    let users: Vec<Bson> = disk
        .collection(USERS_NS)
        .iter()
        .filter(|u| {
            let (udb, uname) = (
                u.get_str("db").unwrap_or_default(),
                u.get_str("user").unwrap_or_default(),
            );
            match &wanted {
                Some(list) => list.iter().any(|(d, n)| d == udb && n == uname),
                None => udb == db,
            }
        })
        .map(|u| {
            let mut out = u.clone();
            let mechs: Vec<Bson> = u
                .get_document("credentials")
                .map(|c| c.keys().map(|k| Bson::String(k.clone())).collect())
                .unwrap_or_default();
            if !show_credentials {
                out.remove("credentials");
            }
            out.insert("mechanisms", mechs);
            Bson::Document(out)
        })
        .collect();
    Ok(doc! { "users": users })
}

/// A duplicate `_id` write error as mongod reports it (with `keyPattern` and
/// `keyValue`).
pub(crate) fn duplicate_key_error(index: usize, ns: &str, id: &Bson) -> Bson {
    Bson::Document(doc! {
        "index": index as i32, "code": error::DUPLICATE_KEY,
        "keyPattern": { "_id": 1 }, "keyValue": { "_id": id.clone() },
        "errmsg": format!("E11000 duplicate key error collection: {ns} index: _id_ dup key: {{ _id: {} }}", render(id)),
    })
}

/// A write error entry (`{index, code, errmsg}`).
pub(crate) fn write_error(index: usize, e: &CmdError) -> Bson {
    Bson::Document(doc! { "index": index as i32, "code": e.code, "errmsg": e.errmsg.clone() })
}

/// The reply of a write command: waits for the write concern on `optime` (also
/// when nothing was written: mongod then waits for the last optime) and adds
/// `writeErrors` / `writeConcernError`.
pub(crate) async fn finish_write(
    member: &Member,
    body: &Document,
    (optime, generation): (OpTime, u64),
    mut reply: Document,
    write_errors: Vec<Bson>,
) -> CmdResult {
    if let Err(f) = wait_for_write_concern(
        member,
        optime,
        generation,
        &crate::rwc_defaults::effective_write_concern(member, body),
    )
    .await
    {
        reply.insert("writeConcernError", write_concern_error(f, body));
    }
    if !write_errors.is_empty() {
        reply.insert("writeErrors", write_errors);
    }
    Ok(reply)
}

/// The name of the collection a CRUD command targets (mongod's
/// `parseNsCollectionRequired`: 73 when it is not a string).
pub(crate) fn collection_name<'b>(body: &'b Document, command: &str) -> Result<&'b str, CmdError> {
    match body.get(command) {
        Some(Bson::String(c)) => Ok(c),
        Some(other) => fail(
            error::INVALID_NAMESPACE,
            format!(
                "collection name has invalid type {}",
                crate::values::type_name(other)
            ),
        ),
        None => fail(error::INVALID_NAMESPACE, "collection name has invalid type"),
    }
}

async fn insert(member: &Member, body: &Document) -> CmdResult {
    let db = db_of(body);
    let coll = collection_name(body, "insert")?;
    let ns = format!("{db}.{coll}");
    let docs = body
        .get_array("documents")
        .map_err(|_| CmdError::new(error::FAILED_TO_PARSE, "missing documents"))?;
    let ordered = body.get_bool("ordered").unwrap_or(true);
    if !member.is_writable_primary() {
        return Err(not_primary());
    }
    let mut docs_in = Vec::new();
    for d in docs {
        let Bson::Document(d) = d else {
            return fail(error::TYPE_MISMATCH, "documents must be objects");
        };
        docs_in.push(d.clone());
    }
    let binary = member.version();
    let (optime, generation, (n, write_errors)) = write_planned(member, |disk| {
        let mut ops = Vec::new();
        let mut write_errors = Vec::new();
        let mut ids: Vec<Bson> = disk
            .collection(&ns)
            .iter()
            .filter_map(|d| d.get("_id").cloned())
            .collect();
        for (i, mut d) in docs_in.into_iter().enumerate() {
            if !d.contains_key("_id") {
                let mut with_id = doc! { "_id": ObjectId::new() };
                with_id.extend(d);
                d = with_id;
            }
            let id = d.get("_id").cloned().unwrap_or(Bson::Null);
            let refused = if ids.iter().any(|x| values_equal(x, &id)) {
                Some(duplicate_key_error(i, &ns, &id))
            } else if is_fcv_document(&ns, &d) {
                // The FCV op observer parses the document; a value the binary
                // cannot run fails the write.
                crate::fcv::check_write(binary, &d)
                    .err()
                    .map(|e| write_error(i, &e))
            } else {
                None
            };
            if let Some(err) = refused {
                write_errors.push(err);
                if ordered {
                    break;
                }
                continue;
            }
            ids.push(id);
            ops.push(Op::Insert {
                ns: ns.clone(),
                doc: d,
            });
        }
        let n = ops.len() as i32;
        (ops, (n, write_errors))
    })?;
    finish_write(
        member,
        body,
        (optime, generation),
        doc! { "n": n },
        write_errors,
    )
    .await
}
