//! Command dispatch for one connection: access control (code 13 before auth,
//! with mongod's localhost exception while no user exists), the handshake and
//! diagnostic commands, SCRAM and user management. The write path (write
//! concern, insert) lives in [`crate::writes`], a retryable write's session
//! and error labels in [`crate::retryable`], replica-set administration in
//! [`crate::repl_commands`], reads (find, aggregate) in [`crate::query`],
//! update and delete in [`crate::update`], featureCompatibilityVersion in
//! [`crate::fcv`].

use crate::error::{self, fail, CmdError};
use crate::member::{user_document, Member, MemberState};
use crate::scram::{self, Conversation, Mechanism};
use crate::state::{Op, USERS_NS};
use bson::{doc, spec::BinarySubtype, Binary, Bson, DateTime, Document};
use std::sync::Arc;
use std::time::Duration;

pub(crate) use crate::writes::{
    collection_name, duplicate_key_error, finish_write, last_op, not_primary,
    wait_for_write_concern, write_concern, write_concern_error, write_error, write_ops,
    write_planned, WaitFailure, WriteConcern,
};

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
    let mut d = match result {
        Ok(mut d) => {
            if !d.contains_key("ok") {
                d.insert("ok", 1.0);
            }
            d
        }
        Err(e) => e.to_document(),
    };
    if crate::retryable::append_error_labels(&body, &mut d) && !d.contains_key("topologyVersion") {
        d.insert("topologyVersion", topology_version(member));
    }
    d
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

/// Every command this simulator runs; any other is 59, before the session
/// fields are looked at (mongod finds the command first).
const COMMANDS: &[&str] = &[
    "hello",
    "isMaster",
    "ismaster",
    "ping",
    "buildInfo",
    "buildinfo",
    "getParameter",
    "setParameter",
    "rotateCertificates",
    "endSessions",
    "serverStatus",
    "dbStats",
    "dbstats",
    "collStats",
    "collstats",
    "connectionStatus",
    "logout",
    "saslStart",
    "saslContinue",
    "createUser",
    "updateUser",
    "dropUser",
    "usersInfo",
    "insert",
    "update",
    "delete",
    "setFeatureCompatibilityVersion",
    "setDefaultRWConcern",
    "getDefaultRWConcern",
    "find",
    "aggregate",
    "replSetInitiate",
    "replSetGetConfig",
    "replSetGetStatus",
    "replSetReconfig",
    "replSetStepDown",
    "replSetFreeze",
    "replSetStepUp",
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
    if !COMMANDS.contains(&name) {
        return fail(
            error::COMMAND_NOT_FOUND,
            format!("no such command: '{name}'"),
        );
    }
    let txn = crate::retryable::operation_session_info(member, conn, name, body)?;
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
        "insert" => crate::writes::insert(member, body, txn.as_ref()).await,
        "update" => crate::update::update(member, body, txn.as_ref()).await,
        "delete" => crate::update::delete(member, body, txn.as_ref()).await,
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
    conn: &mut Connection,
    body: &Document,
    legacy: bool,
) -> CmdResult {
    let speculative = speculative_authenticate(member, conn, body, legacy)?;
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
    let mut reply = hello_response(member, conn, body, legacy);
    if let Some(speculative) = speculative {
        reply.insert("speculativeAuthenticate", speculative);
    }
    Ok(reply)
}

/// A `saslStart` carried in the handshake (`speculativeAuthenticate`, 4.4+:
/// `hello_auth.cpp` `handleHelloAuth`, 4.4's `CmdIsMaster::run`): its reply
/// goes into the handshake's, and the client goes on with `saslContinue`.
/// A malformed field fails the handshake; a start that fails
/// (`sasl_commands.cpp` `doSpeculativeSaslStart`: no `db`, an unknown
/// mechanism or user) is as if none was made, and the client starts over.
fn speculative_authenticate(
    member: &Member,
    conn: &mut Connection,
    body: &Document,
    legacy: bool,
) -> Result<Option<Document>, CmdError> {
    let Some(value) = body.get("speculativeAuthenticate") else {
        return Ok(None);
    };
    let field = if legacy { "isMaster" } else { "hello" };
    let Bson::Document(speculative) = value else {
        return Err(CmdError::new(
            error::BAD_VALUE,
            format!("{field}.speculativeAuthenticate must be an Object"),
        ));
    };
    let Some(command) = speculative.keys().next() else {
        return Err(CmdError::new(
            error::BAD_VALUE,
            format!("{field}.speculativeAuthenticate must be a non-empty Object"),
        ));
    };
    match command.as_str() {
        "saslStart" => {
            let Ok(db) = speculative.get_str("db") else {
                return Ok(None);
            };
            let mut start = speculative.clone();
            start.insert("$db", db);
            Ok(sasl_start(member, conn, &start).ok())
        }
        // doSpeculativeAuthenticate (MONGODB-X509): no client authenticates
        // with a certificate here, and its failure is swallowed the same way.
        "authenticate" => Ok(None),
        other => Err(CmdError::new(
            error::UNKNOWN_SPECULATIVE_AUTHENTICATE,
            format!("{field}.speculativeAuthenticate unknown command: {other}"),
        )),
    }
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

// ---- user management ----------------------------------------------------------

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
