//! A new primary's catch-up phase, as mongod runs it (mongodb/mongo
//! `src/mongo/db/repl/replication_coordinator_impl.cpp`:
//! `_postWonElectionUpdateMemberState`, `CatchupState::start_inlock`,
//! `CatchupState::signalHeartbeatUpdate_inlock`, `CatchupState::abort_inlock`,
//! `_enterDrainMode_inlock`, `signalDrainComplete`;
//! `src/mongo/db/repl/topology_coordinator.cpp`
//! `latestKnownOpTimeSinceHeartbeatRestart`).
//!
//! Having won, the member is PRIMARY but not writable. Its heartbeats are
//! restarted; once every peer has answered (or failed) one since the win, the
//! newest optime an up peer reported is the target — its own last applied
//! optime being that newest already ends the phase at once. Meanwhile it keeps
//! fetching oplog entries from a member ahead of it (chaining is always allowed
//! here: `_getSyncSourceReadPreference`). The phase ends when its last applied
//! optime reaches the target, when `catchUpTimeoutMillis` passes (-1: never;
//! 0: no catch-up at all, nor in a one-member set), or when its source no
//! longer has its last entry (`BackgroundSync::_runRollback` on a primary:
//! "Rollback situation detected in catch-up mode"). Then drain mode ends at
//! once (the sim has no apply buffer) and `signalDrainComplete` writes the
//! "new primary" no-op in its term — its first optime of the term — and the
//! primary becomes writable. Stepping down abandons the phase (`step_down_locked`).

use std::time::{Duration, Instant};

use super::{now_ms, CatchUp, Inner, Member, MemberState};
use crate::config::ReplSetConfig;
use crate::network::Network;
use crate::state::{Op, OpTime, OplogEntry};

impl Member {
    /// On winning in `term` (`CatchupState::start_inlock`): enters catch-up,
    /// or skips it — one member, or `catchUpTimeoutMillis: 0` — and becomes
    /// writable at once.
    pub(super) fn begin_catch_up(&self, inner: &mut Inner, cfg: &ReplSetConfig, term: i64) {
        let now = Instant::now();
        let timeout = cfg.settings.catch_up_timeout_millis;
        inner.catching_up = Some(CatchUp {
            term,
            since: now,
            target: None,
            until: u64::try_from(timeout)
                .ok()
                .map(|ms| now + Duration::from_millis(ms)),
        });
        tracing::info!(member = %self.listen, id = 21359, "Entering primary catch-up mode");
        if cfg.members.len() == 1 {
            tracing::info!(member = %self.listen, id = 6015304, "Skipping primary catchup since we are the only node in the replica set.");
            self.end_catch_up(inner);
        } else if timeout == 0 {
            tracing::info!(member = %self.listen, id = 21360, "Skipping primary catchup since the catchup timeout is 0");
            self.end_catch_up(inner);
        }
    }

    /// One step of the catch-up phase (each tick, and right after the win):
    /// the timeout, the target from the heartbeats since the win, fetching
    /// from a member ahead, and the end once the target is reached.
    pub(super) fn catch_up(&self, net: &Network, cfg: &ReplSetConfig) {
        if self.catch_up_concluded(cfg) {
            return;
        }
        self.fetch_for_catch_up(net, cfg);
        if self.exit_code().is_none() {
            self.catch_up_concluded(cfg);
        }
    }

    /// Ends the phase when it is due; true when it is over (or was not running).
    fn catch_up_concluded(&self, cfg: &ReplSetConfig) -> bool {
        let mut inner = self.lock();
        let Some(c) = inner.catching_up.clone() else {
            return true;
        };
        if inner.state != MemberState::Primary {
            inner.catching_up = None;
            return true;
        }
        let my_last = self.disk().last_optime();
        if c.until.is_some_and(|t| Instant::now() >= t) {
            tracing::info!(member = %self.listen, id = 21361, "Catchup timed out after becoming primary");
            self.end_catch_up(&mut inner);
            return true;
        }
        // The waiter on the target: our last applied optime reached it.
        if c.target.is_some_and(|t| t <= my_last) {
            tracing::info!(member = %self.listen, id = 21368, target = ?c.target, ?my_last, "Caught up to the latest known optime successfully after becoming primary");
            self.end_catch_up(&mut inner);
            return true;
        }
        // `signalHeartbeatUpdate_inlock`, with the heartbeat data recorded so far.
        let Some(latest) = self.latest_known_optime_since(&inner, cfg, c.since) else {
            return false;
        };
        if latest <= my_last {
            tracing::info!(member = %self.listen, id = 21364, target = ?latest, ?my_last, "Caught up to the latest optime known via heartbeats after becoming primary");
            self.end_catch_up(&mut inner);
            return true;
        }
        if c.target != Some(latest) {
            tracing::info!(member = %self.listen, id = 21365, target = ?latest, "Heartbeats updated catchup target optime");
            if let Some(c) = inner.catching_up.as_mut() {
                c.target = Some(latest);
            }
        }
        false
    }

