//! A member's durable state — what lives on its PVC: config, term, last vote, the
//! oplog and the data (collections, including `admin.system.users` and the
//! featureCompatibilityVersion document in `admin.system.version`). The data is
//! `base` (what existed before the oplog starts, e.g. the image's root user) with
//! the oplog applied, so a rollback is "truncate the oplog and re-apply".

use crate::config::ReplSetConfig;
use bson::{doc, Bson, Document, Timestamp};
use serde::{Deserialize, Serialize};
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// Namespace of the users collection.
pub const USERS_NS: &str = "admin.system.users";

/// Namespace of the server configuration collection (mongod's
/// `NamespaceString::kServerConfigurationNamespace`).
pub const SYSTEM_VERSION_NS: &str = "admin.system.version";

/// `_id` of the featureCompatibilityVersion document in [`SYSTEM_VERSION_NS`].
pub const FCV_ID: &str = "featureCompatibilityVersion";

/// Is `doc` in `ns` the featureCompatibilityVersion document?
pub fn is_fcv_document(ns: &str, doc: &Document) -> bool {
    ns == SYSTEM_VERSION_NS && doc.get_str("_id").ok() == Some(FCV_ID)
}

/// An optime: (term, timestamp), ordered by term first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct OpTime {
    pub ts: Timestamp,
    pub t: i64,
}

impl OpTime {
    pub const NULL: OpTime = OpTime {
        ts: Timestamp {
            time: 0,
            increment: 0,
        },
        t: -1,
    };

    pub fn to_document(self) -> Document {
        doc! { "ts": self.ts, "t": self.t }
    }
}

impl Ord for OpTime {
    fn cmp(&self, o: &Self) -> Ordering {
        (self.t, self.ts.time, self.ts.increment).cmp(&(o.t, o.ts.time, o.ts.increment))
    }
}
impl PartialOrd for OpTime {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}

/// A replicated operation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Op {
    Noop {
        msg: String,
    },
    Insert {
        ns: String,
        doc: Document,
    },
    /// Replaces the document with the same `_id` by `doc` (its post-image).
    Update {
        ns: String,
        doc: Document,
    },
    /// Removes the document whose `_id` is `id`.
    Delete {
        ns: String,
        id: Bson,
    },
    /// Insert or replace a user document (keyed by its `_id`, "db.user").
    PutUser {
        doc: Document,
    },
    DropUser {
        id: String,
    },
}

impl Op {
    /// The featureCompatibilityVersion document this operation writes, if any.
    pub fn written_fcv_document(&self) -> Option<&Document> {
        match self {
            Op::Insert { ns, doc } | Op::Update { ns, doc } if is_fcv_document(ns, doc) => {
                Some(doc)
            }
            _ => None,
        }
    }
}

/// Namespace of the sessions' transaction table (mongod's
/// `NamespaceString::kSessionTransactionsTableNamespace`).
pub const TRANSACTIONS_NS: &str = "config.transactions";

/// What an entry written by a retryable write carries (mongod's oplog entry
/// fields `lsid`, `txnNumber`, `stmtId`, `prevOpTime`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TxnInfo {
    /// The session as the server keeps it: `{id, uid}`.
    #[serde(with = "extjson::document")]
    pub lsid: Document,
    pub txn_number: i64,
    pub stmt_id: i32,
    /// The session's previous entry of the same txnNumber (null for its
    /// first): the chain mongod's `TransactionHistoryIterator` walks.
    pub prev_optime: Option<OpTime>,
}

/// One oplog entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OplogEntry {
    pub optime: OpTime,
    /// Wall clock of the write on the primary (ms since epoch).
    pub wall_ms: i64,
    pub op: Op,
    /// Set on the entries of a retryable write.
    #[serde(default)]
    pub txn: Option<TxnInfo>,
    /// Its BSON size as mongod stores it in `local.oplog.rs` (see
    /// [`OplogEntry::new`]): what it counts against the capped oplog's size.
    #[serde(default)]
    pub bytes: u64,
}

