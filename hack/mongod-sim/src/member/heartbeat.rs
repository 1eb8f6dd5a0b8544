//! Heartbeats: every member of the config is asked for its view (state,
//! optime, term, config) each `heartbeatIntervalMillis`; newer configs spread
//! both ways and a higher term seen anywhere is adopted.

use std::time::{Duration, Instant};

use super::{now_ms, randomized_election_timeout, Inner, Member, MemberState, PeerView};
use crate::config::ReplSetConfig;
use crate::network::{Dialled, Network};

impl Member {
    /// What a heartbeat to this member answers.
    pub(crate) fn view(&self) -> PeerView {
        let inner = self.lock();
        let disk = self.disk();
        PeerView {
            state: inner.state,
            optime: disk.last_optime(),
            term: disk.term,
            config: disk.config.clone(),
            sync_source: inner.sync_source.clone(),
            uptime_secs: self.uptime_secs(),
            election_id: inner.election_id,
        }
    }

    /// Heartbeat payload with a newer config: install it if it is newer and for us.
    pub(crate) fn receive_config(&self, cfg: &ReplSetConfig) {
        let mut inner = self.lock();
        let has_config = {
            let disk = self.disk();
            match &disk.config {
                Some(mine) => {
                    if !mine.may_be_replaced_by(cfg) {
                        return;
                    }
                    true
                }
                None => {
                    if cfg.set_name != self.spec.repl_set {
                        return;
                    }
                    false
                }
            }
        };
        if !has_config {
            let net = self.network();
            // validateConfigForHeartbeatReconfig: an uninitialized member that
            // is not in the config ignores it (SERVER-15740).
            let in_config = net
                .as_ref()
                .is_some_and(|n| n.find_self(self, cfg).is_some());
            if !in_config {
                return;
            }
        }
        self.install_config(&mut inner, cfg.clone());
    }

    /// Installs a config locally (durably) and re-derives the role.
    pub(crate) fn install_config(&self, inner: &mut Inner, cfg: ReplSetConfig) {
        {
            let mut disk = self.disk();
            if disk.config.is_none() && disk.oplog.is_empty() {
                disk.initial_sync_pending = true;
            }
            disk.config = Some(cfg.clone());
        }
        inner.heartbeat_now = true;
        inner.self_check_due = true;
        inner.peers.retain(|h, _| cfg.member_by_host(h).is_some());
        inner.election_deadline = Instant::now() + randomized_election_timeout(&cfg);
        self.bump_topology(inner);
        self.refresh_role(inner);
        tracing::info!(member = %self.listen, version = cfg.version, term = cfg.term, "installed config");
    }

    /// Adopts a higher term seen anywhere; a primary steps down.
    pub(crate) fn observe_term(&self, inner: &mut Inner, term: i64) {
        let mut disk = self.disk();
        if term > disk.term {
            disk.term = term;
            drop(disk);
            if inner.state == MemberState::Primary {
                self.step_down_locked(inner, None);
            }
        }
    }

