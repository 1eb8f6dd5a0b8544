//! A small pure model of a federation for the planner's sequence properties:
//! several clusters (each with its VIP, member nodePorts, `spec.members` and
//! the controller's memory), one StatefulSet/pod/PVC per member, and one
//! replica set that accepts or rejects initiate, reconfig and step-down the way
//! mongod does (Part 1 of `docs/replica-set-rules.md`, written again at the end
//! of this file without the code under test). Each cluster's [`PlanInput`] is
//! built from the model, as the controller would gather it.
//!
//! A member is a node (cluster, slot) whose address is its cluster's VIP and
//! its Service's nodePort, both of which can change; a config host reaches the
//! node whose address it is now, like kube-proxy. The model knows which node
//! each config entry stands for (`LiveSet::owners`), which the controllers do
//! not, and checks that no node gets two entries and that no entry is handed
//! to another node.

use std::collections::{BTreeMap, BTreeSet};

pub(super) use super::mongod_rules::{
    config_rule_breaks, electable, lists, reconfig_rule_breaks, voting_hosts, voting_ids,
};
use super::mongod_rules::{implicit_majority, votes_now};
use super::tests::{member_status, port_of, SET};
use super::*;
use crate::api::{PvcPolicy, ReplicaSetSettings};
use crate::hostconf::{HostConf, HostConfMember, MemberAddress};
use crate::member::{MemberSlot, RecordedEntry};
use crate::observe::{DroppedMembers, MemberProbe, Observed, ObservedSet};
use crate::replset::{ClusterWriteConcern, ConfigMember, DefaultW, MemberState, ReplicaSetConfig};

/// A member: its cluster and slot.
pub(super) type NodeKey = (usize, MemberSlot);

/// One member cluster.
#[derive(Clone, Debug)]
pub(super) struct Cluster {
    pub vip: String,
    /// The nodePort of each member Service that is not at its first port.
    pub node_ports: BTreeMap<MemberSlot, u16>,
    /// `spec.members`.
    pub desired: u32,
    /// `spec.arbiter`.
    pub arbiter: bool,
    pub rs_init: bool,
    /// `spec.replicaSetSettings.electionTimeoutMillis`: clusters may disagree
    /// (a propagation lag, a per-cluster override).
    pub election_timeout_millis: i64,
    /// `status.replicaSetId`, recorded once the set was seen.
    pub known_replica_set_id: Option<String>,
    /// The controller's memory of the member it asked to step down.
    pub stepped_down: Option<MemberAddress>,
}

/// A member's StatefulSet, pod and data.
#[derive(Clone, Debug)]
pub(super) struct Node {
    pub stateful_set: bool,
    pub pod_up: bool,
    /// The `replicaSetId` of the config on its PVC, if it holds one.
    pub holds: Option<String>,
    /// The config entry recorded on its StatefulSet.
    pub recorded: Option<RecordedEntry>,
    /// Its volume was lost and it has not resynced yet (STARTUP2 in the set).
    pub emptied: bool,
}

impl Node {
    pub fn running(&self) -> bool {
        self.stateful_set && self.pod_up
    }
}

/// The replica set as mongod sees it.
#[derive(Clone, Debug)]
pub(super) struct LiveSet {
    pub config: ReplicaSetConfig,
    pub primary: Option<MemberAddress>,
    pub committed: bool,
    /// Which node each entry (`_id`) stands for: the node its host reached
    /// when it was added. Mongod does not know this; the model does.
    pub owners: BTreeMap<i64, NodeKey>,
    /// The cluster-wide default write concern set with `setDefaultRWConcern`
    /// (the model is mongod 5.0+: without one, the config's implicit default
    /// may not change).
    pub cluster_write_concern: Option<DefaultW>,
}

