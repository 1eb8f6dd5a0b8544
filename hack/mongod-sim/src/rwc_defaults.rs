//! Cluster-wide read/write concern defaults, as mongod keeps them: the
//! `setDefaultRWConcern` / `getDefaultRWConcern` commands
//! (`src/mongo/db/commands/rwc_defaults_commands.cpp`,
//! `src/mongo/db/read_write_concern_defaults.cpp`), the document they keep in
//! `config.settings` (a replicated write, so every member and a restarted one
//! know it), and the 5.0+ reconfig rule that a config must not change the
//! implicit default write concern while no cluster-wide one is set
//! (`ReplicationCoordinatorImpl::_doReplSetReconfig`).

use crate::commands::{db_of, not_primary, wait_for_write_concern, write_concern, write_planned};
use crate::commands::{CmdResult, WriteConcern};
use crate::config::ReplSetConfig;
use crate::error::{self, fail, CmdError};
use crate::member::Member;
use crate::state::{DurableState, Op};
use crate::values::type_name;
use crate::version::{Release, ServerVersion};
use bson::{doc, Bson, DateTime, Document};

/// Where mongod keeps the defaults (`NamespaceString::kConfigSettingsNamespace`).
pub const SETTINGS_NS: &str = "config.settings";
/// `_id` of the defaults document (`ReadWriteConcernDefaults::kPersistedDocumentId`).
pub const DEFAULTS_ID: &str = "ReadWriteConcernDefaults";

/// The release whose FCV enables the implicit `{w: "majority"}` default and the
/// reconfig rule (`featureFlagDefaultWriteConcernMajority`, version 5.0; jstests
/// tag the behaviour `requires_fcv_50`).
const DEFAULT_WC_MAJORITY: Release = Release::new(5, 0);

/// The stored defaults document, if any.
fn stored(disk: &DurableState) -> Option<&Document> {
    disk.collection(SETTINGS_NS)
        .iter()
        .find(|d| d.get_str("_id").ok() == Some(DEFAULTS_ID))
}

/// A non-empty document under `key` of the stored defaults.
fn stored_field<'a>(stored: Option<&'a Document>, key: &str) -> Option<&'a Document> {
    stored
        .and_then(|d| d.get_document(key).ok())
        .filter(|d| !d.is_empty())
}

/// The cluster-wide write concern, if one is set (`ReadWriteConcernDefaults::getCWWC`).
pub(crate) fn cwwc(disk: &DurableState) -> Option<Document> {
    stored_field(stored(disk), "defaultWriteConcern").cloned()
}

/// Whether this binary at this FCV derives the implicit default write concern
/// from the config (`{w: "majority"}` or `{w: 1}`) and guards reconfigs with it:
/// a 5.0+ binary whose FCV document's `version` is 5.0 or later (an upgrade
/// from 4.4 in progress still says 4.4). Before, the default is always `{w: 1}`.
pub(crate) fn default_wc_majority_enabled(binary: ServerVersion, disk: &DurableState) -> bool {
    let fcv = disk
        .fcv_document()
        .and_then(|d| d.get_str("version").ok())
        .and_then(Release::parse);
    binary.release() >= DEFAULT_WC_MAJORITY && fcv.is_some_and(|v| v >= DEFAULT_WC_MAJORITY)
}

/// The write concern a write waits for: the command's own `w`, else the
/// default mongod applies (`ReadWriteConcernDefaults::getDefault`): the
/// cluster-wide one, else the implicit one — `{w: "majority"}` where the config
/// makes it so on 5.0+ at FCV 5.0+, `{w: 1}` otherwise. A `wtimeout` the
/// command gives is kept.
pub(crate) fn effective_write_concern(member: &Member, body: &Document) -> WriteConcern {
    let mut wc = write_concern(body);
    if body
        .get_document("writeConcern")
        .is_ok_and(|d| d.contains_key("w"))
    {
        return wc;
    }
    let config = member.config();
    let disk = member.disk();
    match cwwc(&disk) {
        Some(default) => {
            let default = write_concern(&doc! { "writeConcern": default });
            wc.w = default.w;
            wc.wtimeout = wc.wtimeout.or(default.wtimeout);
        }
        None => {
            let majority = default_wc_majority_enabled(member.version(), &disk)
                && config
                    .as_ref()
                    .is_some_and(|c| c.is_implicit_default_write_concern_majority());
            wc.w = if majority { None } else { Some(1) };
        }
    }
    wc
}