impl OplogEntry {
    /// An entry, sized as the document mongod writes to `local.oplog.rs`
    /// (`MutableOplogEntry`, `src/mongo/db/repl/oplog_entry.idl`): `op`,
    /// `ns`, `o` (and `o2` for an update), `ts`, `t`, `v`, `wall`.
    pub fn new(optime: OpTime, wall_ms: i64, op: Op) -> OplogEntry {
        OplogEntry::with_txn(optime, wall_ms, op, None)
    }

    /// An entry, with the session fields of a retryable write when `txn`.
    pub fn with_txn(optime: OpTime, wall_ms: i64, op: Op, txn: Option<TxnInfo>) -> OplogEntry {
        let mut entry = OplogEntry {
            optime,
            wall_ms,
            op,
            txn,
            bytes: 0,
        };
        entry.bytes = document_bytes(&entry.to_document());
        entry
    }

    /// The entry as a `local.oplog.rs` document.
    pub fn to_document(&self) -> Document {
        let (op, ns, o, o2) = match &self.op {
            Op::Noop { msg } => ("n", String::new(), doc! {"msg": msg}, None),
            Op::Insert { ns, doc } => ("i", ns.clone(), doc.clone(), None),
            Op::Update { ns, doc } => (
                "u",
                ns.clone(),
                doc.clone(),
                Some(doc! {"_id": doc.get("_id").cloned().unwrap_or(Bson::Null)}),
            ),
            Op::Delete { ns, id } => ("d", ns.clone(), doc! {"_id": id.clone()}, None),
            Op::PutUser { doc } => ("i", USERS_NS.to_string(), doc.clone(), None),
            Op::DropUser { id } => ("d", USERS_NS.to_string(), doc! {"_id": id}, None),
        };
        let mut entry = doc! {"op": op, "ns": ns, "o": o};
        if let Some(o2) = o2 {
            entry.insert("o2", o2);
        }
        entry.insert("ts", self.optime.ts);
        entry.insert("t", self.optime.t);
        entry.insert("v", 2_i64);
        entry.insert("wall", bson::DateTime::from_millis(self.wall_ms));
        if let Some(txn) = &self.txn {
            entry.insert("lsid", txn.lsid.clone());
            entry.insert("txnNumber", txn.txn_number);
            entry.insert("stmtId", txn.stmt_id);
            entry.insert(
                "prevOpTime",
                txn.prev_optime.unwrap_or(OpTime::NULL).to_document(),
            );
        }
        entry
    }

    /// Its size, also for an entry read from a file written before entries
    /// carried one.
    fn size(&self) -> u64 {
        if self.bytes > 0 {
            self.bytes
        } else {
            document_bytes(&self.to_document())
        }
    }
}

/// A document's BSON size in bytes.
pub fn document_bytes(doc: &Document) -> u64 {
    bson::to_vec(doc).map(|v| v.len() as u64).unwrap_or(0)
}

/// The vote a member cast most recently.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastVote {
    pub term: i64,
    pub candidate: String,
}

/// Everything a member keeps across restarts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DurableState {
    pub config: Option<ReplSetConfig>,
    pub term: i64,
    pub last_vote: Option<LastVote>,
    /// Data that predates the oplog (initial-sync snapshot or pre-initiate writes).
    #[serde(with = "extjson::collections")]
    pub base: BTreeMap<String, Vec<Document>>,
    pub oplog: Vec<OplogEntry>,
    /// `base` with the oplog applied.
    #[serde(with = "extjson::collections")]
    pub data: BTreeMap<String, Vec<Document>>,
    /// Set while the member must (re)do an initial sync before serving as SECONDARY.
    pub initial_sync_pending: bool,
    /// The last entry the capped oplog dropped (its effect is in `base`): a
    /// member whose last optime is older cannot sync from this one.
    #[serde(default)]
    pub truncated_through: Option<OpTime>,
    /// The capped oplog's size in bytes, fixed when the oplog was created
    /// (replSetInitiate or an initial sync; mongod's `createOplog`). `None`:
    /// not created yet, or created without a size (no `--oplogSize` and no
    /// known disk): never truncated.
    #[serde(default)]
    pub oplog_max_bytes: Option<u64>,
    /// The BSON size of the documents in `data`, kept as writes apply.
    #[serde(default)]
    pub data_bytes: u64,
    /// The sum of the oplog's entry sizes, kept as entries come and go: it is
    /// read on every tick of every member and before every applied entry.
    /// Counted again when a volume is read from a file.
    #[serde(default)]
    oplog_bytes: u64,
}

