//! Replica-set administration commands with mongod's check order, codes and
//! messages (replica-set-rules.md): replSetInitiate, replSetGetConfig,
//! replSetGetStatus, replSetReconfig, replSetFreeze, replSetStepUp (replSetStepDown is
//! in `step_down`).

use crate::commands::{num, secs, timeout_ms, CmdResult};
use crate::config::{check_reconfig_compatible, ReplSetConfig};
use crate::error::{self, fail, CmdError};
use crate::member::{now_ms, Member, MemberState};
use crate::network::Network;
use crate::state::{Op, OpTime, OplogEntry, SYSTEM_VERSION_NS};
use crate::version::Release;
use bson::{doc, oid::ObjectId, Bson, DateTime, Document};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// BSON truthiness (mongod's `trueValue()`).
pub(crate) fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        other => num(Some(other)).map(|n| n != 0.0).unwrap_or(true),
    }
}

fn no_config() -> CmdError {
    CmdError::new(
        error::NOT_YET_INITIALIZED,
        "no replset config has been received",
    )
}

fn network(member: &Member) -> Result<Arc<Network>, CmdError> {
    member
        .network()
        .ok_or_else(|| CmdError::new(error::COMMAND_FAILED, "network is shutting down"))
}

/// Clears the "config operation in progress" flag when dropped.
struct ConfigOpGuard<'a>(&'a Member);

impl<'a> ConfigOpGuard<'a> {
    fn acquire(member: &'a Member) -> Result<Self, CmdError> {
        let mut inner = member.lock();
        if inner.config_op_in_progress {
            return fail(error::CONFIGURATION_IN_PROGRESS, "Cannot run replSetReconfig because the node is currently updating its configuration");
        }
        inner.config_op_in_progress = true;
        Ok(ConfigOpGuard(member))
    }
}

impl Drop for ConfigOpGuard<'_> {
    fn drop(&mut self) {
        self.0.lock().config_op_in_progress = false;
    }
}

fn version_term(cfg: &ReplSetConfig) -> String {
    format!("{{version: {}, term: {}}}", cfg.version, cfg.term)
}

