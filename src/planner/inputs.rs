//! What the planner looks at ([`PlanInput`]), how it is put together from
//! what a pass observed, and what it tells of each local member: which
//! config entry is the member, and which entries to record on the
//! StatefulSets so that a member is still recognised once its address changed.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::{MongoDB, PvcPolicy, ReplicaSetSettings};
use crate::hostconf::{HostConf, HostConfMember, MemberAddress};
use crate::member::{MemberSlot, RecordedEntry, Wanted};
use crate::observe::{
    known_replica_set_id, local_slots, DroppedMembers, MemberProbe, Observed, ObservedSet,
};
use crate::replset::{cluster_holds_no_majority, ConfigMember, ReplicaSetConfig, MAX_VOTERS};
use crate::validate::Validated;

/// Everything the planner looks at.
#[derive(Clone, Debug, PartialEq)]
pub struct PlanInput {
    /// This cluster's VIP: the host part of every local member's address.
    pub local_vip: String,
    /// The replica-set name (`--replSet`).
    pub set_name: String,
    /// `spec.members`: how many data members this cluster hosts (indices
    /// `0..desired_members`).
    pub desired_members: u32,
    /// `spec.arbiter`: whether this cluster hosts the arbiter.
    pub arbiter_wanted: bool,
    /// `spec.rsInit`: whether this cluster may initiate the set.
    pub rs_init: bool,
    /// The replica-set settings the spec asks for.
    pub settings: ReplicaSetSettings,
    /// What happens to the PVC of a member that left the set.
    pub pvc_policy: PvcPolicy,
    /// The `replicaSetId` recorded in status. Once recorded the set exists and is
    /// never initiated again.
    pub known_replica_set_id: Option<String>,
    /// Every member of the whole set, as the control plane lists it.
    pub hostconf: HostConf,
    /// One entry per local slot that is wanted, still has a StatefulSet, or is
    /// still in the config.
    pub local_members: Vec<LocalMemberFacts>,
    /// What members of other clusters answered when asked directly (used for
    /// initiate only). A member absent from the map did not answer.
    pub remote_probes: BTreeMap<MemberAddress, MemberProbe>,
    /// The replica set as seen through hostconf's seed list.
    pub observed: Observed,
    /// A member this controller asked to step down and that may still be
    /// handing over (kept by the controller for about `stepDownSecs`).
    pub stepped_down_recently: Option<MemberAddress>,
    /// A primary that refused to step down (no electable secondary caught up)
    /// and whose next try the controller holds back (growing delays).
    pub step_down_held: Option<MemberAddress>,
    /// The members disaster recoveries forced out of the set, as recorded in
    /// it; read only when [`PlanInput::needs_dropped_members`] says so.
    pub dropped_members: DroppedMembers,
    /// The VIP of a lost cluster an SRE asked this cluster to forget, once
    /// its members are recorded in the set as forgotten: they are removed
    /// like unwanted local members (`crate::forget`).
    pub forgotten_cluster: Option<String>,
}

/// What is known about one local member.
#[derive(Clone, Debug, PartialEq)]
pub struct LocalMemberFacts {
    /// Which member.
    pub slot: MemberSlot,
    /// `VIP:nodePort`, from its Service, or as recorded on its StatefulSet once
    /// the Service is gone; `None` when neither tells.
    pub address: Option<MemberAddress>,
    /// Whether its StatefulSet exists.
    pub stateful_set_exists: bool,
    /// Whether its StatefulSet is being deleted (has a `deletionTimestamp`).
    pub stateful_set_deleting: bool,
    /// Whether its pod is running.
    pub pod_running: bool,
    /// What it answered when asked directly at its address (`None`: no answer).
    pub probe: Option<MemberProbe>,
    /// The config entry it was last seen as, recorded on its StatefulSet: how
    /// it is recognised after its address changed (its Service recreated with
    /// another nodePort, or the VIP changed).
    pub recorded: Option<RecordedEntry>,
}

