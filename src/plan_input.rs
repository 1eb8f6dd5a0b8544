//! Stage `observe`, its pure half: which members the pass asks, through which
//! seeds it reads the replica set, and the planner's [`PlanInput`] assembled
//! from the checked input and what the members answered.
//!
//! The MongoDB I/O half (`controller::observe`) only carries out the questions
//! decided here; everything the planner sees is put together by
//! [`plan_input`], so it can be tested without a mongod.

use std::collections::{BTreeMap, BTreeSet};

use crate::api::MongoDB;
use crate::hostconf::MemberAddress;
use crate::planner::Wanted;
use crate::planner::{
    DroppedMembers, LocalMemberFacts, MemberProbe, MemberSlot, Observed, ObservedSet, PlanInput,
    RecordedEntry, Step,
};
use crate::roll::{LocalPod, RollInput, RollState};
use crate::validate::Validated;

/// The local slots a pass looks at: wanted, or still holding a StatefulSet or
/// a propagated Service.
pub fn local_slots(validated: &Validated, wanted: Wanted) -> BTreeSet<MemberSlot> {
    let mut slots: BTreeSet<MemberSlot> = wanted.slots().collect();
    slots.extend(validated.stateful_sets.keys().copied());
    slots.extend(validated.services.keys().copied());
    slots
}