pub(crate) async fn initiate(member: &Arc<Member>, body: &Document) -> CmdResult {
    let net = network(member)?;
    if member.config().is_some() {
        return fail(error::ALREADY_INITIALIZED, "already initialized");
    }
    let _guard = ConfigOpGuard::acquire(member)?;
    let repl_set = member.spec().repl_set.clone();
    let mut arg = match body.get("replSetInitiate") {
        Some(Bson::Document(d)) if !d.is_empty() => d.clone(),
        Some(Bson::Document(_))
        | Some(Bson::Null)
        | None
        | Some(Bson::Int32(_))
        | Some(Bson::Int64(_))
        | Some(Bson::Double(_)) => {
            doc! { "_id": repl_set.clone(), "version": 1, "members": [{ "_id": 0, "host": member.listen() }] }
        }
        Some(_) => {
            return fail(
                error::INVALID_REPLICA_SET_CONFIG,
                "no configuration specified",
            )
        }
    };
    // Like mongod's replSetInitiate command: a config without `version` (the form
    // of the manual's tutorials and `rs.initiate(config)`) is version 1. Any other
    // version is checked below.
    if !arg.contains_key("version") {
        arg.insert("version", 1);
    }
    let mut cfg = ReplSetConfig::parse(&arg)
        .map_err(|e| CmdError::new(error::INVALID_REPLICA_SET_CONFIG, e))?;
    if cfg.set_name != repl_set {
        return fail(error::INVALID_REPLICA_SET_CONFIG, format!(
            "Attempting to initiate a replica set with name {}, but command line reports {repl_set}; rejecting", cfg.set_name));
    }
    let invalid = |msg: String| CmdError::new(error::INVALID_REPLICA_SET_CONFIG, msg);
    cfg.validate().map_err(invalid)?;
    cfg.check_arbiter_count(member.version()).map_err(invalid)?;
    if cfg.version != 1 {
        return Err(invalid(format!(
            "The config's version field must be 1 in a replSetInitiate config, but found {}",
            cfg.version
        )));
    }
    if cfg.members.iter().any(|m| m.newly_added) {
        return Err(invalid(
            "newlyAdded field is not allowed in replSetInitiate".into(),
        ));
    }
    // validateConfigForInitiate: findSelfInConfig's NodeNotFound as it is.
    let me = net.find_self(member, &cfg).cloned().ok_or_else(|| {
        CmdError::new(
            error::NODE_NOT_FOUND,
            format!(
            "No host described in new configuration with {} for replica set {} maps to this node",
            version_term(&cfg),
            cfg.set_name
        ),
        )
    })?;
    if !me.is_electable() {
        return Err(invalid(format!("This node, {}, with _id {} is not electable under the new configuration with {} for replica set {}",
            me.host, me.id, version_term(&cfg), cfg.set_name)));
    }
    // Quorum check: every member answers and has no config.
    let mut failures = Vec::new();
    for m in cfg.members.iter().filter(|m| m.host != me.host) {
        match net.dial(member, &m.host) {
            None => failures.push(format!(
                "{} failed with Error connecting to {}",
                m.host, m.host
            )),
            Some(peer) if peer.config().is_some() => failures.push(format!(
                "{} failed with replica set configuration already exists on that node",
                m.host
            )),
            Some(_) => {}
        }
    }
    if !failures.is_empty() {
        return fail(error::NODE_NOT_FOUND, format!(
            "replSetInitiate quorum check failed because not all proposed set members responded affirmatively: {}", failures.join(", ")));
    }
    cfg.term = 0;
    cfg.settings.replica_set_id = Some(ObjectId::new());
    let single_voter = cfg.voters().count() == 1;
    let mut inner = member.lock();
    {
        let mut disk = member.disk();
        if disk.config.is_some() {
            return fail(error::ALREADY_INITIALIZED, "already initialized");
        }
        disk.config = Some(cfg.clone());
        disk.initial_sync_pending = false;
        // `initializeReplSetStorage` creates the oplog (`createOplog`).
        member.create_oplog(&mut disk);
        let term = disk.term;
        let optime = disk.next_optime(term, now_ms());
        disk.append(OplogEntry::new(
            optime,
            now_ms(),
            Op::Noop {
                msg: "initiating set".into(),
            },
        ));
        // A clean start gets the binary's FCV (data from the image's entrypoint
        // already has one).
        if disk.fcv_document().is_none() {
            let optime = disk.next_optime(term, now_ms());
            disk.append(OplogEntry::new(
                optime,
                now_ms(),
                Op::Insert {
                    ns: SYSTEM_VERSION_NS.into(),
                    doc: crate::fcv::Fcv::Version(member.version().release()).document(),
                },
            ));
        }
    }
    member.install_config(&mut inner, cfg);
    if single_voter {
        inner.step_up_requested = true;
    }
    Ok(doc! {})
}

pub(crate) async fn get_config(member: &Member, body: &Document) -> CmdResult {
    let cfg = member.config().ok_or_else(no_config)?;
    if body.contains_key("$_internalIncludeNewlyAdded") {
        // CmdReplSetGetConfig: a test-only option, refused (whatever its value)
        // unless mongod runs with enableTestCommands, which production does not.
        return fail(
            error::INVALID_OPTIONS,
            "The '$_internalIncludeNewlyAdded' option is only supported when testing commands are enabled",
        );
    }
    let mut reply = doc! { "config": cfg.to_document() };
    if body.get_bool("commitmentStatus").unwrap_or(false) {
        // `processReplSetGetConfig`: `canAcceptNonLocalWrites`.
        if !member.is_writable_primary() {
            return fail(
                error::NOT_WRITABLE_PRIMARY,
                "commitmentStatus is only supported on primary.",
            );
        }
        let net = network(member)?;
        reply.insert("commitmentStatus", config_committed(member, &net, &cfg));
    }
    Ok(reply)
}

