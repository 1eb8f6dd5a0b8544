//! A member's disk, as mongod fills it: the capped oplog's size in bytes,
//! chosen when the oplog is created, and what the volume holds — the data,
//! the oplog, WiredTiger's journal and the diagnostic data directory. A write
//! that does not fit ends the process as WiredTiger's failed journal write
//! does (README, *Disk*).

use crate::fcv::StartupError;
use crate::member::MemberSpec;
use crate::state::{document_bytes, DurableState, Op, OplogEntry};
use bson::doc;

const MIB: u64 = 1024 * 1024;

/// `getNewOplogSizeBytes`' floor on a disk (990 MB) and its ceiling (50 GB)
/// (`src/mongo/db/repl/oplog.cpp`).
pub const OPLOG_MIN_BYTES: u64 = 990 * MIB;
pub const OPLOG_MAX_BYTES: u64 = 50 * 1024 * MIB;

/// WiredTiger's journal: log files of `log.file_max` (100 MB), each extended
/// to that size when it is created, with `log.prealloc` keeping the next
/// one ready (`src/third_party/wiredtiger/src/config/config_def.c`,
/// `src/log/log.c` `__log_prealloc`): the file in use and one preallocated.
pub const JOURNAL_BYTES: u64 = 2 * 100 * MIB;

/// The diagnostic data directory's default cap,
/// `diagnosticDataCollectionDirectorySizeMB` (`FTDCConfig::
/// kMaxDirectorySizeBytesDefault`, `src/mongo/db/ftdc/config.h`: 250 MB).
pub const DIAGNOSTIC_DATA_BYTES: u64 = 250 * MIB;

/// WiredTiger's panic on a failed journal write ends mongod with `abort()`
/// (`fassert(50853)`), which a container reports as 128 + SIGABRT.
pub const DISK_FULL_EXIT_CODE: i32 = 134;

/// The disk a member runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Disk {
    /// The volume's size (the PVC's requested storage).
    pub capacity_bytes: u64,
    /// Whether mongod keeps diagnostic data there
    /// (`diagnosticDataCollectionEnabled`, on by default).
    pub diagnostic_data: bool,
}

impl Disk {
    /// A disk of `capacity_bytes` with diagnostic data collection on.
    pub fn new(capacity_bytes: u64) -> Disk {
        Disk {
            capacity_bytes,
            diagnostic_data: true,
        }
    }

    /// What the volume holds besides the data and the oplog.
    pub fn overhead_bytes(&self) -> u64 {
        JOURNAL_BYTES
            + if self.diagnostic_data {
                DIAGNOSTIC_DATA_BYTES
            } else {
                0
            }
    }

    /// Bytes in use with `state` on it.
    pub fn used_bytes(&self, state: &DurableState) -> u64 {
        state.data_bytes + state.oplog_bytes() + self.overhead_bytes()
    }

    /// Whether `more` bytes still fit.
    pub fn fits(&self, state: &DurableState, more: u64) -> bool {
        self.used_bytes(state).saturating_add(more) <= self.capacity_bytes
    }
}

/// What a write needs on the volume: its oplog entry and the document it
/// stores (an insert's or an update's; a delete frees room later, at the
/// next checkpoint, but its entry is written first).
pub fn write_bytes(entry: &OplogEntry) -> u64 {
    let document = match &entry.op {
        Op::Insert { doc, .. } | Op::Update { doc, .. } | Op::PutUser { doc } => {
            document_bytes(doc)
        }
        Op::Noop { .. } | Op::Delete { .. } | Op::DropUser { .. } => 0,
    };
    entry.bytes + document
}

/// What WiredTiger logs when a journal write finds no room, before its panic
/// ends the process (`__log_fs_write`: "fatal log failure", ENOSPC, then
/// WT_PANIC; mongod's `mdb_handle_error_with_startup_suppression`,
/// `src/mongo/db/storage/wiredtiger/wiredtiger_kv_engine.cpp`, logs each as
/// 22435 and fasserts 50853 on the panic).
pub fn log_disk_full(member: &str, used: u64, capacity: u64) {
    tracing::error!(member, id = 22435, error = 28, used, capacity,
        message = "__log_fs_write: journal/WiredTigerLog.0000000001: fatal log failure: No space left on device",
        "WiredTiger error message");
    tracing::error!(
        member,
        id = 22435,
        error = -31804,
        message =
            "__log_fs_write: the process must exit and restart: WT_PANIC: WiredTiger library panic",
        "WiredTiger error message"
    );
    tracing::error!(member, id = 23089, msgid = 50853, "Fatal assertion");
}