/// The local members to ask directly: those whose pod is Ready, so that
/// their Service routes to them (a member that cannot answer would only cost
/// a server-selection timeout; its pod's Ready brings the next pass).
pub fn local_members_to_ask(validated: &Validated, wanted: Wanted) -> BTreeSet<MemberAddress> {
    local_slots(validated, wanted)
        .into_iter()
        .filter(|slot| validated.pod_ready(*slot))
        .filter_map(|slot| validated.address(slot))
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
) -> Vec<MemberAddress> {
    if known_replica_set_id.is_some() || local_probes.values().any(|p| p.has_config) {
        return Vec::new();
    }
    validated
        .hostconf
        .members
        .iter()
        .map(|m| m.address.clone())
        .filter(|a| !local_probes.contains_key(a) && a.host != validated.vip)
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

/// The planner's input. `probes`: what each member asked directly answered
/// (absent: no answer); `set`: the replica set as read through the seeds;
/// `stepped_down_recently`: a primary this operator asked to step down and
/// that may still be handing over; `step_down_held`: a primary that refused to
/// step down and is not asked again yet.
pub fn plan_input(
    mongodb: &MongoDB,
    validated: &Validated,
    wanted: Wanted,
    probes: &BTreeMap<MemberAddress, MemberProbe>,
    set: Option<ObservedSet>,
    stepped_down_recently: Option<MemberAddress>,
    step_down_held: Option<MemberAddress>,
) -> PlanInput {
    let local_members: Vec<LocalMemberFacts> = local_slots(validated, wanted)
        .into_iter()
        .map(|slot| {
            let address = validated.address(slot);
            LocalMemberFacts {
                slot,
                probe: address.as_ref().and_then(|a| probes.get(a).cloned()),
                address,
                stateful_set_exists: validated.stateful_sets.contains_key(&slot),
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
    PlanInput {
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
    }
}

/// The roll planner's input: the local members the config holds (by their
/// address: the roll runs only once the membership is in sync), their pods and
/// what they answered, the desired revision, and the shared roll state.
pub fn roll_input(
    mongodb: &MongoDB,
    validated: &Validated,
    observed: RollObservation<'_>,
    desired_revision: &str,
    now_millis: i64,
) -> RollInput {
    let RollObservation {
        set,
        probes,
        versions,
        shared,
        fcv,
    } = observed;
    let local = validated
        .stateful_sets
        .iter()
        .filter_map(|(slot, facts)| {
            let address = validated.address(*slot)?;
            set.config.member(&address)?;
            Some(LocalPod {
                slot: *slot,
                state: probes.get(&address).and_then(|p| p.state),
                version: versions.get(&address).cloned(),
                address,
                desired_revision: desired_revision.to_owned(),
                pod: facts.pod.clone(),
            })
        })
        .collect();
    RollInput {
        local_vip: validated.vip.clone(),
        local,
        set: set.clone(),
        lease: shared.lease,
        reports: shared.reports,
        now_millis,
        rs_init: mongodb.spec.rs_init,
        fcv,
        requested_fcv: mongodb.spec.feature_compatibility_version.clone(),
    }
}

/// What the roll stage read for the roll planner.
pub struct RollObservation<'a> {
    /// The set as read from its primary.
    pub set: &'a ObservedSet,
    /// What each member asked directly answered.
    pub probes: &'a BTreeMap<MemberAddress, MemberProbe>,
    /// The server version of each local member that answered.
    pub versions: &'a BTreeMap<MemberAddress, String>,
    /// The lease and the member reports.
    pub shared: RollState,
    /// The featureCompatibilityVersion, when read.
    pub fcv: Option<String>,
}

/// Whether this cluster's members are out of the set, as a leaving pass sees
/// it: the planner has nothing left to do, or no set can be read and no local
/// member holds a config.
pub fn has_left(input: &PlanInput, step: &Step) -> bool {
    let holds_config = |m: &LocalMemberFacts| m.probe.as_ref().is_some_and(|p| p.has_config);
    *step == Step::InSync
        || (input.observed == Observed::Unreachable
            && !input.local_members.iter().any(holds_config))
}

/// The config entries to record on local members' StatefulSets: for each
/// member whose StatefulSet exists, the entry of the primary's config that is
/// it, when that differs from what is recorded. Read from a primary only: a
/// secondary's config may be older.
pub fn entries_to_record(input: &PlanInput) -> Vec<(MemberSlot, RecordedEntry)> {
    let Observed::Configured(set) = &input.observed else {
        return Vec::new();
    };
    if set.primary.is_none() {
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

/// The `replicaSetId` recorded in status: once recorded, the set exists.
pub fn known_replica_set_id(mongodb: &MongoDB) -> Option<&str> {
    mongodb
        .status
        .as_ref()
        .and_then(|s| s.replica_set_id.as_deref())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::MongoDBStatus;
    use crate::build::fixtures;
    use crate::hostconf::HostConf;
    use crate::validate::{MemberService, MemberStatefulSetFacts, RootCredentials};

    const VIP: &str = "10.0.0.1";

    fn address(host: &str, port: u16) -> MemberAddress {
        MemberAddress {
            host: host.into(),
            port,
        }
    }

    fn probe(has_config: bool) -> MemberProbe {
        MemberProbe {
            has_config,
            replica_set_id: has_config.then(|| "id-1".into()),
            set_name: Some("replset-0".into()),
            state: None,
            me: None,
        }
    }

    /// Local members 0 (Service, running), 1 (Service, StatefulSet, pod not
    /// running), 3 (StatefulSet only, recorded host); hostconf lists 0, 1 and
    /// two remote members.
    fn validated() -> Validated {
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
            stateful_sets: BTreeMap::from([
                (
                    MemberSlot::Data(0),
                    MemberStatefulSetFacts {
                        recorded_host: None,
                        recorded_entry: None,
                        pod_running: true,
                        pod_ready: true,
                        pod: None,
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
                    },
                ),
            ]),
        }
    }

    const TWO: Wanted = Wanted {
        members: 2,
        arbiter: false,
    };

    #[test]
    fn only_running_local_members_are_asked() {
        let asked = local_members_to_ask(&validated(), TWO);
        assert_eq!(
            asked,
            BTreeSet::from([address(VIP, 30001), address(VIP, 30004)])
        );
    }

    #[test]
    fn a_running_member_whose_pod_is_not_ready_is_not_asked() {
        // Its Service routes nothing to it before it is Ready: asking it only
        // waited out the server-selection timeout (2 s a pass; with 1,000
        // instances in `lab bench`, a third of the passes' time).
        let mut validated = validated();
        let facts = validated
            .stateful_sets
            .get_mut(&MemberSlot::Data(0))
            .unwrap();
        facts.pod_ready = false;
        let asked = local_members_to_ask(&validated, TWO);
        assert_eq!(asked, BTreeSet::from([address(VIP, 30004)]));
    }

    #[test]
    fn remote_members_are_asked_only_while_no_set_is_known() {
        let validated = validated();
        let fresh = BTreeMap::from([(address(VIP, 30001), probe(false))]);
        let remote = remote_members_to_ask(&validated, None, &fresh);
        assert_eq!(
            remote,
            vec![address("10.0.0.2", 30001), address("10.0.0.3", 30001)]
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

    #[test]
    fn the_plan_input_separates_local_and_remote_answers() {
        let mut mongodb = fixtures::mongodb();
        mongodb.spec.members = 2;
        mongodb.spec.rs_init = true;
        mongodb.status = Some(MongoDBStatus {
            replica_set_id: Some("id-1".into()),
            ..MongoDBStatus::default()
        });
        let probes = BTreeMap::from([
            (address(VIP, 30001), probe(true)),
            (address("10.0.0.2", 30001), probe(true)),
            (address(VIP, 39999), probe(true)),
        ]);
        let input = plan_input(
            &mongodb,
            &validated(),
            TWO,
            &probes,
            None,
            Some(address(VIP, 30001)),
            None,
        );
        assert_eq!(input.local_vip, VIP);
        assert_eq!(
            (input.desired_members, input.arbiter_wanted, input.rs_init),
            (2, false, true)
        );
        assert_eq!(input.known_replica_set_id.as_deref(), Some("id-1"));
        assert_eq!(input.observed, Observed::Unreachable);
        assert_eq!(input.stepped_down_recently, Some(address(VIP, 30001)));
        let slots: Vec<MemberSlot> = input.local_members.iter().map(|m| m.slot).collect();
        assert_eq!(
            slots,
            vec![
                MemberSlot::Data(0),
                MemberSlot::Data(1),
                MemberSlot::Data(3)
            ]
        );
        let first = &input.local_members[0];
        assert!(first.stateful_set_exists && first.pod_running && first.probe.is_some());
        let second = &input.local_members[1];
        assert!(second.stateful_set_exists && !second.pod_running && second.probe.is_none());
        assert_eq!(input.local_members[2].address, Some(address(VIP, 30004)));
        assert_eq!(
            input.remote_probes.keys().cloned().collect::<Vec<_>>(),
            vec![address("10.0.0.2", 30001)],
            "an unknown address with this cluster's VIP is neither local nor remote"
        );
    }

    #[test]
    fn a_leaving_cluster_has_left_when_in_sync_or_when_nothing_holds_a_config() {
        let mongodb = fixtures::mongodb();
        let nothing = Wanted {
            members: 0,
            arbiter: false,
        };
        let fresh = BTreeMap::from([(address(VIP, 30001), probe(false))]);
        let unread = plan_input(&mongodb, &validated(), nothing, &fresh, None, None, None);
        assert!(has_left(
            &unread,
            &Step::Wait {
                reason: crate::planner::WaitReason::NoPrimary
            }
        ));
        let configured = BTreeMap::from([(address(VIP, 30001), probe(true))]);
        let still_member = plan_input(
            &mongodb,
            &validated(),
            nothing,
            &configured,
            None,
            None,
            None,
        );
        assert!(!has_left(
            &still_member,
            &Step::Wait {
                reason: crate::planner::WaitReason::NoPrimary
            }
        ));
        assert!(has_left(&still_member, &Step::InSync));
    }

    #[test]
    fn an_observed_set_is_handed_over_as_configured() {
        let set = ObservedSet {
            config: crate::replset::ReplicaSetConfig {
                set_name: "replset-0".into(),
                version: 1,
                term: None,
                members: vec![],
                settings: crate::replset::ConfigSettings::from_desired(&Default::default(), None),
            },
            primary: None,
            members: BTreeMap::new(),
            config_committed: false,
        };
        let input = plan_input(
            &fixtures::mongodb(),
            &validated(),
            TWO,
            &BTreeMap::new(),
            Some(set.clone()),
            None,
            None,
        );
        assert_eq!(input.observed, Observed::Configured(set));
    }

    #[test]
    fn a_member_entry_is_recorded_once_and_again_when_it_changes() {
        use crate::replset::{ConfigMember, ConfigSettings, ReplicaSetConfig};
        let entry = |id: i64, port: u16| ConfigMember {
            id,
            host: address(VIP, port),
            arbiter_only: false,
            votes: 1,
            priority: 1.0,
            hidden: false,
            tags: BTreeMap::new(),
            newly_added: false,
        };
        let set = |primary: Option<MemberAddress>| ObservedSet {
            config: ReplicaSetConfig {
                set_name: "replset-0".into(),
                version: 3,
                term: Some(1),
                members: vec![entry(0, 30001), entry(4, 30004)],
                settings: ConfigSettings::from_desired(&Default::default(), Some("id-1".into())),
            },
            primary,
            members: BTreeMap::new(),
            config_committed: true,
        };
        let mut validated = validated();
        let input = |validated: &Validated, set: ObservedSet| {
            plan_input(
                &fixtures::mongodb(),
                validated,
                TWO,
                &BTreeMap::new(),
                Some(set),
                None,
                None,
            )
        };
        let with_primary = set(Some(address(VIP, 30001)));
        // Slot 0 is at 30001 in the config; slot 3 (recorded host 30004) too;
        // slot 1 is not in the config.
        let recorded = |id, port| RecordedEntry {
            id,
            host: address(VIP, port),
        };
        assert_eq!(
            entries_to_record(&input(&validated, with_primary.clone())),
            vec![
                (MemberSlot::Data(0), recorded(0, 30001)),
                (MemberSlot::Data(3), recorded(4, 30004)),
            ]
        );
        assert_eq!(
            entries_to_record(&input(&validated, set(None))),
            vec![],
            "nothing is recorded from a config read without a primary"
        );
        for (slot, entry) in [(0, recorded(0, 30001)), (3, recorded(4, 30004))] {
            let facts = validated.stateful_sets.get_mut(&MemberSlot::Data(slot));
            facts.expect("a StatefulSet").recorded_entry = Some(entry);
        }
        assert_eq!(
            entries_to_record(&input(&validated, with_primary.clone())),
            vec![],
            "what is recorded is not written again"
        );
        // Slot 0's Service now has another nodePort: it is still known by its
        // record, which stays until its entry takes the new host.
        validated
            .services
            .get_mut(&MemberSlot::Data(0))
            .expect("a Service")
            .node_port = Some(30101);
        assert_eq!(
            entries_to_record(&input(&validated, with_primary.clone())),
            vec![]
        );
        let mut readdressed = with_primary;
        readdressed.config.members[0].host = address(VIP, 30101);
        assert_eq!(
            entries_to_record(&input(&validated, readdressed)),
            vec![(MemberSlot::Data(0), recorded(0, 30101))]
        );
    }
}