impl DurableState {
    /// The oplog entry at `optime`, if the oplog still holds it.
    pub fn entry_at(&self, optime: OpTime) -> Option<&OplogEntry> {
        self.oplog
            .binary_search_by(|e| e.optime.cmp(&optime))
            .ok()
            .map(|i| &self.oplog[i])
    }

    /// No data at all (the official image creates its root user only then).
    pub fn is_empty(&self) -> bool {
        self.config.is_none() && self.oplog.is_empty() && self.data.values().all(|v| v.is_empty())
    }

    pub fn last_optime(&self) -> OpTime {
        self.oplog.last().map(|e| e.optime).unwrap_or(OpTime::NULL)
    }

    pub fn last_wall_ms(&self) -> i64 {
        self.oplog.last().map(|e| e.wall_ms).unwrap_or(0)
    }

    /// Wall time of the entry at `optime` (or the latest entry before it).
    pub fn wall_ms_at(&self, optime: OpTime) -> i64 {
        self.oplog
            .iter()
            .rev()
            .find(|e| e.optime <= optime)
            .map(|e| e.wall_ms)
            .unwrap_or(0)
    }

    /// The next optime for a write in `term`, strictly after the last one.
    pub fn next_optime(&self, term: i64, now_ms: i64) -> OpTime {
        let secs = (now_ms / 1000).max(0) as u32;
        let last = self.last_optime().ts;
        let ts = if secs > last.time {
            Timestamp {
                time: secs,
                increment: 1,
            }
        } else {
            Timestamp {
                time: last.time,
                increment: last.increment + 1,
            }
        };
        OpTime { ts, t: term }
    }

    /// Appends and applies an entry. Data errors (e.g. duplicate keys) are checked
    /// before writing, by the caller.
    pub fn append(&mut self, entry: OplogEntry) {
        let delta = apply(&mut self.data, &entry);
        self.data_bytes = self.data_bytes.saturating_add_signed(delta);
        self.oplog_bytes += entry.size();
        self.oplog.push(entry);
    }

    /// The oplog's size in bytes: the sum of its entries' BSON sizes.
    pub fn oplog_bytes(&self) -> u64 {
        self.oplog_bytes
    }

    /// Replaces the whole oplog (an initial sync's copy, or none).
    pub fn replace_oplog(&mut self, oplog: Vec<OplogEntry>) {
        self.oplog = oplog;
        self.recount_oplog_bytes();
    }

    /// Counts the oplog's bytes again from its entries (after it was read
    /// from a file, or replaced as a whole).
    fn recount_oplog_bytes(&mut self) {
        self.oplog_bytes = self.oplog.iter().map(OplogEntry::size).sum();
    }

    /// Counts `data_bytes` again from the documents (after `data` was
    /// replaced as a whole).
    pub fn recount_data_bytes(&mut self) {
        self.data_bytes = self.data.values().flatten().map(document_bytes).sum();
    }

    /// Drops the oldest entries while the oplog is over `max_bytes`, as the
    /// capped oplog does, but never one at or after `keep_from` (the majority
    /// commit point: mongod lets the oplog grow past its size rather than
    /// delete it), and never the last entry. Their effect moves into `base`.
    pub fn cap_oplog(&mut self, max_bytes: u64, keep_from: OpTime) {
        let mut total = self.oplog_bytes();
        let mut drop = 0;
        for e in self.oplog.iter().take(self.oplog.len().saturating_sub(1)) {
            if total <= max_bytes || e.optime >= keep_from {
                break;
            }
            total -= e.size();
            drop += 1;
        }
        self.oplog_bytes = total;
        for e in self.oplog.drain(..drop) {
            apply(&mut self.base, &e);
            self.truncated_through = Some(e.optime);
        }
    }