/// Something that happens outside the planner.
#[derive(Clone, Debug)]
pub(super) enum Event {
    PodDown {
        cluster: usize,
        slot: MemberSlot,
    },
    PodUp {
        cluster: usize,
        slot: MemberSlot,
    },
    /// A member is elected when there is no primary (`pick` chooses which).
    Elect {
        pick: usize,
    },
    /// The primary changes to another electable member.
    Failover {
        pick: usize,
    },
    /// The current config reaches a majority.
    Commit,
    /// The primary clears `newlyAdded` flags of members that caught up.
    ClearNewlyAdded,
    /// `stepDownSecs` pass: stepped-down members may be elected again and the
    /// controllers forget their step-downs.
    StepDownPeriodEnds,
    /// The control plane changes `spec.members` of a cluster.
    SetDesired {
        cluster: usize,
        desired: u32,
    },
    /// The control plane changes `spec.arbiter` of a cluster.
    SetArbiter {
        cluster: usize,
        wanted: bool,
    },
    /// A cluster's `spec.replicaSetSettings` changes (in that cluster only).
    SetElectionTimeout {
        cluster: usize,
        millis: i64,
    },
    /// A member Service is recreated with another nodePort (and hostconf
    /// with it); the pod keeps running and is reached at the new port.
    MoveNodePort {
        cluster: usize,
        slot: MemberSlot,
        port: u16,
    },
    /// A cluster's VIP changes (its VIP label, and hostconf with it).
    MoveVip {
        cluster: usize,
    },
    /// A member's PVC is lost: it comes back empty (`world_volumes`).
    LoseVolume {
        cluster: usize,
        slot: MemberSlot,
    },
    /// A cluster's object is recreated: its status and the controller's
    /// memory are lost; StatefulSets and PVCs stay.
    Recreate {
        cluster: usize,
    },
}

#[derive(Clone, Debug)]
pub(super) struct World {
    pub clusters: Vec<Cluster>,
    pub nodes: BTreeMap<NodeKey, Node>,
    pub set: Option<LiveSet>,
    pub initiations: u32,
    pub pvc_policy: PvcPolicy,
    /// Members that stepped down and may not be elected for `stepDownSecs`.
    pub frozen: BTreeSet<MemberAddress>,
    /// Entries a reconfig handed to another node than the one they stood for.
    pub handed_over: Vec<String>,
}

impl World {
    /// Clusters with these member counts; the one with most members initiates
    /// and hosts the arbiter when `arbiter`.
    pub fn new(desired: &[u32], arbiter: bool, pvc_policy: PvcPolicy) -> World {
        let most = desired
            .iter()
            .enumerate()
            .max_by_key(|&(i, d)| (*d, std::cmp::Reverse(i)))
            .map_or(0, |(i, _)| i);
        let clusters = desired
            .iter()
            .enumerate()
            .map(|(i, &d)| Cluster {
                vip: format!("10.0.0.{}", i + 1),
                node_ports: BTreeMap::new(),
                desired: d,
                arbiter: arbiter && i == most,
                rs_init: i == most,
                election_timeout_millis: ReplicaSetSettings::default().election_timeout_millis,
                known_replica_set_id: None,
                stepped_down: None,
            })
            .collect();
        let mut world = World {
            clusters,
            nodes: BTreeMap::new(),
            set: None,
            initiations: 0,
            pvc_policy,
            frozen: BTreeSet::new(),
            handed_over: Vec::new(),
        };
        for c in 0..desired.len() {
            world.build_stateful_sets(c);
        }
        world
    }

    /// A member's address now: its cluster's VIP and its Service's nodePort.
    pub fn address(&self, cluster: usize, slot: MemberSlot) -> MemberAddress {
        let here = &self.clusters[cluster];
        MemberAddress {
            host: here.vip.clone(),
            port: here.node_ports.get(&slot).copied().unwrap_or(port_of(slot)),
        }
    }

    /// The node a host reaches now, if any.
    pub fn node_at(&self, host: &MemberAddress) -> Option<NodeKey> {
        self.nodes
            .keys()
            .copied()
            .find(|&(cluster, slot)| &self.address(cluster, slot) == host)
    }

