//! Stage `observe`, its pure half: what a pass observes of the replica set
//! (what each member answered, the set read through its seeds, the members
//! disaster recoveries dropped), which members it asks, and through which
//! seeds it reads the set.
//!
//! The MongoDB I/O half (`controller::observe`) only carries out the questions
//! decided here, so whom to ask can be tested without a mongod.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::MongoDB;
use crate::hostconf::MemberAddress;
use crate::member::{MemberSlot, Wanted};
use crate::replset::{ClusterWriteConcern, MemberState, MemberStatus, ReplicaSetConfig};
use crate::validate::Validated;

/// The members forced out of the set by disaster recoveries
/// ([`crate::recovery`]), as recorded in the set.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum DroppedMembers {
    /// Not read: no local member needed it.
    #[default]
    NotRead,
    /// They could not be read (no primary, or it did not answer).
    Unreadable,
    /// As read from the set.
    Read(Vec<DroppedMember>),
}

/// A member a disaster recovery dropped, or removed with its cluster when
/// an SRE asked to forget that cluster.
#[derive(Clone, Debug, PartialEq)]
pub struct DroppedMember {
    /// Its host in the config the recovery or the forgetting started from.
    pub host: MemberAddress,
    /// Which recovery or forgetting: where, when and why it was asked for.
    pub recovery: String,
    /// Removed with its cluster forgotten on request, not by a recovery.
    pub forgotten: bool,
}

/// What a member answered when asked directly about its replica-set state.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberProbe {
    /// Whether it holds a replica-set config (a REMOVED member does; code 94
    /// NotYetInitialized means it does not).
    pub has_config: bool,
    /// The `replicaSetId` of the config it holds, when it could tell.
    pub replica_set_id: Option<String>,
    /// The replica-set name it runs with, when it could tell.
    pub set_name: Option<String>,
    /// Its own replication state, when it could tell.
    pub state: Option<MemberState>,
    /// The host it goes by in its config (`hello`'s `me`), when it found
    /// itself there: mongod keeps that entry until it installs a new config,
    /// even after its address changed.
    pub me: Option<MemberAddress>,
    /// It reports itself too stale to catch up (`replSetGetStatus`'s
    /// `tooStale`): every sync source's oplog starts after its last optime, and
    /// only a resync from scratch brings it back.
    pub too_stale: bool,
}

/// The replica set as observed through the seed list.
// One value per reconcile: boxing the config would only add noise.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq)]
pub enum Observed {
    /// No member answered with a config. Whether a config exists anywhere is
    /// decided from the probes, never assumed from this.
    Unreachable,
    /// A member answered with the set's status and config.
    Configured(ObservedSet),
}

/// The replica set's config and status.
#[derive(Clone, Debug, PartialEq)]
pub struct ObservedSet {
    /// The current config, read from the primary when there is one, its
    /// `newlyAdded` members marked as far as production mongod shows them
    /// (`mongo::config_doc::mark_newly_added`).
    pub config: ReplicaSetConfig,
    /// The current primary.
    pub primary: Option<MemberAddress>,
    /// `replSetGetStatus` per member.
    pub members: BTreeMap<MemberAddress, MemberStatus>,
    /// Whether the primary reports the current config majority-committed. Must
    /// be `false` when there is no primary to ask.
    pub config_committed: bool,
    /// The default write concern `getDefaultRWConcern` reported.
    pub write_concern: ClusterWriteConcern,
}

impl ObservedSet {
    /// Whether a member other than `primary` could take over from it now: it
    /// is electable (priority > 0, voting, not hidden, not an arbiter, not
    /// newly added), a healthy SECONDARY, and `stays` (it is not leaving).
    /// mongod's step-down waits for such a member to catch up and fails with
    /// 262 without one, refusing writes meanwhile: a step-down is asked only
    /// when one exists.
    pub fn has_electable_successor(
        &self,
        primary: &MemberAddress,
        stays: impl Fn(&MemberAddress) -> bool,
    ) -> bool {
        self.successor_lags(primary)
            .into_iter()
            .any(|(host, _)| stays(host))
    }

    /// The members mongod may hand over to when `primary` steps down (healthy
    /// electable SECONDARY members, not `newlyAdded`) and how far behind the
    /// primary each is, the closest first: the one figure both the
    /// `StepDownFailed` Event and a held step-down's condition name.
    pub fn successor_lags(&self, primary: &MemberAddress) -> Vec<(&MemberAddress, Option<i64>)> {
        let mut lags: Vec<(&MemberAddress, Option<i64>)> = self
            .config
            .members
            .iter()
            .filter(|m| &m.host != primary && m.is_electable() && !m.newly_added)
            .filter_map(|m| {
                let status = self.members.get(&m.host)?;
                let candidate = status.healthy && status.state == MemberState::Secondary;
                candidate.then_some((&m.host, status.lag_secs))
            })
            .collect();
        lags.sort_by_key(|(host, lag)| (lag.is_none(), *lag, *host));
        lags
    }
}

