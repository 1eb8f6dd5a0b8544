//! Replication: initial sync from a member with data (taking
//! `initial_sync_duration`), pulling oplog entries from the primary (or, with
//! chaining, a secondary ahead of this one) with the network's lag and
//! `secondaryDelaySecs`, the commit point travelling with them, rollback of
//! entries the source does not have, the capped oplog, and the member too
//! stale to catch up (RECOVERING) when every source's oplog starts after its
//! last optime.

use std::time::{Duration, Instant};

use super::{now_ms, Member, MemberState};
use crate::config::ReplSetConfig;
use crate::network::Network;
use crate::state::{DurableState, OpTime, OplogEntry};

impl Member {
    /// Entries after `after` from this member's oplog, or None if `after` is not in it
    /// (the caller diverged and must roll back).
    pub(crate) fn entries_after(&self, after: OpTime) -> Option<(Vec<OplogEntry>, OpTime)> {
        let commit = self.lock().commit_point;
        let disk = self.disk();
        let start = if after == OpTime::NULL || disk.truncated_through == Some(after) {
            0
        } else {
            disk.oplog.binary_search_by(|e| e.optime.cmp(&after)).ok()? + 1
        };
        Some((disk.oplog[start..].to_vec(), commit))
    }

    pub(crate) fn has_optime(&self, optime: OpTime) -> bool {
        self.disk()
            .oplog
            .binary_search_by(|e| e.optime.cmp(&optime))
            .is_ok()
    }

    /// Copy of the data set for an initial sync: (base, oplog, data).
    pub(crate) fn clone_data(&self) -> Option<DurableState> {
        let inner = self.lock();
        if !matches!(inner.state, MemberState::Primary | MemberState::Secondary) {
            return None;
        }
        let disk = self.disk();
        if disk.oplog.is_empty() {
            return None;
        }
        Some(disk.clone())
    }

    pub(super) fn initial_sync(&self, net: &Network, cfg: &ReplSetConfig) {
        let my_host = {
            let mut inner = self.lock();
            let now = Instant::now();
            if inner.next_initial_sync.is_some_and(|t| now < t) {
                return;
            }
            // Cloning takes time; the copy is taken when it ends, which is
            // where mongod's syncer stands once it applied the oplog fetched
            // meanwhile. The member stays STARTUP2 (and votes) until then.
            let duration = net
                .initial_sync_duration()
                .unwrap_or(self.spec.initial_sync_duration);
            let started = *inner.initial_sync_started.get_or_insert(now);
            if now < started + duration {
                return;
            }
            inner.self_host.clone()
        };
        for m in &cfg.members {
            if Some(&m.host) == my_host.as_ref() {
                continue;
            }
            let Some(peer) = net.dial(self, &m.host) else {
                continue;
            };
            let Some(copy) = peer.clone_data() else {
                continue;
            };
            // The initial syncer reads the source's FCV document first: one this
            // binary cannot parse, or an unfinished upgrade/downgrade, fails the
            // attempt.
            if let Some(Err(reason)) = copy.fcv_document().map(|d| {
                match crate::fcv::parse_document(self.spec.version, d) {
                    Ok(crate::fcv::Fcv::Version(_)) => Ok(()),
                    Ok(unsafe_fcv) => Err(format!("IncompatibleServerVersion: Sync source had unsafe feature compatibility version: {unsafe_fcv}")),
                    Err(e) => Err(format!("{}: {}", e.code_name, e.errmsg)),
                }
            }) {
                self.initial_sync_attempt_failed(&reason);
                return;
            }
            let mut inner = self.lock();
            {
                let mut disk = self.disk();
                // The initial syncer creates the oplog on the emptied volume
                // before it clones (mongod's `createOplog`).
                disk.replace_oplog(Vec::new());
                disk.data.clear();
                disk.data_bytes = 0;
                self.create_oplog(&mut disk);
                let needed = copy.data_bytes + copy.oplog_bytes();
                if !self.room_for(&disk, needed) {
                    drop(disk);
                    drop(inner);
                    self.disk_full();
                    return;
                }
                disk.base = copy.base;
                disk.replace_oplog(copy.oplog);
                disk.data = copy.data;
                disk.data_bytes = copy.data_bytes;
                disk.truncated_through = copy.truncated_through;
                disk.initial_sync_pending = false;
                if copy.term > disk.term {
                    disk.term = copy.term;
                }
            }
            inner.sync_source = Some(m.host.clone());
            inner.initial_sync_failures = 0;
            inner.next_initial_sync = None;
            inner.initial_sync_started = None;
            self.refresh_role(&mut inner);
            tracing::info!(member = %self.listen, source = %m.host, "initial sync done");
            return;
        }
    }