    /// The slots a cluster wants.
    fn wanted_slots(&self, cluster: usize) -> Vec<MemberSlot> {
        let here = &self.clusters[cluster];
        let mut slots: Vec<MemberSlot> = (0..here.desired).map(MemberSlot::Data).collect();
        if here.arbiter {
            slots.push(MemberSlot::Arbiter);
        }
        slots
    }

    /// Every member the control plane wants, at its address now, as hostconf
    /// lists them.
    pub fn desired_addresses(&self) -> Vec<MemberAddress> {
        let mut all: Vec<MemberAddress> = (0..self.clusters.len())
            .flat_map(|c| self.wanted_slots(c).into_iter().map(move |slot| (c, slot)))
            .map(|(c, slot)| self.address(c, slot))
            .collect();
        all.sort();
        all
    }

    /// The desired-object builder: a StatefulSet (and a starting pod) for every
    /// wanted member; a recreated one finds its retained PVC.
    pub fn build_stateful_sets(&mut self, cluster: usize) {
        for slot in self.wanted_slots(cluster) {
            let node = self.nodes.entry((cluster, slot)).or_insert(Node {
                stateful_set: false,
                pod_up: false,
                holds: None,
                recorded: None,
                emptied: false,
            });
            if !node.stateful_set {
                node.stateful_set = true;
                node.pod_up = true;
            }
        }
    }

    fn running(&self, host: &MemberAddress) -> bool {
        self.node_at(host)
            .and_then(|key| self.nodes.get(&key))
            .is_some_and(Node::running)
    }

    /// Voters (not `newlyAdded`) that run, and how many make a majority.
    fn running_voters(&self, config: &ReplicaSetConfig) -> (usize, usize) {
        let voting: Vec<&ConfigMember> = config.members.iter().filter(|m| votes_now(m)).collect();
        let running = voting.iter().filter(|m| self.running(&m.host)).count();
        (running, voting.len() / 2 + 1)
    }

    fn electable_running(&self, config: &ReplicaSetConfig) -> Vec<MemberAddress> {
        config
            .members
            .iter()
            .filter(|m| electable(m) && !m.newly_added && self.running(&m.host))
            .map(|m| m.host.clone())
            .collect()
    }

    /// Who can win an election now (not frozen by a step-down).
    fn candidates(&self, config: &ReplicaSetConfig) -> Vec<MemberAddress> {
        self.electable_running(config)
            .into_iter()
            .filter(|h| !self.frozen.contains(h) && !self.emptied(h))
            .collect()
    }

    /// What the controller of `cluster` would gather.
    pub fn input_for(&self, cluster: usize) -> PlanInput {
        let here = &self.clusters[cluster];
        let owns_an_entry = |key: &NodeKey| {
            self.set
                .as_ref()
                .is_some_and(|s| s.owners.values().any(|k| k == key))
        };
        let local_members = self
            .nodes
            .iter()
            .filter(|((c, _), _)| *c == cluster)
            .filter_map(|(&(c, slot), node)| {
                let wanted = match slot {
                    MemberSlot::Data(index) => index < here.desired,
                    MemberSlot::Arbiter => here.arbiter,
                };
                let relevant = wanted || node.stateful_set || owns_an_entry(&(c, slot));
                let address = self.address(c, slot);
                relevant.then(|| LocalMemberFacts {
                    slot,
                    probe: node.running().then(|| self.probe(&address, node)),
                    address: Some(address),
                    stateful_set_exists: node.stateful_set,
                    stateful_set_deleting: false,
                    pod_running: node.running(),
                    recorded: node.recorded.clone(),
                })
            })
            .collect();
        let desired = self.desired_addresses();
        let hostconf = HostConf {
            members: desired
                .iter()
                .map(|a| HostConfMember {
                    address: a.clone(),
                    arbiter: self
                        .node_at(a)
                        .is_some_and(|(_, slot)| slot == MemberSlot::Arbiter),
                    votes: None,
                    priority: None,
                    hidden: false,
                    tags: BTreeMap::new(),
                })
                .collect(),
        };
        let remote_probes = desired
            .iter()
            .filter(|a| a.host != here.vip)
            .filter_map(|a| {
                let node = self
                    .node_at(a)
                    .and_then(|key| self.nodes.get(&key))
                    .filter(|n| n.running())?;
                Some((a.clone(), self.probe(a, node)))
            })
            .collect();
        PlanInput {
            local_vip: here.vip.clone(),
            set_name: SET.to_owned(),
            desired_members: here.desired,
            arbiter_wanted: here.arbiter,
            rs_init: here.rs_init,
            settings: ReplicaSetSettings {
                election_timeout_millis: here.election_timeout_millis,
                ..ReplicaSetSettings::default()
            },
            pvc_policy: self.pvc_policy,
            known_replica_set_id: here.known_replica_set_id.clone(),
            hostconf,
            local_members,
            remote_probes,
            observed: self.observe(),
            stepped_down_recently: here.stepped_down.clone(),
            step_down_held: None,
            // The model has no disaster recovery: nothing was ever dropped.
            dropped_members: DroppedMembers::Read(Vec::new()),
            forgotten_cluster: None,
        }
    }