fn date_of(optime: OpTime) -> DateTime {
    DateTime::from_millis(optime.ts.time as i64 * 1000)
}

pub(crate) fn get_status(member: &Member) -> CmdResult {
    let cfg = member.config().ok_or_else(no_config)?;
    let inner = member.lock();
    if inner.state == MemberState::Removed {
        return fail(
            error::INVALID_REPLICA_SET_CONFIG,
            "Our replica set config is invalid or we are not a member of it",
        );
    }
    let disk = member.disk();
    let my_optime = disk.last_optime();
    let sync_source_id = |h: &Option<String>| {
        h.as_ref()
            .and_then(|h| cfg.member_by_host(h))
            .map(|m| m.id as i32)
            .unwrap_or(-1)
    };
    let mut members = Vec::new();
    for m in &cfg.members {
        let mut d = doc! { "_id": m.id as i32, "name": m.host.clone() };
        if Some(&m.host) == inner.self_host.as_ref() {
            d.insert("health", 1.0);
            d.insert("state", inner.state.code());
            d.insert("stateStr", inner.state.name());
            d.insert("uptime", member.uptime_secs() as i32);
            d.insert("optime", my_optime.to_document());
            d.insert("optimeDate", date_of(my_optime));
            d.insert(
                "lastAppliedWallTime",
                DateTime::from_millis(disk.last_wall_ms()),
            );
            d.insert(
                "syncSourceHost",
                inner.sync_source.clone().unwrap_or_default(),
            );
            d.insert("syncSourceId", sync_source_id(&inner.sync_source));
            if inner.too_stale {
                // `TopologyCoordinator::prepareStatusResponse`: the
                // maintenance-mode count of a too-stale member.
                d.insert("maintenanceMode", 1);
            }
            d.insert("infoMessage", "");
            if inner.state == MemberState::Primary {
                d.insert(
                    "electionTime",
                    bson::Timestamp {
                        time: (inner.election_date_ms / 1000) as u32,
                        increment: 1,
                    },
                );
                d.insert(
                    "electionDate",
                    DateTime::from_millis(inner.election_date_ms),
                );
            }
            d.insert("configVersion", cfg.version as i32);
            d.insert("configTerm", cfg.term);
            d.insert("self", true);
            d.insert("lastHeartbeatMessage", "");
        } else {
            let info = inner.peers.get(&m.host).cloned().unwrap_or_default();
            let view = info.view.clone().filter(|_| info.up);
            let state = view.as_ref().map(|v| v.state).unwrap_or(MemberState::Down);
            d.insert("health", if info.up { 1.0 } else { 0.0 });
            // `MemberData::setAuthIssue`: UNKNOWN (6), shown as not reachable.
            let code = if info.auth_issue { 6 } else { state.code() };
            d.insert("state", code);
            d.insert("stateStr", state.name());
            d.insert(
                "uptime",
                view.as_ref().map(|v| v.uptime_secs as i32).unwrap_or(0),
            );
            let optime = view.as_ref().map(|v| v.optime).unwrap_or(OpTime::NULL);
            d.insert("optime", optime.to_document());
            d.insert("optimeDurable", optime.to_document());
            d.insert("optimeDate", date_of(optime));
            d.insert("optimeDurableDate", date_of(optime));
            d.insert(
                "lastHeartbeat",
                DateTime::from_millis(info.last_heartbeat_ms),
            );
            d.insert(
                "lastHeartbeatRecv",
                DateTime::from_millis(info.last_heartbeat_ms),
            );
            d.insert("pingMs", 0_i64);
            // `setAuthIssue` clears the message; `prepareStatusResponse` adds
            // `authenticated: false` for such a member, and nothing otherwise.
            let message = match &info.connection_failure {
                Some(reason) => reason.as_str(),
                None if info.up || info.auth_issue => "",
                None => "Error connecting to host",
            };
            d.insert("lastHeartbeatMessage", message);
            if info.auth_issue {
                d.insert("authenticated", false);
            }
            let ss = view.as_ref().and_then(|v| v.sync_source.clone());
            d.insert("syncSourceHost", ss.clone().unwrap_or_default());
            d.insert("syncSourceId", sync_source_id(&ss));
            d.insert("infoMessage", "");
            if let Some(v) = view.as_ref().filter(|v| v.state == MemberState::Primary) {
                if let Some(id) = v.election_id {
                    d.insert("electionId", id);
                }
            }
            let peer_cfg = view.as_ref().and_then(|v| v.config.as_ref());
            d.insert(
                "configVersion",
                peer_cfg.map(|c| c.version as i32).unwrap_or(-1),
            );
            d.insert("configTerm", peer_cfg.map(|c| c.term).unwrap_or(-1));
        }
        members.push(Bson::Document(d));
    }
    let commit = inner.commit_point;
    let voters = cfg.voters().count() as i32;
    let mut status = doc! {
        "set": cfg.set_name.clone(),
        "date": DateTime::now(),
        "myState": inner.state.code(),
        "term": disk.term,
    };
    if inner.too_stale {
        // `ReplicationCoordinatorImpl::processReplSetGetStatus` (`tooStale`).
        status.insert("tooStale", true);
    }
    status.extend(doc! {
        "syncSourceHost": inner.sync_source.clone().unwrap_or_default(),
        "syncSourceId": sync_source_id(&inner.sync_source),
        "heartbeatIntervalMillis": cfg.settings.heartbeat_interval_millis,
        "majorityVoteCount": cfg.majority() as i32,
        "writeMajorityCount": (cfg.majority() as i32).min(cfg.voters().filter(|m| !m.arbiter_only).count() as i32),
        "votingMembersCount": voters,
        "writableVotingMembersCount": cfg.voters().filter(|m| !m.arbiter_only).count() as i32,
        "optimes": {
            "lastCommittedOpTime": commit.to_document(),
            "lastCommittedWallTime": DateTime::from_millis(disk.wall_ms_at(commit)),
            "appliedOpTime": my_optime.to_document(),
            "durableOpTime": my_optime.to_document(),
            "lastAppliedWallTime": DateTime::from_millis(disk.last_wall_ms()),
            "lastDurableWallTime": DateTime::from_millis(disk.last_wall_ms()),
        },
        "members": members,
    });
    Ok(status)
}

