//! Retryable writes, as mongod (4.4–8.0) runs them; README.md, *Retryable
//! writes*, cites each rule.
//!
//! - The session fields of a command (`lsid`, `txnNumber`, `autocommit`,
//!   `startTransaction`) checked as `initializeOperationSessionInfo` checks
//!   them, and the session's `uid` as `makeLogicalSessionId` sets it.
//! - `insert` / `update` / `delete` with a `txnNumber` and no `autocommit` are
//!   retryable writes: under the primary's write lock the session is begun
//!   or continued (`TransactionParticipant::Participant::beginOrContinue`:
//!   225 for a txnNumber below the session's), and the statements of this
//!   txnNumber already executed are found by walking the session's oplog
//!   chain from its `config.transactions` record (`lastWriteOpTime`, then
//!   each entry's `prevOpTime`), as `fetchActiveTransactionHistory` does; a
//!   chain that reaches a truncated entry is incomplete history (217 for a
//!   statement not found). The record and the entries replicate, so a new
//!   primary recognises a retry.
//! - The `RetryableWriteError` label and the `topologyVersion` mongod adds
//!   to a reply (`appendErrorLabelsAndTopologyVersion`,
//!   `ErrorLabelBuilder::isRetryableWriteError`).

use crate::commands::Connection;
use crate::error::{self, CmdError};
use crate::member::{Inner, Member};
use crate::state::{DurableState, OpTime, TRANSACTIONS_NS};
use crate::values::type_name;
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// The commands that take a `txnNumber` without `autocommit` (the ones
/// mongod's `supportsRetryableWrite` names that this simulator runs).
const RETRYABLE_WRITE_COMMANDS: &[&str] = &["insert", "update", "delete"];

/// A retryable write: its session as the server keeps it (`{id, uid}`), its
/// txnNumber and the statement ids the client gave, if any.
#[derive(Debug, Clone)]
pub(crate) struct RetryableWrite {
    pub lsid: Document,
    pub txn_number: i64,
    stmt_id: Option<i32>,
    stmt_ids: Option<Vec<i32>>,
}

impl RetryableWrite {
    /// The id of statement `index` (`write_ops::getStmtIdForWriteAt`:
    /// `stmtIds[index]`, else `stmtId` (0 without one) + `index`).
    pub fn stmt_id(&self, index: usize) -> i32 {
        match &self.stmt_ids {
            Some(ids) => ids.get(index).copied().unwrap_or(index as i32),
            None => self.stmt_id.unwrap_or(0) + index as i32,
        }
    }
}

fn wrong_type(field: &str, v: &Bson, expected: &str) -> CmdError {
    CmdError::new(
        error::TYPE_MISMATCH,
        format!(
            "BSON field 'OperationSessionInfo.{field}' is the wrong type '{}', expected type '{expected}'",
            type_name(v)
        ),
    )
}

fn invalid(msg: &str) -> CmdError {
    CmdError::new(error::INVALID_OPTIONS, msg)
}