/// The local slots a pass looks at: wanted, or still holding a StatefulSet or
/// a propagated Service.
pub fn local_slots(validated: &Validated, wanted: Wanted) -> BTreeSet<MemberSlot> {
    let mut slots: BTreeSet<MemberSlot> = wanted.slots().collect();
    slots.extend(validated.stateful_sets.keys().copied());
    slots.extend(validated.services.keys().copied());
    slots
}

/// A member to ask directly, and whether it is the arbiter: an arbiter holds
/// no users (its pod gets no root user, and it never applies the oplog that
/// carries them), so it is asked `hello` alone, without credentials.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct MemberToAsk {
    /// Its `VIP:NodePort`.
    pub address: MemberAddress,
    /// Its slot is the arbiter's, or hostconf lists it under `arbiters`.
    pub arbiter: bool,
}

/// The local members to ask directly: those whose pod is Ready, so that
/// their Service routes to them (a member that cannot answer would only cost
/// a server-selection timeout; its pod's Ready brings the next pass).
pub fn local_members_to_ask(validated: &Validated, wanted: Wanted) -> BTreeSet<MemberToAsk> {
    local_slots(validated, wanted)
        .into_iter()
        .filter(|slot| validated.pod_ready(*slot))
        .filter_map(|slot| {
            Some(MemberToAsk {
                address: validated.address(slot)?,
                arbiter: slot == MemberSlot::Arbiter,
            })
        })
        .collect()
}

/// The members of other clusters to ask directly: hostconf's, only while there
/// is no evidence of a set yet — no recorded `replicaSetId` and no local member
/// holding a config — because only the initiate decision and finding an
/// existing set need them.
pub fn remote_members_to_ask(
    validated: &Validated,
    known_replica_set_id: Option<&str>,
    local_probes: &BTreeMap<MemberAddress, MemberProbe>,
) -> Vec<MemberToAsk> {
    if known_replica_set_id.is_some() || local_probes.values().any(|p| p.has_config) {
        return Vec::new();
    }
    validated
        .hostconf
        .members
        .iter()
        .filter(|m| !local_probes.contains_key(&m.address) && m.address.host != validated.vip)
        .map(|m| MemberToAsk {
            address: m.address.clone(),
            arbiter: m.arbiter,
        })
        .collect()
}

/// The seed list to read the set through — members that answered with a
/// config, then hostconf's — or `None` when nothing says a set exists.
pub fn seeds(
    validated: &Validated,
    known_replica_set_id: Option<&str>,
    probes: &BTreeMap<MemberAddress, MemberProbe>,
) -> Option<Vec<MemberAddress>> {
    let with_config = probes
        .iter()
        .filter(|(_, p)| p.has_config)
        .map(|(a, _)| a.clone());
    let mut seeds: BTreeSet<MemberAddress> = with_config.collect();
    if seeds.is_empty() && known_replica_set_id.is_none() {
        return None;
    }
    seeds.extend(validated.hostconf.members.iter().map(|m| m.address.clone()));
    Some(seeds.into_iter().collect())
}

/// The `replicaSetId` recorded in status: once recorded, the set exists.
pub fn known_replica_set_id(mongodb: &MongoDB) -> Option<&str> {
    mongodb
        .status
        .as_ref()
        .and_then(|s| s.replica_set_id.as_deref())
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! What a pass could have seen in a cluster, shared by the tests of the
    //! stages that read it.

    use crate::api::TlsMode;
    use std::collections::BTreeMap;

    use crate::hostconf::{HostConf, MemberAddress};
    use crate::member::{MemberSlot, Wanted};
    use crate::observe::MemberProbe;
    use crate::validate::{MemberService, MemberStatefulSetFacts, RootCredentials, Validated};

    pub const VIP: &str = "10.0.0.1";

    pub fn address(host: &str, port: u16) -> MemberAddress {
        MemberAddress {
            host: host.into(),
            port,
        }
    }

    pub fn probe(has_config: bool) -> MemberProbe {
        MemberProbe {
            has_config,
            replica_set_id: has_config.then(|| "id-1".into()),
            set_name: Some("replset-0".into()),
            state: None,
            me: None,
            too_stale: false,
        }
    }

    /// Local members 0 (Service, running), 1 (Service, StatefulSet, pod not
    /// running), 3 (StatefulSet only, recorded host); hostconf lists 0, 1 and
    /// two remote members.
    pub fn validated() -> Validated {
        let service = |port| MemberService {
            selector: BTreeMap::new(),
            node_port: Some(port),
        };
        let data = "host:'10.0.0.1:30001'\nhost:'10.0.0.1:30002'\nhost:'10.0.0.2:30001'\nhost:'10.0.0.3:30001'";
        Validated {
            vip: VIP.into(),
            hostconf: HostConf::from_config_map_data(&BTreeMap::from([(
                "datas".to_string(),
                data.to_string(),
            )]))
            .unwrap(),
            root: RootCredentials {
                username: "root".into(),
                password: "p".into(),
            },
            services: BTreeMap::from([
                (MemberSlot::Data(0), service(30001)),
                (MemberSlot::Data(1), service(30002)),
            ]),
            content_digest: String::new(),
            desired_keyfile: None,
            known_keyfiles: Vec::new(),
            claims: BTreeMap::new(),
            stateful_sets: BTreeMap::from([
                (
                    MemberSlot::Data(0),
                    MemberStatefulSetFacts {
                        recorded_host: None,
                        recorded_entry: None,
                        pod_running: true,
                        pod_ready: true,
                        pod: None,
                        deleting: false,
                        claim_storage: None,
                        tls_mode: TlsMode::Disabled.into(),
                    },
                ),
                (
                    MemberSlot::Data(1),
                    MemberStatefulSetFacts {
                        recorded_host: None,
                        recorded_entry: None,
                        pod_running: false,
                        pod_ready: false,
                        pod: None,
                        deleting: false,
                        claim_storage: None,
                        tls_mode: TlsMode::Disabled.into(),
                    },
                ),
                (
                    MemberSlot::Data(3),
                    MemberStatefulSetFacts {
                        recorded_host: Some(address(VIP, 30004)),
                        recorded_entry: None,
                        pod_running: true,
                        pod_ready: true,
                        pod: None,
                        deleting: false,
                        claim_storage: None,
                        tls_mode: TlsMode::Disabled.into(),
                    },
                ),
            ]),
        }
    }

    pub const TWO: Wanted = Wanted {
        members: 2,
        arbiter: false,
    };
}