    fn probe(&self, host: &MemberAddress, node: &Node) -> MemberProbe {
        let member = self.set.as_ref().and_then(|s| {
            s.config
                .members
                .iter()
                .find(|m| &m.host == host)
                .map(|m| (s, m))
        });
        let state = match member {
            Some((s, _)) if s.primary.as_ref() == Some(host) => Some(MemberState::Primary),
            Some((_, m)) if m.arbiter_only => Some(MemberState::Arbiter),
            Some((_, m)) if m.newly_added || node.emptied => Some(MemberState::Startup2),
            Some(_) => Some(MemberState::Secondary),
            None => node.holds.as_ref().map(|_| MemberState::Removed),
        };
        // The host of the entry it stands for. (mongod forgets it once it
        // installs a config in which it cannot find itself; the model keeps
        // it until its entry changes.)
        let me = self.set.as_ref().and_then(|s| {
            let key = self.node_at(host)?;
            let (id, _) = s.owners.iter().find(|(_, owner)| **owner == key)?;
            s.config
                .members
                .iter()
                .find(|m| m.id == *id)
                .map(|m| m.host.clone())
        });
        MemberProbe {
            has_config: node.holds.is_some(),
            replica_set_id: node.holds.clone(),
            set_name: node.holds.as_ref().map(|_| SET.to_owned()),
            state,
            me,
            too_stale: false,
        }
    }

    fn observe(&self) -> Observed {
        let Some(set) = &self.set else {
            return Observed::Unreachable;
        };
        if !set.config.members.iter().any(|m| self.running(&m.host)) {
            return Observed::Unreachable;
        }
        let members = set
            .config
            .members
            .iter()
            .map(|m| {
                let running = self.running(&m.host);
                let state = if !running {
                    MemberState::Down
                } else if set.primary.as_ref() == Some(&m.host) {
                    MemberState::Primary
                } else if m.arbiter_only {
                    MemberState::Arbiter
                } else if m.newly_added || self.emptied(&m.host) {
                    MemberState::Startup2
                } else {
                    MemberState::Secondary
                };
                let health = member_status(state, running, running.then_some(0));
                (m.host.clone(), health)
            })
            .collect();
        Observed::Configured(ObservedSet {
            config: set.config.clone(),
            primary: set.primary.clone(),
            members,
            config_committed: set.committed && set.primary.is_some(),
            write_concern: match set.cluster_write_concern {
                Some(w) => ClusterWriteConcern::Global { w: w.to_string() },
                None => ClusterWriteConcern::Implicit,
            },
        })
    }