/// mongod's two conditions before a primary may reconfig again
/// (`awaitConfigCommitment`): config commitment — a majority of the voters
/// installed `cfg` — and oplog commitment — what was committed under the
/// previous config, and this primary's first entry of its term
/// (`getConfigOplogCommitmentOpTime`), is on a majority of `cfg`'s
/// data-bearing voters.
pub(crate) fn config_committed(member: &Member, net: &Network, cfg: &ReplSetConfig) -> bool {
    let target = {
        let inner = member.lock();
        if inner.state != MemberState::Primary {
            return false;
        }
        inner
            .last_committed_in_prev_config
            .max(inner.first_optime_of_my_term)
    };
    installed_by_majority(member, net, cfg) && member.majority_has(net, cfg, target)
}

fn installed_by_majority(member: &Member, net: &Network, cfg: &ReplSetConfig) -> bool {
    let me = member.self_host();
    let count = cfg
        .voters()
        .filter(|m| {
            if Some(&m.host) == me.as_ref() {
                return member
                    .config()
                    .map(|c| c.same_version(cfg))
                    .unwrap_or(false);
            }
            net.dial(member, &m.host)
                .and_then(|p| p.config())
                .map(|c| c.same_version(cfg))
                .unwrap_or(false)
        })
        .count();
    count >= cfg.majority()
}