/// mongod's `_doReplSetReconfig` rule (5.0+, force reconfigs and its own
/// `newlyAdded` removals included): with no cluster-wide write concern, a new
/// config must keep `isImplicitDefaultWriteConcernMajority`.
pub(crate) fn check_implicit_default_unchanged(
    member: &Member,
    old: &ReplSetConfig,
    new: &ReplSetConfig,
) -> Result<(), CmdError> {
    let disk = member.disk();
    if !default_wc_majority_enabled(member.version(), &disk) || cwwc(&disk).is_some() {
        return Ok(());
    }
    if old.is_implicit_default_write_concern_majority()
        != new.is_implicit_default_write_concern_majority()
    {
        return fail(
            error::NEW_CONFIG_INCOMPATIBLE,
            "Reconfig attempted to install a config that would change the implicit default write concern. Use the setDefaultRWConcern command to set a cluster-wide write concern and try the reconfig again.",
        );
    }
    Ok(())
}

/// An optional object argument of the command (14 for another type).
fn object_arg<'a>(
    body: &'a Document,
    command: &str,
    key: &str,
) -> Result<Option<&'a Document>, CmdError> {
    match body.get(key) {
        None | Some(Bson::Null) => Ok(None),
        Some(Bson::Document(d)) => Ok(Some(d)),
        Some(other) => fail(
            error::TYPE_MISMATCH,
            format!(
                "BSON field '{command}.{key}' is the wrong type '{}', expected type 'object'",
                type_name(other)
            ),
        ),
    }
}

/// `checkSuitabilityAsDefault(ReadConcern)`.
fn check_read_concern(rc: &Document) -> Result<(), CmdError> {
    if let Ok(level) = rc.get_str("level") {
        if level == "snapshot" || level == "linearizable" {
            return fail(
                error::BAD_VALUE,
                format!("level: '{level}' is not suitable for the default read concern"),
            );
        }
    }
    for key in ["afterOpTime", "afterClusterTime", "atClusterTime"] {
        if rc.contains_key(key) {
            return fail(
                error::BAD_VALUE,
                format!("'{key}' is not suitable for the default read concern"),
            );
        }
    }
    Ok(())
}

/// Parses a default write concern as mongod stores it (`{w, j?, wtimeout}`) and
/// applies `checkSuitabilityAsDefault(WriteConcern)` and the config's
/// `validateWriteConcern` (a custom mode must exist in the config).
fn parse_write_concern(wc: &Document) -> Result<Document, CmdError> {
    let w = match wc.get("w") {
        None => Bson::Int32(1),
        Some(Bson::String(s)) if s == "majority" => Bson::String(s.clone()),
        Some(Bson::String(s)) => {
            return fail(
                error::UNKNOWN_REPL_WRITE_CONCERN,
                format!("No write concern mode named '{s}' found in replica set configuration"),
            )
        }
        Some(v @ (Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_))) => {
            let n = crate::commands::num(Some(v)).unwrap_or(0.0);
            if !(0.0..=50.0).contains(&n) {
                return fail(
                    error::FAILED_TO_PARSE,
                    format!(
                        "w has to be a non-negative number and not greater than 50; found: {n}"
                    ),
                );
            }
            if n < 1.0 {
                return fail(
                    error::BAD_VALUE,
                    "Unacknowledged write concern is not suitable for the default write concern",
                );
            }
            Bson::Int32(n as i32)
        }
        Some(_) => {
            return fail(
                error::FAILED_TO_PARSE,
                "w has to be a number, string, or object",
            )
        }
    };
    let mut d = doc! { "w": w };
    if let Some(j) = wc.get("j") {
        d.insert("j", matches!(j, Bson::Boolean(true)));
    }
    let wtimeout = crate::commands::num(wc.get("wtimeout")).unwrap_or(0.0);
    d.insert("wtimeout", wtimeout as i32);
    Ok(d)
}