    /// The controller records on its StatefulSets the config entries it found
    /// for its members (the `record` stage).
    pub fn record_entries(&mut self, cluster: usize, entries: Vec<(MemberSlot, RecordedEntry)>) {
        for (slot, entry) in entries {
            if let Some(node) = self.nodes.get_mut(&(cluster, slot)) {
                node.recorded = Some(entry);
            }
        }
    }

    /// The controller records the replicaSetId it saw in status.
    pub fn record_status(&mut self, cluster: usize) {
        if let Some(id) = self
            .set
            .as_ref()
            .and_then(|s| s.config.settings.replica_set_id.clone())
        {
            self.clusters[cluster].known_replica_set_id = Some(id);
        }
    }

    /// Executes a step of `cluster` as mongod and Kubernetes would; `Err` says
    /// why mongod rejected it (nothing changed then).
    pub fn execute(&mut self, cluster: usize, step: &Step) -> Result<(), String> {
        match step {
            Step::Initiate { config, on } => self.initiate(config, on),
            Step::Reconfig { config, .. } => self.reconfig(config),
            Step::StepDown { primary, .. } => {
                let set = self.set.as_ref().ok_or("no replica set")?;
                if set.primary.as_ref() != Some(primary) {
                    return Err(format!("10107: {primary} is not primary"));
                }
                if !self
                    .electable_running(&set.config)
                    .iter()
                    .any(|h| h != primary)
                {
                    return Err("262: no electable secondary caught up".to_owned());
                }
                // The old primary may not be elected for stepDownSecs; until the
                // next election (an [`Event::Elect`]) the set has no primary.
                self.frozen.insert(primary.clone());
                if let Some(set) = self.set.as_mut() {
                    set.primary = None;
                }
                self.clusters[cluster].stepped_down = Some(primary.clone());
                Ok(())
            }
            Step::DeleteStatefulSet { slot, delete_pvc } => {
                let node = self
                    .nodes
                    .get_mut(&(cluster, *slot))
                    .ok_or("no such StatefulSet")?;
                node.stateful_set = false;
                node.pod_up = false;
                node.recorded = None;
                if *delete_pvc {
                    node.holds = None;
                }
                Ok(())
            }
            Step::SetClusterWriteConcern { primary, w } => {
                let set = self.set.as_mut().ok_or("no replica set")?;
                if set.primary.as_ref() != Some(primary) {
                    return Err(format!("10107: {primary} is not primary"));
                }
                set.cluster_write_concern = Some(*w);
                Ok(())
            }
            Step::ResyncMember { slot, .. } => self.lose_volume(cluster, *slot),
            Step::Wait { .. } | Step::Refuse { .. } | Step::InSync => Ok(()),
        }
    }

    fn initiate(&mut self, config: &ReplicaSetConfig, on: &MemberAddress) -> Result<(), String> {
        if self.set.is_some() {
            return Err("23: already initialized".to_owned());
        }
        let problems = config_rule_breaks(config);
        if config.version != 1 || config.set_name != SET || !problems.is_empty() {
            return Err(format!("93: {problems:?}"));
        }
        let receiver = config.members.iter().find(|m| &m.host == on);
        if !receiver.is_some_and(electable) {
            return Err(format!("93: {on} is not electable in the initial config"));
        }
        let mut owners = BTreeMap::new();
        for m in &config.members {
            let key = self.node_at(&m.host);
            let node = key.and_then(|k| self.nodes.get(&k)).filter(|n| n.running());
            match (key, node) {
                (Some(key), Some(node)) if node.holds.is_none() => {
                    owners.insert(m.id, key);
                }
                _ => return Err(format!("74: {} cannot join", m.host)),
            }
        }
        self.initiations += 1;
        let id = format!("rsid-{}", self.initiations);
        let mut config = config.clone();
        config.settings.replica_set_id = Some(id.clone());
        for key in owners.values() {
            if let Some(node) = self.nodes.get_mut(key) {
                node.holds = Some(id.clone());
            }
        }
        let primary = self.electable_running(&config).into_iter().next();
        self.set = Some(LiveSet {
            config,
            primary,
            committed: true,
            owners,
            cluster_write_concern: None,
        });
        Ok(())
    }