    /// Whether a member whose last applied optime is `last` can no longer
    /// sync from this oplog: its next entry was dropped. Timestamps only, as
    /// mongod's sync source resolver compares them (the terms may come from
    /// another config).
    pub fn too_far_ahead_of(&self, last: OpTime) -> bool {
        self.truncated_through
            .is_some_and(|t| (last.ts.time, last.ts.increment) < (t.ts.time, t.ts.increment))
    }

    /// Drops every entry after `keep` and rebuilds the data (rollback).
    pub fn truncate_after(&mut self, keep: usize) {
        self.oplog.truncate(keep);
        self.recount_oplog_bytes();
        let mut data = self.base.clone();
        for e in &self.oplog {
            apply(&mut data, e);
        }
        self.data = data;
        self.recount_data_bytes();
    }

    pub fn collection(&self, ns: &str) -> &[Document] {
        self.data.get(ns).map(|v| v.as_slice()).unwrap_or(&[])
    }

    /// The featureCompatibilityVersion document, if the data has one.
    pub fn fcv_document(&self) -> Option<&Document> {
        self.collection(SYSTEM_VERSION_NS)
            .iter()
            .find(|d| d.get_str("_id").ok() == Some(FCV_ID))
    }

    pub fn user(&self, db: &str, user: &str) -> Option<&Document> {
        let id = format!("{db}.{user}");
        self.collection(USERS_NS)
            .iter()
            .find(|d| d.get_str("_id").ok() == Some(id.as_str()))
    }
}

/// Applies `entry` to `data`; returns how many bytes the documents grew by.
/// An entry of a retryable write also updates its session's record in
/// `config.transactions`, as mongod's primary does in the write's unit of
/// work (`TransactionParticipant::onWriteOpCompletedOnPrimary`) and its
/// secondaries do from the entry's session fields
/// (`SessionUpdateTracker`): `{_id: lsid, txnNum, lastWriteOpTime,
/// lastWriteDate}`.
fn apply(data: &mut BTreeMap<String, Vec<Document>>, entry: &OplogEntry) -> i64 {
    let delta = apply_op(data, &entry.op);
    let Some(txn) = &entry.txn else {
        return delta;
    };
    let record = doc! {
        "_id": txn.lsid.clone(),
        "txnNum": txn.txn_number,
        "lastWriteOpTime": entry.optime.to_document(),
        "lastWriteDate": bson::DateTime::from_millis(entry.wall_ms),
    };
    let records = data.entry(TRANSACTIONS_NS.to_string()).or_default();
    let id = Bson::Document(txn.lsid.clone());
    let size = |d: &Document| document_bytes(d) as i64;
    let grown = match records.iter_mut().find(|d| d.get("_id") == Some(&id)) {
        Some(d) => {
            let before = size(d);
            *d = record;
            size(d) - before
        }
        None => {
            let grown = size(&record);
            records.push(record);
            grown
        }
    };
    delta + grown
}