/// `setDefaultRWConcern`, on the primary: checks in mongod's order, then an
/// upsert of the defaults document (replicated like any write) and a wait for
/// the command's write concern.
pub(crate) async fn set_default(member: &Member, body: &Document) -> CmdResult {
    const CMD: &str = "setDefaultRWConcern";
    if db_of(body) != "admin" {
        return fail(
            error::UNAUTHORIZED,
            format!("{CMD} may only be run against the admin database."),
        );
    }
    if !member.is_writable_primary() {
        return Err(not_primary());
    }
    let rc = object_arg(body, CMD, "defaultReadConcern")?;
    let wc = object_arg(body, CMD, "defaultWriteConcern")?;
    if rc.is_none() && wc.is_none() {
        return fail(
            error::BAD_VALUE,
            "At least one of the \"defaultReadConcern\" or \"defaultWriteConcern\" fields must be present",
        );
    }
    let new_rc = match rc {
        Some(rc) if !rc.is_empty() => {
            check_read_concern(rc)?;
            Some(rc.clone())
        }
        _ => None,
    };
    let new_wc = match wc {
        Some(wc) if !wc.is_empty() => Some(parse_write_concern(wc)?),
        _ => None,
    };
    let five = member.version().release() >= DEFAULT_WC_MAJORITY;
    let plan = |disk: &DurableState| -> (Vec<Op>, Result<(), CmdError>) {
        let current = stored(disk);
        let current_wc = stored_field(current, "defaultWriteConcern");
        if five && wc.is_some_and(|w| w.is_empty()) && current_wc.is_some() {
            return (
                Vec::new(),
                fail(
                    error::ILLEGAL_OPERATION,
                    "The global default write concern cannot be unset once it is set.",
                ),
            );
        }
        let mut d = doc! { "_id": DEFAULTS_ID };
        let keep_rc = if rc.is_none() {
            stored_field(current, "defaultReadConcern").cloned()
        } else {
            new_rc.clone()
        };
        let keep_wc = if wc.is_none() {
            current_wc.cloned()
        } else {
            new_wc.clone()
        };
        if let Some(rc) = keep_rc {
            d.insert("defaultReadConcern", rc);
        }
        if let Some(wc) = keep_wc {
            d.insert("defaultWriteConcern", wc);
        }
        d.insert("updateOpTime", disk.last_optime().ts);
        d.insert("updateWallClockTime", DateTime::now());
        let op = Op::Update {
            ns: SETTINGS_NS.into(),
            doc: d,
        };
        (vec![op], Ok(()))
    };
    let (optime, generation, planned) = write_planned(member, plan)?;
    planned?;
    wait_for_write_concern(
        member,
        optime,
        generation,
        &effective_write_concern(member, body),
    )
    .await
    .map_err(crate::fcv::wait_failure_error)?;
    Ok(reply(member, false))
}

/// `getDefaultRWConcern` (any member; `inMemory` is echoed).
pub(crate) fn get_default(member: &Member, body: &Document) -> CmdResult {
    if db_of(body) != "admin" {
        return fail(
            error::UNAUTHORIZED,
            "getDefaultRWConcern may only be run against the admin database.",
        );
    }
    let in_memory = body.get_bool("inMemory").unwrap_or(false);
    Ok(reply(member, in_memory))
}

/// The defaults as `ReadWriteConcernDefaults::getDefault` reports them: on 5.0+
/// with sources (`implicit` read concern `{level: "local"}`; the implicit write
/// concern `{w: "majority", wtimeout: 0}` where the config makes it majority,
/// else no `defaultWriteConcern`), on 4.4 only what is stored.
fn reply(member: &Member, in_memory: bool) -> Document {
    let config = member.config();
    let disk = member.disk();
    let stored = stored(&disk);
    let rc = stored_field(stored, "defaultReadConcern");
    let wc = stored_field(stored, "defaultWriteConcern");
    let update_wall = stored.and_then(|d| d.get_datetime("updateWallClockTime").ok().copied());
    let mut d = Document::new();
    let five = member.version().release() >= DEFAULT_WC_MAJORITY;
    if five {
        match rc {
            Some(rc) => d.insert("defaultReadConcern", rc.clone()),
            None => d.insert("defaultReadConcern", doc! { "level": "local" }),
        };
        match wc {
            Some(wc) => {
                d.insert("defaultWriteConcern", wc.clone());
            }
            None => {
                let majority = default_wc_majority_enabled(member.version(), &disk)
                    && config
                        .as_ref()
                        .is_some_and(|c| c.is_implicit_default_write_concern_majority());
                if majority {
                    d.insert(
                        "defaultWriteConcern",
                        doc! { "w": "majority", "wtimeout": 0 },
                    );
                }
            }
        }
    } else {
        if let Some(rc) = rc {
            d.insert("defaultReadConcern", rc.clone());
        }
        if let Some(wc) = wc {
            d.insert("defaultWriteConcern", wc.clone());
        }
    }
    if let Some(stored) = stored {
        if let Some(ts) = stored.get("updateOpTime") {
            d.insert("updateOpTime", ts.clone());
        }
        if let Some(wall) = update_wall {
            d.insert("updateWallClockTime", wall);
        }
    }
    if five {
        let source = |set: bool| if set { "global" } else { "implicit" };
        d.insert("defaultWriteConcernSource", source(wc.is_some()));
        d.insert("defaultReadConcernSource", source(rc.is_some()));
    }
    if in_memory {
        d.insert("inMemory", true);
    }
    d.insert(
        "localUpdateWallClockTime",
        update_wall.unwrap_or_else(DateTime::now),
    );
    d
}