    fn reconfig(&mut self, new: &ReplicaSetConfig) -> Result<(), String> {
        let set = self.set.as_ref().ok_or("94: not yet initialized")?;
        let primary = set.primary.clone().ok_or("10107: no primary")?;
        if !set.committed {
            return Err("308: current config not committed".to_owned());
        }
        let problems = reconfig_rule_breaks(&set.config, new);
        if !problems.is_empty() {
            return Err(format!("103: {problems:?}"));
        }
        match new.members.iter().find(|m| m.host == primary) {
            None => return Err("74: the primary is not in the new config".to_owned()),
            Some(m) if !electable(m) => {
                return Err("104: the primary would not be electable".to_owned())
            }
            Some(_) => {}
        }
        let mut installed = new.clone();
        for m in installed.members.iter_mut() {
            // By `_id`, as mongod: a member whose host changed is not new.
            // Never an arbiter (`processReplSetReconfig`).
            m.newly_added |=
                m.votes > 0 && !m.arbiter_only && !set.config.members.iter().any(|o| o.id == m.id);
        }
        if set.cluster_write_concern.is_none()
            && implicit_majority(&set.config) != implicit_majority(&installed)
        {
            return Err("103: the implicit default write concern would change".to_owned());
        }
        let (running, needed) = self.running_voters(&installed);
        if running < needed {
            return Err(format!("74: {running} voters answer, {needed} needed"));
        }
        // Who each entry stands for now: a kept entry keeps its node (a new
        // host that reaches another node hands the entry over, which mongod
        // allows and the model reports); a new entry is the node its host
        // reaches.
        let mut owners = BTreeMap::new();
        for m in &installed.members {
            let reached = self.node_at(&m.host);
            let kept = set.config.members.iter().find(|o| o.id == m.id);
            let owner = match (kept, set.owners.get(&m.id)) {
                (Some(old), Some(&owner)) => {
                    // (A host that reaches nobody, e.g. after a late step,
                    // still stands for its node; the planner moves it on.)
                    if old.host != m.host && reached.is_some_and(|r| r != owner) {
                        self.handed_over.push(format!(
                            "_id {} moved from {} to {}, which is not the same member",
                            m.id, old.host, m.host
                        ));
                    }
                    Some(owner)
                }
                _ => reached,
            };
            if let Some(owner) = owner {
                owners.insert(m.id, owner);
            }
        }
        let id = set.config.settings.replica_set_id.clone();
        for key in owners.values() {
            if let Some(node) = self.nodes.get_mut(key) {
                node.holds = id.clone();
            }
        }
        let cluster_write_concern = set.cluster_write_concern;
        self.set = Some(LiveSet {
            config: installed,
            primary: Some(primary),
            committed: false,
            owners,
            cluster_write_concern,
        });
        Ok(())
    }

