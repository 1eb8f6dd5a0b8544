//! A primary's duties each tick: stepping down when it cannot see a majority
//! of voters, advancing the majority commit point, and clearing `newlyAdded`
//! once the member is SECONDARY.

use std::time::Instant;

use super::{election_timeout, Member, MemberState};
use crate::config::ReplSetConfig;
use crate::network::Network;
use crate::state::OpTime;

impl Member {
    /// One tick of a primary: steps down without a visible majority of voters,
    /// advances the commit point from the data-bearing voters' applied optimes,
    /// and clears `newlyAdded` of members that reached SECONDARY.
    pub(super) fn primary_duties(&self, net: &Network, cfg: &ReplSetConfig) {
        let now = Instant::now();
        let timeout = election_timeout(cfg);
        let my_host = match self.lock().self_host.clone() {
            Some(h) => h,
            None => return,
        };
        // Can we still see a majority of voters?
        let visible = {
            let inner = self.lock();
            cfg.voters()
                .filter(|m| {
                    m.host == my_host
                        || inner
                            .peers
                            .get(&m.host)
                            .and_then(|p| p.last_ok)
                            .map(|t| now.duration_since(t) < timeout)
                            .unwrap_or(false)
                })
                .count()
        };
        if visible < cfg.majority() {
            let mut inner = self.lock();
            tracing::warn!(member = %self.listen, "primary cannot see a majority; stepping down");
            self.step_down_locked(&mut inner, None);
            return;
        }
        // Commit point from the replication progress of data-bearing voters.
        let mut optimes = Vec::new();
        for m in cfg.voters().filter(|m| !m.arbiter_only) {
            if m.host == my_host {
                optimes.push(self.disk().last_optime());
            } else if let Some(peer) = net.dial(self, &m.host) {
                optimes.push(peer.last_optime());
            }
        }
        let data_voters = cfg.voters().filter(|m| !m.arbiter_only).count();
        let needed = cfg.majority().min(data_voters);
        optimes.sort_by(|a, b| b.cmp(a));
        let term = self.disk().term;
        if let Some(candidate) = optimes.get(needed.saturating_sub(1)).copied() {
            if optimes.len() >= needed && candidate.t == term {
                let mut inner = self.lock();
                if candidate > inner.commit_point {
                    inner.commit_point = candidate;
                }
            }
        }
        self.remove_newly_added(net, cfg);
    }

    /// The primary's own reconfig that clears `newlyAdded` of one member it sees
    /// SECONDARY (mongod's `_reconfigToRemoveNewlyAddedField`, scheduled from a
    /// heartbeat response): a non-force reconfig from this config, version + 1,
    /// through the same checks as the command — the current config committed,
    /// then `check_new_config` (so with no cluster-wide write concern it fails
    /// where the member's vote would change the implicit default). A failure is
    /// silent and retried on the next tick; the member stays `newlyAdded`
    /// (no vote, priority 0).
    fn remove_newly_added(&self, net: &Network, cfg: &ReplSetConfig) {
        let ready = {
            let inner = self.lock();
            // `doReplSetReconfig` needs a writable primary.
            if inner.config_op_in_progress || !Member::writable(&inner) {
                return;
            }
            cfg.members
                .iter()
                .find(|m| {
                    m.newly_added
                        && inner.peers.get(&m.host).is_some_and(|p| {
                            p.up && p
                                .view
                                .as_ref()
                                .is_some_and(|v| v.state == MemberState::Secondary)
                        })
                })
                .map(|m| m.id)
        };
        let Some(id) = ready else {
            return;
        };
        if !crate::repl_commands::config_committed(self, net, cfg) {
            return;
        }
        let mut new = cfg.clone();
        for m in new.members.iter_mut().filter(|m| m.id == id) {
            m.newly_added = false;
        }
        new.version += 1;
        new.term = self.disk().term;
        if let Err(e) = crate::repl_commands::check_new_config(self, net, cfg, &new, false) {
            tracing::debug!(member = %self.listen, id, error = %e, "Failed to remove 'newlyAdded' config field");
            return;
        }
        let mut inner = self.lock();
        let unchanged = self
            .disk()
            .config
            .as_ref()
            .is_some_and(|c| c.same_version(cfg));
        if inner.config_op_in_progress || !Member::writable(&inner) || !unchanged {
            return;
        }
        inner.last_committed_in_prev_config = inner.commit_point;
        self.install_config(&mut inner, new);
    }

    /// Whether `target` is on a majority of `cfg`'s data-bearing voters (as
    /// mongod's oplog commitment counts: its write majority).
    pub(crate) fn majority_has(&self, net: &Network, cfg: &ReplSetConfig, target: OpTime) -> bool {
        let me = self.lock().self_host.clone();
        let mut data_voters = 0;
        let mut have = 0;
        for m in cfg.voters().filter(|m| !m.arbiter_only) {
            data_voters += 1;
            let optime = if Some(&m.host) == me.as_ref() {
                Some(self.disk().last_optime())
            } else {
                net.dial(self, &m.host).map(|peer| peer.last_optime())
            };
            if optime.is_some_and(|o| o >= target) {
                have += 1;
            }
        }
        have >= cfg.majority().min(data_voters)
    }
}
