//! MongoDB I/O: the one narrow interface through which the operator talks to
//! mongod, with the official `mongodb` driver behind it.
//!
//! Every call has a timeout. Members are asked directly (`directConnection=true`)
//! when the question is about one member (is it up, does it have a config, which
//! set is it in) — such a question ends as soon as the member turns the
//! connection away, without waiting for server selection to give up — and a
//! reconfig or a step-down goes directly to the primary the plan was made on
//! (never to whichever member the driver sees as primary by then: mongod
//! answers 10107 and the pass plans again). The set is read on the primary
//! the members asked name, when it confirms it, else through the seed list;
//! users are kept through the seed list. What cannot have changed since an
//! earlier pass is not asked again ([`MembersSeen`]). The operator authenticates
//! as the root user with SCRAM-SHA-256; credentials never reach logs (the driver
//! redacts them in `Debug`, and [`RootCredentials`] does too). Only the
//! disaster recovery an SRE asked for sets `force`
//! ([`recovery_store`], [`crate::recovery`]).

pub mod client_tls;
pub mod config_doc;
mod probe;
pub mod recovery_store;
pub mod roll_store;
mod seen;
pub mod served;
mod set_reading;

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::future::IntoFuture;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use mongodb::bson::{doc, Bson, Document};
use mongodb::event::sdam::SdamEvent;
use mongodb::event::EventHandler;
use mongodb::options::{
    AuthMechanism, ClientOptions, Credential, ReadPreference, SelectionCriteria, ServerAddress,
    ServerMonitoringMode, Tls, TlsOptions,
};
use mongodb::Client;
use tokio::sync::watch;

use crate::api::TlsMode;
use crate::hostconf::MemberAddress;
use crate::observe::ObservedSet;
use crate::replset::{ClusterWriteConcern, DefaultW, MemberState, ReplicaSetConfig};
use crate::validate::RootCredentials;
pub use client_tls::ClientTls;
use config_doc::{initiate_document, integer, reconfig_document};
pub use seen::MembersSeen;

/// Error codes the operator handles (`docs/replica-set-rules.md`).
pub mod codes {
    /// Command needs authentication.
    pub const UNAUTHORIZED: i32 = 13;
    /// Authentication failed.
    pub const AUTHENTICATION_FAILED: i32 = 18;
    /// replSetInitiate on a member that has a config.
    pub const ALREADY_INITIALIZED: i32 = 23;
    /// No host of the config is the member itself (mongod's isSelf: it
    /// connects to each host and compares instance ids).
    pub const NODE_NOT_FOUND: i32 = 74;
    /// No replica-set config yet.
    pub const NOT_YET_INITIALIZED: i32 = 94;
    /// mongod refused the new config: every validation failure of a
    /// reconfig (5.0+: the implicit default write concern, the PSA rule, …).
    /// A refusal, not a race, unless the config moved meanwhile.
    pub const NEW_CONFIG_INCOMPATIBLE: i32 = 103;
    /// An initiate or reconfig is already running.
    pub const CONFIGURATION_IN_PROGRESS: i32 = 109;
    /// stepDown found no caught-up electable secondary.
    pub const EXCEEDED_TIME_LIMIT: i32 = 262;
    /// The current config is not majority-committed yet.
    pub const CURRENT_CONFIG_NOT_COMMITTED: i32 = 308;
    /// Not the primary.
    pub const NOT_WRITABLE_PRIMARY: i32 = 10107;
    /// A document with this `_id` exists (the lease is held).
    pub const DUPLICATE_KEY: i32 = 11000;
    /// A member answering that it was removed from its set's config.
    pub const INVALID_REPLICA_SET_CONFIG: i32 = 93;
    /// The reconfig errors another cluster's concurrent change causes: retried with backoff.
    pub const RETRYABLE_RECONFIG: [i32; 3] = [
        NOT_WRITABLE_PRIMARY,
        CONFIGURATION_IN_PROGRESS,
        CURRENT_CONFIG_NOT_COMMITTED,
    ];
}