fn apply_op(data: &mut BTreeMap<String, Vec<Document>>, op: &Op) -> i64 {
    let size = |d: &Document| document_bytes(d) as i64;
    let same_id = |d: &Document, id: &Bson| {
        crate::values::values_equal(d.get("_id").unwrap_or(&Bson::Null), id)
    };
    match op {
        Op::Noop { .. } => 0,
        Op::Insert { ns, doc } => {
            data.entry(ns.clone()).or_default().push(doc.clone());
            size(doc)
        }
        Op::Update { ns, doc } => {
            let docs = data.entry(ns.clone()).or_default();
            let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
            match docs.iter_mut().find(|d| same_id(d, &id)) {
                Some(d) => {
                    let delta = size(doc) - size(d);
                    *d = doc.clone();
                    delta
                }
                None => {
                    docs.push(doc.clone());
                    size(doc)
                }
            }
        }
        Op::Delete { ns, id } => {
            let Some(docs) = data.get_mut(ns) else {
                return 0;
            };
            match docs.iter().position(|d| same_id(d, id)) {
                Some(i) => -size(&docs.remove(i)),
                None => 0,
            }
        }
        Op::PutUser { doc } => {
            let users = data.entry(USERS_NS.to_string()).or_default();
            let id = doc.get("_id").cloned();
            let before: i64 = users
                .iter()
                .filter(|u| u.get("_id").cloned() == id)
                .map(size)
                .sum();
            users.retain(|u| u.get("_id").cloned() != id);
            users.push(doc.clone());
            size(doc) - before
        }
        Op::DropUser { id } => {
            let Some(users) = data.get_mut(USERS_NS) else {
                return 0;
            };
            let id = Bson::String(id.clone());
            let before: i64 = users
                .iter()
                .filter(|u| u.get("_id") == Some(&id))
                .map(size)
                .sum();
            users.retain(|u| u.get("_id") != Some(&id));
            -before
        }
    }
}

/// Documents kept through a human-readable serializer (JSON) as canonical
/// extended JSON, so that their BSON types come back as they were (plain
/// serde turns a generic binary into an array and an Int64 that fits into
/// an Int32). A file written before reads back too: plain JSON values parse
/// as extended JSON.
mod extjson {
    use bson::{Bson, Document};
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::collections::BTreeMap;

    fn to_json(d: &Document) -> serde_json::Value {
        Bson::Document(d.clone()).into_canonical_extjson()
    }

    fn from_json<E: serde::de::Error>(v: serde_json::Value) -> Result<Document, E> {
        match Bson::try_from(v) {
            Ok(Bson::Document(d)) => Ok(d),
            Ok(other) => Err(E::custom(format!("not a document: {other}"))),
            Err(e) => Err(E::custom(e)),
        }
    }

    pub mod document {
        use super::*;

        pub fn serialize<S: Serializer>(d: &Document, s: S) -> Result<S::Ok, S::Error> {
            if s.is_human_readable() {
                to_json(d).serialize(s)
            } else {
                d.serialize(s)
            }
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Document, D::Error> {
            if d.is_human_readable() {
                from_json(serde_json::Value::deserialize(d)?)
            } else {
                Document::deserialize(d)
            }
        }
    }

    pub mod collections {
        use super::*;

        type Collections = BTreeMap<String, Vec<Document>>;

        pub fn serialize<S: Serializer>(c: &Collections, s: S) -> Result<S::Ok, S::Error> {
            if !s.is_human_readable() {
                return c.serialize(s);
            }
            let json: BTreeMap<&String, Vec<serde_json::Value>> = c
                .iter()
                .map(|(ns, docs)| (ns, docs.iter().map(to_json).collect()))
                .collect();
            json.serialize(s)
        }

        pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Collections, D::Error> {
            if !d.is_human_readable() {
                return Collections::deserialize(d);
            }
            BTreeMap::<String, Vec<serde_json::Value>>::deserialize(d)?
                .into_iter()
                .map(|(ns, docs)| {
                    let docs = docs
                        .into_iter()
                        .map(from_json)
                        .collect::<Result<Vec<_>, D::Error>>()?;
                    Ok((ns, docs))
                })
                .collect()
        }
    }
}

/// A member's persistent volume (think PVC): a shared handle to its durable state.
/// Hand the same volume to `Network::start_member` again to resume a member; use a
/// new one for an empty disk. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Volume(Arc<Mutex<DurableState>>);

impl Volume {
    /// An empty disk.
    pub fn new() -> Volume {
        Volume::default()
    }

    /// A disk holding `state` (e.g. deserialized from a file).
    pub fn from_state(mut state: DurableState) -> Volume {
        state.recount_data_bytes();
        state.recount_oplog_bytes();
        Volume(Arc::new(Mutex::new(state)))
    }