/// What `_doReplSetReconfig` checks once it has the new config, in its order,
/// for the command and for the primary's own `newlyAdded` removals: the
/// implicit default write concern (5.0+), `validateConfigForReconfig` (all 103,
/// the PSA rule from 5.0), finding itself (74), being electable and the quorum
/// check (non-force).
pub(crate) fn check_new_config(
    member: &Member,
    net: &Network,
    old: &ReplSetConfig,
    new: &ReplSetConfig,
    force: bool,
) -> Result<(), CmdError> {
    crate::rwc_defaults::check_implicit_default_unchanged(member, old, new)?;
    let incompatible = |e: String| CmdError::new(error::NEW_CONFIG_INCOMPATIBLE, e);
    new.validate().map_err(incompatible)?;
    new.check_arbiter_count(member.version())
        .map_err(incompatible)?;
    let psa_rule = member.version().release() >= Release::new(5, 0);
    check_reconfig_compatible(old, new, force, psa_rule).map_err(incompatible)?;
    let me = net.find_self(member, new).cloned().ok_or_else(|| CmdError::new(error::NODE_NOT_FOUND, format!(
        "No host described in new configuration with {} for replica set {} maps to this node", version_term(new), new.set_name)))?;
    if !force && !me.is_electable() {
        return fail(error::NODE_NOT_ELECTABLE, format!(
            "This node, {}, with _id {} is not electable under the new configuration with {} for replica set {}",
            me.host, me.id, version_term(new), new.set_name));
    }
    if !force {
        let mut responded = Vec::new();
        for m in new.voters() {
            if m.host == me.host || net.dial(member, &m.host).is_some() {
                responded.push(m.host.clone());
            }
        }
        if responded.len() < new.majority() {
            return fail(error::NODE_NOT_FOUND, format!(
                "Quorum check failed because not enough voting nodes responded; required {} but only the following {} voting nodes responded: {}",
                new.majority(), responded.len(), responded.join(", ")));
        }
    }
    Ok(())
}