/// Timeout of one call to mongod.
const CALL_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the driver looks for a suitable server in the set.
const SERVER_SELECTION_TIMEOUT: Duration = Duration::from_secs(5);
/// How long it waits for one member asked directly (a member that is down should
/// not hold up the pass).
const DIRECT_SELECTION_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the driver's monitors check each member of a client after their
/// first look. A client lives for one pass, so only a pass longer than this
/// (a step-down waiting for a secondary) sees a second check; nothing reads
/// the monitors' results but server selection, and the driver checks a member
/// again at once when it answers "not primary" or a call fails. (When clients
/// were kept across passes, the driver's default of 10 s made the monitors'
/// `hello`s 222 of the 264 commands per instance a minute at rest: `lab
/// bench`, BENCHMARKS.md.)
const HEARTBEAT_FREQUENCY: Duration = Duration::from_secs(30);
/// TCP connect timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long closing a pass's clients may take: their `endSessions` is a
/// courtesy (mongod reaps idle sessions after 30 minutes), never worth holding
/// the instance's next pass for.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(3);

/// What went wrong talking to mongod.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum MongoError {
    /// mongod answered `{ok: 0}` with a code.
    #[error("{code_name} ({code}): {message}")]
    Command {
        /// Numeric code.
        code: i32,
        /// `codeName`.
        code_name: String,
        /// `errmsg`.
        message: String,
    },
    /// No answer in time, or no suitable server.
    #[error("no answer from {0}")]
    Unreachable(String),
    /// The answer could not be understood.
    #[error("unexpected answer: {0}")]
    Protocol(String),
}

impl MongoError {
    /// The server's error code, when it answered with one.
    pub fn code(&self) -> Option<i32> {
        match self {
            MongoError::Command { code, .. } => Some(*code),
            _ => None,
        }
    }

    fn from_driver(error: mongodb::error::Error, target: &str) -> Self {
        match *error.kind {
            mongodb::error::ErrorKind::Command(ref command) => MongoError::Command {
                code: command.code,
                code_name: command.code_name.clone(),
                message: command.message.clone(),
            },
            mongodb::error::ErrorKind::Authentication { .. } => MongoError::Command {
                code: codes::AUTHENTICATION_FAILED,
                code_name: "AuthenticationFailed".to_string(),
                message: format!("authentication to {target} failed"),
            },
            mongodb::error::ErrorKind::ServerSelection { .. }
            | mongodb::error::ErrorKind::Io(_)
            | mongodb::error::ErrorKind::ConnectionPoolCleared { .. } => {
                MongoError::Unreachable(target.to_string())
            }
            _ => MongoError::Protocol(error.to_string()),
        }
    }
}

/// The replica set as read through the seed list: what the planner and the
/// status see, and the raw config document the next reconfig is built from.
#[derive(Clone, Debug, PartialEq)]
pub struct SetReading {
    /// The config, primary, member states and commitment.
    pub set: ObservedSet,
    /// The document behind `set.config`, edited to build the next reconfig (so
    /// fields the model does not know are kept).
    pub config_document: Document,
}

/// Clients to the members of the replica sets, one per seed list (or member,
/// for direct connections) and credentials, made when first asked for and
/// closed by [`MongoGateway::close`]: the controller gives each pass a gateway
/// of its own and closes it when the pass ends, with what the instance's
/// earlier passes saw of its members ([`MembersSeen`]).
#[derive(Clone, Default)]
pub struct MongoGateway {
    clients: Arc<Mutex<BTreeMap<ClientKey, GatewayClient>>>,
    /// The TLS files of this pass's clients; `None`: plain connections.
    tls: Arc<Mutex<Option<ClientTls>>>,
    /// What the instance's passes saw of its members.
    seen: MembersSeen,
    /// What this pass's members said in their `hello`.
    pass: Arc<Mutex<PassHellos>>,
}

/// What the members asked directly this pass said in their `hello`.
#[derive(Default)]
struct PassHellos {
    /// The members asked.
    asked: BTreeSet<MemberAddress>,
    /// The primary one of them is (it accepts writes), else the one they name.
    primary: Option<(MemberAddress, bool)>,
    /// A probe was answered from memory, without credentials.
    from_memory: bool,
}

/// A driver client with, for one member asked directly, what the driver's
/// monitor found when it last checked the member.
#[derive(Clone)]
struct GatewayClient {
    client: Client,
    /// Direct clients only: the monitor's last check of the member.
    heartbeat: Option<watch::Receiver<Heartbeat>>,
}

/// What the monitor of a client to one member found at its last check.
#[derive(Clone, Debug)]
enum Heartbeat {
    /// Not checked yet.
    Pending,
    /// It answered the monitor's `hello` (its handshake, legacy `isMaster`
    /// until the member says `helloOk`) with this.
    Answered(Arc<Document>),
    /// The connection was refused, reset or timed out.
    TurnedAway,
}