#[cfg(test)]
mod tests {
    use super::fixtures::*;
    use super::*;
    use crate::hostconf::HostConf;

    fn data_member(host: &str, port: u16) -> MemberToAsk {
        MemberToAsk {
            address: address(host, port),
            arbiter: false,
        }
    }

    #[test]
    fn only_running_local_members_are_asked() {
        let asked = local_members_to_ask(&validated(), TWO);
        assert_eq!(
            asked,
            BTreeSet::from([data_member(VIP, 30001), data_member(VIP, 30004)])
        );
    }

    #[test]
    fn a_running_member_whose_pod_is_not_ready_is_not_asked() {
        // Its Service routes nothing to it before it is Ready: asking it would
        // only wait out the server-selection timeout, on every pass.
        let mut validated = validated();
        let facts = validated
            .stateful_sets
            .get_mut(&MemberSlot::Data(0))
            .unwrap();
        facts.pod_ready = false;
        let asked = local_members_to_ask(&validated, TWO);
        assert_eq!(asked, BTreeSet::from([data_member(VIP, 30004)]));
    }

    #[test]
    fn arbiters_local_or_remote_are_asked_as_arbiters() {
        let mut validated = validated();
        validated.hostconf = HostConf::from_config_map_data(&BTreeMap::from([
            ("datas".to_string(), "host:'10.0.0.1:30001'".to_string()),
            ("arbiters".to_string(), "host:'10.0.0.2:30009'".to_string()),
        ]))
        .unwrap();
        let remote = remote_members_to_ask(&validated, None, &BTreeMap::new());
        let remote_arbiter = MemberToAsk {
            address: address("10.0.0.2", 30009),
            arbiter: true,
        };
        assert_eq!(remote, vec![remote_arbiter]);

        let mut facts = validated.stateful_sets[&MemberSlot::Data(0)].clone();
        facts.recorded_host = Some(address(VIP, 30009));
        validated.stateful_sets.insert(MemberSlot::Arbiter, facts);
        let wanted = Wanted {
            members: 2,
            arbiter: true,
        };
        let local_arbiter = MemberToAsk {
            address: address(VIP, 30009),
            arbiter: true,
        };
        assert!(local_members_to_ask(&validated, wanted).contains(&local_arbiter));
    }

    #[test]
    fn remote_members_are_asked_only_while_no_set_is_known() {
        let validated = validated();
        let fresh = BTreeMap::from([(address(VIP, 30001), probe(false))]);
        let remote = remote_members_to_ask(&validated, None, &fresh);
        assert_eq!(
            remote,
            vec![
                data_member("10.0.0.2", 30001),
                data_member("10.0.0.3", 30001)
            ]
        );
        assert!(remote_members_to_ask(&validated, Some("id-1"), &fresh).is_empty());
        let configured = BTreeMap::from([(address(VIP, 30001), probe(true))]);
        assert!(remote_members_to_ask(&validated, None, &configured).is_empty());
    }

    #[test]
    fn the_set_is_read_only_with_evidence_of_one() {
        let validated = validated();
        let fresh = BTreeMap::from([(address(VIP, 30001), probe(false))]);
        assert_eq!(seeds(&validated, None, &fresh), None);
        let recorded = seeds(&validated, Some("id-1"), &fresh).unwrap();
        assert_eq!(recorded.len(), 4, "hostconf's members: {recorded:?}");
        let answered = BTreeMap::from([(address(VIP, 30004), probe(true))]);
        let seeds = seeds(&validated, None, &answered).unwrap();
        assert!(
            seeds.contains(&address(VIP, 30004)),
            "a member that answered with a config is a seed"
        );
        assert_eq!(seeds.len(), 5);
    }
}