impl PlanInput {
    /// The planner's input, from what the pass observed. `probes`: what each member
    /// asked directly answered (absent: no answer); `set`: the replica set as read
    /// through the seeds; `stepped_down_recently`: a primary this operator asked to
    /// step down and that may still be handing over; `step_down_held`: a primary
    /// that refused to step down and is not asked again yet.
    pub fn from_observation(
        mongodb: &MongoDB,
        validated: &Validated,
        wanted: Wanted,
        probes: &BTreeMap<MemberAddress, MemberProbe>,
        set: Option<ObservedSet>,
        stepped_down_recently: Option<MemberAddress>,
        step_down_held: Option<MemberAddress>,
    ) -> Self {
        let local_members: Vec<LocalMemberFacts> = local_slots(validated, wanted)
            .into_iter()
            .map(|slot| {
                let address = validated.address(slot);
                LocalMemberFacts {
                    slot,
                    probe: address.as_ref().and_then(|a| probes.get(a).cloned()),
                    address,
                    stateful_set_exists: validated.stateful_sets.contains_key(&slot),
                    stateful_set_deleting: validated
                        .stateful_sets
                        .get(&slot)
                        .is_some_and(|s| s.deleting),
                    pod_running: validated.pod_running(slot),
                    recorded: validated
                        .stateful_sets
                        .get(&slot)
                        .and_then(|s| s.recorded_entry.clone()),
                }
            })
            .collect();
        let local_hosts: BTreeSet<&MemberAddress> = local_members
            .iter()
            .filter_map(|m| m.address.as_ref())
            .collect();
        let remote_probes = probes
            .iter()
            .filter(|(address, _)| !local_hosts.contains(address) && address.host != validated.vip)
            .map(|(address, probe)| (address.clone(), probe.clone()))
            .collect();
        Self {
            local_vip: validated.vip.clone(),
            set_name: mongodb.spec.repl_set_name.clone(),
            desired_members: wanted.members,
            arbiter_wanted: wanted.arbiter,
            rs_init: mongodb.spec.rs_init,
            settings: mongodb.spec.replica_set_settings.clone(),
            pvc_policy: mongodb.spec.removed_member_pvc_policy,
            known_replica_set_id: known_replica_set_id(mongodb).map(str::to_string),
            hostconf: validated.hostconf.clone(),
            local_members,
            remote_probes,
            observed: set.map_or(Observed::Unreachable, Observed::Configured),
            stepped_down_recently,
            step_down_held,
            dropped_members: DroppedMembers::NotRead,
            forgotten_cluster: None,
        }
    }

    pub(super) fn wanted(&self) -> Wanted {
        Wanted {
            members: self.desired_members,
            arbiter: self.arbiter_wanted,
        }
    }

    pub(super) fn is_wanted(&self, slot: MemberSlot) -> bool {
        self.wanted().wants(slot)
    }

    /// Wanted slots in addition order: data members by index, then the arbiter.
    pub(super) fn wanted_slots(&self) -> Vec<MemberSlot> {
        self.wanted().slots().collect()
    }

    /// The facts of a slot (the first entry, should the controller send two).
    pub(super) fn facts(&self, slot: MemberSlot) -> Option<&LocalMemberFacts> {
        self.local_members.iter().find(|m| m.slot == slot)
    }

    pub(super) fn is_local(&self, host: &MemberAddress) -> bool {
        let vip = self
            .local_vip
            .strip_prefix('[')
            .and_then(|v| v.strip_suffix(']'))
            .unwrap_or(&self.local_vip);
        host.host == vip
    }

    /// Whether `host` is the config host of a local member this cluster no
    /// longer wants, or of a member of the cluster it forgets.
    pub(super) fn is_leaving(&self, config: &ReplicaSetConfig, host: &MemberAddress) -> bool {
        self.is_forgotten(host)
            || self
                .local_members
                .iter()
                .filter(|m| !self.is_wanted(m.slot))
                .any(|m| m.entry_in(config).is_some_and(|e| &e.host == host))
    }

    /// Whether `host` is at the VIP of the cluster this cluster forgets.
    pub(super) fn is_forgotten(&self, host: &MemberAddress) -> bool {
        self.forgotten_cluster.as_deref() == Some(host.host.as_str())
    }

