//! `dbStats` and `collStats`: what a member's volume holds, in the fields
//! mongod reports, so a client can read how full the disk is
//! (`fsUsedSize` / `fsTotalSize`) and how large the oplog may grow
//! (`local.oplog.rs` `maxSize`).

use bson::{doc, Document};

use crate::commands::{db_of, num, CmdResult};
use crate::error::{self, CmdError};
use crate::member::Member;
use crate::state::{document_bytes, DurableState};

const OPLOG_COLLECTION: &str = "oplog.rs";

/// `scale` (default 1): sizes are divided by it. A value below 1 counts
/// as 1 (README, *Differences*).
fn scale_of(body: &Document) -> i64 {
    num(body.get("scale")).map_or(1, |s| (s as i64).max(1))
}

/// The collections of `db` on this member: name → (document count, bytes).
fn collections(disk: &DurableState, db: &str) -> Vec<(String, i64, i64)> {
    let mut out: Vec<(String, i64, i64)> = disk
        .data
        .iter()
        .filter_map(|(ns, docs)| {
            let coll = ns.strip_prefix(db)?.strip_prefix('.')?;
            let bytes: u64 = docs.iter().map(document_bytes).sum();
            Some((coll.to_string(), docs.len() as i64, bytes as i64))
        })
        .collect();
    if db == "local" && !disk.oplog.is_empty() {
        out.push((
            OPLOG_COLLECTION.to_string(),
            disk.oplog.len() as i64,
            disk.oplog_bytes() as i64,
        ));
    }
    out
}

/// `dbStats` (`CmdDbStats`, `DatabaseImpl::getStats`): counts and sizes of
/// the database's collections, and the volume's `fsUsedSize` /
/// `fsTotalSize` (what the filesystem under the dbpath has in use and holds).
pub(crate) fn db_stats(member: &Member, body: &Document) -> CmdResult {
    let scale = scale_of(body);
    let db = db_of(body);
    let disk = member.disk();
    let colls = collections(&disk, &db);
    let objects: i64 = colls.iter().map(|c| c.1).sum();
    let data_size: i64 = colls.iter().map(|c| c.2).sum();
    let indexes = colls.iter().filter(|c| c.0 != OPLOG_COLLECTION).count() as i64;
    let mut reply = doc! {
        "db": db.clone(),
        "collections": colls.len() as i64,
        "views": 0_i64,
        "objects": objects,
        "avgObjSize": if objects == 0 { 0.0 } else { data_size as f64 / objects as f64 },
        "dataSize": data_size / scale,
        "storageSize": data_size / scale,
        "indexes": indexes,
        "indexSize": 0_i64,
        "totalSize": data_size / scale,
        "scaleFactor": scale,
    };
    if let Some(volume) = member.spec().disk {
        reply.insert("fsUsedSize", volume.used_bytes(&disk) as i64 / scale);
        reply.insert("fsTotalSize", volume.capacity_bytes as i64 / scale);
    }
    Ok(reply)
}

/// `collStats` (`appendCollectionStorageStats`,
/// `src/mongo/db/stats/storage_stats.cpp`): a collection's size and count;
/// a capped one (the oplog) also `max` and `maxSize`, its size in bytes.
pub(crate) fn coll_stats(member: &Member, name: &str, body: &Document) -> CmdResult {
    let scale = scale_of(body);
    let db = db_of(body);
    let Some(coll) = body.get_str(name).ok().filter(|c| !c.is_empty()) else {
        return Err(CmdError::new(
            error::INVALID_NAMESPACE,
            format!("Invalid namespace specified '{db}.'"),
        ));
    };
    let disk = member.disk();
    let Some((_, count, size)) = collections(&disk, &db).into_iter().find(|c| c.0 == coll) else {
        return Err(CmdError::new(
            error::NAMESPACE_NOT_FOUND,
            format!("Collection [{db}.{coll}] not found."),
        ));
    };
    let oplog = db == "local" && coll == OPLOG_COLLECTION;
    let mut reply = doc! {"ns": format!("{db}.{coll}"), "size": size / scale, "count": count};
    if count > 0 {
        reply.insert("avgObjSize", size / count);
    }
    reply.insert("storageSize", size / scale);
    reply.insert("freeStorageSize", 0_i64);
    let max_size = disk.oplog_max_bytes.filter(|_| oplog);
    reply.insert("capped", max_size.is_some());
    if let Some(max_size) = max_size {
        reply.insert("max", 0_i64);
        reply.insert("maxSize", max_size as i64 / scale);
    }
    reply.insert("nindexes", if oplog { 0_i32 } else { 1 });
    reply.insert("totalIndexSize", 0_i64);
    reply.insert("totalSize", size / scale);
    reply.insert("indexSizes", Document::new());
    reply.insert("scaleFactor", scale);
    Ok(reply)
}