    /// mongod retries a failed initial sync attempt after `initialSyncRetryWait`
    /// (1 s) and gives up after `numInitialSyncAttempts` (10) with a fatal
    /// assertion.
    fn initial_sync_attempt_failed(&self, reason: &str) {
        const ATTEMPTS: u32 = 10;
        let failures = {
            let mut inner = self.lock();
            inner.initial_sync_failures += 1;
            inner.next_initial_sync = Some(Instant::now() + Duration::from_secs(1));
            inner.initial_sync_started = None;
            inner.initial_sync_failures
        };
        tracing::error!(member = %self.listen, id = 21200, attemptsLeft = ATTEMPTS - failures.min(ATTEMPTS), error = %reason, "Initial sync attempt failed");
        if failures >= ATTEMPTS {
            tracing::error!(member = %self.listen, id = 21202, "The maximum number of retries have been exhausted for initial sync");
            tracing::error!(member = %self.listen, id = 21416, "Initial sync failed, shutting down now. Restart the server to attempt a new initial sync");
            tracing::error!(member = %self.listen, id = 23095, msgid = 40088, error = %reason, "Fatal assertion");
            self.crash(14);
        }
    }

    pub(super) fn replicate(&self, net: &Network, cfg: &ReplSetConfig) {
        let my_last = self.disk().last_optime();
        let (candidates, my_host) = {
            let inner = self.lock();
            let mut c = Vec::new();
            if let Some(p) = self.known_primary(&inner) {
                c.push(p);
            }
            if cfg.settings.chaining_allowed {
                let mut others: Vec<(String, OpTime)> = inner
                    .peers
                    .iter()
                    .filter(|(_, p)| p.up)
                    .filter_map(|(h, p)| p.view.as_ref().map(|v| (h.clone(), v)))
                    .filter(|(_, v)| v.state == MemberState::Secondary)
                    .map(|(h, v)| (h, v.optime))
                    .filter(|(_, optime)| *optime > my_last)
                    .collect();
                others.sort_by_key(|o| std::cmp::Reverse(o.1));
                c.extend(others.into_iter().map(|(h, _)| h));
            }
            (c, inner.self_host.clone())
        };
        let mut too_stale_for = None;
        for host in candidates {
            if Some(&host) == my_host.as_ref() {
                continue;
            }
            let Some(source) = net.dial(self, &host) else {
                continue;
            };
            let source_view_state = source.state();
            if !matches!(
                source_view_state,
                MemberState::Primary | MemberState::Secondary
            ) {
                continue;
            }
            // `TopologyCoordinator::_choosePrimaryAsSyncSource`: not a primary
            // behind this member (a new primary still catching up).
            if source_view_state == MemberState::Primary && source.last_optime() < my_last {
                continue;
            }
            // mongod's `SyncSourceResolver`: a source whose oplog starts after
            // our last optime cannot be used.
            if source.disk().too_far_ahead_of(my_last) {
                too_stale_for.get_or_insert(host);
                continue;
            }
            self.no_longer_too_stale(&host);
            match source.entries_after(my_last) {
                // Diverged from the primary, or from a secondary that is ahead of us
                // on another branch: roll back. A secondary merely behind us is skipped.
                None if source_view_state == MemberState::Primary
                    || source.last_optime() > my_last =>
                {
                    self.rollback(&source);
                    return;
                }
                None => continue,
                Some((entries, commit)) => {
                    if entries.is_empty()
                        && source_view_state != MemberState::Primary
                        && source.last_optime() <= my_last
                    {
                        // A secondary that is not ahead of us is no use as a source.
                        continue;
                    }
                    self.apply_entries(net, cfg, entries, commit, &host);
                    return;
                }
            }
        }
        let earliest = too_stale_for.as_ref().map(|source| {
            net.dial(self, source)
                .and_then(|s| s.disk().oplog.first().map(|e| e.optime))
        });
        let mut inner = self.lock();
        inner.sync_source = None;
        if let (Some(earliest), false) = (earliest, inner.too_stale) {
            // `BackgroundSync::_produce`: every reachable source is too far
            // ahead; maintenance mode and RECOVERING until one is not.
            inner.too_stale = true;
            self.refresh_role(&mut inner);
            tracing::error!(member = %self.listen, id = 21126, "too stale to catch up -- entering maintenance mode");
            tracing::info!(member = %self.listen, id = 21084, lastOpTimeFetched = ?my_last, "Our newest OpTime");
            tracing::info!(member = %self.listen, id = 21085, earliestOpTimeSeen = ?earliest, "Earliest OpTime available");
        }
    }

    /// A source has our next entry again: out of maintenance mode.
    fn no_longer_too_stale(&self, source: &str) {
        let mut inner = self.lock();
        if inner.too_stale {
            inner.too_stale = false;
            self.refresh_role(&mut inner);
            tracing::info!(member = %self.listen, id = 21091, %source, "No longer too stale. Able to sync from source");
        }
    }

