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

/// One oplog entry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OplogEntry {
    pub optime: OpTime,
    /// Wall clock of the write on the primary (ms since epoch).
    pub wall_ms: i64,
    pub op: Op,
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
    pub base: BTreeMap<String, Vec<Document>>,
    pub oplog: Vec<OplogEntry>,
    /// `base` with the oplog applied.
    pub data: BTreeMap<String, Vec<Document>>,
    /// Set while the member must (re)do an initial sync before serving as SECONDARY.
    pub initial_sync_pending: bool,
    /// The last entry the capped oplog dropped (its effect is in `base`): a
    /// member whose last optime is older cannot sync from this one.
    #[serde(default)]
    pub truncated_through: Option<OpTime>,
}

impl DurableState {
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
        apply(&mut self.data, &entry.op);
        self.oplog.push(entry);
    }

    /// Drops the oldest entries beyond `max_entries`, as the capped oplog does,
    /// but never one at or after `keep_from` (the majority commit point: mongod
    /// lets the oplog grow past its size rather than delete it). Their effect
    /// moves into `base`.
    pub fn cap_oplog(&mut self, max_entries: usize, keep_from: OpTime) {
        let excess = self.oplog.len().saturating_sub(max_entries.max(1));
        let drop = self
            .oplog
            .iter()
            .take(excess)
            .take_while(|e| e.optime < keep_from)
            .count();
        for e in self.oplog.drain(..drop) {
            apply(&mut self.base, &e.op);
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
        let mut data = self.base.clone();
        for e in &self.oplog {
            apply(&mut data, &e.op);
        }
        self.data = data;
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

fn apply(data: &mut BTreeMap<String, Vec<Document>>, op: &Op) {
    match op {
        Op::Noop { .. } => {}
        Op::Insert { ns, doc } => data.entry(ns.clone()).or_default().push(doc.clone()),
        Op::Update { ns, doc } => {
            let docs = data.entry(ns.clone()).or_default();
            let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
            match docs
                .iter_mut()
                .find(|d| crate::values::values_equal(d.get("_id").unwrap_or(&Bson::Null), &id))
            {
                Some(d) => *d = doc.clone(),
                None => docs.push(doc.clone()),
            }
        }
        Op::Delete { ns, id } => {
            if let Some(docs) = data.get_mut(ns) {
                if let Some(i) = docs.iter().position(|d| {
                    crate::values::values_equal(d.get("_id").unwrap_or(&Bson::Null), id)
                }) {
                    docs.remove(i);
                }
            }
        }
        Op::PutUser { doc } => {
            let users = data.entry(USERS_NS.to_string()).or_default();
            let id = doc.get("_id").cloned();
            users.retain(|u| u.get("_id").cloned() != id);
            users.push(doc.clone());
        }
        Op::DropUser { id } => {
            if let Some(users) = data.get_mut(USERS_NS) {
                users.retain(|u| u.get("_id") != Some(&Bson::String(id.clone())));
            }
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
    pub fn from_state(state: DurableState) -> Volume {
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