#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
struct ClientKey {
    hosts: Vec<MemberAddress>,
    direct: bool,
    set_name: Option<String>,
    /// The user and its password's fingerprint; `None`: no credentials.
    user: Option<(String, String)>,
    tls: Option<ClientTls>,
}

impl MongoGateway {
    /// A gateway with no open client, remembering nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// A gateway with no open client that trusts and keeps `seen`, what the
    /// instance's earlier passes saw of its members.
    pub fn remembering(seen: MembersSeen) -> Self {
        MongoGateway {
            seen,
            ..Self::default()
        }
    }

    /// Notes what `member`, asked directly, said in its `hello`: the primary,
    /// as it accepts writes itself or names another.
    fn saw_hello(&self, member: &MemberAddress, hello: &Document) {
        let mut pass = self.pass.lock().unwrap_or_else(|p| p.into_inner());
        pass.asked.insert(member.clone());
        let itself = seen::state_in_hello(hello) == Some(MemberState::Primary);
        let named = hello
            .get_str("primary")
            .ok()
            .and_then(|primary| MemberAddress::parse(primary).ok());
        match (itself, named) {
            (true, _) => pass.primary = Some((member.clone(), true)),
            (false, Some(named)) if !pass.primary.as_ref().is_some_and(|(_, own)| *own) => {
                pass.primary = Some((named, false))
            }
            _ => {}
        }
    }

    fn answered_from_memory(&self) {
        self.pass
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .from_memory = true;
    }

    /// Whether a probe of this pass was answered from memory; if one was,
    /// every remembered probe is forgotten, so that asking again asks the
    /// members themselves, with the credentials (a set that could not be
    /// read may be one that refuses them).
    pub fn forget_answers_from_memory(&self) -> bool {
        let from_memory = std::mem::take(
            &mut self
                .pass
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .from_memory,
        );
        if from_memory {
            self.seen.forget_probes();
        }
        from_memory
    }