    pub(super) fn heartbeats(&self, net: &Network, cfg: &ReplSetConfig) {
        let interval = Duration::from_millis(cfg.settings.heartbeat_interval_millis.max(1) as u64);
        let now = Instant::now();
        let (due, my_host): (Vec<String>, Option<String>) = {
            let mut inner = self.lock();
            let force = std::mem::take(&mut inner.heartbeat_now);
            let my_host = inner.self_host.clone();
            let due = cfg
                .members
                .iter()
                .filter(|m| Some(&m.host) != my_host.as_ref())
                .filter(|m| {
                    force
                        || inner
                            .peers
                            .get(&m.host)
                            .and_then(|p| p.last_attempt)
                            .map(|t| now >= t + interval)
                            .unwrap_or(true)
                })
                .map(|m| m.host.clone())
                .collect();
            (due, my_host)
        };
        // REMOVED (no host of the config is this member) it still heartbeats
        // every member, and each response makes it retry isSelf
        // (TopologyCoordinator::processHeartbeatResponse: "Could not find self
        // in current config, retrying DNS resolution of members").
        let retry_self = my_host.is_none() && !due.is_empty();
        for host in due {
            let dialled = net.dial_outcome(self, &host);
            let auth_issue = matches!(dialled, Dialled::AuthenticationFailed);
            let mut failure = None;
            let result = match dialled {
                Dialled::Reached(peer) => {
                    let view = peer.view();
                    Some((peer, view))
                }
                Dialled::ConnectionFailed(reason) => {
                    failure = Some(reason);
                    None
                }
                Dialled::Unreachable | Dialled::AuthenticationFailed => None,
            };
            let mut inner = self.lock();
            let primary_before = self.known_primary(&inner);
            self.record_heartbeat(
                &mut inner,
                &host,
                now,
                result.as_ref().map(|(_, v)| v.clone()),
                auth_issue,
                failure,
            );
            if self.known_primary(&inner) != primary_before {
                // Clients waiting in an awaitable hello learn the new primary at once.
                self.bump_topology(&mut inner);
            }
            let Some((peer, view)) = result else { continue };
            let my_cfg = self.disk().config.clone();
            if view.term > self.disk().term {
                self.observe_term(&mut inner, view.term);
            }
            if let (Some(theirs), Some(mine)) = (&view.config, &my_cfg) {
                if mine.may_be_replaced_by(theirs) {
                    self.install_config(&mut inner, theirs.clone());
                }
            }
            let my_term = self.disk().term;
            if view.state == MemberState::Primary
                && view.term >= my_term
                && inner.state != MemberState::Primary
            {
                if let Some(c) = &my_cfg {
                    inner.election_deadline = Instant::now() + randomized_election_timeout(c);
                }
            }
            drop(inner);
            if let Some(mine) = &my_cfg {
                let theirs_older = view
                    .config
                    .as_ref()
                    .map(|t| t.may_be_replaced_by(mine))
                    .unwrap_or(true);
                if theirs_older {
                    peer.receive_config(mine);
                }
            }
        }
        if retry_self {
            let mut inner = self.lock();
            inner.self_check_due = true;
            self.refresh_role(&mut inner);
        }
    }

    /// `auth_issue`: the peer refused internal authentication
    /// (`TopologyCoordinator::processHeartbeatResponse`, Unauthorized or
    /// AuthenticationFailed → `MemberData::setAuthIssue`); `failure`: why the
    /// connection failed, when TLS refused it (`setDownValues` keeps the
    /// error's reason as `lastHeartbeatMessage`).
    #[allow(clippy::too_many_arguments)]
    fn record_heartbeat(
        &self,
        inner: &mut Inner,
        host: &str,
        now: Instant,
        view: Option<PeerView>,
        auth_issue: bool,
        failure: Option<String>,
    ) {
        let info = inner.peers.entry(host.to_string()).or_default();
        info.last_attempt = Some(now);
        info.last_heartbeat_ms = now_ms();
        info.auth_issue = auth_issue;
        info.connection_failure = failure;
        match view {
            Some(v) => {
                info.up = true;
                info.last_ok = Some(now);
                info.view = Some(v);
            }
            None => {
                info.up = false;
                if let Some(v) = info.view.as_mut() {
                    v.state = MemberState::Down;
                }
            }
        }
    }

    /// The primary as seen through heartbeats (host), if any is up.
    pub(crate) fn known_primary(&self, inner: &Inner) -> Option<String> {
        if inner.state == MemberState::Primary {
            return inner.self_host.clone();
        }
        inner
            .peers
            .iter()
            .filter(|(_, p)| p.up)
            .filter_map(|(h, p)| p.view.as_ref().map(|v| (h, v)))
            .filter(|(_, v)| v.state == MemberState::Primary)
            .max_by_key(|(_, v)| v.term)
            .map(|(h, _)| h.clone())
    }
}