pub(crate) async fn reconfig(member: &Arc<Member>, body: &Document) -> CmdResult {
    let net = network(member)?;
    let old = member.config().ok_or_else(no_config)?;
    let _guard = ConfigOpGuard::acquire(member)?;
    let force = body.get("force").map(truthy).unwrap_or(false);
    let state = member.state();
    // `_doReplSetReconfig`: a safe reconfig needs a writable primary
    // (`canAcceptNonLocalWrites`: not catching up, not stepping down).
    if !force && !member.is_writable_primary() {
        return fail(
            error::NOT_WRITABLE_PRIMARY,
            format!(
                "replSetReconfig should only be run on a writable PRIMARY. Current state {};",
                state.name()
            ),
        );
    }
    let deadline = timeout_ms(num(body.get("maxTimeMS"))).map(|t| Instant::now() + t);
    if !force {
        // Like mongod, wait for the current config to commit; maxTimeMS expiry is 308.
        while !config_committed(member, &net, &old) {
            if member.state() != MemberState::Primary {
                return fail(error::NOT_WRITABLE_PRIMARY, "New config is rejected :: caused by :: PrimarySteppedDown: node stepped down while waiting for the current config to commit");
            }
            if deadline.map(|d| Instant::now() >= d).unwrap_or(false) {
                return fail(error::CURRENT_CONFIG_NOT_COMMITTED_YET, format!(
                    "New config is rejected :: caused by :: the current config {} is not yet committed", version_term(&old)));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let Ok(arg) = body.get_document("replSetReconfig") else {
        return fail(
            error::INVALID_REPLICA_SET_CONFIG,
            "no configuration specified",
        );
    };
    let mut new = ReplSetConfig::parse(arg)
        .map_err(|e| CmdError::new(error::INVALID_REPLICA_SET_CONFIG, e))?;
    if new.set_name != old.set_name {
        return fail(error::INVALID_REPLICA_SET_CONFIG, format!(
            "Rejecting reconfig where new config set name differs from command line set name, new config set name: {}, old config set name: {}", new.set_name, old.set_name));
    }
    if new.members.iter().any(|m| m.newly_added) {
        // processReplSetReconfig: the flag is mongod's own bookkeeping.
        return fail(
            error::INVALID_REPLICA_SET_CONFIG,
            "Cannot provide newlyAdded field to member config during reconfig.",
        );
    }
    if new.settings.replica_set_id.is_none() {
        new.settings.replica_set_id = old.replica_set_id();
    }
    if force {
        new.version = new.version.max(old.version) + 10_000 + rand::random_range(0..100_000);
        new.term = -1;
    } else {
        new.term = member.term();
        for m in new.members.iter_mut() {
            // By `_id`, as mongod's _addNewlyAddedFieldForNewMemberIfNeeded: a
            // member whose host changed is not new.
            m.newly_added = match old.members.iter().find(|o| o.id == m.id) {
                // A kept member keeps its flag while it still votes.
                Some(o) => o.newly_added && m.votes > 0,
                None => m.votes > 0,
            };
        }
    }
    check_new_config(member, &net, &old, &new, force)?;
    {
        let mut inner = member.lock();
        if !force && inner.state != MemberState::Primary {
            return fail(error::NOT_WRITABLE_PRIMARY, "replSetReconfig should only be run on a writable PRIMARY. Current state SECONDARY;");
        }
        if !force {
            inner.last_committed_in_prev_config = inner.commit_point;
        }
        member.install_config(&mut inner, new.clone());
    }
    if force {
        return Ok(doc! {});
    }
    loop {
        if installed_by_majority(member, &net, &new) {
            return Ok(doc! {});
        }
        if member.state() != MemberState::Primary {
            return fail(
                error::INTERRUPTED_DUE_TO_REPL_STATE_CHANGE,
                "operation was interrupted because a replica set state change occurred",
            );
        }
        if deadline.map(|d| Instant::now() >= d).unwrap_or(false) {
            return fail(error::MAX_TIME_MS_EXPIRED, "operation exceeded time limit");
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(crate) fn freeze(member: &Member, body: &Document) -> CmdResult {
    let period = num(body.get("replSetFreeze")).unwrap_or(0.0);
    let mut inner = member.lock();
    if inner.state == MemberState::Primary {
        return fail(
            error::NOT_SECONDARY,
            "cannot freeze node when primary or running for election. state: Primary",
        );
    }
    if secs(period).is_zero() {
        inner.no_election_until = None;
        return Ok(doc! { "info": "unfreezing" });
    }
    inner.no_election_until = Some(Instant::now() + secs(period));
    Ok(doc! {})
}

pub(crate) async fn step_up(member: &Arc<Member>, body: &Document) -> CmdResult {
    let skip_dry_run = body.get("skipDryRun").map(truthy).unwrap_or(false);
    let net = network(member)?;
    let cfg = member.config().ok_or_else(no_config)?;
    if member.state() == MemberState::Primary {
        return Ok(doc! { "info": "already primary" });
    }
    let electable = {
        let inner = member.lock();
        member
            .self_config(&inner, &cfg)
            .map(|m| m.is_electable() && m.is_voter())
            .unwrap_or(false)
    };
    if !electable || member.state() != MemberState::Secondary {
        return fail(error::COMMAND_FAILED, "Election failed.");
    }
    let m = member.clone();
    let won = tokio::task::spawn_blocking(move || m.run_election(&net, &cfg, skip_dry_run))
        .await
        .unwrap_or(false);
    if won {
        Ok(doc! {})
    } else {
        fail(error::COMMAND_FAILED, "Election failed.")
    }
}