/// The session fields of `body`, checked in mongod's order
/// (`initialize_operation_session_info.cpp`); `Some` for a retryable write.
/// Multi-document transactions (`autocommit: false`) are not modelled.
pub(crate) fn operation_session_info(
    member: &Member,
    conn: &Connection,
    name: &str,
    body: &Document,
) -> Result<Option<RetryableWrite>, CmdError> {
    let lsid = match body.get("lsid") {
        None => None,
        Some(Bson::Document(d)) => Some(d),
        Some(other) => return Err(wrong_type("lsid", other, "object")),
    };
    let txn_number = match body.get("txnNumber") {
        None => None,
        Some(Bson::Int64(n)) => Some(*n),
        Some(other) => return Err(wrong_type("txnNumber", other, "long")),
    };
    let flag = |field: &str| match body.get(field) {
        None => Ok(None),
        Some(Bson::Boolean(b)) => Ok(Some(*b)),
        Some(other) => Err(wrong_type(field, other, "bool")),
    };
    let autocommit = flag("autocommit")?;
    let start_transaction = flag("startTransaction")?;
    let lsid = match lsid {
        Some(d) => Some(server_lsid(member, conn, d)?),
        None if txn_number.is_some() => {
            return Err(invalid(
                "Transaction number requires a session ID to also be specified",
            ))
        }
        None => None,
    };
    if txn_number.is_some_and(|n| n < 0) {
        return Err(invalid("Transaction number cannot be negative"));
    }
    if txn_number.is_none() && autocommit.is_some() {
        return Err(invalid(
            "'autocommit' field requires a transaction number to also be specified",
        ));
    }
    match autocommit {
        Some(true) => return Err(invalid("Specifying autocommit=true is not allowed.")),
        Some(false) => {
            return Err(CmdError::new(
                error::ILLEGAL_OPERATION,
                "multi-document transactions are not modelled by mongod-sim",
            ))
        }
        None if start_transaction.is_some() => {
            return Err(invalid(
                "'startTransaction' field requires 'autocommit' field to also be specified",
            ))
        }
        None => {}
    }
    let (Some(lsid), Some(txn_number)) = (lsid, txn_number) else {
        return Ok(None);
    };
    if !RETRYABLE_WRITE_COMMANDS.contains(&name) {
        return Err(CmdError::new(
            error::NOT_A_RETRYABLE_WRITE_COMMAND,
            format!(
                "txnNumber may only be provided for multi-document transactions and retryable \
                 write commands. autocommit:false was not provided, and {name} is not a \
                 retryable write command."
            ),
        ));
    }
    let stmt_id = crate::commands::num(body.get("stmtId")).map(|n| n as i32);
    let stmt_ids = body.get_array("stmtIds").ok().map(|ids| {
        ids.iter()
            .map(|id| crate::commands::num(Some(id)).unwrap_or(0.0) as i32)
            .collect()
    });
    Ok(Some(RetryableWrite {
        lsid,
        txn_number,
        stmt_id,
        stmt_ids,
    }))
}

/// The session id as the server keeps it (`makeLogicalSessionId`): the
/// client's `id`, and its `uid` or the SHA-256 of the authenticated user's
/// `user@db` (of the empty string without access control).
fn server_lsid(member: &Member, conn: &Connection, lsid: &Document) -> Result<Document, CmdError> {
    let id = match lsid.get("id") {
        Some(id @ Bson::Binary(_)) => id.clone(),
        Some(other) => return Err(wrong_type("lsid.id", other, "binData")),
        None => {
            return Err(CmdError::new(
                error::IDL_REQUIRED_FIELD_MISSING,
                "BSON field 'OperationSessionInfo.lsid.id' is missing but a required field",
            ))
        }
    };
    let uid = match lsid.get("uid") {
        Some(uid @ Bson::Binary(_)) => uid.clone(),
        _ => {
            let name = match conn.users.first() {
                Some((user, db)) if member.auth_enabled() => format!("{user}@{db}"),
                _ => String::new(),
            };
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: Sha256::digest(name.as_bytes()).to_vec(),
            })
        }
    };
    Ok(doc! { "id": id, "uid": uid })
}

/// A session as mongod prints it in a message.
fn show(lsid: &Document) -> String {
    crate::values::render(&Bson::Document(lsid.clone()))
}

/// What this txnNumber of the session executed already: statement id →
/// optime of its entry, and whether the chain reached a truncated entry.
#[derive(Default)]
pub(crate) struct Executed {
    statements: HashMap<i32, OpTime>,
    incomplete: bool,
    txn_number: i64,
    session: String,
}

impl Executed {
    /// The optime of `stmt_id`'s entry if it was executed
    /// (`_checkStatementExecutedSelf`); 217 when it is not found in an
    /// incomplete history.
    pub fn check(&self, stmt_id: i32) -> Result<Option<OpTime>, CmdError> {
        if let Some(optime) = self.statements.get(&stmt_id) {
            return Ok(Some(*optime));
        }
        if self.incomplete {
            return Err(CmdError::new(
                error::INCOMPLETE_TRANSACTION_HISTORY,
                format!(
                    "Incomplete history detected for transaction {} on session {}",
                    self.txn_number, self.session
                ),
            ));
        }
        Ok(None)
    }
}

/// The session's `config.transactions` record: its txnNumber and last
/// write's optime.
fn record(disk: &DurableState, lsid: &Document) -> Option<(i64, OpTime)> {
    let id = Bson::Document(lsid.clone());
    let record = disk
        .collection(TRANSACTIONS_NS)
        .iter()
        .find(|d| d.get("_id") == Some(&id))?;
    let last = record.get_document("lastWriteOpTime").ok()?;
    Some((
        record.get_i64("txnNum").ok()?,
        OpTime {
            ts: last.get_timestamp("ts").ok()?,
            t: last.get_i64("t").ok()?,
        },
    ))
}

