//! Elections: votes (one per term, only for candidates at least as up to date
//! with a config no older), standing after the election timeout or on
//! replSetStepUp (dry run, then term + 1), priority takeover, and step-down.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{election_id_for, now_ms, randomized_election_timeout, Inner, Member, MemberState};
use crate::config::ReplSetConfig;
use crate::network::Network;
use crate::state::{LastVote, OpTime};

impl Member {
    /// Vote request from a candidate (replSetRequestVotes).
    pub(crate) fn request_vote(
        &self,
        term: i64,
        candidate: &str,
        cand_cfg: &ReplSetConfig,
        cand_optime: OpTime,
        dry_run: bool,
    ) -> bool {
        let mut inner = self.lock();
        let mut disk = self.disk();
        let Some(cfg) = disk.config.clone() else {
            return false;
        };
        if cfg.set_name != cand_cfg.set_name || term < disk.term || cfg.is_newer_than(cand_cfg) {
            return false;
        }
        if disk.last_optime() > cand_optime {
            return false;
        }
        if dry_run {
            return true;
        }
        if disk
            .last_vote
            .as_ref()
            .map(|v| v.term >= term)
            .unwrap_or(false)
        {
            return false;
        }
        disk.last_vote = Some(LastVote {
            term,
            candidate: candidate.to_string(),
        });
        let raise = term > disk.term;
        drop(disk);
        if raise {
            self.observe_term(&mut inner, term);
        }
        // Granting a vote restarts our own election timer.
        inner.election_deadline = Instant::now() + randomized_election_timeout(&cfg);
        true
    }

    /// replSetStepUp request from a stepping-down primary or a client.
    pub(crate) fn request_step_up(&self) {
        self.lock().step_up_requested = true;
    }

    /// Leaves PRIMARY. `no_election_for` keeps it from standing again for a while.
    pub(crate) fn step_down_locked(&self, inner: &mut Inner, no_election_for: Option<Duration>) {
        if inner.state != MemberState::Primary {
            return;
        }
        inner.state = MemberState::Secondary;
        inner.stepping_down = false;
        if inner.catching_up.take().is_some() {
            // `_updateMemberStateFromTopologyCoordinator`: catch-up is abandoned.
            tracing::info!(member = %self.listen, id = 21363, "Exited primary catch-up mode");
        }
        inner.election_id = None;
        inner.role_generation += 1;
        if let Some(d) = no_election_for {
            inner.no_election_until = Some(Instant::now() + d);
        }
        if let Some(cfg) = self.disk().config.clone() {
            inner.election_deadline = Instant::now() + randomized_election_timeout(&cfg);
        }
        self.bump_topology(inner);
        self.refresh_role(inner);
        tracing::info!(member = %self.listen, "stepped down");
    }

    pub(super) fn maybe_elect(self: &Arc<Self>, net: &Network, cfg: &ReplSetConfig) {
        let now = Instant::now();
        let (electable, step_up, timed_out, takeover) = {
            let mut inner = self.lock();
            let me = self.self_config(&inner, cfg);
            let frozen = inner.no_election_until.map(|t| now < t).unwrap_or(false);
            let electable = me
                .as_ref()
                .map(|m| m.is_electable() && m.is_voter())
                .unwrap_or(false)
                && !frozen;
            let step_up = std::mem::take(&mut inner.step_up_requested);
            let timed_out = now >= inner.election_deadline;
            // Priority takeover: a caught-up member with higher priority than the primary.
            let mut takeover = false;
            if let (Some(me), Some(p)) = (me.as_ref(), self.known_primary(&inner)) {
                let pview = inner.peers.get(&p).and_then(|i| i.view.clone());
                let pprio = cfg.member_by_host(&p).map(|m| m.priority).unwrap_or(0.0);
                let caught_up = pview
                    .map(|v| self.disk().last_optime() >= v.optime)
                    .unwrap_or(false);
                if me.priority > pprio && caught_up {
                    let since = *inner.takeover_since.get_or_insert(now);
                    takeover = now
                        >= since
                            + Duration::from_millis(
                                cfg.settings.heartbeat_interval_millis.max(1) as u64 * 2,
                            );
                } else {
                    inner.takeover_since = None;
                }
            } else {
                inner.takeover_since = None;
            }
            (electable, step_up, timed_out, takeover)
        };
        if !electable {
            if timed_out {
                self.lock().election_deadline = now + randomized_election_timeout(cfg);
            }
            return;
        }
        if step_up || timed_out || takeover {
            let won = self.run_election(net, cfg, step_up);
            let mut inner = self.lock();
            inner.takeover_since = None;
            if !won {
                inner.election_deadline = Instant::now() + randomized_election_timeout(cfg);
            }
        }
    }

