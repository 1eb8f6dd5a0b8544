//! The write path every replicated write takes: write concern (parsed,
//! waited for, its `writeConcernError`), the primary's planned write under
//! its locks (with a retryable write's session, [`crate::retryable`]), and
//! `insert`.

use crate::commands::{db_of, num, timeout_ms, CmdResult};
use crate::error::{self, fail, CmdError};
use crate::member::{now_ms, Member};
use crate::retryable::{Executed, RetryableWrite};
use crate::state::{is_fcv_document, DurableState, Op, OpTime, OplogEntry, TxnInfo};
use crate::values::{render, values_equal};
use bson::{doc, oid::ObjectId, Bson, Document};
use std::time::{Duration, Instant};

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
    write_statements(member, None, |disk, _| {
        let (ops, result) = plan(disk);
        Ok((ops.into_iter().map(|op| (op, None)).collect(), result))
    })
}

/// [`write_planned`] for a write command that may be a retryable write: under
/// the same locks, `txn`'s session is begun or continued
/// ([`crate::retryable::begin_or_continue`]: 225 for an older txnNumber), the
/// plan is told which statements of this txnNumber were executed already, and
/// each operation it returns with a statement id is written with the session's
/// fields (`lsid`, `txnNumber`, `stmtId`, `prevOpTime`), which also update
/// the session's `config.transactions` record on every member that applies it.
pub(crate) fn write_statements<R>(
    member: &Member,
    txn: Option<&RetryableWrite>,
    plan: impl FnOnce(&DurableState, &Executed) -> Result<(Vec<(Op, Option<i32>)>, R), CmdError>,
) -> Result<(OpTime, u64, R), CmdError> {
    let mut inner = member.lock();
    // A primary attempting a step-down or still catching up after its
    // election accepts no writes (`TopologyCoordinator::canAcceptWrites`:
    // only leader mode "master").
    if !Member::writable(&inner) {
        return Err(not_primary());
    }
    let mut disk = member.disk();
    let (executed, mut prev) = match txn {
        Some(txn) => crate::retryable::begin_or_continue(&mut inner, &disk, txn)?,
        None => (Executed::default(), None),
    };
    let (ops, result) = plan(&disk, &executed)?;
    let term = disk.term;
    for (op, stmt_id) in ops {
        let optime = disk.next_optime(term, now_ms());
        let session = match (txn, stmt_id) {
            (Some(txn), Some(stmt_id)) => Some(TxnInfo {
                lsid: txn.lsid.clone(),
                txn_number: txn.txn_number,
                stmt_id,
                prev_optime: prev.replace(optime),
            }),
            _ => None,
        };
        let entry = OplogEntry::with_txn(optime, now_ms(), op, session);
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

/// The `insert` command. A retryable write's statements that were executed
/// already (this txnNumber's history on this member, replicated with the
/// entries) are answered as executed and not written again
/// (`write_ops_exec.cpp` `performInserts`: `checkStatementExecuted`,
/// `makeWriteResultForInsertOrDeleteRetry`: n 1).
pub(crate) async fn insert(
    member: &Member,
    body: &Document,
    txn: Option<&RetryableWrite>,
) -> CmdResult {
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
    let (optime, generation, (n, write_errors)) =
        write_statements(member, txn, |disk, executed| {
            let mut ops = Vec::new();
            let mut n = 0;
            let mut write_errors = Vec::new();
            let mut ids: Vec<Bson> = disk
                .collection(&ns)
                .iter()
                .filter_map(|d| d.get("_id").cloned())
                .collect();
            for (i, mut d) in docs_in.into_iter().enumerate() {
                let stmt_id = txn.map(|t| t.stmt_id(i));
                if let Some(stmt_id) = stmt_id {
                    if executed.check(stmt_id)?.is_some() {
                        n += 1;
                        continue;
                    }
                }
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
                n += 1;
                ops.push((
                    Op::Insert {
                        ns: ns.clone(),
                        doc: d,
                    },
                    stmt_id,
                ));
            }
            Ok((ops, (n, write_errors)))
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