/// At every start mongod writes a document to `local.startup_log`
/// (`logStartup`, `src/mongo/db/mongod_main.cpp`); on a volume with no room
/// for it the journal write fails and the process aborts before it serves,
/// so a member whose disk filled crash-loops.
pub fn startup_check(spec: &MemberSpec, state: &DurableState) -> Result<(), StartupError> {
    let Some(disk) = spec.disk else {
        return Ok(());
    };
    let now = bson::DateTime::now();
    let startup_log = doc! {
        "_id": format!("{}-{}", spec.listen, now.timestamp_millis()),
        "hostname": spec.listen.ip().to_string(),
        "startTime": now,
        "startTimeLocal": now.try_to_rfc3339_string().unwrap_or_default(),
        "cmdLine": {"replication": {"replSet": spec.repl_set.clone()}},
        "pid": i64::from(std::process::id()),
        "buildinfo": {"version": spec.version.to_string()},
    };
    if disk.fits(state, document_bytes(&startup_log)) {
        return Ok(());
    }
    log_disk_full(
        &spec.listen.to_string(),
        disk.used_bytes(state),
        disk.capacity_bytes,
    );
    Err(StartupError {
        exit_code: DISK_FULL_EXIT_CODE,
        log_id: 22435,
        log_msg: "WiredTiger error message",
        message: "__log_fs_write: journal/WiredTigerLog.0000000001: fatal log failure: No space left on device".into(),
    })
}

/// The capped oplog's size when it is created (`getNewOplogSizeBytes`):
/// `--oplogSize` when given, else 5 % of the free disk, at least 990 MB and at
/// most 50 GB. Without either (no option, no known disk) it is never
/// truncated.
pub fn new_oplog_size(
    option: Option<u64>,
    disk: Option<Disk>,
    state: &DurableState,
) -> Option<u64> {
    if option.is_some() {
        return option;
    }
    let disk = disk?;
    let free = disk.capacity_bytes.saturating_sub(disk.used_bytes(state));
    Some((free / 20).clamp(OPLOG_MIN_BYTES, OPLOG_MAX_BYTES))
}

/// Parses a Kubernetes quantity (`1Gi`, `512Mi`, `10G`, `1500M`, `1e9`) as
/// bytes; None for a malformed one.
pub fn parse_quantity(quantity: &str) -> Option<u64> {
    const SUFFIXES: [(&str, f64); 12] = [
        ("Ki", 1024.0),
        ("Mi", 1048576.0),
        ("Gi", 1073741824.0),
        ("Ti", 1099511627776.0),
        ("Pi", 1125899906842624.0),
        ("Ei", 1152921504606846976.0),
        ("k", 1e3),
        ("M", 1e6),
        ("G", 1e9),
        ("T", 1e12),
        ("P", 1e15),
        ("E", 1e18),
    ];
    let quantity = quantity.trim();
    let (number, multiplier) = SUFFIXES
        .iter()
        .find_map(|(suffix, m)| quantity.strip_suffix(suffix).map(|n| (n, *m)))
        .unwrap_or((quantity, 1.0));
    let bytes = number.parse::<f64>().ok()? * multiplier;
    (bytes.is_finite() && bytes >= 0.0).then_some(bytes.ceil() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oplog_is_five_percent_of_the_free_disk_between_990_mb_and_50_gb() {
        let empty = DurableState::default();
        assert_eq!(
            new_oplog_size(Some(5 * MIB), Some(Disk::new(MIB)), &empty),
            Some(5 * MIB)
        );
        assert_eq!(new_oplog_size(None, None, &empty), None);
        let gib = 1024 * MIB;
        assert_eq!(
            new_oplog_size(None, Some(Disk::new(gib)), &empty),
            Some(OPLOG_MIN_BYTES)
        );
        let big = Disk::new(100 * gib);
        let free = 100 * gib - JOURNAL_BYTES - DIAGNOSTIC_DATA_BYTES;
        assert_eq!(new_oplog_size(None, Some(big), &empty), Some(free / 20));
        assert_eq!(
            new_oplog_size(None, Some(Disk::new(4096 * gib)), &empty),
            Some(OPLOG_MAX_BYTES)
        );
    }

    #[test]
    fn a_start_needs_room_for_its_startup_log_document() {
        let spec = |capacity| MemberSpec {
            disk: Some(Disk::new(capacity)),
            ..MemberSpec::new("127.0.0.1:27017".parse().unwrap(), "rs0")
        };
        let mut state = DurableState::default();
        state
            .data
            .insert("test.docs".into(), vec![doc! {"pad": "x".repeat(10_000)}]);
        state.recount_data_bytes();
        let used = Disk::new(0).used_bytes(&state);
        assert!(startup_check(&spec(used + 1024 * 1024), &state).is_ok());
        let full = startup_check(&spec(used + 10), &state).unwrap_err();
        assert_eq!(full.exit_code, DISK_FULL_EXIT_CODE);
        assert!(full.message.contains("No space left on device"));
        let unknown = MemberSpec::new("127.0.0.1:27017".parse().unwrap(), "rs0");
        assert!(startup_check(&unknown, &state).is_ok());
    }

    #[test]
    fn quantities() {
        assert_eq!(parse_quantity("1Gi"), Some(1024 * MIB));
        assert_eq!(parse_quantity("512Mi"), Some(512 * MIB));
        assert_eq!(parse_quantity("10G"), Some(10_000_000_000));
        assert_eq!(parse_quantity("1e3"), Some(1000));
        assert_eq!(parse_quantity("1.5Gi"), Some(1536 * MIB));
        assert_eq!(parse_quantity("1Ei"), Some(1 << 60));
        assert_eq!(parse_quantity("lots"), None);
    }
}