    /// `TopologyCoordinator::latestKnownOpTimeSinceHeartbeatRestart`: the
    /// newest optime the up peers reported, once every other member of the
    /// config has a heartbeat outcome since `since` (else `None`).
    fn latest_known_optime_since(
        &self,
        inner: &Inner,
        cfg: &ReplSetConfig,
        since: Instant,
    ) -> Option<OpTime> {
        let mut latest = OpTime::NULL;
        for m in cfg
            .members
            .iter()
            .filter(|m| Some(&m.host) != inner.self_host.as_ref())
        {
            let info = inner.peers.get(&m.host)?;
            if info.last_attempt.is_none_or(|t| t < since) {
                return None;
            }
            if !info.up {
                continue;
            }
            if let Some(v) = &info.view {
                latest = latest.max(v.optime);
            }
        }
        Some(latest)
    }

    /// Pulls entries from the freshest up member that is ahead (PRIMARY or
    /// SECONDARY, with this member's last entry in its oplog), with the
    /// network's lag. A source that no longer has our last entry ends the
    /// phase (mongod's fetcher would need a rollback, which a primary does not
    /// run); a source whose oplog starts after our last entry is passed over.
    fn fetch_for_catch_up(&self, net: &Network, cfg: &ReplSetConfig) {
        let my_last = self.disk().last_optime();
        let candidates: Vec<String> = {
            let inner = self.lock();
            if inner.catching_up.is_none() {
                return;
            }
            let mut ahead: Vec<(String, OpTime)> = inner
                .peers
                .iter()
                .filter(|(h, p)| p.up && Some(*h) != inner.self_host.as_ref())
                .filter_map(|(h, p)| p.view.as_ref().map(|v| (h.clone(), v)))
                .filter(|(_, v)| matches!(v.state, MemberState::Primary | MemberState::Secondary))
                .filter(|(_, v)| v.optime > my_last)
                .map(|(h, v)| (h, v.optime))
                .collect();
            ahead.sort_by_key(|a| std::cmp::Reverse(a.1));
            ahead.into_iter().map(|(h, _)| h).collect()
        };
        for host in candidates {
            let Some(source) = net.dial(self, &host) else {
                continue;
            };
            if !matches!(
                source.state(),
                MemberState::Primary | MemberState::Secondary
            ) || source.last_optime() <= my_last
                || source.disk().too_far_ahead_of(my_last)
            {
                continue;
            }
            match source.entries_after(my_last) {
                None => {
                    let mut inner = self.lock();
                    if inner.catching_up.is_some() {
                        tracing::warn!(member = %self.listen, id = 21123, source = %host, "Rollback situation detected in catch-up mode. Aborting catch-up mode");
                        self.end_catch_up(&mut inner);
                    }
                }
                Some((entries, commit)) => {
                    self.apply_entries(net, cfg, entries, commit, &host);
                }
            }
            return;
        }
    }

    /// `CatchupState::abort_inlock` → drain mode → `signalDrainComplete`:
    /// the "new primary" no-op in its term (mongod's `onTransitionToPrimary`,
    /// then `completeTransitionToPrimary(firstOpTime)`), the term stamped on
    /// the config, and writes accepted from now on.
    fn end_catch_up(&self, inner: &mut Inner) {
        let Some(c) = inner.catching_up.take() else {
            return;
        };
        tracing::info!(member = %self.listen, id = 21363, "Exited primary catch-up mode");
        let mut disk = self.disk();
        if inner.state != MemberState::Primary || disk.term != c.term {
            return;
        }
        let optime = disk.next_optime(c.term, now_ms());
        disk.append(OplogEntry::new(
            optime,
            now_ms(),
            Op::Noop {
                msg: "new primary".into(),
            },
        ));
        inner.first_optime_of_my_term = optime;
        // The new primary stamps the current config with its term.
        if let Some(cfg) = disk.config.as_mut() {
            cfg.term = c.term;
        }
        drop(disk);
        inner.sync_source = None;
        inner.heartbeat_now = true;
        self.bump_topology(inner);
        tracing::info!(member = %self.listen, id = 21331, term = c.term, "Transition to primary complete; database writes are now permitted");
    }
}