    /// Connects this pass's clients with TLS through these files (`None`:
    /// in plain text), from the next client made on.
    pub fn use_tls(&self, tls: Option<ClientTls>) {
        *self
            .tls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner()) = tls;
    }

    /// Closes every client at once: their monitors stop and their
    /// connections close now, not when a dropped client's monitor next wakes
    /// (up to a heartbeat later). Called when nothing is running on them.
    ///
    /// Bounded by `CLOSE_TIMEOUT` (3 s): the driver ends its sessions with an
    /// `endSessions` that has no timeout, and a member whose route started
    /// dropping packets never answers it. Clients still closing then are
    /// dropped, which stops their monitors at their next check.
    pub async fn close(&self) {
        let asked = std::mem::take(
            &mut self
                .pass
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .asked,
        );
        if !asked.is_empty() {
            self.seen.keep_only(&asked);
        }
        let clients = std::mem::take(
            &mut *self
                .clients
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner()),
        );
        let shutdowns = clients.into_values().map(|gateway_client| {
            gateway_client
                .client
                .shutdown()
                .immediate(true)
                .into_future()
        });
        if tokio::time::timeout(CLOSE_TIMEOUT, futures::future::join_all(shutdowns))
            .await
            .is_err()
        {
            tracing::debug!("a member did not answer while its client closed; dropped it");
        }
    }

    fn client(
        &self,
        hosts: &[MemberAddress],
        direct: bool,
        set_name: Option<&str>,
        credentials: &RootCredentials,
    ) -> Result<GatewayClient, MongoError> {
        self.cached_client(hosts, direct, set_name, Some(credentials))
    }

    /// A client to one member, asked directly without credentials: all an
    /// arbiter answers. It holds no users, and drivers never authenticate to
    /// one (the Rust driver skips an arbiter: `ServerType::can_auth`).
    fn anonymous_client(&self, member: &MemberAddress) -> Result<GatewayClient, MongoError> {
        self.cached_client(std::slice::from_ref(member), true, None, None)
    }

    fn cached_client(
        &self,
        hosts: &[MemberAddress],
        direct: bool,
        set_name: Option<&str>,
        credentials: Option<&RootCredentials>,
    ) -> Result<GatewayClient, MongoError> {
        let key = ClientKey {
            hosts: hosts.to_vec(),
            direct,
            set_name: set_name.map(str::to_string),
            user: credentials.map(|c| (c.username.clone(), crate::build::fingerprint(&c.password))),
            tls: self
                .tls
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .clone(),
        };
        let mut clients = self
            .clients
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if let Some(client) = clients.get(&key) {
            return Ok(client.clone());
        }
        let client = Self::new_client(hosts, direct, set_name, credentials, key.tls.as_ref())?;
        clients.insert(key, client.clone());
        Ok(client)
    }

    fn new_client(
        hosts: &[MemberAddress],
        direct: bool,
        set_name: Option<&str>,
        credentials: Option<&RootCredentials>,
        tls: Option<&ClientTls>,
    ) -> Result<GatewayClient, MongoError> {
        let credential = credentials.map(|credentials| {
            Credential::builder()
                .username(credentials.username.clone())
                .password(credentials.password.clone())
                .source("admin".to_string())
                .mechanism(AuthMechanism::ScramSha256)
                .build()
        });
        let mut options = ClientOptions::builder()
            .hosts(
                hosts
                    .iter()
                    .map(|h| ServerAddress::Tcp {
                        host: h.host.clone(),
                        port: Some(h.port),
                    })
                    .collect::<Vec<_>>(),
            )
            .direct_connection(direct)
            .repl_set_name(set_name.map(str::to_string))
            .credential(credential)
            .app_name("mongodb-member-operator".to_string())
            .server_selection_timeout(if direct {
                DIRECT_SELECTION_TIMEOUT
            } else {
                SERVER_SELECTION_TIMEOUT
            })
            .connect_timeout(CONNECT_TIMEOUT)
            .heartbeat_freq(HEARTBEAT_FREQUENCY)
            // A client lives for one pass: the streaming protocol's second
            // connection per member (round-trip times) would serve nothing.
            .server_monitoring_mode(ServerMonitoringMode::Poll)
            .tls(tls.map(|files| {
                Tls::Enabled(
                    TlsOptions::builder()
                        .ca_file_path(files.ca_file.clone())
                        .cert_key_file_path(files.certificate_key_file.clone())
                        .build(),
                )
            }))
            .build();
        let heartbeat = direct.then(|| {
            let (checked, heartbeat) = watch::channel(Heartbeat::Pending);
            options.sdam_event_handler = Some(EventHandler::callback(move |event| match event {
                SdamEvent::ServerHeartbeatFailed(_) => {
                    checked.send_replace(Heartbeat::TurnedAway);
                }
                SdamEvent::ServerHeartbeatSucceeded(succeeded) => {
                    checked.send_replace(Heartbeat::Answered(Arc::new(succeeded.reply)));
                }
                _ => {}
            }));
            heartbeat
        });
        let client =
            Client::with_options(options).map_err(|e| MongoError::Protocol(e.to_string()))?;
        Ok(GatewayClient { client, heartbeat })
    }

    /// The `hello` a member asked directly answered its client's monitor
    /// (the handshake the driver makes on every new client, so as fresh as
    /// a `hello` of our own, and without credentials or a session);
    /// unreachable when it turned the monitor away, or did not answer within
    /// the direct selection timeout.
    async fn hello(gateway_client: &GatewayClient, target: &str) -> Result<Document, MongoError> {
        let unreachable = || MongoError::Unreachable(target.to_string());
        let Some(mut heartbeat) = gateway_client.heartbeat.clone() else {
            return Err(MongoError::Protocol(format!(
                "no monitor of {target} alone"
            )));
        };
        let checked = async {
            let checked = heartbeat
                .wait_for(|checked| !matches!(checked, Heartbeat::Pending))
                .await;
            checked.map(|checked| checked.clone())
        };
        match tokio::time::timeout(DIRECT_SELECTION_TIMEOUT, checked).await {
            Ok(Ok(Heartbeat::Answered(reply))) => Ok(Document::clone(&reply)),
            _ => Err(unreachable()),
        }
    }

    /// Runs a question on a member asked directly, which is unreachable as
    /// soon as the driver's monitor finds it turning connections away: a
    /// member whose pod does not run yet (kube-proxy rejects the connection)
    /// should not hold the pass for the whole server-selection timeout, as
    /// the driver would (it looks again every 500 ms until then). With many
    /// instances, those waits would keep every worker busy with the same few
    /// instances while the others were never looked at.
    async fn ask(
        gateway_client: &GatewayClient,
        command: Document,
        target: &str,
    ) -> Result<Document, MongoError> {
        let answer = Self::run(gateway_client, command, None, target);
        let Some(mut heartbeat) = gateway_client.heartbeat.clone() else {
            return answer.await;
        };
        tokio::select! {
            biased;
            answer = answer => answer,
            // The sender lives as long as the client: an error cannot come
            // before the answer does.
            Ok(_) = heartbeat.wait_for(|checked| matches!(checked, Heartbeat::TurnedAway)) => {
                Err(MongoError::Unreachable(target.to_string()))
            }
        }
    }

    async fn run(
        client: &GatewayClient,
        command: Document,
        criteria: Option<SelectionCriteria>,
        target: &str,
    ) -> Result<Document, MongoError> {
        Self::run_on(client, "admin", command, criteria, target).await
    }

    async fn run_on(
        client: &GatewayClient,
        database: &str,
        command: Document,
        criteria: Option<SelectionCriteria>,
        target: &str,
    ) -> Result<Document, MongoError> {
        let database = client.client.database(database);
        let call = async {
            match criteria {
                Some(criteria) => {
                    database
                        .run_command(command)
                        .selection_criteria(criteria)
                        .await
                }
                None => database.run_command(command).await,
            }
        };
        with_timeout(call, target)
            .await?
            .map_err(|e| MongoError::from_driver(e, target))
    }

    /// The TLS mode one member runs (`getParameter tlsMode`).
    pub async fn tls_mode(
        &self,
        member: &MemberAddress,
        credentials: &RootCredentials,
    ) -> Result<TlsMode, MongoError> {
        let target = member.to_string();
        let client = self.client(std::slice::from_ref(member), true, None, credentials)?;
        let reply = Self::ask(&client, doc! {"getParameter": 1, "tlsMode": 1}, &target).await?;
        let mode = reply.get_str("tlsMode").unwrap_or_default();
        TlsMode::parse(mode)
            .ok_or_else(|| MongoError::Protocol(format!("getParameter answered tlsMode {mode:?}")))
    }

    /// `replSetInitiate` on `member` (directly) with `config`.
    pub async fn initiate(
        &self,
        member: &MemberAddress,
        config: &ReplicaSetConfig,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let client = self.client(std::slice::from_ref(member), true, None, credentials)?;
        Self::run(
            &client,
            doc! {"replSetInitiate": initiate_document(config)},
            None,
            &member.to_string(),
        )
        .await
        .map(drop)
    }

    /// The config version `member` holds, asked directly: whether the config
    /// moved since a plan was made.
    pub async fn config_version(
        &self,
        member: &MemberAddress,
        credentials: &RootCredentials,
    ) -> Result<i64, MongoError> {
        let client = self.client(std::slice::from_ref(member), true, None, credentials)?;
        let reply = Self::run(
            &client,
            doc! {"replSetGetConfig": 1},
            None,
            &member.to_string(),
        )
        .await?;
        reply
            .get_document("config")
            .ok()
            .and_then(|config| integer(config.get("version")))
            .ok_or_else(|| MongoError::Protocol("replSetGetConfig without a version".into()))
    }

    /// `replSetReconfig` with `desired`, built from `current_document`, sent
    /// to `primary` directly: the primary the plan was made on. If it is no
    /// longer primary, mongod answers 10107 and the pass plans again. Never forced.
    pub async fn reconfig(
        &self,
        primary: &MemberAddress,
        current_document: &Document,
        desired: &ReplicaSetConfig,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let client = self.client(std::slice::from_ref(primary), true, None, credentials)?;
        let config = reconfig_document(current_document, desired);
        let command = doc! {"replSetReconfig": config, "force": false, "maxTimeMS": 10_000i64};
        Self::run(&client, command, None, &primary.to_string())
            .await
            .map(drop)
    }

    /// `setDefaultRWConcern` with `w` as the cluster-wide default write
    /// concern, sent to `primary` directly and written with `w: "majority"`,
    /// unless `primary` itself answers that one is set: mongod overwrites a
    /// set value without a word, and what the pass read may have come from
    /// before another cluster's primary pinned one. The value found set, if
    /// one was.
    pub async fn set_default_write_concern(
        &self,
        primary: &MemberAddress,
        w: DefaultW,
        credentials: &RootCredentials,
    ) -> Result<Option<ClusterWriteConcern>, MongoError> {
        let client = self.client(std::slice::from_ref(primary), true, None, credentials)?;
        let target = primary.to_string();
        let found = Self::run(&client, doc! {"getDefaultRWConcern": 1}, None, &target).await?;
        match config_doc::cluster_write_concern(&found) {
            ClusterWriteConcern::Implicit => {}
            set => return Ok(Some(set)),
        }
        let w = match w {
            DefaultW::Majority => Bson::String("majority".into()),
            DefaultW::One => Bson::Int32(1),
        };
        let command = doc! {
            "setDefaultRWConcern": 1,
            "defaultWriteConcern": {"w": w},
            "writeConcern": {"w": "majority", "wtimeout": 10_000i32},
        };
        Self::run(&client, command, None, &target)
            .await
            .map(|_| None)
    }

    /// `replSetStepDown` sent to `primary` directly: the member the plan wants
    /// stepped down, never whichever member the driver sees as primary now.
    /// If it is no longer primary, mongod answers 10107.
    pub async fn step_down(
        &self,
        primary: &MemberAddress,
        step_down_secs: i64,
        catch_up_secs: i64,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let client = self.client(std::slice::from_ref(primary), true, None, credentials)?;
        let command =
            doc! {"replSetStepDown": step_down_secs, "secondaryCatchUpPeriodSecs": catch_up_secs};
        Self::run(&client, command, None, &primary.to_string())
            .await
            .map(drop)
    }

    /// Creates `user` on the primary with `roles` (on `admin` unless given), or updates
    /// its password and roles when it exists. Idempotent.
    pub async fn ensure_user(
        &self,
        seeds: &[MemberAddress],
        set_name: &str,
        user: &UserSpec,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let client = self.client(seeds, false, Some(set_name), credentials)?;
        let primary = || Some(SelectionCriteria::ReadPreference(ReadPreference::Primary));
        let target = seed_text(seeds);
        let roles: Vec<Bson> = user
            .roles
            .iter()
            .map(|(role, database)| Bson::Document(doc! {"role": role, "db": database}))
            .collect();
        let existing = Self::run_on(
            &client,
            &user.database,
            doc! {"usersInfo": &user.name},
            primary(),
            &target,
        )
        .await?;
        let exists = existing
            .get_array("users")
            .map(|users| !users.is_empty())
            .unwrap_or(false);
        let command = if exists {
            doc! {"updateUser": &user.name, "pwd": &user.password, "roles": roles}
        } else {
            doc! {"createUser": &user.name, "pwd": &user.password, "roles": roles}
        };
        Self::run_on(&client, &user.database, command, primary(), &target)
            .await
            .map(drop)
    }
}

