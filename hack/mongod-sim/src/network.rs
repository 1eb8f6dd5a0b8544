//! The simulated network shared by every member in a process: which member a host
//! string reaches (listen addresses and routes such as `VIP:nodePort`), which
//! members run, and the injected faults (isolated members, cut host pairs, cut
//! sites, sites whose routes do not hairpin, replication lag). A member proves a
//! host is itself only by dialing it through these routes (mongod's isSelf). Members talk to each other only through it. It also
//! keeps a record of every member stop ([`Network::stops`]): who, in what role,
//! when.

use crate::config::{MemberConfig, ReplSetConfig};
use crate::member::{Member, MemberSpec, MemberState};
use crate::state::Volume;
use crate::tls::egress::Outcome;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

/// Failures of the library API.
#[derive(Debug, thiserror::Error)]
pub enum NetworkError {
    #[error("member {0} is already running")]
    AlreadyRunning(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        addr: String,
        source: std::io::Error,
    },
}

#[derive(Default)]
struct Faults {
    isolated: HashSet<String>,
    cut_pairs: HashSet<(String, String)>,
    sites: HashMap<String, String>,
    cut_sites: HashSet<String>,
    /// Sites that cannot be entered from other sites (their own members can still
    /// dial out), e.g. a cluster whose VIP is unreachable.
    cut_ingress: HashSet<String>,
    /// Sites whose routes do not hairpin: a member there cannot reach itself
    /// through an alias (its own `VIP:nodePort`), only other members can.
    no_hairpin: HashSet<String>,
    lag: HashMap<String, Duration>,
}

#[derive(Default)]
struct Registry {
    running: BTreeMap<String, Arc<Member>>,
    /// host string → listen address of the member it reaches.
    aliases: HashMap<String, String>,
    faults: Faults,
    /// Overrides every member's capped oplog size (what its
    /// [`MemberSpec::oplog_size_bytes`](crate::MemberSpec::oplog_size_bytes)
    /// or its disk chose when the oplog was created).
    oplog_size: Option<Option<u64>>,
    /// Overrides every member's [`MemberSpec::initial_sync_duration`](crate::MemberSpec::initial_sync_duration).
    initial_sync_duration: Option<Duration>,
}

/// One member stop, as [`Network::stops`] records it: what the member was at
/// the moment it was stopped (e.g. whether a primary was stepped down first).
#[derive(Debug, Clone, PartialEq)]
pub struct MemberStop {
    /// The listen address of the stopped member (its pod address).
    pub listen: String,
    /// Its host string in its config (`me`, e.g. `VIP:nodePort`), if it had one.
    pub host: Option<String>,
    /// The other host strings that reached it (aliases) when it was stopped.
    pub aliases: Vec<String>,
    /// Its role (PRIMARY, SECONDARY, ...) when it was stopped.
    pub state: MemberState,
    /// Its term when it was stopped.
    pub term: i64,
    /// When it was stopped.
    pub at: Instant,
    /// When it was stopped, by the wall clock (to compare with logs).
    pub wall: SystemTime,
}

/// Many replica-set members in one process and the network between them.
#[derive(Default)]
pub struct Network {
    reg: Mutex<Registry>,
    stops: Mutex<Vec<MemberStop>>,
    commands: Mutex<BTreeMap<CommandKey, u64>>,
}

/// Which commands a member received, from which client (benchmark counters;
/// mongod has them as `serverStatus.metrics.commands`, without the client).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct CommandKey {
    /// The member's listen address.
    pub member: String,
    /// The client's `appName` (`client.application.name` of its handshake).
    pub app: Option<String>,
    /// The command's name.
    pub command: String,
}

impl Drop for Network {
    /// Dropping the network stops its members (their tasks would otherwise keep
    /// them listening).
    fn drop(&mut self) {
        self.stop_all();
    }
}

fn pair(a: &str, b: &str) -> (String, String) {
    if a <= b {
        (a.to_string(), b.to_string())
    } else {
        (b.to_string(), a.to_string())
    }
}

impl Network {
    pub fn new() -> Arc<Network> {
        Arc::new(Network::default())
    }