    pub fn apply_event(&mut self, event: &Event) {
        match *event {
            Event::PodDown { cluster, slot } => {
                if let Some(node) = self.nodes.get_mut(&(cluster, slot)) {
                    node.pod_up = false;
                }
            }
            Event::PodUp { cluster, slot } => {
                if let Some(node) = self.nodes.get_mut(&(cluster, slot)) {
                    node.pod_up = true;
                }
            }
            Event::Elect { pick } => {
                if let Some(set) = &self.set {
                    let (running, needed) = self.running_voters(&set.config);
                    let candidates = self.candidates(&set.config);
                    if set.primary.is_none() && running >= needed && !candidates.is_empty() {
                        let chosen = candidates[pick % candidates.len()].clone();
                        if let Some(set) = self.set.as_mut() {
                            set.primary = Some(chosen);
                        }
                    }
                }
            }
            Event::Failover { pick } => {
                if let Some(set) = &self.set {
                    let candidates: Vec<MemberAddress> = self
                        .candidates(&set.config)
                        .into_iter()
                        .filter(|h| Some(h) != set.primary.as_ref())
                        .collect();
                    if set.primary.is_some() && !candidates.is_empty() {
                        let chosen = candidates[pick % candidates.len()].clone();
                        if let Some(set) = self.set.as_mut() {
                            set.primary = Some(chosen);
                        }
                    }
                }
            }
            Event::Commit => {
                if let Some(set) = &self.set {
                    let (running, needed) = self.running_voters(&set.config);
                    let ok = set.primary.is_some() && running >= needed;
                    if let Some(set) = self.set.as_mut() {
                        set.committed |= ok;
                    }
                }
            }
            Event::ClearNewlyAdded => {
                self.finish_resyncs();
                let caught_up: Vec<MemberAddress> = match &self.set {
                    Some(set) if set.primary.is_some() && set.committed => set
                        .config
                        .members
                        .iter()
                        .filter(|m| m.newly_added && self.running(&m.host))
                        .map(|m| m.host.clone())
                        .collect(),
                    _ => Vec::new(),
                };
                if let (Some(set), false) = (self.set.as_mut(), caught_up.is_empty()) {
                    let mut cleared = set.config.clone();
                    for m in cleared.members.iter_mut() {
                        if caught_up.contains(&m.host) {
                            m.newly_added = false;
                        }
                    }
                    // mongod's own reconfig meets the write-concern rule too;
                    // refused, it is tried again on the next heartbeat.
                    if set.cluster_write_concern.is_some()
                        || implicit_majority(&set.config) == implicit_majority(&cleared)
                    {
                        set.config = cleared;
                        set.config.version += 1;
                        set.committed = false;
                    }
                }
            }
            Event::LoseVolume { cluster, slot } => drop(self.lose_volume(cluster, slot)),
            Event::StepDownPeriodEnds => {
                self.frozen.clear();
                for cluster in &mut self.clusters {
                    cluster.stepped_down = None;
                }
            }
            Event::SetDesired { cluster, desired } => {
                self.clusters[cluster].desired = desired;
                self.build_stateful_sets(cluster);
            }
            Event::SetArbiter { cluster, wanted } => {
                self.clusters[cluster].arbiter = wanted;
                self.build_stateful_sets(cluster);
            }
            Event::SetElectionTimeout { cluster, millis } => {
                self.clusters[cluster].election_timeout_millis = millis;
            }
            Event::MoveNodePort {
                cluster,
                slot,
                port,
            } => {
                let taken = (self.clusters[cluster].node_ports.values())
                    .chain(
                        self.set
                            .iter()
                            .flat_map(|s| s.config.members.iter().map(|m| &m.host.port)),
                    )
                    .any(|&p| p == port);
                // kube-proxy gives a nodePort to one Service at a time; a port
                // the config still names is left alone too (its old member
                // would be reached at someone else's pod).
                if !taken && port != port_of(slot) {
                    self.clusters[cluster].node_ports.insert(slot, port);
                }
            }
            Event::MoveVip { cluster } => {
                let here = &mut self.clusters[cluster];
                here.vip = if here.vip.starts_with("10.0.0.") {
                    format!("10.0.9.{}", cluster + 1)
                } else {
                    format!("10.0.0.{}", cluster + 1)
                };
            }
            Event::Recreate { cluster } => {
                let here = &mut self.clusters[cluster];
                here.known_replica_set_id = None;
                here.stepped_down = None;
            }
        }
        self.lose_primary_without_majority();
    }

    /// A primary that is down, or cannot see a majority of voters, steps down.
    fn lose_primary_without_majority(&mut self) {
        let keep = match &self.set {
            Some(set) => {
                let (running, needed) = self.running_voters(&set.config);
                set.primary.as_ref().is_some_and(|p| self.running(p)) && running >= needed
            }
            None => return,
        };
        if let (Some(set), false) = (self.set.as_mut(), keep) {
            set.primary = None;
        }
    }