impl MongoGateway {
    /// Sets the password of `username` (on `admin`) on the primary, as
    /// `credentials`, acknowledged by a majority: once it returns, the set
    /// holds the new password wherever a majority of the members ever sees.
    pub async fn set_password(
        &self,
        seeds: &[MemberAddress],
        set_name: &str,
        username: &str,
        password: &str,
        credentials: &RootCredentials,
    ) -> Result<(), MongoError> {
        let client = self.client(seeds, false, Some(set_name), credentials)?;
        let primary = Some(SelectionCriteria::ReadPreference(ReadPreference::Primary));
        let command =
            doc! {"updateUser": username, "pwd": password, "writeConcern": {"w": "majority"}};
        Self::run_on(&client, "admin", command, primary, &seed_text(seeds))
            .await
            .map(drop)
    }
}

/// A user the operator keeps (clusterAdmin, clusterMonitor, the application user).
#[derive(Clone, PartialEq)]
pub struct UserSpec {
    /// Database the user is defined in.
    pub database: String,
    /// User name.
    pub name: String,
    /// Password.
    pub password: String,
    /// `(role, database)` pairs.
    pub roles: Vec<(String, String)>,
}

impl fmt::Debug for UserSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserSpec")
            .field("database", &self.database)
            .field("name", &self.name)
            .field("roles", &self.roles)
            .finish_non_exhaustive()
    }
}

async fn with_timeout<T>(call: impl Future<Output = T>, target: &str) -> Result<T, MongoError> {
    tokio::time::timeout(CALL_TIMEOUT, call)
        .await
        .map_err(|_| MongoError::Unreachable(target.to_string()))
}

fn seed_text(seeds: &[MemberAddress]) -> String {
    seeds
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