    /// A config entry at this cluster's VIP that no local member is
    /// (`docs/replica-set-rules.md`, `only-local-members-change`): perhaps one
    /// of them under an address it had before its entry was recorded.
    pub(super) fn unaccounted_local_entry<'c>(
        &self,
        config: &'c ReplicaSetConfig,
    ) -> Option<&'c ConfigMember> {
        let accounted = self.accounted_ids(config);
        config
            .members
            .iter()
            .find(|m| self.is_local(&m.host) && !accounted.contains(&m.id))
    }

    /// The `_id`s of the entries of `config` that local members are.
    pub(super) fn accounted_ids(&self, config: &ReplicaSetConfig) -> BTreeSet<i64> {
        self.local_members
            .iter()
            .filter_map(|m| m.entry_in(config))
            .map(|e| e.id)
            .collect()
    }

    pub(super) fn hint(&self, host: &MemberAddress) -> Option<&HostConfMember> {
        self.hostconf.members.iter().find(|m| &m.address == host)
    }

    /// How many clusters (distinct VIPs) hostconf spans.
    pub(super) fn cluster_count(&self) -> usize {
        self.hostconf
            .members
            .iter()
            .map(|m| &m.address.host)
            .collect::<BTreeSet<_>>()
            .len()
    }

    /// Whether the planner needs [`PlanInput::dropped_members`]: a wanted local
    /// member answers with a config but is not in the set's (it would be
    /// added, unless a disaster recovery dropped it).
    pub fn needs_dropped_members(&self) -> bool {
        let Observed::Configured(set) = &self.observed else {
            return false;
        };
        self.wanted_slots().into_iter().any(|slot| {
            self.facts(slot).is_some_and(|facts| {
                facts.probe.as_ref().is_some_and(|p| p.has_config)
                    && facts.entry_in(&set.config).is_none()
            })
        })
    }

    /// Whether `host` may be given a vote on top of `config`'s voters: fewer
    /// than seven vote (`config-within-mongodb-limits`), and afterwards its
    /// cluster holds no majority (`docs/replica-set-rules.md`,
    /// `no-cluster-gains-a-vote-majority`).
    pub(super) fn vote_is_free(&self, config: &ReplicaSetConfig, host: &MemberAddress) -> bool {
        config.voting_member_count() < MAX_VOTERS
            && cluster_holds_no_majority(
                config.voters().map(|m| &m.host).chain([host]),
                &host.host,
                self.cluster_count(),
            )
    }
}

impl LocalMemberFacts {
    /// The member's answer, only when its address is known (it was asked there).
    pub(super) fn answer(&self) -> Option<(&MemberAddress, &MemberProbe)> {
        self.address.as_ref().zip(self.probe.as_ref())
    }

    /// The entry of `config` that is this member: the one recorded on its
    /// StatefulSet (same `_id` and host) when the config still holds it, else
    /// the one it says it is (`hello`'s `me`), else the one at its address,
    /// else, for the arbiter, the arbiter entry at its VIP (`arbiter_entry_at_vip`).
    /// The address comes late: after two members' addresses were swapped, it
    /// would name the other one's entry.
    pub fn entry_in<'c>(&self, config: &'c ReplicaSetConfig) -> Option<&'c ConfigMember> {
        let recorded = self.recorded.as_ref().and_then(|recorded| {
            config
                .members
                .iter()
                .find(|m| m.id == recorded.id && m.host == recorded.host)
        });
        let says = || {
            let me = self.probe.as_ref()?.me.as_ref()?;
            config.member(me)
        };
        recorded
            .or_else(says)
            .or_else(|| self.address.as_ref().and_then(|a| config.member(a)))
            .or_else(|| self.arbiter_entry_at_vip(config))
    }

    /// For the arbiter slot, the one arbiter entry of `config` at its VIP.
    /// A cluster hosts one arbiter, so that entry is this slot's even when
    /// its nodePort moved before the entry was recorded, and before the set
    /// reached it (it then holds no config and cannot say who it is).
    /// Without this, the entry would be left behind at the old port: the
    /// arbiter added again, or, when no longer wanted, its StatefulSet
    /// deleted and the entry refused as unaccounted forever. An arbiter holds
    /// no data, so taking the entry for another incarnation loses nothing.
    fn arbiter_entry_at_vip<'c>(&self, config: &'c ReplicaSetConfig) -> Option<&'c ConfigMember> {
        let vip = &self.address.as_ref()?.host;
        if self.slot != MemberSlot::Arbiter {
            return None;
        }
        let mut arbiters = config
            .members
            .iter()
            .filter(|m| m.arbiter_only && &m.host.host == vip);
        match (arbiters.next(), arbiters.next()) {
            (Some(only), None) => Some(only),
            _ => None,
        }
    }
}

/// The config entries to record on local members' StatefulSets: for each
/// member whose StatefulSet exists, the entry of the primary's config that is
/// it, when that differs from what is recorded. Read from a primary only (a
/// secondary's config may be older), and only once that config is
/// majority-committed: an uncommitted one can still be rolled back by a
/// failover, and a record taken from it would name a host the set's config
/// never kept.
pub fn entries_to_record(input: &PlanInput) -> Vec<(MemberSlot, RecordedEntry)> {
    let Observed::Configured(set) = &input.observed else {
        return Vec::new();
    };
    if set.primary.is_none() || !set.config_committed {
        return Vec::new();
    }
    input
        .local_members
        .iter()
        .filter(|m| m.stateful_set_exists)
        .filter_map(|m| {
            let entry = m.entry_in(&set.config)?;
            let entry = RecordedEntry {
                id: entry.id,
                host: entry.host.clone(),
            };
            (m.recorded.as_ref() != Some(&entry)).then_some((m.slot, entry))
        })
        .collect()
}