    fn collect_votes(
        &self,
        net: &Network,
        cfg: &ReplSetConfig,
        term: i64,
        my_host: &str,
        optime: OpTime,
        dry_run: bool,
    ) -> usize {
        let mut votes = 0;
        for m in cfg.voters() {
            if m.host == my_host {
                votes += 1;
                continue;
            }
            if let Some(peer) = net.dial(self, &m.host) {
                if peer.request_vote(term, my_host, cfg, optime, dry_run) {
                    votes += 1;
                }
            }
        }
        votes
    }

    /// Stands for election; true if it became primary.
    pub(crate) fn run_election(
        &self,
        net: &Network,
        cfg: &ReplSetConfig,
        skip_dry_run: bool,
    ) -> bool {
        let (term, optime, my_host) = {
            let inner = self.lock();
            let disk = self.disk();
            let Some(h) = inner.self_host.clone() else {
                return false;
            };
            if inner.state != MemberState::Secondary {
                return false;
            }
            (disk.term, disk.last_optime(), h)
        };
        if !skip_dry_run
            && self.collect_votes(net, cfg, term + 1, &my_host, optime, true) < cfg.majority()
        {
            return false;
        }
        let new_term = {
            let _inner = self.lock();
            let mut disk = self.disk();
            if disk.term != term
                || disk
                    .last_vote
                    .as_ref()
                    .map(|v| v.term > term)
                    .unwrap_or(false)
            {
                return false;
            }
            disk.term = term + 1;
            disk.last_vote = Some(LastVote {
                term: term + 1,
                candidate: my_host.clone(),
            });
            term + 1
        };
        // Our own vote is already recorded; ask the others.
        let mut votes = 1;
        for m in cfg.voters().filter(|m| m.host != my_host) {
            if let Some(peer) = net.dial(self, &m.host) {
                if peer.request_vote(new_term, &my_host, cfg, optime, false) {
                    votes += 1;
                }
            }
        }
        let mut inner = self.lock();
        let still = self.disk().term == new_term && inner.state == MemberState::Secondary;
        if !still || votes < cfg.majority() {
            return false;
        }
        inner.state = MemberState::Primary;
        inner.election_id = Some(election_id_for(new_term));
        inner.election_date_ms = now_ms();
        inner.role_generation += 1;
        inner.no_election_until = None;
        inner.sync_source = None;
        inner.heartbeat_now = true;
        tracing::info!(member = %self.listen, term = new_term, votes, "won election");
        // PRIMARY, but writable only once it has caught up
        // (`_postWonElectionUpdateMemberState` → `CatchupState::start_inlock`).
        self.begin_catch_up(&mut inner, cfg, new_term);
        self.bump_topology(&mut inner);
        let catching_up = inner.catching_up.is_some();
        drop(inner);
        if catching_up {
            // mongod cancels and restarts every heartbeat on winning; their
            // responses give the catch-up target (or end it at once when no
            // peer is ahead).
            self.heartbeats(net, cfg);
            self.catch_up(net, cfg);
        }
        true
    }
}