    fn reg(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.reg.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn count_command(&self, member: &str, app: Option<&str>, command: &str) {
        let key = CommandKey {
            member: member.to_string(),
            app: app.map(str::to_string),
            command: command.to_string(),
        };
        *self
            .commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(key)
            .or_default() += 1;
    }

    /// How many commands each member received, by client and command, so far.
    pub fn command_counts(&self) -> BTreeMap<CommandKey, u64> {
        self.commands
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Starts a member listening on `spec.listen` with the state on `volume`
    /// (empty volume → fresh member; a volume used before → the member resumes).
    pub async fn start_member(
        self: &Arc<Self>,
        spec: MemberSpec,
        volume: Volume,
    ) -> Result<(), NetworkError> {
        let listen = spec.listen.to_string();
        if self.reg().running.contains_key(&listen) {
            return Err(NetworkError::AlreadyRunning(listen));
        }
        let listener = bind_with_retry(spec.listen)
            .await
            .map_err(|source| NetworkError::Bind {
                addr: listen.clone(),
                source,
            })?;
        let member = Member::start(Arc::downgrade(self), spec, volume, listener);
        let inserted = {
            let mut reg = self.reg();
            !reg.running.contains_key(&listen)
                && reg.running.insert(listen.clone(), member.clone()).is_none()
        };
        if !inserted {
            // Lost a race with a concurrent start of the same member.
            for task in member.shutdown() {
                let _ = task.await;
            }
            return Err(NetworkError::AlreadyRunning(listen));
        }
        Ok(())
    }

    /// Stops (kills) a member: it leaves the network at once, its connections and
    /// listener close as soon as the runtime gets to them (use
    /// [`Network::stop_member_and_wait`] to know the port is released); its state
    /// stays on its volume. Returns false if it was not running.
    pub fn stop_member(&self, listen: &str) -> bool {
        let member = self.reg().running.remove(listen);
        match member {
            Some(m) => {
                self.record_stop(&m);
                m.shutdown();
                true
            }
            None => false,
        }
    }

    /// Like [`Network::stop_member`], and returns only once the member's listen
    /// address refuses connections.
    pub async fn stop_member_and_wait(&self, listen: &str) -> bool {
        let member = self.reg().running.remove(listen);
        match member {
            Some(m) => {
                self.record_stop(&m);
                for task in m.shutdown() {
                    // Aborted tasks end with a cancellation error; only the wait matters.
                    let _ = task.await;
                }
                true
            }
            None => false,
        }
    }

    /// Stops every member without waiting for their ports to be released (usable
    /// from `Drop`).
    pub fn stop_all(&self) {
        let members: Vec<_> = std::mem::take(&mut self.reg().running)
            .into_values()
            .collect();
        for m in members {
            self.record_stop(&m);
            m.shutdown();
        }
    }

    /// Notes what `member` is as it is stopped (it has left the registry but
    /// still runs: its role is the one it had until now). The registry's lock
    /// is not held while the member's are taken.
    fn record_stop(&self, member: &Member) {
        let aliases = self.aliases_of(member.listen());
        let stop = MemberStop {
            listen: member.listen().to_string(),
            host: member.self_host(),
            aliases,
            state: member.state(),
            term: member.term(),
            at: Instant::now(),
            wall: SystemTime::now(),
        };
        tracing::info!(member = %stop.listen, state = stop.state.name(), term = stop.term, "stopping member");
        self.stops
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(stop);
    }

    /// Every member stop so far, oldest first: which member, in what role and
    /// term, and when ([`Network::stop_member`], [`Network::stop_member_and_wait`]
    /// and [`Network::stop_all`] each record one per member they stop).
    pub fn stops(&self) -> Vec<MemberStop> {
        self.stops.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A running member by listen address.
    pub fn member(&self, listen: &str) -> Option<Arc<Member>> {
        self.reg().running.get(listen).cloned()
    }

    /// Listen addresses of running members that are PRIMARY now.
    pub fn primaries(&self) -> Vec<String> {
        let members: Vec<_> = self.reg().running.values().cloned().collect();
        members
            .iter()
            .filter(|m| m.state() == crate::member::MemberState::Primary)
            .map(|m| m.listen().to_string())
            .collect()
    }

    /// Listen addresses of running members.
    pub fn running(&self) -> Vec<String> {
        self.reg().running.keys().cloned().collect()
    }

    /// Makes `host` (e.g. `VIP:nodePort`) route to the member listening on `listen`
    /// (a kube-proxy route). That member recognises `host` as itself only when it
    /// can dial it (see [`Network::set_hairpin`]), as mongod's isSelf does.
    pub fn add_alias(&self, listen: &str, host: &str) {
        self.reg()
            .aliases
            .insert(host.to_string(), listen.to_string());
    }

    pub fn remove_alias(&self, host: &str) {
        self.reg().aliases.remove(host);
    }

    /// Host strings (besides its listen address) that reach `listen`.
    pub fn aliases_of(&self, listen: &str) -> Vec<String> {
        self.reg()
            .aliases
            .iter()
            .filter(|(_, l)| l.as_str() == listen)
            .map(|(h, _)| h.clone())
            .collect()
    }

    /// Cuts a member off from every other member (clients still reach it).
    pub fn isolate(&self, listen: &str) {
        self.reg().faults.isolated.insert(listen.to_string());
    }

    pub fn heal(&self, listen: &str) {
        self.reg().faults.isolated.remove(listen);
    }

    /// Cuts traffic between two members (by any host string that reaches them).
    pub fn cut_pair(&self, a: &str, b: &str) {
        let mut reg = self.reg();
        let (a, b) = (resolve(&reg, a), resolve(&reg, b));
        reg.faults.cut_pairs.insert(pair(&a, &b));
    }

    pub fn heal_pair(&self, a: &str, b: &str) {
        let mut reg = self.reg();
        let (a, b) = (resolve(&reg, a), resolve(&reg, b));
        reg.faults.cut_pairs.remove(&pair(&a, &b));
    }

    /// Tags a member with a site (e.g. the Kubernetes cluster it runs in).
    pub fn set_site(&self, listen: &str, site: &str) {
        self.reg()
            .faults
            .sites
            .insert(listen.to_string(), site.to_string());
    }

    /// Cuts a whole site off: traffic between its members and members of other
    /// sites fails; traffic inside the site still flows.
    pub fn cut_site(&self, site: &str) {
        self.reg().faults.cut_sites.insert(site.to_string());
    }

    pub fn heal_site(&self, site: &str) {
        self.reg().faults.cut_sites.remove(site);
    }

    /// Cuts the way into a site: members of other sites can no longer reach its
    /// members (by pod address or alias), while its members still reach out — the
    /// asymmetric partition of an unreachable cluster VIP.
    pub fn cut_site_ingress(&self, site: &str) {
        self.reg().faults.cut_ingress.insert(site.to_string());
    }

    pub fn heal_site_ingress(&self, site: &str) {
        self.reg().faults.cut_ingress.remove(site);
    }

    /// Whether the routes of a site hairpin: with `false` a member of `site`
    /// dialing its own alias (`VIP:nodePort`) fails, as on a cluster whose proxy
    /// or CNI does not send a pod's traffic to its own Service back to it.
    pub fn set_hairpin(&self, site: &str, hairpin: bool) {
        let mut reg = self.reg();
        if hairpin {
            reg.faults.no_hairpin.remove(site);
        } else {
            reg.faults.no_hairpin.insert(site.to_string());
        }
    }

    /// Removes every injected cut (lag settings and hairpin switches stay).
    pub fn heal_all(&self) {
        let mut reg = self.reg();
        reg.faults.isolated.clear();
        reg.faults.cut_pairs.clear();
        reg.faults.cut_sites.clear();
        reg.faults.cut_ingress.clear();
    }

    /// Replication lag of a member: it applies an entry only this long after the
    /// entry was written on the primary.
    pub fn set_lag(&self, listen: &str, lag: Duration) {
        let mut reg = self.reg();
        if lag.is_zero() {
            reg.faults.lag.remove(listen);
        } else {
            reg.faults.lag.insert(listen.to_string(), lag);
        }
    }

    pub(crate) fn lag_of(&self, listen: &str) -> Duration {
        self.reg()
            .faults
            .lag
            .get(listen)
            .copied()
            .unwrap_or_default()
    }

    /// The capped oplog's size in bytes of every member from now on
    /// (`None`: never truncated), whatever size its oplog was created with:
    /// how a lab gives running members a tiny oplog window (as
    /// `replSetResizeOplog` would, without its 990 MB floor).
    pub fn set_oplog_size(&self, max_bytes: Option<u64>) {
        self.reg().oplog_size = Some(max_bytes);
    }

    pub(crate) fn oplog_size(&self) -> Option<Option<u64>> {
        self.reg().oplog_size
    }

    /// How long every initial sync that starts from now on takes, whatever
    /// the member's [`MemberSpec`] says.
    pub fn set_initial_sync_duration(&self, duration: Duration) {
        self.reg().initial_sync_duration = Some(duration);
    }

    pub(crate) fn initial_sync_duration(&self) -> Option<Duration> {
        self.reg().initial_sync_duration
    }

    /// mongod's findSelfInConfig: the member whose host is this member's listen
    /// address (isSelf's fast path), else the first one the slow path proves.
    pub(crate) fn find_self<'c>(
        &self,
        member: &Member,
        cfg: &'c ReplSetConfig,
    ) -> Option<&'c MemberConfig> {
        cfg.members
            .iter()
            .find(|m| m.host == member.listen())
            .or_else(|| {
                cfg.members
                    .iter()
                    .find(|m| self.is_self_slow_path(member, &m.host))
            })
    }

    /// mongod's isSelf slow path: connect to `host` through the network's
    /// routes, authenticate as `__system` (the keyfiles match) and compare the
    /// instance id of the process that answers with the member's own. It
    /// fails while the route has no endpoint, across a cut, and where the
    /// member's site does not hairpin.
    pub(crate) fn is_self_slow_path(&self, member: &Member, host: &str) -> bool {
        self.dial(member, host)
            .map(|to| to.process_id() == member.process_id())
            .unwrap_or(false)
    }

    /// Is `member` (this very process) the one running at its listen address?
    /// A member starting up is not yet, and cannot dial itself.
    pub(crate) fn is_running(&self, member: &Member) -> bool {
        self.reg()
            .running
            .get(member.listen())
            .map(|m| m.process_id() == member.process_id())
            .unwrap_or(false)
    }

    /// The member `from` reaches when it dials `host`, if the network lets it
    /// through and it authenticates as `__system` there.
    pub(crate) fn dial(&self, from: &Member, host: &str) -> Option<Arc<Member>> {
        match self.dial_outcome(from, host) {
            Dialled::Reached(to) => Some(to),
            Dialled::Unreachable | Dialled::ConnectionFailed(_) | Dialled::AuthenticationFailed => {
                None
            }
        }
    }

    /// What `from` meets when it dials `host`: the member, no answer, a
    /// connection the two sides' TLS refuses, or a member that refuses its
    /// internal authentication (keyfile or certificate,
    /// [`crate::tls::egress`]).
    pub(crate) fn dial_outcome(&self, from: &Member, host: &str) -> Dialled {
        let reg = self.reg();
        let target = resolve(&reg, host);
        let Some(to) = reg.running.get(&target).cloned() else {
            return Dialled::Unreachable;
        };
        let from_id = from.listen();
        if !reachable(&reg.faults, from_id, &target) {
            return Dialled::Unreachable;
        }
        let hairpin = target == from_id && host != target;
        let site = reg.faults.sites.get(from_id);
        if hairpin && site.is_some_and(|s| reg.faults.no_hairpin.contains(s)) {
            return Dialled::Unreachable;
        }
        drop(reg);
        match crate::tls::egress::dial(from, &to, host) {
            Outcome::Authenticated => Dialled::Reached(to),
            Outcome::ConnectionFailed(reason) => Dialled::ConnectionFailed(reason),
            Outcome::AuthenticationFailed => Dialled::AuthenticationFailed,
        }
    }

    /// The whole simulation as JSON (for the control interface and debugging).
    pub fn dump(&self) -> serde_json::Value {
        let members: Vec<_> = self.reg().running.values().cloned().collect();
        let reg = self.reg();
        let faults = serde_json::json!({
            "isolated": reg.faults.isolated.iter().collect::<Vec<_>>(),
            "cutPairs": reg.faults.cut_pairs.iter().collect::<Vec<_>>(),
            "sites": reg.faults.sites,
            "cutSites": reg.faults.cut_sites.iter().collect::<Vec<_>>(),
            "cutIngress": reg.faults.cut_ingress.iter().collect::<Vec<_>>(),
            "noHairpin": reg.faults.no_hairpin.iter().collect::<Vec<_>>(),
            "lagMs": reg.faults.lag.iter().map(|(k, v)| (k.clone(), v.as_millis() as u64)).collect::<BTreeMap<_, _>>(),
            "aliases": reg.aliases,
        });
        drop(reg);
        serde_json::json!({
            "members": members.iter().map(|m| m.summary()).collect::<Vec<_>>(),
            "faults": faults,
        })
    }
}

/// Binds, retrying briefly while a just-stopped member's listener is released.
async fn bind_with_retry(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let deadline = std::time::Instant::now() + Duration::from_secs(2);
    loop {
        match tokio::net::TcpListener::bind(addr).await {
            Err(e)
                if e.kind() == std::io::ErrorKind::AddrInUse
                    && std::time::Instant::now() < deadline =>
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

fn resolve(reg: &Registry, host: &str) -> String {
    reg.aliases
        .get(host)
        .cloned()
        .unwrap_or_else(|| host.to_string())
}

/// May the member listening on `a` open a connection to the one listening on `b`?
fn reachable(f: &Faults, a: &str, b: &str) -> bool {
    if f.isolated.contains(a) || f.isolated.contains(b) || f.cut_pairs.contains(&pair(a, b)) {
        return false;
    }
    if let Some(sb) = f.sites.get(b) {
        if f.cut_ingress.contains(sb) && f.sites.get(a) != Some(sb) {
            return false;
        }
    }
    match (f.sites.get(a), f.sites.get(b)) {
        (Some(sa), Some(sb)) if sa == sb => true,
        (sa, sb) => {
            !(sa.map(|s| f.cut_sites.contains(s)).unwrap_or(false)
                || sb.map(|s| f.cut_sites.contains(s)).unwrap_or(false))
        }
    }
}

/// What dialling a member met.
pub(crate) enum Dialled {
    /// The member, authenticated.
    Reached(Arc<Member>),
    /// Nobody answered (no process there, or the network cut it off).
    Unreachable,
    /// The connection failed in TLS: mongod's reason.
    ConnectionFailed(String),
    /// The member answered and refused `__system`'s authentication (18).
    AuthenticationFailed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    /// Waits up to 10 s for `member` to reach `state`.
    async fn wait_state(net: &Network, listen: &str, state: MemberState) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while net.member(listen).map(|m| m.state()) != Some(state) {
            assert!(Instant::now() < deadline, "{listen} never became {state:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Starts a member on `listen` and makes it the primary of a one-member set
    /// whose config names it by `host` (an alias, as a NodePort would).
    async fn primary_of_one(net: &Arc<Network>, listen: &str, host: &str, volume: Volume) {
        net.add_alias(listen, host);
        net.start_member(MemberSpec::new(listen.parse().unwrap(), "rs0"), volume)
            .await
            .unwrap();
        initiate(net, listen, host).await.unwrap();
        wait_state(net, listen, MemberState::Primary).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_stop_is_recorded_with_the_role_the_member_had_then() {
        let net = Network::new();
        let (a, b) = ("127.92.0.1:27017", "127.92.0.2:27017");
        let volume = Volume::new();
        let before = Instant::now();
        primary_of_one(&net, a, "vip-a:30001", volume.clone()).await;
        net.start_member(MemberSpec::new(b.parse().unwrap(), "rs0"), Volume::new())
            .await
            .unwrap();
        assert!(net.stops().is_empty(), "nothing stopped yet");

        // A member without a config, then the primary (killed as it is).
        assert!(net.stop_member(b));
        assert!(net.stop_member_and_wait(a).await);
        assert!(!net.stop_member(a), "no longer running");
        let stops = net.stops();
        assert_eq!(stops.len(), 2, "{stops:?}");
        assert_eq!(stops[0].listen, b);
        assert_eq!(stops[0].host, None);
        assert_eq!(stops[0].state, MemberState::Startup);
        assert_eq!(stops[1].listen, a);
        assert_eq!(stops[1].host.as_deref(), Some("vip-a:30001"));
        assert_eq!(stops[1].aliases, vec!["vip-a:30001".to_string()]);
        assert_eq!(stops[1].state, MemberState::Primary);
        assert!(stops[1].term >= 1, "{stops:?}");
        assert!(before <= stops[0].at && stops[0].at <= stops[1].at);
        assert!(stops[0].wall <= stops[1].wall);

        // Back on its volume it is primary again; stepped down first, it is
        // recorded as the SECONDARY it then is; stop_all records too.
        net.start_member(MemberSpec::new(a.parse().unwrap(), "rs0"), volume)
            .await
            .unwrap();
        wait_state(&net, a, MemberState::Primary).await;
        let member = net.member(a).unwrap();
        let term = member.term();
        member.step_down_locked(&mut member.lock(), Some(Duration::from_secs(60)));
        assert_eq!(member.state(), MemberState::Secondary);
        drop(member);
        net.stop_all();
        let stops = net.stops();
        assert_eq!(stops.len(), 3, "{stops:?}");
        assert_eq!(stops[2].listen, a);
        assert_eq!(stops[2].state, MemberState::Secondary);
        assert_eq!(stops[2].term, term);
        assert!(stops[2].term >= stops[1].term);
    }

    // ---- isSelf: through a route that reaches the member

    /// A one-member set named `rs0` whose member is `host`, with short timeouts.
    fn one_member_config(host: &str) -> bson::Document {
        doc! {
            "_id": "rs0", "version": 1, "members": [{"_id": 0, "host": host}],
            "settings": {"electionTimeoutMillis": 200, "heartbeatIntervalMillis": 50},
        }
    }

    /// replSetInitiate of [`one_member_config`] on the member at `listen`; the
    /// error code when refused.
    async fn initiate(net: &Network, listen: &str, host: &str) -> Result<(), i32> {
        let member = net.member(listen).unwrap();
        crate::repl_commands::initiate(&member, &doc! {"replSetInitiate": one_member_config(host)})
            .await
            .map(|_| ())
            .map_err(|e| e.code)
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn initiate_finds_itself_only_through_a_route_that_reaches_it() {
        let net = Network::new();
        let (listen, vip) = ("127.116.10.1:27017", "127.116.11.1:30001");
        net.start_member(
            MemberSpec::new(listen.parse().unwrap(), "rs0"),
            Volume::new(),
        )
        .await
        .unwrap();
        net.set_site(listen, "a");
        // No route behind the VIP yet (the pod is not an endpoint): NodeNotFound.
        assert_eq!(initiate(&net, listen, vip).await, Err(74));
        // A route that does not hairpin: still NodeNotFound.
        net.add_alias(listen, vip);
        net.set_hairpin("a", false);
        assert_eq!(initiate(&net, listen, vip).await, Err(74));
        // The route reaches the member itself: it finds itself and leads.
        net.set_hairpin("a", true);
        assert_eq!(initiate(&net, listen, vip).await, Ok(()));
        wait_state(&net, listen, MemberState::Primary).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_restarted_member_is_removed_until_its_route_reaches_it() {
        let net = Network::new();
        let (listen, vip) = ("127.116.10.2:27017", "127.116.11.2:30001");
        let volume = Volume::new();
        net.add_alias(listen, vip);
        net.start_member(
            MemberSpec::new(listen.parse().unwrap(), "rs0"),
            volume.clone(),
        )
        .await
        .unwrap();
        initiate(&net, listen, vip).await.unwrap();
        wait_state(&net, listen, MemberState::Primary).await;

        // Restarted before its Service routes to it again: REMOVED, and it stays
        // so while heartbeats re-check isSelf and fail.
        assert!(net.stop_member_and_wait(listen).await);
        net.remove_alias(vip);
        net.start_member(MemberSpec::new(listen.parse().unwrap(), "rs0"), volume)
            .await
            .unwrap();
        wait_state(&net, listen, MemberState::Removed).await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(net.member(listen).unwrap().state(), MemberState::Removed);

        // The route comes back: the next heartbeat's re-check finds it.
        net.add_alias(listen, vip);
        wait_state(&net, listen, MemberState::Primary).await;
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_member_keeps_the_host_it_found_when_its_route_goes() {
        let net = Network::new();
        let (listen, vip) = ("127.116.10.3:27017", "127.116.11.3:30001");
        net.add_alias(listen, vip);
        net.start_member(
            MemberSpec::new(listen.parse().unwrap(), "rs0"),
            Volume::new(),
        )
        .await
        .unwrap();
        initiate(&net, listen, vip).await.unwrap();
        wait_state(&net, listen, MemberState::Primary).await;
        // isSelf is not re-run while the config still names the member's host.
        net.set_site(listen, "a");
        net.set_hairpin("a", false);
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(net.member(listen).unwrap().state(), MemberState::Primary);
    }
}