    /// The capped oplog drops its oldest entries beyond its size in bytes,
    /// in the background as mongod's oplog cap maintainer does, never the
    /// majority commit point or what follows it.
    pub(super) fn cap_oplog(&self, net: &Network) {
        let keep_from = self.lock().commit_point;
        let mut disk = self.disk();
        if let Some(max) = net.oplog_size().unwrap_or(disk.oplog_max_bytes) {
            disk.cap_oplog(max, keep_from);
        }
    }

    /// Creates the capped oplog: its size is chosen now, from the option or
    /// the free disk (`createOplog` → `getNewOplogSizeBytes`), and kept.
    pub(crate) fn create_oplog(&self, disk: &mut DurableState) {
        disk.oplog_max_bytes =
            crate::disk::new_oplog_size(self.spec.oplog_size_bytes, self.spec.disk, disk);
        if let Some(bytes) = disk.oplog_max_bytes {
            tracing::info!(member = %self.listen, id = 21251, oplogSizeMB = bytes / (1024 * 1024), oplogSizeBytes = bytes, "Creating replication oplog");
        }
    }

    /// Whether `more` bytes still fit on this member's volume.
    pub(crate) fn room_for(&self, disk: &DurableState, more: u64) -> bool {
        self.spec.disk.is_none_or(|d| d.fits(disk, more))
    }

    /// A write found no room: WiredTiger's journal write fails with ENOSPC,
    /// it panics, and mongod's `fassert(50853)` aborts the process.
    pub(crate) fn disk_full(&self) {
        if let Some(d) = self.spec.disk {
            let used = d.used_bytes(&self.disk());
            crate::disk::log_disk_full(&self.listen, used, d.capacity_bytes);
        }
        self.crash(crate::disk::DISK_FULL_EXIT_CODE);
    }

    pub(super) fn apply_entries(
        &self,
        net: &Network,
        cfg: &ReplSetConfig,
        entries: Vec<OplogEntry>,
        commit: OpTime,
        source: &str,
    ) {
        let mut lag = net.lag_of(&self.listen);
        let mut inner = self.lock();
        if let Some(me) = self.self_config(&inner, cfg) {
            lag = lag.max(Duration::from_secs(me.secondary_delay_secs.max(0) as u64));
        }
        let horizon = now_ms() - lag.as_millis() as i64;
        let mut disk = self.disk();
        let mut fatal = None;
        let mut full = false;
        for e in entries {
            // Fetched without our locks: another fetch (a catch-up step run by
            // the election while the loop ticks) may have appended it already.
            if e.optime <= disk.last_optime() {
                continue;
            }
            if e.wall_ms > horizon {
                break;
            }
            if !self.room_for(&disk, crate::disk::write_bytes(&e)) {
                full = true;
                break;
            }
            // The FCV op observer parses an FCV document the entry writes; one
            // this binary cannot parse fails the batch, and the applier's
            // fassert ends the process.
            if let Some(doc) = e.op.written_fcv_document() {
                if let Err(err) = crate::fcv::check_write(self.spec.version, doc) {
                    fatal = Some((e, err));
                    break;
                }
            }
            disk.append(e);
        }
        let last = disk.last_optime();
        drop(disk);
        if full {
            drop(inner);
            self.disk_full();
            return;
        }
        if let Some((entry, err)) = fatal {
            drop(inner);
            let error = format!("{}: {}", err.code_name, err.errmsg);
            tracing::error!(member = %self.listen, id = 21237, oplogEntry = ?entry, error = %error, "Error applying operation");
            tracing::error!(member = %self.listen, id = 21235, error = %error, "Failed to apply batch of operations");
            tracing::error!(member = %self.listen, id = 23095, msgid = 34437, error = %error, "Fatal assertion");
            self.crash(14);
            return;
        }
        // The majority commit point travels with replication; never past what we hold.
        inner.commit_point = inner.commit_point.max(commit.min(last)).min(last);
        if inner.sync_source.as_deref() != Some(source) {
            inner.sync_source = Some(source.to_string());
        }
    }

    /// Our oplog diverged from the source: drop entries it does not have.
    fn rollback(&self, source: &Member) {
        let optimes: Vec<OpTime> = self.disk().oplog.iter().map(|e| e.optime).collect();
        let mut keep = 0;
        for (i, op) in optimes.iter().enumerate().rev() {
            if source.has_optime(*op) {
                keep = i + 1;
                break;
            }
        }
        let _inner = self.lock();
        let mut disk = self.disk();
        let dropped = disk.oplog.len().saturating_sub(keep);
        disk.truncate_after(keep);
        tracing::warn!(member = %self.listen, dropped, "rolled back entries not on the sync source");
    }
}