    /// A copy of what is on the disk now. While a member runs it writes through to
    /// its volume, so this is always current.
    pub fn snapshot(&self) -> DurableState {
        self.lock().clone()
    }

    pub(crate) fn lock(&self) -> std::sync::MutexGuard<'_, DurableState> {
        // A panic while holding the lock cannot leave the state half-written in a
        // way that matters more than losing the process; keep serving.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn insert(i: u32) -> OplogEntry {
        let optime = OpTime {
            ts: Timestamp {
                time: 1_700_000_000,
                increment: i,
            },
            t: 1,
        };
        let op = Op::Insert {
            ns: "test.docs".into(),
            doc: doc! {"_id": i as i32},
        };
        OplogEntry::new(optime, 1_700_000_000_000, op)
    }

    #[test]
    fn an_entry_counts_the_bson_size_of_its_oplog_document() {
        let entry = insert(1);
        let expected = bson::to_vec(&entry.to_document()).unwrap().len() as u64;
        assert_eq!(entry.bytes, expected);
        assert!((80..=120).contains(&entry.bytes), "{}", entry.bytes);
    }

    #[test]
    fn the_capped_oplog_keeps_its_bytes_and_the_majority_commit_point() {
        let mut state = DurableState::default();
        for i in 1..=10 {
            state.append(insert(i));
        }
        let one = state.oplog[0].bytes;
        assert_eq!(state.data_bytes, 10 * document_bytes(&doc! {"_id": 1}));
        state.cap_oplog(3 * one, state.oplog[5].optime);
        assert_eq!(state.oplog.len(), 5, "stops at the commit point");
        state.cap_oplog(3 * one, state.last_optime());
        assert_eq!(state.oplog_bytes(), 3 * one);
        assert_eq!(
            state.truncated_through,
            Some(state.oplog[0].optime).map(|mut o| {
                o.ts.increment -= 1;
                o
            })
        );
        assert_eq!(state.collection("test.docs").len(), 10, "the data stays");
        state.truncate_after(1);
        assert_eq!(state.data_bytes, 8 * document_bytes(&doc! {"_id": 1}));
        assert_eq!(state.oplog_bytes(), one, "kept as entries go");
    }

    #[test]
    fn a_retryable_writes_entries_keep_its_session_record_in_config_transactions() {
        let lsid = doc! {"id": 1, "uid": 2};
        let mut state = DurableState::default();
        let mut prev = None;
        for i in 1..=3 {
            let mut entry = insert(i);
            entry.txn = Some(TxnInfo {
                lsid: lsid.clone(),
                txn_number: 7,
                stmt_id: i as i32 - 1,
                prev_optime: prev,
            });
            prev = Some(entry.optime);
            state.append(OplogEntry::with_txn(
                entry.optime,
                entry.wall_ms,
                entry.op,
                entry.txn,
            ));
        }
        let record = |state: &DurableState| state.collection(TRANSACTIONS_NS).to_vec();
        assert_eq!(record(&state).len(), 1);
        assert_eq!(
            record(&state)[0].get_document("lastWriteOpTime").unwrap(),
            &state.oplog[2].optime.to_document()
        );
        assert_eq!(record(&state)[0].get_i64("txnNum").unwrap(), 7);
        assert!(state.oplog[1].to_document().contains_key("prevOpTime"));
        state.truncate_after(2);
        assert_eq!(
            record(&state)[0].get_document("lastWriteOpTime").unwrap(),
            &state.oplog[1].optime.to_document(),
            "a rollback takes the record back with its entries"
        );
        state.cap_oplog(1, state.last_optime());
        assert_eq!(
            record(&state).len(),
            1,
            "the capped oplog folds it into the base"
        );
        assert_eq!(
            state.data_bytes,
            state
                .data
                .values()
                .flatten()
                .map(document_bytes)
                .sum::<u64>()
        );
    }
}