/// Walks the session's entries back from `last` through `prevOpTime`
/// (`fetchActiveTransactionHistory`, `TransactionHistoryIterator`).
fn history(disk: &DurableState, last: OpTime, txn_number: i64, lsid: &Document) -> Executed {
    let mut executed = Executed {
        txn_number,
        session: show(lsid),
        ..Executed::default()
    };
    let mut at = Some(last);
    while let Some(optime) = at.filter(|o| *o != OpTime::NULL) {
        match disk.entry_at(optime).and_then(|e| e.txn.as_ref()) {
            Some(txn) => {
                executed.statements.insert(txn.stmt_id, optime);
                at = txn.prev_optime;
            }
            None => {
                executed.incomplete = true;
                break;
            }
        }
    }
    executed
}

/// Begins or continues `write`'s session on this primary
/// (`beginOrContinue`, `_beginOrContinueRetryableWrite`), under its write
/// lock: a txnNumber below the session's newest is 225; a newer one becomes
/// the session's; the same one is a retry. The session's txnNumber is kept
/// in memory (a txnNumber whose statements all failed writes nothing) and
/// read from `config.transactions`, as mongod refreshes a session from
/// storage after a step-up. Returns the statements executed already and the
/// optime the next entry chains to.
pub(crate) fn begin_or_continue(
    inner: &mut Inner,
    disk: &DurableState,
    write: &RetryableWrite,
) -> Result<(Executed, Option<OpTime>), CmdError> {
    // mongod invalidates its sessions on a step-up or step-down and refreshes
    // them from storage.
    if inner.sessions_generation != inner.role_generation {
        inner.active_txns.clear();
        inner.sessions_generation = inner.role_generation;
    }
    let key = bson::to_vec(&write.lsid).unwrap_or_default();
    let stored = record(disk, &write.lsid);
    let active = inner
        .active_txns
        .get(&key)
        .copied()
        .max(stored.map(|(n, _)| n));
    if let Some(active) = active.filter(|a| write.txn_number < *a) {
        return Err(CmdError::new(
            error::TRANSACTION_TOO_OLD,
            format!(
                "Retryable write with txnNumber {} is prohibited on session {} because a newer \
                 retryable write with txnNumber {active} has already started on this session.",
                write.txn_number,
                show(&write.lsid)
            ),
        ));
    }
    inner.active_txns.insert(key, write.txn_number);
    Ok(match stored {
        Some((n, last)) if n == write.txn_number => {
            (history(disk, last, n, &write.lsid), Some(last))
        }
        _ => (Executed::default(), None),
    })
}

/// Codes of mongod's `RetriableError` category (`error_codes.yml`).
fn is_retriable(code: i32) -> bool {
    matches!(
        code,
        6 | 7 | 89 | 91 | 134 | 189 | 262 | 9001 | 10107 | 11600 | 11602 | 13435 | 13436
    )
}

/// Codes of the `NotPrimaryError` and `ShutdownError` categories.
fn wants_topology_version(code: i32) -> bool {
    matches!(
        code,
        91 | 189 | 10058 | 10107 | 11600 | 11602 | 13435 | 13436
    )
}

/// Adds to `reply` the `errorLabels` mongod adds
/// (`appendErrorLabelsAndTopologyVersion`, `src/mongo/db/error_labels.cpp`
/// `ErrorLabelBuilder::isRetryableWriteError`): `RetryableWriteError` when the
/// command is a retryable write (a `txnNumber`, no `autocommit`) and its
/// error or its write concern error has a retriable code. Returns whether the
/// reply must carry the member's `topologyVersion` (a not-primary or shutdown
/// code in either).
pub(crate) fn append_error_labels(body: &Document, reply: &mut Document) -> bool {
    let code = match reply.get("ok") {
        Some(ok) if crate::commands::num(Some(ok)) == Some(0.0) => reply.get_i32("code").ok(),
        _ => None,
    };
    let wc_code = reply
        .get_document("writeConcernError")
        .ok()
        .and_then(|wce| wce.get_i32("code").ok());
    let codes = [code, wc_code];
    let retryable_write = body.contains_key("txnNumber") && !body.contains_key("autocommit");
    if retryable_write && codes.iter().flatten().any(|c| is_retriable(*c)) {
        reply.insert(
            "errorLabels",
            vec![Bson::String("RetryableWriteError".into())],
        );
    }
    codes.iter().flatten().any(|c| wants_topology_version(*c))
}