    /// Whether a majority of the config's voters is reached at its hosts
    /// (whether their pods run or not).
    pub fn voters_reachable(&self) -> bool {
        let Some(set) = &self.set else {
            return true;
        };
        let voters: Vec<&ConfigMember> =
            set.config.members.iter().filter(|m| votes_now(m)).collect();
        let reached = voters
            .iter()
            .filter(|m| self.node_at(&m.host).is_some())
            .count();
        reached > voters.len() / 2
    }

    /// Whether a voter that can be elected (priority above 0) is reached at
    /// its host: when none is, no primary is elected until addresses move back.
    pub fn electable_voter_reachable(&self) -> bool {
        self.set.as_ref().is_none_or(|set| {
            set.config
                .members
                .iter()
                .any(|m| votes_now(m) && m.priority > 0.0 && self.node_at(&m.host).is_some())
        })
    }

    /// Whether a `newlyAdded` entry's host reaches nobody.
    pub fn newly_added_unreachable(&self) -> bool {
        self.set.as_ref().is_some_and(|s| {
            s.config
                .members
                .iter()
                .any(|m| m.newly_added && self.node_at(&m.host).is_none())
        })
    }

    /// Every VIP and nodePort back to the host of the entry its member
    /// stands for; a cluster's VIP also back to that of an entry nobody
    /// stands for (added where nobody answered), which names its cluster by
    /// its last octet.
    pub fn restore_addresses(&mut self) {
        let Some(set) = &self.set else {
            return;
        };
        for entry in set
            .config
            .members
            .iter()
            .filter(|m| !set.owners.contains_key(&m.id))
        {
            let cluster = entry
                .host
                .host
                .rsplit('.')
                .next()
                .and_then(|octet| octet.parse::<usize>().ok())
                .and_then(|n| n.checked_sub(1));
            if let Some(here) = cluster.and_then(|c| self.clusters.get_mut(c)) {
                here.vip = entry.host.host.clone();
            }
        }
        for (id, &(cluster, slot)) in &set.owners {
            let Some(entry) = set.config.members.iter().find(|m| m.id == *id) else {
                continue;
            };
            let here = &mut self.clusters[cluster];
            here.vip = entry.host.host.clone();
            here.node_ports.insert(slot, entry.host.port);
        }
    }

    /// What must hold in the model at all times.
    pub fn check_invariants(&self) -> Result<(), String> {
        if self.initiations > 1 {
            return Err("the replica set was initiated twice".to_owned());
        }
        let Some(set) = &self.set else {
            return Ok(());
        };
        let problems = config_rule_breaks(&set.config);
        if !problems.is_empty() {
            return Err(format!("the live config is invalid: {problems:?}"));
        }
        if let Some(handed_over) = self.handed_over.first() {
            return Err(handed_over.clone());
        }
        for m in &set.config.members {
            let Some(owner) = set.owners.get(&m.id) else {
                continue;
            };
            let node = self.nodes.get(owner);
            if !node.is_some_and(|n| n.stateful_set) {
                return Err(format!("{} is in the config without a StatefulSet", m.host));
            }
            if node.and_then(|n| n.holds.as_ref()) != set.config.settings.replica_set_id.as_ref() {
                return Err(format!("{} is in the config but lost its data", m.host));
            }
        }
        // `one-entry-per-member`: one mongod never stands behind two entries.
        let mut seen = BTreeSet::new();
        for (id, owner) in &set.owners {
            if !seen.insert(owner) {
                return Err(format!("{owner:?} has a second entry, _id {id}"));
            }
        }
        if let Some(p) = &set.primary {
            if !lists(&set.config, p) {
                return Err(format!("primary {p} is not in the config"));
            }
        }
        Ok(())
    }

    /// Lets the replica set settle: election, commit, `newlyAdded` cleared.
    pub fn settle(&mut self) {
        self.apply_event(&Event::Elect { pick: 0 });
        self.apply_event(&Event::Commit);
        self.apply_event(&Event::ClearNewlyAdded);
        self.apply_event(&Event::Commit);
    }
}
